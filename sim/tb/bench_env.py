"""What every cocotb bench reads from its environment and where it writes its summary.

pytest (through :func:`supernic.sim.session.run_bench`) passes parameters as ``SNIC_*``
variables, the design description's path as ``SNIC_REGMAP``, and a file for the JSON summary as
``SNIC_RESULT``.
"""

import json
import os

__all__ = ["env", "design", "write_result"]


def env(name, default, kind=str):
    """Parameter ``name`` from the environment, converted by ``kind``."""
    return kind(os.environ.get(name, default))


def design():
    """The design description (hw/generate.py ``design_description`` or a shell's own)."""
    with open(os.environ["SNIC_REGMAP"]) as f:
        return json.load(f)


def write_result(result):
    """Write the bench's JSON summary where the caller asked for it, if it did."""
    if "SNIC_RESULT" in os.environ:
        with open(os.environ["SNIC_RESULT"], "w") as f:
            json.dump(result, f)
