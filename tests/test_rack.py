"""The rack (sim/rack, sw/desc/rack.py): three virtual sNICs of the 64-bit test NIC, each in a
Ray actor of a local Ray, behind the ToR switch model.

The claims tried here: every packet a tenant's endpoint gets back equals its chain model's
output for that input (the model run in the order the NICs took the packets, with their ingress
timestamps, across a move between devices); each tenant's packets come back in the order they
were sent; the rack-wide account balances (sent = delivered + counted drops); a move between
devices carries the counters and token buckets along; the same seed gives the same packets in
actors as in process; a killed actor is reported and its tenants and packets are counted lost.
"""

import collections

import pytest

from supernic.desc.chain import load_chain
from supernic.desc.rack import RackError, load_rack, parse_rack
from supernic.driver.traffic import parse_flow
from supernic.sim.chain_model import ChainModel
from supernic.sim.parser_model import ParserModel
from supernic.sim.rack.rack import Rack, RackRunError
from supernic.sim.rack.switch import Link

RACK = "tests/data/rack_test.toml"
DATA_WIDTH, HEADER_BYTES = 64, 256


# --- the description -------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("[rack]\ntopology = 'ring'\n[[nic]]\nname='a'\ndesign='web'", "rack.topology"),
    ("[rack]\nspeed = 1\n[[nic]]\nname='a'\ndesign='web'", "unknown key 'speed'"),
    ("[rack]\n", "at least one [[nic]]"),
    ("[[nic]]\nname='a'\ndesign='nope.toml'", "design 'nope.toml' is neither"),
    ("[[nic]]\nname='a'\ndesign='web'\n[[nic]]\nname='a'\ndesign='web'", "used twice"),
    ("[[nic]]\nname='a'\ndesign='web'\n[[endpoint]]\nname='h'\nnic='b'", "nic 'b' is not"),
    ("[[nic]]\nname='a'\ndesign='web'\nlink_gbps=-1", "nic a.link_gbps"),
    ("[[nic]]\nname='a'\ndesign='web'\n[[tenant]]\nname='t'\nchain='web'\nendpoint='x'",
     "endpoint 'x' is not"),
])
def test_bad_rack_descriptions_say_what_is_wrong(text, message):
    import tomllib
    with pytest.raises(RackError) as e:
        parse_rack(tomllib.loads(text), "rack.toml")
    assert message in str(e.value) and str(e.value).startswith("rack.toml:")
    assert "\n" not in str(e.value)


def test_rack_description_converts_to_cycles():
    rack = load_rack(RACK)
    assert [n.name for n in rack.nics] == ["nic0", "nic1", "nic2"]
    assert rack.switch_cycles == 100 and rack.nics[0].link_cycles == 25   # 400 ns, 100 ns
    assert rack.nics[0].link_bytes_per_cycle == 8.0      # 16 Gbit/s at 250 MHz
    assert rack.lookahead == 150
    assert rack.tenant("alice").chain.name == "metered.toml"


# --- the switch model ------------------------------------------------------------------------
def test_link_serialises_queues_and_counts_drops():
    """A link against a hand-worked timeline: 8 bytes a cycle, 10 cycles of wire, 100 bytes of
    buffer."""
    link = Link("x", 8, 10, buffer_bytes=100)
    assert link.send(0, 64) == (10, 18)          # 8 cycles on the wire, 10 of latency
    assert link.send(0, 32) == (18, 22)          # waits behind the first: FIFO
    assert link.send(1, 64) is None              # 96 - 8 queued + 64 > 100: dropped
    assert link.send(12, 16) == (22, 24)         # 32 bytes left at 12: it fits
    assert link.counters["dropped"] == 1 and link.counters["packets"] == 3
    assert link.counters["max_queue_bytes"] == 96


def test_link_random_traffic_keeps_order_and_bytes():
    import random
    rng = random.Random(4)
    link = Link("y", 2.5, 7, buffer_bytes=3000)
    t, last, sent, kept = 0, -1, 0, 0
    for _ in range(5000):
        t += rng.choice([0, 0, 1, 5, 40])
        size = rng.randint(60, 1500)
        sent += size
        got = link.send(t, size)
        if got is not None:
            first, end = got
            assert first >= t + 7 and end >= first and first >= last, "order or time broken"
            last = first
            kept += size
    c = link.counters
    assert c["bytes"] == kept and c["bytes"] + c["dropped_bytes"] == sent
    assert c["dropped"] > 0 and c["max_queue_bytes"] <= 3000


# --- the rack on Ray -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ray_session():
    import ray
    yield
    ray.shutdown()


#: alice at 0.9 of her 10 Gbit/s link: over the 2 bytes a cycle of her VLAN 10 bucket, so the
#: rate limiter drops once the burst is spent (chains/metered.toml).
RATES = {"alice": 0.9, "bob": 0.5, "carol": 0.5}


