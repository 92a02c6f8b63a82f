"""`snic sweep`: a benchmark over a grid of parameters, each point one Ray task.

    snic sweep fairness --grid weight=1,2,4,8 [--grid policy=drf,drr] [--quick]
    snic sweep scaling --grid instances=1..4 --grid flows=256,1024

The grid is the product of the ``--grid`` lists, in the order given. Each point runs the
benchmark's own function (:mod:`supernic.tools.bench_nic`) with those parameters in a Ray task
of one CPU and returns its JSON figures; the driver collects them as they finish
(``ray.wait``) and writes one JSON file (the grid, each point's parameters, its figures, the
benchmark's whole result, seconds, and where it ran: host, pid, Ray node) and one PNG plot of
a chosen figure over the swept parameters. With no address the sweep starts a Ray on this
machine with one CPU per core (:func:`supernic.sim.rack.rack.start_ray`); with an address it
joins that cluster, whose every node needs this package installed (each node builds or reuses
the simulators in its own cache).

Sweepable benchmarks (:data:`SWEEPS`):

* ``fairness``: the four backlogged tenants of ``snic bench fairness``
  (:data:`~supernic.tools.bench_nic.FAIRNESS_TENANTS`) under one scheduler ``policy`` (drf,
  drr, rr, fifo; default drf) with tenant ``tenant`` (default flood) given weight ``weight``
  (default 1; the others keep 1), measured over ``window`` cycles after the warm-up. Figures:
  Jain's index over weighted dominant shares, that tenant's share against its weighted-DRF
  ideal, every tenant's share. The hostile-tenant part
  of ``snic bench fairness`` runs on a design's own NIC and takes no weights: a sweep leaves
  it out.
* ``scaling``: one tenant on the region-bound secure chain with ``instances`` instances (1 to
  4; default 4) and ``flows`` distinct flows (default the bench's: 1,024 with ``--quick``,
  else 4,096): that instance count's throughput, speedup and efficiency against one instance
  measured in the same run, entries in turn, auto-scaled and rebalanced, as ``snic bench
  scaling`` measures them (which runs 1 to 4 in one simulation).

A parameter's values are a comma-separated list; an integer parameter also takes ranges
(``instances=1..4``, ``flows=256,1024..1026``). Bad input (an unknown benchmark, parameter or
figure, an empty grid or list, a value the benchmark cannot take) is a :class:`SweepError`, one
line, before Ray starts.
"""

import io
import itertools
import json
import math
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..desc.errors import SnicError

__all__ = ["SWEEPS", "Sweepable", "Param", "SweepError", "SweepRequest", "sweep_request",
           "parse_grid", "grid_points", "run_sweep", "run_point", "plot_sweep", "show_sweep",
           "show_sweeps"]


class SweepError(SnicError, ValueError):
    """A sweep that cannot run as asked (one line; exit code 2, nothing has run)."""


@dataclass(frozen=True)
class Param:
    """A parameter a sweep can vary: ``parse(text)`` gives one value or raises ValueError with
    the reason; ``default(quick)`` is its value when not swept."""
    name: str
    doc: str
    parse: Callable
    default: Callable
    integer: bool = False       # takes ranges A..B


@dataclass(frozen=True)
class Sweepable:
    """A benchmark a sweep can run: ``run(params, quick, console)`` returns the benchmark's
    JSON figures for one point; ``summary(result, params)`` the flat figures a table and a
    plot show (names in ``figures``); ``figure`` is what is plotted by default, ``columns``
    what the table shows."""
    name: str
    doc: str
    params: dict
    run: Callable
    summary: Callable
    figures: tuple
    figure: str
    columns: tuple


# -- values ------------------------------------------------------------------------------------

def _int_in(lo, hi):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise ValueError(f"{value} is not from {lo} to {hi}")
        return value
    return parse


def _choice(options):
    def parse(text):
        if text not in options:
            raise ValueError(f"{text!r} is not one of {', '.join(options)}")
        return text
    return parse


