"""Benchmarks behind `snic bench`: each prints one JSON object of named, measured figures.

``harness``: cycles per second of the lean AXI4-Stream harness against cocotbext-axi's stock
source and sink on the passthrough design, same packets, same run.

``parser``: beats per cycle of the generated design under saturation (source never idle, sink
always ready) for 64-byte and 1500-byte packets, at 64 and 512 bits, each next to the same
measurement of a plain FIFO between the same AXI4-Stream ports (the baseline: what the harness
itself allows) in the same run; the ratio is design / baseline. Also the latency of the first
beat in cycles.
"""

import os
import time
from dataclasses import dataclass
from typing import Callable

from ..cache import cache_root
from ..sim.session import design_simulator, passthrough_simulator, quiet_fds, run_bench

__all__ = ["BENCHMARKS", "run_benchmark", "Benchmark"]


@dataclass
class Benchmark:
    doc: str
    run: Callable
    show: Callable


def _parser_bench(config, console, quick):
    log = cache_root() / "logs" / "bench-parser.log"
    figures = {"benchmark": "parser", "widths": {}, "log": str(log)}
    packets = {64: 400 if quick else 3000, 1500: 40 if quick else 300}
    t0 = time.monotonic()
    with console.status("parser bench") as status:
        for width in (64, 512):
            # The parser alone, whatever top level the configuration builds (the NIC's parsers
            # are this one).
            cfg = standalone_config(config, width)
            with quiet_fds(log):
                dut = design_simulator(cfg, progress=status.update)
                base = passthrough_simulator(width, progress=status.update)
            row = {}
            for size in (64, 1500):
                status.update(f"{width}-bit, {size}-byte packets: parser and baseline...")
                env = {"size": size, "packets": packets[size]}
                with quiet_fds(log):
                    got = run_bench(dut, "saturation", env)
                    ref = run_bench(base, "saturation", env)
                row[f"{size}B"] = {
                    "beats_per_cycle": round(got["beats_per_cycle"], 4),
                    "baseline_beats_per_cycle": round(ref["beats_per_cycle"], 4),
                    "ratio_to_baseline": round(got["beats_per_cycle"] / ref["beats_per_cycle"], 4),
                    "latency_cycles": got["latency_cycles"],
                    "baseline_latency_cycles": ref["latency_cycles"],
                    "packets": got["packets"], "beats": got["beats"],
                }
            figures["widths"][str(width)] = row
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


def _parser_show(result, console):
    from rich.table import Table
    table = Table(title="parser throughput under saturation (goal 1.00 beats/cycle)")
    for col in ("width", "packet", "beats/cycle", "baseline", "ratio", "latency (cycles)"):
        table.add_column(col, justify="right")
    for width, row in result["widths"].items():
        for size, r in row.items():
            table.add_row(width, size, f"{r['beats_per_cycle']:.4f}",
                          f"{r['baseline_beats_per_cycle']:.4f}", f"{r['ratio_to_baseline']:.4f}",
                          str(r["latency_cycles"]))
    console.print(table)


def _harness_bench(config, console, quick):
    log = cache_root() / "logs" / "bench-harness.log"
    width = config.data_width
    with console.status(f"harness bench ({width}-bit passthrough)") as status:
        with quiet_fds(log):
            sim = passthrough_simulator(width, progress=status.update)
            result = run_bench(sim, "harness_speed",
                               {"packets": 50 if quick else 300, "size": 1024},
                               module="supernic.sim.tb.harness_tb")
    return {"benchmark": "harness", **result}


def _harness_show(result, console):
    console.print(f"{result['data_width']}-bit: lean harness "
                  f"{result['lean_cycles_per_second']:,} cycles/s, cocotbext-axi source/sink "
                  f"{result['stock_cycles_per_second']:,} cycles/s: {result['speedup']}x")


