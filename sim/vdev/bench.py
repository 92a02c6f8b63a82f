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

from ...desc.chain import load_chain
from ...desc.config import DesignConfig
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


def _marginal(runs):
    """Cycles/s from a short and a long run ``[(cycles, seconds), ...]``: the difference in
    cycles over the difference in time, so start-up cancels out. On a loaded machine the long
    run can take no longer than the short one; then the long run's whole rate stands in (a
    lower bound: it includes the start-up), and ``method`` says so."""
    (c0, t0), (c1, t1) = runs
    if c1 > c0 and t1 > t0:
        return {"cycles": c1, "cycles_per_s": (c1 - c0) / (t1 - t0), "method": "marginal"}
    return {"cycles": c1, "cycles_per_s": c1 / t1, "method": "whole run"}


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
        result = run_bench(sim, "saturation", {"size": size, "packets": n},
                           module="supernic.sim.tb.chain_tb")
        runs.append((result["beats_in"] / result["in_beats_per_cycle"],
                     time.perf_counter() - t - making))
    return _marginal(runs)


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


def _tenant_chains(description):
    """``[(region, chain spec path)]``: the first region that loads each chain at reset, one
    per chain (two tenants cannot share a chain's keys)."""
    seen = {}
    for r, personalities in enumerate(description["regions"]):
        seen.setdefault(personalities[0]["name"], (r, personalities[0]["source"]))
    return list(seen.values())


def _two_chains(description):
    chains = _tenant_chains(description)
    if len(chains) < 2:
        raise ValueError("the NIC bench needs two regions with different chains")
    return chains[:2]


async def _deploy_tenants(plane, sources):
    """Each chain of ``sources`` as tenant 0, 1, ...; the flow targets ``snic traffic`` uses."""
    targets = {}
    for tenant, source in enumerate(sources):
        record = await plane.deploy(source, tenant)
        targets[tenant] = {"keys": list(record.keys), "spec": load_chain(source)}
    return targets


def nic_replay(config, packets, progress=print, seed=5):
    """Replay a ``packets``-packet pcap through ``config``'s NIC served as a virtual device,
    the way ``snic traffic --replay`` does it (socket, control plane, batch push, run, pop,
    output pcap). Each region's first personality is deployed as a tenant of its own; the
    pcap holds their traffic (mixed sizes, their keys), made with ``snic traffic``'s flow
    templates. Returns times per phase and the cycles simulated."""
    import asyncio
    import tempfile

    from ...driver.client import DeviceClient, SocketBus
    from ...driver.control import ControlPlane
    from ...driver.server import serving_in_thread
    from .serve import device_server
    from ...driver.traffic import parse_flow, replay_schedule, run_traffic, write_pcap_out
    from ..flows import make_schedule
    from ..build import generated_design
    from ..traffic import write_pcap

    paths = generated_design(config, progress=progress)
    work = Path(tempfile.mkdtemp(prefix="snic-replay-", dir="/tmp"))
    sock = work / "dev.sock"

    async def session():
        client = await DeviceClient.connect(sock)
        async with client:
            description = (await client.hello())["regmap"]
            plane = ControlPlane(SocketBus(client), description, work / "tenants.json",
                                 wait=lambda: client.run(256))
            targets = await _deploy_tenants(
                plane, [source for _, source in _tenant_chains(description)])
            progress(f"deployed {len(targets)} tenants; making {packets} packets...")
            per = packets // len(targets)
            flows = [parse_flow(f"tenant={t},size=200-1500,flows=64,packets="
                                f"{per + (packets - per * len(targets) if t == 0 else 0)}")
                     for t in targets]
            cfg = description["config"]
            schedule = make_schedule(flows, targets, cfg["data_width"], cfg["ports"], seed=seed,
                                     header_bytes=cfg["header_bytes"])
            pcap = work / "in.pcap"
            write_pcap(pcap, schedule.frames)
            t0 = time.perf_counter()
            replay = replay_schedule(pcap, cfg["ports"])
            t1 = time.perf_counter()
            progress(f"replaying {packets} packets...")
            run = await run_traffic(client, description, replay)
            t2 = time.perf_counter()
            write_pcap_out(work / "out.pcap", run, 250.0)
            t3 = time.perf_counter()
            return run, {"read_s": t1 - t0, "run_s": t2 - t1, "write_s": t3 - t2}

    with VirtualDevice.build(paths["verilog"], paths["regmap"], progress=progress) as device:
        with serving_in_thread(device_server(device, paths["regmap"]), sock):
            run, times = asyncio.run(session())
    cycles = run.end_cycle - run.start_cycle
    return {"packets": packets, "delivered": len(run.frames), "cycles": cycles,
            "seconds": sum(times.values()), **times,
            "cycles_per_s": cycles / times["run_s"],
            "packets_per_s": packets / sum(times.values())}