def _weight(text):
    """A scheduling weight the NIC's scheduler takes (its own check: 1/weight in 8.8 fixed
    point, weight x the DRR quantum in 16 bits)."""
    from ..desc.config import ConfigError
    from ..desc.nic.scheduler import SchedulerConfig
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} is not a positive number")
    try:
        SchedulerConfig(weights=(value, 1, 1, 1))
    except ConfigError as e:
        raise ValueError(f"{text} is not a weight the scheduler takes: {e}") from None
    return int(value) if value.is_integer() else value


# -- fairness ----------------------------------------------------------------------------------

def _fairness_params():
    from .bench_nic import FAIRNESS_TENANTS, POLICIES
    names = tuple(t["name"] for t in FAIRNESS_TENANTS)
    return {
        "weight": Param("weight", "the weight of tenant `tenant` (the others keep 1; the "
                        "scheduler takes about 0.004 to 31.99)", _weight,
                        lambda quick: 1),
        "tenant": Param("tenant", f"the tenant given `weight`: {', '.join(names)}",
                        _choice(names), lambda quick: names[0]),
        "policy": Param("policy", f"the scheduler: {', '.join(POLICIES)}", _choice(POLICIES),
                        lambda quick: POLICIES[0]),
        "window": Param("window", "the cycles measured after the warm-up, 500 to 1,000,000 "
                        "(the bench's: 6,000 with --quick, else 20,000)",
                        _int_in(500, 1_000_000), lambda quick: 6000 if quick else 20000,
                        integer=True),
    }


def _fairness_run(params, quick, console):
    from ..desc.config import DesignConfig
    from .bench_nic import FAIRNESS_TENANTS, fairness_bench
    tenants = [dict(t) for t in FAIRNESS_TENANTS]
    for t in tenants:
        if t["name"] == params["tenant"]:
            t["weight"] = params["weight"]
    # A design that is not a NIC: the bench's hostile-tenant part (on the design's own NIC,
    # no weights) is left out.
    return fairness_bench(DesignConfig(), console, quick, tenants=tenants,
                          policies=(params["policy"],), window=params["window"])


def _fairness_summary(result, params):
    row = result["policies"][params["policy"]]
    mine = row["tenants"][params["tenant"]]
    out = {"jain": row["jain"], "dispatched_beats_per_cycle": row["dispatched_beats_per_cycle"],
           "tenant_share": mine["dominant_share"], "tenant_ideal": mine["ideal"],
           "tenant_to_ideal": mine["to_ideal"]}
    for name, t in row["tenants"].items():
        out[f"{name}.share"] = t["dominant_share"]
        out[f"{name}.to_ideal"] = t["to_ideal"]
    return out


def _fairness_figures():
    from .bench_nic import FAIRNESS_TENANTS
    return ("jain", "dispatched_beats_per_cycle", "tenant_share", "tenant_ideal",
            "tenant_to_ideal", *itertools.chain.from_iterable(
                (f"{t['name']}.share", f"{t['name']}.to_ideal") for t in FAIRNESS_TENANTS))


# -- scaling -----------------------------------------------------------------------------------

#: The regions ``scaling_bench`` deploys its instances into, in order (the scale-out reaction
#: needs the second as its spare, so a point of one instance still loads two).
SCALING_REGIONS = (2, 0, 1, 3)
#: ``scaling_bench``'s tenant.
SCALING_TENANT = {"id": 0, "name": "compute", "chain": "secure", "regions": [2], "size": 1500,
                  "port": 0, "delivered_only": True, "distinct_flows": True}