def _device_bench(config, console, quick):
    """The virtual device (Verilator behind the C++ harness, no Python per cycle) against
    cocotb in one run (sim/vdev/bench.py):

    * ``chain``: the web chain at 64 bits, saturated, same frames on both;
    * ``nic``: the design's NIC (the default one unless --config) with two tenants saturating
      both ports, deployed by the control plane; cocotb runs the NIC bench's ``shares``
      scenario with the same tenants, sizes and ports (marginal rate of two window lengths);
    * ``replay``: a 100,000-packet pcap (10,000 with --quick) of every region's tenant replayed
      through the NIC served on a socket, as ``snic traffic --replay`` does it: wall seconds
      per phase and simulated cycles per second."""
    from ..sim.vdev.bench import (_CHAINS, cocotb_rate, device_rate, nic_cocotb_rate,
                                  nic_replay, nic_saturated_rate)
    log = cache_root() / "logs" / "bench-device.log"
    path, width, packets = _CHAINS / "web.toml", 64, 400 if quick else 4000
    result = {"benchmark": "device", "log": str(log)}
    with console.status("device bench") as status:
        with quiet_fds(log):
            status.update(f"virtual device: web chain, {width}-bit, {packets} packets...")
            device = device_rate(path, width, packets, progress=status.update)
            status.update(f"cocotb: web chain, {width}-bit, {packets} packets...")
            cocotb = cocotb_rate(path, width, packets, progress=status.update)
            result["chain"] = {
                "design": f"chain web, {width}-bit", "packets": packets,
                "device_cycles_per_s": round(device["cycles_per_s"]),
                "device_idle_cycles_per_s": round(device["idle_cycles_per_s"]),
                "cocotb_cycles_per_s": round(cocotb["cycles_per_s"]),
                "cocotb_rate": cocotb["method"],
                "speedup": round(device["cycles_per_s"] / cocotb["cycles_per_s"], 1),
                "delivered": device["delivered"]}
            if config.is_nic:
                name = f"{config.name} ({config.data_width}-bit NIC, {len(config.regions)} regions)"
                status.update(f"virtual device: {name}, two tenants saturating both ports...")
                nic = nic_saturated_rate(config, 20_000 if quick else 200_000,
                                         progress=status.update)
                status.update(f"cocotb: {name}, the same tenants...")
                nic_cocotb = nic_cocotb_rate(config, progress=status.update,
                                             windows=(1_000, 3_000) if quick else (2_000, 12_000))
                result["nic"] = {
                    "design": name, "device_cycles_per_s": round(nic["cycles_per_s"]),
                    "cocotb_cycles_per_s": round(nic_cocotb["cycles_per_s"]),
                    "cocotb_rate": nic_cocotb["method"],
                    "speedup": round(nic["cycles_per_s"] / nic_cocotb["cycles_per_s"], 1),
                    "cycles": nic["cycles"], "delivered": nic["delivered"]}
                result["profile"] = _device_profile(config, quick, status)
                count = 10_000 if quick else 100_000
                status.update(f"replaying a {count:,}-packet pcap through {name}...")
                replay = nic_replay(config, count, progress=status.update)
                result["replay"] = {"design": name, **{
                    k: (round(v, 2) if isinstance(v, float) else v) for k, v in replay.items()}}
    return result


def _device_profile(config, quick, status):
    """Each block's share of a cycle of the NIC (the profiling build under perf, the same
    two saturating tenants), its Verilog lines, and unless ``quick`` its LUTs and FFs."""
    from ..sim.vdev.bench import nic_saturated_rate
    from ..sim.vdev.profile import PerfUnavailable
    status.update("profiling build of the NIC under perf, two tenants saturating both ports...")
    try:
        run = nic_saturated_rate(config, 2_000 if quick else 20_000, progress=status.update,
                                 variant="profile")
    except PerfUnavailable as e:
        return {"error": str(e)}
    profile = {"cycles": run["cycles"], "profiling_cycles_per_s": round(run["cycles_per_s"]),
               **run["profile"]}
    if not quick:
        from .design_resources import design_resources
        res = design_resources(config, jobs=os.cpu_count() or 1,
                               progress=lambda m: status.update(f"resources: {m}"))
        per_block = {row["block"]: row for row in res["blocks"]}
        for row in profile["blocks"]:
            for target in res["targets"]:
                counts = per_block.get(row["block"], {}).get(target)
                if counts:
                    row[f"{target}_lut"], row[f"{target}_ff"] = counts["lut"], counts["ff"]
        profile["resources_total"] = res["total"]
    return profile


