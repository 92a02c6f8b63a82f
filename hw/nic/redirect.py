"""The redirect action after an endpoint port's classifier (:mod:`supernic.desc.nic.rack`): a
packet of a tenant whose bit is set in ``enable``, in one of the flow buckets set for the
tenant in ``buckets`` (16 bits a tenant), goes out on ``r``, toward the rack egress
(:mod:`.rack_egress`), instead of on ``o`` to the tenant queues.

The choice is made on a packet's first beat and kept for the rest of it. While a first beat
waits for its path to take it, the choice is frozen, so ``valid`` never drops under a beat
that was offered (the stream contract, hw/stream.py) even if software flips ``enable`` then.
No cycle is added: the paths are wires and a multiplexer.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...desc.nic.rack import BUCKET_BITS, BUCKETS
from ...desc.nic.shape import NicShape
from .layout import NicPacketSignature

__all__ = ["RedirectSplit"]


class RedirectSplit(wiring.Component):
    def __init__(self, shape: NicShape):
        self.shape = shape
        sig = NicPacketSignature(shape)
        super().__init__({"i": In(sig), "o": Out(sig), "r": Out(sig),
                          "enable": In(shape.tenants),
                          "buckets": In(shape.tenants * BUCKETS)})

    def elaborate(self, platform):
        m = Module()
        first = Signal(init=1)      # the next beat starts a packet
        frozen = Signal()           # a first beat was offered and not yet taken
        held = Signal()             # the choice for the rest of the packet
        chosen = Signal()
        tenant = self.i.p.meta.tag.tenant
        bucket = self.i.p.meta.hdr.flow_hash[:BUCKET_BITS]
        wanted = (self.enable.bit_select(tenant, 1)
                  & self.buckets.word_select(tenant, BUCKETS).bit_select(bucket, 1))
        m.d.comb += [
            chosen.eq(Mux(first & ~frozen, wanted, held)),
            self.o.p.eq(self.i.p), self.r.p.eq(self.i.p),
            self.o.valid.eq(self.i.valid & ~chosen),
            self.r.valid.eq(self.i.valid & chosen),
            self.i.ready.eq(Mux(chosen, self.r.ready, self.o.ready)),
        ]
        with m.If(self.i.valid & first & ~frozen):
            m.d.sync += held.eq(wanted)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [first.eq(self.i.p.last), frozen.eq(0)]
        with m.Elif(self.i.valid & first):
            m.d.sync += frozen.eq(1)
        return m
