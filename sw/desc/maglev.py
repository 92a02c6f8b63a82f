"""Maglev consistent hashing: the lookup table the L4 load balancer's control plane computes.

Eisenbud et al., "Maglev: A Fast and Reliable Software Network Load Balancer", NSDI 2016,
§3.4. Each backend gets a preference list, a permutation of the ``M`` table slots built from two
hashes of its name::

    offset = h1(name) mod M
    skip   = h2(name) mod (M - 1) + 1
    permutation[j] = (offset + j * skip) mod M

and backends take turns claiming their next still-free preferred slot until the table is full
(Pseudocode 1). With ``M`` prime every ``skip`` in ``1..M-1`` is coprime with ``M``, so each
preference list visits every slot: that is why ``M`` must be prime. Each backend ends up with
``M/N`` slots give or take one, and removing one of ``N`` backends mostly moves only the slots
it held (about ``1/N`` of the table), so most flows keep their backend.

``h1`` and ``h2`` are BLAKE2b with two different personalisation strings: stable across runs and
machines (Python's ``hash`` of a string is salted per process) and independent of each other,
as the paper asks. Backend weights (§3.4 mentions them) are not implemented.

This is plain Python for the control plane: the hardware only stores the table and indexes it
with ``flow_hash mod M`` (:mod:`supernic.hw.nt.load_balancer`).
"""

import hashlib

__all__ = ["is_prime", "permutation", "build_table", "MIN_TABLE_SIZE"]

#: The smallest table the builder accepts (a prime with room for a permutation).
MIN_TABLE_SIZE = 3


def is_prime(n):
    """Deterministic trial division; table sizes are at most a few hundred thousand."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


def _hash(name, person):
    digest = hashlib.blake2b(name.encode(), digest_size=8, person=person).digest()
    return int.from_bytes(digest, "big")


def permutation(name, size):
    """``(offset, skip)`` of backend ``name`` in a table of ``size`` slots (§3.4)."""
    offset = _hash(name, b"maglev-offset") % size
    skip = _hash(name, b"maglev-skip") % (size - 1) + 1
    return offset, skip


def build_table(names, size):
    """The lookup table: ``size`` entries, each an index into ``names`` (Pseudocode 1)."""
    if not is_prime(size) or size < MIN_TABLE_SIZE:
        raise ValueError(f"Maglev table size must be a prime of at least {MIN_TABLE_SIZE}, "
                         f"not {size!r}")
    names = list(names)
    if not names:
        raise ValueError(f"Maglev backends must be a non-empty list of names, not {names!r}")
    if len(set(names)) != len(names):
        raise ValueError(f"Maglev backend names must be unique, not {names!r}")
    if len(names) > size:
        raise ValueError(f"Maglev table size must be at least the backend count "
                         f"({len(names)}), not {size!r}")
    perms = [permutation(name, size) for name in names]
    following = [0] * len(names)  # next[i] in the paper: how far down its list backend i is
    entry = [-1] * size
    filled = 0
    while True:
        for i, (offset, skip) in enumerate(perms):
            slot = (offset + following[i] * skip) % size
            while entry[slot] >= 0:
                following[i] += 1
                slot = (offset + following[i] * skip) % size
            entry[slot] = i
            following[i] += 1
            filled += 1
            if filled == size:
                return entry
