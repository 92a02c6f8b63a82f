"""cocotb testbench: the tenant classifier in its shell (hw/nic/classifier.py ClassifierShell)
against :class:`~supernic.sim.nic.classifier.ClassifierModel`.

The design description (``SNIC_REGMAP``) gives the NIC shape, the classifier's port, its table
size and the register map; a JSON summary goes to ``SNIC_RESULT``.

``random_traffic``: random and malformed frames, many with VLAN tags or VXLAN headers whose
keys repeat (flows) and many whose keys are fresh; a random table cut from that traffic
(overlapping entries, masks, port sets, protocols, port ranges) loaded over AXI4-Lite with the
default action of ``default`` (``drop`` or ``tenant``). The metadata of every frame comes
from the parser model (tail flags on the last beat only, as the parser gives them). Every
packet that comes out must equal the model's: bytes, ``hdr`` unchanged on its first and last
beat, and the tag (tenant, port, seq, beats 0, region 0) on both. Then the counters and every
slot's hit counter must agree, and packets in must equal packets out plus dropped.

The bench stops when the expected packets are out, so the last frame is one the table forwards:
once it is out, every dropped packet before it has been through the classifier too.

``saturation``: back-to-back frames of one size, source never idle, sink always ready; beats
per cycle in and out, and the cycles from the first beat in to the first beat out.
"""

import collections
import copy
import json
import os
import random
from dataclasses import asdict

import cocotb
from cocotb.triggers import ClockCycles

from supernic.driver.discovery import check_supported, discover, read_register, write_register
from supernic.hw.nic.classifier import ClassifierShell, classifier_register_map
from supernic.desc.nic.classifier import ClassifierConfig, DefaultAction, classifier_block
from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.layout import nic_layout
from supernic.desc.meta import TAIL_FLAGS
from supernic.hw.parser.meta import meta_layout
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.bfm import StreamHarness, pattern, start_and_reset
from supernic.sim.layout_codec import decode, diff as _diff
from supernic.sim.nic.classifier import ClassifierModel
from supernic.sim.nt.base import exact_size_frames, light_frames
from supernic.sim.parser_model import ParserModel, is_error
from supernic.sim.tb.nt_tb import input_beats
from supernic.desc.packet_kinds import KINDS
from supernic.sim.tb.bench_env import env as _env, write_result as _write_result

__all__ = ["classifier_simulator", "classifier_traffic"]

MAX_REPORTED = 5
BLOCK = "classifier"


def classifier_simulator(shape: NicShape, port=0, entries=16, progress=print):
    """The classifier alone in :class:`ClassifierShell`, built (and cached) for cocotb."""
    from supernic.sim.build import build_simulator, generated_component

    name = (f"nic_classifier_w{shape.data_width}_t{shape.tenants}_p{shape.ports}"
            f"_port{port}_e{entries}")
    description = {
        "config": {"data_width": shape.data_width, "header_bytes": shape.header_bytes},
        "shape": asdict(shape), "port": port, "entries": entries,
        "registers": classifier_register_map(shape, entries).to_json(),
    }
    paths = generated_component(name, description,
                                lambda: ClassifierShell(shape, port, entries), description,
                                progress=progress)
    return build_simulator(paths["verilog"], name, paths["regmap"], progress=progress)


def classifier_traffic(rng, n, malformed):
    """``n`` frames: two thirds from 12 repeating flows (their VLAN IDs and VNIs repeat, so
    table entries cut from them hit), a third with fresh keys; VXLAN weighted up to a
    quarter."""
    kinds = KINDS + ("vxlan", "vxlan")
    repeating = 2 * n // 3
    frames = light_frames(rng, repeating, malformed, kinds=kinds, flows=12)
    frames += light_frames(rng, n - repeating, malformed, kinds=kinds)
    rng.shuffle(frames)
    return frames


async def _setup(dut):
    with open(os.environ["SNIC_REGMAP"]) as f:
        design = json.load(f)
    shape = NicShape(**design["shape"])
    await start_and_reset(dut)
    bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)
    blocks = await discover(bus)
    check_supported(blocks)
    return design, shape, bus


