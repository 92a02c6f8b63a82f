"""The packet store's free list as a component (hw/nic/free_list.py, ``FreeList``), alone in
Amaranth's simulator against its contract written as a Python deque: every slot free at reset,
in order; ``head`` is the slot a take gets; slots come back first-in first-out; a take and a
give may share a cycle; a slot given into an empty list can be taken the next cycle; ``count``
follows a cycle later.
"""

import random
from collections import deque

from amaranth.sim import Simulator

from supernic.hw.nic.free_list import FreeList


def run(depth, seed, cycles=600, take_rate=0.5, give_rate=0.5):
    """Drive random takes and gives; return the contract's violations, and how often the
    list ran empty and a slot given into it was taken at once."""
    rng = random.Random(seed)
    dut = FreeList(depth)
    free = deque(range(depth))   # the contract's list
    out = []                     # slots taken and not given back
    problems, refills = [], 0

    async def bench(ctx):
        nonlocal refills
        count = depth            # ``count`` lags a cycle behind the list
        was_empty_given = False
        for cycle in range(cycles):
            if ctx.get(dut.count) != count:
                problems.append(f"cycle {cycle}: count {ctx.get(dut.count)}, want {count}")
            take = bool(free) and rng.random() < take_rate
            give = bool(out) and rng.random() < give_rate
            if take and ctx.get(dut.head) != free[0]:
                problems.append(f"cycle {cycle}: head {ctx.get(dut.head)}, want {free[0]}")
            given = out.pop(rng.randrange(len(out))) if give else 0
            ctx.set(dut.take, take)
            ctx.set(dut.give, give)
            ctx.set(dut.slot, given)
            if take:
                refills += was_empty_given
                out.append(free.popleft())
            was_empty_given = give and not free
            if give:
                free.append(given)
            await ctx.tick()
            count = len(free)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return problems, refills


def test_slots_come_and_go_first_in_first_out():
    for depth, seed in ((4, 1), (16, 2), (64, 3)):
        problems, _ = run(depth, seed)
        assert problems == [], problems[:5]


def test_a_slot_given_into_an_empty_list_is_taken_the_next_cycle():
    # Takes outpace gives, so the list runs dry and lives on what is given back.
    problems, refills = run(4, 5, take_rate=0.95, give_rate=0.6)
    assert problems == [], problems[:5]
    assert refills > 20


def test_a_stale_head_is_caught(monkeypatch):
    """The check bites: a list whose head is read without the take's look-ahead (address
    ``rd`` instead of ``rd + take``) offers the slot just taken again."""
    monkeypatch.setattr(FreeList, "elaborate", _without_look_ahead)
    problems, _ = run(8, 9)
    assert any("head" in p for p in problems)


def _without_look_ahead(self, platform):
    from amaranth.hdl import Module, Signal
    from amaranth.lib.memory import Memory

    m = Module()
    m.submodules.mem = mem = Memory(data=self.data)
    write = mem.write_port()
    read = mem.read_port(transparent_for=(write,))
    rd, wr = Signal(len(self.slot)), Signal(len(self.slot))
    m.d.comb += [read.addr.eq(rd), self.head.eq(read.data), write.addr.eq(wr),
                 write.data.eq(self.slot), write.en.eq(self.give)]
    m.d.sync += [rd.eq(rd + self.take), wr.eq(wr + self.give),
                 self.count.eq(self.count - self.take + self.give)]
    return m
