"""A virtual device: a generated design running in Verilator with no Python in the cycle loop.

Python works in batches: push whole packets to an ingress port, run N cycles (or until the
design has drained), pop whole delivered packets, and read or write registers over AXI4-Lite,
which the C++ harness carries out cycle by cycle while traffic keeps flowing. On the 64-bit
designs this runs millions of cycles a second against tens of thousands under cocotb.

Cycle ``c`` is the ``c``-th rising edge since the design left reset, counted from 0; a beat
"enters" or "leaves" in the cycle whose edge samples its handshake. The parser's ``now``
counter reads the same number, so a packet's ingress timestamp (the ``ts`` metadata field) is
its accept cycle modulo 2**32 (:meth:`VirtualDevice.ingress_cycles`).
"""

import ctypes
import json
from pathlib import Path

from ...driver.packets import Delivered
from ...driver.transport import RegisterAccessError, RegisterBus, Response
from .build import build_library

__all__ = ["VirtualDevice", "Delivered", "DeviceRegisterBus", "DrainTimeout", "BusTimeout"]

#: AXI4-Lite transactions that take longer than this many cycles are abandoned.
BUS_TIMEOUT_CYCLES = 10_000


class DrainTimeout(RuntimeError):
    """``run_until_drained`` hit its cycle cap with packets still queued or in flight."""


class BusTimeout(RuntimeError):
    """A register access got no response within :data:`BUS_TIMEOUT_CYCLES`."""


def _declare(lib):
    p, u64, sz = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
    signatures = {
        "vdev_new": ([], p), "vdev_free": ([p], None), "vdev_reset": ([p, ctypes.c_int], None),
        "vdev_ports": ([], ctypes.c_int), "vdev_data_bits": ([], ctypes.c_int),
        "vdev_user_bits": ([], ctypes.c_int), "vdev_has_axil": ([], ctypes.c_int),
        "vdev_user_words": ([], sz),
        "vdev_push": ([p, ctypes.c_int, ctypes.c_char_p, sz], ctypes.c_int),
        "vdev_push_at": ([p, ctypes.c_int, ctypes.c_char_p, sz, u64], ctypes.c_int),
        "vdev_queued": ([p, ctypes.c_int], sz), "vdev_cycle": ([p], u64),
        "vdev_set_idle": ([p, ctypes.c_int, ctypes.c_double, u64], None),
        "vdev_set_backpressure": ([p, ctypes.c_double, u64], None),
        "vdev_run": ([p, u64], None),
        "vdev_run_until_drained": ([p, u64, u64], ctypes.c_int),
        "vdev_accept_count": ([p, ctypes.c_int], sz),
        "vdev_accept_cycles": ([p, ctypes.c_int, sz, ctypes.POINTER(u64)], None),
        "vdev_out_count": ([p], sz),
        "vdev_out_front": ([p, ctypes.POINTER(u64)], ctypes.c_int),
        "vdev_out_take": ([p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p], None),
        "vdev_axil": ([p, ctypes.c_int, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32, u64,
                       ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32)],
                      ctypes.c_int),
    }
    for name, (args, result) in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, result
    return lib


def _check_probability(what, value):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value < 1:
        raise ValueError(f"{what} must be a probability in [0, 1), not {value!r}")


