"""cocotb bench: how fast the lean harness (sim/bfm.py) runs against cocotbext-axi's stock
AxiStreamSource/AxiStreamSink, on the passthrough design, same packets, same run.

This is the measurement behind writing our own source/sink (the style guide asks for the
library first and a fast path only where it is measured too slow).
"""

import random
import time

import cocotb
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from supernic.sim.bfm import StreamHarness, frame_to_beats, pattern, start_and_reset
from supernic.sim.tb.bench_env import env, write_result


async def _cycle_counter(dut, box):
    while True:
        await RisingEdge(dut.clk)
        box[0] += 1


@cocotb.test()
async def harness_speed(dut):
    width = len(dut.s_axis__tdata)
    n = env("packets", 200, int)
    size = env("size", 512, int)
    rng = random.Random(1)
    frames = [rng.randbytes(size) for _ in range(n)]
    await start_and_reset(dut)

    # Lean harness.
    harness = StreamHarness(dut, width, user=False)
    got = []
    t = time.perf_counter()
    beats = [b for f in frames for b in frame_to_beats(f, width)]
    await harness.run(beats, n, pattern("none", rng), pattern("none", rng), 100 * len(beats),
                      lambda data, *_: got.append(data))
    lean_s = time.perf_counter() - t
    lean_cycles = harness.cycles
    assert got == frames

    # Stock cocotbext-axi source and sink on the same ports.
    source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis", bus_separator="__"),
                             dut.clk, dut.rst)
    sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis", bus_separator="__"),
                         dut.clk, dut.rst)
    box = [0]
    counter = cocotb.start_soon(_cycle_counter(dut, box))
    t = time.perf_counter()
    for f in frames:
        await source.send(AxiStreamFrame(f))
    out = [bytes((await sink.recv()).tdata) for _ in frames]
    stock_s = time.perf_counter() - t
    counter.cancel()
    assert out == frames
    result = {
        "data_width": width, "packets": n, "packet_bytes": size,
        "lean_cycles": lean_cycles, "lean_seconds": round(lean_s, 3),
        "lean_cycles_per_second": round(lean_cycles / lean_s),
        "stock_cycles": box[0], "stock_seconds": round(stock_s, 3),
        "stock_cycles_per_second": round(box[0] / stock_s),
    }
    result["speedup"] = round(result["lean_cycles_per_second"] / result["stock_cycles_per_second"], 2)
    write_result(result)
