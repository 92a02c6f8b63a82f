"""The chain's egress: packets marked ``drop`` by an NT are discarded here and counted.

NTs drop by marking (see :mod:`supernic.hw.nt.task`) so that every branch of a DAG sees every
packet; this is where the bytes stop. Every packet is delivered or counted: ``delivered`` +
``dropped`` equals the packets that reached the stage (its ``csr``: the chain block's
registers).
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..csr.block import csr_signature
from ..stream import PacketSignature
from ...desc.blocks import chain_block

__all__ = ["DropStage"]


class DropStage(wiring.Component):
    def __init__(self, data_width, meta_layout):
        sig = PacketSignature(data_width, meta_layout)
        super().__init__({
            "i": In(sig), "o": Out(sig),
            # Its register block (desc chain_block): delivered and dropped.
            "csr": Out(csr_signature(chain_block().registers)),
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
        csr = self.csr
        with m.If(self.i.valid & self.i.ready):
            with m.If(drop):
                m.d.sync += csr.dropped_bytes.eq(csr.dropped_bytes + nbytes)
            with m.If(self.i.p.last):
                with m.If(drop):
                    m.d.sync += csr.dropped.eq(csr.dropped + 1)
                with m.Else():
                    m.d.sync += csr.delivered.eq(csr.delivered + 1)
        return m
