"""The tenant scheduler's stage 3 (hw/nic/scheduler.py): dispatched packets out of the queues'
memories onto the scheduler's output, back to back.

Contract. ``push`` with ``rec`` (the queue's port and tenant, the packet's metadata slot, its
beats, its region and the beats that count against the region's room) takes a dispatched
packet; ``ready`` says one may be pushed this cycle (two records are held). The stage issues
one memory read a cycle: ``issue`` with the queue (``cur_port``, ``cur_tenant``), whose read
pointer the scheduler returns on ``rd_ptr`` and advances on each issue (and its metadata slot
pointer on the ``first`` beat's); ``data_addr``/``data_en`` and ``meta_addr``/``meta_en``
drive the ports' read ports, whose words come back on ``data`` and ``meta`` a cycle later.
A two-entry output buffer takes them, so with the consumer ready a packet's first beat follows
the previous one's last without a gap. ``o`` carries every beat with ``tag.beats``,
``tag.region`` and the queue's tenant, the tail flags on the last beat only;
``region_beat_taken`` marks a beat taken from ``o`` that counted against its region's room
(the scheduler's unsent count goes down).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ...desc.meta import TAIL_FLAGS
from ...desc.nic.shape import BEATS_BITS, NicShape
from .layout import NicPacketSignature, nic_layout

__all__ = ["Transfer", "transfer_record"]


def transfer_record(shape: NicShape, slot_bits):
    return data.StructLayout({
        "port": shape.port_bits, "tenant": shape.tenant_bits, "slot": slot_bits,
        "beats": BEATS_BITS, "region": shape.region_bits, "to_region": BEATS_BITS,
    })


class Transfer(wiring.Component):
    def __init__(self, shape: NicShape, queue_bits, slot_bits):
        self.shape = shape
        self.queue_bits, self.slot_bits = queue_bits, slot_bits
        P, T = shape.ports, shape.tenants
        tenant_bits = shape.tenant_bits if T > 1 else 0
        super().__init__({
            "push": In(1), "rec": In(transfer_record(shape, slot_bits)), "ready": Out(1),
            "rd_ptr": In(queue_bits + 1),
            "issue": Out(1), "cur_port": Out(shape.port_bits), "cur_tenant": Out(shape.tenant_bits),
            "first": Out(1),
            "data_addr": Out(queue_bits + tenant_bits), "data_en": Out(P),
            "data": In(data.ArrayLayout(shape.data_width + shape.beat_bytes, P)),
            "meta_addr": Out(slot_bits + tenant_bits), "meta_en": Out(P),
            "meta": In(data.ArrayLayout(nic_layout(shape).size, P)),
            "o": Out(NicPacketSignature(shape)),
            "region_beat_taken": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        sh = self.shape
        P, T = sh.ports, sh.tenants
        qbits = self.queue_bits
        rec_layout = transfer_record(sh, self.slot_bits)
        recs = [Signal(rec_layout, name=f"rec{k}") for k in range(2)]
        rec_count = Signal(range(3))
        m.d.comb += self.ready.eq(rec_count < 2)
        out_count = Signal(range(3))
        s_valid = Signal()
        take = Signal()
        m.d.comb += take.eq(self.o.valid & self.o.ready)
        credit_ok = Signal()
        m.d.comb += credit_ok.eq(out_count + s_valid <= 1 + take)
        cur = recs[0]
        beat_index = Signal(BEATS_BITS)
        issue = self.issue
        m.d.comb += issue.eq((rec_count > 0) & credit_ok)
        issue_last = Signal()
        m.d.comb += issue_last.eq(beat_index == cur.beats - 1)
        rec_pop = Signal()
        m.d.comb += rec_pop.eq(issue & issue_last)

        # Record queue: push at dispatch, pop when the last beat's read is issued.
        m.d.sync += rec_count.eq(rec_count + self.push - rec_pop)
        with m.If(rec_pop):
            m.d.sync += recs[0].eq(recs[1])
        with m.If(self.push):
            with m.If((rec_count - rec_pop) == 0):
                m.d.sync += recs[0].eq(self.rec)
            with m.Else():
                m.d.sync += recs[1].eq(self.rec)
        with m.If(issue):
            m.d.sync += beat_index.eq(Mux(issue_last, 0, beat_index + 1))

        rd_cur = self.rd_ptr
        m.d.comb += [
            self.cur_port.eq(cur.port), self.cur_tenant.eq(cur.tenant),
            self.first.eq(beat_index == 0),
            self.data_addr.eq(Cat(rd_cur[:qbits], cur.tenant) if T > 1 else rd_cur[:qbits]),
            self.meta_addr.eq(Cat(cur.slot, cur.tenant) if T > 1 else cur.slot),
        ]
        for p in range(P):
            m.d.comb += [self.data_en[p].eq(issue & (cur.port == p)),
                         self.meta_en[p].eq(issue & (cur.port == p) & (beat_index == 0))]

        s_port = Signal(sh.port_bits)
        s_last = Signal()
        s_region_beat = Signal()
        s_beats = Signal(BEATS_BITS)
        s_region = Signal(sh.region_bits)
        s_tenant = Signal(sh.tenant_bits)
        m.d.sync += [s_valid.eq(issue)]
        with m.If(issue):
            m.d.sync += [s_port.eq(cur.port), s_last.eq(issue_last),
                         s_region_beat.eq(beat_index < cur.to_region),
                         s_beats.eq(cur.beats), s_region.eq(cur.region),
                         s_tenant.eq(cur.tenant)]

        out_layout = data.StructLayout({"beat": self.o.p.shape(), "region_beat": 1})
        landing = Signal(out_layout)
        word = Signal(sh.data_width + sh.beat_bytes)
        m.d.comb += [
            word.eq(Array(self.data[p] for p in range(P))[s_port]),
            landing.beat.data.eq(word[:sh.data_width]),
            landing.beat.keep.eq(word[sh.data_width:]),
            landing.beat.last.eq(s_last),
            landing.beat.meta.eq(Array(self.meta[p] for p in range(P))[s_port]),
            landing.beat.meta.tag.beats.eq(s_beats),
            landing.beat.meta.tag.region.eq(s_region),
            # The tenant is the queue's, not the stored metadata's (taken from the packet's
            # last beat): a packet whose tag changed mid-packet went into its first beat's
            # tenant's queue and leaves as that tenant's (found by the scheduler's formal
            # property, hw/formal/properties.py).
            landing.beat.meta.tag.tenant.eq(s_tenant),
            landing.region_beat.eq(s_region_beat),
        ]
        with m.If(~s_last):
            for flag in TAIL_FLAGS:
                m.d.comb += getattr(landing.beat.meta.hdr.flags, flag).eq(0)

        outs = [Signal(out_layout, name=f"out{k}") for k in range(2)]
        m.d.sync += out_count.eq(out_count + s_valid - take)
        with m.If(take):
            m.d.sync += outs[0].eq(outs[1])
        with m.If(s_valid):
            with m.If((out_count - take) == 0):
                m.d.sync += outs[0].eq(landing)
            with m.Else():
                m.d.sync += outs[1].eq(landing)
        m.d.comb += [self.o.valid.eq(out_count > 0), self.o.p.eq(outs[0].beat),
                     self.region_beat_taken.eq(take & outs[0].region_beat)]
        return m
