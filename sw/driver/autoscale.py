"""When to give a tenant's chain one more instance (a region) or take one away, and when to
spread its flow table again.

A pure policy: :meth:`AutoScaler.step` takes one period's samples, one per running
(tenant, chain), and returns decisions; applying them (loading a region, draining one,
committing a table: :meth:`~supernic.driver.control.ControlPlane.apply_rebalance`) is the
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

Rebalancing (:mod:`.rebalance`): a sample may carry the beats each of the tenant's flow-table
entries carried in the period and the table in effect (the instance of each entry). The
policy adds the entries' loads up over a measuring window of at least ``rebalance_beats``
beats, and at the window's end judges the table by its imbalance (the busiest instance's load
over the mean, 1.0 even). An entry's load is what its flows sent, whichever instance served
them, so a window stays valid across a table change made behind the policy's back. It decides
a :class:`Rebalance`, the table dealing the window's loads out heaviest first:

* after every change of the chain's instances (a scale-out or scale-in done, or a chain seen
  for the first time), once the new instances have run for a whole window: the table the
  caller made for them spreads entries by number, not by load;
* when the imbalance is above ``rebalance_above``. Then the trigger is disarmed until a
  window measures ``rebalance_rearm`` or less (a Schmitt trigger): a table that the best
  rebalance cannot make even (a few flows heavier than the rest) is not rebalanced again
  window after window, each time holding the tenant for the commit, and a load near the
  threshold does not flap. A change of instances re-arms it.

Each window is judged once and the next starts empty; a chain given a scale decision in the
same step is not rebalanced (its instances are about to change). With one instance there is
nothing to spread.
"""

from dataclasses import dataclass
from fractions import Fraction
from numbers import Rational

from .rebalance import balance, imbalance

__all__ = ["AutoScaleConfig", "ChainSample", "ScaleOut", "ScaleIn", "Rebalance",
           "AutoScaler"]


def _check_count(thing, value, low=0):
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        kind = "a non-negative integer" if low == 0 else f"an integer of at least {low}"
        raise ValueError(f"{thing} must be {kind}, not {value!r}")
    return value


def _is_number(value):
    return (not isinstance(value, bool) and isinstance(value, (Rational, float))
            and -float("inf") < value < float("inf"))


@dataclass(frozen=True)
class AutoScaleConfig:
    """Thresholds of the policy; occupancy is in beats queued, throughput in beats dispatched
    per sample period and per instance. ``rebalance_beats``: the beats a measuring window of
    the entries' loads counts at least; ``rebalance_above`` and ``rebalance_rearm``: the
    imbalance that triggers a rebalance and the one that re-arms the trigger (see the module
    docstring). At 1.04 the busiest instance sets the pace at 1 / 1.04 = 0.96 of linear."""
    high_occupancy: int
    low_throughput: object
    low_occupancy: int = 0
    up_samples: int = 3
    down_samples: int = 10
    cooldown_samples: int = 5
    rebalance_beats: int = 1 << 16
    rebalance_above: object = 1.04
    rebalance_rearm: object = 1.02

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
        _check_count("Autoscale rebalance_beats", self.rebalance_beats, low=1)
        if not _is_number(self.rebalance_above) or not self.rebalance_above > 1:
            raise ValueError(f"Autoscale rebalance_above must be a number above 1, "
                             f"not {self.rebalance_above!r}")
        if not _is_number(self.rebalance_rearm) \
                or not 1 <= self.rebalance_rearm < self.rebalance_above:
            raise ValueError(f"Autoscale rebalance_rearm must be a number from 1 to below "
                             f"rebalance_above ({self.rebalance_above}), "
                             f"not {self.rebalance_rearm!r}")


