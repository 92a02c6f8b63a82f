"""cocotb testbench: one network task in its shell (hw/nt/shell.py) against its Python model.

Parameters come in environment variables, the design description in ``SNIC_REGMAP`` (data
width, the NT's kind and build parameters, the register map) and a JSON summary goes to
``SNIC_RESULT``.

``random_traffic``: the model's test case gives a random configuration and frames (random and
malformed); the bench loads the configuration over AXI4-Lite, the metadata of every frame comes
from the parser model with an increasing ingress timestamp and some packets already marked
dropped, and the frames go in under the idle and backpressure patterns. Every packet that
comes out must equal the model's, bytes and metadata (first and last beat), in order; then the
counters, and any table the model knows how to read back, must agree.

``saturation``: back-to-back frames of one size that the NT applies to; beats per cycle in and
out, and the cycles from the first beat in to the first beat out.
"""

import collections
import copy
import random

import cocotb
from cocotb.triggers import ClockCycles

from supernic.driver.discovery import check_supported, discover, read_register, write_register
from supernic.hw.nt.task import task_class
from supernic.sim.nt.base import model_class
from supernic.desc.meta import TAIL_FLAGS
from supernic.hw.parser.meta import meta_layout
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.bfm import StreamHarness, frame_to_beats, pattern, start_and_reset
from supernic.sim.layout_codec import decode, diff as _diff, encode
from supernic.sim.parser_model import ParserModel
from supernic.sim.tb.bench_env import design as _design, env as _env, write_result as _write_result

MAX_REPORTED = 5


class BlockAccess:
    """Register access to the NT's block by register name (for models' read-back checks)."""

    def __init__(self, bus, regmap, block="nt"):
        self.bus, self.regmap, self.block = bus, regmap, block

    async def read(self, reg):
        return await read_register(self.bus, self.regmap, self.block, reg)

    async def write(self, reg, value):
        await write_register(self.bus, self.regmap, self.block, reg, value)


def input_beats(frame, meta, layout, width):
    """Beats (data, keep, last, user): tail flags only on the last beat, as the parser gives."""
    head = copy.deepcopy(meta)
    for f in TAIL_FLAGS:
        head["flags"][f] = 0
    first, last = encode(layout, head), encode(layout, meta)
    beats = frame_to_beats(frame, width)
    return [(d, k, end, last if end else first) for d, k, end in beats]


def model_traffic(model, frames, hbytes, width, rng, predropped, start_ts=None):
    """Input beats for ``frames`` (metadata from the parser model, an increasing ingress
    timestamp from ``start_ts`` or a random one, some packets already marked dropped) and a
    deque of ``(frame, model output)`` (``model`` processes them in order)."""
    parser = ParserModel(hbytes)
    layout = meta_layout(hbytes)
    ts = rng.randrange(2 ** 32) if start_ts is None else start_ts
    beats, expected = [], collections.deque()
    for frame in frames:
        meta = parser.parse(frame)
        ts = (ts + rng.randint(1, 400)) % 2 ** 32
        meta["ts"] = ts
        meta["drop"] = int(rng.random() < predropped)
        beats += input_beats(frame, meta, layout, width)
        expected.append((frame, model.process(frame, meta)))
    return beats, expected


def packet_checker(expected, layout, stats, reports):
    """``on_packet`` for :class:`StreamHarness`: each packet out must equal the next of
    ``expected``, bytes and metadata (first and last beat); counts go to ``stats``, the first
    differences to ``reports``."""
    def on_packet(got, first_user, last_user, nbeats):
        frame, (want_frame, want_meta) = expected.popleft()
        problems = []
        if got != want_frame:
            at = next((i for i, (a, b) in enumerate(zip(got, want_frame)) if a != b),
                      min(len(got), len(want_frame)))
            problems.append(f"data differs at byte {at} ({len(got)} bytes out, model "
                            f"{len(want_frame)})")
        last = decode(layout, last_user)
        if last != want_meta:
            problems.append(f"last-beat metadata differs: {_diff(want_meta, last)}")
        if nbeats > 1:
            first, first_want = decode(layout, first_user), copy.deepcopy(want_meta)
            for f in TAIL_FLAGS:
                first_want["flags"][f] = 0
            if first != first_want:
                problems.append(f"first-beat metadata differs: {_diff(first_want, first)}")
        stats["packets"] += 1
        stats["dropped"] += want_meta["drop"]
        stats["changed"] += int(got != frame)
        if problems:
            stats["mismatches"] += 1
            if len(reports) < MAX_REPORTED:
                reports.append(f"packet {stats['packets'] - 1} ({len(frame)} bytes in, "
                               f"{frame[:80].hex()}): " + "; ".join(problems))
    return on_packet


async def saturation_traffic(bus, design, size, n):
    """Load the model's saturation configuration; the beats of ``n`` frames of ``size`` bytes
    it applies to, timestamped one frame time apart."""
    cfg, nt = design["config"], design["nt"]
    width, hbytes = cfg["data_width"], cfg["header_bytes"]
    model = model_class(task_class(nt["kind"]))(nt["params"], width, hbytes)
    config, frames = model.saturation_case(random.Random(size), n, size)
    for reg, value in config.register_writes(nt["params"]):
        await write_register(bus, design["registers"], "nt", reg, value)
    parser, layout = ParserModel(hbytes), meta_layout(hbytes)
    beats, ts = [], 0
    for frame in frames:
        meta = parser.parse(frame)
        ts += len(frame) // (width // 8) + 1
        meta["ts"] = ts
        beats += input_beats(frame, meta, layout, width)
    return beats


