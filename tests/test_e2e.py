"""End to end, as a user runs it: `snic device serve` in a subprocess on the test NIC
(tests/data/nic_test.toml, 64-bit, six regions; its virtual-device library is built once and
cached), and every other step through the `snic` CLI in subprocesses of its own.

- Three tenants from `chains/` are deployed, a pcap of their traffic (with malformed packets
  and packets nobody owns) is replayed with `snic traffic`, and every delivered packet is
  checked against the NIC's Python model (classifier, then the tenant's chain model); `snic
  status --json` agrees with the traffic record and the model's drops.
- Flows per tenant at given rates and sizes on both ports, then `snic stats` with a plot.
- Fault: the device process is killed while a deploy waits for a region to reconfigure; the
  deploy says so and exits 1; after a restart the same deploy succeeds and no tenant is left
  half-configured. Refusals (malformed spec, unknown tenant, oversubscription) change nothing.
"""

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from supernic.driver.client import DeviceClient, SocketBus
from supernic.driver.discovery import read_register, write_register
from supernic.driver.traffic import delivered_tags
from supernic.desc.chain import load_chain
from supernic.desc.nic.classifier import ClassifierConfig
from supernic.sim.chain_model import ChainModel, chain_traffic
from supernic.sim.nic.classifier import ClassifierModel
from supernic.sim.nic.nic_model import tag_frame
from supernic.sim.parser_model import ParserModel
from supernic.sim.traffic import read_pcap, write_pcap

ROOT = Path(__file__).resolve().parent.parent
NIC_TEST = ROOT / "tests" / "data" / "nic_test.toml"
NIC_LINK = ROOT / "tests" / "data" / "nic_link.toml"
CHAINS = ROOT / "chains"
HEADER_BYTES = 256
DATA_WIDTH = 64
UNOWNED_KEY = 3999
QUEUE_BEATS = 512      # nic_test.toml's nic.queue_beats
TENANTS = {0: "web", 1: "monitoring", 2: "secure"}


