"""The packet store: dispatch to the regions, keep payloads of header-only chains, reattach.

Contract of :class:`PacketStore`:

* ``i`` takes the scheduler's packets, one whole packet after another; ``tag.region`` and
  ``tag.beats`` are valid on every beat. Region ``r`` gets the whole packet on ``to_region[r]``,
  or, when ``header_only[r]`` is set on its first beat, only its first ``min(beats, H)`` beats
  (``H = shape.header_beats``, ``last`` set on the last of them) while the rest, the payload,
  goes into the central store.
* Admission is decided on the first beat: a header-only packet needs ``beats - H`` free store
  beats; if the store has fewer, the whole packet is dropped (no region and no store beat) and
  counted in ``store_drops`` / ``store_drop_bytes``. A packet whose ``tag.region`` names no
  region (possible when the region count is not a power of two) is dropped whole and counted
  in ``misrouted``. Each drop strobes ``drop_valid`` with ``drop_tenant`` for one cycle.
* ``o`` gives the regions' packets back, round-robin across regions at packet granularity, one
  beat a cycle: the tag as dispatched comes from a per-region side FIFO kept in dispatch order
  (a chain is in order and gives one packet out per packet in: NT contract rule 1). For a
  header-only packet with a payload the region's last beat loses ``last`` and the stored beats
  follow, with the region's metadata and the tail flags of the original last beat.
* Header-only chains must keep the header length in whole beats: the payload is appended as
  it was stored, so the region's last header beat must be full. If it is not (an NT shortened
  or lengthened the header by a part of a beat), the region's packet leaves as it came, with
  ``keep_error`` set on its last beat, its stored payload is freed unsent and the packet is
  counted in ``header_errors``. (The chain builder only marks a chain header-only when every NT
  in it keeps the length, so this is an error outcome, not a mode.)
* ``tag.beats`` is trusted for the split but not for the store's safety: a header-only packet
  longer than its tag says loses the extra beats, one shorter than its header part still
  ends in the store with an empty beat; both carry ``keep_error`` on their last beat.
* ``region_free[r]`` is the room in region ``r``'s input buffer in beats and ``region_empty[r]``
  tells that buffer is empty; both read 0 while the side FIFO (``in_flight`` packets) or the
  buffer's packet-metadata FIFO is full, or while the region is stalled. The scheduler uses
  them so that ``i`` rarely waits.
* ``i`` and ``o`` are shared by every tenant, so a region that stops may hold either only for
  ``stall_cycles`` (0 turns the watchdogs off). *Input*: a packet larger than the region's
  buffer that the scheduler admitted into the empty region waits on ``i`` until the region
  takes its beats; if the region moves no beat in or out for ``stall_cycles`` consecutive
  cycles (cycles in which its output waits for ``o`` do not count: that is the NIC's
  backpressure, not the region's stall) the region is *stalled*: the rest of the packet is
  dropped, the region gets a last beat (one zero byte, ``length_error``) when its buffer has
  room, so it sees a whole packet, and that packet is discarded when it comes back, counted
  in ``stall_drops`` (and strobing ``drop_valid``); if it has already begun to leave on ``o``
  (the region passes beats through) it cannot be discarded, and leaves cut short as below. A
  header-only packet's header part is never cut (it is at most ``H`` beats, which fit an empty
  buffer). *Output*: a region that gives no beat half-way through a packet on ``o`` for
  ``stall_cycles`` (while none of that packet's beats are still to come in on ``i``) is
  stalled too: the packet ends on ``o`` with one zero byte flagged ``length_error``, counted
  in ``stall_cuts`` (once per packet), and the rest of it is discarded as the region gives it.
  Packets for a stalled region that reach ``i`` are dropped whole and counted in
  ``stall_drops``; ``region_stalled[r]`` stays set until the region has given back every
  packet it held.

Parts, each a component with its own contract and test: a region's input buffer and side
FIFO (:mod:`.region_input`, ``RegionInput``), the free list of payload slots
(:mod:`.free_list`, ``FreeList``) and the two stall watchdogs' counts (:mod:`.watchdog`,
``Watchdog``). The store itself dispatches and admits packets, writes and
reattaches payloads and runs the stall watchdogs.

How the store shares one memory: beat slots come from the free list, which starts with every
slot; each region's payload beats form a linked list through a next-pointer memory, and each
packet's first slot travels in its side-FIFO entry, so no slot is set aside for any region. A
slot freed into an empty list can be taken the next cycle.
A next pointer is written when the following beat of the same packet is stored, so a beat is
*settled* (readable) once its successor is stored or it ends its packet: the reader follows
``avail[r]``, the settled beats of region ``r``, and may run right behind the writer.

Region time: ``region_busy[r]`` counts the cycles ``to_region[r].valid`` is high and
``region_cycles[t]`` the same cycles, summed over regions, attributed to the tenant of the packet
at the region's input: the region time each tenant's packets take, for the fairness figures.

Limits: the free list assumes every slot is free at reset; a reset with packets in the store
needs the whole design reset (as the NIC does). A region that takes a beat at least every
``stall_cycles`` cycles is slow, not stalled: it holds ``i`` as long as it takes (its tenant is
charged the time in ``region_cycles``). A stalled header-only region keeps the payloads of
the packets inside it in the shared memory until it gives them back.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory, MemoryData
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

from ..csr.block import csr_signature
from ..parser.meta import meta_layout
from ..stream import PacketSignature, packet_layout
from ...desc.nic.blocks import store_block
from ...desc.nic.shape import BEATS_BITS, NicShape
from .free_list import FreeList
from .layout import NicPacketSignature, tag_layout
from .region_input import RegionInput, region_beat_layout, region_packet_layout
from .watchdog import Watchdog

__all__ = ["PacketStore", "MAX_STORE_BEATS"]

MAX_STORE_BEATS = 1 << 16


def _check_int(thing, value, low, high):
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{thing} must be an integer from {low} to {high}, not {value!r}")
    return value


def _tail(flags):
    return Cat(flags.length_error, flags.keep_error)


class PacketStore(wiring.Component):
    """Dispatch to R regions, keep header-only chains' payloads, reattach them; see the module
    docstring for the contract.

    Parameters
    ----------
    shape : NicShape
    store_beats : int
        Beats of the shared payload memory (a power of two).
    region_fifo_beats : int
        Beats of each region's input buffer.
    in_flight : int
        Packets each region may hold (its side FIFO of tags).
    stall_cycles : int
        Cycles a region may hold ``i`` without taking a beat before it is declared stalled
        (0: never).
    """

    def __init__(self, shape: NicShape, store_beats: int = 1024, region_fifo_beats: int = 64,
                 in_flight: int = 64, stall_cycles: int = 1024):
        if not isinstance(shape, NicShape):
            raise TypeError(f"Packet store shape must be a NicShape, not {shape!r}")
        if shape.header_beats < 1:
            raise ValueError(f"Packet store header bytes must cover at least one beat "
                             f"({shape.beat_bytes} bytes), not {shape.header_bytes!r}")
        _check_int("Packet store store_beats", store_beats, 2, MAX_STORE_BEATS)
        if store_beats & (store_beats - 1):
            raise ValueError(f"Packet store store_beats must be a power of two, "
                             f"not {store_beats!r}")
        _check_int("Packet store region_fifo_beats", region_fifo_beats, 2,
                   (1 << BEATS_BITS) - 1)
        _check_int("Packet store in_flight", in_flight, 2, 1 << 12)
        _check_int("Packet store stall_cycles", stall_cycles, 0, 1 << 24)
        if stall_cycles and region_fifo_beats < shape.header_beats:
            raise ValueError(f"Packet store region_fifo_beats ({region_fifo_beats}) must hold "
                             f"a header part ({shape.header_beats} beats): the stall watchdog "
                             f"never cuts one")
        self.shape = shape
        self.store_beats = store_beats
        self.region_fifo_beats = region_fifo_beats
        self.in_flight = in_flight
        self.stall_cycles = stall_cycles
        self.slot_bits = exact_log2(store_beats)
        w, bb, regions = shape.data_width, shape.beat_bytes, shape.regions
        # One stored payload beat; ``end`` marks the packet's last, ``tail`` its tail flags.
        self.word_layout = data.StructLayout({"data": w, "keep": bb, "end": 1, "tail": 2})
        self.side_layout = data.StructLayout({
            "tag": tag_layout(shape), "payload": 1, "first_slot": self.slot_bits})
        self.payload_data = MemoryData(shape=self.word_layout, depth=store_beats, init=[])
        self.next_data = MemoryData(shape=self.slot_bits, depth=store_beats, init=[])
        region_sig = PacketSignature(w, meta_layout(shape.header_bytes))
        super().__init__({
            "i": In(NicPacketSignature(shape)),
            "header_only": In(regions),
            "to_region": Out(region_sig).array(regions),
            "from_region": In(region_sig).array(regions),
            "o": Out(NicPacketSignature(shape)),
            "region_free": Out(data.ArrayLayout(BEATS_BITS, regions)),
            "region_empty": Out(regions),
            "region_in_flight": Out(data.ArrayLayout(range(in_flight + 1), regions)),
            # Its register block (desc store_block): every counter, read by name.
            "csr": Out(csr_signature(store_block(shape).registers)),
            "drop_valid": Out(1),
            "drop_tenant": Out(shape.tenant_bits),
        })

    def elaborate(self, platform):
        m = Module()
        shape = self.shape
        w, bb, n_regions, hbeats = (shape.data_width, shape.beat_bytes, shape.regions,
                                    shape.header_beats)
        csr = self.csr
        n_slots, slot_bits = self.store_beats, self.slot_bits
        hdr_layout = meta_layout(shape.header_bytes)
        beat_layout = region_beat_layout(shape)

        # Per region: its input buffer and its side FIFO of tags in dispatch order.
        inputs = []
        for r in range(n_regions):
            region_input = RegionInput(shape, self.side_layout, self.region_fifo_beats,
                                       self.in_flight)
            m.submodules[f"input{r}"] = region_input
            wiring.connect(m, region_input.o, wiring.flipped(self.to_region[r]))
            inputs.append(region_input)

        m.submodules.payload_mem = payload_mem = Memory(data=self.payload_data)
        m.submodules.next_mem = next_mem = Memory(data=self.next_data)
        pay_w = payload_mem.write_port()
        pay_r = payload_mem.read_port()
        next_w = next_mem.write_port()
        next_r = next_mem.read_port()

        # The free slots: the writer takes the head slot (``pop``), the reader frees one.
        m.submodules.free_list = free_list = FreeList(n_slots)
        pop, free_count, free_head = free_list.take, free_list.count, free_list.head
        used = Signal(range(n_slots + 1))
        m.d.comb += [used.eq(n_slots - free_count), csr.used.eq(used)]
        with m.If(used > csr.peak):
            m.d.sync += csr.peak.eq(used)

        # --- Input side: dispatch, admission, payload writes -----------------------------
        tag = self.i.p.meta.tag
        in_hdr = self.i.p.meta.hdr
        first = Signal(init=1)
        pkt_region = Signal(shape.region_bits)
        pkt_header_only = Signal()
        pkt_drop = Signal()
        pkt_misrouted = Signal()
        pkt_left = Signal(BEATS_BITS)          # payload beats still to store
        pkt_index = Signal(range(hbeats + 1))  # beats taken, saturating at H
        prev_valid = Signal()                  # a payload beat of this packet was stored...
        prev_slot = Signal(slot_bits)          # ... here; its next pointer is still unwritten
        pkt_stall = Signal()                   # dropped for a stalled region (or cut)
        pkt_silent = Signal()                  # cut after it began to leave: not a drop
        # Stall watchdog state, per region (see the module docstring).
        stalled = Signal(n_regions)            # packets for the region are dropped
        owe_end = Signal(n_regions)            # a cut packet still needs its last beat
        discard_pending = Signal(n_regions)    # the cut packet has not come back yet

        region = Signal(shape.region_bits)
        header_only = Signal()
        drop = Signal()
        misrouted = Signal()
        left = Signal(BEATS_BITS)
        index = Signal(range(hbeats + 1))
        has_payload = Signal()
        declared = Signal(BEATS_BITS)
        # A region index past the last region reads header_only 0 (it is dropped anyway).
        pad = Const(0, (1 << shape.region_bits) - n_regions)
        header_only_bits = Cat(self.header_only, pad)
        stalled_bits = Cat(stalled, pad)
        stalled_first = Signal()   # the packet at a first beat is for a stalled region
        m.d.comb += [
            misrouted.eq(tag.region >= n_regions),
            has_payload.eq(header_only_bits.bit_select(tag.region, 1) & (tag.beats > hbeats)),
            declared.eq(tag.beats - hbeats),
            stalled_first.eq(~misrouted & stalled_bits.bit_select(tag.region, 1)),
        ]
        with m.If(first):
            m.d.comb += [
                region.eq(tag.region),
                header_only.eq(header_only_bits.bit_select(tag.region, 1)),
                drop.eq(misrouted | stalled_first | (has_payload & (declared > free_count))),
                left.eq(Mux(has_payload, declared, 0)),
                index.eq(0),
            ]
        with m.Else():
            m.d.comb += [
                region.eq(pkt_region),
                header_only.eq(pkt_header_only),
                drop.eq(pkt_drop),
                left.eq(pkt_left),
                index.eq(pkt_index),
            ]

        in_header = Signal()      # the beat belongs to the region
        to_store = Signal()       # a payload beat with room reserved for it
        ends_early = Signal()     # the packet ends inside its header part but declared a payload
        at_header_end = Signal()
        m.d.comb += [
            in_header.eq(~drop & (~header_only | (index < hbeats))),
            at_header_end.eq(header_only & (index == hbeats - 1)),
            to_store.eq(~drop & header_only & (index >= hbeats) & (left != 0)),
            ends_early.eq(in_header & self.i.p.last & (left != 0)),
        ]

        beat_w_rdy = Array(Signal(name=f"beat_w_rdy{r}") for r in range(n_regions))
        packet_w_rdy = Array(Signal(name=f"packet_w_rdy{r}") for r in range(n_regions))
        for r in range(n_regions):
            m.d.comb += [beat_w_rdy[r].eq(inputs[r].beats.ready),
                         packet_w_rdy[r].eq(inputs[r].packets.ready)]
        with m.If(drop):
            m.d.comb += self.i.ready.eq(1)
        with m.Elif(first):
            m.d.comb += self.i.ready.eq(beat_w_rdy[region] & packet_w_rdy[region])
        with m.Elif(in_header):
            m.d.comb += self.i.ready.eq(beat_w_rdy[region])
        with m.Else():
            m.d.comb += self.i.ready.eq(1)
        take = Signal()
        m.d.comb += take.eq(self.i.valid & self.i.ready)

        # Beats to the region: the header part gets ``last`` forced on its H-th beat; a
        # packet longer than its tag says (nothing declared beyond the header) is cut there.
        in_tail = _tail(in_hdr.flags)
        region_beat = Signal(beat_layout)
        cut = Signal()
        m.d.comb += [
            cut.eq(at_header_end & ~self.i.p.last & (left == 0)),
            region_beat.data.eq(self.i.p.data),
            region_beat.keep.eq(self.i.p.keep),
            region_beat.last.eq(self.i.p.last | at_header_end),
            region_beat.tail.eq(in_tail | Cat(Const(0, 1), cut)),
        ]
        packet_entry = Signal(region_packet_layout(shape, self.side_layout))
        m.d.comb += [
            packet_entry.hdr.eq(in_hdr),
            packet_entry.tenant.eq(tag.tenant),
            packet_entry.side.tag.eq(tag),
            packet_entry.side.payload.eq(left != 0),
            packet_entry.side.first_slot.eq(free_head),
        ]
        # The last beat a cut packet owes its region: one zero byte, flagged as a length error.
        owed_beat = Signal(beat_layout)
        m.d.comb += [owed_beat.keep.eq(1), owed_beat.last.eq(1), owed_beat.tail.eq(0b01)]
        owed_writes = []
        for r in range(n_regions):
            mine = take & ~drop & (region == r)
            input_write = Signal(name=f"input_write{r}")
            owed_write = Signal(name=f"owed_write{r}")
            owed_writes.append(owed_write)
            m.d.comb += [
                input_write.eq(mine & in_header),
                owed_write.eq(owe_end[r] & inputs[r].beats.ready & ~input_write),
                inputs[r].beats.payload.eq(Mux(owed_write, owed_beat, region_beat)),
                inputs[r].beats.valid.eq(input_write | owed_write),
                inputs[r].packets.payload.eq(packet_entry),
                inputs[r].packets.valid.eq(mine & first),
            ]

        # Payload beats to the store. The last one ends the packet: the real last beat, or
        # the last declared one (the rest is cut), or an empty beat for a packet that ended
        # inside its header part, so every side entry with a payload finds an end.
        store_write = Signal()
        word = Signal(self.word_layout)
        word_end = Signal()
        m.d.comb += [
            store_write.eq(take & (to_store | ends_early)),
            word_end.eq(ends_early | self.i.p.last | (left == 1)),
            word.data.eq(self.i.p.data),
            word.keep.eq(Mux(ends_early, 0, self.i.p.keep)),
            word.end.eq(word_end),
            word.tail.eq(Mux(self.i.p.last, in_tail, 0)
                         | Cat(Const(0, 1), ends_early | (word_end & ~self.i.p.last))),
            pop.eq(store_write),
            pay_w.addr.eq(free_head),
            pay_w.data.eq(word),
            pay_w.en.eq(store_write),
            next_w.addr.eq(prev_slot),
            next_w.data.eq(free_head),
            next_w.en.eq(store_write & prev_valid),
        ]
        settled = Signal(2)   # beats of ``region`` that became readable this cycle
        m.d.comb += settled.eq(Mux(store_write, prev_valid + word_end, 0))

        with m.If(take):
            m.d.sync += [
                first.eq(self.i.p.last),
                pkt_region.eq(region),
                pkt_header_only.eq(header_only),
                pkt_drop.eq(drop),
                pkt_left.eq(left - to_store),
                pkt_index.eq(Mux(index == hbeats, hbeats, index + 1)),
            ]
            with m.If(first):
                m.d.sync += [pkt_misrouted.eq(misrouted), pkt_stall.eq(stalled_first),
                             pkt_silent.eq(0)]
            with m.If(store_write):
                m.d.sync += [prev_valid.eq(~word_end), prev_slot.eq(free_head)]
            with m.Elif(first):
                m.d.sync += prev_valid.eq(0)

        # Whole-packet drops, counted on the last beat.
        is_misrouted = Signal()
        is_stall = Signal()
        m.d.comb += [is_misrouted.eq(Mux(first, misrouted, pkt_misrouted)),
                     is_stall.eq(Mux(first, stalled_first, pkt_stall))]
        keep_bytes = Signal(range(bb + 1))
        m.d.comb += keep_bytes.eq(sum(self.i.p.keep))
        drop_tenant = Signal(shape.tenant_bits)
        # The rest of a packet cut after it began to leave is dropped uncounted: the packet
        # leaves (cut short) and is counted as a stall cut.
        with m.If(take & drop & ~(~first & pkt_silent)):
            with m.If(~is_misrouted & ~is_stall):
                m.d.sync += csr.drop_bytes.eq(csr.drop_bytes + keep_bytes)
            with m.If(self.i.p.last):
                with m.If(is_misrouted):
                    m.d.sync += csr.misrouted.eq(csr.misrouted + 1)
                with m.Elif(is_stall):
                    m.d.sync += csr.stall_drops.eq(csr.stall_drops + 1)
                with m.Else():
                    m.d.sync += csr.drops.eq(csr.drops + 1)
                m.d.sync += [self.drop_valid.eq(1), drop_tenant.eq(tag.tenant)]
            with m.Else():
                m.d.sync += self.drop_valid.eq(0)
        with m.Else():
            m.d.sync += self.drop_valid.eq(0)
        m.d.comb += self.drop_tenant.eq(drop_tenant)

        # --- Region inputs, occupancy and region time -------------------------------------
        for r in range(n_regions):
            region_input = inputs[r]
            m.d.comb += [
                region_input.stalled.eq(stalled[r]),
                self.region_free[r].eq(region_input.free),
                self.region_empty[r].eq(region_input.empty),
                self.region_in_flight[r].eq(region_input.in_flight),
                getattr(csr, f"r{r}_in_flight").eq(region_input.in_flight),
            ]
            busy = getattr(csr, f"r{r}_busy")
            m.d.sync += busy.eq(busy + self.to_region[r].valid)
        for t in range(shape.tenants):
            at_input = Cat(self.to_region[r].valid & (inputs[r].head_tenant == t)
                           for r in range(n_regions))
            count = Signal(range(n_regions + 1), name=f"tenant_busy{t}")
            m.d.comb += count.eq(sum(at_input))
            cycles = getattr(csr, f"t{t}_region_cycles")
            m.d.sync += cycles.eq(cycles + count)

        # --- Output side: round-robin over regions, tag restore, payload reattach ---------
        cur = Signal(range(n_regions))   # the region being served (or the next candidate)
        busy = Signal()                  # a beat of the current packet has left
        in_payload = Signal()            # sending the stored payload
        in_drain = Signal()              # freeing the payload of a packet that ended early
        have_word = Signal()             # pay_r.data holds a word of the current packet
        started = Signal()               # the current packet's payload reads have begun
        more = Signal()                  # (not have_word) the last word taken was not its end
        next_addr = Signal(slot_bits)    # (not have_word) where the next word is
        word_slot = Signal(slot_bits)    # the slot of the word in pay_r.data
        hdr_reg = Signal(hdr_layout)     # the region's last metadata, for the payload beats
        cutting = Signal()               # ending a packet its region stopped giving
        skip_rest = Signal(n_regions)    # the rest of a cut packet is discarded as it comes

        req = [Signal(name=f"req{r}") for r in range(n_regions)]
        for r in range(n_regions):
            m.d.comb += req[r].eq(self.from_region[r].valid & ~skip_rest[r]
                                  & inputs[r].sides.valid)

        sel = Signal(packet_layout(w, hdr_layout))
        sel_valid = Signal()
        side = Signal(self.side_layout)
        side_rdy = Signal()
        avail = [Signal(range(n_slots + 1), name=f"avail{r}") for r in range(n_regions)]
        avail_any = Signal()
        discard_cur = Signal()   # the region's packet is a cut one, to be discarded
        grant = Signal(range(n_regions))
        grant_any = Signal()
        with m.Switch(cur):
            for c in range(n_regions):
                with m.Case(c):
                    m.d.comb += [
                        sel.eq(self.from_region[c].p),
                        sel_valid.eq(self.from_region[c].valid & ~skip_rest[c]),
                        side.eq(inputs[c].sides.payload),
                        side_rdy.eq(inputs[c].sides.valid),
                        avail_any.eq(avail[c] != 0),
                        # After a cut no packet enters the region until the cut one is
                        # back, so it is the side FIFO's only entry then.
                        discard_cur.eq(discard_pending[c] & (inputs[c].in_flight == 1)),
                    ]
                    # Round robin: the first other region after ``c`` with a packet waiting.
                    order = [(c + k) % n_regions for k in range(1, n_regions)]
                    if order:
                        with m.If(req[order[0]]):
                            m.d.comb += [grant.eq(order[0]), grant_any.eq(1)]
                        for r in order[1:]:
                            with m.Elif(req[r]):
                                m.d.comb += [grant.eq(r), grant_any.eq(1)]

        stored = self.word_layout(pay_r.data)
        in_header_phase = Signal()
        req_cur = Signal()
        keep_full = Signal()
        header_error = Signal()
        out_last = Signal()
        m.d.comb += [
            in_header_phase.eq(~in_payload & ~in_drain),
            req_cur.eq(sel_valid & side_rdy),
            keep_full.eq(sel.keep.all()),
            header_error.eq(sel.last & side.payload & ~keep_full),
            out_last.eq(sel.last & ~(side.payload & keep_full)),
        ]
        out_hdr = Signal(hdr_layout)
        consume = Signal()
        with m.If(in_header_phase & cutting):
            # The last beat of a packet cut short: one zero byte, flagged as a length error.
            m.d.comb += [
                self.o.valid.eq(~discard_cur),
                self.o.p.keep.eq(1),
                self.o.p.last.eq(1),
                out_hdr.eq(hdr_reg),
                out_hdr.flags.length_error.eq(1),
                out_hdr.flags.keep_error.eq(0),
            ]
        with m.Elif(in_header_phase):
            m.d.comb += [
                self.o.valid.eq(req_cur & ~discard_cur),
                self.o.p.data.eq(sel.data),
                self.o.p.keep.eq(sel.keep),
                self.o.p.last.eq(out_last),
                out_hdr.eq(sel.meta),
                out_hdr.flags.length_error.eq(out_last & sel.meta.flags.length_error),
                out_hdr.flags.keep_error.eq(out_last & (sel.meta.flags.keep_error
                                                        | header_error)),
            ]
        with m.Else():
            m.d.comb += [
                self.o.valid.eq(in_payload & have_word),
                self.o.p.data.eq(stored.data),
                self.o.p.keep.eq(stored.keep),
                self.o.p.last.eq(stored.end),
                out_hdr.eq(hdr_reg),
                out_hdr.flags.length_error.eq(stored.end & stored.tail[0]),
                out_hdr.flags.keep_error.eq(stored.end & stored.tail[1]),
                consume.eq(have_word & (in_drain | self.o.ready)),
            ]
        m.d.comb += [self.o.p.meta.hdr.eq(out_hdr), self.o.p.meta.tag.eq(side.tag)]
        for r in range(n_regions):
            m.d.comb += self.from_region[r].ready.eq(
                (in_header_phase & ~cutting & (cur == r) & side_rdy
                 & (self.o.ready | discard_cur)) | skip_rest[r])

        header_take = Signal()
        cut_take = Signal()
        packet_done = Signal()
        m.d.comb += [
            header_take.eq(in_header_phase & ~cutting & req_cur
                           & (self.o.ready | discard_cur)),
            cut_take.eq(in_header_phase & cutting & (self.o.ready | discard_cur)),
            # A packet whose header came back the wrong length has left on ``o`` but still
            # holds its side entry until its payload is drained.
            packet_done.eq((header_take & sel.last & ~side.payload) | (consume & stored.end)
                           | (cut_take & ~side.payload)),
        ]
        with m.If(header_take):
            m.d.sync += [busy.eq(1), hdr_reg.eq(sel.meta)]
            with m.If(sel.last & side.payload):
                with m.If(keep_full):
                    m.d.sync += in_payload.eq(1)
                with m.Else():
                    m.d.sync += [in_drain.eq(1), csr.header_errors.eq(csr.header_errors + 1)]
        with m.If(cut_take):
            # A cut header-only packet's stored payload is freed unsent.
            m.d.sync += [cutting.eq(0), in_drain.eq(side.payload)]
        with m.If(packet_done):
            m.d.sync += [busy.eq(0), in_payload.eq(0), in_drain.eq(0), started.eq(0)]
        with m.If(grant_any & (packet_done | (~busy & in_header_phase & ~req_cur))):
            m.d.sync += cur.eq(grant)
        for r in range(n_regions):
            m.d.comb += inputs[r].sides.ready.eq(packet_done & (cur == r))

        # Payload reads: one word ahead, from the packet's first slot along the next pointers,
        # only over settled beats. Prefetch starts once the packet is committed (its first
        # header beat is valid, and valid holds), so the payload follows the header gaplessly.
        committed = Signal()
        more_to_read = Signal()
        issue = Signal()
        read_addr = Signal(slot_bits)
        m.d.comb += [
            committed.eq(busy | req_cur),
            more_to_read.eq(Mux(started, Mux(have_word, ~stored.end, more),
                                side.payload & side_rdy)),
            issue.eq(committed & more_to_read & (~have_word | consume) & avail_any),
            read_addr.eq(Mux(started, Mux(have_word, next_r.data, next_addr), side.first_slot)),
            pay_r.addr.eq(read_addr),
            pay_r.en.eq(issue),
            next_r.addr.eq(read_addr),
            next_r.en.eq(issue),
            free_list.give.eq(consume),
            free_list.slot.eq(word_slot),
        ]
        with m.If(issue):
            m.d.sync += [have_word.eq(1), started.eq(1), word_slot.eq(read_addr)]
        with m.Elif(consume):
            m.d.sync += [have_word.eq(0), next_addr.eq(next_r.data), more.eq(~stored.end)]
        for r in range(n_regions):
            m.d.sync += avail[r].eq(avail[r] + Mux(region == r, settled, 0)
                                    - (issue & (cur == r)))

        # --- Stall watchdogs: a region may hold the shared input or output only a while ------
        m.d.comb += [getattr(csr, f"r{r}_stalled").eq(stalled[r]) for r in range(n_regions)]
        cut_counted = Signal(n_regions)   # the region's packet on ``o`` is already a stall cut
        for r in range(n_regions):
            with m.If(((header_take & sel.last) | cut_take) & discard_cur & (cur == r)):
                m.d.sync += discard_pending[r].eq(0)
            with m.If(packet_done & (cur == r)):
                m.d.sync += cut_counted[r].eq(0)
            with m.If(~owe_end[r] & ~discard_pending[r] & ~skip_rest[r]
                      & (inputs[r].in_flight == 0)):
                m.d.sync += stalled[r].eq(0)
            with m.If(owed_writes[r]):
                m.d.sync += owe_end[r].eq(0)
            with m.If(self.from_region[r].valid & self.from_region[r].p.last & skip_rest[r]):
                m.d.sync += skip_rest[r].eq(0)
        if not self.stall_cycles:
            return m

        # Input: ``i`` waits on a region that takes no beat (and whose output is not merely
        # waiting for ``o``, the NIC's backpressure). A header part never counts.
        m.submodules.input_watchdog = in_dog = Watchdog(self.stall_cycles)
        in_waiting = Signal()
        moved = Signal()      # the region took a beat in or gave one out
        blocked = Signal()    # the region's output waits for ``o``
        in_fire = Signal()
        # The cut packet has begun to leave on ``o`` (the region passes beats through): it
        # cannot be discarded any more, so it leaves cut short like an output cut.
        on_output = Signal()
        took_in = Array(Signal(name=f"took_in{r}") for r in range(n_regions))
        gave_out = Array(Signal(name=f"gave_out{r}") for r in range(n_regions))
        out_waits = Array(Signal(name=f"out_waits{r}") for r in range(n_regions))
        only_entry = Array(Signal(name=f"only_entry{r}") for r in range(n_regions))
        for r in range(n_regions):
            into, outof = self.to_region[r], self.from_region[r]
            m.d.comb += [took_in[r].eq(into.valid & into.ready),
                         gave_out[r].eq(outof.valid & outof.ready),
                         out_waits[r].eq(outof.valid & ~outof.ready),
                         only_entry[r].eq(inputs[r].in_flight == 1)]
        m.d.comb += [
            in_waiting.eq(self.i.valid & ~self.i.ready & ~drop & (first | ~header_only)),
            moved.eq(took_in[region] | gave_out[region]),
            blocked.eq(out_waits[region]),
            # A beat moved ends the wait; the region's output waiting for ``o`` pauses it.
            in_dog.waiting.eq(in_waiting & ~moved),
            in_dog.paused.eq(blocked),
            in_fire.eq(in_dog.fire),
            on_output.eq(~first & busy & (cur == region) & only_entry[region]),
        ]
        with m.If(in_fire):
            # A first beat is dropped whole next cycle (its region now reads stalled); a
            # packet under way is cut: counted as a stall drop and discarded when it comes
            # back, or, if it has begun to leave, let leave cut short and counted as a cut.
            with m.If(~first):
                m.d.sync += [pkt_drop.eq(1), pkt_stall.eq(~on_output),
                             pkt_silent.eq(on_output)]
            for r in range(n_regions):
                with m.If(region == r):
                    m.d.sync += stalled[r].eq(1)
                    with m.If(~first):
                        m.d.sync += [owe_end[r].eq(1), discard_pending[r].eq(~on_output)]
                    with m.If(on_output):
                        m.d.sync += cut_counted[r].eq(1)

        # Output: the region being served stops giving beats half-way through a packet.
        # Cycles in which that packet's own beats are still coming in on ``i`` do not count
        # (the region may be waiting for them); the input watchdog sees to those.
        m.submodules.output_watchdog = out_dog = Watchdog(self.stall_cycles)
        out_waiting = Signal()
        out_fire = Signal()
        feeding = Signal()   # ``i`` is inside a packet for the region being served
        cut_counted_cur = Signal()
        m.d.comb += [
            feeding.eq(~first & ~drop & (region == cur)),
            out_waiting.eq(in_header_phase & busy & ~cutting & ~sel_valid & ~feeding),
            out_dog.waiting.eq(out_waiting),
            out_fire.eq(out_dog.fire),
            cut_counted_cur.eq(cut_counted.bit_select(cur, 1)),
        ]
        with m.If(out_fire):
            m.d.sync += cutting.eq(1)
            for r in range(n_regions):
                with m.If(cur == r):
                    m.d.sync += [skip_rest[r].eq(1), stalled[r].eq(1)]
        # A packet cut going in (discarded) or already counted is not counted again.
        m.d.sync += csr.stall_cuts.eq(csr.stall_cuts + (in_fire & on_output)
                                       + (out_fire & ~discard_cur & ~cut_counted_cur))
        return m
