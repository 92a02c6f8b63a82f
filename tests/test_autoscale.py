"""The auto-scaling policy (sw/driver/autoscale.py) on synthetic sample sequences: a closed loop
that applies every decision, so the next sample sees the new instance count."""

import pytest

from supernic.driver.autoscale import (
    AutoScaleConfig, AutoScaler, ChainSample, Rebalance, ScaleIn, ScaleOut,
)
from supernic.driver.rebalance import balance, imbalance

CONFIG = AutoScaleConfig(high_occupancy=64, low_throughput=10, low_occupancy=0, up_samples=2,
                         down_samples=4, cooldown_samples=3)


def sample(load, instances, tenant=0, chain="web"):
    """A sample of a synthetic ``load``: 'high' (queue above the watermark), 'drop' (short queue
    but drops), 'mid' (busy, below the watermark) or 'idle'."""
    occupancy, throughput, drops = {
        "high": (200, 50 * len(instances), 0),
        "drop": (10, 50 * len(instances), 3),
        "mid": (32, 50 * len(instances), 0),
        "idle": (0, 2 * len(instances), 0),
    }[load]
    return ChainSample(tenant, chain, occupancy, throughput, drops, tuple(instances))


class Loop:
    """Runs chains through the scaler, applying decisions as a driver would: a scale-out takes
    the lowest free region, a scale-in frees the named one after the step."""

    def __init__(self, config=CONFIG, regions=8, shares=None):
        self.scaler = AutoScaler(config)
        self.free = list(range(regions))
        self.chains = {}
        self.shares = shares or {}
        self.log = []            # (sample index, decision)
        self.time = 0

    def add(self, tenant, chain, instances=1, share=None):
        self.chains[(tenant, chain)] = [self.free.pop(0) for _ in range(instances)]
        if share is not None:
            self.shares[tenant] = share

    def step(self, loads):
        """``loads`` maps (tenant, chain) to a load name."""
        self.time += 1
        samples = [sample(loads[key], self.chains[key], *key) for key in self.chains]
        decisions = self.scaler.step(samples, len(self.free), self.shares)
        for decision in decisions:
            key = (decision.tenant, decision.chain)
            if isinstance(decision, ScaleOut):
                self.chains[key].append(self.free.pop(0))
            else:
                assert decision.instance == self.chains[key][-1]
                self.chains[key].remove(decision.instance)
                self.free.append(decision.instance)
            self.log.append((self.time, decision))
        return decisions

    def run(self, loads, count):
        for _ in range(count):
            self.step({key: loads for key in self.chains} if isinstance(loads, str) else loads)

    def times(self, kind=None):
        return [t for t, decision in self.log if kind is None or isinstance(decision, kind)]


def test_sustained_overload_scales_out_once_per_cooldown_up_to_the_share():
    loop = Loop()
    loop.add(0, "web", share=4)
    loop.run("high", 30)
    # up_samples (2) overloaded samples, then 3 ignored (cooldown), then 2 more, ...
    assert loop.times() == [2, 7, 12]
    assert loop.log[0][1] == ScaleOut(0, "web")
    assert len(loop.chains[(0, "web")]) == 4


@pytest.mark.parametrize("load", ["high", "drop"])
def test_drops_or_a_long_queue_both_overload(load):
    loop = Loop()
    loop.add(0, "web", share=2)
    loop.run(load, 10)
    assert loop.times(ScaleOut) == [2]


def test_no_scale_out_beyond_the_share_counted_over_all_chains():
    loop = Loop()
    loop.add(0, "api", instances=2, share=4)
    loop.add(0, "web", instances=1)
    loop.run("high", 40)
    assert sum(len(regions) for regions in loop.chains.values()) == 4
    assert loop.log == [(2, ScaleOut(0, "web"))]      # the chain with fewer instances first


def test_waits_for_a_free_region_then_scales_at_once():
    loop = Loop(regions=2)
    loop.add(0, "web", share=8)
    loop.add(1, "dns", share=8)
    loop.run("high", 10)
    assert loop.free == [] and loop.log == []
    loop.free.append(99)                      # another tenant's region is freed
    loop.step({(0, "web"): "high", (1, "dns"): "high"})
    assert loop.log == [(11, ScaleOut(0, "web"))]    # equal held/share: lower tenant first


def test_scarce_regions_go_to_the_tenant_furthest_below_its_share():
    loop = Loop(regions=5)
    loop.add(0, "web", instances=3, share=4)
    loop.add(1, "dns", instances=1, share=4)
    loop.run("high", 2)
    assert loop.log == [(2, ScaleOut(1, "dns"))]


