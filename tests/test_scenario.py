"""Bench scenarios (sim/tb/scenario.py, sim/tb/bench_env.py): one JSON object per run.

The NIC test's typed scenario survives the trip to the bench and back, step for step; a
scenario with a field or step the bench does not know is refused, not silently ignored; a
bench reads its parameters with their JSON types from the one object run_bench passes.
"""

import json
import subprocess
import sys

import pytest

from supernic.sim.tb.scenario import (DrainShared, Migrate, MoveRegion, NicScenario, Suspend,
                                      Switch)


def test_a_nic_scenario_round_trips_through_json():
    scenario = NicScenario(seed=31, packets=1200, policy="fifo", malformed=0.0,
                           spare_regions=(4, 5), time_share=3,
                           steps=(Migrate(source=3, target=5, at=0.25), MoveRegion(),
                                  Suspend(regions=(5, 2)), Switch(tenant=3, at=0.5),
                                  DrainShared()))
    raw = json.loads(json.dumps(scenario.to_json()))
    assert [s["step"] for s in raw["steps"]] == ["migrate", "move_region", "suspend", "switch",
                                                 "drain_shared"]
    assert NicScenario.from_json(raw) == scenario
    assert NicScenario.from_json({}) == NicScenario()


@pytest.mark.parametrize("raw,error,match", [
    ({"seeds": 3}, ValueError, r"Unknown NIC scenario fields \['seeds'\]"),
    ({"steps": [{"step": "teleport", "at": 0.5}]}, KeyError, "teleport"),
    ({"steps": [{"step": "migrate", "source": 3, "target": 5, "at": 1.5}]}, ValueError,
     "a fraction of the input"),
    ({"steps": [{"step": "switch", "at": 0.5}]}, TypeError, "tenant"),
])
def test_a_scenario_the_bench_does_not_know_is_refused(raw, error, match):
    with pytest.raises(error, match=match):
        NicScenario.from_json(raw)


def test_steps_must_be_steps():
    with pytest.raises(TypeError, match="A scenario step must be one of"):
        NicScenario(steps=({"step": "migrate"},))


def test_a_bench_reads_its_parameters_with_their_types():
    code = ("from supernic.sim.tb.bench_env import env, scenario; "
            "print(repr((env('packets', 5, int), env('malformed', 0.5, float), "
            "env('sizes', 'light'), env('absent', 7, int), scenario()['weights'])))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"SNIC_SCENARIO": json.dumps({
                             "packets": 300, "malformed": 0.25, "sizes": "mixed",
                             "weights": [1, 2]})}).stdout
    assert out.strip() == "(300, 0.25, 'mixed', 7, [1, 2])"