def _device_show(result, console):
    c = result["chain"]
    console.print(f"{c['design']}: virtual device {c['device_cycles_per_s']:,} cycles/s busy "
                  f"({c['device_idle_cycles_per_s']:,} idle), cocotb "
                  f"{c['cocotb_cycles_per_s']:,} cycles/s: {c['speedup']}x")
    if "nic" in result:
        n = result["nic"]
        console.print(f"{n['design']}: virtual device {n['device_cycles_per_s']:,} cycles/s "
                      f"with both ports saturated, cocotb {n['cocotb_cycles_per_s']:,} "
                      f"cycles/s: {n['speedup']}x")
        _profile_show(result["profile"], console)
        r = result["replay"]
        console.print(f"replay of {r['packets']:,} packets: {r['seconds']:.1f} s (read "
                      f"{r['read_s']:.1f}, simulate {r['run_s']:.1f}, write {r['write_s']:.1f});"
                      f" {r['cycles']:,} cycles at {round(r['cycles_per_s']):,} cycles/s, "
                      f"{r['delivered']:,} delivered")


def _simulator_bench(config, console, quick):
    """sim/vdev/options.py on the design's NIC (the default one unless --config)."""
    from ..desc.config import ConfigError
    from ..sim.vdev.options import option_rates
    if not config.is_nic:
        raise ConfigError("the simulator bench measures a NIC design; this one is not")
    log = cache_root() / "logs" / "bench-simulator.log"
    with console.status("simulator bench") as status:
        with quiet_fds(log):
            rates = option_rates(config, 20_000 if quick else 100_000, progress=status.update)
    return {"benchmark": "simulator", "log": str(log), **rates}


def _simulator_show(result, console):
    from rich.table import Table
    table = Table(title=f"virtual device build options, {result['design']} "
                        f"({result['width']}-bit NIC), {result['cycles']:,} cycles")
    for column in ("build", "build s", "cycles/s", "ratio"):
        table.add_column(column, justify="left" if column == "build" else "right")
    for name, row in result.items():
        if isinstance(row, dict) and "cycles_per_s" in row:
            table.add_row(name, f"{row['build_seconds']:.0f}", f"{row['cycles_per_s']:,}",
                          f"{row['ratio']:.2f}x")
    console.print(table)


def _profile_show(profile, console):
    if "error" in profile:
        console.print(f"no cycle profile: {profile['error']}")
        return
    from rich.table import Table
    luts = any("ecp5_lut" in row for row in profile["blocks"])
    table = Table(title=f"where a cycle goes ({profile['samples']:,} perf samples of the "
                        f"profiling build, {profile['cycles']:,} cycles)",
                  caption="share: of all samples; inputs: the part in logic of the top-level "
                          "inputs (Verilator's ico phase); a module several blocks hold is "
                          "charged to them evenly")
    for column in ("block", "share", "inputs", "Verilog lines",
                   *(("ECP5 LUT", "ECP5 FF", "xcup LUT", "xcup FF") if luts else ())):
        table.add_column(column, justify="left" if column == "block" else "right")
    for row in profile["blocks"]:
        cells = [row["block"], f"{row['share']:.1%}", f"{row['ico_share']:.1%}",
                 f"{row['verilog_lines']:,}"]
        if luts:
            cells += [f"{row[k]:,}" if k in row else "" for k in
                      ("ecp5_lut", "ecp5_ff", "xilinx_lut", "xilinx_ff")]
        table.add_row(*cells)
        for child in row.get("children", []):
            if child["share"] >= 0.01 and child["block"].count("/") == 1:
                table.add_row(f"  {child['block']}", f"{child['share']:.1%}",
                              f"{child['ico_share']:.1%}", f"{child['verilog_lines']:,}",
                              *([""] * 4 if luts else []), style="dim")
    console.print(table)


def _fuzz_bench(config, console, quick):
    from .fuzz import run_with_progress
    from .fuzz_nic import nic_campaign
    # The campaign's own parameters: at least a million frames (issue 17), 64 bits (the
    # fastest build to simulate; the walk is the same at every width).
    result = run_with_progress(config, 20_000 if quick else 1_000_000, console, seed=1)
    if config.is_nic:
        with console.status(f"fuzzing the {config.name} NIC") as status:
            result["nic"] = nic_campaign(config, 5_000 if quick else 100_000, seed=1,
                                         progress=status.update)
    return result


def _fuzz_show(result, console):
    from .fuzz import show
    from .fuzz_nic import show as show_nic
    show(result, console)
    if "nic" in result:
        show_nic(result["nic"], console)


from .bench_nt import nt_bench, nt_show, standalone_config  # noqa: E402
from .bench_transform import transform_bench, transform_show  # noqa: E402
from .bench_build import build_bench, build_show  # noqa: E402
from .formal import formal_bench, formal_show  # noqa: E402
from .bench_nic import (fairness_bench, fairness_show, latency_bench, latency_show,  # noqa: E402
                        scaling_bench, scaling_show)
