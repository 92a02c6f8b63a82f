"""cocotb testbench: :class:`~supernic.hw.nic.store.PacketStore` with stub regions, against
:class:`~supernic.sim.nic.store.PacketStoreModel`.

:class:`StoreTestTop` wraps the store with ``R`` :class:`StubRegion` s (a small FIFO that adds
``r + 1`` to byte 0 of each packet, trims the last byte of packets whose byte 0 ends in hex F
when their last beat holds two bytes or more, and stalls both sides from an LFSR) and gives
AXI4-Stream in and out with the NIC layout (``hdr`` and ``tag``) on ``tuser``. The trim makes a
header-only region's last header beat partial now and then: the store's header-length error
path. ``header_only`` and ``stall_level`` (stall probability out of 256, per side and cycle)
are inputs the bench sets once.

``random_traffic``: random frames from 1 byte to past the store's size, random regions (a few
misrouted past the last region), some ``tag.beats`` wrong, random metadata and tail flags,
random idle and backpressure. Every output must equal the model's (bytes, metadata on the first
and last beat, tag), per region in dispatch order; packets missing from the output must be
ones the store may refuse (header-only with a payload); every packet is delivered or counted
(``in == out + store_drops + misrouted``, bytes too); the store empties.

``saturation``: back-to-back frames of one size, no idle, no backpressure, no stalls: beats
per cycle in and out.

``stalled_region``: region 0 freezes (takes and gives nothing) with a packet larger than its
buffer half-way in; packets for region 1 behind it must still pass, the cut packet and a later
one for region 0 are counted as stall drops, and once region 0 thaws its earlier packet leaves,
the cut one does not, and region 0 serves again. Then region 1 freezes half-way through giving
a packet back: that packet leaves cut short (its beats so far and one zero byte, flagged
``length_error``), region 0's packet behind it passes, and once region 1 thaws the rest of the
cut packet is discarded and region 1 serves again.
"""

import collections
import copy
import hashlib
import random
from dataclasses import asdict
from pathlib import Path

import cocotb
from cocotb.triggers import RisingEdge
from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from supernic.hw.axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.layout import nic_layout
from supernic.hw.nic.store import PacketStore
from supernic.desc.meta import TAIL_FLAGS
from supernic.hw.parser.meta import meta_layout
from supernic.hw.stream import PacketSignature, packet_layout
from supernic.sim.bfm import StreamHarness, frame_to_beats, pattern, start_and_reset
from supernic.sim.layout_codec import decode, diff as _diff, encode
from supernic.sim.nic.store import PacketStoreModel, beats_of, last_beat_bytes
from supernic.sim.tb.bench_env import (
    design as read_design, env as _env, write_result as _write_result)

__all__ = ["StubRegion", "StoreTestTop", "stub_region_fn", "store_simulator"]

MAX_REPORTED = 5
QUIET_CYCLES = 300
#: The bench's port -> the store's register (its ``csr``, desc store_block).
COUNTERS = {"store_drops": "drops", "store_drop_bytes": "drop_bytes",
            "header_errors": "header_errors", "misrouted": "misrouted",
            "stall_drops": "stall_drops", "stall_cuts": "stall_cuts", "store_used": "used",
            "store_peak": "peak"}


