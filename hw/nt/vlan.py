"""IEEE 802.1Q tag push and pop: the gateware (what the NTs do and how they are configured:
:mod:`supernic.desc.nt.vlan`).

Both take one beat a cycle at any data width: push emits one extra beat only when the tag spills
a packet's last beat into a new one (the output then runs at one beat a cycle), pop takes one
input beat a cycle. At 64 bits a short look-ahead (:class:`~.realign.HeadWindow`) gives the
control logic the MAC addresses (and, for pop, the third tag) beside the first beat.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring

from ...desc.meta import RUNT_BYTES, TenantKind
from ...desc.nt.vlan import MAC_BYTES, TAG_BYTES, VlanPopDescription, VlanPushDescription
from .realign import HeadWindow, Realigner, skip_rule
from .task import NetworkTask

__all__ = ["VlanPush", "VlanPop"]


def moved(old, delta):
    """An offset the parser set (non-zero) moved by ``delta``; an unset one stays 0."""
    return Mux(old != 0, old + delta, 0)


def move_offsets(m, old, new, delta):
    """Every header offset, ``payload_off`` and ``min_len`` of ``old`` moved by ``delta`` into
    ``new`` (a frame that grows or shrinks in front of its headers)."""
    for layer in range(2):
        m.d.comb += [
            new.l3_off[layer].eq(moved(old.l3_off[layer], delta)),
            new.l4_off[layer].eq(moved(old.l4_off[layer], delta)),
        ]
    m.d.comb += [
        new.inner_l2_off.eq(moved(old.inner_l2_off, delta)),
        new.payload_off.eq(moved(old.payload_off, delta)),
        new.min_len.eq(moved(old.min_len, delta)),
    ]


def be_bytes(value, nbytes):
    """``value`` as ``nbytes`` bytes in wire (big-endian) order, byte 0 in the low bits."""
    return Cat(*[value[8 * (nbytes - 1 - k):8 * (nbytes - k)] for k in range(nbytes)])


class _VlanTask(NetworkTask):
    window_bytes = MAC_BYTES

    def _plumb(self, m, max_head, max_drop, max_pad=0):
        m.submodules.window = win = HeadWindow(self.data_width, self.meta_layout,
                                               self.window_bytes)
        m.submodules.realign = ra = Realigner(self.data_width, self.meta_layout, max_head,
                                              max_drop, max_pad)
        wiring.connect(m, wiring.flipped(self.i), win.i)
        wiring.connect(m, win.o, ra.i)
        wiring.connect(m, ra.o, wiring.flipped(self.o))
        return win, ra

    def _counters(self, m, ra, applies):
        decided = ra.i.valid & ra.i.ready & ra.first
        self.count_standard(m, packets=self.o.valid & self.o.ready & self.o.p.last,
                            skipped=decided & ~applies)


class VlanPush(VlanPushDescription, _VlanTask):
    """Push an IEEE 802.1Q tag after the MAC addresses"""

    def elaborate(self, platform):
        m = Module()
        win, ra = self._plumb(m, max_head=MAC_BYTES + TAG_BYTES, max_drop=MAC_BYTES)
        csr, meta = self.csr, win.o.p.meta
        applies = Signal()
        m.d.comb += applies.eq(~skip_rule(meta) & (meta.vlan_count < 2)
                               & (meta.payload_off + TAG_BYTES <= self.header_bytes))

        # Rewrites sit under m.If: a constant assigned to part of a signal outside any
        # condition becomes an `always @*` with nothing to wake it in Yosys's Verilog, and
        # simulators never run it.
        new = Signal(self.meta_layout)
        m.d.comb += new.eq(meta)
        with m.If(applies):
            move_offsets(m, meta, new, TAG_BYTES)
            m.d.comb += [
                new.vlan_count.eq(meta.vlan_count + 1),
                new.vid.eq(csr.vid),
                new.vid2.eq(meta.vid),
            ]
            with m.If(~meta.vxlan):  # a VNI outranks a VID as the tenant key
                m.d.comb += [new.tenant_kind.eq(TenantKind.VLAN), new.tenant_key.eq(csr.vid)]

        tci = Cat(csr.vid, csr.dei, csr.pcp)
        m.d.comb += [
            ra.ctl.head.eq(Cat(win.window[:8 * MAC_BYTES], be_bytes(csr.tpid, 2),
                               be_bytes(tci, 2))),
            ra.ctl.p.eq(Mux(applies, MAC_BYTES + TAG_BYTES, 0)),
            ra.ctl.d.eq(Mux(applies, MAC_BYTES, 0)),
            ra.ctl.meta.eq(new),
        ]
        self._counters(m, ra, applies)
        return m


class VlanPop(VlanPopDescription, _VlanTask):
    """Pop the outermost IEEE 802.1Q tag"""
    window_bytes = MAC_BYTES + 3 * TAG_BYTES  # through the third tag's TCI

    def elaborate(self, platform):
        m = Module()
        win, ra = self._plumb(m, max_head=MAC_BYTES, max_drop=MAC_BYTES + TAG_BYTES,
                              max_pad=RUNT_BYTES)
        meta = win.o.p.meta
        applies = Signal()
        m.d.comb += applies.eq(~skip_rule(meta) & (meta.vlan_count != 0))

        # Tags end where IP starts, or where the walk ended when no IP follows them.
        tags_end = Signal.like(meta.payload_off)
        tags = Signal.like(meta.payload_off)
        count = Signal(2)
        third_vid = Signal(12)
        m.d.comb += [
            tags_end.eq(Mux(meta.l3_kind[0] != 0, meta.l3_off[0], meta.payload_off)),
            tags.eq((tags_end - 14) >> 2),
            count.eq(Mux(meta.vlan_count == 3, Mux(tags >= 4, 3, 2), meta.vlan_count - 1)),
            third_vid.eq(Cat(win.window[8 * 23:8 * 24], win.window[8 * 22:8 * 22 + 4])),
        ]
        new = Signal(self.meta_layout)
        m.d.comb += new.eq(meta)
        with m.If(applies):
            move_offsets(m, meta, new, -TAG_BYTES)
            m.d.comb += [
                new.vlan_count.eq(count),
                new.vid.eq(Mux(count != 0, meta.vid2, 0)),
                new.vid2.eq(Mux(meta.vlan_count == 3, third_vid, 0)),
            ]
            with m.If(~meta.vxlan):
                m.d.comb += [
                    new.tenant_kind.eq(Mux(count != 0, TenantKind.VLAN, TenantKind.NONE)),
                    new.tenant_key.eq(Mux(count != 0, meta.vid2, 0)),
                ]
        m.d.comb += [
            ra.ctl.head.eq(win.window[:8 * MAC_BYTES]),
            ra.ctl.p.eq(Mux(applies, MAC_BYTES, 0)),
            ra.ctl.d.eq(Mux(applies, MAC_BYTES + TAG_BYTES, 0)),
            ra.ctl.pad.eq(Mux(applies, RUNT_BYTES, 0)),
            ra.ctl.meta.eq(new),
        ]
        self._counters(m, ra, applies)
        return m
