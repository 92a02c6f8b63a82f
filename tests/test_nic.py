"""The multi-tenant NIC on Verilator against the NIC model.

Four tenants on five regions (the web tenant has two instances, dispatched by flow hash), two
ingress ports driven at once (ingress oversubscribed) with random idle, random egress
backpressure, the light size mix with 10% malformed frames and a share of frames whose tenant
key nobody owns. Every delivered packet equals the model's, per-flow order holds, and every
ingress packet is delivered or counted once by reason (see sim/tb/nic_tb.py).
"""

from pathlib import Path

import pytest

from supernic.hw.config import load_config
from supernic.sim.session import design_simulator, run_bench

TEST_NIC_PATH = Path(__file__).parent / "data" / "nic_test.toml"
TEST_NIC = load_config(TEST_NIC_PATH)


@pytest.fixture(scope="module")
def nic_sim():
    return design_simulator(TEST_NIC)


@pytest.mark.parametrize("policy", ["drf", "fifo"])
def test_nic_matches_model(nic_sim, policy, tmp_path):
    result = run_bench(nic_sim, "random_traffic", {
        "SNIC_SEED": 7 + len(policy), "SNIC_PACKETS": 2000, "SNIC_POLICY": policy,
        "SNIC_MALFORMED": 0.1,
    }, test_dir=tmp_path, module="supernic.sim.tb.nic_tb")
    assert result["mismatches"] == 0 and not result["problems"], result
    account = result["account"]
    assert account["delivered"] > 800
    assert account["classifier_dropped"] > 0 and account["nt_dropped"] > 0
    assert len(result["dispatched"]) == 5


def test_nic_scale_out_and_yield_under_traffic(nic_sim, tmp_path):
    """A third of the way in, the control plane moves a region from one tenant to another
    while traffic flows: re-point and commit the first tenant's flow buckets, load the other
    chain into the region (drain, reconfiguration time), add it to the second tenant's
    buckets. A sixth of the way in, the driver suspends the metered region's chain (rate
    limiter and VLAN pop, under the state-yielding transform) at a packet boundary, captures
    its state, scrambles it, restores it and resumes it. Nothing is lost or reordered, outputs and every counter
    match the model."""
    result = run_bench(nic_sim, "random_traffic", {
        "SNIC_SEED": 31, "SNIC_PACKETS": 2000, "SNIC_POLICY": "drf", "SNIC_RECONFIGURE": 1,
        "SNIC_YIELD_REGIONS": "3",
    }, test_dir=tmp_path, module="supernic.sim.tb.nic_tb")
    assert result["mismatches"] == 0 and not result["problems"], result
    assert [y["region"] for y in result["yields"]] == [3]
    assert all(y["restored_equal"] and y["words"] > 100 for y in result["yields"]), result["yields"]
    (move,) = result["moves"]
    assert "done_at_input" in move and move["done_at_input"] < result["packets_in"]
    assert result["dispatched"][str(move["region"])] > 0