def _snic(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "supernic.driver.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def _ok(*args, timeout=120):
    result = _snic(*args, timeout=timeout)
    assert result.returncode == 0, f"snic {' '.join(map(str, args))}: {result.stderr}"
    return result


def _serve(sock, timeout=900, config=NIC_TEST):
    """Start `snic device serve` on the test NIC and wait for its "serving" line (the first
    start in a fresh cache builds the device library, about two minutes)."""
    proc = subprocess.Popen([sys.executable, "-m", "supernic.driver.cli", "device", "serve",
                             "--config", str(config), "--socket", str(sock)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        raise AssertionError(f"the device server did not start: {line!r}")
    return proc


def _stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def device(tmp_path):
    sock = tmp_path / "device.sock"
    proc = _serve(sock)
    yield sock
    _stop(proc)


def _deploy(sock, tenant, chain, *more):
    return _snic("deploy", CHAINS / f"{chain}.toml", "--tenant", tenant, "--socket", sock,
                 *more)


def _status(sock):
    return json.loads(_ok("status", "--socket", sock, "--json").stdout)


def _on_device(sock, work):
    """``await work(client, description)`` on a connection of its own to the served device."""
    async def session():
        client = await DeviceClient.connect(sock)
        async with client:
            return await work(client, (await client.hello())["regmap"])
    return asyncio.run(session())


def _run(sock, cycles):
    _on_device(sock, lambda client, _: client.run(cycles))


def _push_paced(sock, port, frames, spacing, start_in=100):
    """Queue ``frames`` on ``port``, one every ``spacing`` cycles from ``start_in`` on."""
    async def push(client, _):
        base = await client.cycle() + start_in
        await client.push_batch([(port, f, base + spacing * i) for i, f in enumerate(frames)])
    _on_device(sock, push)


def _collect(sock):
    """Drain the device: the delivered packets, their NIC tags and each port's accept
    cycles."""
    async def collect(client, description):
        await client.drain(quiet=500)
        out = await client.pop()
        return (out, delivered_tags(out, description),
                [await client.ingress_cycles(p)
                 for p in range(description["config"]["ports"])])
    return _on_device(sock, collect)


def _registers(sock, block, names):
    async def read(client, description):
        bus = SocketBus(client)
        return {n: await read_register(bus, description["registers"], block, n) for n in names}
    return _on_device(sock, read)


def _regions(description):
    return range(len(description["regions"]))


def _set_reconfiguration(sock, cycles):
    """Make every region's reconfiguration take ``cycles`` (the register a board sets)."""
    async def write(client, description):
        bus = SocketBus(client)
        for r in _regions(description):
            await write_register(bus, description["registers"], f"region{r}",
                                 "reconfig_cycles", cycles)
    _on_device(sock, write)


def _offline_regions(sock):
    async def read(client, description):
        bus = SocketBus(client)
        return [r for r in _regions(description)
                if not await read_register(bus, description["registers"], f"region{r}",
                                           "online")]
    return _on_device(sock, read)


def _replay_frames(n, seed, tenants=TENANTS):
    """Each tenant's chain traffic tagged with its keys (10% malformed), and frames with a key
    nobody owns, shuffled."""
    import random
    parser, rng = ParserModel(HEADER_BYTES), random.Random(seed)
    frames = []
    for t, name in tenants.items():
        spec = load_chain(CHAINS / f"{name}.toml")
        for frame in chain_traffic(spec, n, seed + t, 0.1, "mixed", HEADER_BYTES):
            meta = parser.parse(frame)
            usable = [k for k in spec.keys if meta["vxlan"] or k < 4096]
            if usable:
                frames.append(tag_frame(frame, meta, rng.choice(usable)))
    spec = load_chain(CHAINS / "web.toml")
    for frame in chain_traffic(spec, n // 4, seed + 99, 0.1, "mixed", HEADER_BYTES):
        frames.append(tag_frame(frame, parser.parse(frame), UNOWNED_KEY))
    rng.shuffle(frames)
    return frames


def test_deployed_tenants_replay_matches_the_model(device, tmp_path):
    sock = device
    for t, name in TENANTS.items():
        result = _deploy(sock, t, name)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"deployed {name} as tenant {t} on regions")
    status = _status(sock)
    enabled = [row["tenant"] for row in status["tenants"] if row["enabled"]]
    assert enabled == sorted(TENANTS)
    _replay_and_check(sock, tmp_path, TENANTS, _replay_frames(300, seed=11), min_nt_drops=2)


def test_a_dag_split_over_linked_regions_through_the_cli(tmp_path):
    """On a NIC with a region link (tests/data/nic_link.toml), `snic deploy` splits the
    monitoring chain over the linked pair (its audit ACL in region 1 beside its flow monitor
    in region 0); a replay beside a web tenant matches the model of the whole chain; `snic
    status` shows the link, and undeploy opens it and frees both regions."""
    sock = tmp_path / "device.sock"
    proc = _serve(sock, config=NIC_LINK)
    try:
        tenants = {0: "monitoring", 1: "web"}
        result = _ok("deploy", CHAINS / "monitoring.toml", "--tenant", 0, "--socket", sock)
        assert result.stdout.startswith("deployed monitoring as tenant 0 on regions 0, split: "
                                        "its branches in linked region(s) 1"), result.stdout
        result = _ok("deploy", CHAINS / "web.toml", "--tenant", 1, "--socket", sock)
        assert "on regions 2" in result.stdout, result.stdout
        regions = {row["region"]: row for row in _status(sock)["regions"]}
        assert regions[0]["linked_to"] == 1 and "linked_to" not in regions[2]
        assert regions[1]["personality"] == "monitoring_branches"
        _replay_and_check(sock, tmp_path, tenants, _replay_frames(300, seed=23, tenants=tenants),
                          min_nt_drops=1)
        _ok("undeploy", "--tenant", 0, "--socket", sock)
        regions = {row["region"]: row for row in _status(sock)["regions"]}
        assert "linked_to" not in regions[0]
        # Region 1 is a region of its own again: the web tenant's second instance loads it.
        _ok("undeploy", "--tenant", 1, "--socket", sock)
        result = _ok("deploy", CHAINS / "web.toml", "--tenant", 1, "--instances", 2,
                     "--socket", sock, timeout=300)
        assert "on regions 1, 2" in result.stdout, result.stdout
    finally:
        _stop(proc)


def _replay_and_check(sock, tmp_path, tenants, frames, min_nt_drops):
    """Replay ``frames`` on port 0 paced by the pcap's timestamps; every delivered packet
    equals its input's model output (the classifier, then the tenant's whole chain), each
    tenant in order, and ``snic status --json`` counts the same drops."""
    pcap_in, pcap_out, record_path = (tmp_path / "in.pcap", tmp_path / "out.pcap",
                                      tmp_path / "run.json")
    write_pcap(pcap_in, frames)
    # One port, paced by the file's 1 us spacing at 250 MHz: each tenant's packets reach its
    # single instance in ingress order, so the model's order is exact.
    run = _ok("traffic", "--replay", pcap_in, "--ingress-port", 0, "--pcap-timing",
              "--out", pcap_out, "--record", record_path, "--json", "--socket", sock)
    figures = json.loads(run.stdout)
    assert figures["account"]["balanced"] and figures["account"]["sent"] == len(frames)
    record = json.loads(record_path.read_text())
    delivered = read_pcap(pcap_out)
    assert len(delivered) == len(record["delivered"]["size"]) == figures["account"]["delivered"]

    # The model: the classifier the control plane programmed, then each tenant's chain model
    # over that tenant's packets in ingress order.
    parser = ParserModel(HEADER_BYTES)
    classifier = ClassifierModel(ClassifierConfig.from_tenants(
        [(t, load_chain(CHAINS / f"{n}.toml").keys) for t, n in tenants.items()],
        default=None), 0)
    chains = {t: ChainModel(load_chain(CHAINS / f"{n}.toml"), DATA_WIDTH, HEADER_BYTES)
              for t, n in tenants.items()}
    expected, unmatched = {}, 0
    nt_drops, queue_drops = {t: 0 for t in tenants}, {t: 0 for t in tenants}
    for i, frame in enumerate(frames):
        meta = parser.parse(frame)
        tenant = classifier.classify(meta)
        if tenant is None:
            unmatched += 1
            continue
        if -(-len(frame) // (DATA_WIDTH // 8)) > QUEUE_BEATS:
            # Longer than the tenant queue: it can never be stored, so it is dropped whole
            # and counted (hw/nic/scheduler.py); paced as it is, nothing else overflows.
            queue_drops[tenant] += 1
            continue
        out, out_meta = chains[tenant].process(frame, meta)
        if out_meta["drop"]:
            nt_drops[tenant] += 1
        else:
            expected[i] = (tenant, out)
    assert sum(1 for t in tenants if nt_drops[t]) >= min_nt_drops, \
        "the traffic should exercise NT drops"
    assert sum(queue_drops.values()) > 0, "the traffic should have jumbo frames"

    # Every delivered packet is its input's model output, for the right tenant, in order.
    got = record["delivered"]
    seen = {}
    for k, frame in enumerate(delivered):
        i = got["seq"][k]          # port 0's packet counter: the input's index (< 2**16)
        assert got["port"][k] == 0 and i not in seen
        seen[i] = k
        assert i in expected, f"input {i} came out; the model drops it"
        tenant, want = expected[i]
        assert got["tenant"][k] == tenant, f"input {i}: tenant {got['tenant'][k]}, not {tenant}"
        assert frame == want, f"input {i} (tenant {tenant}) differs from the model"
        assert got["ingress"][k] <= got["first"][k] <= got["last"][k]
    assert set(seen) == set(expected), f"missing: {sorted(set(expected) - set(seen))[:5]}"
    for t in tenants:
        mine = [got["seq"][k] for k in range(len(delivered)) if got["tenant"][k] == t]
        assert mine == sorted(mine), f"tenant {t}'s packets left out of order"

    # `snic status --json` counts the same.
    after = _status(sock)
    assert sum(p["classifier"]["dropped"] for p in after["ports"]) == unmatched
    for row in after["tenants"]:
        t = row["tenant"]
        if t in tenants:
            assert row["queue_drops"] == queue_drops[t]
            assert row["dropped"] == nt_drops[t]
            assert row["delivered"] == sum(1 for x, _ in expected.values() if x == t)
    account = figures["account"]
    assert (account["unmatched"], account["nt"], account["queue"]) == (
        unmatched, sum(nt_drops.values()), sum(queue_drops.values()))


def test_flows_on_both_ports_and_stats(device, tmp_path):
    sock = device
    _ok("deploy", CHAINS / "web.toml", "--tenant", 0, "--socket", sock)
    _ok("deploy", CHAINS / "secure.toml", "--tenant", 1, "--weight", 2, "--socket", sock)
    record_path, plot = tmp_path / "flows.json", tmp_path / "stats.png"
    run = _ok("traffic", "--flow", "tenant=0,rate=0.8,size=64,port=0",
              "--flow", "tenant=1,rate=50%,size=imix,port=1",
              "--flow", "tenant=0,rate=0.3,size=200-600,port=1",
              "--packets", 400, "--backpressure", 0.3, "--record", record_path, "--json",
              "--socket", sock)
    figures = json.loads(run.stdout)
    assert figures["account"]["balanced"] and figures["account"]["sent"] == 1200
    rows = {row["tenant"]: row for row in figures["tenants"]}
    assert rows[0]["sent"] == 800 and rows[1]["sent"] == 400 and rows[1]["weight"] == 2
    for row in rows.values():
        assert row["delivered"] + row["queue_drops"] + row["nt_drops"] == row["sent"]
        assert 0 < row["latency"]["p50"] <= row["latency"]["p99"] <= row["latency"]["max"]
    record = json.loads(record_path.read_text())
    sizes = record["sent"]["size"]
    tenant1 = [s for s, t in zip(sizes, record["sent"]["tenant"]) if t == 1]
    assert set(tenant1) == {64, 576, 1500}
    assert {s for s, f in zip(sizes, record["sent"]["flow"]) if f == 0} == {64}
    assert all(200 <= s <= 600 for s, f in zip(sizes, record["sent"]["flow"]) if f == 2)

    stats = _ok("stats", record_path, "--plot", plot, "--json")
    again = json.loads(stats.stdout)
    assert again["tenants"] == figures["tenants"] and again["account"] == figures["account"]
    assert again["fairness"]["windows"] > 0 and 0 < again["fairness"]["jain_min"] <= 1
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000
    table = _ok("stats", record_path).stdout
    assert "balanced" in table and "Jain" in table

    bad = _snic("traffic", "--flow", "tenant=0,rate=2", "--socket", sock)
    assert bad.returncode == 2 and "rate must be a fraction" in bad.stderr
    bad = _snic("traffic", "--flow", "tenant=3", "--socket", sock)
    assert bad.returncode == 2 and "tenant 3 is not deployed" in bad.stderr
    bad = _snic("traffic", "--flow", "tenant=0", "--backpressure", 1, "--socket", sock)
    assert bad.returncode == 2 and "--backpressure must be a probability" in bad.stderr
    again = json.loads(_ok("traffic", "--flow", "tenant=0,size=64,packets=50", "--json",
                           "--socket", sock).stdout)
    assert again["account"]["balanced"] and again["account"]["sent"] == 50


def test_device_killed_mid_deploy_then_a_clean_deploy(tmp_path):
    sock = tmp_path / "device.sock"
    proc = _serve(sock)
    try:
        before = _status(sock)
        # Refusals change nothing.
        broken = tmp_path / "broken.toml"
        broken.write_text("[tenant]\nname = 'x'\n[[nodes]]\nname = 'a'\nnt = 'no_such_nt'\n")
        for args, message in (((broken, "--tenant", 0), "no_such_nt"),
                              ((CHAINS / "web.toml", "--tenant", 9), "tenant must be"),
                              ((CHAINS / "web.toml", "--tenant", 0, "--instances", 3),
                               "not enough free regions")):
            result = _snic("deploy", *args, "--socket", sock)
            assert result.returncode == 2 and message in result.stderr, result.stderr
        assert _status(sock)["tenants"] == before["tenants"]

        # Region 1 loads web at reset; secure there needs a reconfiguration, made to take
        # 2**31 cycles, so the deploy is waiting for it when the device dies.
        _set_reconfiguration(sock, 1 << 31)
        deploy = subprocess.Popen(
            [sys.executable, "-m", "supernic.driver.cli", "deploy", str(CHAINS / "secure.toml"),
             "--tenant", "2", "--instances", "2", "--socket", str(sock)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(600):
            if deploy.poll() is not None or _offline_regions(sock):
                break
            time.sleep(0.05)
        assert deploy.poll() is None, f"the deploy ended early: {deploy.communicate()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        out, err = deploy.communicate(timeout=60)
        assert deploy.returncode == 1, (out, err)
        assert err.startswith("snic: error: ") and "device" in err and len(err.splitlines()) \
            == 1, err
    finally:
        _stop(proc)

    sock.unlink(missing_ok=True)    # SIGKILL left the socket file behind
    proc = _serve(sock)
    try:
        _ok("deploy", CHAINS / "secure.toml", "--tenant", 2, "--instances", 2, "--socket", sock)
        status = _status(sock)
        assert [r["tenant"] for r in status["tenants"] if r["enabled"]] == [2]
        hosting = [r["region"] for r in status["regions"] if r["personality"] == "secure"]
        assert set(hosting) >= {1, 2}
    finally:
        _stop(proc)


def test_live_migration_under_traffic_matches_the_model(device):
    """`snic migrate` moves the metered chain (rate limiter, VLAN pop) from region 3 to region
    5 while paced traffic is queued and flowing (the device advances during the migration's
    own register accesses and polls): every delivered packet equals one chain model that saw
    the tenant's packets in order with their ingress timestamps, as if nothing had moved.

    While both regions are stopped the tenant's queue overflows, and the hardware does not say
    which packets it dropped there. An undelivered packet is an NT drop if the model drops it,
    else a queue drop; that is exact for the outputs, because a packet over its bucket's rate
    leaves the bucket's tokens as they were (the refill composes: hw/nt/rate_limiter.py); the
    split is then checked against the scheduler's and egress counters, and the NTs' counters
    in region 5 must have gone on from region 3's."""
    import copy
    import random
    sock = device
    _ok("deploy", CHAINS / "metered.toml", "--tenant", 0, "--socket", sock)
    spec = load_chain(CHAINS / "metered.toml")
    parser, rng = ParserModel(HEADER_BYTES), random.Random(5)
    frames = []
    for frame in chain_traffic(spec, 1200, 23, 0.05, (60, 600), HEADER_BYTES):
        frames.append(tag_frame(frame, parser.parse(frame), rng.choice(spec.keys)))
    _push_paced(sock, 0, frames, spacing=90)
    _run(sock, 30_000)                       # a quarter of it through region 3
    moved = _ok("migrate", "--tenant", 0, "--from", 3, "--to", 5, "--socket", sock)
    assert moved.stdout.startswith("tenant 0: metered moved from region 3 to region 5")
    out, tags, (accepted, _) = _collect(sock)
    assert len(accepted) == len(frames)
    regions = [int(r) for r in tags["region"]]
    assert regions[0] == 3 and regions[-1] == 5 and regions == sorted(regions)
    seqs = [int(s) for s in tags["seq"]]
    assert seqs == sorted(seqs), "the tenant's packets left out of order"
    delivered = dict(zip(seqs, out))

    classifier = ClassifierModel(ClassifierConfig.from_tenants([(0, spec.keys)], default=None),
                                 0)
    chain = ChainModel(spec, DATA_WIDTH, HEADER_BYTES)
    unmatched = nt_drops = queue_drops = 0
    for i, frame in enumerate(frames):
        meta = parser.parse(frame)
        meta["ts"] = accepted[i] % 2 ** 32      # the rate limiter meters by ingress time
        if classifier.classify(meta) is None:
            unmatched += 1
            assert i not in delivered
        elif i in delivered:
            result, out_meta = chain.process(frame, meta)
            assert not out_meta["drop"], f"input {i} came out; the model drops it"
            assert delivered[i].data == result, f"input {i} differs from the model"
        else:
            trial = copy.deepcopy(chain)
            _, out_meta = trial.process(frame, meta)
            if out_meta["drop"]:
                chain, nt_drops = trial, nt_drops + 1
            else:
                queue_drops += 1
    assert nt_drops > 0 and queue_drops > 0, (nt_drops, queue_drops)
    status = _status(sock)
    row = status["tenants"][0]
    assert row["delivered"] == len(out)
    # (A packet over a dropping bucket that the queue dropped first would be counted as an
    # NT drop here; with this seed none is, so the split is exact too.)
    assert (row["queue_drops"], row["dropped"]) == (queue_drops, nt_drops)
    assert sum(p["classifier"]["dropped"] for p in status["ports"]) == unmatched
    # The NTs' counters in region 5 went on from region 3's: they count every packet.
    for node, model in chain.models.items():
        want = model.counters()
        got = _registers(sock, f"r5_metered_{node}", list(want))
        assert got == want, f"r5_metered_{node}: hw {got}, model {want}"


def test_time_shared_region_through_the_cli(device, tmp_path):
    """Two tenants time-share region 3 (the metered chain, different keys and buckets) by `snic
    deploy --share` and `snic switch` on the served NIC: each tenant's packets equal its own
    chain model's, and tenant 0's NT counters, saved while tenant 1 ran, go on afterwards."""
    import random
    sock = device
    variant = tmp_path / "metered_b.toml"
    variant.write_text((CHAINS / "metered.toml").read_text()
                       .replace("keys = [10, 20]", "keys = [40]")
                       .replace("{ rate = 8.0, burst = 20000, action = \"drop\" }",
                                "{ rate = 0.2, burst = 2000, action = \"drop\" }"))
    _ok("deploy", CHAINS / "metered.toml", "--tenant", 0, "--socket", sock)
    shared = _ok("deploy", variant, "--tenant", 1, "--share", 3, "--socket", sock)
    assert "time-shared (held until snic switch --region 3 --tenant 1)" in shared.stdout
    specs = {0: load_chain(CHAINS / "metered.toml"), 1: load_chain(variant)}
    parser, rng = ParserModel(HEADER_BYTES), random.Random(9)

    def frames_of(t, n, sizes, seed):
        return [tag_frame(f, parser.parse(f), rng.choice(specs[t].keys))
                for f in chain_traffic(specs[t], n, seed, 0.0, sizes, HEADER_BYTES)]
    first, held = frames_of(0, 40, (60, 400), 1), frames_of(1, 25, (60, 120), 2)
    _push_paced(sock, 0, first, 150)
    _push_paced(sock, 1, held, 100)                  # queued: tenant 1 is held
    _run(sock, 10_000)
    _ok("switch", "--region", 3, "--tenant", 1, "--socket", sock)
    _run(sock, 5_000)
    _ok("switch", "--region", 3, "--tenant", 0, "--socket", sock)
    later = frames_of(0, 20, (60, 400), 3)
    _push_paced(sock, 0, later, 150)
    out, tags, accepted = _collect(sock)

    got = {(int(p), int(s)): packet.data for p, s, packet in zip(tags["port"], tags["seq"], out)}
    per_port = {0: first + later, 1: held}
    for port, tenant in ((0, 0), (1, 1)):
        chain = ChainModel(specs[tenant], DATA_WIDTH, HEADER_BYTES)
        for i, frame in enumerate(per_port[port]):
            meta = parser.parse(frame)
            meta["ts"] = accepted[port][i] % 2 ** 32
            result, out_meta = chain.process(frame, meta)
            if out_meta["drop"]:
                assert (port, i) not in got, f"tenant {tenant}'s input {i} should be dropped"
            else:
                assert got.get((port, i)) == result, f"tenant {tenant}'s input {i} differs"
        if tenant == 0:
            tenant0 = chain
    assert {int(t) for t in tags["tenant"]} == {0, 1}
    rows = {row["tenant"]: row for row in _status(sock)["tenants"]}
    assert rows[0]["queue_drops"] == rows[1]["queue_drops"] == 0
    for node, model in tenant0.models.items():       # tenant 0's context is loaded again
        want = model.counters()
        assert _registers(sock, f"r3_metered_{node}", list(want)) == want


def test_tenant_tokens_through_the_cli(device, tmp_path):
    """Two tenants deployed through the CLI each get a token over their own blocks and keys
    (issue 22): A's cannot read or write B's blocks, undeploy B, reset or shut down the device,
    or send B's keys; A pops only its own packets; A's `snic status --json` holds A's figures
    only, the operator's all of them and the denials; undeploy revokes A's token."""
    import os
    from supernic.driver.access import tenant_token_file
    from supernic.driver.client import DeviceError
    sock = device
    paths = {}
    for tenant, chain in ((0, "web"), (2, "secure")):
        out = _ok("deploy", CHAINS / f"{chain}.toml", "--tenant", tenant, "--socket",
                  sock).stdout
        paths[tenant] = tenant_token_file(f"unix:{sock}", tenant)
        assert str(paths[tenant]) in out and paths[tenant].stat().st_mode & 0o077 == 0

    def as_tenant(*args):
        return subprocess.run([sys.executable, "-m", "supernic.driver.cli", *map(str, args)],
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "SNIC_TOKEN_FILE": str(paths[0])})

    operator = _status(sock)
    state = json.loads(sock.with_name(sock.name + ".tenants.json").read_text())
    regions = {rec["tenant"]: rec["regions"] for rec in state["tenants"]}
    own = json.loads(as_tenant("status", "--socket", sock, "--json").stdout)
    assert own["role"] == "tenant" and [row["tenant"] for row in own["tenants"]] == [0]
    assert sorted(r["region"] for r in own["regions"]) == sorted(regions[0])
    assert own["blocks"] and all(b.split("_")[0] in {f"r{r}" for r in regions[0]}
                                 for b in own["blocks"])
    assert [row["tenant"] for row in operator["tenants"]] == [0, 1, 2, 3]
    table = as_tenant("status", "--socket", sock)
    assert table.returncode == 0 and "tenant 0" in table.stdout, table.stderr
    assert f"r{regions[2][0]}_" not in table.stdout

    refused = as_tenant("undeploy", "--tenant", 2, "--socket", sock)
    assert refused.returncode != 0 and "denied:" in refused.stderr
    assert _status(sock)["tenants"][2]["enabled"]

    async def attempts(client, description):
        theirs = next(b for b in description["registers"]["blocks"]
                      if b["name"].startswith(f"r{regions[2][0]}_"))
        mine = next(b for b in description["registers"]["blocks"]
                    if b["name"].startswith(f"r{regions[0][0]}_"))
        tenant = await DeviceClient.connect(sock, token=paths[0].read_text().strip())
        async with tenant:
            assert (await tenant.request("read32", address=mine["base"]))["response"] == 0
            denied = []
            for op, args in (("read32", {"address": theirs["base"]}),
                             ("write32", {"address": theirs["base"] + 0x20, "value": 1}),
                             ("reset", {}), ("shutdown", {}), ("push", {"port": 0,
                                                                       "frame": "00" * 64})):
                try:
                    await tenant.request(op, **args)
                except DeviceError as e:
                    denied.append(str(e).startswith("denied: "))
            return denied, await client.request("access")

    denied, report = _on_device(sock, attempts)
    assert denied == [True] * 5

    # Traffic: A sends only its own keys and pops only its own packets; B's (sent by the
    # operator here) wait for their owner.
    parser = ParserModel(HEADER_BYTES)

    def tagged(chain, seed):
        spec = load_chain(CHAINS / f"{chain}.toml")
        return [tag_frame(f, parser.parse(f), spec.keys[0])
                for f in chain_traffic(spec, 20, seed, 0.0, "mixed", HEADER_BYTES)]

    async def traffic(client, description):
        async with await DeviceClient.connect(sock, token=paths[0].read_text().strip()) as a:
            await client.push_batch([(0, f, 0) for f in tagged("secure", 5)])
            with pytest.raises(DeviceError, match="may send only frames with its own keys"):
                await a.push_batch([(1, f, 0) for f in tagged("secure", 6)[:1]])
            await a.push_batch([(1, f, 0) for f in tagged("web", 7)])
            await a.drain()
            mine = await a.pop()
            rest = await client.pop()
        return ([int(t) for t in delivered_tags(mine, description)["tenant"]],
                [int(t) for t in delivered_tags(rest, description)["tenant"]])

    mine, rest = _on_device(sock, traffic)
    assert mine and set(mine) == {0} and rest and set(rest) == {2}
    assert report["denials"]["tenant"] >= 6 and set(report["tenants"]) == {"0", "2"}
    stale = paths[0].read_text().strip()
    _ok("undeploy", "--tenant", 0, "--socket", sock)
    assert not paths[0].exists()
    with pytest.raises(DeviceError, match="refused the token"):
        asyncio.run(DeviceClient.connect(sock, token=stale))
