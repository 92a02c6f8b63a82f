"""What every cocotb bench reads: its scenario, the design, and where it writes its summary.

pytest (through :func:`supernic.sim.session.run_bench`) passes the run's scenario as one JSON
object in ``SNIC_SCENARIO`` (a bench's parameters by name with their JSON types, or a typed
scenario's ``to_json()``, e.g. :class:`~supernic.sim.tb.scenario.NicScenario`), the design
description's path as ``SNIC_REGMAP``, and a file for the JSON summary as ``SNIC_RESULT``.
"""

import functools
import json
import os

__all__ = ["scenario", "env", "design", "write_result"]


@functools.cache
def scenario():
    """The run's scenario, one JSON object (empty when none was given)."""
    return json.loads(os.environ.get("SNIC_SCENARIO", "{}"))


def env(name, default, kind=str):
    """Parameter ``name`` of the scenario (``default`` without it), converted by ``kind``."""
    return kind(scenario().get(name, default))


def design():
    """The design description (hw/generate.py ``design_description`` or a shell's own)."""
    with open(os.environ["SNIC_REGMAP"]) as f:
        return json.load(f)


def write_result(result):
    """Write the bench's JSON summary where the caller asked for it, if it did."""
    if "SNIC_RESULT" in os.environ:
        with open(os.environ["SNIC_RESULT"], "w") as f:
            json.dump(result, f)
