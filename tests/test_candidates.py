"""The scheduler's candidate selection as a component (hw/nic/candidates.py, ``Candidates``),
alone in Amaranth's simulator against its contract written out in Python: random queue heads,
flow tables and region states (offline, full, empty, header-only regions), round-robin and FIFO
modes; every tenant's candidate (valid, port, region, beats to the region, dominant cost, slot,
index, key) must be the contract's, and a dispatch moves the tenant's port pointer on."""

import random

from amaranth.sim import Simulator

from supernic.desc.drf import dominant_cost
from supernic.desc.nic.scheduler import STAMP_BITS
from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.candidates import Candidates
from supernic.hw.nic.scheduler import _desc_layout

SHAPE = NicShape(64, 64, 3, 3, 4)
S = 8
H = max(1, SHAPE.header_beats)


def expected(t, heads, valid, table, region_state, fifo_mode, now, pointer):
    P = SHAPE.ports
    ports = []
    for p in range(P):
        h = heads[t][p]
        region = table[t][h["index"]]
        online, free, empty, header_only, unsent, cost = region_state[region]
        to_region = H if header_only and h["beats"] > H else h["beats"]
        ok = valid[t][p] and online and (to_region + unsent <= free or (empty and unsent == 0))
        age = (now - h["stamp"]) % 2 ** STAMP_BITS
        ports.append({"ok": ok, "region": region, "to_region": to_region, "cost": cost,
                      "key": age << SHAPE.port_bits | (P - 1 - p)})
    if fifo_mode:
        live = [p for p in range(P) if valid[t][p]]
        choice = max(live, key=lambda p: (ports[p]["key"], -p)) if live else 0
        ok = bool(live) and ports[choice]["ok"]
    else:
        oks = [p for p in range(P) if ports[p]["ok"]]
        after = [p for p in oks if p >= pointer]
        choice = (after or oks or [0])[0]
        ok = bool(oks)
    h, c = heads[t][choice], ports[choice]
    return {"valid": int(ok), "head": int(any(valid[t])), "port": choice,
            "beats": h["beats"], "bytes": h["bytes"], "region": c["region"],
            "to_region": c["to_region"], "slot": h["slot"], "index": h["index"],
            "key": c["key"], "dom": dominant_cost(h["beats"], c["to_region"], c["cost"],
                                                  SHAPE.regions)}


def test_candidates_follow_the_contract():
    rng = random.Random(5)
    desc = _desc_layout(SHAPE, 64, 16, S)
    dut = Candidates(SHAPE, desc, S)
    P, T, NR = SHAPE.ports, SHAPE.tenants, SHAPE.regions
    problems = []

    async def bench(ctx):
        pointers = [0] * T
        for cycle in range(300):
            heads = [[{"beats": rng.randint(1, 60), "bytes": rng.randrange(2 ** 10),
                       "stamp": rng.randrange(2 ** STAMP_BITS), "index": rng.randrange(S),
                       "slot": rng.randrange(16)} for _ in range(P)] for _ in range(T)]
            valid = [[rng.random() < 0.7 for _ in range(P)] for _ in range(T)]
            table = [[rng.randrange(NR) for _ in range(S)] for _ in range(T)]
            regions = [(rng.random() < 0.8, rng.randrange(80), rng.random() < 0.3,
                        rng.random() < 0.3, rng.randrange(40), rng.randrange(1, 2 ** 12))
                       for _ in range(NR)]
            fifo_mode, now = rng.random() < 0.3, rng.randrange(2 ** STAMP_BITS)
            for t in range(T):
                for p in range(P):
                    ctx.set(dut.head_valid[t][p], valid[t][p])
                    ctx.set(dut.head[t][p], heads[t][p])
                for i in range(S):
                    ctx.set(dut.table[t][i], table[t][i])
            for r, (online, free, empty, header_only, unsent, cost) in enumerate(regions):
                ctx.set(dut.online[r], online)
                ctx.set(dut.empty[r], empty)
                ctx.set(dut.header_only[r], header_only)
                ctx.set(dut.free[r], free)
                ctx.set(dut.unsent[r], unsent)
                ctx.set(dut.cost[r], cost)
            ctx.set(dut.fifo_mode, fifo_mode)
            ctx.set(dut.now, now)
            wants = [expected(t, heads, valid, table, regions, fifo_mode, now, pointers[t])
                     for t in range(T)]
            for t in range(T):
                got = {k: ctx.get(getattr(dut.cand[t], k)) for k in wants[t]}
                if got != wants[t]:
                    problems.append(f"cycle {cycle} tenant {t}: {got} != {wants[t]}")
            # Dispatch a tenant now and then: its port pointer passes the port it served.
            t = rng.randrange(T)
            dispatch = rng.random() < 0.5 and bool(wants[t]["valid"]) and not fifo_mode
            ctx.set(dut.dispatch, dispatch)
            ctx.set(dut.pick, t)
            await ctx.tick()
            if dispatch:
                pointers[t] = (wants[t]["port"] + 1) % P
            if len(problems) > 3:
                return

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert problems == []
