"""When to give a tenant's chain one more instance (a region) or take one away.

A pure policy: :meth:`AutoScaler.step` takes one period's samples, one per running
(tenant, chain), and returns decisions; applying them (loading a region, draining one) is the
caller's job, and the next samples show the result.

* Overloaded: queued beats above ``high_occupancy`` or any drops in the period. After
  ``up_samples`` overloaded samples in a row the chain scales out, if a region is free and the
  tenant's instances (over all its chains) are below its fair share (the ``max instances`` that
  :func:`supernic.driver.space.allocate` gave it). A chain that waits for a region keeps its
  streak, so it scales out as soon as one frees.
* Idle: throughput per instance below ``low_throughput`` beats per period, at most
  ``low_occupancy`` beats queued and no drops. After ``down_samples`` idle samples in a row a
  chain with more than one instance scales in by its newest instance (the last listed).

Hysteresis keeps a load near one threshold from flapping: the two conditions use different
signals and thresholds (a chain is never both), the streaks must be unbroken, and after any
decision for a chain its next ``cooldown_samples`` samples are ignored and its streaks restart,
since a queue still drains the backlog of the old instance count for a while after a change.
Under sustained overload a chain therefore scales out once every ``cooldown_samples +
up_samples`` samples until it reaches its share.

When free regions are fewer than the chains ready to scale out, the tenant with the fewest
instances relative to its share goes first (then the lower tenant id; within a tenant the chain
with fewer instances, then by name), the same smallest-share-first order as the allocation.
"""

from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

__all__ = ["AutoScaleConfig", "ChainSample", "ScaleOut", "ScaleIn", "AutoScaler"]


def _check_count(thing, value, low=0):
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        kind = "a non-negative integer" if low == 0 else f"an integer of at least {low}"
        raise ValueError(f"{thing} must be {kind}, not {value!r}")
    return value


@dataclass(frozen=True)
class AutoScaleConfig:
    """Thresholds of the policy; occupancy is in beats queued, throughput in beats dispatched
    per sample period and per instance."""
    high_occupancy: int
    low_throughput: object
    low_occupancy: int = 0
    up_samples: int = 3
    down_samples: int = 10
    cooldown_samples: int = 5

    def __post_init__(self):
        _check_count("Autoscale high_occupancy", self.high_occupancy)
        if isinstance(self.low_throughput, bool) \
                or not isinstance(self.low_throughput, (Rational, float)) \
                or not 0 <= self.low_throughput < float("inf"):
            raise ValueError(f"Autoscale low_throughput must be a non-negative number, "
                             f"not {self.low_throughput!r}")
        _check_count("Autoscale low_occupancy", self.low_occupancy)
        if self.low_occupancy >= self.high_occupancy:
            raise ValueError(f"Autoscale low_occupancy must be below high_occupancy "
                             f"({self.high_occupancy}), not {self.low_occupancy!r}")
        _check_count("Autoscale up_samples", self.up_samples, low=1)
        _check_count("Autoscale down_samples", self.down_samples, low=1)
        _check_count("Autoscale cooldown_samples", self.cooldown_samples)


@dataclass(frozen=True)
class ChainSample:
    """One period of one (tenant, chain): ``occupancy`` beats queued now, ``throughput`` beats
    dispatched and ``drops`` packets dropped since the last sample, and the ids of the
    ``instances`` it runs on (regions, say), oldest first."""
    tenant: int
    chain: str
    occupancy: int
    throughput: int
    drops: int
    instances: tuple

    def __post_init__(self):
        _check_count("Sample tenant", self.tenant)
        if not isinstance(self.chain, str) or not self.chain:
            raise ValueError(f"Sample chain must be a non-empty string, not {self.chain!r}")
        for name in ("occupancy", "throughput", "drops"):
            _check_count(f"Sample {name}", getattr(self, name))
        if isinstance(self.instances, (str, bytes)) or not hasattr(self.instances, "__iter__"):
            raise ValueError(f"Sample instances must be a sequence of instance ids, "
                             f"not {self.instances!r}")
        instances = tuple(self.instances)
        if len(set(instances)) != len(instances):
            raise ValueError(f"Sample instances must be distinct, not {self.instances!r}")
        object.__setattr__(self, "instances", instances)

    @property
    def key(self):
        return (self.tenant, self.chain)


