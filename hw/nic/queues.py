"""One ingress port's tenant queues: the tenant scheduler's stage 0 (hw/nic/scheduler.py).

Contract of :class:`PortQueues` (``T`` tenants, ``Q`` beats and ``D`` packets a queue):

* ``i`` takes one beat a cycle, always (``ready`` is tied high): a flooding tenant can fill only
  its own queue, and what does not fit is dropped and counted, never back-pressured into a
  port that other tenants share.
* A packet is decided on its first beat: a tenant number ``>= T`` is dropped (``bad``), a
  tenant not in ``enable`` is dropped (``disabled_drop[t]``). Otherwise its beats go into the
  tenant's partition of the port's data memory past the committed write pointer while they fit
  (``used + beats so far < Q``); on its last beat it commits if a descriptor FIFO entry and a
  metadata slot are free. A packet that does not fit (beats, descriptor or slot) is dropped
  whole (``queue_drop[t]``): the write pointer simply does not move. Each drop and each commit
  (``enqueued[t]``) strobes on the packet's last beat.
* A committed packet's descriptor (``desc_layout``: beats, bytes, its stamp ``now`` at the last
  beat, the flow-table index from the low bits of its flow hash, its metadata slot) is
  ``head[t]`` (``head_valid[t]``) in arrival order; ``pop[t]`` takes it. Its metadata, from its
  last beat (which carries the tail flags), is in the port's metadata memory at
  ``Cat(slot, t)``.
* The reader (the transfer stage) reads beats at ``data_addr`` (``Cat(row, t)``) and metadata
  at ``meta_addr``, each a cycle after its enable, moves ``rd_ptr[t]`` one beat with
  ``advance[t]``, and frees a metadata slot with ``release[t]``; ``used[t]`` is the beats
  committed and not yet read. A slot is freed when the reader fetches it, which may be long
  after the descriptor was popped (the packet waits behind the one being transferred).
"""

from amaranth.hdl import Array, Cat, MemoryData, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ...desc.nic.scheduler import STAMP_BITS, index_bits
from ...desc.nic.shape import BEATS_BITS, NicShape
from .layout import NicPacketSignature, nic_layout

__all__ = ["PortQueues"]

# How the beats of the packet at the input are handled (decided on its first beat).
STORE, DROP_FULL, DROP_DISABLED, DROP_BAD = range(4)


