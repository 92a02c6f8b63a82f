"""Tenant classifier: the first NIC block behind each port's parser; it names a packet's tenant.

A table of ``entries`` slots is searched with the parser's metadata of the packet's first beat.
A slot matches when all of these hold:

* ``kind``: :attr:`KeyKind.VLAN` or :attr:`KeyKind.VNI` needs the parser's ``tenant_kind`` to
  be that kind; :attr:`KeyKind.ANY` takes either. A packet with no tenant key (``tenant_kind``
  NONE) matches only an ``ANY`` slot whose ``key_mask`` is 0 (a catch-all by port, protocol
  or destination port);
* ``key``: ``tenant_key`` equals ``key`` on the bits set in ``key_mask`` (24 bits, enough for a
  VXLAN VNI, RFC 7348; a VLAN ID is 12, IEEE 802.1Q);
* ``ports``: the bit of this classifier's ingress port is set (all ones: any port);
* ``proto``: 0 for any, else the innermost ``flow.proto``;
* ``dport_lo`` <= ``flow.dport`` <= ``dport_hi``.

The lowest matching slot wins and gives the tenant. With no match the default action decides:
drop (every beat is discarded here and counted in ``dropped``) or send to ``default_tenant``;
either way the packet counts in ``unmatched``. Packets with parse error flags are classified by
whatever key fields the parser found; the classifier never waits on them.

Every packet leaves with the parser's metadata unchanged in ``meta.hdr`` and the NIC tag (see
:mod:`.layout`) in ``meta.tag``: the tenant, this port, and ``seq``, the port's 16-bit wrapping
packet counter (dropped packets take a value too, so a testbench can name every packet).

Timing. All slots sit in flip-flops and compare in parallel, as in a TCAM: stage A registers
the beat, the compare and the priority choice run on stage A's metadata, and stage B registers
the decision beside the beat, which it holds for the rest of the packet. Two cycles of latency,
one beat a cycle in and out with no bubble between packets; dropped beats leave stage B without
waiting for ``ready``. A slot write is a single-cycle copy of the staged registers, so a decision
sees a slot wholly old or wholly new.

Programming a slot: write the ``entry_*`` staging registers, then ``entry_index`` and 1 to
``entry_write``. :meth:`ClassifierConfig.register_writes` gives the whole sequence.
"""

from amaranth.hdl import Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from ..csr.axil import AxiLiteSignature
from ..csr.regfile import RegisterFile
from ...desc.nic.classifier import (DefaultAction, KeyKind, check_entries, check_shape,
                                    classifier_block, entry_fields, entry_table, is_int)
from ...desc.registers import RegisterMap
from ..csr.block import csr_signature
from ..csr.staged import staged_row
from ...desc.meta import TenantKind
from ..parser.meta import layout_of, meta_layout
from ..stream import PacketSignature
from ..top import drive_id
from ...desc.blocks import CSR_ADDR_WIDTH, id_block
from ...desc.nic.shape import NicShape
from .layout import NicPacketSignature, nic_layout, tag_layout

__all__ = ["TenantClassifier", "ClassifierShell", "classifier_register_map", "entry_layout"]

def entry_layout(shape):
    """One slot as the hardware stores it."""
    return layout_of(entry_fields(shape))


