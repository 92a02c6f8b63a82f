"""The counter bank (hw/nt/counter_bank.py) against its model (sim/counter_bank.py): every
counter read back every cycle, under random events and clears, events on every counter every
cycle (the most a delta must hold between two visits of the walker), idle stretches, clears
colliding with events and with the walker, wrap-around at the counter width, and indices out
of range."""

import random

import pytest
from amaranth.sim import Simulator

from supernic.hw.nt.counter_bank import CounterBank
from supernic.sim.counter_bank import CounterBankModel, bank_counts, store_bank_counts


def _phases(rng, count, cycles):
    """``(inc, clear)`` masks: random, saturating, idle and clear-heavy stretches."""
    full = (1 << count) - 1
    while cycles > 0:
        kind = rng.choice(["random", "all", "idle", "clears", "one"])
        span = rng.randrange(1, 4 * count + 8)
        k = rng.randrange(count)
        for _ in range(span):
            if kind == "random":
                yield rng.getrandbits(count), rng.getrandbits(count) & rng.getrandbits(count) \
                    & rng.getrandbits(count)
            elif kind == "all":
                yield full, 0
            elif kind == "idle":
                yield 0, 0
            elif kind == "clears":
                yield rng.getrandbits(count), rng.getrandbits(count)
            else:
                yield 1 << k, (1 << k) if rng.random() < 0.05 else 0
        cycles -= span


def _run(count, width, cycles, seed, clears=True):
    rng = random.Random(seed)
    dut = CounterBank(count, width, clears)
    model = CounterBankModel(count, width)
    phases = [(inc, clear if clears else 0) for inc, clear in _phases(rng, count, cycles)]
    index_range = 1 << dut.index_bits
    mismatches = []

    async def bench(ctx):
        for cycle, (inc, clear) in enumerate(phases):
            ctx.set(dut.inc, inc)
            if clears:
                ctx.set(dut.clear, clear)
            # Every counter, read combinationally before the edge (indices out of range too).
            for index in range(index_range):
                ctx.set(dut.index, index)
                got, want = ctx.get(dut.value), model.value(index)
                if got != want:
                    mismatches.append((cycle, index, got, want))
            await ctx.tick()
            model.step(inc, clear)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return mismatches, model


@pytest.mark.parametrize("count,width,seed,clears", [
    (1, 64, 1, True), (3, 64, 2, True), (5, 8, 3, True), (16, 64, 4, True), (16, 6, 5, True),
    (16, 64, 6, False), (7, 6, 7, False)])
def test_bank_counts_as_plain_counters(count, width, seed, clears):
    mismatches, model = _run(count, width, 1500, seed, clears)
    assert not mismatches, f"{len(mismatches)} mismatches, first {mismatches[:3]}"
    if width < 16:      # the narrow banks wrapped: the test reached the counters' width
        assert any(c < 2 ** width for c in model.counts)


def test_a_saturated_bank_needs_its_whole_delta():
    """Every counter counting every cycle for many walker rounds: a delta one bit narrower
    than the bank's would wrap between two visits of the walker."""
    dut = CounterBank(16, 64)
    assert dut.delta_bits == 5
    seen = []

    async def bench(ctx):
        ctx.set(dut.inc, (1 << 16) - 1)
        for cycle in range(200):
            await ctx.tick()
            ctx.set(dut.index, cycle % 16)
            seen.append((cycle + 1, ctx.get(dut.value)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert all(value == cycles for cycles, value in seen)


def test_state_decode_round_trip():
    values = {"hits.mem": [5, 7, 9], "hits.cleared": 0b010, "hits.delta0": 1,
              "hits.delta1": 2, "hits.delta2": 0}
    assert bank_counts(values, "hits", 3) == [6, 2, 9]
    store_bank_counts(values, "hits", [1, 2, 3])
    assert bank_counts(values, "hits", 3) == [1, 2, 3]
    assert values["hits.cleared"] == 0 and values["hits.delta1"] == 0
