"""`snic bench rack`: the rack of SuperNICs (sim/rack) measured.

``consolidation``, after the paper's experiment (SuperNIC, arXiv 2109.07744, "Distributed
SuperNIC": sNICs that "collectively provision for the maximum aggregated load"): endpoints
with bursty, weakly correlated loads, drawn as traces (numpy): each endpoint is an on-off
source whose bursts have Pareto lengths (heavy-tailed, as data-centre traffic), and a share of
its bursts follow a rack-wide signal (the weak correlation). A region serves one unit of load.
For a target drop rate (the share of offered load above what the regions serve), the figure is
the regions needed when each sNIC is provisioned alone for its own endpoints, against the
pooled rack provisioned for the aggregate; ``saving`` is one minus their ratio (the paper: 52%
for the intermediate pool). The traces, not the NIC simulation, give this figure: it is a
statement about load, as the paper's is about its traces.

``redirect``: the cost of redirecting, measured on the simulated rack: one tenant's traffic on
nic0 served at home, then the same traffic with every bucket redirected to nic1 (rack frames
across the switch, served there, back to the endpoint): packets delivered per cycle and the
median and 99th-percentile latency from the endpoint's send to the result's arrival.

``ray``: simulated rack cycles per second with 1, 2, 4 and 8 sNICs, each in a Ray actor, every
sNIC running the same tenant's traffic, against one sNIC alone in this process (its virtual
device run in windows of the same length without Ray, the baseline); ``efficiency`` is the
rack's NIC-cycles per second over the baseline's times the cores the actors can use
(``min(NICs, cores)``). Windows of the intermediate pool's lookahead (a NIC-switch-NIC path),
and of a longer one, the switch-attached topology's, where no packet goes from one NIC to
another and the window only bounds how soon the control plane can act.
"""

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from ..desc.rack import load_rack

__all__ = ["rack_bench", "rack_show", "consolidation", "DESIGN"]

#: The sNIC of the bench racks: the 64-bit test NIC with a rack port.
DESIGN = Path(__file__).resolve().parent.parent / "tests" / "data" / "nic_rack.toml"


def consolidation(nics=8, endpoints=4, steps=200_000, drop_rate=1e-3, duty=0.1, peak=3.0,
                  correlated=0.2, alpha=1.5, mean_burst=50, seed=1):
    """Regions for ``drop_rate`` with each sNIC alone against the pooled rack, over load
    traces of ``nics * endpoints`` endpoints (module docstring)."""
    rng = np.random.default_rng(seed)

    def on_off(n):
        """``n`` on-off traces: on with probability ``duty`` in the long run, bursts of
        Pareto lengths with mean ``mean_burst`` steps."""
        out = np.zeros((n, steps), dtype=bool)
        scale = mean_burst * (alpha - 1) / alpha
        for k in range(n):
            t = int(rng.integers(0, mean_burst))
            on = bool(rng.random() < duty)
            while t < steps:
                length = int(np.ceil(scale * (1 + rng.pareto(alpha))))
                if on:
                    out[k, t:t + length] = True
                    length_off = length
                else:
                    length_off = length * (1 - duty) / duty
                t += int(np.ceil(length if on else length_off))
                on = not on
        return out
    n = nics * endpoints
    shared = on_off(1)[0]
    own = on_off(n)
    follows = rng.random((n, steps)) < correlated
    load = np.where(follows, shared[None, :], own) * peak
    load += rng.exponential(0.1, (n, steps))         # a trickle between bursts

    def regions(total):
        """Fewest regions serving all but ``drop_rate`` of ``total``'s load."""
        offered = total.sum()
        for r in range(int(np.ceil(total.max())) + 1):
            if np.maximum(total - r, 0).sum() <= drop_rate * offered:
                return r
        return int(np.ceil(total.max()))
    per_nic = load.reshape(nics, endpoints, steps).sum(axis=1)
    alone = sum(regions(per_nic[k]) for k in range(nics))
    pooled = regions(load.sum(axis=0))
    return {"nics": nics, "endpoints_per_nic": endpoints, "steps": steps,
            "drop_rate": drop_rate, "duty": duty, "peak_regions": peak,
            "correlated": correlated, "pareto_alpha": alpha,
            "mean_load_regions": round(float(load.sum(axis=0).mean()), 2),
            "regions_alone": alone, "regions_pooled": pooled,
            "saving": round(1 - pooled / alone, 4), "goal_saving": 0.52}


