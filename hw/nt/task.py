"""The network-task (NT) contract: what every NT in the library obeys.

An NT is an Amaranth :class:`wiring.Component` with three ports:

* ``i`` (in) and ``o`` (out): :func:`~supernic.hw.stream.PacketSignature` streams carrying the
  parser's metadata (:func:`~supernic.desc.meta.meta_layout`) beside every beat, under the
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

What an NT declares (kind, scope, parameters, registers, run-time configuration, model) is its
description, :class:`supernic.desc.nt.base.TaskDescription`, which the gateware class
subclasses. Every NT counts its standard counters with :meth:`NetworkTask.count_standard`, in
their registers, so a counter's flip-flop is ``csr__<name>`` in every NT's state map (the
name its description's :meth:`~TaskDescription.shared_state` gives the model).
"""

from amaranth.hdl import Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...desc.nt.base import (STANDARD_REGISTERS, ConfigError, Param, Scope, TaskConfig,
                             TaskDescription, classes_by_kind)
from ...desc.registers import W1P
from ..parser.meta import meta_layout
from ..csr.block import csr_signature
from ..stream import PacketSignature, check_data_width

__all__ = [
    "Scope", "Param", "TaskConfig", "NetworkTask", "STANDARD_REGISTERS", "csr_signature",
    "task_classes", "task_class", "ConfigError", "count_events",
]


class NetworkTask(TaskDescription, wiring.Component):
    """An NT's gateware: its description's attributes, three ports and an ``elaborate``."""

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

    def count_standard(self, m, *, packets, skipped, dropped=None):
        """Count the standard counters (contract rules 1 and 3) in their registers: each
        increments by one in a cycle its event (a 1-bit expression) is high. ``dropped`` is
        ``None`` exactly when the NT's description says it never drops (``drops = False``):
        its register then reads 0 and holds no state."""
        if (dropped is None) == self.drops:
            raise TypeError(f"NT {self.kind}: its description says drops={self.drops}, so "
                            f"count_standard {'needs' if self.drops else 'takes no'} a "
                            f"dropped event")
        events = {"packets": packets, "skipped": skipped}
        if dropped is None:
            m.d.comb += self.csr.dropped.eq(0)
        else:
            events["dropped"] = dropped
        count_events(m, self.csr, **events)

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


def count_events(m, csr, **events):
    """Increment each named register of ``csr`` by one in a cycle its event is high: an event
    counter kept in its register (its ``csr__<name>`` flip-flop), as every NT's counters
    are."""
    for name, event in events.items():
        event = Value.cast(event)
        if len(event) != 1:
            raise TypeError(f"Counter {name}'s event must be 1 bit wide, not {len(event)}")
        register = getattr(csr, name)
        with m.If(event):
            m.d.sync += register.eq(register + 1)


def task_classes():
    """Every NT in :mod:`supernic.hw.nt`, by kind."""
    from .. import nt as package
    return classes_by_kind(package, NetworkTask)


def task_class(kind):
    classes = task_classes()
    if kind not in classes:
        raise ConfigError(f"unknown NT {kind!r} (known: {', '.join(classes)})")
    return classes[kind]
