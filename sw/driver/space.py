"""Sharing the NIC's space (regions, on-chip memory) and bandwidth among tenants: weighted
Dominant Resource Fairness with discrete tasks.

A tenant runs instances of its chain. One instance needs a bundle: an integer number of
``regions`` (one, for the chains of this NIC), ``memory_kib`` of on-chip memory and
``bandwidth`` in beats per cycle; the tenant wants up to ``max_instances`` of them and has a
``weight``. A tenant's dominant share is the largest fraction of any one resource it holds
(Ghodsi et al., "Dominant Resource Fairness: Fair Allocation of Multiple Resource Types",
NSDI 2011, section 4); its weighted dominant share is that divided by its weight (section 4.3).

:func:`allocate` is progressive filling with discrete tasks (the paper's Algorithm 1, with
weights): repeatedly give one more instance to the tenant with the smallest weighted dominant
share whose next instance still fits, ties to the lower tenant id, until no tenant's next
instance fits or every tenant has ``max_instances``. A tenant whose next instance does not fit
never fits again (usage only grows), so it leaves the race for good.

What is guaranteed with discrete instances (each property is tested on random cases):

* feasibility: usage never exceeds any capacity;
* Pareto efficiency: no tenant can get one more instance without another losing one (the loop
  stops only when nothing fits);
* sharing incentive up to one instance per tenant: a tenant blocked by capacity holds more
  than ``(w_i / W) (1 - sum_j s_j) / s_i`` instances (``s`` the dominant share of one
  instance, ``W`` the total weight): its weighted part of what remains once one instance of
  every tenant's bundle is set aside. :func:`guaranteed_instances` gives that count.
  When every tenant's instance has the same dominant share and the weights are equal (the common
  case here: the region is every chain's dominant resource), this is exactly the proportional
  share ``floor(capacity / n)`` of :func:`proportional_instances`;
* envy-freeness up to one instance, for equal weights: no tenant could run more instances than
  it has with another tenant's bundle once one instance of that bundle is taken away. (Why: a
  tenant ``i`` envying ``j`` so must have stopped racing before ``j``'s last instance, blocked on
  some resource ``r``; ``j`` then took less than one of ``i``'s instances of ``r``, and counting
  ``j``'s holdings of ``r`` and of ``i``'s dominant resource before and after that moment
  contradicts ``j`` having had no larger share than ``i`` while both raced.);
* determinism: the same input gives the same allocation (ties go to the lower tenant id).

What is not guaranteed, because instances are indivisible (the continuous DRF of the paper
has all of these); each counterexample below is pinned by a test:

* exact sharing incentive: with 10 KiB of memory, tenant 0 needing 6 KiB an instance and
  tenant 1 needing 1 KiB, tenant 0 gets one instance and tenant 1 four, one short of the five
  that half the memory would give it (no allocation that gives tenant 0 anything does better);
* envy-freeness up to one instance with unequal weights: the weight ratio scales the envied
  bundle, so the instances it took after the envious tenant was blocked count several times;
* leximin optimality (the largest smallest weighted dominant share, then the next smallest):
  filling is greedy. :func:`leximin_allocations` finds the optima by brute force on small cases.
  On random cases filling reached the optimal smallest share every time; when the optimum gives
  every tenant an instance it matched an optimum in over 99 % of cases and was otherwise one
  instance per tenant away; when some tenant must get nothing, leximin next favours whichever
  tenant's single instance holds the largest share, which filling does not chase;
* strategy-proofness: the paper's proof is for divisible resources. With regions 5, 16 KiB and
  one beat per cycle, tenant 0 needing (1, 2 KiB, 1/4) and tenant 1 (1, 4 KiB, 1/8), three
  instances each at most, tenant 1 gets two instances; claiming 5/32 beats per cycle instead
  blocks tenant 0's third instance and wins tenant 1 a third. The tests spot-check that
  doubling a bundle or misstating the instance count gains nothing on random cases.

Amounts are exact :class:`fractions.Fraction` values. A float is read by its decimal repr, so
ten instances of ``0.1`` beats per cycle fill a ``1.0`` link exactly, as a reader expects
(binary 0.1 is slightly more than a tenth and the tenth instance would not fit).
"""

import heapq
import itertools
import math
from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

