"""cocotb benches of the multi-tenant NIC: fair shares under saturation, scaling over
instances, scale-out reaction, and added latency. Driven by :mod:`supernic.tools.bench_nic`.

The scenario is one JSON object (:func:`~supernic.sim.tb.bench_env.scenario`); results go to
``SNIC_RESULT``. Traffic is a
pool of fixed-size frames per tenant, aimed at the tenant's chain (its test traffic, without
malformed frames) and tagged with its key; each port always has a beat ready and picks the
tenant on it that has offered the fewest beats, so every tenant offers the same bandwidth
(half a port each when two share one) and is backlogged.
"""


import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from supernic.driver.discovery import read_register, write_register
from supernic.driver.rebalance import balanced_table, read_loads
from supernic.desc.chain import load_chain
from supernic.desc.nic.classifier import ClassifierConfig, classifier_block
from supernic.desc.nic.shape import NicShape
from supernic.desc.nic.scheduler import SchedulerConfig, scheduler_block
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.bfm import frame_to_beats, start_and_reset
from supernic.sim.chain_model import chain_traffic
from supernic.sim.nic.nic_model import tag_frame
from supernic.sim.parser_model import ParserModel
from supernic.sim.tb.bench_env import (design as read_design, scenario as bench_scenario,
                                       write_result as _write_result)


def _design():
    design = read_design()
    return design, NicShape.from_description(design)


def tenant_frames(spec, size, key, count, seed, header_bytes, delivered_only=False,
                  distinct_flows=False):
    """``count`` frames of exactly ``size`` bytes for ``spec``, tagged with ``key``; with
    ``delivered_only``, only frames the chain delivers and changes (its firewall drops some of
    its test traffic, and packets an NT does not apply to skip it: neither does the work the
    bench means to measure). With ``distinct_flows`` every frame is a flow of its own: IPv4
    TCP/UDP frames only, each given a destination port drawn without replacement (checksums
    recomputed), so flow-hash dispatch sees ``count`` random flows."""
    import random
    from supernic.sim.chain_model import retarget
    rng = random.Random(seed)
    ports = iter(rng.sample(range(1024, 65536), min(count * 4, 64512)))
    from supernic.sim.chain_model import ChainModel
    parser = ParserModel(header_bytes)
    chain = ChainModel(spec, 64, header_bytes) if delivered_only else None
    out = []
    while len(out) < count:
        for f in chain_traffic(spec, 4 * count, seed, malformed=0.0, size_dist=size - 4,
                               header_bytes=header_bytes):
            meta = parser.parse(f)
            if meta["vxlan"] or meta["vlan_count"]:
                continue
            if distinct_flows:
                if (meta["l3_kind"][0] != 1 or not meta["l4_kind"][0]
                        or meta["flags"]["fragment"]):
                    continue
                f = retarget(f, meta, meta["flow"]["dst_ip"], next(ports))
            tagged = tag_frame(f, meta, key)
            if len(tagged) != size:
                continue
            if chain is not None:
                meta = parser.parse(tagged)
                meta["ts"] = 0
                out_frame, out_meta = chain.process(tagged, meta)
                if out_meta["drop"] or out_frame == tagged:
                    continue
            out.append(tagged)
        seed += 1
    return out[:count]


