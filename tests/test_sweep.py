"""`snic sweep` (tools/sweep.py): the grid parser; bad input refused in one line before Ray
starts; a scaling point against `snic bench scaling` itself (scenario and figures, on a fake
simulation); a real fairness sweep on a local Ray, each point checked against the benchmark
run directly with the same parameters, run as its own task, in parallel; a point that fails in
its task reported as such, the sweep's files still written."""

import io
import json
import os
import socket
import subprocess
import sys

import pytest
from rich.console import Console

from supernic.desc.config import DesignConfig
from supernic.driver.cli import main
from supernic.tools import bench_nic
from supernic.tools import sweep as sw
from supernic.tools.sweep import SweepError, grid_points, parse_grid, sweep_request


def _quiet():
    return Console(file=io.StringIO())


def _without(result, *keys):
    return {k: v for k, v in result.items() if k not in keys}


# -- the grid, without Ray ---------------------------------------------------------------------

def test_lists_and_ranges():
    assert parse_grid("scaling", ["instances=1..3", "flows=256, 1024..1026"]) == {
        "instances": [1, 2, 3], "flows": [256, 1024, 1025, 1026]}
    grid = parse_grid("fairness", ["weight=1,2.5,0.5", "policy=drr,drf"])
    assert grid == {"weight": [1, 2.5, 0.5], "policy": ["drr", "drf"]}
    assert [type(w) for w in grid["weight"]] == [int, float, float]
    assert parse_grid("fairness", ["tenant=compute"]) == {"tenant": ["compute"]}


def test_points_are_the_product_in_grid_order_with_defaults():
    points = grid_points("fairness", {"policy": ["drf", "fifo"], "weight": [1, 2]})
    assert points == [{"tenant": "flood", "policy": p, "weight": w, "window": 20000}
                      for p in ("drf", "fifo") for w in (1, 2)]
    assert grid_points("fairness", {"weight": [2]}, quick=True) == [
        {"tenant": "flood", "policy": "drf", "weight": 2, "window": 6000}]
    assert grid_points("scaling", {"instances": [2]}, quick=True) == [
        {"instances": 2, "flows": 1024}]
    assert grid_points("scaling", {"instances": [2]}) == [{"instances": 2, "flows": 4096}]
    request = sweep_request("scaling", ["flows=64", "instances=1..2"], quick=True)
    assert request.figure == "speedup" and request.points == [
        {"flows": 64, "instances": 1}, {"flows": 64, "instances": 2}]


BAD = [
    (["nope", "--grid", "x=1"], "unknown sweep benchmark 'nope' (sweepable: fairness, scaling)"),
    (["fairness"], "an empty grid"),
    (["fairness", "--grid", "weight="], "no values for weight"),
    (["fairness", "--grid", "weight"], "expected P=V1,V2,... or P=A..B"),
    (["fairness", "--grid", "colour=1"], "fairness has no parameter 'colour'"),
    (["fairness", "--grid", "weight=x"], "'x' is not a number"),
    (["fairness", "--grid", "weight=0"], "'0' is not a positive number"),
    (["fairness", "--grid", "weight=inf"], "'inf' is not a positive number"),
    (["fairness", "--grid", "weight=100"], "100 is not a weight the scheduler takes"),
    (["fairness", "--grid", "weight=1,1"], "a value given twice"),
    (["fairness", "--grid", "weight=1..3"], "ranges A..B are for integer parameters"),
    (["fairness", "--grid", "weight=1", "--grid", "weight=2"], "weight is already swept"),
    (["fairness", "--grid", "policy=wfq"], "'wfq' is not one of drf, drr, rr, fifo"),
    (["fairness", "--grid", "window=10"], "10 is not from 500 to 1000000"),
    (["fairness", "--grid", "tenant=eve"], "'eve' is not one of flood, bulk, compute, light"),
    (["scaling", "--grid", "instances=0..4"], "0 is not from 1 to 4"),
    (["scaling", "--grid", "instances=3..1"], "'3..1' is an empty range"),
    (["scaling", "--grid", "instances=5"], "5 is not from 1 to 4"),
    (["scaling", "--grid", "instances=1,,2"], "an empty value"),
    (["scaling", "--grid", "instances=1", "--figure", "jain"], "scaling has no figure 'jain'"),
    (["scaling", "--grid", "flows=1..2000"], "a grid of 2,000 points (at most 1,000"),
]