class TenantClassifier(wiring.Component):
    """Parser metadata in, NIC-tagged packets out: see the module docstring."""

    def __init__(self, shape: NicShape, port: int, entries: int = 16):
        self.shape = check_shape(shape)
        if not is_int(port) or not 0 <= port < shape.ports:
            raise ValueError(f"Classifier port must be an integer from 0 to "
                             f"{shape.ports - 1}, not {port!r}")
        self.port = port
        self.entries = check_entries(entries)
        self.block = classifier_block("classifier", shape, entries)
        super().__init__({
            "i": In(PacketSignature(shape.data_width, meta_layout(shape.header_bytes))),
            "o": Out(NicPacketSignature(shape)),
            "csr": Out(csr_signature(self.block.registers)),
        })

    def elaborate(self, platform):
        m = Module()
        shape, n, csr = self.shape, self.entries, self.csr
        layout = entry_layout(shape)
        slots = [Signal(layout, name=f"slot{k}") for k in range(n)]
        hits = [Signal(64, name=f"hits{k}") for k in range(n)]

        # --- slot programming: one-cycle copy of the staged registers ------------------------
        staged = Signal(layout)
        for name, value in staged_row(csr, entry_table(shape)).items():
            m.d.comb += getattr(staged, name).eq(value)
        with m.If(csr.entry_write):
            with m.Switch(csr.entry_index):
                for k in range(n):
                    with m.Case(k):
                        m.d.sync += slots[k].eq(staged)

        # --- pipeline: stage A holds the beat, stage B the beat and its decision -------------
        a_valid = Signal()
        a_first = Signal()
        a_beat = Signal.like(self.i.p)
        b_valid = Signal()
        b_first = Signal()
        b_drop = Signal()
        b_beat = Signal.like(self.i.p)
        # port, beats and region are never assigned: constant fields of the tag.
        b_tag = Signal(tag_layout(shape), init={"port": self.port})
        next_seq = Signal.like(b_tag.seq)
        in_first = Signal(init=1)
        advance = Signal()
        # A dropped beat leaves stage B whether or not the sink is ready.
        m.d.comb += [advance.eq(~b_valid | self.o.ready | b_drop), self.i.ready.eq(advance)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += in_first.eq(self.i.p.last)

        meta = a_beat.meta
        flow = meta.flow
        key_present = Signal()
        m.d.comb += key_present.eq(meta.tenant_kind != TenantKind.NONE)
        match = Signal(n)
        for k, s in enumerate(slots):
            kind_ok = Mux(s.kind == KeyKind.ANY, key_present | (s.key_mask == 0),
                          s.kind == meta.tenant_kind)
            m.d.comb += match[k].eq(
                s.valid & kind_ok
                & (((meta.tenant_key ^ s.key) & s.key_mask) == 0)
                & s.ports[self.port]
                & ((s.proto == 0) | (s.proto == flow.proto))
                & (flow.dport >= s.dport_lo) & (flow.dport <= s.dport_hi))
        winner = Signal(n)  # one-hot of the lowest matching slot, 0 if none
        seen = Const(0, 1)
        for k in range(n):
            m.d.comb += winner[k].eq(match[k] & ~seen)
            seen = seen | match[k]
        matched = Signal()
        m.d.comb += matched.eq(match.any())
        # An AND-OR tree over the one-hot winner: no wide index, no priority chain on the data.
        win_tenant = Signal(shape.tenant_bits)
        m.d.comb += win_tenant.eq(
            _or_tree([Mux(winner[k], slots[k].tenant, 0) for k in range(n)]))

        with m.If(advance):
            m.d.sync += [a_valid.eq(self.i.valid), a_beat.eq(self.i.p), a_first.eq(in_first),
                         b_valid.eq(a_valid), b_beat.eq(a_beat), b_first.eq(a_first)]
            with m.If(a_valid & a_first):
                m.d.sync += [
                    b_drop.eq(~matched & (csr.default_action == DefaultAction.DROP)),
                    b_tag.tenant.eq(Mux(matched, win_tenant, csr.default_tenant)),
                    b_tag.seq.eq(next_seq),
                    next_seq.eq(next_seq + 1),
                    csr.packets.eq(csr.packets + 1),
                    csr.unmatched.eq(csr.unmatched + ~matched),
                    csr.dropped.eq(csr.dropped
                                   + (~matched & (csr.default_action == DefaultAction.DROP))),
                ]
                for k in range(n):
                    with m.If(winner[k]):
                        m.d.sync += hits[k].eq(hits[k] + 1)

        # --- output: the held decision on every beat of the packet ---------------------------
        m.d.comb += [
            self.o.valid.eq(b_valid & ~b_drop),
            self.o.p.data.eq(b_beat.data),
            self.o.p.keep.eq(b_beat.keep),
            self.o.p.last.eq(b_beat.last),
            self.o.p.meta.hdr.eq(b_beat.meta),
            self.o.p.meta.tag.eq(b_tag),
        ]
        with m.Switch(csr.hit_index):
            for k in range(n):
                with m.Case(k):
                    m.d.comb += csr.hit_count.eq(hits[k])
        return m


def _or_tree(values):
    while len(values) > 1:
        values = [values[i] | values[i + 1] if i + 1 < len(values) else values[i]
                  for i in range(0, len(values), 2)]
    return values[0]


def classifier_register_map(shape: NicShape, entries: int = 16):
    """The test shell's registers: the ``id`` block, then the ``classifier`` block."""
    return RegisterMap([id_block(), classifier_block("classifier", shape, entries)])


class ClassifierShell(wiring.Component):
    """A test shell: AXI4-Stream in with the parser's metadata on ``tuser``, the classifier,
    AXI4-Stream out with the NIC layout (``hdr`` then ``tag``) on ``tuser``, and an AXI4-Lite
    register file with the ``id`` and ``classifier`` blocks."""

    def __init__(self, shape: NicShape, port: int = 0, entries: int = 16, build_id: int = 0):
        self.shape = check_shape(shape)
        self.port, self.entries, self.build_id = port, entries, build_id
        self.regmap = classifier_register_map(shape, entries)
        width = shape.data_width
        super().__init__({
            "s_axis": In(AxiStreamSignature(width, meta_layout(shape.header_bytes).size)),
            "m_axis": Out(AxiStreamSignature(width, nic_layout(shape).size)),
            "s_axil": In(AxiLiteSignature(CSR_ADDR_WIDTH)),
        })

    def elaborate(self, platform):
        m = Module()
        shape = self.shape
        m.submodules.rx = rx = AxiStreamToPacket(shape.data_width, meta_layout(shape.header_bytes))
        m.submodules.classifier = classifier = TenantClassifier(shape, self.port, self.entries)
        m.submodules.tx = tx = PacketToAxiStream(shape.data_width, nic_layout(shape))
        m.submodules.csr = csr = RegisterFile(self.regmap, CSR_ADDR_WIDTH)
        wiring.connect(m, wiring.flipped(self.s_axis), rx.s_axis)
        wiring.connect(m, rx.o, classifier.i)
        wiring.connect(m, classifier.o, tx.i)
        wiring.connect(m, tx.m_axis, wiring.flipped(self.m_axis))
        wiring.connect(m, wiring.flipped(self.s_axil), csr.s_axil)
        wiring.connect(m, csr.fields.classifier, classifier.csr)
        drive_id(m, csr, self.build_id, shape.data_width, shape.header_bytes)
        return m
