"""cocotb testbench: a single-tenant design (parser, chain or DAG, drop stage; hw/chain/top.py)
against the chain model.

The design description (``SNIC_REGMAP``) names the chain specification; each node's
configuration is loaded over AXI4-Lite into its register block. Frames come from
:func:`~supernic.sim.chain_model.chain_traffic`. The model runs packet by packet as outputs
arrive: a packet's ingress timestamp is the cycle its first beat went in, read against the
parser's own cycle counter once at the start, so timed NTs (token buckets) are modelled
exactly; every delivered packet's timestamp is checked against it. Every delivered packet must
equal the model's (bytes, first- and last-beat metadata), in order; every packet the model drops
must be missing and counted; all NT counters, the chain's egress counters and the models'
read-back checks must agree.
"""

import collections
import copy
import json
import os
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from supernic.driver.discovery import check_supported, discover, read_register, write_register
from supernic.desc.chain import load_chain
from supernic.desc.meta import TAIL_FLAGS
from supernic.hw.parser.meta import meta_layout
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.bfm import StreamHarness, frame_to_beats, pattern, start_and_reset
from supernic.sim.chain_model import ChainModel, chain_traffic
from supernic.sim.layout_codec import decode, diff as _diff
from supernic.sim.parser_model import ParserModel
from supernic.sim.tb.nt_tb import BlockAccess
from supernic.sim.tb.bench_env import env as _env, write_result as _write_result

MAX_REPORTED = 5


@cocotb.test()
async def random_traffic(dut):
    with open(os.environ["SNIC_REGMAP"]) as f:
        design = json.load(f)
    cfg = design["config"]
    width, hbytes = cfg["data_width"], cfg["header_bytes"]
    spec = load_chain(design["chain"])
    seed = _env("seed", 1, int)
    n = _env("packets", 2000, int)
    rng = random.Random(seed)
    regmap = design["registers"]

    await start_and_reset(dut)
    bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)
    blocks = await discover(bus)
    check_supported(blocks)
    model = ChainModel(spec, width, hbytes)
    for node in spec.node_list():
        for reg, value in node.config.register_writes(node.params):
            await write_register(bus, regmap, node.name, reg, value)

    frames = chain_traffic(spec, n, seed, _env("malformed", 0.1, float),
                           size_dist=_env("sizes", "light"), header_bytes=hbytes)
    beats = [b for f in frames for b in frame_to_beats(f, width)]
    parser = ParserModel(hbytes)
    layout = meta_layout(hbytes)
    harness = StreamHarness(dut, width)
    await RisingEdge(dut.clk)
    # Read just after an edge, a signal shows the value that edge sampled; the harness counts
    # edges from here, so the parser stamps packet k with now0 + its accept cycle.
    now0 = int(dut.parser.now.value)
    pending = collections.deque(enumerate(frames))
    stats = collections.Counter()
    reports = []

    def report(text):
        stats["mismatches"] += 1
        if len(reports) < MAX_REPORTED:
            reports.append(text)

    def on_packet(got, first_user, last_user, nbeats):
        last = decode(layout, last_user)
        while pending:
            index, frame = pending.popleft()
            meta = parser.parse(frame)
            meta["ts"] = (now0 + harness.packet_accept_cycles[index]) % 2 ** 32
            want_frame, want_meta = model.process(frame, meta)
            if model.deliver(want_frame, want_meta):
                break
            stats["model_dropped"] += 1
        else:
            report("a packet came out after the model had delivered every packet")
            return
        stats["delivered"] += 1
        problems = []
        if got != want_frame:
            problems.append(f"data differs ({len(got)} bytes out, model {len(want_frame)})")
        if last != want_meta:
            problems.append(f"last-beat metadata differs: {_diff(want_meta, last)}")
        if nbeats > 1:
            first, first_want = decode(layout, first_user), copy.deepcopy(want_meta)
            for f in TAIL_FLAGS:
                first_want["flags"][f] = 0
            if first != first_want:
                problems.append(f"first-beat metadata differs: {_diff(first_want, first)}")
        stats["changed"] += int(got != frame)
        if problems:
            report(f"packet {index} ({len(frame)} bytes, {frame[:64].hex()}): "
                   + "; ".join(problems))

    # How many packets come out is only known as the model runs: stop once every frame has
    # gone in and the output has been quiet for 2,000 cycles (far above any NT's latency).
    def drained():
        return (len(harness.packet_accept_cycles) == len(frames)
                and harness.cycles - (harness.last_out_cycle or 0) > 2000)

    await harness.run(beats, len(frames), pattern(_env("idle", "random"), rng),
                      pattern(_env("backpressure", "random"), rng),
                      max_cycles=40 * len(beats) + 20_000, on_packet=on_packet, stop=drained)
    while pending:   # trailing packets the model drops
        index, frame = pending.popleft()
        meta = parser.parse(frame)
        meta["ts"] = (now0 + harness.packet_accept_cycles[index]) % 2 ** 32
        want_frame, want_meta = model.process(frame, meta)
        if model.deliver(want_frame, want_meta):
            report(f"packet {index} never came out")
        else:
            stats["model_dropped"] += 1
    await ClockCycles(dut.clk, 8)

    problems = []
    counters = {"chain": {}, "nodes": {}}
    for name in ("delivered", "dropped", "dropped_bytes"):
        counters["chain"][name] = await read_register(bus, regmap, "chain", name)
    if counters["chain"] != model.stats:
        problems.append(f"chain counters: hw {counters['chain']} model {model.stats}")
    for node in spec.node_list():
        m = model.models[node.name]
        want = m.counters()
        got = {k: await read_register(bus, regmap, node.name, k) for k in want}
        counters["nodes"][node.name] = got
        if got != want:
            problems.append(f"node {node.name}: hw {got} model {want}")
        if hasattr(m, "verify_hardware"):
            problems += [f"node {node.name}: {p}"
                         for p in await m.verify_hardware(BlockAccess(bus, regmap, node.name))]
    result = {
        "chain": spec.name, "width": width, "packets_in": len(frames),
        "delivered": stats["delivered"], "dropped": stats["model_dropped"],
        "changed": stats["changed"], "mismatches": stats["mismatches"],
        "cycles": harness.cycles, "beats": len(beats), "counters": counters,
        "problems": problems[:MAX_REPORTED],
    }
    _write_result(result)
    assert not reports, "\n".join(reports)
    assert not problems, "\n".join(problems[:MAX_REPORTED])
    assert stats["delivered"] + stats["model_dropped"] == len(frames)


