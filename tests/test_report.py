"""snic report: the Markdown report's mechanics on benchmark results of the benches' shapes
(the benchmarks themselves are tested on their own): headline rows with goal, baseline and
verdict, plots written, a result missing a figure reported as such, unknown sections refused."""

import pytest
from rich.console import Console

from supernic.desc.config import DesignConfig
from supernic.tools.report import headlines, make_report


def _board():
    def build(lut, fmax):
        return {"lut": lut, "lut_available": 83640, "ff": lut, "ff_available": 83640,
                "bram": 4, "bram_available": 208, "dsp": 0, "dsp_available": 156,
                "fmax_mhz": fmax, "fmax_target_mhz": 125.0, "timing_met": fmax >= 125,
                "build_seconds": 20.0, "cached": False}
    return {"benchmark": "board", "board": "ecpix5_85", "device": "LFE5UM5G-85F",
            "config": "ecpix5_85", "data_width": 64, "nic": build(60000, 101.5),
            "loopback": build(1036, 146.8), "nic_lut_share_of_part": 0.7174,
            "nic_over_loopback_lut": 57.9, "goal_fmax_mhz": 125.0, "meets_goal": False}


def _fairness():
    return {"benchmark": "fairness", "tenants": [], "ideal_dominant_shares": {},
            "policies": {"drf": {"jain": 0.994, "tenants": {}},
                         "rr": {"jain": 0.676, "tenants": {}}},
            "drf_jain": 0.994, "drf_goal_met": True}


RESULTS = {"board": _board(), "fairness": _fairness(),
           "scaling": {"benchmark": "scaling", "points": []}}     # figures missing


def test_headlines_carry_goal_baseline_and_verdict():
    fmax = headlines("board", _board())[0]
    assert fmax["measured"] == 101.5 and fmax["met"] is False
    assert "loopback top 146.8" in fmax["baseline"]
    jain = headlines("fairness", _fairness())[0]
    assert jain["met"] is True and "rr 0.676" in jain["baseline"]
    missing = headlines("scaling", RESULTS["scaling"])
    assert len(missing) == 1 and "figures missing" in missing[0]["figure"]


def test_report_written(tmp_path, monkeypatch):
    import supernic.tools.benchmarks as benchmarks
    # The benches' own tables need every figure of a real run: stand-ins print a line.
    for name in RESULTS:
        monkeypatch.setitem(benchmarks.BENCHMARKS, name, benchmarks.Benchmark(
            name, None, lambda result, console: console.print(f"table of {result['benchmark']}")))
    path = make_report(DesignConfig(name="x", data_width=64), tmp_path,
                       Console(file=open(tmp_path / "log", "w")),
                       only=["board", "fairness", "scaling"], run=lambda name: RESULTS[name])
    text = path.read_text()
    assert "2 of 3 goals met" in text and "table of fairness" in text
    assert "| board | fmax of ecpix5_85 on ecpix5_85 (MHz) | 101.5 | ≥ 125 | no |" in text
    assert (tmp_path / "board.png").stat().st_size > 1000
    assert (tmp_path / "fairness.png").exists() and (tmp_path / "json/board.json").exists()
    assert "figures missing" in text


def test_unknown_section(tmp_path):
    with pytest.raises(ValueError, match="no report section 'nosuch'"):
        make_report(DesignConfig(), tmp_path, Console(), only=["nosuch"],
                    run=lambda name: {})