def _traffic(rack, cycles=16_000, seed=3):
    sent = {}
    for k, name in enumerate(sorted(rack.tenants)):
        flow = parse_flow(f"tenant=0,rate={RATES.get(name, 0.5)},size=64-600,flows=8")
        sent[name] = rack.send(name, [flow], cycles=cycles, seed=seed + k)
    return sent


def _check_against_models(rack, sent):
    """Every delivered packet equals its tenant's chain model's output; an undelivered one is
    a drop the model makes; each tenant's packets come back in the order they were sent.
    Returns the models (their NT counters for the caller)."""
    parser = ParserModel(HEADER_BYTES)
    arrivals = {pid: (cycle, endpoint) for pid, endpoint, cycle, _ in rack.delivered}
    models, dropped = {}, collections.Counter()
    for name, ids in sent.items():
        tenant = rack.tenants[name]
        chain = ChainModel(load_chain(tenant.entry.chain), DATA_WIDTH, HEADER_BYTES)
        order = sorted(ids, key=lambda pid: (rack._accepts[pid], pid))
        assert len(order) == len(ids) and all(pid in rack._accepts for pid in ids), \
            f"{name}: a packet never reached a NIC"
        for pid in order:
            frame = rack.packets[pid][1]
            meta = parser.parse(frame)
            meta["ts"] = rack._accepts[pid] % 2 ** 32   # the rate limiter meters by it
            result, out_meta = chain.process(frame, meta)
            if out_meta["drop"]:
                assert pid not in arrivals, f"{name}: packet {pid} came out; the model drops it"
                dropped[name] += 1
            else:
                assert pid in arrivals, f"{name}: packet {pid} was lost"
                assert rack.outputs[pid] == result, f"{name}: packet {pid} differs from model"
                assert arrivals[pid][1] == tenant.entry.endpoint
        back = [pid for pid, _, _, _ in sorted(rack.delivered, key=lambda d: (d[2], d[0]))
                if rack.packets[pid][0] == name]
        assert back == sorted(back), f"{name}: packets came back out of order"
        models[name] = chain
    return models, dropped


def test_three_nics_move_a_tenant_between_devices_under_traffic(ray_session):
    """alice (the metered chain: token buckets) moves from nic0 to nic1 with every tenant's
    traffic flowing: nothing is lost, every packet equals the model that ran alice's packets
    in order across both devices, and alice's NT counters on nic1 went on from nic0's."""
    with Rack(load_rack(RACK)) as rack:
        placed = {p["tenant"]: p["nic"] for p in rack.deploy_all()}
        assert placed == {"alice": "nic0", "bob": "nic1", "carol": "nic2"}   # their homes
        sent = _traffic(rack)
        rack.run(9_000)
        home = rack.tenants["alice"].regions[0][1]
        name = f"r{home}_metered_policer"
        before = rack.call("nic0", "read", registers=[(name, "packets")])
        assert before[f"{name}.packets"] > 0
        moved = rack.migrate("alice", "nic1")
        assert moved["from"] == "nic0" and moved["to"] == "nic1" and moved["held"] > 0
        rack.run_until_drained()
        account = rack.account()
        assert account["balanced"] and account["lost"] == 0, account
        assert account["delivered"] > 0.9 * account["sent"]
        assert rack.late == 0, "a packet reached a NIC in its past"
        models, dropped = _check_against_models(rack, sent)
        # The buckets dropped, on both devices: the state that moved was in use.
        assert dropped["alice"] == sum(account["nic_drops"].values()) > 0
        # The NT counters in alice's new region are the model's: they went on from nic0's.
        region = moved["region"]
        for node, model in models["alice"].models.items():
            want = model.counters()
            got = rack.call("nic1", "read", registers=[(f"r{region}_metered_{node}", c)
                                                       for c in want])
            assert {k.split(".")[1]: v for k, v in got.items()} == want, node
        # nic0 freed alice's region and tenant slot.
        assert not any(n == "nic0" for n, _ in rack.tenants["alice"].instances)


def test_same_seed_same_packets_in_actors_and_in_process(ray_session):
    """Where the NICs run does not change what comes out: the same traffic through Ray actors
    and through NICs in this process gives the same packets at the same cycles."""
    runs = []
    for use_ray in (True, False):
        with Rack(load_rack(RACK), ray=use_ray) as rack:
            rack.deploy_all()
            _traffic(rack, cycles=4_000, seed=11)
            rack.run_until_drained()
            runs.append(sorted((pid, cycle, rack.outputs[pid])
                               for pid, _, cycle, _ in rack.delivered))
    assert runs[0] and runs[0] == runs[1]