def _scaling_run(params, quick, console):
    """``snic bench scaling`` (:func:`~supernic.tools.bench_nic.scaling_bench`) with
    ``instances`` and ``flows``: the same scenario (with 4 instances and the default flows, the
    very one) and the same figures, over the points 1 to ``instances``."""
    from ..cache import cache_root
    from ..sim.session import quiet_fds
    from ..sim.tb import NIC_BENCH_MODULE
    from . import bench_nic
    n = params["instances"]
    flows = params["flows"]
    log = cache_root() / "logs" / "bench-scaling.log"
    figures = {"benchmark": "scaling", "log": str(log), "design": "nic_bench (512-bit)",
               "chain": "secure", "size": 1500, "flows": flows}
    t0 = time.monotonic()
    with console.status("scaling bench") as status:
        sim = bench_nic._sim(status, log)
        status.update(f"1 to {n} instances of the secure chain, saturated...")
        with quiet_fds(log):
            got = bench_nic.run_bench(sim, "scaling", bench_nic._scenario(
                [dict(SCALING_TENANT)], "drf", instances=list(SCALING_REGIONS[:max(n, 2)]),
                window=4000 if quick else 12000, warmup=2000 if quick else 4000, flows=flows,
                window_one=4000 if quick else 60000, pool_passes=0 if quick else 2,
                rebalance=True, auto_passes=1, auto_period=2000 if quick else 5000),
                module=NIC_BENCH_MODULE)
    points = got["points"][:n]
    one = points[0]["beats_per_cycle"]
    figures["points"] = [{**p, "beats_per_cycle": round(p["beats_per_cycle"], 4),
                          "hash_bound": round(p["hash_bound"], 3),
                          "speedup": round(p["beats_per_cycle"] / one, 3),
                          "efficiency": round(p["beats_per_cycle"] / one / p["instances"], 3),
                          "of_bound": round(p["beats_per_cycle"] / one / p["instances"]
                                            / p["hash_bound"], 3),
                          **bench_nic._rebalanced(p, one), **bench_nic._auto(p, one)}
                         for p in points]
    figures["min_efficiency"] = min(p.get("rebalanced_efficiency", p["efficiency"])
                                    for p in figures["points"])
    figures["min_efficiency_in_turn"] = min(p["efficiency"] for p in figures["points"])
    figures["goal_met"] = figures["min_efficiency"] >= 0.95
    figures["min_auto_efficiency"] = min(p.get("auto_efficiency", p["efficiency"])
                                         for p in figures["points"])
    figures["auto_goal_met"] = figures["min_auto_efficiency"] >= 0.95
    figures["reconfig_cycles"] = got["reconfig_cycles"]
    if "reaction" in got:
        figures["reaction"] = got["reaction"]
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


_SCALING_POINT = ("beats_per_cycle", "speedup", "efficiency", "hash_bound", "of_bound",
                  "rebalanced_beats_per_cycle", "rebalanced_speedup", "rebalanced_efficiency",
                  "auto_beats_per_cycle", "auto_speedup", "auto_efficiency")
_REACTION = ("decided", "configured", "online", "committed", "first_packet")


def _scaling_summary(result, params):
    point = result["points"][params["instances"] - 1]
    out = {k: point[k] for k in _SCALING_POINT if k in point}
    for k in _REACTION:
        if k in result.get("reaction", {}):
            out[f"reaction.{k}"] = result["reaction"][k]
    return out


# -- the registry ------------------------------------------------------------------------------

def _sweeps():
    return {
        "fairness": Sweepable(
            "fairness", "Jain's index and weighted dominant shares of four backlogged "
            "tenants, one tenant's weight and the scheduler varied", _fairness_params(),
            _fairness_run, _fairness_summary, _fairness_figures(), "jain",
            ("jain", "tenant_share", "tenant_ideal", "tenant_to_ideal")),
        "scaling": Sweepable(
            "scaling", "throughput of a region-bound chain against one instance, the "
            "instance count and the flows varied", {
                "instances": Param("instances", "instances of the secure chain, 1 to 4",
                                   _int_in(1, len(SCALING_REGIONS)), lambda quick: 4,
                                   integer=True),
                "flows": Param("flows", "distinct flows, 1 to 16,384", _int_in(1, 16384), lambda quick: 1024 if quick else 4096,
                               integer=True),
            }, _scaling_run, _scaling_summary,
            (*_SCALING_POINT, *(f"reaction.{k}" for k in _REACTION)), "speedup",
            ("beats_per_cycle", "speedup", "efficiency", "hash_bound")),
    }


