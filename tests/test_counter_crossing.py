"""The counter crossing (hw/board/cdc.py) in Amaranth's simulator with two unrelated clocks:
what the reading domain sees never goes back, never jumps, and catches up within a few cycles;
and what crosses changes one bit per step (a simulator has no metastability to tear a value,
so that property is what is checked: the plain binary count fails it)."""

import random

from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.lib.cdc import FFSynchronizer
from amaranth.sim import Simulator

from supernic.hw.board.cdc import CounterCrossing


def _run(gray=True, cycles=3000, width=8):
    m = Module()
    m.domains.rx = ClockDomain("rx")
    m.domains.sync = ClockDomain("sync")
    count = Signal(width)
    seen = Signal(width)
    if gray:
        m.submodules.dut = dut = CounterCrossing(width, "rx")
        m.d.comb += [dut.count.eq(count), seen.eq(dut.value)]
    else:
        m.submodules.dut = FFSynchronizer(count, seen, o_domain="sync")
    rng = random.Random(1)
    samples, crossing = [], []

    async def counter(ctx):
        for _ in range(cycles):
            await ctx.tick("rx")
            if rng.random() < 0.7:
                ctx.set(count, ctx.get(count) + 1)
            crossing.append(ctx.get(dut.gray) if gray else ctx.get(count))

    async def reader(ctx):
        for _ in range(int(cycles * 8 / 7.3)):
            await ctx.tick("sync")
            samples.append((ctx.get(seen), ctx.get(count)))

    sim = Simulator(m)
    sim.add_clock(8e-9, domain="rx")
    sim.add_clock(7.3e-9, domain="sync", phase=1.7e-9)
    sim.add_testbench(counter)
    sim.add_testbench(reader)
    sim.run()
    return samples, width, crossing


def _problems(samples, width):
    wrap = 1 << width
    bad = []
    for (a, _), (b, count) in zip(samples, samples[1:]):
        step = (b - a) % wrap
        if step > 4 or (count - b) % wrap > 6:      # went back, jumped, or fell behind
            bad.append((a, b, count))
    return bad


def _most_bits_changed(values):
    return max(bin(a ^ b).count("1") for a, b in zip(values, values[1:]))


def test_counts_cross_whole():
    samples, width, crossing = _run(gray=True)
    assert not _problems(samples, width)
    assert len({s for s, _ in samples}) > 200       # it counted through and wrapped
    assert _most_bits_changed(crossing) == 1


def test_a_binary_count_changes_several_bits_at_once():
    _, _, crossing = _run(gray=False)
    assert _most_bits_changed(crossing) > 1
