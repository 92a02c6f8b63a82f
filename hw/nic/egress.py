"""The NIC's egress: packets an NT marked ``drop`` are discarded and counted per tenant, the rest
leave on ``o``; every packet that reaches the stage reports its tenant on ``done`` so the
scheduler knows what is still in flight.

The egress queue in front of the AXI4-Stream output is a FIFO of ``depth`` beats, so a slow
receiver first fills it before the regions feel backpressure.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from ..csr.block import csr_signature
from ...desc.nic.blocks import egress_block
from ...desc.nic.shape import NicShape

from .layout import NicPacketSignature

__all__ = ["EgressStage"]


class EgressStage(wiring.Component):
    def __init__(self, shape: NicShape, depth=32):
        self.shape = shape
        self.depth = depth
        sig = NicPacketSignature(shape)
        super().__init__({
            "i": In(sig), "o": Out(sig),
            # Its register block (desc egress_block): per tenant, delivered and dropped.
            "csr": Out(csr_signature(egress_block(shape).registers)),
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
            def counter(name):
                return getattr(self.csr, f"t{t}_{name}")
            with m.If(took & (tenant == t)):
                with m.If(drop):
                    m.d.sync += counter("dropped_bytes").eq(counter("dropped_bytes") + nbytes)
                    with m.If(self.i.p.last):
                        m.d.sync += counter("dropped").eq(counter("dropped") + 1)
                with m.Else():
                    m.d.sync += counter("delivered_bytes").eq(
                        counter("delivered_bytes") + nbytes)
                    with m.If(self.i.p.last):
                        m.d.sync += counter("delivered").eq(counter("delivered") + 1)
        m.d.comb += [
            self.done_valid.eq(took & self.i.p.last),
            self.done_tenant.eq(tenant),
        ]
        return m