from .bench_rack import rack_bench, rack_show  # noqa: E402
from .bench_board import board_bench, board_show  # noqa: E402

BENCHMARKS = {
    "parser": Benchmark(
        "parser beats/cycle under saturation, 64 B and 1500 B, 64 and 512 bits, vs a FIFO "
        "baseline", _parser_bench, _parser_show),
    "harness": Benchmark(
        "simulated cycles/s of the lean cocotb AXI4-Stream harness vs cocotbext-axi's "
        "source/sink, same design and packets", _harness_bench, _harness_show),
    "nt": Benchmark(
        "beats/cycle and latency of every NT and example chain under saturation, 64 B and "
        "1500 B, 64 and 512 bits, vs a FIFO / parser-only baseline", nt_bench, nt_show),
    "fairness": Benchmark(
        "Jain's index over weighted dominant shares of four backlogged tenants (64 B flood, "
        "1500 B bulk, compute-heavy chain, light) under DRF and the FIFO, RR and DRR "
        "baselines, each tenant against its DRF ideal", fairness_bench, fairness_show),
    "scaling": Benchmark(
        "throughput of 1 to 4 instances of a region-bound chain vs one instance; "
        "reconfiguration and scale-out reaction in cycles", scaling_bench, scaling_show),
    "latency": Benchmark(
        "cycles the classifier, queues, scheduler, store and egress add to a 3-NT chain at "
        "512 bits, vs the chain alone behind its parser", latency_bench, latency_show),
    "device": Benchmark(
        "simulated cycles/s of the virtual device (no Python per cycle) vs cocotb on the same "
        "design and traffic (the web chain at 64 bits; the NIC), and the time to replay a "
        "100,000-packet pcap through the served NIC; where a cycle goes, block by block "
        "(share, Verilog lines, LUTs and FFs)", _device_bench, _device_show),
    "simulator": Benchmark(
        "the virtual device's build options on the NIC: Verilator --threads 2 and GCC "
        "profile-guided optimisation vs the normal build, cycles/s and build seconds",
        _simulator_bench, _simulator_show),
    "build": Benchmark(
        "seconds of a first build from an empty cache, step by step (liveness analyses, "
        "conversion, cocotb simulator for snic demo, device library for snic device serve), "
        "against the warm build from the same cache", build_bench, build_show),
    "transform": Benchmark(
        "the state-yielding transform per NT and on the default NIC: ECP5/UltraScale+ area "
        "plain, full and boundary port (lut_overhead), ECP5 fmax, live against all flip-flop "
        "bits, beats/cycle with and without, stop latency and state capture/restore cycles",
        transform_bench, transform_show),
    "fuzz": Benchmark(
        "the parser fuzz campaign: 1,000,000 random and mutated frames (bit flips, "
        "truncations, length and field lies, extension chains, tag stacks, tiny and jumbo "
        "frames) through the parser on the virtual device and the model, every metadata "
        "field compared, and 100,000 through the whole NIC, every frame delivered or counted",
        _fuzz_bench, _fuzz_show),
    "rack": Benchmark(
        "the rack of sNICs on Ray: regions needed alone vs pooled over bursty, weakly "
        "correlated endpoint loads (consolidation); the latency and throughput cost of a "
        "redirect; simulated rack cycles/s with 1, 2, 4, 8 sNIC actors vs one sNIC alone",
        rack_bench, rack_show),
    "board": Benchmark(
        "a board's bitstream (YoWASP Yosys, nextpnr-ecp5, ecppack): LUTs, FFs, BRAM and DSP "
        "against the part, the NIC clock's target and achieved fmax, build seconds; the "
        "board's NIC configuration against the Ethernet loopback top", board_bench,
        board_show),
    "formal": Benchmark(
        "formal proofs (YoWASP Yosys, yosys-smtbmc with Boolector): the stream contract of "
        "the fork, the join, the region link (and its latch) and every NT; the scheduler's "
        "isolation and queue accounting; result, depth and time per property, and z3 vs "
        "Boolector on the scheduler", formal_bench, formal_show),
}


def run_benchmark(name, config, console, quick=False, only=None):
    if only:
        return BENCHMARKS[name].run(config, console, quick, only=only)
    return BENCHMARKS[name].run(config, console, quick)
