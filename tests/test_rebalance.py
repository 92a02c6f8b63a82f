"""Load-aware flow tables (sw/driver/rebalance.py): entries spread by the load they carried."""

import asyncio
import random

import pytest

from supernic.driver.rebalance import LOAD_MODULUS, balance, balanced_table, imbalance


def test_balanced_table_evens_random_flows_better_than_in_turn():
    """4,096 random flows hashed into 256 entries over 3 instances: dealt out in turn, the
    busiest instance carries percents over the mean; by load, within a fraction of
    one entry's load."""
    rng = random.Random(5)
    loads = [0] * 256
    for _ in range(4096):
        loads[rng.getrandbits(32) % 256] += 24          # a 1,500-byte packet: 24 beats
    regions = [2, 0, 1]
    in_turn = [regions[i % 3] for i in range(256)]
    table = balanced_table([0] * 256, loads, regions)
    assert set(table) == set(regions)
    assert imbalance(loads, in_turn, regions) > 1.015
    assert imbalance(loads, table, regions) < 1 + max(loads) / (sum(loads) / 3)
    assert imbalance(loads, table, regions) < 1.005


def test_counters_wrap_and_idle_entries_are_dealt_in_turn():
    before = [LOAD_MODULUS - 10, 5, 0, 0, 0, 0]
    after = [20, 5, 0, 0, 0, 40]            # entry 0 carried 30 across the wrap
    table = balanced_table(before, after, [7, 8])
    assert table[0] != table[5]             # the two loaded entries on different instances
    assert sorted(table.count(r) for r in (7, 8)) == [3, 3]


@pytest.mark.parametrize("before, after, regions, message", [
    ([0], [0, 1], [0], "snapshots of 1 and 2 entries"),
    ([0], [1], [], "at least one region"),
])
def test_refusals(before, after, regions, message):
    with pytest.raises(ValueError, match=message):
        balanced_table(before, after, regions)


def test_the_auto_scaler_rebalances_through_the_control_plane(tmp_path):
    """The auto-scaler's loop over the control plane on the fake NIC (tests/test_control.py):
    samples read the tenant's counters and every entry's, the scaler decides a rebalance after
    the first window of the tenant's two instances, and applying it commits the balanced table
    (the record keeps it, so the next samples and another control plane see it); traffic that
    shifts later rebalances again on its imbalance; a decision that no longer fits is
    refused before any write."""
    from test_control import CHAINS, NIC_TOML, FakeNic
    from supernic.driver.autoscale import AutoScaleConfig, AutoScaler, Rebalance
    from supernic.driver.control import ControlPlane, DeployRefused
    from supernic.desc.config import load_config
    from supernic.hw.generate import design_description

    description = design_description(load_config(NIC_TOML))
    nic = FakeNic(description)
    state = tmp_path / "state.json"
    plane = ControlPlane(nic, description, state)
    asyncio.run(plane.deploy(CHAINS / "web.toml", 2, instances=2))
    regions = list(plane.deployed[2].regions)
    size = description["config"]["table_size"]
    in_turn = [regions[i % 2] for i in range(size)]
    scaler = AutoScaler(AutoScaleConfig(high_occupancy=64, low_throughput=0,
                                        rebalance_beats=2 * 1000 * size))
    for i in range(size):
        nic.loads[2 * size + i] = LOAD_MODULUS - 30 - i           # about to wrap

    def period(load):
        for i in range(size):
            nic.loads[2 * size + i] += load[i]
        nic.model.set_input("scheduler", "t2_dispatched_beats",
                            nic.model.get("scheduler", "t2_dispatched_beats") + sum(load))
        sample, counters[0] = asyncio.run(plane.sample(2, counters[0]))
        return sample, scaler.step([sample], len(plane.free_regions()), {2: 2})

    counters = [asyncio.run(plane.sample(2))[1]]
    heavy_even = [1800 if i % 2 == 0 else 200 for i in range(size)]
    sample, decisions = period(heavy_even)
    assert sample.entry_loads == tuple(heavy_even) and sample.throughput == sum(heavy_even)
    assert sample.table == tuple(in_turn) and sample.instances == tuple(regions)
    assert decisions == []                       # half a window
    sample, decisions = period(heavy_even)
    assert [d.reason for d in decisions] == ["instances"]
    decision = decisions[0]
    assert decision.imbalance == pytest.approx(1.8)
    want = balance([2 * x for x in heavy_even], regions)
    assert list(decision.table) == want != in_turn
    before = nic.writes
    assert asyncio.run(plane.apply_rebalance(decision)) == want
    assert nic.tables[2] == want and nic.model.get("scheduler", "commit_pending") == 0
    assert nic.writes - before == 4 * size + 1
    again = ControlPlane(nic, description, state)                # the record keeps it
    assert asyncio.run(again.refresh())[2].table == tuple(want) and again.flow_table(2) == want

    # The balanced table is even for this traffic (re-arms); then the heavy flows move to the
    # entries of one instance.
    for _ in range(2):
        sample, decisions = period(heavy_even)
        assert sample.table == tuple(want)
    assert decisions == []
    moved = [1800 if want[i] == regions[0] else 200 for i in range(size)]
    period(moved)
    sample, decisions = period(moved)
    assert [d.reason for d in decisions] == ["imbalance"]
    assert decisions[0].imbalance > 1.04
    asyncio.run(plane.apply_rebalance(decisions[0]))
    assert nic.tables[2] == list(decisions[0].table) == balance([2 * x for x in moved], regions)

    # Stale decisions: another chain, a region the tenant does not hold.
    before = nic.writes
    for stale in (Rebalance(2, "dns", decision.table, "imbalance", 1.5, 1.0),
                  Rebalance(2, "web", (regions[0], 5) * (size // 2), "imbalance", 1.5, 1.0)):
        with pytest.raises(DeployRefused, match="does not fit the tenant: it runs 'web'"):
            asyncio.run(plane.apply_rebalance(stale))
    with pytest.raises(TypeError, match="Decision must be a Rebalance"):
        asyncio.run(plane.apply_rebalance("web"))
    assert nic.writes == before and nic.tables[2] == list(decisions[0].table)
