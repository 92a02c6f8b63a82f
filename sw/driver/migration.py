"""Live migration of a chain instance from one region to another, with traffic flowing (the
state-yielding transform, hw/transform): nothing is lost and every flow keeps its order.

The sequence (:func:`move_instance`), given a target region that is free, has the chain's
personality loaded and its NTs configured like the source's (:func:`configuration_registers`
lists what to copy):

1. Stop the target at once. It is idle; from now on, packets dispatched to it wait in its
   buffer in the packet store.
2. Re-point the tenant's flow buckets from the source to the target and commit (``repoint``).
   The scheduler holds the tenant until every packet it already dispatched has left, so when
   the commit completes the source is empty and no packet of the tenant is between the two
   regions: per-flow order holds across the move.
3. Stop the source at a packet boundary (it is empty: the stop is immediate) and capture its
   state, every flip-flop and memory row (:class:`~supernic.driver.state.RegionState`).
4. Restore the capture into the target and resume it: the packets that waited run on the
   source's state (counters, tables, token buckets) as if the source had run them.
5. Resume the source, which is now free: a region left frozen would hold the packets of the
   next tenant deployed there.

The same code runs over any register bus: the control plane uses it (``snic migrate``), and
the NIC's cocotb test drives it under traffic.
"""

import time

from .state import RegionState, StateError

__all__ = ["configuration_registers", "move_instance", "MigrationError"]


class MigrationError(StateError):
    pass


def configuration_registers(description, region, chain):
    """``[(block, register)]``: the read-write registers of ``chain``'s NTs in ``region``, the
    configuration a migration copies to the target. (NT tables written through strobes live in
    the NTs' memories: they move with the state.)"""
    prefix = f"r{region}_{chain}_"
    return [(b["name"], r["name"]) for b in description["registers"]["blocks"]
            if b["name"].startswith(prefix) for r in b["registers"] if r["access"] == "RW"]


async def move_instance(bus, description, source, target, repoint, wait=None, timeout=30.0):
    """Steps 1 to 5 of the module docstring. ``repoint``: a coroutine function that re-points
    the tenant's flow buckets from ``source`` to ``target`` and returns once the scheduler
    committed them. Returns a report: the personality, the state words moved and the seconds
    each step took, and ``warnings`` if the source could not be resumed. On a failure before
    the target runs, both regions are resumed before the error propagates (the caller
    re-points the buckets back)."""
    src = RegionState(bus, description, source, wait, timeout)
    dst = RegionState(bus, description, target, wait, timeout)
    name = await src.active()
    if await dst.active() != name:
        raise MigrationError(f"region {target} has {await dst.active()!r} loaded, the source "
                             f"region {source} runs {name!r}")
    if not src.maps[name].same_layout(dst.maps[name]):
        raise MigrationError(f"{name!r} has different state maps in regions {source} and "
                             f"{target}")
    steps = {}
    t0 = time.monotonic()
    try:
        await dst.suspend(at_boundary=False)
        steps["stop_target_s"] = time.monotonic() - t0
        await repoint()
        steps["repoint_s"] = time.monotonic() - t0 - sum(steps.values())
        await src.suspend(at_boundary=True)
        snapshot = await src.capture()
        steps["capture_s"] = time.monotonic() - t0 - sum(steps.values())
        await dst.restore({**snapshot, "region": target})
        await dst.resume()
        steps["restore_s"] = time.monotonic() - t0 - sum(steps.values())
    except BaseException:
        for region in (dst, src):
            try:
                await region.resume()
            except Exception:  # noqa: BLE001: the first error is the one to report
                pass
        raise
    report = {"personality": name, "source": source, "target": target,
              "words": len(snapshot["words"]), **{k: round(v, 4) for k, v in steps.items()}}
    # The target runs the tenant's packets now: the move is done, whatever happens next.
    try:
        await src.resume()
    except Exception as e:  # noqa: BLE001: say so, the caller must not undo the move
        report["warnings"] = [f"region {source} stays stopped ({e}): run `snic state resume "
                              f"--region {source}`"]
    return report
