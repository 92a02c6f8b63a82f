"""The multi-tenant NIC on Verilator against the NIC model.

Four tenants on six regions (the web and metered tenants have two instances each, dispatched
by flow hash; in the scale-out and migration run the second metered region is spare), two
ingress ports driven at once (ingress oversubscribed) with random idle, random egress
backpressure, the light size mix with 10% malformed frames and a share of frames whose tenant
key nobody owns. Every delivered packet equals the model's, per-flow order holds, and every
ingress packet is delivered or counted once by reason (see sim/tb/nic_tb.py).
"""

from pathlib import Path

import pytest

from supernic.desc.config import load_config
from supernic.sim.session import design_simulator, run_bench
from supernic.sim.tb.scenario import (DrainShared, Migrate, MoveRegion, NicScenario, Suspend,
                                      Switch)

TEST_NIC_PATH = Path(__file__).parent / "data" / "nic_test.toml"
TEST_NIC = load_config(TEST_NIC_PATH)


@pytest.fixture(scope="module")
def nic_sim():
    return design_simulator(TEST_NIC)


@pytest.mark.parametrize("policy", ["drf", "fifo"])
def test_nic_matches_model(nic_sim, policy, tmp_path):
    result = run_bench(nic_sim, "random_traffic", NicScenario(
        seed=7 + len(policy), packets=2000, policy=policy, malformed=0.1),
        test_dir=tmp_path, module="supernic.sim.tb.nic_tb")
    assert result["mismatches"] == 0 and not result["problems"], result
    account = result["account"]
    assert account["delivered"] > 800
    assert account["classifier_dropped"] > 0 and account["nt_dropped"] > 0
    assert len(result["dispatched"]) == 6


def test_nic_scale_out_yield_and_migrate_under_traffic(nic_sim, tmp_path):
    """With traffic flowing, through the driver, three things happen to a running NIC, one
    after another:

    * a sixth of the way in, the metered instance migrates live from region 3 to the spare
      region 5 (sw/driver/migration.py): the target gets the configuration, the buckets move
      and commit, the state moves; the model's instance moves with it;
    * a third of the way in, a region moves from one tenant to another: re-point and commit
      the first tenant's flow buckets, load the other chain into the region (drain,
      reconfiguration time), add it to the second tenant's buckets;
    * half way in, the migrated metered chain (rate limiter and VLAN pop, under the
      state-yielding transform) is suspended at a packet boundary; its state is captured,
      scrambled, restored and read back equal; it moves to the chain's Python model (whose
      counters read as the NTs' registers) and back into the hardware; it resumes.

    Nothing is lost or reordered; outputs and every counter (both metered regions' NTs too)
    match the model."""
    result = run_bench(nic_sim, "random_traffic", NicScenario(
        seed=31, packets=2000, policy="drf", spare_regions=(5,),
        steps=(Migrate(source=3, target=5, at=1 / 6), MoveRegion(at=1 / 3),
               Suspend(regions=(5,), at=1 / 2))),
        test_dir=tmp_path, module="supernic.sim.tb.nic_tb")
    assert result["mismatches"] == 0 and not result["problems"], result
    assert [y["region"] for y in result["yields"]] == [5]
    assert all(y["restored_equal"] and y["words"] > 100 and y["model_counters"] == "equal"
               for y in result["yields"]), result["yields"]
    (move,) = result["moves"]
    assert "done_at_input" in move and move["done_at_input"] < result["packets_in"]
    assert result["dispatched"][str(move["region"])] > 0
    (migration,) = result["migrations"]
    assert migration["done_at_input"] < result["packets_in"] and migration["words"] > 100, \
        result["migrations"]
    # Both regions ran the metered tenant's packets: before and after the move.
    assert result["dispatched"]["3"] > 0 and result["dispatched"]["5"] > 0


def test_nic_time_shares_a_region_between_two_tenants(nic_sim, tmp_path):
    """Two tenants run the metered chain in one region by context switches that the driver
    drives (sw/driver/timeshare.py), each with its own key and rate-limiter configuration:
    each context starts from the state map's reset values plus its configuration; three times
    under traffic (and then until both queues are empty), the running tenant is held (its packets queue), its packets in flight
    leave, its context (state words and NT registers) is saved and the other's loaded. Each
    tenant's outputs and NT counters equal its own chain model running alone."""
    result = run_bench(nic_sim, "random_traffic", NicScenario(
        seed=47, packets=2000, policy="drf", spare_regions=(4, 5), time_share=3,
        steps=(Switch(tenant=3, at=1 / 6), Switch(tenant=2, at=2 / 6),
               Switch(tenant=3, at=3 / 6), DrainShared())),
        test_dir=tmp_path, module="supernic.sim.tb.nic_tb")
    assert result["mismatches"] == 0 and not result["problems"], result
    timed = [s for s in result["switches"] if not s.get("draining")]
    assert [s["to"] for s in timed] == [3, 2, 3], result["switches"]
    assert all(s["done_at_input"] < result["packets_in"] for s in timed), result["switches"]
    shared = [result["tenants"][t] for t in ("2", "3")]
    # Both ran (a held tenant's queue overflows while a switch moves two 612-word contexts
    # over cocotb's AXI4-Lite: those drops are counted and match the model), and their
    # configurations differ: the second meters harder.
    assert all(t["regions"] == [3] and t["delivered"] > 20 for t in shared), shared
    assert shared[1]["nt_dropped"] > shared[0]["nt_dropped"], shared
