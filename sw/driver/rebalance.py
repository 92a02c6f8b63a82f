"""Load-aware flow tables: spread a tenant's flow-table entries over its instances by the load
each entry carried, not by their number.

Flow-hash dispatch keeps every flow on one instance (per-flow order), but flows hash
unevenly: with a few thousand flows one instance of three easily gets 4-5% more than its
share and sets the pace for all. The scheduler counts the beats dispatched through each
(tenant, entry) (``scheduler.bucket_select`` / ``bucket_beats``); the control plane reads two
snapshots, and assigns the entries heaviest first, each to the instance with the least load
so far (longest-processing-time first, Graham 1969: within 4/3 of the optimum, and within
one entry's load of even when entries are many and light). This is RSS++'s idea (Barbette
et al., CoNEXT 2019 §3) for the NIC's instances. The new table goes in through the usual
commit, which holds the tenant until its packets in flight have left, so no flow reorders.
"""

__all__ = ["read_loads", "entry_loads", "balance", "balanced_table", "imbalance",
           "LOAD_MODULUS"]

#: The per-entry counters wrap (hw/nic/scheduler.py, ``LOAD_BITS``).
LOAD_MODULUS = 1 << 32


async def read_loads(read, write, tenant, table_size):
    """Every entry's dispatched-beats counter of ``tenant``; ``read(reg)`` and ``write(reg,
    value)`` reach the scheduler block's registers."""
    out = []
    for i in range(table_size):
        await write("bucket_select", tenant * table_size + i)
        out.append(await read("bucket_beats"))
    return out


def entry_loads(before, after):
    """Beats each entry carried between two snapshots of its wrapping counter."""
    if len(before) != len(after):
        raise ValueError(f"snapshots of {len(before)} and {len(after)} entries")
    return [(b - a) % LOAD_MODULUS for a, b in zip(before, after)]


def balanced_table(before, after, regions):
    """A flow table (one region per entry) spreading the load each entry carried between the
    snapshots ``before`` and ``after`` evenly over ``regions`` (:func:`balance`)."""
    return balance(entry_loads(before, after), regions)


def balance(loads, regions):
    """A flow table (one region per entry) spreading ``loads`` (the beats each entry carried)
    evenly over ``regions``. Entries that carried nothing are dealt out in turn afterwards, so
    future flows still spread."""
    if not regions:
        raise ValueError("a flow table needs at least one region")
    table = [None] * len(loads)
    total = {r: 0 for r in regions}
    count = {r: 0 for r in regions}
    heavy = sorted((i for i, x in enumerate(loads) if x), key=lambda i: (-loads[i], i))
    for i in heavy:
        r = min(regions, key=lambda r: (total[r], count[r], r))
        table[i] = r
        total[r] += loads[i]
        count[r] += 1
    for i in (i for i, x in enumerate(loads) if not x):
        r = min(regions, key=lambda r: (count[r], r))
        table[i] = r
        count[r] += 1
    return table


def imbalance(loads, table, regions):
    """The busiest instance's load over the mean (1.0 is even) for ``table``."""
    total = {r: 0 for r in regions}
    for load, r in zip(loads, table):
        total[r] += load
    mean = sum(total.values()) / len(regions)
    return max(total.values()) / mean if mean else 1.0
