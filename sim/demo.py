"""`snic demo`: the default design, a few thousand mixed packets, checked against the model.

For the multi-tenant NIC (the default design): four tenants, each running one of the example
chains in its region(s), traffic on both ingress ports at once with random idle and egress
backpressure, every packet checked against the NIC model (sim/tb/nic_tb.py); a table per
tenant and the account of every ingress packet. For a parser-only design: the parser bench.
"""

import time

from rich.table import Table

from ..cache import cache_root
from .session import design_simulator, quiet_fds, run_bench
from .tb.scenario import NicScenario

__all__ = ["run_demo"]


def run_demo(config, packets=4000, seed=2026, console=None):
    if config.is_nic:
        return run_nic_demo(config, packets, seed, console)
    log = cache_root() / "logs" / "demo.log"
    t0 = time.monotonic()
    console.print(f"[bold]snic demo[/]: {config.name}, {config.data_width}-bit, "
                  f"header window {config.header_bytes} bytes (log: {log})")
    with console.status("generating and verilating the design (about a minute the first "
                        "time)...") as status:
        with quiet_fds(log):
            sim = design_simulator(config, progress=lambda msg: status.update(msg))
        status.update(f"simulating {packets} mixed packets (tenants on VLANs and VXLAN VNIs, "
                      "every header kind, 10% malformed) with idle and backpressure...")
        with quiet_fds(log):
            result = run_bench(sim, "random_traffic", {
                "seed": seed, "packets": packets, "idle": "random",
                "backpressure": "random", "malformed": 0.1,
                "keep_errors": 0.005, "flows": 12})
        status.update("measuring beats per cycle under saturation (64-byte packets)...")
        with quiet_fds(log):
            sat = run_bench(sim, "saturation", {"size": 64, "packets": 1000})

    table = Table(title="parser on Verilator vs the Python model", show_header=False)
    table.add_column(justify="left")
    table.add_column(justify="right")
    table.add_row("packets in", f"{result['packets_in']:,}")
    table.add_row("packets out", f"{result['packets_out']:,}")
    table.add_row("bytes out", f"{result['bytes']:,}")
    tenants = result["tenants"]
    top = ", ".join(f"{k}: {v}" for k, v in list(tenants.items())[:4])
    table.add_row("tenant keys seen", f"{len(tenants)} ({top}, ...)")
    table.add_row("drops", "0 (the parser flags, it never drops)")
    flags = result["flags"]
    for name in ("truncated", "malformed", "runt", "length_error", "keep_error"):
        table.add_row(f"  flagged {name}", f"{flags[name]:,}")
    table.add_row("  fragments (not an error)", f"{flags['fragment']:,}")
    table.add_row("malformed counter (register)", f"{result['counters']['malformed']:,}")
    table.add_row("mismatches with the model", f"[bold]{result['mismatches']}[/]")
    table.add_row("cycles (random idle + backpressure)", f"{result['cycles']:,}")
    table.add_row("beats/cycle, saturated, 64-byte packets", f"{sat['beats_per_cycle']:.3f}")
    table.add_row("latency, first beat (cycles)", f"{sat['latency_cycles']}")
    console.print(table)
    ok = (result["mismatches"] == 0 and result["packets_out"] == result["packets_in"])
    console.print(("[green]OK[/]" if ok else "[red]FAILED[/]")
                  + f" in {time.monotonic() - t0:.0f} s")
    return 0 if ok else 1


def run_nic_demo(config, packets, seed, console):
    log = cache_root() / "logs" / "demo.log"
    t0 = time.monotonic()
    console.print(f"[bold]snic demo[/]: {config.name}, the multi-tenant NIC, "
                  f"{config.data_width}-bit, {config.ports} ports, {len(config.regions)} "
                  f"regions (log: {log})")
    with console.status("generating and verilating the NIC (a few minutes the first time, "
                        "then cached)...") as status:
        with quiet_fds(log):
            sim = design_simulator(config, progress=lambda msg: status.update(msg))
        status.update(f"simulating {packets} packets of four tenants on both ports (10% "
                      f"malformed, idle and backpressure), checking each against the model...")
        with quiet_fds(log):
            result = run_bench(sim, "random_traffic", NicScenario(
                seed=seed, packets=packets, malformed=0.1), module="supernic.sim.tb.nic_tb")
    table = Table(title="tenants on the NIC (Verilator) vs the NIC model")
    table.add_column("tenant", justify="right")
    table.add_column("chain", min_width=10, no_wrap=True)
    for col in ("regions", "in", "delivered", "NT drops", "queue drops"):
        table.add_column(col, justify="right")
    for t, row in sorted(result["tenants"].items(), key=lambda kv: int(kv[0])):
        table.add_row(str(t), row["chain"], ",".join(map(str, row["regions"])),
                      f"{row['in']:,}", f"{row['delivered']:,}", f"{row['nt_dropped']:,}",
                      f"{row['queue_dropped']:,}")
    console.print(table)
    a = result["account"]
    console.print(f"account: {a['in']:,} in = {a['delivered']:,} delivered + "
                  f"{a['classifier_dropped']:,} unmatched (no tenant) + {a['queue_dropped']:,} "
                  f"queue full + {a['store_dropped']:,} store full + {a['nt_dropped']:,} "
                  f"dropped by NTs; {result['changed']:,} packets rewritten by their chains; "
                  f"{result['cycles']:,} cycles")
    ok = result["mismatches"] == 0 and not result["problems"]
    console.print(f"mismatches with the model: [bold]{result['mismatches']}[/]")
    console.print(("[green]OK[/]" if ok else "[red]FAILED[/]")
                  + f" in {time.monotonic() - t0:.0f} s")
    return 0 if ok else 1