class Nic:
    """Register access and deployment for a bench."""

    def __init__(self, dut, design, shape):
        self.dut, self.design, self.shape = dut, design, shape
        self.regmap = design["registers"]
        self.bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)

    async def read(self, block, reg):
        return await read_register(self.bus, self.regmap, block, reg)

    async def write(self, block, reg, value):
        await write_register(self.bus, self.regmap, block, reg, value)

    async def load(self, region, chain):
        """Load personality ``chain`` into ``region`` (drain, reconfigure); return the cycles
        from the strobe until the region is online again."""
        names = [p["name"] for p in self.design["regions"][region]]
        index = names.index(chain)
        if await self.read(f"region{region}", "active") == index:
            return 0
        start = self.dut_cycles()
        await self.write(f"region{region}", "load_index", index)
        await self.write(f"region{region}", "load", 1)
        while not (await self.read(f"region{region}", "online")
                   and await self.read(f"region{region}", "active") == index):
            await ClockCycles(self.dut.clk, 16)
        return self.dut_cycles() - start

    def dut_cycles(self):
        return int(self.dut.parser0.now.value)

    async def configure_instance(self, region, spec):
        """Load ``spec``'s NT configuration into its personality's blocks in ``region``."""
        for node in spec.node_list():
            for reg, value in node.config.register_writes(node.params):
                await self.write(f"r{region}_{spec.name}_{node.name}", reg, value)

    async def set_table(self, tenant, regions, table=None):
        """Spread ``tenant``'s flow buckets over ``regions`` in turn (or as ``table`` says)
        and commit (the scheduler swaps the table once the tenant's packets in flight are
        out)."""
        size = self.design["config"]["table_size"]
        table = table or [regions[i % len(regions)] for i in range(size)]
        for i in range(size):
            await self.write("scheduler", "table_tenant", tenant)
            await self.write("scheduler", "table_index", i)
            await self.write("scheduler", "table_region", table[i])
            await self.write("scheduler", "table_write", 1)
        await self.write("scheduler", "table_commit", 1 << tenant)
        while await self.read("scheduler", "commit_pending") >> tenant & 1:
            await ClockCycles(self.dut.clk, 4)

    async def deploy(self, tenants, policy, table=None):
        """``tenants``: list of dicts with ``id``, ``chain`` (a ChainSpec), ``regions``,
        ``keys``, ``weight``."""
        classifier = ClassifierConfig.from_tenants([(t["id"], t["keys"]) for t in tenants],
                                                   default=None)
        cfg = self.design["config"]
        for p in range(self.shape.ports):
            block = classifier_block(f"classifier{p}", self.shape, cfg["classifier_entries"])
            for reg, value in classifier.register_writes(block):
                await self.write(f"classifier{p}", reg, value)
        costs = {}
        for t in tenants:
            for r in t["regions"]:
                costs[r] = t["chain"].cycles_per_beat(self.shape.data_width)
        sched = SchedulerConfig.for_deployment(
            self.shape, self.design["config"]["table_size"],
            {t["id"]: t["regions"] for t in tenants}, policy=policy,
            weights={t["id"]: t.get("weight", 1) for t in tenants}, region_costs=costs)
        block = scheduler_block("scheduler", self.shape, cfg["table_size"])
        for reg, value in sched.register_writes(block):
            await self.write("scheduler", reg, value)
        for t in tenants:
            spec = t["chain"]
            for r in t["regions"]:
                for node in spec.node_list():
                    for reg, value in node.config.register_writes(node.params):
                        await self.write(f"r{r}_{spec.name}_{node.name}", reg, value)


class SaturatingSource:
    """Every port always has a beat ready; the sink is always ready (see the module
    docstring). Runs until ``stop`` is set."""

    def __init__(self, dut, shape, per_port):
        self.dut, self.shape = dut, shape
        # per_port[p] = [(tenant, [beats of frame 0], [beats of frame 1], ...)]
        self.per_port = per_port
        self.stop = False

    async def run(self):
        dut, shape = self.dut, self.shape
        ports = range(shape.ports)
        s = [(getattr(dut, f"s_axis{p}__tdata"), getattr(dut, f"s_axis{p}__tkeep"),
              getattr(dut, f"s_axis{p}__tlast"), getattr(dut, f"s_axis{p}__tvalid"),
              getattr(dut, f"s_axis{p}__tready")) for p in ports]
        offered = [[0] * len(self.per_port[p]) for p in ports]
        next_frame = [[0] * len(self.per_port[p]) for p in ports]
        current = [None for _ in ports]   # (beats, index)
        dut.m_axis__tready.value = 1
        edge = RisingEdge(dut.clk)
        while not self.stop:
            await edge
            for p in ports:
                tdata, tkeep, tlast, tvalid, tready = s[p]
                if current[p] is not None and tready.value:
                    beats, i = current[p]
                    i += 1
                    current[p] = (beats, i) if i < len(beats) else None
                if current[p] is None and self.per_port[p]:
                    k = min(range(len(offered[p])), key=offered[p].__getitem__)
                    _, frames = self.per_port[p][k]
                    beats = frames[next_frame[p][k] % len(frames)]
                    next_frame[p][k] += 1
                    offered[p][k] += len(beats)
                    current[p] = (beats, 0)
                if current[p] is not None:
                    beats, i = current[p]
                    data, keep, last = beats[i][:3]
                    tdata.value, tkeep.value, tlast.value = data, keep, last
                    tvalid.value = 1
                else:
                    tvalid.value = 0
        for p in ports:
            s[p][3].value = 0