def nic_saturated_rate(config, cycles=200_000, progress=print, variant=None,
                       profile_data=None):
    """The virtual device's cycles/s on ``config``'s NIC with two tenants saturating both
    ports (the first region's chain with 256-byte frames on port 0, the next chain's with
    512-byte frames on port 1), deployed by the control plane. In process, no socket.

    ``variant``, ``profile_data``: measure another kind of build (:data:`.build.VARIANTS`).
    The "profile" variant runs under ``perf`` (:mod:`.profile`) and adds ``profile``, each
    block's share of the cycles; its cycles/s is the profiling build's."""
    import asyncio

    from ...driver.control import ControlPlane
    from ...driver.traffic import parse_flow
    from ..flows import make_schedule
    from ..build import generated_design
    from .device import DeviceRegisterBus
    from .profile import block_profile, profile_run, read_structure

    paths = generated_design(config, progress=progress)
    profile = variant == "profile"
    with VirtualDevice.build(paths["verilog"], paths["regmap"], progress=progress,
                             variant=variant, profile_data=profile_data) as device:
        async def wait():
            device.run(256)
        description = device.regmap
        plane = ControlPlane(DeviceRegisterBus(device), description, None, wait=wait)
        targets = asyncio.run(_deploy_tenants(
            plane, [source for _, source in _two_chains(description)]))
        cfg = description["config"]
        flows = [parse_flow("tenant=0,size=256,port=0"), parse_flow("tenant=1,size=512,port=1")]
        schedule = make_schedule(flows, targets, cfg["data_width"], cfg["ports"],
                                 cycles=cycles, header_bytes=cfg["header_bytes"])
        for port, frame in zip(schedule.ports, schedule.frames):
            device.push(port, frame)

        def run():
            t = time.perf_counter()
            device.run(cycles)
            return cycles / (time.perf_counter() - t)

        if profile:
            progress(f"profiling {cycles:,} cycles under perf...")
            busy, symbols = profile_run(run)
        else:
            busy = run()
        delivered = len(device.pop())
    result = {"cycles": cycles, "cycles_per_s": busy, "delivered": delivered}
    if profile:
        result["profile"] = block_profile(read_structure(paths["verilog"]), symbols)
    return result


def nic_cocotb_rate(config, progress=print, windows=(2_000, 12_000)):
    """cocotb's marginal cycles/s on the same NIC and the same kind of traffic: the NIC bench's
    ``shares`` scenario (two tenants saturating both ports, as above) run with two window
    lengths; the difference in cycles over the difference in wall time."""
    from ..tb import NIC_BENCH_MODULE
    from ..build import generated_design
    from ..session import design_simulator
    sim = design_simulator(config, progress=progress)
    description = json.loads(Path(generated_design(config)["regmap"]).read_text())
    (r0, chain0), (r1, chain1) = _two_chains(description)
    tenants = [{"id": 0, "name": "a", "chain": chain0, "regions": [r0], "size": 256,
                "port": 0},
               {"id": 1, "name": "b", "chain": chain1, "regions": [r1], "size": 512,
                "port": 1}]
    runs = []
    for window in windows:
        t = time.perf_counter()
        run_bench(sim, "shares", {
            "tenants": tenants, "policy": "drf", "window": window, "warmup": 1000,
            "calibrate": False}, module=NIC_BENCH_MODULE)
        runs.append((window, time.perf_counter() - t))
    return _marginal(runs)
