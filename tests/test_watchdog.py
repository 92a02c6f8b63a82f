"""The packet store's stall watchdog as a component (hw/nic/watchdog.py, ``Watchdog``), in
Amaranth's simulator against its contract in Python: it fires on the ``limit``-th consecutive
counted cycle of a wait, paused cycles neither count nor end the wait, and a cycle without a
wait starts the count again."""

import random

import pytest
from amaranth.sim import Simulator

from supernic.hw.nic.watchdog import Watchdog


def run(limit, seed, cycles=3000, wait_rate=0.97, pause_rate=0.2):
    """``(problems, fires)`` of random waits against the contract."""
    rng = random.Random(seed)
    dut = Watchdog(limit)
    problems, fires = [], 0

    async def bench(ctx):
        nonlocal fires
        counted = 0
        for cycle in range(cycles):
            waiting, paused = rng.random() < wait_rate, rng.random() < pause_rate
            ctx.set(dut.waiting, waiting)
            ctx.set(dut.paused, paused)
            want = waiting and not paused and counted == limit - 1
            if ctx.get(dut.fire) != want:
                problems.append(f"cycle {cycle}: fire {ctx.get(dut.fire)}, want {int(want)}")
            fires += want
            if not waiting or want:
                counted = 0
            elif not paused:
                counted += 1
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return problems, fires


@pytest.mark.parametrize("limit", [1, 2, 7, 16])
def test_fires_after_limit_counted_cycles(limit):
    problems, fires = run(limit, seed=limit)
    assert problems == [], problems[:5]
    assert fires > 10


def test_a_pause_that_ends_the_wait_is_caught(monkeypatch):
    """The check bites: a watchdog whose pause restarts the count never fires where the
    contract says it does."""
    from amaranth.hdl import Module, Signal

    def restarting(self, platform):
        m = Module()
        count = Signal(range(self.limit))
        m.d.comb += self.fire.eq(self.waiting & ~self.paused & (count == self.limit - 1))
        with m.If(~self.waiting | self.paused | self.fire):
            m.d.sync += count.eq(0)
        with m.Else():
            m.d.sync += count.eq(count + 1)
        return m
    monkeypatch.setattr(Watchdog, "elaborate", restarting)
    problems, _ = run(7, seed=7)
    assert problems


def test_a_limit_must_be_positive():
    with pytest.raises(ValueError, match="Watchdog limit must be a positive integer"):
        Watchdog(0)
