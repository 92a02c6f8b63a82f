"""Tenant scheduler: constructor and configuration checks, the model's policies, and the
hardware against the model on Verilator at 64 bits (random and malformed traffic with idle,
backpressure, offline regions and table commits; saturation shares per policy; latency)."""

import pytest

from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.scheduler import (SchedulerShell, TenantScheduler, shell_register_map, trace_layout)
from supernic.desc.nic.scheduler import SchedulerConfig, scheduler_block
from supernic.desc.config import ConfigError
from supernic.sim.build import build_simulator, generated_component
from supernic.sim.nic.scheduler import (SchedulerModel, TenantLoad, drf_allocation,
                                        expected_shares)
from supernic.sim.session import run_bench

SHAPE = NicShape(data_width=64, header_bytes=128, tenants=4, ports=2, regions=4)
QUEUE_BEATS = 256
QUEUE_PACKETS = 16
TABLE_SIZE = 16
TB = "supernic.sim.tb.scheduler_tb"


@pytest.mark.parametrize("kwargs, message", [
    ({"queue_beats": 100}, "Queue beats must be a power of two from 4 to 4096, not 100"),
    ({"queue_packets": 3}, "Queue packets must be a power of two from 2 to queue beats (256), "
                           "not 3"),
    ({"table_size": 12}, "Table size must be a power of two from 1 to 256, not 12"),
    ({"policies": ("drf", "wfq")}, "Policies must be a non-empty sequence of distinct names "
                                   "from ('drf', 'rr', 'drr', 'fifo'), not ('drf', 'wfq')"),
])
def test_constructor_errors(kwargs, message):
    with pytest.raises(ValueError) as info:
        TenantScheduler(SHAPE, **kwargs)
    assert str(info.value) == message


def test_config_errors_and_writes():
    with pytest.raises(ConfigError, match="scheduler policy must be one of"):
        SchedulerConfig(policy="wfq")
    with pytest.raises(ConfigError, match="scheduler weights must have 4 entries, not 2"):
        SchedulerConfig(weights=(1, 2))
    with pytest.raises(ConfigError, match=r"region_costs\[1\] must be a number"):
        SchedulerConfig(region_costs=(1, 0, 1, 1))
    config = SchedulerConfig(policy="drr", weights=(1, 2, 0.5, 1), quantum=1000,
                             tables=[[t] * TABLE_SIZE for t in range(4)],
                             enables=(1, 1, 1, 0))
    writes = config.register_writes(scheduler_block("sched", SHAPE, TABLE_SIZE))
    assert ("t1_inv_weight", 0x80) in writes and ("t2_inv_weight", 0x200) in writes
    assert ("t1_quantum", 2000) in writes and ("t2_quantum", 500) in writes
    assert writes.count(("table_write", 1)) == 4 * TABLE_SIZE
    assert writes[-2:] == [("policy", 2), ("tenant_enable", 0b0111)]
    with pytest.raises(ConfigError, match="not in block"):
        SchedulerConfig(tenants=8, regions=4).register_writes(
            scheduler_block("sched", SHAPE, TABLE_SIZE))


def test_block_header():
    block = scheduler_block("sched", SHAPE, TABLE_SIZE)
    assert (block.type_id, block.version) == (0x53434844, 0x0001_0002)   # 1.2: bucket loads
    names = {r.name for r in block.registers}
    assert {"policy", "tenant_enable", "t3_inv_weight", "r3_cost", "table_commit",
            "t0_queue_drops", "t3_tag", "tenant_hold", "bucket_select", "bucket_beats"} <= names


def _record(T, eligible, cand, decide=1, back=None):
    return {"decide": decide, "pick_valid": 0, "pick": 0,
            "eligible": [bool(eligible >> t & 1) for t in range(T)],
            "backlogged": [True] * T if back is None else back, "cand": cand}


def test_model_drf_follows_dominant_costs():
    """Tenant 0's region costs 8 a beat over 4 regions: its dominant share is the region's,
    twice its link share, so it gets half the packets of tenant 1."""
    config = SchedulerConfig(tenants=2, regions=4, policy="drf", region_costs=(8, 1, 1, 1))
    model = SchedulerModel(config)
    cand = [{"beats": 4, "bytes": 32, "region": 0, "to_region": 4},
            {"beats": 4, "bytes": 32, "region": 1, "to_region": 4}]
    picks = []
    for _ in range(300):
        rec = _record(2, 0b11, cand)
        t = model.step(rec)
        rec.update(pick_valid=1, pick=t)
        picks.append(t)
    assert abs(picks.count(1) / picks.count(0) - 2) < 0.05
    loads = [TenantLoad(4, 32, 0, 4), TenantLoad(4, 32, 1, 4)]
    assert expected_shares("drf", loads, config) == pytest.approx([1 / 3, 2 / 3])
    rates = drf_allocation(loads, config)
    assert rates[0] * 2 * 4 == pytest.approx(rates[1] * 4)    # equal dominant shares


def test_model_drr_equal_bytes():
    config = SchedulerConfig(tenants=2, regions=4, policy="drr", quantum=300)
    model = SchedulerModel(config)
    cand = [{"beats": 8, "bytes": 60, "region": 0, "to_region": 8},
            {"beats": 190, "bytes": 1500, "region": 1, "to_region": 190}]
    sent = [0, 0]
    for _ in range(2000):
        t = model.step(_record(2, 0b11, cand))
        if t is not None:
            sent[t] += cand[t]["bytes"]
    assert abs(sent[0] / sent[1] - 1) < 0.05