from ..desc.drf import dominant_share

__all__ = [
    "RESOURCES", "MAX_ENUMERATION", "TenantDemand", "Allocation", "allocate", "evaluate",
    "leximin_allocations", "proportional_instances", "guaranteed_instances", "instances_fitting",
]

#: The resources a chain instance needs: regions are whole, memory and bandwidth divisible.
RESOURCES = ("regions", "memory_kib", "bandwidth")
#: Largest number of candidate allocations :func:`leximin_allocations` will enumerate.
MAX_ENUMERATION = 1_000_000


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _amount(thing, value, integer=False):
    """``value`` as an exact Fraction; ``thing`` names it in the error."""
    kind = "a non-negative integer" if integer else "a non-negative number"
    if isinstance(value, bool) or not isinstance(value, (Rational, float)):
        raise ValueError(f"{thing} must be {kind}, not {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{thing} must be {kind}, not {value!r}")
    exact = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    if exact < 0 or (integer and exact.denominator != 1):
        raise ValueError(f"{thing} must be {kind}, not {value!r}")
    return exact


def _resource_map(thing, amounts, complete):
    if not hasattr(amounts, "items"):
        raise ValueError(f"{thing} must be a mapping of resource to amount, not {amounts!r}")
    for resource in amounts:
        if resource not in RESOURCES:
            raise ValueError(f"{thing} names unknown resource {resource!r} "
                             f"(resources are {', '.join(RESOURCES)})")
    if complete:
        missing = [resource for resource in RESOURCES if resource not in amounts]
        if missing:
            raise ValueError(f"{thing} must give every resource, missing {', '.join(missing)}")
    return {resource: _amount(f"{thing} {resource}", amounts.get(resource, 0),
                              integer=resource == "regions")
            for resource in RESOURCES}


def _check_capacities(capacities):
    return _resource_map("Capacity", capacities, complete=True)


@dataclass(frozen=True, eq=False)
class TenantDemand:
    """What one tenant asks for: ``bundle`` (resource -> amount one instance needs; a missing
    resource is 0), up to ``max_instances`` instances, with ``weight`` (a positive number)."""
    tenant: int
    bundle: dict
    max_instances: int
    weight: object = 1

    def __post_init__(self):
        if not _is_int(self.tenant) or self.tenant < 0:
            raise ValueError(f"Tenant id must be a non-negative integer, not {self.tenant!r}")
        bundle = _resource_map(f"Tenant {self.tenant} bundle", self.bundle, complete=False)
        if not _is_int(self.max_instances) or self.max_instances < 0:
            raise ValueError(f"Tenant {self.tenant} max_instances must be a non-negative "
                             f"integer, not {self.max_instances!r}")
        if isinstance(self.weight, bool) or not isinstance(self.weight, (Rational, float)) \
                or not self.weight > 0 or not math.isfinite(self.weight):
            raise ValueError(f"Tenant {self.tenant} weight must be a positive number, "
                             f"not {self.weight!r}")
        object.__setattr__(self, "bundle", bundle)
        object.__setattr__(self, "weight", _amount(f"Tenant {self.tenant} weight", self.weight))

    def dominant_share(self, capacities):
        """Dominant share of one instance, or ``None`` if the instance can never fit (it needs
        a resource whose capacity is 0)."""
        return dominant_share(self.bundle, capacities)


def _check_demands(demands):
    if isinstance(demands, TenantDemand) or not hasattr(demands, "__iter__"):
        raise ValueError(f"Demands must be a sequence of TenantDemand, not {demands!r}")
    demands = tuple(demands)
    seen = set()
    for demand in demands:
        if not isinstance(demand, TenantDemand):
            raise ValueError(f"Demand must be a TenantDemand, not {demand!r}")
        if demand.tenant in seen:
            raise ValueError(f"Tenant id must be unique among demands, not {demand.tenant!r}")
        seen.add(demand.tenant)
    return tuple(sorted(demands, key=lambda demand: demand.tenant))


