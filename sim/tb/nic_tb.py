"""cocotb testbench: the multi-tenant NIC (hw/nic/top.py) against the NIC model.

The deployment follows the design: each region runs the personality it loads at reset, and
every distinct chain among those is one tenant (a chain active in two regions gives its tenant
two instances, dispatched by flow hash). The driver's control plane deploys them (the same
plans `snic deploy` runs, sw/driver/control.py), and it migrates, moves regions and switches
contexts under traffic too. Each tenant's traffic comes from its chain's test
traffic (:func:`~supernic.sim.chain_model.chain_traffic`), tagged with one of its keys; a share
of frames carries a key nobody owns. Frames are spread over the ingress ports, which are all
driven at once with random idle, so ingress is oversubscribed; the egress sees random
backpressure.

One coroutine drives the ports, takes the output and watches the scheduler's output: the order
the hardware dispatched packets to each region is what the model replays (see
:mod:`supernic.sim.nic.nic_model`). Checks: every delivered packet equals the model's (bytes,
first- and last-beat metadata, tenant), per-flow order, the ingress timestamp of every
dispatched packet, no packet reaches a region of another tenant, every counter (classifier,
scheduler, store, egress, every NT) equals the model's, and every ingress packet is delivered
or counted once by reason.
"""

import collections
import copy
import dataclasses
import json
import os
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from supernic.driver.control import ControlPlane
from supernic.driver.discovery import read_register
from supernic.driver.state import RegionState
from supernic.sim.model_migration import from_model, to_model
from supernic.desc.chain import load_chain, split_chain
from supernic.desc.nic.classifier import ClassifierConfig
from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.layout import nic_layout
from supernic.desc.nic.scheduler import POLICY_CODES
from supernic.desc.meta import TAIL_FLAGS
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.bfm import frame_to_beats, pattern, start_and_reset
from supernic.sim.chain_model import chain_traffic
from supernic.sim.layout_codec import decode, diff as _diff
from supernic.sim.nic.nic_model import Deployment, NicModel, tag_frame
from supernic.sim.tb.nt_tb import BlockAccess
from supernic.sim.tb.bench_env import scenario as bench_scenario, write_result as _write_result
from supernic.sim.tb.scenario import (DrainShared, Migrate, MoveRegion, NicScenario, Suspend,
                                      Switch)

MAX_REPORTED = 5
UNOWNED_KEY = 3999


def deployment_from(design, spare=()):
    """Tenants from the personalities the regions load at reset (see the module docstring);
    the ``spare`` regions are left free."""
    chains, regions, keys = {}, {}, {}
    by_name = {}
    # A link's primary region loading the primary part of a split chain runs the whole chain
    # with its branch region (which is then no tenant's region of its own).
    links = {}
    for a, b in design["config"].get("links", []):
        first = design["regions"][a][0]
        if first["source"].endswith("#primary") and a not in spare:
            links[a] = b
    for r, personalities in enumerate(design["regions"]):
        if r in spare or r in links.values():
            continue
        first = personalities[0]
        source = first["source"].partition("#")[0] if r in links else first["source"]
        spec = load_chain(source)
        if spec.name not in by_name:
            t = len(by_name)
            by_name[spec.name] = t
            chains[t] = spec
            regions[t] = []
            # A key that fits a VLAN ID, so untagged frames can carry it too.
            small = [k for k in spec.keys if k < 4096]
            keys[t] = list(spec.keys) + ([] if small else [4000 + t])
        regions[by_name[spec.name]].append(r)
    return Deployment(chains, regions, keys, links=links)


def placements(deployment, tenant, region):
    """``[(region, chain part)]``: where ``tenant``'s chain instance in ``region`` runs, the
    two parts of a split chain in a linked pair, else the chain itself."""
    spec = deployment.chains[tenant]
    if region in deployment.links:
        primary, branches = split_chain(spec)
        return [(region, primary), (deployment.links[region], branches)]
    return [(region, spec)]