def test_idle_scales_in_newest_first_never_below_one():
    loop = Loop()
    loop.add(0, "web", instances=3, share=4)
    first = list(loop.chains[(0, "web")])
    loop.run("idle", 40)
    assert loop.times(ScaleIn) == [4, 11]
    assert [decision.instance for _, decision in loop.log] == [first[2], first[1]]
    assert loop.chains[(0, "web")] == first[:1]


def test_oscillating_load_does_not_flap():
    """Flipping every sample never completes a streak; flipping every 3 samples scales out
    (3 >= up_samples) but never back in (down_samples is 4), so there is no out-in-out cycle."""
    loop = Loop()
    loop.add(0, "web", share=8)
    for index in range(200):
        loop.step({(0, "web"): "high" if index % 2 else "idle"})
    assert loop.log == []
    loop = Loop()
    loop.add(0, "web", share=3)
    for index in range(200):
        loop.step({(0, "web"): "high" if index % 6 < 3 else "idle"})
    assert loop.times(ScaleIn) == []
    assert len(loop.times(ScaleOut)) == 2


def test_load_between_the_watermarks_does_nothing():
    loop = Loop()
    loop.add(0, "web", instances=2, share=4)
    loop.run("mid", 50)
    assert loop.log == []


def test_cooldown_samples_are_ignored():
    loop = Loop(AutoScaleConfig(high_occupancy=64, low_throughput=10, up_samples=2,
                                down_samples=2, cooldown_samples=3))
    loop.add(0, "web", share=4)
    loop.run("high", 2)
    assert loop.times() == [2]
    loop.run("idle", 3)                       # cooldown: these do not count towards scale-in
    loop.run("idle", 1)
    assert loop.times() == [2]
    loop.run("idle", 1)
    assert loop.times() == [2, 7]


def test_a_scale_in_does_not_free_a_region_in_the_same_step():
    scaler = AutoScaler(AutoScaleConfig(high_occupancy=64, low_throughput=10, up_samples=1,
                                        down_samples=1))
    decisions = scaler.step([sample("idle", [0, 1], 0, "a"), sample("high", [2], 1, "b")],
                            free_regions=0, shares={0: 4, 1: 4})
    assert decisions == [ScaleIn(0, "a", 1)]


def test_forget_restarts_a_chain():
    scaler = AutoScaler(CONFIG)
    scaler.step([sample("high", [0])], 4, {0: 4})
    scaler.forget(0, "web")
    assert scaler.step([sample("high", [0])], 4, {0: 4}) == []
    assert scaler.step([sample("high", [0])], 4, {0: 4}) == [ScaleOut(0, "web")]