@dataclass(frozen=True)
class Allocation:
    """Instances per tenant and what they add up to.

    ``dominant_shares`` are unweighted (largest fraction of one resource held),
    ``weighted_shares`` are those divided by the weight; ``usage`` is per resource.
    ``demand_capped`` lists tenants holding ``max_instances``; ``capacity_capped`` maps every
    other tenant to the resources its next instance would overflow.
    """
    instances: dict
    dominant_shares: dict
    weighted_shares: dict
    usage: dict
    capacities: dict
    demand_capped: tuple
    capacity_capped: dict

    def leximin_key(self):
        """Weighted dominant shares sorted ascending: leximin compares these tuples."""
        return tuple(sorted(self.weighted_shares.values()))


def _usage(demands, instances):
    return {resource: sum((demand.bundle[resource] * instances[demand.tenant]
                           for demand in demands), Fraction(0))
            for resource in RESOURCES}


def _overflows(demand, usage, capacities):
    """Resources that one more instance of ``demand`` would overflow."""
    return tuple(resource for resource in RESOURCES
                 if usage[resource] + demand.bundle[resource] > capacities[resource])


def _evaluate(capacities, demands, instances):
    usage = _usage(demands, instances)
    over = [resource for resource in RESOURCES if usage[resource] > capacities[resource]]
    if over:
        raise ValueError(f"Instances {instances!r} exceed the capacity of {', '.join(over)}")
    dominant, weighted, demand_capped, capacity_capped = {}, {}, [], {}
    for demand in demands:
        count = instances[demand.tenant]
        share = demand.dominant_share(capacities)
        dominant[demand.tenant] = count * (share or 0)
        weighted[demand.tenant] = dominant[demand.tenant] / demand.weight
        if count == demand.max_instances:
            demand_capped.append(demand.tenant)
        else:
            capacity_capped[demand.tenant] = _overflows(demand, usage, capacities)
    return Allocation(dict(instances), dominant, weighted, usage, dict(capacities),
                      tuple(demand_capped), capacity_capped)


def evaluate(capacities, demands, instances):
    """The :class:`Allocation` that gives ``instances`` (tenant -> count) to ``demands``.

    A tenant in ``capacity_capped`` whose overflow tuple is empty could still get one more
    instance: the allocation is not Pareto-efficient.
    """
    capacities = _check_capacities(capacities)
    demands = _check_demands(demands)
    tenants = {demand.tenant for demand in demands}
    if not hasattr(instances, "items") or set(instances) != tenants:
        raise ValueError(f"Instances must map every tenant {sorted(tenants)} to a count, "
                         f"not {instances!r}")
    for demand in demands:
        count = instances[demand.tenant]
        if not _is_int(count) or not 0 <= count <= demand.max_instances:
            raise ValueError(f"Tenant {demand.tenant} instances must be an integer from 0 to "
                             f"{demand.max_instances}, not {count!r}")
    return _evaluate(capacities, demands, instances)


def allocate(capacities, demands):
    """Weighted DRF by progressive filling with discrete instances; returns an
    :class:`Allocation`.

    ``capacities`` maps every resource of :data:`RESOURCES` to its amount (``regions`` an
    integer); ``demands`` is a sequence of :class:`TenantDemand` with distinct tenant ids.
    """
    capacities = _check_capacities(capacities)
    demands = _check_demands(demands)
    instances = {demand.tenant: 0 for demand in demands}
    usage = {resource: Fraction(0) for resource in RESOURCES}
    # A heap of (weighted dominant share, tenant id): its top is the next tenant to serve, with
    # ties going to the lower id.
    racing = [(Fraction(0), demand.tenant, demand) for demand in demands
              if demand.max_instances and demand.dominant_share(capacities) is not None]
    heapq.heapify(racing)
    while racing:
        _, tenant, demand = heapq.heappop(racing)
        if _overflows(demand, usage, capacities):
            continue                    # usage only grows: this tenant never fits again
        instances[tenant] += 1
        for resource in RESOURCES:
            usage[resource] += demand.bundle[resource]
        if instances[tenant] < demand.max_instances:
            next_share = instances[tenant] * demand.dominant_share(capacities) / demand.weight
            heapq.heappush(racing, (next_share, tenant, demand))
    return _evaluate(capacities, demands, instances)


def _upper_bound(demand, capacities):
    """Most instances ``demand`` could get alone."""
    bound = demand.max_instances
    for resource, need in demand.bundle.items():
        if need:
            bound = min(bound, math.floor(capacities[resource] / need))
    return bound


