"""``snic report [--config C] [--out DIR] [--quick] [--only a,b]``: one Markdown report, with PNG
plots, of what the benchmarks measure for a design, every figure beside its goal and its
baseline. Every figure in it is measured by that run: the report runs each benchmark
(``snic bench NAME``), keeps its JSON under ``json/`` and writes ``report.md``.

Per benchmark the report gives its headline figures in one table (measured, goal, baseline, met
or not), the benchmark's own tables (its ``snic bench NAME`` output, which holds every figure
against its baseline), and a plot where a picture says more. ``docs/benchmarks.md`` is this
report for the default design.
"""

import io
import json
import time
from pathlib import Path

__all__ = ["SECTIONS", "make_report", "headlines"]


def _row(figure, measured, goal=None, baseline=None, met=None, unit=""):
    return {"figure": figure, "measured": measured, "goal": goal, "baseline": baseline,
            "met": met, "unit": unit}


def _board(r):
    nic, loop = r["nic"], r["loopback"]
    return [
        _row(f"fmax of {r['config']} on {r['board']} (MHz)", nic["fmax_mhz"], "≥ 125",
             f"loopback top {loop['fmax_mhz']}", nic["fmax_mhz"] >= 125),
        _row("LUTs (of the part)", f"{nic['lut']:,} ({r['nic_lut_share_of_part']:.0%})", "fits",
             f"loopback {loop['lut']:,}", nic["lut"] <= nic["lut_available"]),
        _row("bitstream build (s)", nic["build_seconds"], None,
             f"loopback {loop['build_seconds']}"),
    ] + ([_row(f"the {r['default_nic']['data_width']}-bit default NIC's logic cells",
               f"{r['default_nic']['comb_cells']:,} ({r['default_nic']['share_of_part']:.0%} "
               f"of the part)", None, f"{r['config']} {nic['lut']:,}")]
         if "default_nic" in r else [])


def _parser(r):
    rows = []
    for width, sizes in r["widths"].items():
        for size, x in sizes.items():
            rows.append(_row(f"parser beats/cycle, {width}-bit, {size}", x["beats_per_cycle"],
                             "= FIFO", f"FIFO {x['baseline_beats_per_cycle']}",
                             x["ratio_to_baseline"] >= 0.999))
    return rows


def _latency(r):
    s = r["sizes"]["64B"]
    return [_row("cycles the NIC adds, 64 B", r["added_cycles_64B"], "≤ 16",
                 f"chain alone {s['chain_alone_latency_cycles']}", r["goal_met"])]


def _fairness(r):
    pol = r["policies"]
    base = ", ".join(f"{p} {v['jain']}" for p, v in pol.items() if p != "drf")
    return [_row("Jain's index, DRF", r.get("drf_jain"), "≥ 0.98", base, r.get("drf_goal_met"))]


def _scaling(r):
    return [_row("scaling efficiency (worst point)", r["min_efficiency"], "≥ 0.95",
                 "one instance", r["goal_met"]),
            _row("auto-scaled efficiency (worst point)", r["min_auto_efficiency"], "≥ 0.95",
                 "one instance", r["auto_goal_met"])]


def _transform(r):
    rows = []
    for name, s in r.get("summary", {}).items():
        if "lut" in name:
            rows.append(_row(f"{name} (worst NT)", s["max"], "≤ 1.15", "the NT untransformed",
                             s["max"] <= 1.15))
    rows.append(_row("beats/cycle identical", r["throughput_identical"], True,
                     "the NT untransformed", r["throughput_identical"]))
    return rows


def _device(r):
    c = r["chain"]
    rows = [_row("web chain, virtual device (cycles/s)", f"{c['device_cycles_per_s']:,}", None,
                 f"cocotb {c['cocotb_cycles_per_s']:,} ({c['speedup']}x)")]
    if "nic" in r:
        n = r["nic"]
        rows.append(_row(f"{n['design']}, virtual device (cycles/s)",
                         f"{n['device_cycles_per_s']:,}", "≥ 100,000 (floor 50,000)",
                         f"cocotb {n['cocotb_cycles_per_s']:,}",
                         n["device_cycles_per_s"] >= 100_000))
    if "replay" in r:
        rows.append(_row(f"replay of {r['replay']['packets']:,} packets (s)",
                         r["replay"]["seconds"], "≤ 10", None, r["replay"]["seconds"] <= 10))
    return rows


def _rack(r):
    c, red, ray = r["consolidation"], r["redirect"], r["ray"]
    rows = [_row("regions saved by pooling", f"{c['saving']:.0%}",
                 f"≥ {c['goal_saving']:.0%}", f"{c['regions_alone']} regions alone",
                 c["saving"] >= c["goal_saving"])]
    for key in ("latency_overhead", "throughput_overhead"):
        if key in red:
            rows.append(_row(f"redirect {key.replace('_', ' ')}", red[key], "≤ 0.04",
                             "not redirected", red[key] <= 0.04))
    worst = min((row["efficiency_per_core"] for w in ray["windows"].values()
                 for row in w["racks"]), default=None)
    if worst is not None:
        rows.append(_row("Ray efficiency per core (worst)", worst, f"≥ {ray['goal_efficiency']}",
                         "one sNIC alone", worst >= ray["goal_efficiency"]))
    return rows


def _save(fig, ax, path):
    import matplotlib.pyplot as plt
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _goal_line(ax, y, label="goal"):
    ax.axhline(y, color="r", ls="--", lw=1, label=label)


