"""Model of the tenant scheduler's decisions, and the ideal shares benchmarks compare against.

:class:`SchedulerModel` replays the hardware's decision trace (``TenantScheduler.trace``): each
record gives the masks the pick saw (eligible, backlogged) and every tenant's candidate
packet, all of the record's own cycle (the candidates are combinational, never a cycle old, so
a tenant may be picked on consecutive records); the model, holding its own policy state (DRF
tags and virtual time, round-robin and DRR pointers, deficits), says which tenant must go and
updates its state. Eligibility itself (room, online, commits) is checked by the testbench
against the region signals it drives.

:func:`drf_allocation` is weighted dominant resource fairness by progressive filling
(Ghodsi et al., NSDI 2011) over the scheduler's three resources; :func:`expected_shares` gives
each policy's long-run share of dispatched beats for backlogged tenants.
"""

from dataclasses import dataclass

from ...desc.drf import dominant_cost, progressive_filling, tag_increment
from ...desc.nic.scheduler import POLICY_CODES, TAG_BITS, SchedulerConfig

__all__ = ["SchedulerModel", "TenantLoad", "drf_allocation", "expected_shares"]

TAG_MASK = (1 << TAG_BITS) - 1


def _before(a, b):
    return ((a - b) & TAG_MASK) >> (TAG_BITS - 1)


def _round_robin(bits, pointer):
    ones = [k for k, b in enumerate(bits) if b]
    if not ones:
        return None
    later = [k for k in ones if k >= pointer]
    return (later or ones)[0]


def _tournament(entries, better):
    """The hardware's pairwise tree: index of the best valid entry, ties to the lower index."""
    level = [(v, key, k) for k, (v, key) in enumerate(entries)]
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            a, b = level[j], level[j + 1]
            take_b = b[0] and (not a[0] or better(b[1], a[1]))
            nxt.append((a[0] or b[0], *(b[1:] if take_b else a[1:])))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0][2] if level[0][0] else None


class SchedulerModel:
    """Policy state and decisions of :class:`~supernic.hw.nic.scheduler.TenantScheduler`."""

    def __init__(self, config: SchedulerConfig):
        if not isinstance(config, SchedulerConfig):
            raise TypeError(f"Scheduler model config must be a SchedulerConfig, not {config!r}")
        self.config = config
        T = config.tenants
        self.tags = [0] * T
        self.vtime = 0
        self.rr_ptr = 0
        self.drr_ptr = 0
        self.deficit = [0] * T
        self._back = [False] * T

    def increment(self, t, beats, to_region, region):
        c = self.config
        return tag_increment(dominant_cost(beats, to_region, c.cost(region), c.regions),
                             c.inv_weight(t))

    def step(self, rec):
        """Apply one trace record (a dict: ``decide``, ``eligible``, ``backlogged`` as lists of
        bools, ``cand`` as a list of dicts with ``beats``, ``bytes``, ``region``,
        ``to_region``). Returns the tenant the policy picks, or ``None``; ``"any"`` for the
        fifo policy, whose arrival order the testbench checks on the output instead."""
        c = self.config
        T = c.tenants
        el, back, cand = rec["eligible"], rec["backlogged"], rec["cand"]
        nxt = lambda i: 0 if i == T - 1 else i + 1  # noqa: E731
        # A tenant that starts a backlog starts at the virtual time (no credit for idling).
        for t in range(T):
            if back[t] and not self._back[t] and _before(self.tags[t], self.vtime):
                self.tags[t] = self.vtime
        self._back = list(back)
        pick = None
        if rec["decide"]:
            policy = c.policy
            if policy == "rr":
                pick = _round_robin(el, self.rr_ptr)
                if pick is not None:
                    self.rr_ptr = nxt(pick)
            elif policy == "drf":
                pick = _tournament(list(zip(el, self.tags)), _before)
            elif policy == "drr":
                positive = [d > 0 for d in self.deficit]
                credit = [e and p for e, p in zip(el, positive)]
                a = _round_robin(credit, self.drr_ptr)
                if a is not None:
                    pick = a
                    self.deficit[a] -= cand[a]["bytes"]
                    self.drr_ptr = nxt(a)
                elif any(el):
                    refilled = [d + c.tenant_quantum(t) for t, d in enumerate(self.deficit)]
                    b = _round_robin([e and r > 0 for e, r in zip(el, refilled)], self.drr_ptr)
                    for t in range(T):
                        if el[t]:
                            self.deficit[t] = refilled[t] - (cand[t]["bytes"] if t == b else 0)
                    if b is not None:
                        pick = b
                        self.drr_ptr = nxt(b)
            else:
                pick = "any" if rec["pick_valid"] else None
        for t in range(T):
            if not back[t] and self.deficit[t] > 0:
                self.deficit[t] = 0
        dispatched = (rec["pick"] if rec["pick_valid"] else None) if pick == "any" else pick
        if dispatched is not None:
            k = cand[dispatched]
            self.vtime = self.tags[dispatched]
            self.tags[dispatched] = (self.tags[dispatched] + self.increment(
                dispatched, k["beats"], k["to_region"], k["region"])) & TAG_MASK
        return pick


@dataclass(frozen=True)
class TenantLoad:
    """A backlogged tenant's packets: ``beats``, ``bytes``, ``to_region`` beats sent to its
    region ``region``."""
    beats: int
    bytes: int
    region: int
    to_region: int


def drf_allocation(loads, config: SchedulerConfig):
    """Weighted DRF by progressive filling: packets per cycle for each tenant, with capacities
    of one beat a cycle for dispatch and egress and ``regions`` region-cycles a cycle."""
    R = config.regions
    resources = ("dispatch", "egress", "region")
    demands = {t: dict(zip(resources, (load.beats, load.beats,
                                       load.to_region * config.region_costs[load.region] / R)))
               for t, load in enumerate(loads)}
    rates = progressive_filling(demands, dict(enumerate(config.weights)),
                                dict.fromkeys(resources, 1.0))
    return [rates[t] for t in range(len(loads))]


def expected_shares(policy, loads, config: SchedulerConfig):
    """Each backlogged tenant's long-run fraction of the dispatched beats under ``policy``
    (work-conserving: the dispatch path is always busy). ``fifo`` has no share target."""
    if policy not in POLICY_CODES:
        raise ValueError(f"Policy must be one of {list(POLICY_CODES)}, not {policy!r}")
    if policy == "rr":
        weights = [load.beats for load in loads]
    elif policy == "drr":
        weights = [config.tenant_quantum(t) * load.beats / load.bytes
                   for t, load in enumerate(loads)]
    elif policy == "drf":
        weights = [rate * load.beats for rate, load in zip(drf_allocation(loads, config), loads)]
    else:
        return None
    total = sum(weights)
    return [w / total for w in weights]
