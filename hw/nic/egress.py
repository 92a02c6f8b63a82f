"""The NIC's egress: packets an NT marked ``drop`` are discarded and counted per tenant, the rest
leave on ``o``; every packet that reaches the stage reports its tenant on ``done`` so the
scheduler knows what is still in flight.

The egress queue in front of the AXI4-Stream output is a FIFO of ``depth`` beats, so a slow
receiver first fills it before the regions feel backpressure.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.lib.wiring import In, Out

from ...desc.nic.shape import NicShape

from .layout import NicPacketSignature

__all__ = ["EgressStage"]


class EgressStage(wiring.Component):
    def __init__(self, shape: NicShape, depth=32):
        self.shape = shape
        self.depth = depth
        sig = NicPacketSignature(shape)
        counters = data.ArrayLayout(64, shape.tenants)
        super().__init__({
            "i": In(sig), "o": Out(sig),
            "delivered": Out(counters), "delivered_bytes": Out(counters),
            "dropped": Out(counters), "dropped_bytes": Out(counters),
            "done_valid": Out(1), "done_tenant": Out(shape.tenant_bits),
        })

    def elaborate(self, platform):
        m = Module()
        shape = self.shape
        sig_width = len(self.i.p.as_value())
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=sig_width, depth=self.depth)
        drop = self.i.p.meta.hdr.drop
        m.d.comb += [
            queue.w_data.eq(self.i.p.as_value()),
            queue.w_en.eq(self.i.valid & ~drop),
            self.i.ready.eq(queue.w_rdy | drop),
            self.o.p.eq(queue.r_data),
            self.o.valid.eq(queue.r_rdy),
            queue.r_en.eq(self.o.ready),
        ]
        nbytes = Signal(range(shape.beat_bytes + 1))
        m.d.comb += nbytes.eq(sum(self.i.p.keep))
        tenant = self.i.p.meta.tag.tenant
        took = self.i.valid & self.i.ready
        for t in range(shape.tenants):
            with m.If(took & (tenant == t)):
                with m.If(drop):
                    m.d.sync += self.dropped_bytes[t].eq(self.dropped_bytes[t] + nbytes)
                    with m.If(self.i.p.last):
                        m.d.sync += self.dropped[t].eq(self.dropped[t] + 1)
                with m.Else():
                    m.d.sync += self.delivered_bytes[t].eq(self.delivered_bytes[t] + nbytes)
                    with m.If(self.i.p.last):
                        m.d.sync += self.delivered[t].eq(self.delivered[t] + 1)
        m.d.comb += [
            self.done_valid.eq(took & self.i.p.last),
            self.done_tenant.eq(tenant),
        ]
        return m
