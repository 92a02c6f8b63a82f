"""The intermediate pool on a local Ray (sim/rack/pool.py, tests/data/rack_pool.toml): three
sNICs with rack ports, the peer-to-peer policy acting on their reports.

alice (tests/data/rack_meter.toml: token-bucket counters that never limit, then a VLAN pop)
and dave (the metered chain, weight 3) overload nic0, whose regions for their chains are both
taken. The policy must redirect part of alice's flows to nic1, launching her chain there, then,
alice still dropping, launch a second instance on nic2 for more of her flows; when dave leaves
and nic0 has a free region again, it must move nic1's instance back home with its state.
Every packet alice gets back must equal her chain's model, each of her flows must stay in
order, her NT counters summed over her instances must count every packet she got (what nic1
counted came home with the move), and the rack-wide account must balance.
"""

import collections

import pytest

from supernic.desc.chain import load_chain
from supernic.desc.rack import load_rack
from supernic.driver.traffic import parse_flow
from supernic.sim.chain_model import ChainModel
from supernic.sim.parser_model import ParserModel
from supernic.sim.rack.pool import PoolControl, PoolPolicy
from supernic.sim.rack.rack import Rack, RackRunError

POOL = "tests/data/rack_pool.toml"
DATA_WIDTH, HEADER_BYTES = 64, 256


@pytest.fixture(scope="module")
def ray_session():
    import ray
    yield
    ray.shutdown()


def test_a_switch_attached_design_cannot_be_a_pool(tmp_path):
    from pathlib import Path
    text = Path(POOL).read_text().replace("nic_rack.toml", str(
        Path("tests/data/nic_test.toml").resolve())).replace(
        '"rack_meter.toml"', f'"{Path("tests/data/rack_meter.toml").resolve()}"')
    (tmp_path / "rack.toml").write_text(text)
    with pytest.raises(RackRunError, match="no rack port"):
        Rack(load_rack(tmp_path / "rack.toml"), ray=False)


def test_the_pool_redirects_launches_and_moves_back_with_state(ray_session):
    with Rack(load_rack(POOL)) as rack:
        control = PoolControl(rack)
        rack.policy = policy = PoolPolicy(control, interval=4_000)
        placed = {p["tenant"]: p["nic"] for p in rack.deploy_all()}
        assert placed == {"alice": "nic0", "dave": "nic0", "bob": "nic1"}
        flows = "size=64-1500,flows=64"
        alice = rack.send("alice", [parse_flow(f"tenant=0,rate=1.0,{flows}")],
                          cycles=90_000, seed=21)
        rack.send("dave", [parse_flow(f"tenant=0,rate=1.0,{flows}")], cycles=30_000, seed=22)
        rack.send("bob", [parse_flow(f"tenant=0,rate=0.5,{flows}")], cycles=60_000, seed=23)
        rack.run(40_000)
        moves = [(m["move"], m.get("peer")) for m in policy.log if m["tenant"] == "alice"]
        assert moves == [("launch+redirect", "nic1"), ("launch+redirect", "nic2")], policy.log
        # dave's traffic is over: he leaves, and nic0 has a region for alice again.
        rack.undeploy("dave", "nic0")
        rack.run_until_drained()
        assert rack.tenants["dave"].instances == []     # gone from home: gone from the rack
        back = [m for m in policy.log if m["move"] == "move_back"]
        assert len(back) == 1 and back[0]["from"] == "nic1" and back[0]["to"] == "nic0", \
            policy.log
        assert sorted(n for n, _ in rack.tenants["alice"].instances) == ["nic0", "nic2"]

        account = rack.account()
        assert account["balanced"] and account["lost"] == 0 and rack.late == 0, account
        # Alice: every packet she got back is her model's; each flow in order.
        spec = load_chain(rack.tenants["alice"].entry.chain)
        model, parser = ChainModel(spec, DATA_WIDTH, HEADER_BYTES), ParserModel(HEADER_BYTES)
        arrivals = {pid: cycle for pid, _, cycle, _ in rack.delivered}
        got = [pid for pid in alice if pid in arrivals]
        assert len(got) > 0.8 * len(alice)
        where = collections.Counter(rack.packets[pid][3] for pid in got)
        assert set(where) == {"nic0", "nic1", "nic2"}, where      # all three served her
        by_flow = collections.defaultdict(list)
        for pid in sorted(got, key=lambda p: (rack._accepts[p], p)):
            frame = rack.packets[pid][1]
            meta = parser.parse(frame)
            meta["ts"] = rack._accepts[pid] % 2 ** 32
            result, out_meta = model.process(frame, meta)
            assert not out_meta["drop"] and rack.outputs[pid] == result, pid
        for pid in sorted(got, key=lambda p: (arrivals[p], p)):
            by_flow[parser.parse(rack.packets[pid][1])["flow_hash"]].append(pid)
        for flow, ids in by_flow.items():
            assert ids == sorted(ids), f"alice's flow {flow:#x} came back out of order"

        # Her NT counters over her instances count every packet she got: nic1's came home.
        total = collections.Counter()
        for nic, region in rack.tenants["alice"].regions:
            names = [(f"r{region}_rack_meter_policer", c)
                     for c in model.models["policer"].counters()]
            for key, value in rack.call(nic, "read", registers=names).items():
                total[key.split(".")[1]] += value
        want = {c: 0 for c in model.models["policer"].counters()}
        assert total["packets"] == len(got), (total, len(got), want)


def test_a_redirect_to_a_nic_without_room_is_refused(tmp_path):
    """nic1's two regions that can load alice's chain run two metered tenants of its own: a
    redirect of alice there is refused with one line, and so is one to her home."""
    from pathlib import Path
    variant = tmp_path / "metered_b.toml"
    variant.write_text(Path("chains/metered.toml").read_text().replace(
        "keys = [10, 20]", "keys = [11, 21]"))
    text = Path(POOL).read_text().replace('"nic_rack.toml"', f'"{Path("tests/data/nic_rack.toml").resolve()}"')
    text = text.replace('"rack_meter.toml"', f'"{Path("tests/data/rack_meter.toml").resolve()}"')
    text = text.replace('endpoint = "h0b"', 'endpoint = "h1"')           # dave lives on nic1
    text += f'\n[[tenant]]\nname = "erin"\nchain = "{variant}"\nendpoint = "h1"\n'
    (tmp_path / "rack.toml").write_text(text)
    with Rack(load_rack(tmp_path / "rack.toml"), ray=False) as rack:
        control = PoolControl(rack)
        rack.deploy_all()
        assert not rack.free_regions("nic1", "rack_meter")
        with pytest.raises(RackRunError, match="nic1 has no free region for chain "
                                               "'rack_meter': no redirect of tenant alice"):
            control.redirect("alice", "nic1", 0x3)
        with pytest.raises(RackRunError, match="is tenant alice's home"):
            control.redirect("alice", "nic0", 0x3)
        assert rack.tenants["alice"].redirects == []
