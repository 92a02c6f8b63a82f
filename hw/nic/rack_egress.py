"""The rack egress: the NIC's output shared between packets for endpoints (from the egress
stage) and redirected packets for peers (from each endpoint port's :class:`.RedirectSplit`),
which leave as rack frames (:mod:`supernic.desc.nic.rack`). It also holds the ``rack``
register block and counts what the rack ingress (:mod:`.rack_ingress`) reports.

A whole packet goes at a time, sources taken in turn (round robin from the one after the last
served), so neither endpoint traffic nor a redirected tenant can starve the other. A source is
chosen when its first beat is offered and kept until its last is taken: ``valid`` never drops
under an offered beat. A redirected packet first gets the header beats, built from its tag
(tenant and flow bucket -> ``t<t>_peer`` or ``t<t>_peer2``, ingress port) and ``nic_id``; its tag leaves with ``redirect`` set.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..csr.block import csr_signature
from ...desc.nic.rack import (BUCKET_BITS, BUCKETS, MAC_PREFIX, RACK_ETHERTYPE, RACK_VERSION,
                              header_beats, rack_block)
from ...desc.nic.shape import NicShape
from .layout import NicPacketSignature

__all__ = ["RackEgress"]


def _bytes(*values):
    """Little-end-first concatenation of byte values (wire order: byte 0 first)."""
    return Cat(*(Const(v, 8) if isinstance(v, int) else v for v in values))


class RackEgress(wiring.Component):
    def __init__(self, shape: NicShape):
        if not shape.rack:
            raise ValueError("RackEgress needs a NIC shape with a rack port")
        self.shape = shape
        sig = NicPacketSignature(shape)
        members = {"i": In(sig), "o": Out(sig),
                   "csr": Out(csr_signature(rack_block(shape).registers)),
                   "enable": Out(shape.tenants), "buckets": Out(shape.tenants * BUCKETS),
                   "nic_id": Out(8),
                   "rx_took": In(1), "rx_bad": In(1)}
        for p in range(shape.endpoint_ports):
            members[f"r{p}"] = In(sig)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        shape, csr = self.shape, self.csr
        dw = shape.data_width
        hbeats = header_beats(dw)
        sources = [self.i] + [getattr(self, f"r{p}") for p in range(shape.endpoint_ports)]
        n = len(sources)
        m.d.comb += [self.enable.eq(csr.redirect_enable), self.nic_id.eq(csr.nic_id),
                     self.buckets.eq(Cat(getattr(csr, f"t{t}_buckets")
                                         for t in range(shape.tenants)))]

        locked = Signal()           # a source is chosen: its packet is under way or offered
        owner = Signal(range(n))
        after = Signal(range(n))    # the source served last; the turn starts after it
        hbeat = Signal(range(hbeats + 1))   # header beats sent of the current rack frame
        valids = Cat(s.valid for s in sources)
        pick = Signal(range(n))
        # Round robin: the first offering source after ``after``, cyclically.
        for k in reversed(range(n)):
            for s in range(n):
                with m.If((after == s) & valids[(s + 1 + k) % n]):
                    m.d.comb += pick.eq((s + 1 + k) % n)
        sel = Signal(range(n))
        m.d.comb += sel.eq(Mux(locked, owner, pick))
        src_valid, src_last = Signal(), Signal()
        with m.Switch(sel):
            for k, s in enumerate(sources):
                with m.Case(k):
                    m.d.comb += [src_valid.eq(s.valid), src_last.eq(s.p.last),
                                 self.o.p.eq(s.p)]
        redirect = sel != 0
        in_header = redirect & (hbeat < hbeats)

        peers = Array(getattr(csr, f"t{t}_peer") for t in range(shape.tenants))
        peers2 = Array(getattr(csr, f"t{t}_peer2") for t in range(shape.tenants))
        second = Array(getattr(csr, f"t{t}_peer2_buckets") for t in range(shape.tenants))
        tenant, port_byte = Signal(shape.tenant_bits), Signal(8)
        bucket, peer = Signal(BUCKET_BITS), Signal(8)
        m.d.comb += [tenant.eq(Array(s.p.meta.tag.tenant for s in sources)[sel]),
                     port_byte.eq(Array(s.p.meta.tag.port for s in sources)[sel]),
                     bucket.eq(Array(s.p.meta.hdr.flow_hash[:BUCKET_BITS] for s in sources)[sel]),
                     peer.eq(Mux(second[tenant].bit_select(bucket, 1), peers2[tenant],
                                 peers[tenant]))]
        header = Signal(hbeats * dw)
        m.d.comb += header.eq(_bytes(*MAC_PREFIX, peer, *MAC_PREFIX, csr.nic_id,
                                     RACK_ETHERTYPE >> 8, RACK_ETHERTYPE & 0xFF, RACK_VERSION,
                                     port_byte))
        m.d.comb += [
            self.o.valid.eq(src_valid),
            self.o.p.meta.tag.redirect.eq(redirect),
        ]
        with m.If(in_header):
            m.d.comb += [self.o.p.data.eq(header.word_select(hbeat, dw)),
                         self.o.p.keep.eq(-1), self.o.p.last.eq(0)]
        for k, s in enumerate(sources):
            m.d.comb += s.ready.eq((sel == k) & self.o.ready & ~in_header)

        took = self.o.valid & self.o.ready
        with m.If(took):
            with m.If(in_header):
                m.d.sync += [hbeat.eq(hbeat + 1), locked.eq(1), owner.eq(sel)]
            with m.Elif(src_last):
                m.d.sync += [hbeat.eq(0), locked.eq(0), after.eq(sel)]
            with m.Else():
                m.d.sync += [locked.eq(1), owner.eq(sel)]
        with m.Elif(self.o.valid):
            m.d.sync += [locked.eq(1), owner.eq(sel)]

        for t in range(shape.tenants):
            counter = getattr(csr, f"t{t}_redirected")
            with m.If(took & redirect & ~in_header & src_last & (tenant == t)):
                m.d.sync += counter.eq(counter + 1)
        with m.If(self.rx_took):
            m.d.sync += csr.rx.eq(csr.rx + 1)
        with m.If(self.rx_bad):
            m.d.sync += csr.rx_bad.eq(csr.rx_bad + 1)
        return m