def _rack_file(work, nics, window_ns=100, topology="pool"):
    """A rack of ``nics`` bench sNICs, one endpoint and one web tenant each."""
    lines = [f'[rack]\nname = "bench{nics}"\ntopology = "{topology}"\n',
             "[switch]\nlatency_ns = 400\n"]
    keys = []
    for k in range(nics):
        lines.append(f'[[nic]]\nname = "nic{k}"\ndesign = "{DESIGN}"\nlink_gbps = 16\n'
                     f'link_ns = {window_ns}\n')
        lines.append(f'[[endpoint]]\nname = "h{k}"\nnic = "nic{k}"\nlink_gbps = 16\n')
        chain = Path(work) / f"web{k}.toml"
        web = (DESIGN.parent.parent.parent / "chains" / "web.toml").read_text()
        chain.write_text(web.replace("keys = [100]", f"keys = [{100 + k}]"))
        keys.append(chain)
        lines.append(f'[[tenant]]\nname = "t{k}"\nchain = "{chain}"\nendpoint = "h{k}"\n')
    path = Path(work) / f"rack{nics}.toml"
    path.write_text("\n".join(lines))
    return load_rack(path)


def _rate(rack, cycles, flow):
    from ..driver.traffic import parse_flow
    rack.deploy_all()
    for name in rack.tenants:
        rack.send(name, [parse_flow(flow)], cycles=cycles * 2, seed=7)
    rack.run(2 * rack.window_cycles)        # warm up: the first windows
    start_cycle, t = rack.now, time.perf_counter()
    rack.run(cycles)
    return (rack.now - start_cycle) / (time.perf_counter() - t)


def _alone_rate(config, cycles, flow):
    """One sNIC's virtual device alone: the same tenant and traffic pushed in advance, then
    run in one call (no rack, no windows, no Ray): what one core simulates."""
    from ..driver.traffic import parse_flow
    from ..sim.rack.rack import Rack
    with Rack(config, ray=False) as rack:
        rack.deploy_all()
        name = next(iter(rack.tenants))
        ids = rack.send(name, [parse_flow(flow)], cycles=cycles * 2, seed=7)
        device = rack.nics[config.nics[0].name].node.device
        for pid in ids:
            device.push(0, rack.packets[pid][1], device.cycle + rack.packets[pid][2] - rack.now)
        device.run(1000)
        t = time.perf_counter()
        device.run(cycles)
        return cycles / (time.perf_counter() - t)


def ray_scaling(counts=(1, 2, 4, 8), cycles=30_000, progress=print, windows=None):
    """Rack cycles/s per NIC count against one sNIC alone (module docstring)."""
    from ..sim.rack.rack import Rack, start_ray
    start_ray(progress=progress)
    cores = os.cpu_count()
    flow = "tenant=0,rate=0.8,size=64-1500,flows=32"
    out = {"cores": cores, "cycles": cycles, "flow": flow, "windows": {}}
    with tempfile.TemporaryDirectory() as work:
        base_rack = _rack_file(work, 1)
        lookahead = base_rack.lookahead
        windows = windows or {"pool_lookahead": lookahead, "switch_control": 4_000}
        for label, window in windows.items():
            progress(f"ray scaling, windows of {window} cycles: one sNIC alone...")
            baseline = _alone_rate(base_rack, cycles, flow)
            rows = []
            for n in counts:
                progress(f"ray scaling, windows of {window} cycles: {n} sNICs in actors...")
                with Rack(_rack_file(work, n), ray=True) as rack:
                    rack.window_cycles = window
                    rate = _rate(rack, cycles, flow)
                used = min(n, cores)
                rows.append({"nics": n, "rack_cycles_per_s": round(rate),
                             "nic_cycles_per_s": round(rate * n),
                             "efficiency_per_core": round(rate * n / (baseline * used), 3)})
            out["windows"][label] = {"window_cycles": window,
                                     "alone_cycles_per_s": round(baseline), "racks": rows}
    out["goal_efficiency"] = 0.9
    return out


