"""The liveness analyses of many components at once, one worker process per core.

A cold build of the default design spends most of its time in liveness.py: the boundary
analysis of its twelve NT instances at 512 bits takes from under a second (a fork) to 48 s
(the rate limiter) each, about two minutes one after another. They are independent:
a personality is analysed part by part (compose.py), every part from its own cache entry. So
before a design is elaborated, :func:`analyse_all` runs every part's analysis on every core,
longest first; elaboration then finds each plan in the cache (inventory.py), exactly as if it
had made them itself.

Workers are forked, not spawned: each inherits the parts as the parent elaborated them
(Amaranth's fragments cannot be pickled), runs the same ``keep_live`` the elaboration would
run, and returns nothing but its time. The cache's per-entry lock still guards every entry,
so parallel builders (pytest-xdist workers) never repeat each other's work.
"""

import multiprocessing
import os
import time

from amaranth.hdl import Fragment

from .compose import parts
from .inventory import rewrite_prints, take_inventory

__all__ = ["analyse_all", "default_jobs"]

#: The parent's work list, which forked workers inherit (see the module's docstring).
_WORK = []


def default_jobs():
    """Worker processes to use: ``$SNIC_JOBS``, else the cores this process may run on."""
    if os.environ.get("SNIC_JOBS"):
        return max(1, int(os.environ["SNIC_JOBS"]))
    return max(1, len(os.sched_getaffinity(0)))


def _work_of(component):
    """``[(name, fragment, component, part, inventory)]``: the analyses elaborating
    ``component`` under the boundary transform will ask for (inventory.keep_live)."""
    frag = Fragment.get(component, None)
    inv = take_inventory(frag, rewrite_prints(frag))
    split = None if inv.traps else parts(frag, component)
    if split is None:
        return [(type(component).__name__, frag, component, False, inv)]
    return [(type(c).__name__, f, c, True, take_inventory(f)) for _p, f, c in split]


def _analyse(n):
    from .liveness import ContractError
    _name, frag, comp, part, inv = _WORK[n]
    t = time.monotonic()
    try:
        inv.keep_live(comp, frag, part=part)
    except ContractError:
        pass            # cached as such: the component's elaboration falls back on its own
    return n, time.monotonic() - t


def analyse_all(components, jobs=None, progress=None):
    """Fill the liveness cache for every component in ``components`` (each as it would be
    transformed with ``state="boundary"``), ``jobs`` analyses at a time. Returns
    ``{name: seconds}`` of the analyses that ran (none if every plan was cached)."""
    global _WORK
    work, seen = [], set()
    for component in components:
        for name, frag, comp, part, inv in _work_of(component):
            key = inv.plan_path(comp, frag)
            if key in seen or inv.plan_cached(comp, frag, part):
                continue
            seen.add(key)
            work.append((name, frag, comp, part, inv))
    if not work:
        return {}
    # Longest first, so the longest is not left alone at the end; the size of the state is
    # the best cheap guess of an analysis' cost.
    work.sort(key=lambda w: -sum(len(sig) for _p, _f, sig in w[4].flip_flops))
    jobs = min(jobs or default_jobs(), len(work))
    if multiprocessing.current_process().daemon:
        jobs = 1                        # a daemonic process may not start processes
    if progress:
        progress(f"analysing the live state of {len(work)} network tasks at packet "
                 f"boundaries ({jobs} at a time)...")
    times = {}
    _WORK = work
    pool = multiprocessing.get_context("fork").Pool(jobs) if jobs > 1 else None
    try:
        results = (pool.imap_unordered(_analyse, range(len(work))) if pool
                   else map(_analyse, range(len(work))))
        for done, (n, seconds) in enumerate(results, 1):
            name = work[n][0]
            times[name if name not in times else f"{name}#{n}"] = seconds
            if progress:
                progress(f"analysed the live state of {name} in {seconds:.0f} s "
                         f"({done}/{len(work)})")
    finally:
        if pool is not None:
            pool.terminate()            # every result is in; nothing left to wait for
            pool.join()
        _WORK = []
    return times
