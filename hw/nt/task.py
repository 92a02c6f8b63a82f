"""The network-task (NT) contract: what every NT in the library obeys.

An NT is an Amaranth :class:`wiring.Component` with three ports:

* ``i`` (in) and ``o`` (out): :func:`~supernic.hw.stream.PacketSignature` streams carrying the
  parser's metadata (:func:`~supernic.hw.parser.meta.meta_layout`) beside every beat, under the
  stream contract of :mod:`supernic.hw.stream`.
* ``csr``: the NT's register block, seen from the NT. ``R`` registers are outputs the NT drives
  (counters); ``RW`` and ``W1P`` registers are inputs (configuration, table writes, strobes).
  The register file connects to it with ``wiring.connect(m, regfile.fields.<block>, nt.csr)``.

Behaviour every NT keeps:

1. **One packet out per packet in, in order.** An NT that drops a packet sets ``meta.drop`` on
   all its beats and counts it in ``dropped``; the chain's egress (:mod:`.discard`) discards
   and counts it. Dropping by marking keeps fork/join and per-flow order simple: every branch
   of a DAG sees every packet.
2. **Decide on the first beat.** Decisions use the metadata of the first beat; the tail flags
   (``length_error``, ``keep_error``) are only valid on the last beat and are passed through.
3. **Skip what does not apply.** A packet already dropped, one with a parse error flag
   (``truncated``, ``malformed``, ``runt``), or one of a kind the NT does not handle passes
   through unchanged, counted in ``skipped``, without stalling the packets behind it.
4. **Metadata describes the packet that leaves.** An NT that moves headers (VLAN push/pop,
   VXLAN encap/decap) updates the offsets, kinds and tags; one that rewrites addresses or
   ports (NAT, load balancer) updates ``flow``. ``flow_hash`` and ``ts`` keep their ingress
   values, so flow affinity survives rewrites.
5. **Line rate where possible.** A header-only NT accepts one beat a cycle under saturation at
   any packet size, unless it must emit more beats than it takes (a push or an encap).
6. **State is ordinary.** All state lives in plain Amaranth ``Signal`` registers and
   ``amaranth.lib.memory.Memory`` instances built in ``elaborate``; nothing is annotated, so
   the state-yielding transform can find and capture it as written.

What an NT class declares (class attributes):

* ``kind``: the name chain specifications use (``"acl"``);
* ``scope``: :data:`Scope.HEADER` if it reads and writes only headers inside the parser's
  window (its payload may wait in the packet store), :data:`Scope.PACKET` if it needs the
  whole packet (checksums over the payload, ciphers);
* ``needs_frame``: a header-scope NT that still needs every beat of the frame: it moves the
  bytes behind the header (VLAN push/pop) or counts the frame's bytes (flow monitor). A chain
  runs header-only (its payload waiting in the NIC's packet store) only if every NT is
  header-scope and none needs the frame;
* ``modifies``: whether it may change the packet's bytes (only the primary branch of a fork
  may hold such NTs);
* ``reads_payload`` / ``writes_payload`` / ``seals_payload``: for the chain checks of
  :mod:`supernic.hw.chain.spec` (an NT that reads the payload must not follow one that
  rewrites it; nothing may rewrite the payload after an NT sealed it with checksums);
* ``type_id``, ``version``: its register block header;
* ``params``: build parameters (:class:`Param`), e.g. table sizes;
* ``config``: its run-time configuration class (:class:`TaskConfig`), shared with the model;
* ``model``: ``"module:Class"`` of its Python model in :mod:`supernic.sim.nt`.

Every register block starts with the three standard counters (:data:`STANDARD_REGISTERS`):
``packets`` (packets out), ``dropped`` (packets this NT dropped) and ``skipped``.
"""

import enum
import importlib
import pkgutil
from dataclasses import dataclass
from typing import Any

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..config import ConfigError
from ..csr.registers import R, W1P, Register, RegisterBlock
from ..parser.meta import meta_layout
from ..stream import PacketSignature, check_data_width

__all__ = [
    "Scope", "Param", "TaskConfig", "NetworkTask", "STANDARD_REGISTERS", "csr_signature",
    "task_classes", "task_class", "model_class", "ConfigError",
]


class Scope(enum.Enum):
    HEADER = "header"
    PACKET = "packet"


STANDARD_REGISTERS = (
    Register("packets", 64, R, doc="Packets that left this NT"),
    Register("dropped", 64, R, doc="Packets this NT dropped (marked drop)"),
    Register("skipped", 64, R, doc="Packets passed unchanged: not applicable, error or dropped"),
)