class VirtualDevice:
    """One instance of a built design. Make it with :meth:`build`; ``close()`` frees it (it is
    also a context manager)."""

    def __init__(self, library_path, ports, regmap=None):
        self.library_path = Path(library_path)
        self.ports = ports
        self.regmap = regmap
        self._lib = _declare(ctypes.CDLL(str(self.library_path)))
        self.port_count = self._lib.vdev_ports()
        self.data_width = self._lib.vdev_data_bits()
        self.user_width = self._lib.vdev_user_bits()
        self.has_registers = bool(self._lib.vdev_has_axil())
        self._user_bytes = self._lib.vdev_user_words() * 4
        self._handle = self._lib.vdev_new()
        self._accepted = [0] * self.port_count
        self._info = (ctypes.c_uint64 * 4)()
        self._rdata, self._resp = ctypes.c_uint32(), ctypes.c_uint32()

    @classmethod
    def build(cls, verilog_path, regmap_path=None, progress=print, top=None, variant=None,
              profile_data=None):
        """Build (or reuse from the cache) the library for ``verilog_path`` and start one
        device. ``regmap_path`` (the design's JSON description) is loaded into ``regmap``.
        ``variant``, ``profile_data``: another kind of build (:data:`.build.VARIANTS`)."""
        library, ports = build_library(verilog_path, top=top, progress=progress,
                                       variant=variant, profile_data=profile_data)
        regmap = json.loads(Path(regmap_path).read_text()) if regmap_path else None
        return cls(library, ports, regmap)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _live(self):
        if self._handle is None:
            raise RuntimeError("the virtual device is closed")
        return self._handle

    def close(self):
        if self._handle is not None:
            self._lib.vdev_free(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _check_port(self, port):
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < self.port_count:
            raise ValueError(f"Port must be an integer in [0, {self.port_count}), not {port!r}")

    # --- traffic -----------------------------------------------------------------------------

    def push(self, port, frame, at=0):
        """Queue ``frame`` (bytes) on ingress ``port``; it goes in one beat a cycle as the
        design takes it, its first beat no earlier than cycle ``at`` (pacing: a packet whose
        cycle has passed goes as soon as the port is free). An empty frame goes in as one beat
        with no byte kept."""
        self._check_port(port)
        if not isinstance(frame, (bytes, bytearray, memoryview)):
            raise TypeError(f"Frame must be bytes, not {type(frame).__name__}")
        if not isinstance(at, int) or isinstance(at, bool) or at < 0:
            raise ValueError(f"Cycle must be a non-negative integer, not {at!r}")
        frame = bytes(frame)
        self._lib.vdev_push_at(self._live(), port, frame, len(frame), at)

    def queued(self, port):
        """Packets on ``port`` not yet completely sent."""
        self._check_port(port)
        return self._lib.vdev_queued(self._live(), port)

    def set_idle(self, port, prob, seed=0):
        """Make ``port``'s source idle (hold ``tvalid`` low before a beat) with probability
        ``prob`` each cycle; 0 sends back to back."""
        self._check_port(port)
        _check_probability("Idle probability", prob)
        self._lib.vdev_set_idle(self._live(), port, float(prob), seed)

    def set_backpressure(self, prob, seed=0):
        """Hold the sink's ``tready`` low with probability ``prob`` each cycle; 0 is always
        ready."""
        _check_probability("Backpressure probability", prob)
        self._lib.vdev_set_backpressure(self._live(), float(prob), seed)

    def run(self, cycles):
        if not isinstance(cycles, int) or cycles < 0:
            raise ValueError(f"Cycles must be a non-negative integer, not {cycles!r}")
        self._lib.vdev_run(self._live(), cycles)

    def run_until_drained(self, quiet=200, max_cycles=10_000_000):
        """Run until every ingress queue is empty, no packet is half delivered and no beat has
        moved for ``quiet`` cycles; return the cycles run. Raises :class:`DrainTimeout` after
        ``max_cycles``."""
        start = self.cycle
        if not self._lib.vdev_run_until_drained(self._live(), quiet, max_cycles):
            queued = [self._lib.vdev_queued(self._handle, p) for p in range(self.port_count)]
            raise DrainTimeout(f"device did not drain within {max_cycles} cycles "
                               f"(packets still queued per port: {queued})")
        return self.cycle - start

    def delivered_waiting(self):
        """Packets delivered and not yet popped."""
        return self._lib.vdev_out_count(self._live())

    @property
    def cycle(self):
        return self._lib.vdev_cycle(self._live())

    def ingress_cycles(self, port=0, start=0):
        """The cycle each packet pushed on ``port`` since the last reset had its first beat
        accepted, in push order (packets not yet started are missing), from the ``start``-th
        on (a caller polling as it goes asks only for the new ones)."""
        self._check_port(port)
        n = self._lib.vdev_accept_count(self._live(), port)
        start = min(max(0, start), n)
        out = (ctypes.c_uint64 * (n - start))()
        self._lib.vdev_accept_cycles(self._handle, port, start, out)
        return list(out)

    def pop(self):
        """Every packet delivered since the last pop, oldest first."""
        handle, lib, info = self._live(), self._lib, self._info
        out = []
        first = ctypes.create_string_buffer(self._user_bytes)
        last = ctypes.create_string_buffer(self._user_bytes)
        nuser = (self.user_width + 7) // 8
        while lib.vdev_out_front(handle, info):
            size = info[0]
            data = ctypes.create_string_buffer(max(size, 1))
            lib.vdev_out_take(handle, data, first, last)
            out.append(Delivered(data.raw[:size], int.from_bytes(first.raw[:nuser], "little"),
                                 int.from_bytes(last.raw[:nuser], "little"),
                                 info[1], info[2], info[3]))
        return out

    def reset(self, cycles=4):
        """Hold ``rst`` for ``cycles`` cycles; clear every queue and the cycle count."""
        self._lib.vdev_reset(self._live(), cycles)

    # --- registers ---------------------------------------------------------------------------

    def access(self, write, address, value=0, strobe=0b1111):
        """One AXI4-Lite transaction; returns ``(read data, Response)`` without raising on an
        error response."""
        if not self.has_registers:
            raise RuntimeError(f"design {self.ports.top} has no s_axil register port")
        if self._lib.vdev_axil(self._live(), int(bool(write)), address, value, strobe,
                               BUS_TIMEOUT_CYCLES, ctypes.byref(self._rdata),
                               ctypes.byref(self._resp)):
            kind = "write" if write else "read"
            raise BusTimeout(f"register {kind} at {address:#010x} got no response within "
                             f"{BUS_TIMEOUT_CYCLES} cycles")
        return self._rdata.value, Response(self._resp.value)

    def read32(self, address):
        value, response = self.access(False, address)
        if response != Response.OKAY:
            raise RegisterAccessError(address, response, "read")
        return value

    def write32(self, address, value, strobe=0b1111):
        _, response = self.access(True, address, value, strobe)
        if response != Response.OKAY:
            raise RegisterAccessError(address, response, "write")

    def register_bus(self):
        return DeviceRegisterBus(self)


class DeviceRegisterBus(RegisterBus):
    """The driver's :class:`~supernic.driver.transport.RegisterBus` over a virtual device, so
    discovery and ``read_register``/``write_register`` run on it unchanged. Each access runs the
    device until the transaction completes (no other coroutine runs meanwhile)."""

    def __init__(self, device):
        if not isinstance(device, VirtualDevice):
            raise TypeError(f"Device must be a VirtualDevice, not {device!r}")
        self.device = device

    async def read_word(self, address):
        return self.device.access(False, address)

    async def write_word(self, address, value, strobe=0b1111):
        return self.device.access(True, address, value, strobe)[1]
