"""The rack ingress: in front of the rack port's parser, it takes rack frames in
(:mod:`supernic.desc.nic.rack`): checks the header beats (for this NIC, the rack's EtherType
and version, every header byte present, more after it), strips them and passes the inner frame
on; anything else is dropped whole. ``took`` and ``bad`` pulse once per frame (the rack
egress counts them in ``rx`` and ``rx_bad``).

Header beats are taken at once (``ready`` high); the inner frame's beats pass through as wires,
so the port runs at one beat a cycle and adds no latency beyond the header's beats.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...desc.nic.rack import MAC_PREFIX, RACK_ETHERTYPE, RACK_VERSION, header_beats
from ..stream import PacketSignature

__all__ = ["RackIngress"]


class RackIngress(wiring.Component):
    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({"i": In(PacketSignature(data_width)),
                          "o": Out(PacketSignature(data_width)),
                          "nic_id": In(8), "took": Out(1), "bad": Out(1)})

    def elaborate(self, platform):
        m = Module()
        dw = self.data_width
        hbeats = header_beats(dw)
        hbeat = Signal(range(hbeats + 1))
        stored = Signal(hbeats * dw)        # the header beats so far
        drop = Signal()                     # the frame's header was bad: drop the rest
        in_header = hbeat < hbeats
        full = Signal(hbeats * dw)          # the header with the current beat in its place
        m.d.comb += full.eq(stored)
        m.d.comb += full.word_select(hbeat, dw).eq(self.i.p.data)
        head = full[:16 * 8]

        def byte(k):
            return head[8 * k:8 * k + 8]
        good = Signal()
        m.d.comb += good.eq(
            (Cat(*(byte(k) for k in range(5))) == int.from_bytes(MAC_PREFIX, "little"))
            & (byte(5) == self.nic_id)
            & (byte(12) == RACK_ETHERTYPE >> 8) & (byte(13) == RACK_ETHERTYPE & 0xFF)
            & (byte(14) == RACK_VERSION))
        whole = self.i.p.keep.all()
        beat = self.i.valid & self.i.ready
        m.d.comb += [
            self.o.p.eq(self.i.p),
            self.o.valid.eq(self.i.valid & ~in_header & ~drop),
            self.i.ready.eq(in_header | drop | self.o.ready),
        ]
        with m.If(beat):
            with m.If(in_header):
                m.d.sync += stored.word_select(hbeat, dw).eq(self.i.p.data)
                with m.If(self.i.p.last):
                    # No more than the header: a runt, dropped here, counted once.
                    m.d.comb += self.bad.eq(1)
                    m.d.sync += [hbeat.eq(0), drop.eq(0)]
                with m.Else():
                    m.d.sync += hbeat.eq(hbeat + 1)
                    with m.If(~whole | ((hbeat == hbeats - 1) & ~good)):
                        m.d.sync += drop.eq(1)
            with m.Elif(self.i.p.last):
                m.d.comb += [self.took.eq(~drop), self.bad.eq(drop)]
                m.d.sync += [hbeat.eq(0), drop.eq(0)]
        return m
