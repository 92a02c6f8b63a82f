"""A region's input buffer as a component (hw/nic/region_input.py, ``RegionInput``), alone in
Amaranth's simulator against its contract written out in Python: the region gets every beat
in order with its packet's metadata on each beat and that beat's own tail flags; side entries
come back in dispatch order; ``free``, ``empty`` and ``in_flight`` tell the room left, and
read 0 while the region is closed (metadata or side FIFO full, or stalled). Random pushes,
random backpressure from the region and from the store's output side, random stalls.
"""

import random

from amaranth.sim import Simulator

from supernic.desc.meta import TAIL_FLAGS
from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.region_input import RegionInput, region_beat_layout, region_packet_layout
from supernic.hw.parser.meta import meta_layout

SHAPE = NicShape(64, 64, 4, 2, 3)
FIFO_BEATS, IN_FLIGHT = 8, 3
SIDE_BITS = 12


def _flag_mask(hdr_layout):
    """The bits of the tail flags in the metadata (each beat carries its own)."""
    flags = hdr_layout["flags"]
    mask = 0
    for name in TAIL_FLAGS:
        mask |= 1 << (flags.offset + flags.shape[name].offset)
    return mask


def run(seed, cycles=1500, push_rate=0.7, ready_rate=0.5, side_rate=0.4, stall_rate=0.05,
        built_in_flight=IN_FLIGHT):
    """Drive the buffer; ``built_in_flight`` builds it with another side FIFO depth than the
    contract's ``IN_FLIGHT`` (to show the check bites)."""
    rng = random.Random(seed)
    dut = RegionInput(SHAPE, SIDE_BITS, FIFO_BEATS, built_in_flight)
    hdr_layout = meta_layout(SHAPE.header_bytes)
    beat_layout = region_beat_layout(SHAPE)
    packet_layout = region_packet_layout(SHAPE, SIDE_BITS)
    packets = []
    for n in range(200):
        beats = [{"data": rng.getrandbits(64), "keep": rng.getrandbits(8) | 1,
                  "last": 0, "tail": rng.getrandbits(2)} for _ in range(rng.randint(1, 5))]
        beats[-1]["last"] = 1
        packets.append({"hdr": rng.getrandbits(hdr_layout.size),
                        "tenant": rng.randrange(SHAPE.tenants), "side": rng.getrandbits(SIDE_BITS),
                        "beats": beats})
    want_beats = [(n, k) for n, p in enumerate(packets) for k in range(len(p["beats"]))]
    problems, got_beats, got_sides = [], [], []
    closed_seen = {"meta_or_side": 0, "stalled": 0}

    async def bench(ctx):
        sending = None       # (packet, next beat) being pushed
        queue = list(range(len(packets)))
        buffered = 0         # beats in the buffer
        metas = 0            # packets with a beat still in the buffer
        sides = 0            # side entries not taken back
        for cycle in range(cycles):
            stalled = rng.random() < stall_rate
            ctx.set(dut.stalled, stalled)
            # The room the contract promises, from what went in and out so far.
            open_ = sides < IN_FLIGHT and metas < dut.meta_depth and not stalled
            want = {"free": FIFO_BEATS - buffered if open_ else 0,
                    "empty": int(open_ and buffered == 0), "in_flight": sides}
            for name, value in want.items():
                if ctx.get(getattr(dut, name)) != value:
                    problems.append(f"cycle {cycle}: {name} {ctx.get(getattr(dut, name))}, "
                                    f"want {value}")
            if not open_:
                closed_seen["stalled" if stalled else "meta_or_side"] += 1
            # Push: a packet's entry with its first beat (as the store does), then its beats.
            if sending is None and queue and rng.random() < push_rate:
                sending = (queue.pop(0), 0)
            beat_valid = sending is not None
            packet_valid = beat_valid and sending[1] == 0
            if beat_valid:
                n, k = sending
                p = packets[n]
                ctx.set(dut.beats.payload, beat_layout.const(p["beats"][k]))
                ctx.set(dut.packets.payload, packet_layout.const(
                    {"hdr": hdr_layout.from_bits(p["hdr"]), "tenant": p["tenant"],
                     "side": p["side"]}))
            # A first beat goes in only with its entry (the store waits for both).
            beat_ready = ctx.get(dut.beats.ready)
            packet_ready = ctx.get(dut.packets.ready)
            fire = beat_valid and beat_ready and (not packet_valid or packet_ready)
            ctx.set(dut.beats.valid, fire)
            ctx.set(dut.packets.valid, packet_valid and fire)
            region_ready = rng.random() < ready_rate
            ctx.set(dut.o.ready, region_ready)
            out_fire = ctx.get(dut.o.valid) and region_ready
            if out_fire:
                got_beats.append(ctx.get(dut.o.p))
                n, k = want_beats[len(got_beats) - 1]
                if ctx.get(dut.head_tenant) != packets[n]["tenant"]:
                    problems.append(f"packet {n}: head_tenant {ctx.get(dut.head_tenant)}")
            side_take = ctx.get(dut.sides.valid) and rng.random() < side_rate
            ctx.set(dut.sides.ready, side_take)
            if side_take:
                got_sides.append(ctx.get(dut.sides.payload))
            await ctx.tick()
            if fire:
                n, k = sending
                buffered += 1
                metas += k == 0
                sides += k == 0
                sending = None if packets[n]["beats"][k]["last"] else (n, k + 1)
            if out_fire:
                buffered -= 1
                metas -= bool(got_beats[-1].last)
            sides -= bool(side_take)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    mask = _flag_mask(hdr_layout)
    for (n, k), beat in zip(want_beats, got_beats):
        p, b = packets[n], packets[n]["beats"][k]
        checks = {"data": (beat.data, b["data"]), "keep": (beat.keep, b["keep"]),
                  "last": (beat.last, b["last"]),
                  "tail": (tuple(getattr(beat.meta.flags, f) for f in TAIL_FLAGS),
                           (b["tail"] & 1, b["tail"] >> 1)),
                  "metadata": (beat.meta.as_value().value & ~mask, p["hdr"] & ~mask)}
        for what, (a, e) in checks.items():
            if a != e:
                problems.append(f"packet {n} beat {k}: {what} {a} != {e}")
    sides_want = [p["side"] for p in packets][:len(got_sides)]
    if got_sides != sides_want:
        problems.append(f"side entries out of order: {got_sides[:8]} != {sides_want[:8]}")
    return problems, len(got_beats), closed_seen


def test_the_region_gets_its_beats_and_the_store_its_side_entries_in_order():
    for seed in range(3):
        problems, beats, closed = run(seed)
        assert problems == [], problems[:5]
        assert beats > 300
        assert closed["meta_or_side"] > 10 and closed["stalled"] > 10, closed


def test_a_region_that_closes_late_is_caught():
    """The check bites: a buffer built with one more side entry than the contract counts
    offers room when the contract says it is closed."""
    problems, _, _ = run(0, built_in_flight=IN_FLIGHT + 1)
    assert any("free" in p or "empty" in p for p in problems), problems[:3]
