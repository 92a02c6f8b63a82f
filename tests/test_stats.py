"""`snic traffic`'s flow specifications and schedules, and `snic stats`' figures, without a
device: parsing and refusals, pacing at the given rate, templates that carry the tenant key,
and throughput, latency, fairness and the account on a hand-made record."""

import numpy as np
import pytest

from supernic.driver.stats import account, jain, plot_stats, traffic_stats
from supernic.driver.traffic import Flow, TrafficError, parse_flow
from supernic.sim.flows import make_schedule
from supernic.desc.chain import load_chain
from supernic.sim.parser_model import ParserModel
from pathlib import Path

CHAINS = Path(__file__).resolve().parent.parent / "chains"


def test_parse_flow():
    assert parse_flow("tenant=2") == Flow(tenant=2)
    assert parse_flow(" tenant=1, rate=25%, size=64-1500, port=1, packets=9, flows=4, key=7,"
                      "malformed=0.1") == Flow(1, 0.25, (64, 1500), 1, 9, 4, 7, 0.1)
    assert parse_flow("tenant=0,size=imix").size == "imix"
    for text, message in (("rate=1", "needs tenant=T"), ("tenant=0,speed=3", "unknown field"),
                          ("tenant=0,rate=0", "rate must be a fraction"),
                          ("tenant=0,rate=150%", "rate must be a fraction"),
                          ("tenant=0,size=10", "size must be bytes from 14"),
                          ("tenant=0,size=900-80", "size must be bytes"),
                          ("tenant=x", "tenant must be a number"),
                          ("tenant=0,packets=0", "must be positive"),
                          ("tenant=0,oops", "is not NAME=VALUE")):
        with pytest.raises(TrafficError, match=message):
            parse_flow(text)


def test_schedule_paces_each_flow_and_tags_its_key():
    web = load_chain(CHAINS / "web.toml")
    targets = {0: {"keys": [100], "spec": web}, 1: {"keys": [5000], "spec": None}}
    flows = [parse_flow("tenant=0,rate=0.5,size=64,packets=50"),
             parse_flow("tenant=1,size=200-1500,packets=200,port=0"),
             parse_flow("tenant=0,size=imix,packets=300,port=1")]
    schedule = make_schedule(flows, targets, data_width=64, ports=2, seed=3)
    assert len(schedule) == 550
    parser = ParserModel(256)
    first = [i for i in range(550) if schedule.flow_ids[i] == 0]
    # 64-byte frames (the key's 802.1Q tag included) are 8 beats: 16 cycles apart at 0.5.
    assert {len(schedule.frames[i]) for i in first} == {64}
    assert [schedule.at[i] for i in first] == [16 * k for k in range(50)]
    assert {schedule.ports[i] for i in first} == {0}
    for i in first[:5]:
        meta = parser.parse(schedule.frames[i])
        assert meta["vlan_count"] and int.from_bytes(schedule.frames[i][14:16], "big") & 0xFFF \
            == 100
    second = [i for i in range(550) if schedule.flow_ids[i] == 1]
    for i in second[:20]:       # a VNI above 4095 only fits VXLAN frames
        assert parser.parse(schedule.frames[i])["vxlan"]
    imix = [len(schedule.frames[i]) for i in range(550) if schedule.flow_ids[i] == 2]
    counts = {size: imix.count(size) for size in (64, 576, 1500)}
    assert sum(counts.values()) == 300 and counts[64] > counts[576] > counts[1500] > 0
    # Each port's packets are pushed in offer order.
    for port in (0, 1):
        offers = [schedule.at[i] for i in range(550) if schedule.ports[i] == port]
        assert offers == sorted(offers)
    with pytest.raises(TrafficError, match="cannot make 64-byte frames that carry tenant 1's "
                                           "keys"):
        make_schedule([parse_flow("tenant=1,size=64")], targets, 64, 2)
    with pytest.raises(TrafficError, match="tenant 3 is not deployed"):
        make_schedule([parse_flow("tenant=3")], targets, 64, 2)
    with pytest.raises(TrafficError, match="port 4 does not exist"):
        make_schedule([parse_flow("tenant=0,port=4")], targets, 64, 2)
    by_cycles = make_schedule([parse_flow("tenant=0,rate=0.5,size=64")], targets, 64, 2,
                              cycles=1600)
    assert len(by_cycles) == 100