def _plot_board(r, path):
    import matplotlib.pyplot as plt
    names = ["lut", "ff", "bram", "dsp"]
    fig, ax = plt.subplots(figsize=(6, 3))
    for k, build in enumerate(("nic", "loopback")):
        f = r[build]
        shares = [f.get(n, 0) / f[f"{n}_available"] if f.get(f"{n}_available") else 0
                  for n in names]
        ax.bar([i + 0.4 * k for i in range(len(names))], shares, 0.4, label=build)
    ax.set_xticks([i + 0.2 for i in range(len(names))], names)
    ax.set_ylabel("share of the part")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_title(f"{r['config']} on {r['board']} ({r['device']})")
    _save(fig, ax, path)


def _plot_fairness(r, path):
    import matplotlib.pyplot as plt
    pol = r["policies"]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(list(pol), [v["jain"] for v in pol.values()])
    _goal_line(ax, 0.98, "goal (DRF)")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("Jain's index")
    _save(fig, ax, path)


def _plot_scaling(r, path):
    import matplotlib.pyplot as plt
    pts = r["points"]
    fig, ax = plt.subplots(figsize=(5, 3))
    xs = [p.get("instances", i + 1) for i, p in enumerate(pts)]
    ax.plot(xs, [p["efficiency"] for p in pts], "o-", label="efficiency")
    _goal_line(ax, 0.95)
    ax.set_xlabel("instances")
    ax.set_ylim(0, 1.1)
    _save(fig, ax, path)


#: name: (title, headline rows, plot or None). The order is the report's.
SECTIONS = {
    "board": ("On a board: resources and fmax", _board, _plot_board),
    "parser": ("Parser throughput", _parser, None),
    "latency": ("Latency the NIC adds", _latency, None),
    "fairness": ("Fairness between tenants", _fairness, _plot_fairness),
    "scaling": ("Scaling a chain over instances", _scaling, _plot_scaling),
    "transform": ("The state-yielding transform's cost", _transform, None),
    "device": ("Simulator speed", _device, None),
    "rack": ("A rack of sNICs", _rack, None),
}


def headlines(name, result):
    """The headline rows of benchmark ``name``'s result; a figure the result lacks is a row
    saying so, not a gap."""
    try:
        return SECTIONS[name][1](result)
    except (KeyError, TypeError, ZeroDivisionError) as e:
        return [_row(f"{name}: figures missing from the result ({e!r})", "n/a")]


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value}"


def make_report(config, out_dir, console, quick=False, only=None, run=None):
    """Run the benchmarks (``only``: a subset, in the report's order) for ``config`` and write
    ``out_dir/report.md`` with its plots and JSON; return the report's path. ``run(name)``
    (default: :func:`~supernic.tools.benchmarks.run_benchmark`) gives a benchmark's result."""
    from rich.console import Console
    from .benchmarks import BENCHMARKS, run_benchmark
    out = Path(out_dir)
    (out / "json").mkdir(parents=True, exist_ok=True)
    names = [n for n in SECTIONS if not only or n in only]
    unknown = sorted(set(only or ()) - set(SECTIONS))
    if unknown:
        raise ValueError(f"no report section {unknown[0]!r} (sections: {', '.join(SECTIONS)})")
    run = run or (lambda name: run_benchmark(
        name, None if name == "board" and config.name == "supernic" else config, console,
        quick=quick))
    parts, summary = [], []
    t0 = time.monotonic()
    for k, name in enumerate(names):
        title, _, plot = SECTIONS[name]
        console.print(f"[{k + 1}/{len(names)}] {name}: {BENCHMARKS[name].doc[:80]}...")
        t = time.monotonic()
        result = run(name)
        (out / "json" / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
        rows = headlines(name, result)
        summary += [(name, r) for r in rows]
        text = [f"## {title}", "",
                f"`snic bench {name}{' --quick' if quick else ''}` "
                f"({time.monotonic() - t:.0f} s; JSON: `json/{name}.json`)", "",
                "| figure | measured | goal | baseline | met |", "| --- | --- | --- | --- | --- |"]
        text += [f"| {r['figure']} | {_cell(r['measured'])} | {_cell(r['goal'])} | "
                 f"{_cell(r['baseline'])} | {_cell(r['met'])} |" for r in rows]
        if plot is not None:
            try:
                plot(result, out / f"{name}.png")
                text += ["", f"![{title}]({name}.png)"]
            except (KeyError, TypeError, ValueError) as e:
                text += ["", f"(no plot: figures missing from the result, {e!r})"]
        recorder = Console(record=True, width=110, file=io.StringIO())
        BENCHMARKS[name].show(result, recorder)
        text += ["", "```", recorder.export_text().rstrip(), "```", ""]
        parts.append("\n".join(text))
    met = sum(1 for _, r in summary if r["met"] is True)
    goals = sum(1 for _, r in summary if r["met"] is not None)
    head = [f"# Benchmarks of {config.name} ({config.data_width}-bit)", "",
            f"Made by `snic report{' --quick' if quick else ''}"
            f"{' --only ' + ','.join(names) if only else ''}` in "
            f"{time.monotonic() - t0:.0f} s on {time.strftime('%Y-%m-%d')}; every figure below "
            f"was measured by that run. {met} of {goals} goals met.", "",
            "| section | figure | measured | goal | met |", "| --- | --- | --- | --- | --- |"]
    head += [f"| {name} | {r['figure']} | {_cell(r['measured'])} | {_cell(r['goal'])} | "
             f"{_cell(r['met'])} |" for name, r in summary if r["met"] is not None]
    path = out / "report.md"
    path.write_text("\n".join(head) + "\n\n" + "\n".join(parts))
    return path
