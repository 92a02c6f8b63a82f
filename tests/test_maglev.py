"""Maglev table builder (sw/desc/maglev.py): the properties §3.4 of the paper promises, checked on
the tables themselves and on flows hashed through them."""

import collections
import random

import pytest

from supernic.desc.maglev import build_table, is_prime, permutation

NAMES = [f"10.1.0.{i}:8080" for i in range(10)]


def test_is_prime():
    assert [n for n in range(30) if is_prime(n)] == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
    assert is_prime(65537) and is_prime(131071) and not is_prime(65535)
    assert not is_prime(True) and not is_prime(7.0)


def test_preference_list_is_a_permutation():
    """With M prime, offset + j * skip visits every slot once (why M must be prime)."""
    size = 251
    for name in NAMES:
        offset, skip = permutation(name, size)
        assert 0 <= offset < size and 1 <= skip < size
        assert sorted((offset + j * skip) % size for j in range(size)) == list(range(size))


def test_table_is_pinned():
    """BLAKE2b-based, so the same backends give the same table on every machine and run: two
    control planes (or a restarted one) must load identical tables."""
    assert build_table(["a", "b", "c"], 7) == [1, 2, 0, 1, 2, 0, 0]


@pytest.mark.parametrize("count", [1, 3, 10, 64])
def test_every_backend_gets_its_share(count):
    """Backends take turns claiming one slot each, so shares differ by at most one slot."""
    size = 1021
    table = build_table(NAMES[:count] if count <= 10 else [f"b{i}" for i in range(count)], size)
    shares = collections.Counter(table)
    assert len(table) == size and set(shares) == set(range(count))
    assert max(shares.values()) - min(shares.values()) <= 1


def _backend_of(table, names, flow_hash):
    return names[table[flow_hash % len(table)]]


def test_removing_a_backend_moves_about_one_nth_of_flows():
    """Minimal disruption (§3.4): with one of N backends gone, its flows (1/N) move and only a
    small share of the others do (the paper's M = 65537)."""
    size = 65537
    before = build_table(NAMES, size)
    kept = NAMES[:3] + NAMES[4:]
    after = build_table(kept, size)
    rng = random.Random(5)
    flows = [rng.getrandbits(32) for _ in range(50_000)]
    moved = [h for h in flows if _backend_of(before, NAMES, h) != _backend_of(after, kept, h)]
    lost = [h for h in flows if _backend_of(before, NAMES, h) == NAMES[3]]
    assert set(lost) <= set(moved)                      # every flow of the removed backend moves
    n = len(NAMES)
    assert 0.9 / n < len(moved) / len(flows) < 1.1 / n  # and in all about 1/N of the flows
    assert (len(moved) - len(lost)) / len(flows) < 0.01


def test_adding_a_backend_moves_about_one_nth_of_flows():
    size = 65537
    before = build_table(NAMES[:9], size)
    after = build_table(NAMES, size)
    rng = random.Random(6)
    flows = [rng.getrandbits(32) for _ in range(50_000)]
    moved = sum(_backend_of(before, NAMES, h) != _backend_of(after, NAMES, h) for h in flows)
    assert 0.9 / 10 < moved / len(flows) < 1.1 / 10


@pytest.mark.parametrize("names, size, message", [
    (NAMES, 1000, "Maglev table size must be a prime of at least 3, not 1000"),
    (NAMES, 2, "Maglev table size must be a prime of at least 3, not 2"),
    ([], 7, "Maglev backends must be a non-empty list of names, not []"),
    (["a", "a"], 7, "Maglev backend names must be unique, not ['a', 'a']"),
    (NAMES, 7, "Maglev table size must be at least the backend count (10), not 7"),
])
def test_errors(names, size, message):
    with pytest.raises(ValueError) as info:
        build_table(names, size)
    assert str(info.value) == message