def test_windows_longer_than_the_lookahead_break_causality():
    """The window is the lookahead for a reason: four times as long, packets reach NICs in
    their past (counted in ``late``); at the lookahead none does (the test above)."""
    with Rack(load_rack(RACK), ray=False) as rack:
        rack.window_cycles = 4 * rack.config.lookahead
        rack.deploy_all()
        _traffic(rack, cycles=3_000)
        rack.run_until_drained()
        assert rack.late > 0


def test_a_killed_nic_is_reported_and_its_tenants_counted_lost(ray_session):
    """nic2's actor is killed mid-run: the rack says so, lists carol (who ran only there) as
    lost, counts her packets in it and after it as lost, and the account still balances."""
    messages = []
    with Rack(load_rack(RACK), progress=messages.append) as rack:
        rack.deploy_all()
        _traffic(rack, cycles=6_000)
        rack.run(3_000)
        rack.nics["nic2"].kill()
        rack.run_until_drained()
        assert "nic2" in rack.dead and rack.lost_tenants() == ["carol"]
        assert any(m.startswith("nic2 died at cycle") and "tenants lost: carol" in m
                   for m in messages)
        account = rack.account()
        assert account["lost"] > 0 and account["balanced"], account
        assert "nic2" not in account["nic_drops"]
        with pytest.raises(RackRunError, match="nic2 is dead"):
            rack.call("nic2", "status")


def _rack_with_second_metered_tenant(tmp_path, keys):
    """The test rack plus erin, a metered tenant with ``keys``, on both of nic1's metered
    regions."""
    from pathlib import Path
    variant = tmp_path / "metered_erin.toml"
    variant.write_text(Path("chains/metered.toml").read_text().replace(
        "keys = [10, 20]", f"keys = {keys}"))
    text = Path(RACK).read_text().replace('design = "nic_rack.toml"',
                                          f'design = "{Path("tests/data/nic_rack.toml").resolve()}"')
    text += (f'\n[[tenant]]\nname = "erin"\nchain = "{variant}"\nendpoint = "h1"\n'
             f'nic = "nic1"\ninstances = 2\n')
    (tmp_path / "rack.toml").write_text(text)
    return load_rack(tmp_path / "rack.toml")


def test_moves_and_deploys_that_cannot_be_done_are_refused(ray_session, tmp_path):
    with pytest.raises(Exception, match=r"tenant keys \[10, 20\] are used by more than one"):
        Rack(_rack_with_second_metered_tenant(tmp_path, [10, 20]), ray=False)
    with Rack(_rack_with_second_metered_tenant(tmp_path, [11, 21])) as rack:
        rack.deploy_all()
        assert [n for n, _ in rack.tenants["erin"].instances] == ["nic1"]
        with pytest.raises(RackRunError, match="already runs on nic0"):
            rack.migrate("alice", "nic0")
        with pytest.raises(RackRunError, match="not a live sNIC"):
            rack.migrate("alice", "nic9")
        with pytest.raises(RackRunError, match="no tenant 'dave'"):
            rack.migrate("dave", "nic1")
        # erin holds both of nic1's metered regions: no room there.
        with pytest.raises(RackRunError, match="nic1 has no free region for chain 'metered'"):
            rack.migrate("alice", "nic1")
        # A deploy the NIC's control plane refuses comes back as its one line.
        with pytest.raises(RackRunError, match="region"):
            rack.deploy("erin", "nic2", instances=3)
        rack.deploy("alice", "nic2")
        with pytest.raises(RackRunError, match="runs on 2 sNICs"):
            rack.migrate("alice", "nic1")


# --- the CLI -----------------------------------------------------------------------------------
def _snic(*args):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "supernic.driver.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=900)


def test_snic_rack_check_and_run():
    """`snic rack check` prints the description in cycles; `snic rack run --local --json`
    runs the test rack to the end and its account balances; a flow for a tenant the rack does
    not have, or one without TENANT:, is refused in one line with exit 2."""
    import json
    out = _snic("rack", "check", "chains/racks/pool.toml")
    assert out.returncode == 0 and "lockstep window 150 cycles" in out.stdout
    run = _snic("rack", "run", RACK, "--local", "--cycles", 3000, "--json",
                "--flow", "bob:rate=0.8,size=imix")
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads(run.stdout)
    assert summary["account"]["balanced"] and summary["account"]["sent"] > 0
    assert summary["tenants"]["bob"]["delivered"] > 0
    assert {p["tenant"]: p["nic"] for p in summary["placed"]} == {
        "alice": "nic0", "bob": "nic1", "carol": "nic2"}
    for flow, message in (("zed:rate=1", "--flow names tenant 'zed'"),
                          ("rate=1", "give TENANT:SPEC")):
        bad = _snic("rack", "run", RACK, "--local", "--flow", flow)
        assert bad.returncode == 2 and message in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1