async def _setup(dut):
    design = _design()
    await start_and_reset(dut)
    bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)
    blocks = await discover(bus)
    check_supported(blocks)
    return design, bus, blocks


@cocotb.test()
async def random_traffic(dut):
    await check_random_traffic(dut)


async def check_random_traffic(dut, during=None, slack=0):
    """The ``random_traffic`` test. ``during(rng, report, finished, configure, bus, regmap)``,
    if given, is a coroutine function run beside the traffic: it must return soon after
    ``finished()`` becomes true (the last packet is out) and may put figures in ``report`` (a
    dict added to the result); ``configure()`` writes the NT's configuration registers again;
    ``bus`` and ``regmap`` reach the registers (nothing else uses the bus meanwhile);
    ``slack``: cycles it may add to the run."""
    design, bus, blocks = await _setup(dut)
    cfg, nt = design["config"], design["nt"]
    width, hbytes = cfg["data_width"], cfg["header_bytes"]
    task = task_class(nt["kind"])
    seed = _env("seed", 1, int)
    n = _env("packets", 2000, int)
    malformed = _env("malformed", 0.1, float)
    predropped = _env("predropped", 0.02, float)
    rng = random.Random(seed)

    model = model_class(task)(nt["params"], width, hbytes)
    config, frames = model.test_case(random.Random(seed ^ 0xC0F), n, malformed)
    model.configure(config)
    regmap = design["registers"]
    for reg, value in config.register_writes(nt["params"]):
        await write_register(bus, regmap, "nt", reg, value)

    layout = meta_layout(hbytes)
    beats, expected = model_traffic(model, frames, hbytes, width, rng, predropped)
    stats = collections.Counter()
    reports = []
    on_packet = packet_checker(expected, layout, stats, reports)

    harness = StreamHarness(dut, width)
    side, done = {}, []

    async def configure():
        """Write the NT's configuration again (what restores configuration state)."""
        for reg, value in config.register_writes(nt["params"]):
            await write_register(bus, regmap, "nt", reg, value)
    if during is not None:
        side_task = cocotb.start_soon(during(random.Random(seed ^ 0x51DE), side,
                                             lambda: bool(done), configure, bus, regmap))
    await harness.run(beats, len(frames), pattern(_env("idle", "random"), rng),
                      pattern(_env("backpressure", "random"), rng),
                      max_cycles=40 * len(beats) + 20_000 + slack, on_packet=on_packet)
    if during is not None:
        done.append(True)
        await side_task
    await ClockCycles(dut.clk, 8)
    want_counters = model.counters()
    hw_counters = {name: await read_register(bus, regmap, "nt", name) for name in want_counters}
    state_problems = []
    if hasattr(model, "verify_hardware"):
        state_problems = await model.verify_hardware(BlockAccess(bus, regmap))
    result = {
        "kind": nt["kind"], "width": width, "packets_in": len(frames),
        "packets_out": stats["packets"], "mismatches": stats["mismatches"],
        "dropped": stats["dropped"], "changed": stats["changed"], "cycles": harness.cycles,
        "beats": len(beats), "counters": hw_counters, "model_counters": want_counters,
        "state_problems": state_problems[:MAX_REPORTED],
        "blocks": [b.name for b in blocks], **side,
    }
    _write_result(result)
    assert not reports, "\n".join(reports)
    assert stats["packets"] == len(frames)
    assert hw_counters == want_counters, f"counters: hw {hw_counters} model {want_counters}"
    assert not state_problems, "\n".join(state_problems[:MAX_REPORTED])


@cocotb.test()
async def saturation(dut):
    """Back-to-back frames of one size, source never idle, sink always ready."""
    design, bus, _ = await _setup(dut)
    cfg, nt = design["config"], design["nt"]
    width = cfg["data_width"]
    size = _env("size", 64, int)
    n = _env("packets", 500, int)
    beats = await saturation_traffic(bus, design, size, n)
    out_beats = []
    harness = StreamHarness(dut, width)
    await harness.run(beats, n, pattern("none", None), pattern("none", None),
                      max_cycles=100 * len(beats) + 10_000,
                      on_packet=lambda data, f, l, nb: out_beats.append(nb))
    in_window = harness.last_in_cycle - harness.first_in_cycle + 1
    out_window = harness.last_out_cycle - harness.first_out_cycle + 1
    result = {
        "kind": nt["kind"], "width": width, "size": size, "packets": n,
        "beats_in": len(beats), "beats_out": sum(out_beats),
        "in_beats_per_cycle": len(beats) / in_window,
        "out_beats_per_cycle": sum(out_beats) / out_window,
        "latency_cycles": harness.first_out_cycle - harness.first_in_cycle,
        "cycles": harness.cycles,
    }
    _write_result(result)
    assert len(out_beats) == n
