"""The register bus a driver talks to, independent of what carries it.

The same driver code runs on a simulation (:mod:`supernic.sim.axil_bus`), on hardware (a PCIe BAR
or a UART bridge) and on the Python stand-ins here. A backend implements two primitives that
report the bus response instead of raising; :meth:`RegisterBus.read32` and
:meth:`RegisterBus.write32` add argument checks and turn a non-OKAY response into
:class:`RegisterAccessError`.
"""

import enum
import mmap
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

from ..desc.errors import SnicError

__all__ = ["Response", "RegisterAccessError", "TransportLost", "RegisterBus", "MemoryBus",
           "MmapBus"]


class Response(enum.IntEnum):
    """Bus response codes (the AXI ``bresp``/``rresp`` encoding)."""
    OKAY = 0b00
    EXOKAY = 0b01
    SLVERR = 0b10
    DECERR = 0b11


class TransportLost(SnicError):
    """The bus itself is gone (the device process died, the connection dropped): no access
    can succeed until it is back, so callers stop instead of retrying every register."""


class RegisterAccessError(SnicError):
    """A transfer ended with a response other than OKAY."""
    exit_code = 1

    def __init__(self, address, response, operation="read"):
        self.address = address
        self.response = Response(response)
        self.operation = operation
        super().__init__(f"{operation} at {address:#010x} failed with "
                         f"{self.response.name} ({int(self.response):#04b})")


def _check_address(address):
    if not isinstance(address, int) or isinstance(address, bool) or address < 0 or address % 4:
        raise ValueError(f"Register address must be a non-negative multiple of 4, not {address!r}")


class RegisterBus:
    """Abstract async 32-bit register bus.

    Backends override :meth:`read_word` and :meth:`write_word`; both return the bus response
    rather than raise, so tests can check error responses and their read data.
    """

    async def read_word(self, address):
        """Read the word at ``address``; return ``(value, Response)``."""
        raise NotImplementedError

    async def write_word(self, address, value, strobe=0b1111):
        """Write the bytes of ``value`` selected by ``strobe`` at ``address``; return the
        :class:`Response`."""
        raise NotImplementedError

    async def read32(self, address) -> int:
        _check_address(address)
        value, response = await self.read_word(address)
        if response != Response.OKAY:
            raise RegisterAccessError(address, response, "read")
        return value

    async def write32(self, address, value, strobe=0b1111) -> None:
        _check_address(address)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2 ** 32:
            raise ValueError(f"Register value must be a 32-bit unsigned integer, not {value!r}")
        if not isinstance(strobe, int) or not 0 <= strobe <= 0b1111:
            raise ValueError(f"Write strobe must be a 4-bit unsigned integer, not {strobe!r}")
        response = await self.write_word(address, value, strobe)
        if response != Response.OKAY:
            raise RegisterAccessError(address, response, "write")


class MemoryBus(RegisterBus):
    """A register bus without a simulator, for unit tests.

    ``backing`` is either a mutable mapping of word address -> value (plain memory: every
    present address reads and writes, every absent one answers DECERR), or any object with the
    reference model's interface, ``read(address) -> (value, response)`` and
    ``write(address, value, strobe) -> response`` (such as
    :class:`supernic.sim.csr_model.RegisterFileModel`).
    """

    def __init__(self, backing=None):
        if backing is None:
            backing = {}
        if not isinstance(backing, MutableMapping) and not (
                hasattr(backing, "read") and hasattr(backing, "write")):
            raise TypeError(
                f"Memory bus backing must be a mutable mapping or a register model, "
                f"not {backing!r}")
        self.backing = backing

    async def read_word(self, address):
        if isinstance(self.backing, MutableMapping):
            if address not in self.backing:
                return 0, Response.DECERR
            return self.backing[address], Response.OKAY
        value, response = self.backing.read(address)
        return value, Response(response)

    async def write_word(self, address, value, strobe=0b1111):
        if isinstance(self.backing, MutableMapping):
            if address not in self.backing:
                return Response.DECERR
            mask = sum(0xFF << (8 * lane) for lane in range(4) if strobe >> lane & 1)
            self.backing[address] = (self.backing[address] & ~mask) | (value & mask)
            return Response.OKAY
        return Response(self.backing.write(address, value, strobe))


class MmapBus(RegisterBus):
    """A register space mapped into memory: a PCIe BAR through its sysfs ``resource0`` file, a
    UIO device (``/dev/uioN``, map ``N`` at ``offset = N * mmap.PAGESIZE``), or a plain file
    standing in for one in tests.

    ``size`` bytes from ``offset`` are mapped (default: the rest of the file; a character device
    reports size 0, so give it). Addresses are byte offsets into that window; a word outside it
    answers DECERR, as a bus would. Every full-word access is one aligned 32-bit load or store
    (a memoryview of format ``I``), which a BAR needs: a byte-wise copy would be split into four
    transactions that a register file may reject or latch wrongly. A partial strobe writes only
    the selected bytes. PCIe is little-endian, so on a big-endian host words are swapped.
    """

    def __init__(self, path, offset=0, size=None, writable=True):
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or offset % 4:
            raise ValueError(f"Map offset must be a non-negative multiple of 4, not {offset!r}")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool)
                                 or size <= 0 or size % 4):
            raise ValueError(f"Map size must be a positive multiple of 4, not {size!r}")
        self.path = Path(path)
        self.writable = bool(writable)
        # O_SYNC: sysfs maps a BAR uncached only when the file is opened synchronously.
        flags = (os.O_RDWR if writable else os.O_RDONLY) | getattr(os, "O_SYNC", 0)
        fd = os.open(self.path, flags)
        try:
            if size is None:
                size = os.fstat(fd).st_size - offset
                if size <= 0:
                    raise ValueError(f"{self.path} has no bytes past offset {offset:#x}; give the "
                                     f"map size (a device file reports size 0)")
            # mmap wants a page-aligned offset: map from the page below and skip the difference.
            skip = offset % mmap.ALLOCATIONGRANULARITY
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            self._map = mmap.mmap(fd, size + skip, access=access, offset=offset - skip)
        finally:
            os.close(fd)
        self.offset, self.size = offset, size
        self._bytes = memoryview(self._map)[skip:skip + size]
        self._words = self._bytes.cast("I")
        self._swap = sys.byteorder != "little"

    def close(self):
        if self._map is not None:
            self._words.release()
            self._bytes.release()
            self._map.close()
            self._map = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _index(self, address):
        if self._map is None:
            raise RuntimeError(f"the map of {self.path} is closed")
        return address // 4 if address + 4 <= self.size else None

    async def read_word(self, address):
        return self.read_now(address)

    async def write_word(self, address, value, strobe=0b1111):
        return self.write_now(address, value, strobe)

    def read_now(self, address):
        """:meth:`read_word` without a coroutine (a load never waits): ``(value, response)``."""
        index = self._index(address)
        if index is None:
            return 0, Response.DECERR
        value = self._words[index]
        return (int.from_bytes(value.to_bytes(4, "big"), "little") if self._swap else value,
                Response.OKAY)

    def write_now(self, address, value, strobe=0b1111):
        """:meth:`write_word` without a coroutine: the response."""
        index = self._index(address)
        if index is None or not self.writable:
            return Response.DECERR if index is None else Response.SLVERR
        if strobe == 0b1111:
            self._words[index] = (int.from_bytes(value.to_bytes(4, "big"), "little")
                                  if self._swap else value)
        else:
            for lane in range(4):
                if strobe >> lane & 1:
                    self._bytes[address + lane] = value >> (8 * lane) & 0xFF
        return Response.OKAY