@pytest.mark.parametrize("kwargs, message", [
    (dict(high_occupancy=-1, low_throughput=1),
     "Autoscale high_occupancy must be a non-negative integer, not -1"),
    (dict(high_occupancy=8, low_throughput=-1),
     "Autoscale low_throughput must be a non-negative number, not -1"),
    (dict(high_occupancy=8, low_throughput=1, low_occupancy=8),
     "Autoscale low_occupancy must be below high_occupancy (8), not 8"),
    (dict(high_occupancy=8, low_throughput=1, up_samples=0),
     "Autoscale up_samples must be an integer of at least 1, not 0"),
    (dict(high_occupancy=8, low_throughput=1, cooldown_samples=True),
     "Autoscale cooldown_samples must be a non-negative integer, not True"),
])
def test_config_errors(kwargs, message):
    with pytest.raises(ValueError) as info:
        AutoScaleConfig(**kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize("build, message", [
    (lambda: ChainSample(0, "", 0, 0, 0, (0,)), "Sample chain must be a non-empty string, not ''"),
    (lambda: ChainSample(0, "web", -3, 0, 0, (0,)),
     "Sample occupancy must be a non-negative integer, not -3"),
    (lambda: ChainSample(0, "web", 0, 0, 0, (1, 1)), "Sample instances must be distinct, "
                                                     "not (1, 1)"),
    (lambda: ChainSample(0, "web", 0, 0, 0, 2),
     "Sample instances must be a sequence of instance ids, not 2"),
    (lambda: AutoScaler(CONFIG).step([sample("idle", [0])], 1, {}),
     "No fair share given for tenant 0"),
    (lambda: AutoScaler(CONFIG).step([sample("idle", [0])] * 2, 1, {0: 1}),
     "Sample must be unique per (tenant, chain), not (0, 'web')"),
    (lambda: AutoScaler(CONFIG).step([sample("idle", [0])], -1, {0: 1}),
     "Free regions must be a non-negative integer, not -1"),
    (lambda: AutoScaler(CONFIG).step([sample("idle", [0])], 1, {0: 1.5}),
     "Share of tenant 0 must be a non-negative integer, not 1.5"),
])
def test_sample_errors(build, message):
    with pytest.raises(ValueError) as info:
        build()
    assert str(info.value) == message


def test_config_must_be_a_config():
    with pytest.raises(TypeError, match="Autoscaler config must be an AutoScaleConfig, not 3"):
        AutoScaler(3)


# --- rebalancing ------------------------------------------------------------------------------
#: Uneven entries (16 of them, the even ones heavier): dealt out in turn over two instances,
#: the busiest carries 1.26 of the mean; a table by load evens them.
UNEVEN = tuple(100 * (1 + (7 * i) % 9) + (400 if i % 2 == 0 else 0) for i in range(16))
EVEN = (740,) * 16
#: A window is three samples of either traffic.
REBALANCE = AutoScaleConfig(high_occupancy=64, low_throughput=10, up_samples=2, down_samples=4,
                            cooldown_samples=3, rebalance_beats=33_000,
                            rebalance_above=1.04, rebalance_rearm=1.02)


def in_turn(instances, size=16):
    return tuple(instances[i % len(instances)] for i in range(size))


class TableLoop(Loop):
    """:class:`Loop` with flow tables: each sample carries the entries' loads (``traffic``)
    and the table in effect; a scale decision deals the entries out in turn over the new
    instances, as a driver does, and a rebalance commits its table (unless ``apply`` is
    false: a table the driver could not commit)."""

    def __init__(self, config=REBALANCE, apply=True, **kwargs):
        super().__init__(config, **kwargs)
        self.tables = {}
        self.traffic = UNEVEN
        self.apply = apply

    def step(self, loads):
        self.time += 1
        samples = []
        for key, instances in self.chains.items():
            if set(self.tables.get(key, ())) != set(instances):
                self.tables[key] = in_turn(instances)
            base = sample(loads[key], instances, *key)
            samples.append(ChainSample(*key, base.occupancy, base.throughput, base.drops,
                                       tuple(instances), self.traffic, self.tables[key]))
        decisions = self.scaler.step(samples, len(self.free), self.shares)
        for decision in decisions:
            key = (decision.tenant, decision.chain)
            if isinstance(decision, Rebalance):
                if self.apply:
                    self.tables[key] = decision.table
            elif isinstance(decision, ScaleOut):
                self.chains[key].append(self.free.pop(0))
            else:
                self.chains[key].remove(decision.instance)
                self.free.append(decision.instance)
            self.log.append((self.time, decision))
        return decisions


def test_rebalance_once_the_new_instances_ran_a_window_after_a_scale_out():
    loop = TableLoop()
    loop.add(0, "web", share=2)
    loop.run("high", 12)
    # Scale-out at sample 2; samples 3, 4, 5 are the window of the two instances (a window
    # of one instance has nothing to spread).
    assert loop.times(ScaleOut) == [2] and loop.times(Rebalance) == [5]
    decision = loop.log[-1][1]
    assert decision.reason == "instances" and set(decision.table) == {0, 1}
    assert decision.table == tuple(balance([3 * x for x in UNEVEN], [0, 1]))
    assert decision.imbalance == pytest.approx(imbalance(UNEVEN, in_turn([0, 1]), [0, 1]))
    assert decision.imbalance > 1.2 and decision.expected == pytest.approx(1.0)
    assert loop.tables[(0, "web")] == decision.table


def test_rebalance_after_a_scale_in_over_the_instances_left():
    loop = TableLoop()
    loop.add(0, "web", instances=3, share=4)
    loop.run("idle", 10)
    # The first window of a chain seen for the first time rebalances it (samples 1-3), the
    # scale-in at 4 (down_samples) restarts the window: samples 5-7.
    assert loop.times(ScaleIn) == [4] and loop.times(Rebalance) == [3, 7]
    decision = loop.log[-1][1]
    assert decision.reason == "instances" and set(decision.table) == {0, 1}
    assert decision.table == tuple(balance([3 * x for x in UNEVEN], [0, 1]))


def test_imbalance_above_the_threshold_rebalances_once_until_rearmed():
    loop = TableLoop(apply=False)             # the table stays as it is: always imbalanced
    loop.add(0, "web", instances=2, share=2)
    loop.run("mid", 3)
    assert loop.log[-1][1].reason == "instances" and loop.times(Rebalance) == [3]
    loop.run("mid", 15)                       # disarmed: not applied, still imbalanced
    assert loop.times(Rebalance) == [3]
    loop.traffic = EVEN                       # a window at or below rebalance_rearm re-arms
    loop.run("mid", 3)
    loop.traffic = UNEVEN
    loop.run("mid", 3)
    assert loop.times(Rebalance) == [3, 24]
    assert loop.log[-1][1].reason == "imbalance"
    assert loop.log[-1][1].imbalance > REBALANCE.rebalance_above


def test_imbalance_between_the_thresholds_does_not_rearm():
    # With the entries in turn, instance 0 carries 1.03 of the mean: above rearm, below above.
    slight = (1030, 970) * 8
    config = AutoScaleConfig(high_occupancy=64, low_throughput=10, rebalance_beats=16_000,
                             rebalance_above=1.04, rebalance_rearm=1.02)
    loop = TableLoop(config, apply=False)
    loop.add(0, "web", instances=2, share=2)
    loop.traffic = tuple(2 * x for x in UNEVEN)
    loop.run("mid", 2)
    assert [d.reason for _, d in loop.log] == ["instances"]
    loop.traffic = slight
    table = loop.tables[(0, "web")]
    assert config.rebalance_rearm < imbalance(slight, table, [0, 1]) < config.rebalance_above
    loop.run("mid", 4)
    loop.traffic = tuple(2 * x for x in UNEVEN)
    loop.run("mid", 4)
    assert [d.reason for _, d in loop.log] == ["instances"]


def test_an_even_table_is_left_alone():
    loop = TableLoop()
    loop.traffic = EVEN
    loop.add(0, "web", instances=2, share=2)
    loop.run("mid", 30)
    assert [d.reason for _, d in loop.log] == ["instances"]     # only the first window's


def test_no_rebalance_without_entry_loads_with_one_instance_or_while_scaling():
    loop = Loop(REBALANCE)                    # samples without entry loads
    loop.add(0, "web", instances=2, share=2)
    loop.run("mid", 20)
    assert loop.log == []
    loop = TableLoop()
    loop.add(0, "web", share=1)
    loop.run("high", 20)
    assert loop.log == []
    scaler = AutoScaler(AutoScaleConfig(high_occupancy=64, low_throughput=10, up_samples=1,
                                        down_samples=1, rebalance_beats=1))
    decisions = scaler.step([ChainSample(0, "web", 0, 0, 0, (0, 1), UNEVEN, in_turn([0, 1]))],
                            0, {0: 2})
    assert decisions == [ScaleIn(0, "web", 1)]


@pytest.mark.parametrize("kwargs, message", [
    (dict(rebalance_beats=0), "Autoscale rebalance_beats must be an integer of at least 1, not 0"),
    (dict(rebalance_above=1), "Autoscale rebalance_above must be a number above 1, not 1"),
    (dict(rebalance_above=True), "Autoscale rebalance_above must be a number above 1, not True"),
    (dict(rebalance_above="2"), "Autoscale rebalance_above must be a number above 1, not '2'"),
    (dict(rebalance_above=float("inf")),
     "Autoscale rebalance_above must be a number above 1, not inf"),
    (dict(rebalance_rearm=0.99), "Autoscale rebalance_rearm must be a number from 1 to below "
                                 "rebalance_above (1.04), not 0.99"),
    (dict(rebalance_rearm=1.04), "Autoscale rebalance_rearm must be a number from 1 to below "
                                 "rebalance_above (1.04), not 1.04"),
    (dict(rebalance_rearm=float("nan")), "Autoscale rebalance_rearm must be a number from 1 "
                                         "to below rebalance_above (1.04), not nan"),
])
def test_rebalance_config_errors(kwargs, message):
    with pytest.raises(ValueError) as info:
        AutoScaleConfig(high_occupancy=8, low_throughput=1, **kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize("loads, table, message", [
    ((1, 2), None, "Sample entry_loads and table must be given both or neither, not (1, 2) and "
                   "None"),
    ("12", (0, 0), "Sample entry_loads must be a sequence, not '12'"),
    ((1, 2), (0,), "Sample table must have one instance per entry load (2), not (0,)"),
    ((1, -2), (0, 0), "Sample entry load must be a non-negative integer, not -2"),
    ((1, 2), (0, 5), "Sample table entry must be one of the instances (0, 1), not 5"),
])
def test_rebalance_sample_errors(loads, table, message):
    with pytest.raises(ValueError) as info:
        ChainSample(0, "web", 0, 0, 0, (0, 1), loads, table)
    assert str(info.value) == message
