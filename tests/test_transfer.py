"""The scheduler's transfer stage as a component (hw/nic/transfer.py, ``Transfer``), alone in
Amaranth's simulator behind memories laid out as the scheduler's queues are: records pushed as
the pick dispatches them (two at most) come out on ``o`` beat for beat from their queue's
memory, in push order, with the record's beats, region and tenant in the tag, the stored
metadata's tail flags on the last beat only, and, with the consumer always ready, no gap
between packets. ``region_beat_taken`` counts exactly the beats that counted against a region.
"""

import random

from amaranth.hdl import Module, Signal
from amaranth.lib.memory import Memory
from amaranth.sim import Simulator

from supernic.desc.meta import TAIL_FLAGS
from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.layout import nic_layout
from supernic.hw.nic.transfer import Transfer

SHAPE = NicShape(64, 64, 2, 2, 3)
Q, D = 16, 4            # beats and metadata slots a queue
QBITS, DBITS = 4, 2


def harness(words, metas):
    """The stage, the ports' memories (tenant t's queue at rows t * Q, its slots at t * D)
    holding ``words`` and ``metas``, and per-queue read pointers advanced on each issue."""
    m = Module()
    m.submodules.xfer = xfer = Transfer(SHAPE, QBITS, DBITS)
    P, T = SHAPE.ports, SHAPE.tenants
    rd = [[Signal(QBITS + 1, name=f"rd{p}_{t}") for t in range(T)] for p in range(P)]
    for p in range(P):
        dm = Memory(shape=SHAPE.data_width + SHAPE.beat_bytes, depth=T * Q, init=words[p])
        mm = Memory(shape=nic_layout(SHAPE).size, depth=T * D, init=metas[p])
        m.submodules[f"d{p}"], m.submodules[f"m{p}"] = dm, mm
        rp, mp = dm.read_port(), mm.read_port()
        m.d.comb += [rp.addr.eq(xfer.data_addr), rp.en.eq(xfer.data_en[p]),
                     mp.addr.eq(xfer.meta_addr), mp.en.eq(xfer.meta_en[p]),
                     xfer.data[p].eq(rp.data), xfer.meta[p].eq(mp.data)]
        for t in range(T):
            with m.If(xfer.issue & (xfer.cur_port == p) & (xfer.cur_tenant == t)):
                m.d.sync += rd[p][t].eq(rd[p][t] + 1)
    from amaranth.hdl import Array
    m.d.comb += xfer.rd_ptr.eq(Array(Array(row) for row in rd)[xfer.cur_port][xfer.cur_tenant])
    return m, xfer


def run(seed, ready_rate):
    rng = random.Random(seed)
    P, T = SHAPE.ports, SHAPE.tenants
    layout = nic_layout(SHAPE)
    words = [[rng.getrandbits(SHAPE.data_width + SHAPE.beat_bytes) for _ in range(T * Q)]
             for _ in range(P)]
    metas = [[rng.getrandbits(layout.size) for _ in range(T * D)] for _ in range(P)]
    # Packets per queue, each starting where the one before ended (the queue's order).
    packets, next_row, next_slot = [], {}, {}
    for _ in range(12):
        p, t = rng.randrange(P), rng.randrange(T)
        beats = rng.randint(1, 3)
        row = next_row.get((p, t), 0)
        if row + beats > Q:
            continue
        slot = next_slot.get((p, t), 0)
        if slot >= D:
            continue
        next_row[(p, t)], next_slot[(p, t)] = row + beats, slot + 1
        packets.append({"port": p, "tenant": t, "slot": slot, "beats": beats,
                        "region": rng.randrange(3), "to_region": rng.randint(0, beats),
                        "rows": [t * Q + row + k for k in range(beats)]})
    m, xfer = harness(words, metas)
    got, gaps, region_beats = [], [], []

    async def bench(ctx):
        pending = list(packets)
        for _ in range(400):
            ready = rng.random() < ready_rate
            ctx.set(xfer.o.ready, ready)
            push = bool(pending) and ctx.get(xfer.ready) and rng.random() < 0.9
            ctx.set(xfer.push, push)
            if push:
                pk = pending.pop(0)
                for name in ("port", "tenant", "slot", "beats", "region", "to_region"):
                    ctx.set(getattr(xfer.rec, name), pk[name])
            if ctx.get(xfer.o.valid) and ready:
                beat = ctx.get(xfer.o.p)
                got.append(beat)
                region_beats.append(ctx.get(xfer.region_beat_taken))
            elif ready and got and len(got) < sum(p["beats"] for p in packets) and not pending:
                gaps.append(len(got))
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # What must have come out, beat for beat.
    problems = []
    want = [(pk, k) for pk in packets for k in range(pk["beats"])]
    if len(got) != len(want):
        return [f"{len(got)} beats out, {len(want)} expected"], gaps
    for (pk, k), beat, counted in zip(want, got, region_beats):
        word = words[pk["port"]][pk["rows"][k]]
        meta = layout.from_bits(metas[pk["port"]][pk["tenant"] * D + pk["slot"]])
        last = k == pk["beats"] - 1
        checks = {
            "data": (beat.data, word & (2 ** SHAPE.data_width - 1)),
            "keep": (beat.keep, word >> SHAPE.data_width),
            "last": (beat.last, int(last)),
            "tag": ((beat.meta.tag.beats, beat.meta.tag.region, beat.meta.tag.tenant),
                    (pk["beats"], pk["region"], pk["tenant"])),
            "tail": (tuple(getattr(beat.meta.hdr.flags, f) for f in TAIL_FLAGS),
                     tuple(getattr(meta.hdr.flags, f) if last else 0 for f in TAIL_FLAGS)),
            "region_beat": (counted, int(k < pk["to_region"])),
        }
        for what, (a, b) in checks.items():
            if a != b:
                problems.append(f"packet {packets.index(pk)} beat {k}: {what} {a} != {b}")
    return problems, gaps


def test_packets_leave_in_order_from_their_queues():
    for seed in range(4):
        problems, _ = run(seed, ready_rate=0.6)
        assert problems == [], problems[:5]


def test_no_gap_between_packets_when_the_consumer_is_ready():
    problems, gaps = run(7, ready_rate=1.0)
    assert problems == [] and gaps == []