SWEEPS = _sweeps()


# -- the grid ----------------------------------------------------------------------------------

def _values(param, text):
    values = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise ValueError("an empty value")
        if ".." in item:
            if not param.integer:
                raise ValueError(f"{item!r}: ranges A..B are for integer parameters")
            lo, _, hi = item.partition("..")
            lo, hi = param.parse(lo.strip()), param.parse(hi.strip())
            if lo > hi:
                raise ValueError(f"{item!r} is an empty range")
            values += range(lo, hi + 1)
        else:
            values.append(param.parse(item))
    return values


#: The most points one sweep runs (a mistyped range should not start thousands of tasks).
MAX_POINTS = 1000


def parse_grid(name, specs):
    """``{parameter: [values]}`` of ``specs`` (``["P=V1,V2", "Q=A..B"]``) for the sweepable
    benchmark ``name``, in the order given; :class:`SweepError` on anything it cannot run."""
    sweep = _sweepable(name)
    if not specs:
        raise SweepError(f"an empty grid: give at least one --grid P=V1,V2,... "
                         f"({name} sweeps {', '.join(sweep.params)})")
    grid = {}
    for spec in specs:
        key, eq, text = spec.partition("=")
        key = key.strip()
        if not eq:
            raise SweepError(f"--grid {spec!r}: expected P=V1,V2,... or P=A..B")
        if key not in sweep.params:
            raise SweepError(f"--grid {spec!r}: {name} has no parameter {key!r} "
                             f"(it sweeps {', '.join(sweep.params)})")
        if key in grid:
            raise SweepError(f"--grid {spec!r}: {key} is already swept (one --grid each)")
        if not text.strip():
            raise SweepError(f"--grid {spec!r}: no values for {key}")
        try:
            values = _values(sweep.params[key], text)
        except ValueError as e:
            raise SweepError(f"--grid {spec!r}: {e}") from None
        if len(set(values)) != len(values):
            raise SweepError(f"--grid {spec!r}: a value given twice")
        grid[key] = values
    return grid


def grid_points(name, grid, quick=False):
    """Each point's full parameters (the unswept ones at their defaults), in grid order."""
    sweep = _sweepable(name)
    fixed = {k: p.default(quick) for k, p in sweep.params.items() if k not in grid}
    return [{**fixed, **dict(zip(grid, values))} for values in itertools.product(*grid.values())]


def _sweepable(name):
    if name not in SWEEPS:
        raise SweepError(f"unknown sweep benchmark {name!r} (sweepable: {', '.join(SWEEPS)})")
    return SWEEPS[name]


@dataclass
class SweepRequest:
    """A checked sweep: the benchmark, its grid and the figure to plot."""
    name: str
    grid: dict
    figure: str
    quick: bool = False
    points: list = field(default_factory=list)


def sweep_request(name, specs, figure=None, quick=False):
    """Check everything a sweep is given before anything runs (:class:`SweepError`)."""
    sweep = _sweepable(name)
    grid = parse_grid(name, specs)
    figure = figure or sweep.figure
    if figure not in sweep.figures:
        raise SweepError(f"{name} has no figure {figure!r} (figures: {', '.join(sweep.figures)})")
    count = math.prod(len(v) for v in grid.values())
    if count > MAX_POINTS:
        raise SweepError(f"a grid of {count:,} points (at most {MAX_POINTS:,}: each point is a "
                         f"simulation of a minute or more)")
    return SweepRequest(name, grid, figure, quick, grid_points(name, grid, quick))


# -- a point -----------------------------------------------------------------------------------