@dataclass(frozen=True)
class ChainSample:
    """One period of one (tenant, chain): ``occupancy`` beats queued now, ``throughput`` beats
    dispatched and ``drops`` packets dropped since the last sample, and the ids of the
    ``instances`` it runs on (regions, say), oldest first. For rebalancing, optionally:
    ``entry_loads``, the beats each of the tenant's flow-table entries carried since the last
    sample, and ``table``, the instance each entry dispatches to now (both or neither)."""
    tenant: int
    chain: str
    occupancy: int
    throughput: int
    drops: int
    instances: tuple
    entry_loads: tuple = None
    table: tuple = None

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
        if (self.entry_loads is None) != (self.table is None):
            raise ValueError(f"Sample entry_loads and table must be given both or neither, "
                             f"not {self.entry_loads!r} and {self.table!r}")
        if self.entry_loads is None:
            return
        for name in ("entry_loads", "table"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
                raise ValueError(f"Sample {name} must be a sequence, not {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not self.table or len(self.table) != len(self.entry_loads):
            raise ValueError(f"Sample table must have one instance per entry load "
                             f"({len(self.entry_loads)}), not {self.table!r}")
        for load in self.entry_loads:
            _check_count("Sample entry load", load)
        for instance in self.table:
            if instance not in instances:
                raise ValueError(f"Sample table entry must be one of the instances "
                                 f"{instances!r}, not {instance!r}")

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


@dataclass(frozen=True)
class Rebalance:
    """Commit ``table`` (one instance per flow-table entry) for ``chain`` of ``tenant``.
    ``reason``: ``"instances"`` (the first window after its instances changed) or
    ``"imbalance"``; ``imbalance``: the busiest instance's load over the mean in the window
    with the table in effect, ``expected``: the same with ``table``."""
    tenant: int
    chain: str
    table: tuple
    reason: str
    imbalance: float
    expected: float


class _ChainState:
    __slots__ = ("overloaded", "idle", "cooldown", "instances", "changed", "armed", "window")

    def __init__(self):
        self.overloaded = 0     # overloaded samples in a row
        self.idle = 0           # idle samples in a row
        self.cooldown = 0       # samples still to ignore after a decision
        self.instances = None   # the instances of the last sample
        self.changed = False    # the instances changed since the last rebalance
        self.armed = True       # an imbalance above rebalance_above rebalances
        self.window = None      # the entries' loads summed over the measuring window


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
        the most instances it may hold. Returns a list of :class:`ScaleIn`, then
        :class:`ScaleOut`, then :class:`Rebalance` decisions."""
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

        scaled = {(d.tenant, d.chain) for d in scale_in + scale_out}
        rebalance = []
        for sample in sorted(samples, key=lambda sample: sample.key):
            decision = self._window(sample, sample.key in scaled)
            if decision is not None:
                rebalance.append(decision)
        return scale_in + scale_out + rebalance

    def _window(self, sample, scaling):
        """Add ``sample``'s entry loads to its chain's measuring window; at the window's end,
        a :class:`Rebalance` or ``None`` (see the module docstring)."""
        state = self._chains[sample.key]
        if sample.instances != state.instances:
            state.instances = sample.instances
            state.changed, state.armed, state.window = True, True, None
        if sample.entry_loads is None or scaling:
            state.window = None
            return None
        if state.window is None or len(state.window) != len(sample.entry_loads):
            state.window = [0] * len(sample.entry_loads)
        for i, load in enumerate(sample.entry_loads):
            state.window[i] += load
        if sum(state.window) < self.config.rebalance_beats:
            return None
        loads, state.window = state.window, None
        if len(sample.instances) < 2:
            state.changed = False
            return None
        measured = imbalance(loads, sample.table, sample.instances)
        if state.changed:
            reason = "instances"
        elif state.armed and measured > self.config.rebalance_above:
            reason = "imbalance"
        else:
            if measured <= self.config.rebalance_rearm:
                state.armed = True
            return None
        table = tuple(balance(loads, sample.instances))
        state.changed = state.armed = False
        return Rebalance(sample.tenant, sample.chain, table, reason, measured,
                         imbalance(loads, table, sample.instances))

    def _acted(self, key):
        state = self._chains[key]
        state.overloaded = state.idle = 0
        state.cooldown = self.config.cooldown_samples