def traffic(deployment, n, seed, malformed, sizes, header_bytes, ports, rng):
    """``[(port, frame)]`` for every tenant plus frames with a key nobody owns."""
    from supernic.sim.parser_model import ParserModel
    parser = ParserModel(header_bytes)
    tenants = sorted(deployment.chains)
    per = n // (len(tenants) + 1)
    frames = []
    for t in tenants:
        spec = deployment.chains[t]
        for frame in chain_traffic(spec, per, seed + 17 * t, malformed, sizes, header_bytes):
            meta = parser.parse(frame)
            usable = [k for k in deployment.keys[t] if meta["vxlan"] or k < 4096]
            frames.append(tag_frame(frame, meta, rng.choice(usable or deployment.keys[t])))
    spec = deployment.chains[tenants[0]]
    for frame in chain_traffic(spec, n - len(frames), seed + 999, malformed, sizes,
                               header_bytes):
        frames.append(tag_frame(frame, parser.parse(frame), UNOWNED_KEY))
    rng.shuffle(frames)
    return [(rng.randrange(ports), f) for f in frames]


async def deploy(plane, deployment, policy, share_region=None):
    """Deploy every tenant through the control plane (sw/driver/control.py), on the regions
    the deployment gives it, with its keys; with ``share_region``, the last tenant
    time-shares that region with the tenant running there. The scheduling policy is a
    device-wide setting, written first. Returns the classifier configuration the model
    classifies with (the one the control plane programs)."""
    await plane.regs.write("scheduler", "policy", POLICY_CODES[policy])
    for t in sorted(deployment.chains):
        spec = dataclasses.replace(deployment.chains[t], keys=list(deployment.keys[t]))
        if share_region is not None and t == max(deployment.chains):
            await plane.deploy(spec, t, share=share_region)
        else:
            await plane.deploy(spec, t, regions=list(deployment.regions[t]),
                               weight=deployment.weights.get(t, 1))
    return ClassifierConfig.from_tenants(
        [(t, deployment.keys[t]) for t in sorted(deployment.chains)], default=None)


def time_share_variant(spec, key):
    """``spec`` for a second tenant sharing its region: its own key and a configuration that
    meters differently (the rate limiter's buckets, or the chain as it is)."""
    from supernic.desc.nt.rate_limiter import (Action, Bucket, ClassKind, RateLimiterConfig,
                                               TrafficClass)

    def swap(node):
        if node.kind != "rate_limiter":
            return node
        config = RateLimiterConfig(
            [Bucket(int(0.3 * 65536), 2500, Action.MARK), Bucket(int(0.1 * 65536), 1600,
                                                                  Action.DROP)],
            [TrafficClass(ClassKind.VLAN, key, 1)], 0)
        return dataclasses.replace(node, config=config)
    return dataclasses.replace(spec, keys=[key], nodes={k: swap(n) for k, n in spec.nodes.items()},
                               stages=[swap(s) for s in spec.stages])


