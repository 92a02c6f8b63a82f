"""Hostile tenants (issue 17): a tenant whose chain stops taking beats must cost the others
nothing, on the served NIC of tests/data/nic_test.toml (64 bits, six regions, the metered
regions under the state-yielding transform).

The stall is ``snic suspend`` on the hostile tenant's region while it sends at line rate. Before
regions told the scheduler they were asked to stop (``Region.taking``), the scheduler went on
dispatching into the stopped region; a packet longer than the region's buffer, admitted into an
empty region, then held the store's input that every tenant shares, and the well-behaved
tenants got nothing (measured: 168 of their frames lost in 50,000 cycles).
"""

from pathlib import Path

import pytest

from supernic.hw.config import load_config
from supernic.tools.hostile import hostile_bench

NIC_TEST = Path(__file__).parent / "data" / "nic_test.toml"


@pytest.fixture(scope="module")
def stalled():
    return hostile_bench(load_config(NIC_TEST), cycles=40_000, seed=3,
                         scenarios=("baseline", "stalled_chain"), progress=lambda *a: None)


def test_a_stalled_chain_costs_the_others_nothing(stalled):
    run = stalled["scenarios"]["stalled_chain"]
    hostile = [r for r in run["tenants"].values() if r["role"] == "hostile"]
    others = [r for r in run["tenants"].values() if r["role"] == "well-behaved"]
    assert len(hostile) == 1 and len(others) == 3
    # The stall held the hostile tenant's packets (so the run tested something): none left
    # during the run, and they left after resume.
    assert hostile[0]["delivered"] == 0 and hostile[0]["sent"] > 100
    assert run["held_then_delivered"] > 0
    for r in others:
        assert r["sent"] > 30, r
        assert r["lost"] == 0, r
        assert r["to_fair_share"] >= 0.95, r
    assert run["account"]["balanced"], run["account"]
    assert stalled["goal_met"]


def test_the_baseline_is_the_fair_share(stalled):
    """Well-behaved tenants offer less than the NIC gives them: all they send arrives."""
    for r in stalled["scenarios"]["baseline"]["tenants"].values():
        if r["role"] == "well-behaved":
            assert r["lost"] == 0 and r["delivered"] + r["nt_drops"] == r["sent"], r
