"""Cycles per second of the virtual device against cocotb on the same chain design.

    python -m supernic.sim.vdev.bench [--chain web] [--width 64 512] [--packets 4000]

Both run the chain bench's saturation traffic (back-to-back frames of one size aimed at the
chain's rules, sink always ready). cocotb's rate is marginal: two runs of different length,
the difference in cycles over the difference in wall time (less the time the bench spends
making its frames), so process start-up, model loading and register programming cancel out.
The device's rate is the cycles of ``run_until_drained`` over its wall time, plus an idle rate
(no traffic at all).
"""

import argparse
import json
import time
from pathlib import Path

from ...hw.chain.spec import load_chain
from ...hw.config import DesignConfig
from ..chain_model import chain_traffic
from ..session import chain_design, chain_simulator, run_bench
from .device import VirtualDevice

__all__ = ["saturation_frames", "device_rate", "cocotb_rate", "main"]

_CHAINS = Path(__file__).resolve().parent.parent.parent / "chains"


def saturation_frames(spec, n, size):
    """The frames chain_tb's ``saturation`` sends (same generator, seeds and filter)."""
    frames, seed = [], size
    while len(frames) < n:
        batch = chain_traffic(spec, 4 * n, seed, malformed=0.0, size_dist=size)
        frames += [f for f in batch if len(f) == size][:n - len(frames)]
        seed += 1
    return frames


def configure(device, spec):
    """Load every node's run-time configuration over AXI4-Lite, by register name."""
    blocks = {b["name"]: {r["name"]: r for r in b["registers"]}
              for b in device.regmap["registers"]["blocks"]}
    for node in spec.node_list():
        for reg, value in node.config.register_writes(node.params):
            r = blocks[node.name][reg]
            for part in range(r["words"]):
                device.write32(r["address"] + 4 * part, (value >> (32 * part)) & 0xFFFF_FFFF)


def device_rate(spec_path, width, packets, size=64, progress=print):
    paths, _ = chain_design(spec_path, DesignConfig(data_width=width), progress=progress)
    spec = load_chain(spec_path)
    with VirtualDevice.build(paths["verilog"], paths["regmap"], progress=progress) as device:
        configure(device, spec)
        for frame in saturation_frames(spec, packets, size):
            device.push(0, frame)
        t = time.perf_counter()
        cycles = device.run_until_drained(quiet=500)
        busy = cycles / (time.perf_counter() - t)
        delivered = len(device.pop())
        t = time.perf_counter()
        device.run(200_000)
        idle = 200_000 / (time.perf_counter() - t)
    return {"cycles": cycles, "cycles_per_s": busy, "idle_cycles_per_s": idle,
            "delivered": delivered}


def cocotb_rate(spec_path, width, packets, size=64, progress=print):
    sim = chain_simulator(spec_path, DesignConfig(data_width=width), progress=progress)
    spec = load_chain(spec_path)
    runs = []
    for n in (max(packets // 20, 10), packets):
        # The bench makes its frames in the simulator's process before the first cycle; that
        # time (measured here on the same generator) is not simulation.
        t = time.perf_counter()
        saturation_frames(spec, n, size)
        making = time.perf_counter() - t
        t = time.perf_counter()
        result = run_bench(sim, "saturation", {"SNIC_SIZE": size, "SNIC_PACKETS": n},
                           module="supernic.sim.tb.chain_tb")
        runs.append((result["beats_in"] / result["in_beats_per_cycle"],
                     time.perf_counter() - t - making))
    (c0, t0), (c1, t1) = runs
    return {"cycles": c1, "cycles_per_s": (c1 - c0) / (t1 - t0)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", default="web")
    parser.add_argument("--width", type=int, nargs="+", default=[64])
    parser.add_argument("--packets", type=int, default=4000)
    parser.add_argument("--no-cocotb", action="store_true")
    args = parser.parse_args(argv)
    path = Path(args.chain) if args.chain.endswith(".toml") else _CHAINS / f"{args.chain}.toml"
    for width in args.width:
        row = {"chain": path.stem, "width": width,
               "device": device_rate(path, width, args.packets)}
        if not args.no_cocotb:
            row["cocotb"] = cocotb_rate(path, width, args.packets)
            row["speedup"] = row["device"]["cycles_per_s"] / row["cocotb"]["cycles_per_s"]
        print(json.dumps(row))


if __name__ == "__main__":
    main()