def _pool(shape, tenants, header_bytes, count=64):
    """Per port, ``(tenant id, [frame beats...])`` for the tenants on it."""
    per_port = [[] for _ in range(shape.ports)]
    for t in tenants:
        frames = tenant_frames(t["chain"], t["size"], t["keys"][0], count, 11 + t["id"],
                               header_bytes, delivered_only=t.get("delivered_only", False),
                               distinct_flows=t.get("distinct_flows", False))
        per_port[t["port"]].append(
            (t["id"], [frame_to_beats(f, shape.data_width) for f in frames]))
    return per_port


def _tenants(scenario):
    out = []
    for t in scenario["tenants"]:
        t = dict(t)
        t["chain"] = load_chain(t["chain"])
        t.setdefault("keys", [100 + t["id"]])
        out.append(t)
    return out


async def _usage(nic, tenants):
    """Per tenant: beats dispatched, region cycles, packets and bytes delivered."""
    out = {}
    for t in tenants:
        i = t["id"]
        out[i] = {
            "dispatched_beats": await nic.read("scheduler", f"t{i}_dispatched_beats"),
            "region_cycles": await nic.read("store", f"t{i}_region_cycles"),
            "delivered": await nic.read("egress", f"t{i}_delivered"),
            "delivered_bytes": await nic.read("egress", f"t{i}_delivered_bytes"),
            "queue_drops": await nic.read("scheduler", f"t{i}_queue_drops"),
        }
    out["cycle"] = nic.dut_cycles()
    return out