def test_jain():
    assert jain([5, 5, 5]) == 1.0
    assert jain([1, 0, 0, 0]) == 0.25
    assert jain([]) is None and jain([0, 0]) is None


def _record():
    """Two tenants (weights 1 and 2) each offered one packet of 100 bytes every 10 cycles for
    1,000 cycles; tenant 1 gets twice tenant 0's bytes through."""
    sent_tenant = [0] * 100 + [1] * 100
    at = list(range(1000, 2000, 10)) * 2
    out = {"tenant": [0] * 50 + [1] * 100, "port": [0] * 150, "seq": list(range(150)),
           "region": [0] * 150, "size": [100] * 150,
           "ingress": list(range(1000, 2000, 20)) + list(range(1000, 2000, 10))}
    out["first"] = [c + 30 for c in out["ingress"][:50]] + [c + 60 for c in out["ingress"][50:]]
    out["last"] = [c + 12 for c in out["first"]]
    return {"version": 1, "design": {}, "data_width": 64, "clock_mhz": 250.0,
            "weights": {"0": 1, "1": 2}, "start_cycle": 1000, "end_cycle": 2100,
            "sent": {"port": [0] * 200, "tenant": sent_tenant, "flow": sent_tenant,
                     "size": [100] * 200, "at": at},
            "delivered": out,
            "counters": {"tenants": {"0": {"delivered": 50, "dropped": 20, "queue_drops": 30,
                                           "disabled_drops": 0},
                                     "1": {"delivered": 100, "dropped": 0, "queue_drops": 0,
                                           "disabled_drops": 0}},
                         "ports": {"0": {"classifier.dropped": 0}}, "store": {"drops": 0}}}


def test_stats_of_a_record(tmp_path):
    record = _record()
    stats = traffic_stats(record, window=100)
    rows = {r["tenant"]: r for r in stats["tenants"]}
    assert rows[0]["sent"] == 100 and rows[0]["delivered"] == 50
    assert rows[0]["latency"]["p50"] == 30 and rows[1]["latency"]["max"] == 60
    # Tenant 1: 10,000 bytes from cycle 1000 to its last beat out at 1990 + 72.
    assert rows[1]["bytes_per_cycle"] == pytest.approx(10_000 / (1990 + 72 - 1000 + 1))
    assert rows[1]["gbit_s"] == pytest.approx(rows[1]["bytes_per_cycle"] * 8 * 0.25)
    # Weighted by 1 and 2, the shares are equal: Jain's index 1 in every full window.
    fair = stats["fairness"]
    assert fair["windows"] >= 9 and fair["jain_mean"] > 0.95
    assert max(fair["series"]["jain"]) == pytest.approx(1.0)
    unweighted = traffic_stats({**record, "weights": {}}, window=100)["fairness"]
    assert unweighted["jain_mean"] == pytest.approx(0.9, abs=0.03)   # (1+2)^2 / (2 * 5)
    assert account(record) == {"sent": 200, "delivered": 150, "unmatched": 0, "queue": 30,
                               "disabled": 0, "store": 0, "stalled": 0, "misrouted": 0,
                               "nt": 20, "balanced": True}
    lost = {**record, "counters": {**record["counters"], "tenants": {
        **record["counters"]["tenants"], "0": {**record["counters"]["tenants"]["0"],
                                               "queue_drops": 29}}}}
    assert not account(lost)["balanced"]
    plot = tmp_path / "s.png"
    plot_stats(record, stats, plot)
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert np.isfinite(stats["throughput_series"]["1"]).all()
