"""The chain's egress: packets marked ``drop`` by an NT are discarded here and counted.

NTs drop by marking (see :mod:`supernic.hw.nt.task`) so that every branch of a DAG sees every
packet; this is where the bytes stop. Every packet is delivered or counted: ``packets`` +
``dropped`` equals the packets that reached the stage.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..stream import PacketSignature

__all__ = ["DropStage"]


class DropStage(wiring.Component):
    def __init__(self, data_width, meta_layout):
        sig = PacketSignature(data_width, meta_layout)
        super().__init__({
            "i": In(sig), "o": Out(sig),
            "delivered": Out(64), "dropped": Out(64), "dropped_bytes": Out(64),
        })

    def elaborate(self, platform):
        m = Module()
        drop = self.i.p.meta.drop
        m.d.comb += [
            self.o.p.eq(self.i.p),
            self.o.valid.eq(self.i.valid & ~drop),
            self.i.ready.eq(self.o.ready | drop),
        ]
        nbytes = Signal(range(len(self.i.p.keep) + 1))
        m.d.comb += nbytes.eq(sum(self.i.p.keep))
        with m.If(self.i.valid & self.i.ready):
            with m.If(drop):
                m.d.sync += self.dropped_bytes.eq(self.dropped_bytes + nbytes)
            with m.If(self.i.p.last):
                with m.If(drop):
                    m.d.sync += self.dropped.eq(self.dropped + 1)
                with m.Else():
                    m.d.sync += self.delivered.eq(self.delivered + 1)
        return m