# --- hardware ----------------------------------------------------------------------------------
def scheduler_simulator():
    """The shell at 64 bits, built once (cached by the gateware sources)."""
    name = "nic_scheduler_w64"
    args = dict(queue_beats=QUEUE_BEATS, table_size=TABLE_SIZE, queue_packets=QUEUE_PACKETS)
    regmap = shell_register_map(SHAPE, TABLE_SIZE)
    description = {
        "config": {"shape": {k: getattr(SHAPE, k) for k in SHAPE.__dataclass_fields__},
                   "queue_beats": QUEUE_BEATS, "table_size": TABLE_SIZE,
                   "queue_packets": QUEUE_PACKETS,
                   "trace_bits": trace_layout(SHAPE, QUEUE_BEATS).size},
        "registers": regmap.to_json(),
    }
    paths = generated_component(name, description, lambda: SchedulerShell(SHAPE, **args),
                                description)
    return build_simulator(paths["verilog"], name, paths["regmap"])


@pytest.fixture(scope="module")
def simulator():
    return scheduler_simulator()


@pytest.mark.parametrize("policy", ["drf", "drr", "rr", "fifo"])
def test_random_traffic(simulator, policy, tmp_path):
    result = run_bench(simulator, "random_traffic", {
        "seed": 11 + len(policy), "packets": 400, "policy": policy,
        "table_changes": 4,
    }, test_dir=tmp_path, module=TB)
    assert not result["problems"]
    assert result["model_mismatches"] == 0
    assert result["queue_drops"] > 0 and result["disabled_drops"] > 0
    assert result["table_epochs_used"] > 0
    # Tenants were held (queued, not dispatched) four times; none was dispatched meanwhile
    # (a problem otherwise), and the run still delivered every enqueued packet.
    assert result["holds"] == 4 and result["held_cycles"] > 400


SATURATION = {
    # rr: equal packets; sizes differ, so beats differ. Every share must stay below the
    # P / tenants = 0.5 beats a cycle each tenant is offered, or the tenant is not backlogged.
    "rr": {"sizes": [64, 96, 32, 64]},
    # drr: equal bytes (weights 1), whatever the sizes.
    "drr": {"sizes": [64, 200, 16, 600]},
    # drf: tenant 0's region costs 8 a beat (region-heavy), tenant 1 has weight 2.
    "drf": {"sizes": [64, 64, 16, 200], "weights": [1, 2, 1, 1],
            "costs": [8, 1, 1, 1]},
    "fifo": {"sizes": [64, 200, 16, 64]},
}


@pytest.mark.parametrize("policy", list(SATURATION))
def test_saturation_shares(simulator, policy, tmp_path):
    import json
    env = {k: json.dumps(v) for k, v in SATURATION[policy].items()}
    result = run_bench(simulator, "saturation", {
        **env, "policy": policy, "cycles": 4000, "warmup": 600,
    }, test_dir=tmp_path, module=TB)
    assert not result["problems"]
    assert result["model_mismatches"] == 0
    assert result["out_beats_per_cycle"] > 0.97
    if policy == "fifo":
        assert result["fifo_order"]
    else:
        for got, want in zip(result["shares"], result["expected_shares"]):
            assert abs(got - want) < 0.03, (result["shares"], result["expected_shares"])
    if policy == "drf":
        dom = result["dominant_shares"]
        assert max(dom) / min(dom) < 1.06, dom


@pytest.mark.parametrize("policy", ["drf", "rr"])
def test_one_beat_packets_and_latency(simulator, policy, tmp_path):
    import json
    result = run_bench(simulator, "saturation", {
        "sizes": json.dumps([8] * 4), "policy": policy, "cycles": 2000,
        "warmup": 200,
    }, test_dir=tmp_path, module=TB)
    assert result["out_beats_per_cycle"] > 0.95
    result = run_bench(simulator, "latency", {"policy": policy}, test_dir=tmp_path,
                       module=TB)
    # Last beat in to first beat out: candidates from this cycle's heads (6 when registered).
    assert max(result["latency_cycles"]) <= 5
    assert result["one_tenant_1beat_beats_per_cycle"] == 1.0


@pytest.mark.parametrize("policy", ["drf", "drr", "rr", "fifo"])
def test_lone_tenant_one_packet_a_cycle(simulator, policy, tmp_path):
    """A lone tenant's queues on both ports full of one-beat packets: a dispatch on every cycle
    from the first to the last (a registered candidate, a cycle old after each dispatch, took
    two cycles a packet), and one beat out every cycle, each port's packets in order."""
    result = run_bench(simulator, "lone_tenant", {"policy": policy}, test_dir=tmp_path,
                       module=TB)
    assert not result["problems"]
    assert result["queued"] == 2 * QUEUE_PACKETS == result["dispatches"]
    assert result["dispatch_cycles"] == result["dispatches"], result
    assert result["out_cycles"] == result["dispatches"], result
    assert result["in_order"] and result["model_mismatches"] == 0
