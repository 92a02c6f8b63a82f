"""cocotb testbench: the generated top (parser between AXI4-Stream ports) against the model.

Driven from pytest (``tests/test_parser_hw.py``), `snic demo` and `snic bench parser` through
:mod:`supernic.sim.build`; parameters come in environment variables (cocotb runs in its own
process) and a JSON summary goes to ``SNIC_RESULT``.

Every packet that comes out is compared with the model: its bytes with the bytes sent, its
metadata on the first beat (tail flags 0) and on the last beat (tail flags set) with
``ParserModel.parse``. A packet whose ``keep`` breaks the stream contract has unspecified
metadata except ``keep_error``, which must be set. Packets must come out in order, all of them,
and the register counters must agree.
"""

import collections
import copy
import random

import cocotb
from cocotb.triggers import ClockCycles

from supernic.driver.discovery import check_supported, discover, read_register
from supernic.desc.meta import TAIL_FLAGS
from supernic.hw.parser.meta import meta_layout
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.bfm import StreamHarness, frame_to_beats, pattern, start_and_reset
from supernic.sim.layout_codec import decode, diff as _diff
from supernic.sim.parser_model import ParserModel, is_error
from supernic.sim.traffic import random_packets, build, random_spec
from supernic.sim.tb.bench_env import design as _design, env as _env, write_result as _write_result

MAX_REPORTED = 5


def _traffic(n, seed, sizes, malformed, keep_errors, flows=None):
    rng = random.Random(seed ^ 0x5EED)
    packets = [(frame, False) for _, frame in
               random_packets(n, seed, size_dist=sizes, malformed_fraction=malformed,
                              flows=flows)]
    for _ in range(int(n * keep_errors)):
        i = rng.randrange(n)
        packets[i] = (packets[i][0], True)
    return packets


def _compare(model, layout, frame, keep_error, got_frame, first_user, last_user, beats):
    """Check one packet; return (mismatch descriptions, whether it is an error, its metadata)."""
    problems = []
    expected_data = frame[1:] if keep_error else frame
    if got_frame != expected_data:
        problems.append(f"data differs ({len(got_frame)} bytes out, {len(expected_data)} in)")
    last = decode(layout, last_user)
    if keep_error:
        if not last["flags"]["keep_error"]:
            problems.append("keep_error not flagged")
        return problems, True, last
    want = model.parse(frame)
    # The ingress timestamp depends on when the bench offered the packet; on_packet checks it
    # rises from packet to packet.
    want["ts"] = last["ts"]
    if last != want:
        problems.append(f"last-beat metadata differs: {_diff(want, last)}")
    if beats > 1:
        # Tail flags are only known, and only raised, on the last beat.
        first, first_want = decode(layout, first_user), copy.deepcopy(want)
        for f in TAIL_FLAGS:
            first_want["flags"][f] = 0
        if first != first_want:
            problems.append(f"first-beat metadata differs: {_diff(first_want, first)}")
    return problems, is_error(want), last


