"""`snic bench nt`: every NT of the library and every example chain under saturation.

For each NT (alone in its shell, fed the metadata a parser would give) at 64 and 512 bits and
64- and 1500-byte frames it applies to: input and output beats per cycle with the source never
idle and the sink always ready, next to a plain FIFO between the same ports measured in the
same run (the baseline: what the harness itself allows; ratio = NT output rate / baseline), and
the cycles from the first beat in to the first beat out (the latency the NT adds: the shell
adds none). For each example chain (parser, chain, drop stage): input beats per cycle and
first-packet latency, next to the parser-only design, so the chain's own added latency is the
difference.
"""

import time
from pathlib import Path

from ..cache import cache_root
from ..sim.session import (chain_simulator, design_simulator, passthrough_simulator, quiet_fds,
                           run_bench, task_simulator)

__all__ = ["nt_bench", "nt_show", "example_chains", "standalone_config"]

WIDTHS = (512, 64)
SIZES = (64, 1500)


def standalone_config(config, width):
    """The configuration benches build a parser or a chain alone with: the defaults at
    ``width`` with ``config``'s header window (the name and the NIC's settings would only
    make another build of the same design)."""
    from ..desc.config import DesignConfig
    return DesignConfig(data_width=width, header_bytes=config.header_bytes)


def example_chains():
    from importlib.resources import files
    root = Path(str(files("supernic.chains")))
    return sorted(p for p in root.glob("*.toml") if p.stem != "default")


def nt_bench(config, console, quick, only=None):
    """``only``: NT kinds and chain names to run (default: every NT and example chain)."""
    from ..hw.nt.task import task_classes
    log = cache_root() / "logs" / "bench-nt.log"
    packets = {64: 100 if quick else 1000, 1500: 20 if quick else 150}
    kinds = [k for k in task_classes() if not only or k in only]
    chains = [p for p in example_chains() if not only or p.stem in only]
    unknown = set(only or ()) - set(kinds) - {p.stem for p in chains}
    if unknown:
        raise ValueError(f"unknown NT or chain {sorted(unknown)[0]!r} (NTs: "
                         f"{', '.join(task_classes())}; chains: "
                         f"{', '.join(p.stem for p in example_chains())})")
    figures = {"benchmark": "nt", "log": str(log), "baseline": {}, "nts": {}, "chains": {}}
    t0 = time.monotonic()
    with console.status("nt bench") as status:
        for width in WIDTHS:
            with quiet_fds(log):
                base = passthrough_simulator(width, progress=status.update)
            figures["baseline"][str(width)] = {}
            for size in SIZES:
                status.update(f"baseline FIFO, {width}-bit, {size} B...")
                with quiet_fds(log):
                    ref = run_bench(base, "saturation",
                                    {"size": size, "packets": packets[size]})
                figures["baseline"][str(width)][f"{size}B"] = round(ref["beats_per_cycle"], 4)
        for kind in kinds:
            row = figures["nts"].setdefault(kind, {})
            for width in WIDTHS:
                status.update(f"{kind}: building {width}-bit...")
                with quiet_fds(log):
                    sim = task_simulator(kind, width, progress=status.update)
                for size in SIZES:
                    status.update(f"{kind}: {width}-bit, {size} B...")
                    with quiet_fds(log):
                        got = run_bench(sim, "saturation",
                                        {"size": size, "packets": packets[size]},
                                        module="supernic.sim.tb.nt_tb")
                    base_rate = figures["baseline"][str(width)][f"{size}B"]
                    row.setdefault(str(width), {})[f"{size}B"] = {
                        "in_beats_per_cycle": round(got["in_beats_per_cycle"], 4),
                        "out_beats_per_cycle": round(got["out_beats_per_cycle"], 4),
                        "ratio_to_baseline": round(got["out_beats_per_cycle"] / base_rate, 4),
                        "latency_cycles": got["latency_cycles"],
                        "beats_in": got["beats_in"], "beats_out": got["beats_out"],
                    }
        for path in chains:
            name = path.stem
            for width in WIDTHS:
                # The baseline is the parser alone, whatever top level the configuration builds;
                # both designs from the plain configuration of that width (and the user's
                # header window): the chain and parser tests build the same ones.
                cfg = standalone_config(config, width)
                status.update(f"chain {name}: building {width}-bit...")
                with quiet_fds(log):
                    sim = chain_simulator(path, cfg, progress=status.update)
                    parser = design_simulator(cfg, progress=status.update)
                for size in SIZES:
                    status.update(f"chain {name}: {width}-bit, {size} B...")
                    env = {"size": size, "packets": packets[size]}
                    with quiet_fds(log):
                        got = run_bench(sim, "saturation", env, module="supernic.sim.tb.chain_tb")
                        ref = run_bench(parser, "saturation", env)
                    lat = got["latency_cycles"]
                    figures["chains"].setdefault(name, {}).setdefault(str(width), {})[
                        f"{size}B"] = {
                        "in_beats_per_cycle": round(got["in_beats_per_cycle"], 4),
                        "parser_only_beats_per_cycle": round(ref["beats_per_cycle"], 4),
                        "ratio_to_parser_only": round(
                            got["in_beats_per_cycle"] / ref["beats_per_cycle"], 4),
                        "latency_cycles": lat,
                        "parser_only_latency_cycles": ref["latency_cycles"],
                        "chain_added_latency_cycles": (None if lat is None
                                                       else lat - ref["latency_cycles"]),
                        "delivered": got["delivered"], "packets": got["packets"],
                    }
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


def nt_show(result, console):
    from rich.table import Table
    table = Table(title="NTs under saturation (out beats/cycle; goal 1.00 for header-only NTs)")
    for col in ("NT", "width", "packet", "in b/c", "out b/c", "baseline", "ratio",
                "latency (cycles)"):
        table.add_column(col, justify="right")
    for kind, widths in result["nts"].items():
        for width, row in widths.items():
            for size, r in row.items():
                table.add_row(kind, width, size, f"{r['in_beats_per_cycle']:.4f}",
                              f"{r['out_beats_per_cycle']:.4f}",
                              f"{result['baseline'][width][size]:.4f}",
                              f"{r['ratio_to_baseline']:.4f}", str(r["latency_cycles"]))
    console.print(table)
    table = Table(title="example chains (parser + chain + drop stage) under saturation")
    for col in ("chain", "width", "packet", "in b/c", "parser only", "ratio",
                "chain latency (cycles)"):
        table.add_column(col, justify="right")
    for name, widths in result["chains"].items():
        for width, row in widths.items():
            for size, r in row.items():
                table.add_row(name, width, size, f"{r['in_beats_per_cycle']:.4f}",
                              f"{r['parser_only_beats_per_cycle']:.4f}",
                              f"{r['ratio_to_parser_only']:.4f}",
                              str(r["chain_added_latency_cycles"]))
    console.print(table)