@cocotb.test()
async def random_traffic(dut):
    with open(os.environ["SNIC_REGMAP"]) as f:
        design = json.load(f)
    cfg = design["config"]
    width, hbytes = cfg["data_width"], cfg["header_bytes"]
    shape = NicShape(width, hbytes, cfg["tenants"], cfg["ports"], len(cfg["regions"]))
    scenario = NicScenario.from_json(bench_scenario())
    seed, n = scenario.seed, scenario.packets
    rng = random.Random(seed)
    regmap = design["registers"]
    deployment = deployment_from(design, set(scenario.spare_regions))
    # Time sharing: a second tenant (the next free id) of the region's chain, with its own
    # key and configuration, shares the region by context switches.
    share_region = scenario.time_share
    shared = []
    if share_region is not None:
        first = next(t for t, rs in deployment.regions.items() if rs == [share_region])
        second = len(deployment.chains)
        deployment.chains[second] = time_share_variant(deployment.chains[first], 3003)
        deployment.regions[second] = [share_region]
        deployment.keys[second] = [3003]
        shared = [first, second]

    await start_and_reset(dut)
    bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)
    # The driver's control plane deploys, migrates, moves regions and switches contexts, as
    # `snic` does on a device (the wall-clock timeout is generous: the simulator is slow).
    plane = ControlPlane(bus, design, wait=lambda: ClockCycles(dut.clk, 16), timeout=3600)
    classifier = await deploy(plane, deployment, scenario.policy, share_region)
    from supernic.sim.parser_model import ParserModel
    model = NicModel(deployment, classifier, shape.ports, width, hbytes,
                     ParserModel.of(design["config"]))
    if shared:
        model.time_shared.add(share_region)

    inputs = traffic(deployment, n, seed, scenario.malformed, scenario.sizes, hbytes,
                     shape.ports, rng)
    per_port = [[(i, f) for i, (p, f) in enumerate(inputs) if p == port]
                for port in range(shape.ports)]
    run = NicRun(dut, shape, per_port, rng)
    # The scenario's steps while traffic flows, one after another (they share the bus and the
    # scheduler's table staging registers; each waits for its point and for the one before).
    # Regions each tenant may use over the run grow with them.
    allowed = {t: set(rs) for t, rs in deployment.regions.items()}
    steps, migrations, moves, switches, yields = [], [], [], [], []
    yield_regions = []
    for step in scenario.steps:
        after = int(len(inputs) * step.at)
        if isinstance(step, Migrate):
            tenant = next(t for t, rs in deployment.regions.items() if step.source in rs)
            allowed[tenant].add(step.target)
            migration = {"tenant": tenant, "source": step.source, "target": step.target,
                         "spec": deployment.chains[tenant]}
            migrations.append(migration)
            steps.append(lambda m=migration, a=after: migrate(plane, deployment, m, run, a))
        elif isinstance(step, MoveRegion):
            move = reconfiguration(design, deployment)
            if move is not None:
                allowed[move["to_tenant"]].add(move["region"])
                moves.append(move)
                steps.append(lambda m=move, a=after: reconfigure(plane, deployment, m, run, a))
        elif isinstance(step, Switch):
            # Each takes about 12,000 cycles here: cocotb's AXI4-Lite moves two 606-word
            # contexts.
            steps.append(lambda t=step.tenant, a=after: switch_context(
                plane, share_region, t, run, a, switches))
        elif isinstance(step, DrainShared):
            steps.append(lambda: drain_shared(plane, share_region, shared, run, len(inputs),
                                              switches))
        elif isinstance(step, Suspend):
            yield_regions += list(step.regions)
            steps.append(lambda rs=list(step.regions), a=after: suspend_and_restore(
                bus, design, run, rs, a, rng, yields))

    async def one_after_another():
        run.holding += 1        # the run must not end before the last step
        try:
            for step in steps:
                await step()
        finally:
            run.holding -= 1
            run.last_out = run.cycles
    if steps:
        cocotb.start_soon(one_after_another())
    await RisingEdge(dut.clk)
    now0 = int(dut.parser0.now.value)
    await run.run(max_cycles=60 * sum(len(f) for _, f in inputs) // shape.beat_bytes + 50_000)

    stats = collections.Counter()
    reports, problems = [], []

    def report(text):
        stats["mismatches"] += 1
        if len(reports) < MAX_REPORTED:
            reports.append(text)

    # The model: classify every input, then replay each region's dispatch order.
    classified = {}
    for i, (p, frame) in enumerate(inputs):
        classified[i] = model.classify(p, frame)
    index_of = {}
    for port, frames in enumerate(per_port):
        for k, (i, _) in enumerate(frames):
            index_of[(port, k % 65536)] = i
    expected = {}        # input index -> (frame, meta, delivered)
    dispatched = set()
    # A migrated instance runs the source's packets, then the target's (the commit holds the
    # tenant until the source is empty): replay the source first, then move its model.
    order = sorted(set(run.dispatch) | {m["source"] for m in migrations})
    for m in migrations:
        if m["target"] in order:
            order.remove(m["target"])
        order.insert(order.index(m["source"]) + 1, m["target"])
    for r in order:
        for m in migrations:
            if r == m["target"]:
                model.migrate(m["source"], m["target"], m["spec"])
        for rec in run.dispatch.get(r, ()):
            i = index_of[(rec["port"], rec["seq"])]
            dispatched.add(i)
            meta, tenant = classified[i]
            if tenant is None:
                report(f"packet {i}: dispatched to region {r}, but the classifier drops it")
                continue
            if rec["tenant"] != tenant or r not in allowed[tenant]:
                report(f"packet {i}: tenant {rec['tenant']} to region {r}, model tenant "
                       f"{tenant} in regions {sorted(allowed[tenant])}")
                continue
            port = inputs[i][0]
            k = rec["seq"]
            want_ts = (now0 + run.accept_cycles[port][k]) % 2 ** 32
            if rec["ts"] != want_ts:
                report(f"packet {i}: ingress timestamp {rec['ts']}, accepted at {want_ts}")
            meta = copy.deepcopy(meta)
            meta["ts"] = rec["ts"]
            expected[i] = model.run(r, tenant, inputs[i][1], meta)

    seen = set()
    last_by_flow = {}
    for got, first, last in run.outputs:
        tag = last["tag"]
        i = index_of.get((tag["port"], tag["seq"]))
        if i is None or i not in expected:
            report(f"an output (port {tag['port']} seq {tag['seq']}) matches no dispatched "
                   f"packet")
            continue
        if i in seen:
            report(f"packet {i} came out twice")
            continue
        seen.add(i)
        want_frame, want_meta, delivered = expected[i]
        problems_here = []
        if not delivered:
            problems_here.append("the model drops it")
        if got != want_frame:
            problems_here.append(f"data differs ({len(got)} bytes out, model "
                                 f"{len(want_frame)})")
        if last["hdr"] != want_meta:
            problems_here.append(f"last-beat metadata: {_diff(want_meta, last['hdr'])}")
        first_want = copy.deepcopy(want_meta)
        for flag in TAIL_FLAGS:
            first_want["flags"][flag] = 0
        if first is not last and first["hdr"] != first_want:
            problems_here.append(f"first-beat metadata: {_diff(first_want, first['hdr'])}")
        tenant = classified[i][1]
        if tag["tenant"] != tenant:
            problems_here.append(f"tenant {tag['tenant']}, model {tenant}")
        if problems_here:
            report(f"packet {i} ({len(inputs[i][1])} bytes, region {tag['region']}): "
                   + "; ".join(problems_here))
        stats["delivered"] += 1
        stats["changed"] += int(got != inputs[i][1])
        flow = (inputs[i][0], tenant, _flow_key(classified[i][0]))
        if last_by_flow.get(flow, -1) > i:
            report(f"packet {i} overtook packet {last_by_flow[flow]} of its flow")
        last_by_flow[flow] = max(i, last_by_flow.get(flow, -1))
    for i, (_, _, delivered) in expected.items():
        if delivered and i not in seen:
            report(f"packet {i} was dispatched but never came out")

    # Counters, and the account of every ingress packet.
    hw = {}

    async def reg(block, name):
        hw[f"{block}.{name}"] = value = await read_register(bus, regmap, block, name)
        return value

    await ClockCycles(dut.clk, 8)
    for p in range(shape.ports):
        want = model.classifier_stats[p]
        for name in ("packets", "dropped"):
            got = await reg(f"classifier{p}", name)
            if got != want[name]:
                problems.append(f"classifier{p}.{name}: hw {got} model {want[name]}")
    not_dispatched = collections.Counter()
    for i, (meta, tenant) in classified.items():
        if tenant is not None and i not in dispatched:
            not_dispatched[tenant] += 1
    per_tenant = {}
    total = {"in": len(inputs), "classifier_dropped": 0, "queue_dropped": 0,
             "store_dropped": await reg("store", "drops"),
             "stall_dropped": await reg("store", "stall_drops"),
             "misrouted": await reg("store", "misrouted"), "nt_dropped": 0,
             "delivered": 0}
    # The control plane writes only regions the NIC has, and every chain keeps its header
    # length: the model expects neither drop nor error of these two.
    for name in ("misrouted", "header_errors"):
        if await reg("store", name):
            problems.append(f"store.{name}: hw {hw['store.' + name]} model 0")
    for p in range(shape.ports):
        total["classifier_dropped"] += hw[f"classifier{p}.dropped"]
    for t in sorted(deployment.chains):
        q = await reg("scheduler", f"t{t}_queue_drops") + await reg(
            "scheduler", f"t{t}_disabled_drops")
        total["queue_dropped"] += q
        if q != not_dispatched[t] and total["store_dropped"] + total["stall_dropped"] == 0:
            problems.append(f"tenant {t}: {not_dispatched[t]} packets never dispatched, "
                            f"scheduler counted {q} drops")
        want = model.egress[t]
        for name in ("delivered", "delivered_bytes", "dropped", "dropped_bytes"):
            got = await reg("egress", f"t{t}_{name}")
            if got != want[name]:
                problems.append(f"egress t{t}_{name}: hw {got} model {want[name]}")
        total["nt_dropped"] += hw[f"egress.t{t}_dropped"]
        total["delivered"] += hw[f"egress.t{t}_delivered"]
        per_tenant[t] = {
            "chain": deployment.chains[t].name, "regions": deployment.regions[t],
            "keys": deployment.keys[t],
            "in": sum(1 for _, tenant in classified.values() if tenant == t),
            "queue_dropped": q, "nt_dropped": hw[f"egress.t{t}_dropped"],
            "delivered": hw[f"egress.t{t}_delivered"],
            "delivered_bytes": hw[f"egress.t{t}_delivered_bytes"]}
    for key, nodes in sorted(model.instances().items(), key=lambda kv: len(kv[0])):
        r, chain = key[:2]
        if len(key) == 3:           # a time-shared instance: its context in, to be read
            await plane.switch(r, key[2])
        tenant = next(t for t, spec in deployment.chains.items() if spec.name == chain)
        # A split chain's nodes before the fork run in both regions of the pair: each copy
        # saw every packet, so each must read as the model.
        blocks_of = collections.defaultdict(list)
        for where, part in placements(deployment, tenant, r):
            for n in part.node_list():
                blocks_of[n.name].append(f"r{where}_{part.name}_{n.name}")
        for name, m in nodes.items():
            for block in blocks_of[name]:
                want = m.counters()
                got = {k: await read_register(bus, regmap, block, k) for k in want}
                if got != want:
                    problems.append(f"{block}: hw {got} model {want}")
                if hasattr(m, "verify_hardware"):
                    problems += [f"{block}: {p}" for p in
                                 await m.verify_hardware(BlockAccess(bus, regmap, block))]
    accounted = (total["classifier_dropped"] + total["queue_dropped"] + total["store_dropped"]
                 + total["stall_dropped"] + total["misrouted"]
                 + total["nt_dropped"] + total["delivered"])
    if accounted != total["in"]:
        problems.append(f"packets unaccounted for: {total}")
    if any("done_at_input" not in m for m in migrations):
        problems.append(f"migration not completed: {migrations}")
    if yield_regions and len(yields) != len(yield_regions):
        problems.append(f"suspended {len(yields)} of regions {yield_regions}")
    if total["delivered"] != len(run.outputs):
        problems.append(f"egress counted {total['delivered']} delivered, "
                        f"{len(run.outputs)} came out")

    result = {
        "packets_in": len(inputs), "delivered": stats["delivered"],
        "changed": stats["changed"], "mismatches": stats["mismatches"],
        "cycles": run.cycles, "account": total, "tenants": per_tenant,
        "dispatched": {r: len(v) for r, v in run.dispatch.items()}, "moves": moves,
        "yields": yields,
        "migrations": [{k: v for k, v in m.items() if k != "spec"} for m in migrations],
        "switches": switches,
        "problems": problems[:MAX_REPORTED], "reports": reports,
    }
    _write_result(result)
    assert not reports, "\n".join(reports)
    assert not problems, "\n".join(problems[:MAX_REPORTED])


async def suspend_and_restore(bus, design, run, regions, after, rng, report):
    """With traffic flowing, through the driver (sw/driver/state.py): suspend each region's
    personality at a packet boundary, capture its state, overwrite it with random words,
    restore the capture, check it reads back equal, migrate it to the chain's Python model
    (whose counters must equal the NTs' registers) and back, and resume. The run's output must
    still equal the model's: any state lost or restored wrong shows there. (The run is held
    open by the sequence of steps that calls this.)"""
    clk = run.dut.clk
    while run.accepted < after:
        await RisingEdge(clk)
    for r in regions:
        region = RegionState(bus, design, r, wait=lambda: ClockCycles(clk, 16))
        start = run.cycles
        name = await region.suspend(at_boundary=True)
        stopped_at = run.cycles
        snapshot = await region.capture()
        junk = [rng.getrandbits(32) for _ in snapshot["words"]]
        await region.restore({**snapshot, "words": junk})
        await region.restore(snapshot)
        again = await region.capture()
        # To the chain's Python model and back: the model must report what the NTs'
        # registers read now, and the hardware runs on from the model's state (the run's
        # output and counters are checked against the NIC model).
        model, taken = await to_model(region)
        differences = {}
        for node, nt_model in model.models.items():
            block = f"r{r}_{name}_{node}"
            want = nt_model.counters()
            got = {k: await read_register(bus, design["registers"], block, k)
                   for k in want}
            if got != want:
                differences[block] = {"hw": got, "model": want}
        await from_model(region, model, taken)
        await region.resume()
        report.append({
            "region": r, "personality": name, "words": len(snapshot["words"]),
            "stop_cycles": stopped_at - start, "stopped_cycles": run.cycles - stopped_at,
            "restored_equal": again["words"] == snapshot["words"],
            "done_at_input": run.accepted,
            "model_counters": differences or "equal"})


async def switch_context(plane, region, tenant, run, after, report):
    """A context switch of the time-shared region (sw/driver/timeshare.py) to ``tenant``,
    through the control plane."""
    while run.accepted < after:
        await RisingEdge(run.dut.clk)
    start = run.cycles
    await plane.switch(region, tenant)
    report.append({"to": tenant, "cycles": run.cycles - start,
                   "done_at_input": run.accepted})


async def drain_shared(plane, region, tenants, run, total, report):
    """Once every packet went in: switch between the sharing tenants until none has packets
    queued (a held tenant's queue waits for its turn)."""
    clk = run.dut.clk
    while run.accepted < total:
        await ClockCycles(clk, 64)
    for _ in range(16):
        backlog = {t: await plane.read("scheduler", f"t{t}_backlog_beats") for t in tenants}
        if not any(backlog.values()):
            return
        if backlog[plane.shares[region]["active"]]:
            await ClockCycles(clk, 256)
            continue
        tenant = next(t for t in tenants if backlog[t])
        start = run.cycles
        await plane.switch(region, tenant)
        report.append({"to": tenant, "cycles": run.cycles - start, "draining": True,
                       "done_at_input": total})


async def migrate(plane, deployment, migration, run, after):
    """Move a tenant's chain instance to a spare region with traffic flowing, through the
    control plane (``ControlPlane.migrate``: the source's NT configuration and region cost
    copied to the target, then :func:`~supernic.driver.migration.move_instance` re-points the
    flow buckets and moves the state). Starts once ``after`` packets went in. (The run is held
    open by the sequence of steps that calls this.)"""
    while run.accepted < after:
        await RisingEdge(run.dut.clk)
    source, target, tenant = (migration[k] for k in ("source", "target", "tenant"))
    start = run.cycles
    report = await plane.migrate(tenant, source, target)
    deployment.regions[tenant] = list(plane.deployed[tenant].regions)
    migration.update(words=report["words"], cycles=run.cycles - start,
                     done_at_input=run.accepted)


def reconfiguration(design, deployment):
    """A region move for the scale-out scenario: a tenant with two instances gives one up to a
    tenant whose chain that region can also load. None if the design has no such region."""
    for t, regions in deployment.regions.items():
        if len(regions) < 2:
            continue
        region = regions[-1]
        names = [p["name"] for p in design["regions"][region]]
        for u, spec in deployment.chains.items():
            if u != t and spec.name in names:
                return {"region": region, "from_tenant": t, "to_tenant": u,
                        "personality": names.index(spec.name)}
    return None


async def reconfigure(plane, deployment, move, run, after):
    """Scale one tenant in and another out while traffic flows, through the control plane:
    ``scale_in`` re-points the first tenant's flow buckets away from the region and commits
    (the scheduler holds that tenant until its packets in flight are out, so no flow
    reorders); ``scale_out`` loads the region's other personality (the region drains, then
    stays offline for its reconfiguration time, which the board sets: here 500 cycles),
    configures the second tenant's NTs in it and adds it to that tenant's buckets."""
    while run.accepted < after:
        await RisingEdge(run.dut.clk)
    r, giver, taker = move["region"], move["from_tenant"], move["to_tenant"]
    await plane.scale_in(giver, r)
    deployment.regions[giver] = list(plane.deployed[giver].regions)
    await plane.regs.write(f"region{r}", "reconfig_cycles", 500)
    await plane.scale_out(taker, r)
    deployment.regions[taker] = list(plane.deployed[taker].regions)
    move["done_at_input"] = run.accepted


def _flow_key(meta):
    f = meta["flow"]
    return (f["src_ip"], f["dst_ip"], f["sport"], f["dport"], f["proto"])


class NicRun:
    """Drives every ingress port, takes the egress and watches the scheduler's output, in one
    coroutine (one wake-up a cycle: cocotb costs tens of microseconds per wake-up)."""

    def __init__(self, dut, shape, per_port, rng, idle="random", backpressure="random"):
        self.dut = dut
        self.shape = shape
        self.width = shape.data_width
        self.beats = [[b for _, f in frames for b in frame_to_beats(f, self.width)]
                      for frames in per_port]
        self.packets = [len(frames) for frames in per_port]
        self.idle = [pattern(idle, rng) for _ in per_port]
        self.backpressure = pattern(backpressure, rng)
        self.accept_cycles = [[] for _ in per_port]
        self.dispatch = collections.defaultdict(list)
        self.outputs = []
        self.cycles = 0
        self.last_out = 0
        self.holding = 0    # > 0: a side task has a region stopped; do not end the run
        layout = nic_layout(shape)
        self.user_layout = layout
        w = self.width
        self.meta_shift = w + w // 8 + 1

    @property
    def accepted(self):
        """Packets taken on every ingress port so far."""
        return sum(len(a) for a in self.accept_cycles)

    async def run(self, max_cycles, quiet=3000):
        dut, shape = self.dut, self.shape
        ports = range(shape.ports)
        s = [(getattr(dut, f"s_axis{p}__tdata"), getattr(dut, f"s_axis{p}__tkeep"),
              getattr(dut, f"s_axis{p}__tlast"), getattr(dut, f"s_axis{p}__tvalid"),
              getattr(dut, f"s_axis{p}__tready")) for p in ports]
        m_tdata, m_tkeep, m_tlast = dut.m_axis__tdata, dut.m_axis__tkeep, dut.m_axis__tlast
        m_tvalid, m_tready, m_tuser = dut.m_axis__tvalid, dut.m_axis__tready, dut.m_axis__tuser
        d_valid, d_ready = dut.scheduler.o__valid, dut.scheduler.o__ready
        d_payload = dut.scheduler.o__payload
        pos = [0 for _ in ports]
        valid = [False for _ in ports]
        at_start = [True for _ in ports]
        d_start = True
        ready = False
        chunks, first_user = [], None
        nbytes = self.width // 8
        layout = self.user_layout
        edge = RisingEdge(dut.clk)
        total_packets = sum(self.packets)
        while True:
            await edge
            self.cycles += 1
            if self.cycles > max_cycles:
                raise TimeoutError(f"NIC stalled: {len(self.outputs)} packets out, "
                                   f"{[len(a) for a in self.accept_cycles]} in after "
                                   f"{max_cycles} cycles")
            for p in ports:
                tdata, tkeep, tlast, tvalid, tready = s[p]
                if valid[p] and tready.value:
                    if at_start[p]:
                        self.accept_cycles[p].append(self.cycles)
                    at_start[p] = self.beats[p][pos[p]][2]
                    pos[p] += 1
                    valid[p] = False
                if not valid[p] and pos[p] < len(self.beats[p]) and not next(self.idle[p]):
                    data, keep, last = self.beats[p][pos[p]][:3]
                    tdata.value, tkeep.value, tlast.value = data, keep, last
                    valid[p] = True
                tvalid.value = int(valid[p])
            if d_valid.value and d_ready.value:
                if d_start:
                    meta = decode(layout, int(d_payload.value) >> self.meta_shift)
                    tag = meta["tag"]
                    self.dispatch[tag["region"]].append({
                        "port": tag["port"], "seq": tag["seq"], "tenant": tag["tenant"],
                        "ts": meta["hdr"]["ts"]})
                d_start = bool(int(d_payload.value) >> (self.width + self.width // 8) & 1)
            if ready and m_tvalid.value:
                keep = int(m_tkeep.value)
                data = int(m_tdata.value).to_bytes(nbytes, "little")
                count = bin(keep).count("1")
                chunks.append(data[:count])
                user = int(m_tuser.value)
                if first_user is None:
                    first_user = user
                if m_tlast.value:
                    first = decode(layout, first_user)
                    last = first if user == first_user else decode(layout, user)
                    self.outputs.append((b"".join(chunks), first, last))
                    chunks, first_user = [], None
                    self.last_out = self.cycles
            ready = not next(self.backpressure)
            m_tready.value = int(ready)
            done_in = all(len(a) == n for a, n in zip(self.accept_cycles, self.packets))
            if done_in and not self.holding and self.cycles - max(self.last_out, max(
                    (a[-1] for a in self.accept_cycles if a), default=0)) > quiet:
                return
            if len(self.outputs) >= total_packets and done_in and not self.holding:
                return