@dataclass(frozen=True)
class ScaleOut:
    """Give ``chain`` of ``tenant`` one more instance in a free region."""
    tenant: int
    chain: str


@dataclass(frozen=True)
class ScaleIn:
    """Drain and free ``instance`` of ``chain`` of ``tenant``."""
    tenant: int
    chain: str
    instance: object


class _ChainState:
    __slots__ = ("overloaded", "idle", "cooldown")

    def __init__(self):
        self.overloaded = 0     # overloaded samples in a row
        self.idle = 0           # idle samples in a row
        self.cooldown = 0       # samples still to ignore after a decision


class AutoScaler:
    """The auto-scaling policy; see the module docstring. ``config`` is an
    :class:`AutoScaleConfig`."""

    def __init__(self, config):
        if not isinstance(config, AutoScaleConfig):
            raise TypeError(f"Autoscaler config must be an AutoScaleConfig, not {config!r}")
        self.config = config
        self._chains = {}

    def forget(self, tenant, chain):
        """Drop the state of a chain that no longer runs (a chain loaded again starts afresh)."""
        self._chains.pop((tenant, chain), None)

    def _classify(self, sample):
        config = self.config
        overloaded = sample.occupancy > config.high_occupancy or sample.drops > 0
        idle = (not overloaded and sample.occupancy <= config.low_occupancy
                and sample.throughput < config.low_throughput * len(sample.instances))
        return overloaded, idle

    def step(self, samples, free_regions, shares):
        """Feed one period: ``samples`` has one :class:`ChainSample` per running chain,
        ``free_regions`` is how many regions are free, ``shares`` maps each sampled tenant to
        the most instances it may hold. Returns a list of :class:`ScaleIn` then
        :class:`ScaleOut` decisions."""
        _check_count("Free regions", free_regions)
        samples = tuple(samples)
        seen = set()
        for sample in samples:
            if not isinstance(sample, ChainSample):
                raise ValueError(f"Sample must be a ChainSample, not {sample!r}")
            if sample.key in seen:
                raise ValueError(f"Sample must be unique per (tenant, chain), not {sample.key!r}")
            seen.add(sample.key)
            if sample.tenant not in shares:
                raise ValueError(f"No fair share given for tenant {sample.tenant}")
            _check_count(f"Share of tenant {sample.tenant}", shares[sample.tenant])
        held = {}
        for sample in samples:
            held[sample.tenant] = held.get(sample.tenant, 0) + len(sample.instances)

        scale_in, ready_out = [], []
        for sample in sorted(samples, key=lambda sample: sample.key):
            state = self._chains.setdefault(sample.key, _ChainState())
            if state.cooldown:
                state.cooldown -= 1
                continue
            overloaded, idle = self._classify(sample)
            state.overloaded = state.overloaded + 1 if overloaded else 0
            state.idle = state.idle + 1 if idle else 0
            if state.overloaded >= self.config.up_samples:
                ready_out.append(sample)
            elif state.idle >= self.config.down_samples and len(sample.instances) > 1:
                scale_in.append(ScaleIn(sample.tenant, sample.chain, sample.instances[-1]))
                self._acted(sample.key)

        # Regions freed by this period's scale-ins are not free until the caller drains them.
        scale_out = []
        free = free_regions
        while ready_out and free:
            eligible = [s for s in ready_out if held[s.tenant] < shares[s.tenant]]
            if not eligible:
                break
            chosen = min(eligible, key=lambda s: (Fraction(held[s.tenant], shares[s.tenant]),
                                                  s.tenant, len(s.instances), s.chain))
            ready_out.remove(chosen)
            scale_out.append(ScaleOut(chosen.tenant, chosen.chain))
            held[chosen.tenant] += 1
            free -= 1
            self._acted(chosen.key)
        return scale_in + scale_out

    def _acted(self, key):
        state = self._chains[key]
        state.overloaded = state.idle = 0
        state.cooldown = self.config.cooldown_samples