def leximin_allocations(capacities, demands):
    """Every leximin-optimal Pareto-efficient allocation, by brute force (small cases only).

    Enumerates every feasible count vector, keeps the Pareto-efficient ones (no tenant below
    ``max_instances`` can get one more instance: feasibility is downward closed, so that is
    Pareto efficiency), and among them those whose sorted weighted dominant shares are
    lexicographically largest. Returns a list of :class:`Allocation`, ordered by tenant counts.
    """
    capacities = _check_capacities(capacities)
    demands = _check_demands(demands)
    bounds = [_upper_bound(demand, capacities) for demand in demands]
    candidates = math.prod(bound + 1 for bound in bounds)
    if candidates > MAX_ENUMERATION:
        raise ValueError(f"Brute force must enumerate at most {MAX_ENUMERATION} allocations, "
                         f"not {candidates}")
    best_key, best = None, []
    for counts in itertools.product(*(range(bound + 1) for bound in bounds)):
        instances = {demand.tenant: count for demand, count in zip(demands, counts)}
        usage = _usage(demands, instances)
        if any(usage[resource] > capacities[resource] for resource in RESOURCES):
            continue
        if any(count < demand.max_instances and not _overflows(demand, usage, capacities)
               for demand, count in zip(demands, counts)):
            continue                    # someone could get one more: not Pareto-efficient
        allocation = _evaluate(capacities, demands, instances)
        key = allocation.leximin_key()
        if best_key is None or key > best_key:
            best_key, best = key, [allocation]
        elif key == best_key:
            best.append(allocation)
    return best


def instances_fitting(bundle, amounts, max_instances=None):
    """How many instances of ``bundle`` (resource -> amount, as in :class:`TenantDemand`) fit
    in ``amounts`` (resource -> amount), capped at ``max_instances`` if given. A bundle that
    needs nothing fits ``max_instances`` times (unbounded needs a cap)."""
    bundle = _resource_map("Bundle", bundle, complete=False)
    amounts = {resource: Fraction(amount) for resource, amount in amounts.items()}
    fits = [math.floor(amounts.get(resource, 0) / need)
            for resource, need in bundle.items() if need]
    if max_instances is not None:
        fits.append(max_instances)
    if not fits:
        raise ValueError("A bundle that needs nothing fits without bound: give max_instances")
    return max(0, min(fits))


def proportional_instances(capacities, demands):
    """Tenant -> instances it could run alone in its weighted part ``w_i / sum(w)`` of every
    resource (``1/n`` for equal weights), rounded down: the exact sharing-incentive baseline."""
    capacities = _check_capacities(capacities)
    demands = _check_demands(demands)
    total_weight = sum(demand.weight for demand in demands)
    return {demand.tenant: instances_fitting(
                demand.bundle,
                {resource: capacities[resource] * demand.weight / total_weight
                 for resource in RESOURCES},
                demand.max_instances)
            for demand in demands}


def guaranteed_instances(capacities, demands):
    """Tenant -> the fewest instances :func:`allocate` can give it (the discrete sharing
    incentive).

    Why: let tenant ``i`` be blocked on resource ``r`` at the first moment its next instance
    does not fit. Every tenant ``j`` got its last instance while ``i`` was still racing, so
    ``(x_j - 1) s_j / w_j <= x_i s_i / w_i`` (``s`` the dominant share of one instance), and
    then ``C_r < usage_r + d_ir`` gives ``x_i > (w_i / W) (1 - sum_j s_j) / s_i``. A tenant that
    is not blocked holds ``max_instances``.
    """
    capacities = _check_capacities(capacities)
    demands = _check_demands(demands)
    shares = {demand.tenant: demand.dominant_share(capacities) for demand in demands}
    reserved = sum((share for share in shares.values() if share is not None), Fraction(0))
    total_weight = sum(demand.weight for demand in demands)
    guaranteed = {}
    for demand in demands:
        share = shares[demand.tenant]
        if share is None or not demand.max_instances:
            guaranteed[demand.tenant] = 0
        elif share == 0:
            guaranteed[demand.tenant] = demand.max_instances
        else:
            bound = demand.weight / total_weight * (1 - reserved) / share
            guaranteed[demand.tenant] = min(demand.max_instances,
                                            max(0, math.floor(bound) + 1))
    return guaranteed
