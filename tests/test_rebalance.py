"""Load-aware flow tables (sw/driver/rebalance.py): entries spread by the load they carried."""

import random

import pytest

from supernic.driver.rebalance import LOAD_MODULUS, balanced_table, imbalance


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
