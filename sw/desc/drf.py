"""Dominant resource fairness (Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of
Multiple Resource Types", NSDI 2011), written once for everything that uses it:

* the scheduler's fixed-point DRF (:func:`dominant_cost`, :func:`tag_increment`), evaluated on
  signals by the gateware (hw/nic/scheduler.py) and on integers by its model
  (sim/nic/scheduler.py);
* weighted DRF by progressive filling with continuous rates (:func:`progressive_filling`), the
  ideal shares the scheduler tests and the fairness bench compare against;
* a tenant's dominant share (:func:`dominant_share`), which the space allocator
  (sw/driver/space.py) raises one whole instance at a time.
"""

from .nic.scheduler import COST_ONE

__all__ = ["dominant_share", "progressive_filling", "dominant_cost", "tag_increment"]


def dominant_share(usage, capacities):
    """The largest fraction of one resource that ``usage`` (resource -> amount) takes of
    ``capacities`` (resource -> amount); ``None`` if it needs a resource whose capacity is 0
    (it can never fit). Exact for :class:`fractions.Fraction` amounts (section 4)."""
    share = 0
    for resource, need in usage.items():
        if need:
            if not capacities[resource]:
                return None
            share = max(share, need / capacities[resource])
    return share


def progressive_filling(demands, weights, capacities, limits=None):
    """Weighted DRF with continuous rates (section 4, weights section 4.3): ``demands[t][k]`` is
    the amount of resource ``k`` one unit of tenant ``t``'s work takes, ``weights[t]`` its
    weight, ``capacities[k]`` the resource's capacity, ``limits[t]`` (optional) the most units
    ``t`` can use. Every active tenant's weighted dominant share rises at the same pace (its
    rate grows by ``w_t / d_t``, ``d_t`` one unit's dominant share) until a resource fills or the
    tenant reaches its limit; tenants needing a full resource stop. Returns the rates (units
    of work per unit of time) by tenant."""
    limits = limits or {}
    # A unit's dominant share: the largest fraction of a resource's capacity it takes.
    dominant = {t: max(demand[k] / capacities[k] for k in capacities)
                for t, demand in demands.items()}
    rate = {t: 0.0 for t in demands}
    used = {k: 0.0 for k in capacities}
    active = set(demands)
    while active:
        grow = {t: weights[t] / dominant[t] for t in active}
        slope = {k: sum(grow[t] * demands[t][k] for t in active) for k in capacities}
        # The largest step before a resource fills or an active tenant reaches its limit.
        step = min([(limits[t] - rate[t]) / grow[t] for t in active if t in limits] + [
            (capacities[k] - used[k]) / slope[k] for k in capacities if slope[k] > 0])
        for t in active:
            rate[t] += step * grow[t]
        used = {k: sum(rate[t] * demands[t][k] for t in demands) for k in capacities}
        full = {k for k in capacities if used[k] >= capacities[k] - 1e-9}
        active = {t for t in active
                  if not (t in limits and rate[t] >= limits[t] - 1e-9)
                  and not any(demands[t][k] > 0 for k in full)}
    return rate


def dominant_cost(beats, to_region, cost, regions, larger=max):
    """A packet's dominant cost in the scheduler's fixed point, units of
    ``1 / (COST_ONE * regions)`` beat: dispatch and egress take ``beats`` of a capacity of one
    beat a cycle, its region ``to_region * cost`` (``cost`` in 8.8 fixed point cycles a beat) of
    ``regions`` region-cycles a cycle. ``larger(a, b)`` picks the larger of two: ``max`` on
    integers (the model), a ``Mux`` on signals (the gateware)."""
    return larger(beats * (COST_ONE * regions), to_region * cost)


def tag_increment(dominant, inv_weight):
    """What a dispatched packet adds to its tenant's DRF start tag: its dominant cost times the
    tenant's inverse weight (8.8 fixed point); integers or signals alike."""
    return (dominant * inv_weight) >> 8