@cocotb.test()
async def saturation(dut):
    """Back-to-back frames of one size aimed at the chain's rules, source never idle, sink
    always ready: input beats per cycle (dropped packets still cross the chain) and the cycles
    from the first beat in to the first beat out."""
    with open(os.environ["SNIC_REGMAP"]) as f:
        design = json.load(f)
    width = design["config"]["data_width"]
    spec = load_chain(design["chain"])
    size = _env("size", 64, int)
    n = _env("packets", 500, int)
    await start_and_reset(dut)
    bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)
    for node in spec.node_list():
        for reg, value in node.config.register_writes(node.params):
            await write_register(bus, design["registers"], node.name, reg, value)
    frames, seed = [], size
    while len(frames) < n:
        batch = chain_traffic(spec, 4 * n, seed, malformed=0.0, size_dist=size)
        frames += [f for f in batch if len(f) == size][:n - len(frames)]
        seed += 1
    beats = [b for f in frames for b in frame_to_beats(f, width)]
    harness = StreamHarness(dut, width)

    def drained():
        return (harness.last_in_cycle is not None and harness.first_in_cycle is not None
                and len(harness.packet_accept_cycles) == n
                and harness.cycles - max(harness.last_out_cycle or 0, harness.last_in_cycle)
                > 500)

    out = []
    await harness.run(beats, n, pattern("none", None), pattern("none", None),
                      max_cycles=100 * len(beats) + 10_000,
                      on_packet=lambda data, *_: out.append(len(data)), stop=drained)
    in_window = harness.last_in_cycle - harness.first_in_cycle + 1
    result = {
        "chain": spec.name, "width": width, "size": size, "packets": n,
        "beats_in": len(beats), "delivered": len(out),
        "in_beats_per_cycle": len(beats) / in_window,
        "latency_cycles": (harness.first_out_cycle - harness.first_in_cycle
                           if harness.first_out_cycle is not None else None),
    }
    _write_result(result)