def redirect_cost(cycles=30_000, progress=print):
    """One tenant served at home, then all its buckets redirected to a peer."""
    from ..driver.traffic import parse_flow
    from ..sim.rack.pool import PoolControl
    from ..sim.rack.rack import Rack
    flow = parse_flow("tenant=0,rate=0.5,size=64-1500,flows=32")
    out = {}
    with tempfile.TemporaryDirectory() as work:
        config = _rack_file(work, 2)
        for label, redirect in (("home", False), ("redirected", True)):
            progress(f"redirect cost: {label}...")
            with Rack(config, ray=False) as rack:
                rack.deploy("t0")
                if redirect:
                    PoolControl(rack).redirect("t0", "nic1", 0xFFFF)
                ids = rack.send("t0", [flow], cycles=cycles, seed=5)
                rack.run_until_drained()
                arrivals = {pid: c for pid, _, c, _ in rack.delivered}
                lat = np.array([arrivals[p] - rack.packets[p][2] for p in ids if p in arrivals])
                # Throughput: packets over the span from the first arrival to the last, so
                # the path's fixed latency does not count as lost rate.
                times = sorted(arrivals[p] for p in ids if p in arrivals)
                out[label] = {"packets": len(ids), "delivered": int(len(lat)),
                              "packets_per_kcycle": round(
                                  1000 * (len(times) - 1) / (times[-1] - times[0]), 3),
                              "latency_median_cycles": float(np.median(lat)),
                              "latency_p99_cycles": float(np.percentile(lat, 99))}
    home, red = out["home"], out["redirected"]
    out["latency_overhead"] = round(red["latency_median_cycles"]
                                    / home["latency_median_cycles"] - 1, 4)
    out["throughput_overhead"] = round(1 - red["packets_per_kcycle"]
                                       / home["packets_per_kcycle"], 4)
    out["goal_overhead"] = 0.04
    return out


def rack_bench(config, console, quick):
    figures = {"benchmark": "rack", "design": str(DESIGN.name)}
    t0 = time.monotonic()
    with console.status("rack bench") as status:
        status.update("consolidation over load traces...")
        figures["consolidation"] = consolidation(steps=50_000 if quick else 200_000)
        figures["redirect"] = redirect_cost(10_000 if quick else 30_000, status.update)
        figures["ray"] = ray_scaling((1, 2) if quick else (1, 2, 4, 8),
                                     10_000 if quick else 30_000, status.update)
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


def rack_show(result, console):
    from rich.table import Table
    c = result["consolidation"]
    console.print(f"consolidation: {c['regions_alone']} regions with each sNIC alone, "
                  f"{c['regions_pooled']} pooled: saving {c['saving']:.0%} "
                  f"(goal {c['goal_saving']:.0%})")
    r = result["redirect"]
    console.print(f"redirect: median latency {r['home']['latency_median_cycles']:.0f} -> "
                  f"{r['redirected']['latency_median_cycles']:.0f} cycles "
                  f"({r['latency_overhead']:+.1%}), throughput {r['throughput_overhead']:+.1%} "
                  f"(goal at most {r['goal_overhead']:.0%})")
    for label, w in result["ray"]["windows"].items():
        table = Table(title=f"Ray scaling, windows of {w['window_cycles']} cycles ({label}); "
                            f"one sNIC alone {w['alone_cycles_per_s']:,} cycles/s; goal "
                            f"{result['ray']['goal_efficiency']} per core")
        for col in ("sNICs", "rack cycles/s", "NIC-cycles/s", "efficiency per core"):
            table.add_column(col, justify="right")
        for row in w["racks"]:
            table.add_row(str(row["nics"]), f"{row['rack_cycles_per_s']:,}",
                          f"{row['nic_cycles_per_s']:,}", f"{row['efficiency_per_core']:.3f}")
        console.print(table)


if __name__ == "__main__":      # a quick look: python -m supernic.tools.bench_rack
    print(json.dumps(consolidation(), indent=2))