class StubRegion(wiring.Component):
    """A stand-in chain: in order, one packet out per packet in, byte 0 plus ``index + 1``.
    While ``freeze`` is high it takes no beat and shows no new one (a stopped NT)."""

    def __init__(self, data_width, meta_layout, index, seed):
        self.index, self.seed = index, seed
        self.layout = packet_layout(data_width, meta_layout)
        sig = PacketSignature(data_width, meta_layout)
        super().__init__({"i": In(sig), "o": Out(sig), "stall_level": In(8),
                          "freeze": In(1)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = q = SyncFIFOBuffered(width=self.layout.size, depth=4)
        lfsr = Signal(16, init=self.seed)
        m.d.sync += lfsr.eq((lfsr >> 1) ^ Mux(lfsr[0], 0xB400, 0))
        stall_in, stall_out = Signal(), Signal()
        m.d.comb += [stall_in.eq(lfsr[:8] < self.stall_level),
                     stall_out.eq(lfsr[8:] < self.stall_level)]

        first = Signal(init=1)
        trim_reg = Signal()
        trim = Signal()
        beat = Signal(self.layout)
        p = self.i.p
        m.d.comb += [
            trim.eq(Mux(first, p.data[:4] == 0xF, trim_reg)),
            beat.eq(p),
            beat.data.eq(Mux(first, Cat((p.data[:8] + self.index + 1)[:8], p.data[8:]),
                             p.data)),
            beat.keep.eq(Mux(p.last & trim & p.keep[1], p.keep >> 1, p.keep)),
            q.w_data.eq(beat),
            q.w_en.eq(self.i.valid & ~stall_in & ~self.freeze),
            self.i.ready.eq(q.w_rdy & ~stall_in & ~self.freeze),
        ]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [first.eq(p.last), trim_reg.eq(trim)]

        # Once shown, a beat stays valid until taken (stream contract).
        shown = Signal()
        show = Signal()
        m.d.comb += [
            show.eq(q.r_rdy & (shown | (~stall_out & ~self.freeze))),
            self.o.valid.eq(show),
            self.o.p.eq(q.r_data),
            q.r_en.eq(show & self.o.ready),
        ]
        m.d.sync += shown.eq(show & ~self.o.ready)
        return m


def stub_region_fn(region, frame, beat_bytes):
    """The model of :class:`StubRegion`."""
    out = bytearray(frame)
    trim = frame[0] & 0xF == 0xF and last_beat_bytes(len(frame), beat_bytes) >= 2
    out[0] = (out[0] + region + 1) & 0xFF
    return bytes(out[:-1] if trim else out)


class StoreTestTop(wiring.Component):
    def __init__(self, shape: NicShape, store_beats, region_fifo_beats, in_flight,
                 stall_cycles):
        self.shape = shape
        self.args = store_beats, region_fifo_beats, in_flight, stall_cycles
        self.user_layout = nic_layout(shape)
        w, user = shape.data_width, self.user_layout.size
        super().__init__({
            "s_axis": In(AxiStreamSignature(w, user)),
            "m_axis": Out(AxiStreamSignature(w, user)),
            "header_only": In(shape.regions),
            "stall_level": In(8),
            "freeze": In(shape.regions),
            "region_stalled": Out(shape.regions),
            **{name: Out(64) for name in COUNTERS},
            "region_cycles": Out(64 * shape.tenants),
            "region_busy": Out(64 * shape.regions),
            "region_in_flight": Out(16 * shape.regions),
            "region_free": Out(16 * shape.regions),
            "region_empty": Out(shape.regions),
        })

    def elaborate(self, platform):
        m = Module()
        shape = self.shape
        w = shape.data_width
        m.submodules.rx = rx = AxiStreamToPacket(w, self.user_layout)
        m.submodules.store = store = PacketStore(shape, *self.args)
        m.submodules.tx = tx = PacketToAxiStream(w, self.user_layout)
        wiring.connect(m, wiring.flipped(self.s_axis), rx.s_axis)
        wiring.connect(m, rx.o, store.i)
        wiring.connect(m, store.o, tx.i)
        wiring.connect(m, tx.m_axis, wiring.flipped(self.m_axis))
        for r in range(shape.regions):
            stub = StubRegion(w, meta_layout(shape.header_bytes), r,
                              seed=0x1D3 * (r + 1) + 0xACE1)
            m.submodules[f"region{r}"] = stub
            wiring.connect(m, store.to_region[r], stub.i)
            wiring.connect(m, stub.o, store.from_region[r])
            m.d.comb += [stub.stall_level.eq(self.stall_level), stub.freeze.eq(self.freeze[r])]
        m.d.comb += [store.header_only.eq(self.header_only),
                     self.region_empty.eq(store.region_empty),
                     self.region_stalled.eq(Cat(getattr(store.csr, f"r{r}_stalled")
                                                for r in range(shape.regions)))]
        for name, reg in COUNTERS.items():
            m.d.comb += getattr(self, name).eq(getattr(store.csr, reg))
        m.d.comb += [
            self.region_cycles.eq(Cat(getattr(store.csr, f"t{t}_region_cycles")
                                      for t in range(shape.tenants))),
            self.region_busy.eq(Cat(getattr(store.csr, f"r{r}_busy")
                                    for r in range(shape.regions))),
            self.region_in_flight.eq(Cat(Cat(store.region_in_flight[r], Const(0, 16))[:16]
                                         for r in range(shape.regions))),
            self.region_free.eq(Cat(Cat(store.region_free[r], Const(0, 16))[:16]
                                    for r in range(shape.regions))),
        ]
        return m


def store_simulator(shape: NicShape, store_beats, region_fifo_beats, in_flight,
                    stall_cycles=1024, progress=print):
    """:class:`StoreTestTop` built (and cached) for cocotb; this file is part of the key."""
    from supernic.sim.build import build_simulator, generated_component

    name = (f"nic_store_w{shape.data_width}_r{shape.regions}_s{store_beats}"
            f"_f{region_fifo_beats}_q{in_flight}_x{stall_cycles}")
    description = {
        "config": {"data_width": shape.data_width, "header_bytes": shape.header_bytes},
        "shape": asdict(shape), "store_beats": store_beats,
        "region_fifo_beats": region_fifo_beats, "in_flight": in_flight,
        "stall_cycles": stall_cycles,
    }
    key = {**description,
           "bench": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]}
    paths = generated_component(
        name, key, lambda: StoreTestTop(shape, store_beats, region_fifo_beats, in_flight,
                                        stall_cycles),
        description, progress=progress)
    return build_simulator(paths["verilog"], name, paths["regmap"], progress=progress)


# --- cocotb side ----------------------------------------------------------------------------

def _design():
    design = read_design()
    return design, NicShape(**design["shape"])


def _split(value, width, n):
    return [(value >> (i * width)) & ((1 << width) - 1) for i in range(n)]


def _packet_beats(frame, hdr, tag, layout, width):
    """Beats (data, keep, last, user): tail flags only on the last beat, as the parser gives."""
    head = copy.deepcopy(hdr)
    for f in TAIL_FLAGS:
        head["flags"][f] = 0
    first = encode(layout, {"hdr": head, "tag": tag})
    last = encode(layout, {"hdr": hdr, "tag": tag})
    return [(d, k, end, last if end else first)
            for d, k, end in frame_to_beats(frame, width)]


def _frame_length(rng, shape, store_beats, max_bytes):
    bb, hbytes = shape.beat_bytes, shape.header_beats * shape.beat_bytes
    pick = rng.random()
    if pick < 0.35:
        return rng.randint(1, hbytes)
    if pick < 0.6:
        return rng.randint(max(1, hbytes - bb), hbytes + 3 * bb)
    if pick < 0.97:
        return rng.randint(1, max_bytes)
    return rng.randint(hbytes + store_beats * bb, max_bytes)  # larger than the whole store


async def _read_state(dut, shape):
    state = {name: int(getattr(dut, name).value) for name in COUNTERS}
    state["region_cycles"] = _split(int(dut.region_cycles.value), 64, shape.tenants)
    state["region_busy"] = _split(int(dut.region_busy.value), 64, shape.regions)
    state["region_in_flight"] = _split(int(dut.region_in_flight.value), 16, shape.regions)
    state["region_free"] = _split(int(dut.region_free.value), 16, shape.regions)
    state["region_empty"] = int(dut.region_empty.value)
    state["region_stalled"] = int(dut.region_stalled.value)
    return state


@cocotb.test()
async def random_traffic(dut):
    design, shape = _design()
    width, bb, hbeats = shape.data_width, shape.beat_bytes, shape.header_beats
    store_beats = design["store_beats"]
    seed = _env("seed", 1, int)
    n = _env("packets", 2000, int)
    mismatch = _env("mismatch", 0.02, float)
    misroute = _env("misroute", 0.01, float)
    max_bytes = _env("max_bytes", (store_beats + 2 * hbeats) * bb, int)
    rng = random.Random(seed)
    header_only = _env("header_only", -1, int)
    if header_only < 0:
        header_only = rng.randrange(1, 2 ** shape.regions - 1) if shape.regions > 1 else 1
    stall = _env("stall", 48, int)
    dut.header_only.value = header_only
    dut.stall_level.value = stall
    dut.freeze.value = 0
    await start_and_reset(dut)

    model = PacketStoreModel(shape, store_beats,
                             [header_only >> r & 1 for r in range(shape.regions)],
                             lambda r, f: stub_region_fn(r, f, bb))
    layout = nic_layout(shape)
    hdr_layout = meta_layout(shape.header_bytes)
    region_bits = shape.region_bits
    beats, expected = [], [collections.deque() for _ in range(shape.regions)]
    misrouted = 0
    len_of = {}
    region_beats = [0] * shape.regions
    tenant_beats = [0] * shape.tenants
    for seq in range(n):
        frame = rng.randbytes(_frame_length(rng, shape, store_beats, max_bytes))
        hdr = decode(hdr_layout, rng.getrandbits(hdr_layout.size))
        for f in TAIL_FLAGS:
            hdr["flags"][f] = int(rng.random() < 0.1)
        region = rng.randrange(shape.regions)
        if rng.random() < misroute and shape.regions < 2 ** region_bits:
            region = rng.randrange(shape.regions, 2 ** region_bits)
        nbeats = beats_of(len(frame), bb)
        if rng.random() < mismatch:
            nbeats = max(0, nbeats + rng.choice((-hbeats, -2, -1, 1, 2, hbeats)))
        tag = {"tenant": rng.randrange(shape.tenants), "port": rng.randrange(shape.ports),
               "seq": seq, "beats": nbeats, "region": region}
        beats += _packet_beats(frame, hdr, tag, layout, width)
        len_of[seq] = len(frame)
        outcome = model.dispatch(frame, hdr, tag)
        if outcome.region is None:
            misrouted += 1
        else:
            expected[region].append(outcome)

    stats = collections.Counter()
    reports = []

    def report(text):
        stats["mismatches"] += 1
        if len(reports) < MAX_REPORTED:
            reports.append(text)

    def refused(outcome):
        """A packet the store did not deliver: it must have been one it may refuse."""
        stats["dropped"] += 1
        stats["dropped_bytes"] += len_of[outcome.tag["seq"]]
        if not outcome.droppable:
            report(f"packet {outcome.tag['seq']} (region {outcome.region}) is missing but the "
                   f"store may not refuse it")

    def on_packet(got, first_user, last_user, nbeats):
        last = decode(layout, last_user)
        tag = last["tag"]
        region, seq = tag["region"], tag["seq"]
        if region >= shape.regions:
            report(f"output with region {region} (seq {seq})")
            return
        q = expected[region]
        while q and q[0].tag["seq"] != seq:
            refused(q.popleft())
        if not q:
            report(f"output seq {seq} on region {region} was not expected (order broken?)")
            return
        want = q.popleft()
        stats["packets"] += 1
        stats["header_errors"] += want.header_error
        stats["with_payload"] += want.droppable
        region_beats[region] += beats_of(len(want.region_frame), bb)
        tenant_beats[tag["tenant"]] += beats_of(len(want.region_frame), bb)
        problems = []
        if want.must_drop:
            problems.append("delivered although its payload is larger than the store")
        if got != want.out_frame:
            at = next((i for i, (a, b) in enumerate(zip(got, want.out_frame)) if a != b),
                      min(len(got), len(want.out_frame)))
            problems.append(f"data differs at byte {at} ({len(got)} bytes out, model "
                            f"{len(want.out_frame)})")
        want_last = {"hdr": want.out_hdr, "tag": want.tag}
        if last != want_last:
            problems.append(f"last-beat metadata differs: {_diff(want_last, last)}")
        if nbeats > 1:
            first = decode(layout, first_user)
            want_first = copy.deepcopy(want_last)
            for f in TAIL_FLAGS:
                want_first["hdr"]["flags"][f] = 0
            if first != want_first:
                problems.append(f"first-beat metadata differs: {_diff(want_first, first)}")
        if problems:
            report(f"packet {seq} (region {region}, {len(want.region_frame)} bytes to the "
                   f"region, tag beats {want.tag['beats']}): " + "; ".join(problems))

    harness = StreamHarness(dut, width)

    def done():
        quiet_since = max(harness.last_in_cycle or 0, harness.last_out_cycle or 0)
        return (len(harness.packet_accept_cycles) == n
                and harness.cycles - quiet_since > QUIET_CYCLES)

    await harness.run(beats, n + 1, pattern(_env("idle", "random"), rng),
                      pattern(_env("backpressure", "random"), rng),
                      max_cycles=60 * len(beats) + 20_000, on_packet=on_packet, stop=done)
    for q in expected:
        while q:
            refused(q.popleft())
    state = await _read_state(dut, shape)
    result = {
        "width": width, "packets_in": n, "packets_out": stats["packets"],
        "dropped": stats["dropped"], "dropped_bytes": stats["dropped_bytes"],
        "misrouted_sent": misrouted, "header_errors_model": stats["header_errors"],
        "with_payload": stats["with_payload"], "mismatches": stats["mismatches"],
        "cycles": harness.cycles, "beats": len(beats), "header_only": header_only,
        "region_beats": region_beats, "tenant_beats": tenant_beats, **state,
    }
    _write_result(result)
    assert not reports, "\n".join(reports)
    assert stats["packets"] + state["store_drops"] + state["misrouted"] == n
    assert stats["dropped"] == state["store_drops"]
    assert stats["dropped_bytes"] == state["store_drop_bytes"]
    assert misrouted == state["misrouted"]
    assert stats["header_errors"] == state["header_errors"]
    # Random region stalls are short: the watchdog must not mistake them for a stopped region.
    assert state["stall_drops"] == state["stall_cuts"] == state["region_stalled"] == 0
    assert state["store_used"] == 0
    assert state["region_in_flight"] == [0] * shape.regions


@cocotb.test()
async def saturation(dut):
    """Back-to-back frames of one size to every region in turn: no idle, backpressure or
    stalls."""
    design, shape = _design()
    width, bb = shape.data_width, shape.beat_bytes
    size = _env("size", 64, int)
    n = _env("packets", 300, int)
    header_only = _env("header_only", 0, int)
    dut.header_only.value = header_only
    dut.stall_level.value = 0
    dut.freeze.value = 0
    await start_and_reset(dut)
    layout = nic_layout(shape)
    hdr = decode(meta_layout(shape.header_bytes), 0)
    rng = random.Random(size)
    beats = []
    for seq in range(n):
        tag = {"tenant": seq % shape.tenants, "port": 0, "seq": seq,
               "beats": beats_of(size, bb), "region": seq % shape.regions}
        # Byte 0 never ends in hex F: no stub trims a header, so no packet drains unsent.
        frame = rng.randbytes(size)
        beats += _packet_beats(bytes([frame[0] & 0xF0]) + frame[1:], hdr, tag, layout, width)
    out_beats = []
    harness = StreamHarness(dut, width)

    def done():
        quiet_since = max(harness.last_in_cycle or 0, harness.last_out_cycle or 0)
        return (len(harness.packet_accept_cycles) == n
                and harness.cycles - quiet_since > QUIET_CYCLES)

    await harness.run(beats, n + 1, pattern("none", None), pattern("none", None),
                      max_cycles=100 * len(beats) + 10_000,
                      on_packet=lambda data, f, l, nb: out_beats.append(nb), stop=done)
    state = await _read_state(dut, shape)
    in_window = harness.last_in_cycle - harness.first_in_cycle + 1
    out_window = harness.last_out_cycle - harness.first_out_cycle + 1
    result = {
        "width": width, "size": size, "packets": n, "header_only": header_only,
        "packets_out": len(out_beats), "beats_in": len(beats), "beats_out": sum(out_beats),
        "in_beats_per_cycle": len(beats) / in_window,
        "out_beats_per_cycle": sum(out_beats) / out_window,
        "latency_cycles": harness.first_out_cycle - harness.first_in_cycle, **state,
    }
    _write_result(result)
    assert len(out_beats) + state["store_drops"] == n


@cocotb.test()
async def stalled_region(dut):
    """A frozen region may not hold the input or output every region shares (see the module
    docstring).
    Each phase ends once its frames are in and the output has been quiet for a while; one
    that cannot finish (the input held for good) times out."""
    design, shape = _design()
    width, bb = shape.data_width, shape.beat_bytes
    fifo = design["region_fifo_beats"]
    dut.header_only.value = 0
    dut.stall_level.value = 0
    dut.freeze.value = 0b1   # region 0 is stopped from the start
    await start_and_reset(dut)
    layout = nic_layout(shape)
    hdr = decode(meta_layout(shape.header_bytes), 0)
    frames = {}

    def packets(*plan):
        beats = []
        for seq, region, size in plan:
            frame = bytes([(seq * 16) & 0xF0]) + bytes((seq + k) & 0xFF for k in range(size - 1))
            frames[seq] = (region, frame)
            tag = {"tenant": region, "port": 0, "seq": seq, "beats": beats_of(size, bb),
                   "region": region}
            beats += _packet_beats(frame, hdr, tag, layout, width)
        return beats

    got = []
    harness = StreamHarness(dut, width)

    def on_packet(data, first_user, last_user, nbeats):
        last = decode(layout, last_user)
        got.append((last["tag"]["seq"], last["tag"]["region"], data,
                    last["hdr"]["flags"]["length_error"]))

    async def phase(beats, n_in):
        accepted = len(harness.packet_accept_cycles) + n_in
        start = harness.cycles

        def done():
            quiet_since = max(harness.last_in_cycle or 0, harness.last_out_cycle or 0, start)
            return (len(harness.packet_accept_cycles) == accepted
                    and harness.cycles - quiet_since > QUIET_CYCLES)
        await harness.run(beats, 1 << 30, pattern("none", None), pattern("none", None),
                          max_cycles=20 * len(beats) + 20_000, on_packet=on_packet, stop=done)

    # 1: a small packet for region 0, then one twice its buffer (it stops half-way in), two
    # for region 1 behind it, and one more for region 0.
    big = 2 * fifo * bb
    await phase(packets((1, 0, 3 * bb), (2, 0, big), (3, 1, 5 * bb), (4, 1, bb), (5, 0, bb)), 5)
    frozen = await _read_state(dut, shape)
    passed = [seq for seq, *_ in got]
    # 2: region 0 thaws: its packet from before the stall leaves, the cut one is discarded.
    dut.freeze.value = 0
    await phase([], 0)
    thawed = await _read_state(dut, shape)
    # 3: region 0 serves again.
    await phase(packets((6, 0, 4 * bb)), 1)
    served = await _read_state(dut, shape)

    async def freeze_mid_packet(seq):
        """Region 1 freezes once the first beat of packet ``seq`` has left."""
        while True:
            await RisingEdge(dut.clk)
            if (dut.m_axis__tvalid.value and dut.m_axis__tready.value
                    and not dut.m_axis__tlast.value
                    and decode(layout, int(dut.m_axis__tuser.value))["tag"]["seq"] == seq):
                dut.freeze.value = 0b10
                return

    # 4: region 1 freezes half-way through giving packet 7 back (all of it went in); packet 8
    # (region 0) is behind it on the output.
    watcher = cocotb.start_soon(freeze_mid_packet(7))
    await phase(packets((7, 1, 6 * bb), (8, 0, 2 * bb)), 2)
    watcher.cancel()
    cut = await _read_state(dut, shape)
    # 5: region 1 thaws, the rest of packet 7 is discarded, and it serves again.
    dut.freeze.value = 0
    await phase([], 0)
    await phase(packets((9, 1, 3 * bb)), 1)
    # 6: the same with packet 10 twice region 1's buffer, so it is half-way in as well as
    # half-way out (the region passes beats through): cut going in, it cannot be discarded
    # (it has begun to leave), so it too leaves cut short, counted once, as a cut.
    watcher = cocotb.start_soon(freeze_mid_packet(10))
    await phase(packets((10, 1, big), (11, 0, 2 * bb)), 2)
    watcher.cancel()
    cut_both = await _read_state(dut, shape)
    dut.freeze.value = 0
    await phase([], 0)
    await phase(packets((12, 1, 3 * bb)), 1)
    state = await _read_state(dut, shape)
    result = {"passed_while_frozen": passed, "frozen": frozen, "thawed": thawed,
              "served": served, "cut": cut, "cut_both": cut_both,
              "delivered": [seq for seq, *_ in got],
              "final": state}
    _write_result(result)
    for seq, region, data, length_error in got:
        want_region, frame = frames[seq]
        want = stub_region_fn(region, frame, bb)
        if seq in (7, 10):   # cut short: whole beats of it, then one zero byte, flagged
            assert region == 1 and data[-1] == 0 and (len(data) - 1) % bb == 0, data
            assert 0 < len(data) - 1 < len(want) and data[:-1] == want[:len(data) - 1]
            assert length_error == 1
        else:
            assert region == want_region and data == want and length_error == 0, seq
    assert passed == [3, 4], result
    assert frozen["stall_drops"] == 2 and frozen["region_stalled"] == 0b001, frozen
    assert frozen["region_free"][0] == 0 and not frozen["region_empty"] & 1, frozen
    assert thawed["region_stalled"] == 0 and thawed["region_in_flight"] == [0] * shape.regions
    assert served["stall_cuts"] == 0 and served["region_free"] == [fifo] * shape.regions
    assert cut["stall_cuts"] == 1 and cut["region_stalled"] == 0b010, cut
    assert cut_both["stall_cuts"] == 2 and cut_both["stall_drops"] == 2, cut_both
    assert cut_both["region_stalled"] == 0b010, cut_both
    assert [seq for seq, *_ in got] == [3, 4, 1, 6, 7, 8, 9, 10, 11, 12], result
    assert state["stall_drops"] == 2 and state["stall_cuts"] == 2 and state["store_drops"] == 0
    assert state["region_stalled"] == 0 and state["region_free"] == [fifo] * shape.regions