@pytest.mark.parametrize("argv,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_before_ray(monkeypatch, capsys, argv, message):
    def started(*args, **kwargs):
        raise AssertionError("the sweep ran")
    monkeypatch.setattr(sw, "run_sweep", started)
    assert main(["sweep", *argv, "--quick"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1, captured.err
    assert captured.err.startswith("snic: error: ") and message in captured.err, captured.err
    with pytest.raises(SweepError):
        sweep_request(argv[0], [a for i, a in enumerate(argv) if i and argv[i - 1] == "--grid"],
                      figure=argv[-1] if "--figure" in argv else None)


# -- a scaling point is snic bench scaling, on a fake simulation -------------------------------

def _fake_scaling(seen):
    """The bench's scaling scenario as the simulation would answer it: per instance count
    made-up but distinct rates (the same for a count whatever else the scenario lists)."""
    def run_bench(sim, testcase, scenario, module):
        assert testcase == "scaling" and module == "supernic.sim.tb.nic_bench_tb"
        seen.append(scenario)
        points = []
        for k in range(1, len(scenario["instances"]) + 1):
            p = {"instances": k, "beats_per_cycle": 0.21 * k * (1 - 0.013 * k), "window": 4000,
                 "hash_bound": 1 - 0.011 * (k - 1)}
            if k > 1:
                p.update(auto_beats_per_cycle=0.21 * k * 0.993, auto_window=4068,
                         auto_rebalances=[{"reason": "instances"}], auto_bound=0.995,
                         rebalanced_beats_per_cycle=0.21 * k * 0.981, rebalanced_window=4040,
                         rebalanced_bound=0.97 - 0.01 * k)
            points.append(p)
        return {"points": points,
                "reconfig_cycles": {str(r): 900 + r for r in scenario["instances"]},
                "reaction": {"decided": 1500, "configured": 1700, "online": 2600,
                             "committed": 5100, "first_packet": 5160}}
    return run_bench


def test_a_scaling_point_is_the_bench(monkeypatch):
    seen = []
    monkeypatch.setattr(bench_nic, "run_bench", _fake_scaling(seen))
    monkeypatch.setattr(bench_nic, "_sim", lambda status, log: None)
    bench = bench_nic.scaling_bench(DesignConfig(), _quiet(), True)
    (bench_scenario,) = seen
    for n in (4, 3, 2, 1):
        seen.clear()
        point = sw.run_point("scaling", {"instances": n, "flows": 1024}, True)
        json.dumps(point)
        (scenario,) = seen
        # One instance still loads a spare region: the bench's reaction measures a scale-out.
        assert scenario == {**bench_scenario, "instances": [2, 0, 1, 3][:max(n, 2)]}
        assert point["result"]["points"] == bench["points"][:n]
        assert point["figures"] == {
            **{k: bench["points"][n - 1][k] for k in sw._SCALING_POINT
               if k in bench["points"][n - 1]},
            **{f"reaction.{k}": v for k, v in bench["reaction"].items()}}
        if n == 4:      # the very run of snic bench scaling --quick, figure for figure
            assert _without(point["result"], "seconds") == _without(bench, "seconds")
    assert point["figures"]["speedup"] == 1.0 and "auto_speedup" not in point["figures"]
    seen.clear()
    point = sw.run_point("scaling", {"instances": 2, "flows": 300}, True)
    assert seen[0]["flows"] == 300 and point["result"]["flows"] == 300
    assert seen[0] == {**bench_scenario, "instances": [2, 0], "flows": 300}


# -- on a local Ray ----------------------------------------------------------------------------

_DIRECT = """
import io, json
from rich.console import Console
from supernic.desc.config import DesignConfig
from supernic.tools.bench_nic import FAIRNESS_TENANTS, fairness_bench
tenants = [dict(t, weight=4 if t["name"] == "flood" else 1) for t in FAIRNESS_TENANTS]
print(json.dumps(fairness_bench(DesignConfig(), Console(file=io.StringIO()), True,
                                tenants=tenants, policies=("drf",), window=WINDOW)))
"""


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module (a sweep leaves a Ray it did not start running)."""
    from supernic.sim.rack.rack import start_ray
    ray = start_ray()
    yield ray
    ray.shutdown()


def test_fairness_sweep_on_ray_is_the_bench_run_directly(local_ray, tmp_path, capsys):
    """Two weights of the flood tenant: each point the fairness bench's own figures for that
    weight (the second one run again here, in this process), as separate Ray tasks in
    parallel, in one JSON file (also printed) and one PNG."""
    # The benchmark itself with flood at weight 4, run directly in a process of its own (no
    # Ray) while the sweep runs: three simulations on two cores take less than two after one.
    # A short window (the warm-up stays the quick bench's): three NIC simulations are most of
    # this test's time.
    window = 1500
    direct = subprocess.Popen([sys.executable, "-c", _DIRECT.replace("WINDOW", str(window))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert main(["sweep", "fairness", "--grid", "weight=1,4", "--grid", f"window={window}",
                 "--quick", "--out", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert json.loads((tmp_path / "fairness.json").read_text()) == doc
    assert doc["json"] == str(tmp_path / "fairness.json")
    assert doc["plot"] == str(tmp_path / "fairness.png")
    png = (tmp_path / "fairness.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    assert "Traceback" not in captured.err
    assert doc["grid"] == {"weight": [1, 4], "window": [window]}
    assert doc["fixed"] == {"tenant": "flood", "policy": "drf"}
    points = doc["points"]
    assert [p["params"] for p in points] == [
        {"tenant": "flood", "policy": "drf", "weight": w, "window": window} for w in (1, 4)]
    assert all(p["result"]["window_cycles"] == window for p in points)
    for p in points:
        assert "error" not in p
        assert p["host"] == socket.gethostname() and p["pid"] != os.getpid()
        assert 0 < p["seconds"] <= p["finished"] - p["started"] + 0.01
        assert p["node"] and p["figures"]["jain"] == p["result"]["policies"]["drf"]["jain"]
        assert p["figures"]["tenant_share"] == \
            p["result"]["policies"]["drf"]["tenants"]["flood"]["dominant_share"]
    if (os.cpu_count() or 1) > 1:
        # Separate tasks, in parallel: two worker processes, their runs overlapping in time.
        assert points[0]["pid"] != points[1]["pid"]
        assert max(p["started"] for p in points) < min(p["finished"] for p in points)
    one, four = (p["result"] for p in points)
    assert [t["weight"] for t in four["tenants"]] == [4, 1, 1, 1]
    assert [t["weight"] for t in one["tenants"]] == [1, 1, 1, 1]
    assert one["ideal_dominant_shares"] != four["ideal_dominant_shares"]
    # The benchmark run directly with the same parameters: the same figures (the simulation
    # is deterministic).
    out, err = direct.communicate(timeout=600)
    assert direct.returncode == 0, err
    assert _without(four, "seconds") == _without(json.loads(out), "seconds")
    # The table of the same document.
    console = Console(file=io.StringIO(), width=200)
    sw.show_sweep(doc, console)
    table = console.file.getvalue()
    for p in points:
        assert f"{p['host']}:{p['pid']}" in table and str(p["figures"]["jain"]) in table


def test_a_point_that_fails_in_its_task(local_ray, tmp_path, monkeypatch, capsys):
    """A benchmark the driver knows and the workers do not: each task fails, each point says
    why in one line, the JSON is still written (no plot: no figures), the exit code is 1."""
    monkeypatch.setitem(sw.SWEEPS, "ghost", sw.SWEEPS["fairness"])
    assert main(["sweep", "ghost", "--grid", "weight=1,2", "--out", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    doc = json.loads((tmp_path / "ghost.json").read_text())
    assert [p["error"] for p in doc["points"]] == [
        "SweepError: unknown sweep benchmark 'ghost' (sweepable: fairness, scaling)"] * 2
    assert doc["plot"] is None and not (tmp_path / "ghost.png").exists()
    assert "failed:" in captured.out and f"json: {tmp_path / 'ghost.json'}" in captured.out
    assert "Traceback" not in captured.err