@dataclass(frozen=True)
class Param:
    """A build parameter: an integer in ``[low, high]`` (or one of ``choices``)."""
    name: str
    default: Any
    low: int | None = None
    high: int | None = None
    choices: tuple = ()
    power_of_two: bool = False
    doc: str = ""

    def check(self, kind, value):
        where = f"nt {kind}: parameter {self.name}"
        if self.choices:
            if value not in self.choices:
                raise ConfigError(f"{where} must be one of {list(self.choices)}, not {value!r}")
            return value
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{where} must be an integer, not {value!r}")
        if (self.low is not None and value < self.low) or (
                self.high is not None and value > self.high):
            raise ConfigError(f"{where} must be between {self.low} and {self.high}, not {value!r}")
        if self.power_of_two and value & (value - 1):
            raise ConfigError(f"{where} must be a power of two, not {value!r}")
        return value


class TaskConfig:
    """Run-time configuration of an NT: the same object programs the hardware and the model.

    Subclasses implement :meth:`from_dict` (from a chain specification, raising
    :class:`ConfigError` with a message naming the bad entry), :meth:`register_writes` (the
    ordered register writes that load it into the hardware) and :meth:`random` (a random but
    meaningful configuration for tests).
    """

    @classmethod
    def from_dict(cls, kind, params, raw):
        raise NotImplementedError

    def register_writes(self, params):
        """``[(register name, value), ...]`` in the order they must be written."""
        raise NotImplementedError

    @classmethod
    def random(cls, rng, params):
        raise NotImplementedError


def csr_signature(registers):
    """The NT's view of its register block: ``R`` out, ``RW``/``W1P`` in, access strobes in."""
    members = {}
    for reg in registers:
        members[reg.name] = Out(reg.width) if reg.access is R else In(reg.width, init=reg.reset)
        if reg.strobe:
            members[reg.strobe_name] = In(1)
    return wiring.Signature(members)


class NetworkTask(wiring.Component):
    kind = None
    scope = Scope.HEADER
    needs_frame = False
    modifies = False
    reads_payload = False
    writes_payload = False
    seals_payload = False
    type_id = None
    version = 0x0001_0000
    params = ()
    config = None
    model = None
    doc = ""

    @classmethod
    def check_params(cls, raw):
        """Validated build parameters with defaults filled in."""
        if not isinstance(raw, dict):
            raise ConfigError(f"nt {cls.kind}: parameters must be a table, not {raw!r}")
        known = {p.name: p for p in cls.params}
        for name in raw:
            if name not in known:
                raise ConfigError(f"nt {cls.kind}: unknown parameter {name!r} "
                                  f"(known: {', '.join(sorted(known)) or 'none'})")
        return {p.name: p.check(cls.kind, raw.get(p.name, p.default)) for p in cls.params}

    @classmethod
    def task_registers(cls, params):
        """The NT's own registers, after the standard counters."""
        return []

    @classmethod
    def registers(cls, params):
        return [*STANDARD_REGISTERS, *cls.task_registers(params)]

    @classmethod
    def cycles_per_beat(cls, data_width, params):
        """Cycles the NT needs per beat at saturation (1.0: line rate), the region-time cost the
        scheduler charges a packet for (SuperNIC §5: NT cycles are a shared resource)."""
        return 1.0

    @classmethod
    def register_block(cls, name, params):
        return RegisterBlock(name, cls.type_id, cls.version, cls.registers(params),
                             doc=cls.doc or (cls.__doc__ or "").strip().splitlines()[0])

    def __init__(self, data_width, header_bytes=256, **params):
        self.data_width = check_data_width(data_width)
        self.header_bytes = header_bytes
        self.meta_layout = meta_layout(header_bytes)
        self.p = self.check_params(params)
        super().__init__({
            "i": In(PacketSignature(data_width, self.meta_layout)),
            "o": Out(PacketSignature(data_width, self.meta_layout)),
            "csr": Out(csr_signature(self.registers(self.p))),
        })

    def pulse_inputs(self):
        """The register inputs that are 1 only in the cycle of a register access (``W1P``
        registers, access strobes). While software accesses nothing they are 0: the quiet
        component in which a boundary stop's drain picks its guards
        (hw/transform/liveness.py), so a flag that a write raises and the hardware clears (the
        rate limiter's ``init_pending``) counts as drained."""
        out = []
        for reg in self.registers(self.p):
            if reg.access is W1P:
                out.append(getattr(self.csr, reg.name))
            if reg.strobe:
                out.append(getattr(self.csr, reg.strobe_name))
        return out


def task_classes():
    """Every NT in :mod:`supernic.hw.nt`, by kind (found by walking the package)."""
    from .. import nt as package
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, NetworkTask)
                    and value.kind and value.__module__ == module.__name__):
                if value.kind in found and found[value.kind] is not value:
                    raise RuntimeError(f"two NTs named {value.kind!r}")
                found[value.kind] = value
    return dict(sorted(found.items()))


def task_class(kind):
    classes = task_classes()
    if kind not in classes:
        raise ConfigError(f"unknown NT {kind!r} (known: {', '.join(classes)})")
    return classes[kind]


def model_class(task):
    """The Python model class of an NT class (``task.model`` is ``"module:Class"``)."""
    module, _, name = task.model.partition(":")
    return getattr(importlib.import_module(f"supernic.sim.nt.{module}"), name)