async def _program(bus, design, shape, config):
    block = classifier_block(BLOCK, shape, design["entries"])
    for reg, value in config.register_writes(block):
        await write_register(bus, design["registers"], BLOCK, reg, value)


def _forwarded(config, meta, port):
    return (config.default_action == DefaultAction.TENANT
            or any(e.matches(meta, port) for e in config.entries))


def _prepare(frames, config, port, hbytes, width, rng):
    """Input beats and the expected outputs ``(frame, meta, tag)``; a forwarded frame is
    appended last (see the module docstring)."""
    parser = ParserModel(hbytes)
    layout = meta_layout(hbytes)
    metas = [parser.parse(f) for f in frames]
    tail = next((i for i, meta in enumerate(metas) if _forwarded(config, meta, port)), None)
    if tail is not None:
        frames = [*frames, frames[tail]]
        metas = [*metas, copy.deepcopy(metas[tail])]
    model = ClassifierModel(config, port)
    beats, expected = [], collections.deque()
    ts = rng.randrange(2 ** 32)
    for frame, meta in zip(frames, metas):
        ts = (ts + rng.randint(1, 400)) % 2 ** 32
        meta["ts"] = ts
        # hdr must pass unchanged whatever it holds, drop and mark included.
        meta["drop"] = int(rng.random() < 0.02)
        meta["mark"] = int(rng.random() < 0.02)
        beats += input_beats(frame, meta, layout, width)
        tag = model.tag(meta)
        if tag is not None:
            expected.append((frame, meta, tag))
    return model, metas, beats, expected


@cocotb.test()
async def random_traffic(dut):
    design, shape, bus = await _setup(dut)
    width, hbytes, port = shape.data_width, shape.header_bytes, design["port"]
    entries = design["entries"]
    seed = _env("seed", 1, int)
    n = _env("packets", 2000, int)
    malformed = _env("malformed", 0.1, float)
    default = _env("default", "drop")
    rng = random.Random(seed)

    frames = classifier_traffic(random.Random(seed ^ 0x7E4A), n, malformed)
    parser = ParserModel(hbytes)
    sample = [parser.parse(f) for f in frames[:300]]
    config = ClassifierConfig.random(random.Random(seed ^ 0xC1A5), shape, entries, sample)
    config.default_action = DefaultAction.DROP if default == "drop" else DefaultAction.TENANT
    await _program(bus, design, shape, config)
    model, metas, beats, expected = _prepare(frames, config, port, hbytes, width, rng)

    layout = nic_layout(shape)
    stats = collections.Counter()
    reports = []

    def on_packet(got, first_user, last_user, nbeats):
        frame, meta, tag = expected.popleft()
        problems = []
        if got != frame:
            at = next((i for i, (a, b) in enumerate(zip(got, frame)) if a != b),
                      min(len(got), len(frame)))
            problems.append(f"data differs at byte {at} ({len(got)} bytes out, "
                            f"{len(frame)} in)")
        last = decode(layout, last_user)
        if last["hdr"] != meta:
            problems.append(f"last-beat hdr differs: {_diff(meta, last['hdr'])}")
        if last["tag"] != tag:
            problems.append(f"last-beat tag differs: {_diff(tag, last['tag'])}")
        first = decode(layout, first_user)
        first_hdr = copy.deepcopy(meta)
        if nbeats > 1:
            for f in TAIL_FLAGS:
                first_hdr["flags"][f] = 0
        if first["hdr"] != first_hdr:
            problems.append(f"first-beat hdr differs: {_diff(first_hdr, first['hdr'])}")
        if first["tag"] != tag:
            problems.append(f"first-beat tag differs: {_diff(tag, first['tag'])}")
        stats["packets_out"] += 1
        stats[f"tenant{tag['tenant']}"] += 1
        if problems:
            stats["mismatches"] += 1
            if len(reports) < MAX_REPORTED:
                reports.append(f"packet seq {tag['seq']} ({len(frame)} bytes, "
                               f"{frame[:64].hex()}): " + "; ".join(problems))

    want_out = len(expected)
    harness = StreamHarness(dut, width)
    await harness.run(beats, want_out, pattern(_env("idle", "random"), rng),
                      pattern(_env("backpressure", "random"), rng),
                      max_cycles=40 * len(beats) + 20_000, on_packet=on_packet)
    await ClockCycles(dut.clk, 8)
    regmap = design["registers"]
    hw_counters = {name: await read_register(bus, regmap, BLOCK, name)
                   for name in model.counters()}
    hw_hits, model_hits = [], model.hits + [0] * (entries - len(model.hits))
    for index in range(entries):
        await write_register(bus, regmap, BLOCK, "hit_index", index)
        hw_hits.append(await read_register(bus, regmap, BLOCK, "hit_count"))
    # What the traffic exercised: matches by key kind, and malformed packets classified.
    kinds = collections.Counter()
    for meta in metas:
        matching = sum(e.matches(meta, port) for e in config.entries)
        kinds[f"{'hit' if matching else 'miss'}_kind{meta['tenant_kind']}"] += 1
        kinds["overlapping"] += matching > 1
        kinds["errors_classified"] += bool(matching) and is_error(meta)
    result = {
        "width": width, "default": default, "entries_used": len(config.entries),
        "packets_in": model.counters()["packets"], "packets_out": stats["packets_out"],
        "mismatches": stats["mismatches"], "cycles": harness.cycles, "beats": len(beats),
        "counters": hw_counters, "model_counters": model.counters(),
        "hits": hw_hits, "model_hits": model_hits, "kinds": dict(kinds),
        "tenants_out": {k: v for k, v in stats.items() if k.startswith("tenant")},
    }
    _write_result(result)
    assert not reports, "\n".join(reports)
    assert stats["packets_out"] == want_out
    assert hw_counters == model.counters(), f"counters: hw {hw_counters} model {model.counters()}"
    assert hw_counters["packets"] == stats["packets_out"] + hw_counters["dropped"]
    assert hw_hits == model_hits, f"hits: hw {hw_hits} model {model_hits}"