def run_point(name, params, quick):
    """One grid point, wherever it runs: the benchmark's figures, its summary, and where and
    how long it ran."""
    from rich.console import Console
    sweep = _sweepable(name)
    started, t0 = time.time(), time.monotonic()
    result = sweep.run(params, quick, Console(file=io.StringIO()))
    return {"figures": sweep.summary(result, params), "result": result,
            "seconds": round(time.monotonic() - t0, 2), "started": round(started, 3),
            "finished": round(time.time(), 3), "host": socket.gethostname(),
            "pid": os.getpid(), "node": _node_id()}


def _node_id():
    try:
        import ray
        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:    # noqa: BLE001 (where a point ran is informative only)
        return None


def _failure(error):
    """One line for a point that failed in its task."""
    import ray.exceptions
    cause = getattr(error, "cause", None) if isinstance(error, ray.exceptions.RayTaskError) \
        else None
    if cause is not None:       # the exception the benchmark raised: its first line
        lines = str(cause).strip().splitlines()
        return f"{type(cause).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    lines = str(error).strip().splitlines()     # Ray's own (a worker died...): its last line
    return f"{type(error).__name__}: {lines[-1] if lines else ''}".rstrip(": ")


# -- the sweep ---------------------------------------------------------------------------------

def run_sweep(request, out, address=None, console=None):
    """Run every point of ``request`` as a Ray task of one CPU (joining the Ray at ``address``,
    or starting one here); write ``out/NAME.json`` and ``out/NAME.png``; return the JSON
    document. A point whose task failed has an ``error`` (one line) and no figures; the others
    are kept. A Ray this call started is shut down at the end; one already running is left."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, \
        TimeElapsedColumn
    console = console or Console(stderr=True)
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SweepError(f"cannot write the sweep's files to {out}: {e.strerror}") from None
    import ray
    import ray.exceptions
    from ..sim.rack.rack import start_ray
    started_here = not ray.is_initialized()
    t0 = time.monotonic()
    try:
        start_ray(address, progress=console.log)
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = (str(e).strip().splitlines() or [""])[0]
        raise SweepError(f"cannot {'join the Ray at ' + address if address else 'start Ray'}: "
                         f"{type(e).__name__}: {first}") from None
    try:
        task = ray.remote(num_cpus=1)(run_point)
        refs = {task.remote(request.name, params, request.quick): i
                for i, params in enumerate(request.points)}
        results = [None] * len(request.points)
        where = (f"Ray at {address}" if address else "a local Ray") + \
            f" ({int(ray.cluster_resources().get('CPU', 0))} CPUs)"
        pending = list(refs)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console) as progress:
            bar = progress.add_task(f"sweep {request.name} on {where}", total=len(pending))
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                i = refs[done[0]]
                label = _label(request.points[i], request.grid)
                try:
                    results[i] = ray.get(done[0])
                    value = results[i]["figures"].get(request.figure)
                    progress.console.print(
                        f"{label}: {request.figure} {value} ({results[i]['seconds']:.1f} s on "
                        f"{results[i]['host']}, pid {results[i]['pid']})")
                except ray.exceptions.RayError as e:
                    results[i] = {"error": _failure(e)}
                    progress.console.print(f"{label}: failed: {results[i]['error']}")
                progress.advance(bar)
        doc = {"sweep": request.name, "quick": request.quick, "figure": request.figure,
               "grid": request.grid,
               "fixed": {k: v for k, v in request.points[0].items() if k not in request.grid},
               "ray": {"address": address, "nodes": sum(1 for n in ray.nodes() if n["Alive"]),
                       "cpus": ray.cluster_resources().get("CPU", 0)},
               "seconds": None,
               "points": [{"params": params, **results[i]}
                          for i, params in enumerate(request.points)]}
    finally:
        if started_here:
            ray.shutdown()
    doc["seconds"] = round(time.monotonic() - t0, 1)
    json_path, plot_path = out / f"{request.name}.json", out / f"{request.name}.png"
    doc["plot"] = str(plot_path) if plot_sweep(doc, plot_path) else None
    doc["json"] = str(json_path)
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    return doc


def _label(params, grid):
    return " ".join(f"{k}={params[k]}" for k in grid)


# -- the plot and the table --------------------------------------------------------------------

def _numeric(values):
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def plot_sweep(doc, path):
    """``doc['figure']`` of every point that has it over the first numeric swept parameter
    (else the first one, as categories), one line per combination of the other swept
    parameters. ``False`` (nothing written) when no point has the figure."""
    grid, figure = doc["grid"], doc["figure"]
    rows = [p for p in doc["points"] if isinstance(p.get("figures", {}).get(figure),
                                                     (int, float))]
    if not rows:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x_name = next((k for k, v in grid.items() if _numeric(v)), next(iter(grid)))
    numeric = _numeric(grid[x_name])
    others = [k for k in grid if k != x_name]
    fig, ax = plt.subplots(figsize=(7, 4.5), constrained_layout=True)
    lines = {}
    for p in rows:
        key = tuple(p["params"][k] for k in others)
        x = p["params"][x_name] if numeric else grid[x_name].index(p["params"][x_name])
        lines.setdefault(key, []).append((x, p["figures"][figure]))
    for key, xy in lines.items():
        xy.sort()
        label = ", ".join(f"{k}={v}" for k, v in zip(others, key)) or None
        ax.plot([a for a, _ in xy], [b for _, b in xy], marker="o", label=label)
    if numeric:
        values = grid[x_name]
        if min(values) > 0 and max(values) >= 8 * min(values):
            ax.set_xscale("log", base=2)    # weights, flows: ratios matter
        ax.set_xticks(values, [str(v) for v in values])
        ax.minorticks_off()
    else:
        ax.set_xticks(range(len(grid[x_name])), [str(v) for v in grid[x_name]])
    fixed = ", ".join(f"{k}={v}" for k, v in doc["fixed"].items() if v is not None)
    ax.set(xlabel=x_name, ylabel=figure,
           title=f"snic sweep {doc['sweep']}" + (" --quick" if doc["quick"] else "")
           + (f" ({fixed})" if fixed else ""))
    ax.grid(True, alpha=0.3)
    if others:
        ax.legend(loc="best")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def show_sweep(doc, console):
    """A table of the points: swept parameters, the figures the benchmark shows, seconds,
    where each ran."""
    from rich.table import Table
    sweep = SWEEPS[doc["sweep"]]
    columns = list(dict.fromkeys((*sweep.columns, doc["figure"])))
    table = Table(title=f"snic sweep {doc['sweep']}: {len(doc['points'])} points in "
                        f"{doc['seconds']} s on {doc['ray']['cpus']:.0f} CPUs, "
                        f"{doc['ray']['nodes']} node(s)")
    for k in doc["grid"]:
        table.add_column(k, justify="right")
    for c in columns:
        table.add_column(c, justify="right")
    table.add_column("s", justify="right")
    table.add_column("where")
    for p in doc["points"]:
        cells = [str(p["params"][k]) for k in doc["grid"]]
        if "error" in p:
            table.add_row(*cells, f"[red]failed: {p['error']}[/]", *[""] * (len(columns) + 1))
            continue
        cells += [str(p["figures"].get(c, "-")) for c in columns]
        table.add_row(*cells, f"{p['seconds']:.1f}", f"{p['host']}:{p['pid']}")
    console.print(table)


def _default(param):
    full, quick = param.default(False), param.default(True)
    return str(full) if full == quick else f"{full}; --quick: {quick}"


def show_sweeps(console):
    """The sweepable benchmarks, their parameters and figures."""
    from rich.table import Table
    table = Table(title="sweepable benchmarks (snic sweep NAME --grid P=V1,V2,...)")
    for c in ("name", "what it measures", "parameters (default)"):
        table.add_column(c)
    for s in SWEEPS.values():
        params = "\n".join(f"{p.name}: {p.doc} ({_default(p)})" for p in s.params.values())
        table.add_row(s.name, s.doc, params)
    console.print(table)
    for s in SWEEPS.values():
        console.print(f"{s.name} figures (--figure; plotted by default: {s.figure}): "
                      f"{', '.join(s.figures)}")
