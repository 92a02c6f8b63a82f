"""The scheduler's policy pick as a component (hw/nic/policy.py, ``PolicyPick``) against the
scheduler model's decisions (sim/nic/scheduler.py, ``SchedulerModel.step``), in Amaranth's
simulator, cycle by cycle: random eligible tenants, backlogs that start and end, candidates of
random sizes, costs and regions, and cycles without a decision (the transfer full), under DRF,
RR and DRR with unequal weights. Every decision and every DRR deficit must be the model's.

The same decisions run inside the whole scheduler, checked by tests/test_nic_scheduler.py
against its trace; this test pins the component's own contract."""

import random

import pytest
from amaranth.sim import Simulator

from supernic.desc.drf import dominant_cost
from supernic.desc.nic.scheduler import POLICY_CODES, QUANTUM_BITS, SchedulerConfig
from supernic.hw.nic.policy import PolicyPick
from supernic.sim.nic.scheduler import SchedulerModel

T, REGIONS = 4, 3
BYTES_BITS, KEY_BITS, DEFICIT_BITS = 14, 20, 18


def run(policy, seed, cycles=1500):
    rng = random.Random(seed)
    config = SchedulerConfig(T, REGIONS, 16, policy, weights=(1, 2, 1, 0.5),
                             region_costs=(1.0, 2.5, 0.75))
    model = SchedulerModel(config)
    dut = PolicyPick(T, ("drf", "rr", "drr", "fifo"), BYTES_BITS, KEY_BITS, DEFICIT_BITS,
                     QUANTUM_BITS)
    problems = []

    async def bench(ctx):
        ctx.set(dut.policy, POLICY_CODES[policy])
        for t in range(T):
            ctx.set(dut.inv_weight[t], config.inv_weight(t))
            ctx.set(dut.quantum[t], config.tenant_quantum(t))
        backlogged = [False] * T
        for cycle in range(cycles):
            for t in range(T):
                if rng.random() < 0.05:
                    backlogged[t] = not backlogged[t]
            eligible = [b and rng.random() < 0.8 for b in backlogged]
            cand = []
            for t in range(T):
                beats = rng.randrange(1, 24)
                region = rng.randrange(REGIONS)
                c = {"beats": beats, "bytes": beats * 8 - rng.randrange(8),
                     "region": region, "to_region": min(beats, rng.choice((2, 24)))}
                cand.append(c)
                ctx.set(dut.bytes[t], c["bytes"])
                ctx.set(dut.dom[t], dominant_cost(c["beats"], c["to_region"],
                                                  config.cost(region), REGIONS))
            decide = rng.random() < 0.85
            ctx.set(dut.eligible, sum(1 << t for t in range(T) if eligible[t]))
            ctx.set(dut.backlogged, sum(1 << t for t in range(T) if backlogged[t]))
            ctx.set(dut.decide, decide)
            got = ctx.get(dut.pick) if ctx.get(dut.pick_valid) else None
            want = model.step({"decide": decide, "eligible": eligible,
                               "backlogged": backlogged, "cand": cand})
            if decide and got != want:
                problems.append(f"cycle {cycle}: picked {got}, model {want}")
            await ctx.tick()
            deficits = [ctx.get(dut.deficit[t]) for t in range(T)]
            if policy == "drr" and deficits != model.deficit:
                problems.append(f"cycle {cycle}: deficits {deficits}, model {model.deficit}")
            if len(problems) > 5:
                return

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return problems


@pytest.mark.parametrize("policy", ["drf", "rr", "drr"])
def test_the_pick_decides_as_the_model(policy):
    assert run(policy, seed=len(policy)) == []


def test_a_wrong_policy_state_is_caught(monkeypatch):
    """The check bites: a model whose round-robin pointer does not move disagrees."""
    real = SchedulerModel.step

    def stuck(self, rec):
        pointer = self.rr_ptr
        out = real(self, rec)
        self.rr_ptr = pointer
        return out
    monkeypatch.setattr(SchedulerModel, "step", stuck)
    assert run("rr", seed=2, cycles=300)