class PortQueues(wiring.Component):
    """One port's per-tenant queues; see the module docstring for the contract."""

    def __init__(self, shape: NicShape, queue_beats: int, queue_packets: int, table_size: int,
                 desc_layout):
        self.shape = shape
        self.queue_beats = queue_beats
        self.queue_packets = queue_packets
        self.table_size = table_size
        self.desc_layout = desc_layout
        T = shape.tenants
        qbits, dbits = index_bits(queue_beats), index_bits(queue_packets)
        self.data_mem = MemoryData(shape=shape.data_width + shape.beat_bytes,
                                   depth=T * queue_beats, init=[])
        self.meta_mem = MemoryData(shape=nic_layout(shape).size, depth=T * queue_packets,
                                   init=[])
        super().__init__({
            "i": In(NicPacketSignature(shape)),
            "enable": In(T),
            "now": In(STAMP_BITS),
            "head": Out(desc_layout).array(T),
            "head_valid": Out(T),
            "pop": In(T),
            "used": Out(qbits + 1).array(T),
            "rd_ptr": Out(qbits + 1).array(T),
            "advance": In(T),
            "release": In(T),
            # Cat(row, tenant), as the transfer stage drives it (the memory takes the low
            # bits it has: all of them when there are several tenants).
            "data_addr": In(qbits + shape.tenant_bits),
            "data_en": In(1),
            "data": Out(shape.data_width + shape.beat_bytes),
            "meta_addr": In(dbits + shape.tenant_bits),
            "meta_en": In(1),
            "meta": Out(nic_layout(shape).size),
            "enqueued": Out(T),
            "queue_drop": Out(T),
            "disabled_drop": Out(T),
            "bad": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        sh = self.shape
        T, Q, D, S = sh.tenants, self.queue_beats, self.queue_packets, self.table_size
        qbits, dbits, sbits = index_bits(Q), index_bits(D), index_bits(S)
        desc_layout = self.desc_layout
        port = self.i

        wr_commit = [Signal(qbits + 1, name=f"wr_t{t}") for t in range(T)]
        slot_wp = [Signal(dbits + 1, name=f"slot_t{t}") for t in range(T)]
        slot_rp = [Signal(dbits + 1, name=f"slot_rd_t{t}") for t in range(T)]
        for t in range(T):
            m.d.comb += self.used[t].eq(wr_commit[t] - self.rd_ptr[t])
            with m.If(self.advance[t]):
                m.d.sync += self.rd_ptr[t].eq(self.rd_ptr[t] + 1)
            with m.If(self.release[t]):
                m.d.sync += slot_rp[t].eq(slot_rp[t] + 1)

        fifos = [fifo.SyncFIFOBuffered(width=desc_layout.size, depth=D) for t in range(T)]
        for t in range(T):
            m.submodules[f"desc_t{t}"] = fifos[t]
            m.d.comb += [self.head[t].eq(fifos[t].r_data), self.head_valid[t].eq(fifos[t].r_rdy),
                         fifos[t].r_en.eq(self.pop[t])]
        m.submodules.data_mem = data_mem = Memory(data=self.data_mem)
        m.submodules.meta_mem = meta_mem = Memory(data=self.meta_mem)

        # --- ingress: one beat a cycle, drop instead of back-pressure ----------------------------
        m.d.comb += port.ready.eq(1)
        first = Signal(init=1)
        mode = Signal(2)
        cur_t = Signal(sh.tenant_bits)
        count = Signal(BEATS_BITS)
        tenant = Signal(sh.tenant_bits)
        beat_mode = Signal(2)
        cnt = Signal(BEATS_BITS)
        m.d.comb += [tenant.eq(Mux(first, port.p.meta.tag.tenant, cur_t)),
                     cnt.eq(Mux(first, 0, count))]
        with m.If(first):
            with m.If(port.p.meta.tag.tenant >= T):
                m.d.comb += beat_mode.eq(DROP_BAD)
            with m.Elif(~Array(self.enable[t] for t in range(T))[port.p.meta.tag.tenant]):
                m.d.comb += beat_mode.eq(DROP_DISABLED)
            with m.Else():
                m.d.comb += beat_mode.eq(STORE)
        with m.Else():
            m.d.comb += beat_mode.eq(mode)

        used_t = Signal(qbits + 1)
        wr_t = Signal(qbits + 1)
        slot_t = Signal(dbits + 1)
        slot_free = Signal(dbits + 1)
        desc_room = Signal()
        m.d.comb += [
            used_t.eq(Array(self.used)[tenant]),
            wr_t.eq(Array(wr_commit)[tenant]),
            slot_t.eq(Array(slot_wp)[tenant]),
            slot_free.eq(Array(slot_rp)[tenant]),
            desc_room.eq(Array(f.w_rdy for f in fifos)[tenant]
                         & ((slot_t - slot_free)[:dbits + 1] != D)),
        ]
        fits = Signal()
        m.d.comb += fits.eq(used_t + cnt < Q)
        beat = port.valid
        store = Signal()
        m.d.comb += store.eq(beat & (beat_mode == STORE) & fits)

        wp = data_mem.write_port()
        waddr = Signal(qbits)
        m.d.comb += [
            waddr.eq(wr_t + cnt),
            wp.addr.eq(Cat(waddr, tenant) if T > 1 else waddr),
            wp.data.eq(Cat(port.p.data, port.p.keep)),
            wp.en.eq(store),
        ]
        with m.If(beat):
            m.d.sync += [first.eq(port.p.last), cur_t.eq(tenant), count.eq(cnt + 1),
                         mode.eq(Mux((beat_mode == STORE) & ~fits, DROP_FULL, beat_mode))]

        commit = Signal()
        m.d.comb += commit.eq(store & port.p.last & desc_room)
        keep_bytes = Signal(range(sh.beat_bytes + 1))
        m.d.comb += keep_bytes.eq(sum(port.p.keep[k] for k in range(sh.beat_bytes)))
        desc = Signal(desc_layout)
        m.d.comb += [
            desc.beats.eq(cnt + 1),
            desc.bytes.eq(cnt * sh.beat_bytes + keep_bytes),
            desc.stamp.eq(self.now),
            desc.index.eq(port.p.meta.hdr.flow_hash[:sbits] if S > 1 else 0),
            desc.slot.eq(slot_t[:dbits]),
        ]
        mwp = meta_mem.write_port()
        m.d.comb += [
            mwp.addr.eq(Cat(slot_t[:dbits], tenant) if T > 1 else slot_t[:dbits]),
            mwp.data.eq(port.p.meta.as_value()),
            mwp.en.eq(commit),
        ]
        for t in range(T):
            hit = Signal(name=f"hit_t{t}")
            m.d.comb += [
                hit.eq(tenant == t),
                fifos[t].w_data.eq(desc),
                fifos[t].w_en.eq(commit & hit),
                self.enqueued[t].eq(commit & hit),
                self.queue_drop[t].eq(beat & port.p.last & hit & ~commit
                                      & ((beat_mode == STORE) | (beat_mode == DROP_FULL))),
                self.disabled_drop[t].eq(beat & port.p.last & hit
                                         & (beat_mode == DROP_DISABLED)),
            ]
            with m.If(commit & hit):
                m.d.sync += [wr_commit[t].eq(wr_commit[t] + cnt + 1),
                             slot_wp[t].eq(slot_wp[t] + 1)]
        m.d.comb += self.bad.eq(beat & port.p.last & (beat_mode == DROP_BAD))

        # --- the reader's ports: one read a cycle each, a cycle after the enable ------------------
        rp = data_mem.read_port(domain="sync", transparent_for=())
        mp = meta_mem.read_port(domain="sync", transparent_for=())
        m.d.comb += [
            rp.addr.eq(self.data_addr), rp.en.eq(self.data_en), self.data.eq(rp.data),
            mp.addr.eq(self.meta_addr), mp.en.eq(self.meta_en), self.meta.eq(mp.data),
        ]
        return m