@cocotb.test()
async def shares(dut):
    """All tenants backlogged under one policy: per-tenant use of each resource over a window
    after a warm-up."""
    design, shape = _design()
    scenario = bench_scenario()
    tenants = _tenants(scenario)
    await start_and_reset(dut)
    nic = Nic(dut, design, shape)
    for r, chain in scenario.get("loads", {}).items():
        await nic.load(int(r), chain)
    await nic.deploy(tenants, scenario["policy"])
    source = SaturatingSource(dut, shape, _pool(shape, tenants, shape.header_bytes))
    task = cocotb.start_soon(source.run())
    await ClockCycles(dut.clk, scenario.get("warmup", 5000))
    costs = {}
    if scenario.get("calibrate", True):
        costs = await _calibrate(nic, tenants, scenario.get("warmup", 5000))
    before = await _usage(nic, tenants)
    await ClockCycles(dut.clk, scenario.get("window", 20000))
    after = await _usage(nic, tenants)
    source.stop = True
    await task
    cycles = after["cycle"] - before["cycle"]
    usage = {}
    for t in tenants:
        i = t["id"]
        d = {k: after[i][k] - before[i][k] for k in before[i]}
        beats_per_packet = -(-t["size"] // shape.beat_bytes)
        usage[i] = {
            "name": t["name"], "weight": t.get("weight", 1),
            "ingress": d["dispatched_beats"] / cycles,
            "region": d["region_cycles"] / (cycles * shape.regions),
            "egress": d["delivered"] * beats_per_packet / cycles,
            "delivered_packets": d["delivered"], "queue_drops": d["queue_drops"],
        }
    _write_result({"policy": scenario["policy"], "cycles": cycles, "usage": usage,
                   "region_costs": costs})


async def _calibrate(nic, tenants, cycles):
    """The control plane's cost calibration: the region cycles a beat really takes, measured
    from the store's occupancy counters over ``cycles`` under the current load, written to the
    scheduler's per-region cost (8.8 fixed point). A chain's declared cost is an upper bound
    (ChaCha20 spends 5 cycles a payload beat at 512 bits but 1 on header beats and skipped
    packets); DRF must charge what tenants really use."""
    first = await _usage(nic, tenants)
    from cocotb.triggers import ClockCycles as _Cycles
    await _Cycles(nic.dut.clk, cycles)
    second = await _usage(nic, tenants)
    costs = {}
    for t in tenants:
        i = t["id"]
        beats = second[i]["dispatched_beats"] - first[i]["dispatched_beats"]
        region = second[i]["region_cycles"] - first[i]["region_cycles"]
        if beats <= 0 or len(t["regions"]) != 1:
            continue
        cost = max(1.0, region / beats)
        for r in t["regions"]:
            costs[r] = round(cost, 3)
            await nic.write("scheduler", f"r{r}_cost", min(0xFFFF, round(cost * 256)))
    await _Cycles(nic.dut.clk, cycles)
    return costs


@cocotb.test()
async def scaling(dut):
    """One tenant on a region-bound chain with 1..k instances: delivered beats a cycle for each
    count (with the entries in turn; with the auto-scaler's loop running, once it rebalanced;
    after the control plane's rebalance), then the scale-out reaction of the control loop."""
    design, shape = _design()
    scenario = bench_scenario()
    tenants = _tenants(scenario)
    tenant = tenants[0]
    await start_and_reset(dut)
    nic = Nic(dut, design, shape)
    chain = tenant["chain"].name
    reconfig = {}
    for r in scenario["instances"]:
        reconfig[r] = await nic.load(r, chain)
    points = []
    scaler = None
    for k in range(1, len(scenario["instances"]) + 1):
        tenant["regions"] = scenario["instances"][:k]
        await nic.deploy([tenant], scenario["policy"])
        if k == 1:
            pool, hashes = _pool_with_hashes(shape, tenant, scenario.get("flows", 512))
        source = SaturatingSource(dut, shape, pool)
        task = cocotb.start_soon(source.run())
        pool_beats = sum(len(f) for f in pool[tenant["port"]][0][1])
        if k == 1 and scenario.get("auto_passes"):
            scaler = _scaler(shape, round(scenario["auto_passes"] * pool_beats))
        warmup, window = scenario.get("warmup", 4000), scenario.get("window", 12000)
        if k == 1:
            # The baseline every point divides by: long enough that one packet more or less
            # (about 120 cycles of a 1,500-byte packet here) moves it by well under 1%.
            window = scenario.get("window_one", window)
        if k > 1 and scenario.get("pool_passes"):
            # Steady state, not a short window's luck: the warmup lets the pool go round once
            # at the ideal k-fold rate, so the regions' input buffers hold their steady
            # backlog, not the slack they start with (the window is counted in passes, see
            # measure()).
            warmup = max(warmup, round(pool_beats / (k * points[0]["beats_per_cycle"])))
        await ClockCycles(dut.clk, warmup)
        size = design["config"]["table_size"]
        i = tenant["id"]
        per_packet = -(-tenant["size"] // shape.beat_bytes)

        async def measure(cycles, loop=None):
            """Delivered beats and cycles over a window: ``cycles`` long, or with passes over
            the pool, until that many passes of beats were dispatched (so every flow counts
            equally often: the instances' loads are the pool's split, and so are the
            entries' loads a rebalance reads). With ``loop`` (an :class:`_AutoScaling`), its
            samples and decisions go on throughout."""
            async def wait(cycles):
                await (loop.run_for(cycles) if loop else ClockCycles(dut.clk, cycles))
            before = await _usage(nic, [tenant])
            if k > 1 and scenario.get("pool_passes"):
                start = before[i]["dispatched_beats"]
                target = scenario["pool_passes"] * pool_beats
                while await nic.read("scheduler", f"t{i}_dispatched_beats") - start < target:
                    await wait(500)
            else:
                await wait(cycles)
            after = await _usage(nic, [tenant])
            return (after[i]["delivered"] - before[i]["delivered"]) * per_packet, \
                after["cycle"] - before["cycle"]
        loads_before = await read_loads(_reader(nic), _writer(nic), i, size)
        beats, cycles = await measure(window)
        point = {"instances": k, "beats_per_cycle": beats / cycles, "window": cycles,
                 "hash_bound": _hash_bound(hashes, k, size)}
        loads_after = await read_loads(_reader(nic), _writer(nic), i, size)
        if k > 1 and scaler is not None:
            # The auto-scaler alone, from the entries in turn (the table this scale-out to k
            # instances dealt): its own loop samples the counters, decides when and how to
            # rebalance, and commits; the bench only measures once it did.
            loop = _AutoScaling(nic, scaler, tenant, size, scenario.get("auto_period", 5000), k)
            await loop.start()
            limit = nic.dut_cycles() + 8 * round(pool_beats / points[0]["beats_per_cycle"] / k)
            while not loop.rebalances and nic.dut_cycles() < limit:
                await loop.run_for(500)
            await loop.run_for(warmup // 2)
            beats, cycles = await measure(window, loop)
            point["auto_beats_per_cycle"] = beats / cycles
            point["auto_window"] = cycles
            point["auto_rebalances"] = loop.rebalances
            point["auto_bound"] = _table_bound(hashes, loop.table, size)
        if k > 1 and scenario.get("rebalance"):
            # The control plane's load-aware table (sw/driver/rebalance.py), from the loads
            # the entries carried in the in-turn window, then the same measurement.
            table = balanced_table(loads_before, loads_after, tenant["regions"])
            await nic.set_table(i, tenant["regions"], table)
            await ClockCycles(dut.clk, warmup // 2)
            beats, cycles = await measure(window)
            point["rebalanced_beats_per_cycle"] = beats / cycles
            point["rebalanced_window"] = cycles
            point["rebalanced_bound"] = _table_bound(hashes, table, size)
        points.append(point)
        source.stop = True
        await task
        await ClockCycles(dut.clk, 3000)   # drain before the table changes
    reaction = await _scale_out_reaction(dut, nic, shape, tenant, scenario)
    _write_result({"points": points, "reconfig_cycles": reconfig, "reaction": reaction})


def _scaler(shape, window_beats):
    """The control loop's policy: scaling as in :func:`_scale_out_reaction`, rebalancing over
    measuring windows of ``window_beats`` (the bench gives a whole pass over the pool, so every
    flow counts about once) with the default thresholds."""
    from supernic.driver.autoscale import AutoScaleConfig, AutoScaler
    return AutoScaler(AutoScaleConfig(high_occupancy=4 * shape.header_beats, low_throughput=1,
                                      up_samples=2, rebalance_beats=window_beats))


class _AutoScaling:
    """The auto-scaler's control loop on the bench NIC for a tenant on its ``share`` regions
    (so it never scales out here): every ``period`` cycles one
    :class:`~supernic.driver.autoscale.ChainSample` (the tenant's counters, each flow-table
    entry's load, the table in effect) into :meth:`AutoScaler.step`; a ``Rebalance`` is
    committed through :meth:`Nic.set_table`, the commit that holds the tenant until its
    packets in flight have left, so no flow reorders."""

    def __init__(self, nic, scaler, tenant, table_size, period, share):
        self.nic, self.scaler, self.tenant = nic, scaler, tenant
        self.table_size, self.period, self.share = table_size, period, share
        regions = tenant["regions"]
        self.table = [regions[e % len(regions)] for e in range(table_size)]
        self.rebalances = []
        self.started = None

    async def _counters(self):
        i, nic = self.tenant["id"], self.nic
        return {"dispatched": await nic.read("scheduler", f"t{i}_dispatched_beats"),
                "drops": await nic.read("scheduler", f"t{i}_queue_drops"),
                "entries": await read_loads(_reader(nic), _writer(nic), i, self.table_size)}

    async def start(self):
        self.last = await self._counters()
        self.started = self.next = self.nic.dut_cycles()
        self.next += self.period

    async def run_for(self, cycles):
        """Let ``cycles`` pass, sampling (and acting) whenever a period is up."""
        from supernic.driver.autoscale import ChainSample, Rebalance
        from supernic.driver.rebalance import entry_loads
        nic, i = self.nic, self.tenant["id"]
        end = nic.dut_cycles() + cycles
        while nic.dut_cycles() < end:
            await ClockCycles(nic.dut.clk, max(1, min(end, self.next) - nic.dut_cycles()))
            if nic.dut_cycles() < self.next:
                continue
            occupancy = await nic.read("scheduler", f"t{i}_backlog_beats")
            now = await self._counters()
            sample = ChainSample(i, self.tenant["chain"].name, occupancy,
                                 now["dispatched"] - self.last["dispatched"],
                                 now["drops"] - self.last["drops"],
                                 tuple(self.tenant["regions"]),
                                 tuple(entry_loads(self.last["entries"], now["entries"])),
                                 tuple(self.table))
            self.last = now
            self.next = nic.dut_cycles() + self.period
            for decision in self.scaler.step([sample], 0, {i: self.share}):
                if not isinstance(decision, Rebalance):
                    raise AssertionError(f"the tenant holds its share, yet {decision}")
                await nic.set_table(i, self.tenant["regions"], list(decision.table))
                self.table = list(decision.table)
                self.rebalances.append({
                    "reason": decision.reason, "cycles": nic.dut_cycles() - self.started,
                    "imbalance": round(decision.imbalance, 4),
                    "expected": round(decision.expected, 4)})


def _reader(nic):
    return lambda reg: nic.read("scheduler", reg)


def _writer(nic):
    return lambda reg, value: nic.write("scheduler", reg, value)


def _pool_with_hashes(shape, tenant, count):
    """:func:`_pool` for one tenant, and the flow hash of each of its frames."""
    frames = tenant_frames(tenant["chain"], tenant["size"], tenant["keys"][0], count,
                           11 + tenant["id"], shape.header_bytes,
                           delivered_only=tenant.get("delivered_only", False),
                           distinct_flows=tenant.get("distinct_flows", False))
    pool = [[] for _ in range(shape.ports)]
    pool[tenant["port"]].append((tenant["id"], [frame_to_beats(f, shape.data_width)
                                                for f in frames]))
    parser = ParserModel(shape.header_bytes)
    return pool, [parser.parse(f)["flow_hash"] for f in frames]


def _hash_bound(hashes, k, table_size):
    """The efficiency flow-hash dispatch allows ``k`` instances on these flows, each sent
    equally often: bucket ``hash mod table_size`` goes to instance ``bucket mod k`` (the
    control plane's table), and the busiest instance sets the pace."""
    return _table_bound(hashes, [i % k for i in range(table_size)], table_size)


def _table_bound(hashes, table, table_size):
    """As :func:`_hash_bound`, for any table (entry -> instance or region)."""
    counts = {}
    for h in hashes:
        r = table[h % table_size]
        counts[r] = counts.get(r, 0) + 1
    k = len(set(table))
    return (len(hashes) / k) / max(counts.values())


async def _scale_out_reaction(dut, nic, shape, tenant, scenario):
    """One instance under overload; the control loop (:class:`AutoScaler`, sampling the
    tenant's counters every ``period`` cycles) decides to scale out; the driver loads the
    chain into a free region (it holds another personality, so this is a real
    reconfiguration), waits for it to come online, points half the tenant's flow buckets at it
    and commits. Cycles from the overload's start to each step."""
    from supernic.driver.autoscale import AutoScaleConfig, AutoScaler, ChainSample, ScaleOut
    first, spare = scenario["instances"][0], scenario["instances"][1]
    chain = tenant["chain"].name
    other = next(p["name"] for p in nic.design["regions"][spare] if p["name"] != chain)
    await nic.load(spare, other)
    tenant["regions"] = [first]
    await nic.deploy([tenant], scenario["policy"])
    period = scenario.get("period", 500)
    scaler = AutoScaler(AutoScaleConfig(high_occupancy=4 * shape.header_beats,
                                        low_throughput=1, up_samples=2))
    source = SaturatingSource(dut, shape, _pool(shape, [tenant], shape.header_bytes, 128))
    task = cocotb.start_soon(source.run())
    start = nic.dut_cycles()
    i = tenant["id"]
    last = {"dispatched": 0, "drops": 0}
    steps = {}
    while "decided" not in steps:
        await ClockCycles(dut.clk, period)
        dispatched = await nic.read("scheduler", f"t{i}_dispatched_beats")
        drops = await nic.read("scheduler", f"t{i}_queue_drops")
        sample = ChainSample(i, chain, await nic.read("scheduler", f"t{i}_backlog_beats"),
                             dispatched - last["dispatched"], drops - last["drops"], (first,))
        last = {"dispatched": dispatched, "drops": drops}
        if any(isinstance(d, ScaleOut) for d in scaler.step([sample], 1, {i: 2})):
            steps["decided"] = nic.dut_cycles() - start
        if nic.dut_cycles() - start > 200_000:
            break
    before = await nic.read(f"region{spare}", "packets_in")
    await nic.configure_instance(spare, tenant["chain"])
    steps["configured"] = nic.dut_cycles() - start
    await nic.load(spare, chain)
    steps["online"] = nic.dut_cycles() - start
    await nic.write("scheduler", f"r{spare}_cost",
                    round(tenant["chain"].cycles_per_beat(shape.data_width) * 256))
    await nic.set_table(i, [first, spare])
    steps["committed"] = nic.dut_cycles() - start
    while await nic.read(f"region{spare}", "packets_in") == before:
        await ClockCycles(dut.clk, 8)
        if nic.dut_cycles() - start > 400_000:
            break
    steps["first_packet"] = nic.dut_cycles() - start
    source.stop = True
    await task
    return {"sample_period_cycles": period, **steps,
            "reconfig_cycles": await nic.read(f"region{spare}", "reconfig_cycles")}


@cocotb.test()
async def latency(dut):
    """Cycles from a packet's first beat in to its first beat out through an idle NIC."""
    design, shape = _design()
    scenario = bench_scenario()
    tenants = _tenants(scenario)
    await start_and_reset(dut)
    nic = Nic(dut, design, shape)
    for r, chain in scenario.get("loads", {}).items():
        await nic.load(int(r), chain)
    await nic.deploy(tenants, scenario["policy"])
    t = tenants[0]
    frames = tenant_frames(t["chain"], t["size"], t["keys"][0], 16, 5, shape.header_bytes,
                           delivered_only=True)
    p = t["port"]
    tdata, tkeep, tlast = (getattr(dut, f"s_axis{p}__{n}") for n in ("tdata", "tkeep", "tlast"))
    tvalid, tready = getattr(dut, f"s_axis{p}__tvalid"), getattr(dut, f"s_axis{p}__tready")
    dut.m_axis__tready.value = 1
    samples = []
    for frame in frames:
        beats = frame_to_beats(frame, shape.data_width)
        start = None
        i = 0
        cycle = 0
        out = None
        tvalid.value = 1
        tdata.value, tkeep.value, tlast.value = beats[0][:3]
        while out is None:
            await RisingEdge(dut.clk)
            cycle += 1
            if i < len(beats) and tready.value:
                if i == 0:
                    start = cycle
                i += 1
                if i < len(beats):
                    tdata.value, tkeep.value, tlast.value = beats[i][:3]
                else:
                    tvalid.value = 0
            if dut.m_axis__tvalid.value and out is None:
                out = cycle
            if cycle > 20000:
                raise TimeoutError("no packet came out")
        samples.append(out - start)
        await ClockCycles(dut.clk, 200)
    _write_result({"samples": samples, "size": t["size"]})
