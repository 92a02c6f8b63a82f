"""cocotb bench: what the state-yielding transform (hw/transform) costs while a network task
runs, measured on the yieldable shell (``task_simulator(kind, width, yieldable=True)``).

``yield_costs``: the ``saturation`` traffic of sim/tb/nt_tb.py (back-to-back frames of one
size, source never idle, sink always ready) while the NT is stopped ``stops`` times,
alternately at once and at the next packet boundary. Each stop gives the cycles from the
request (``yld__stop`` raised) to ``stopped``; on the first ``captures`` stops the whole
state is read through the state port (every address of the state map, one word a cycle) and
written back, each timed in cycles. The NT then resumes; every packet must still come out.
The figures go to ``SNIC_RESULT``: state words and bits, stop latencies per kind of stop,
capture and restore cycles and words per cycle.

Cycles are counted with a free-running counter of rising edges, so they include the state
port's fixed read delay and the cycle that drops ``write``.
"""

import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from supernic.desc.statemap import StateMap
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.bfm import StreamHarness, pattern, start_and_reset
from supernic.sim.tb.bench_env import design as _design, env as _env, write_result as _write_result
from supernic.sim.tb.nt_tb import saturation_traffic
from supernic.sim.tb.yield_tb import StatePort
from supernic.driver.discovery import check_supported, discover


class _EdgeCounter:
    """Rising edges since start: the bench's clock for every figure."""

    def __init__(self, clk):
        self.cycles = 0
        self._edge = RisingEdge(clk)
        cocotb.start_soon(self._run())

    async def _run(self):
        while True:
            await self._edge
            self.cycles += 1


def _summary(values):
    if not values:
        return None
    return {"min": min(values), "max": max(values),
            "mean": round(sum(values) / len(values), 2), "n": len(values)}


@cocotb.test()
async def yield_costs(dut):
    design = _design()
    cfg, nt = design["config"], design["nt"]
    width = cfg["data_width"]
    smap = StateMap.from_json(design["state_map"])
    addrs = smap.addresses()
    size = _env("size", 64, int)
    n = _env("packets", 200, int)
    stops = _env("stops", 6, int)
    captures = _env("captures", 2, int)
    rng = random.Random(_env("seed", 1, int))

    port = StatePort(dut)        # drives every yld input to 0 before the reset
    await start_and_reset(dut)
    bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)
    port.bus, port.regmap = bus, design["registers"]
    check_supported(await discover(bus))
    beats = await saturation_traffic(bus, design, size, n)

    clock = _EdgeCounter(dut.clk)
    harness = StreamHarness(dut, width)
    out = []
    traffic = cocotb.start_soon(harness.run(
        beats, n, pattern("none", None), pattern("none", None),
        max_cycles=100 * len(beats) + 10_000 + stops * (2 * len(addrs) + 2_000),
        on_packet=lambda data, f, l, nb: out.append(nb)))

    # Stops spread over the traffic (about one beat a cycle), each after a random gap so they
    # land at random points of a packet.
    gap = max(8, len(beats) // (stops + 1))
    latencies = {"immediate": [], "boundary": []}
    capture_cycles, restore_cycles, mismatches = [], [], 0
    stopped_during_traffic = 0
    for k in range(stops):
        await ClockCycles(dut.clk, rng.randint(gap // 2, gap))
        if traffic.done():
            break
        boundary = k % 2 == 1
        latency = await port.stop_now(boundary)
        latencies["boundary" if boundary else "immediate"].append(latency)
        stopped_during_traffic += 1
        if k < captures:
            t = clock.cycles
            saved = await port.read_words(addrs)
            capture_cycles.append(clock.cycles - t)
            t = clock.cycles
            await port.write_words(addrs, saved)
            restore_cycles.append(clock.cycles - t)
            # The restore wrote back what was read: reading again must give the same words.
            again = await port.read_words(addrs)
            mismatches += sum(a != b for a, b in zip(again, saved))
        await port.resume()
    await traffic
    words = len(addrs)
    result = {
        "kind": nt["kind"], "width": width, "size": size, "packets": n,
        "packets_out": len(out), "beats_in": len(beats), "beats_out": sum(out),
        "state_words": words, "state_bits": smap.bits, "flip_flop_bits": smap.flip_flop_bits,
        "word_width": smap.word_width, "addr_width": smap.addr_width,
        "stops": stopped_during_traffic,
        "stop_latency": {kind: _summary(v) for kind, v in latencies.items()},
        "capture_cycles": capture_cycles[0] if capture_cycles else None,
        "restore_cycles": restore_cycles[0] if restore_cycles else None,
        "capture_words_per_cycle": (round(words / capture_cycles[0], 4)
                                    if capture_cycles else None),
        "restore_words_per_cycle": (round(words / restore_cycles[0], 4)
                                    if restore_cycles else None),
        "readback_mismatches": mismatches,
        "cycles": harness.cycles,
    }
    _write_result(result)
    assert len(out) == n, f"{len(out)} of {n} packets came out"
    assert mismatches == 0, f"{mismatches} state words differ after a restore"