@cocotb.test()
async def saturation(dut):
    """Back-to-back frames of ``size`` bytes, source never idle, sink always ready."""
    design, shape, bus = await _setup(dut)
    width, hbytes, port = shape.data_width, shape.header_bytes, design["port"]
    size = _env("size", 64, int)
    n = _env("packets", 300, int)
    default = _env("default", "tenant")
    rng = random.Random(size)
    frames = exact_size_frames(rng, n, size, kinds=("ipv4_udp", "vxlan", "ipv6_tcp"),
                               flows=16)
    parser = ParserModel(hbytes)
    config = ClassifierConfig.random(rng, shape, design["entries"],
                                     [parser.parse(f) for f in frames[:50]])
    config.default_action = DefaultAction.DROP if default == "drop" else DefaultAction.TENANT
    await _program(bus, design, shape, config)
    model, _, beats, expected = _prepare(frames, config, port, hbytes, width, rng)
    out_beats = []
    harness = StreamHarness(dut, width)
    await harness.run(beats, len(expected), pattern("none", None), pattern("none", None),
                      max_cycles=100 * len(beats) + 10_000,
                      on_packet=lambda data, f, l, nb: out_beats.append(nb))
    in_window = harness.last_in_cycle - harness.first_in_cycle + 1
    out_window = harness.last_out_cycle - harness.first_out_cycle + 1
    result = {
        "width": width, "size": size, "default": default,
        "packets": model.counters()["packets"],
        "packets_out": len(out_beats), "dropped": model.counters()["dropped"],
        "beats_in": len(beats), "beats_out": sum(out_beats),
        "in_beats_per_cycle": len(beats) / in_window,
        "out_beats_per_cycle": sum(out_beats) / out_window,
        "latency_cycles": harness.first_out_cycle - harness.first_in_cycle,
        "cycles": harness.cycles,
    }
    _write_result(result)
    assert len(out_beats) == len(expected)