@cocotb.test()
async def random_traffic(dut):
    design = _design()
    cfg = design["config"]
    width, hbytes = cfg["data_width"], cfg["header_bytes"]
    seed = _env("seed", 1, int)
    n = _env("packets", 2000, int)
    sizes = _env("sizes", "mixed")
    sizes = sizes if sizes == "mixed" else tuple(int(x) for x in sizes.split(","))
    idle_kind = _env("idle", "random")
    bp_kind = _env("backpressure", "random")
    malformed = _env("malformed", 0.1, float)
    keep_errors = _env("keep_errors", 0.005, float)
    flows = _env("flows", 0, int) or None
    rng = random.Random(seed)

    packets = _traffic(n, seed, sizes, malformed, keep_errors, flows)
    model = ParserModel.of(cfg)
    layout = meta_layout(hbytes)
    beats = [b for frame, ke in packets for b in frame_to_beats(frame, width, ke)]

    await start_and_reset(dut)
    bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)
    blocks = await discover(bus)
    check_supported(blocks)
    assert [b.name for b in blocks] == [b["name"] for b in design["registers"]["blocks"]]

    harness = StreamHarness(dut, width)
    pending = collections.deque(packets)
    stats = collections.Counter()
    tenants = collections.Counter()
    reports = []
    last_ts = [None]

    def on_packet(got, first_user, last_user, beats):
        frame, keep_error = pending.popleft()
        problems, error, meta = _compare(model, layout, frame, keep_error, got, first_user,
                                         last_user, beats)
        if last_ts[0] is not None and not 0 < (meta["ts"] - last_ts[0]) % 2**32 < 2**31:
            problems.append(f"timestamp {meta['ts']} does not follow {last_ts[0]}")
        last_ts[0] = meta["ts"]
        stats["packets"] += 1
        stats["bytes"] += len(got)
        stats["errors"] += int(error)
        for f, v in meta["flags"].items():
            stats[f"flag_{f}"] += v
        if meta["tenant_kind"] and not error:
            tenants[("none", "vlan", "vni")[meta["tenant_kind"]] + f" {meta['tenant_key']}"] += 1
        if problems:
            stats["mismatches"] += 1
            if len(reports) < MAX_REPORTED:
                reports.append(f"packet {stats['packets'] - 1} ({len(frame)} bytes, "
                               f"{frame[:64].hex()}...): " + "; ".join(problems))

    total_beats = len(beats)
    await harness.run(beats, len(packets), pattern(idle_kind, rng), pattern(bp_kind, rng),
                      max_cycles=20 * total_beats + 10_000, on_packet=on_packet)
    await ClockCycles(dut.clk, 4)
    regmap = design["registers"]
    hw_counts = {name: await read_register(bus, regmap, "parser", name)
                 for name in ("packets", "bytes", "malformed")}
    summary = {
        "packets_in": len(packets), "packets_out": stats["packets"], "bytes": stats["bytes"],
        "errors": stats["errors"], "mismatches": stats["mismatches"],
        "cycles": harness.cycles, "beats": total_beats,
        "flags": {k[5:]: v for k, v in stats.items() if k.startswith("flag_")},
        "counters": hw_counts, "blocks": [b.name for b in blocks],
        "tenants": dict(tenants.most_common()),
    }
    _write_result(summary)
    assert not reports, "\n".join(reports)
    assert stats["packets"] == len(packets)
    assert hw_counts == {"packets": len(packets), "bytes": stats["bytes"],
                         "malformed": stats["errors"]}, hw_counts


@cocotb.test()
async def saturation(dut):
    """Back-to-back packets of one size, source never idle, sink always ready: beats/cycle."""
    design = _design()
    width = design["config"]["data_width"]
    size = _env("size", 64, int)
    n = _env("packets", 2000, int)
    rng = random.Random(size)
    frames = []
    while len(frames) < n:
        # Headers with long options can outgrow a 64-byte frame; keep only exact sizes.
        frame = build(random_spec(rng, size=size, kinds=("ipv4_udp", "ipv4_tcp", "ipv6_udp")),
                      rng)
        if len(frame) == size:
            frames.append(frame)
    beats = [b for f in frames for b in frame_to_beats(f, width)]
    await start_and_reset(dut)
    harness = StreamHarness(dut, width, user=False)
    got = []
    await harness.run(beats, n, pattern("none", rng), pattern("none", rng),
                      max_cycles=20 * len(beats) + 10_000,
                      on_packet=lambda data, *_: got.append(len(data)))
    window = harness.last_out_cycle - harness.first_out_cycle + 1
    result = {"size": size, "packets": n, "beats": len(beats),
              "beats_per_cycle": len(beats) / window,
              "latency_cycles": harness.first_out_cycle - 1, "cycles": harness.cycles}
    _write_result(result)
    assert got == [len(f) for f in frames]
