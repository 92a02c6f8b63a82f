"""`snic bench build`: how long a first build takes, phase by phase, from an empty cache.

A user's first `snic demo` generates the design (the liveness analyses of its transformed NTs,
then the conversion to Verilog) and builds the cocotb simulator; a first `snic device serve`
generates it and builds the virtual device's library. Both are run here in a fresh temporary
cache (``SNIC_CACHE`` points at it for the run, so Verilator's runtime objects are compiled too,
as on a fresh machine), then again from that cache: the warm run is the baseline, what every
later run pays, and each first build is quoted against it. The generation runs a third time
from another empty cache with the liveness seeds off (hw/transform/seeds.py): the searches the
seeds save, ``analyses_seedless_over_seeded``.
"""

import contextlib
import os
import tempfile
import time

from ..sim.build import generated_design
from ..cache import cache_root
from ..sim.session import design_simulator, quiet_fds
from ..sim.vdev.build import build_library

__all__ = ["build_bench", "build_show"]


@contextlib.contextmanager
def _cache_at(path):
    old = os.environ.get("SNIC_CACHE")
    os.environ["SNIC_CACHE"] = str(path)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SNIC_CACHE", None)
        else:
            os.environ["SNIC_CACHE"] = old


def _generate(config, progress):
    """``(paths, seconds)`` of generating the design, split at the generator's own progress
    messages into ``generate_s``, ``analyses_s`` and ``convert_s``."""
    marks = {}

    def note(message):
        for key in ("analysing", "converting"):
            if message.startswith(key):
                marks.setdefault(key, time.monotonic())
        progress(message)
    t0 = time.monotonic()
    paths = generated_design(config, progress=note)
    t1 = time.monotonic()
    convert = marks.get("converting", t0)
    analyses = marks.get("analysing", convert)
    return paths, {"generate_s": t1 - t0, "analyses_s": convert - analyses,
                   "convert_s": t1 - convert}


def _builds(config, progress):
    """Seconds of each step of a demo's and a device server's build."""
    paths, out = _generate(config, progress)
    t1 = time.monotonic()
    design_simulator(config, progress=progress)
    t2 = time.monotonic()
    build_library(paths["verilog"], progress=progress)
    t3 = time.monotonic()
    return {**out, "simulator_s": t2 - t1, "device_library_s": t3 - t2}


@contextlib.contextmanager
def _without_seeds():
    """The liveness analyses search from nothing (hw/transform/seeds.py), as before seeds."""
    old = os.environ.get("SNIC_LIVENESS_SEEDS")
    os.environ["SNIC_LIVENESS_SEEDS"] = "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SNIC_LIVENESS_SEEDS", None)
        else:
            os.environ["SNIC_LIVENESS_SEEDS"] = old


def build_bench(config, console, quick=False):
    log = cache_root() / "logs" / "bench-build.log"
    result = {"benchmark": "build", "design": f"{config.name} ({config.data_width}-bit)",
              "log": str(log)}
    with console.status("build bench") as status, \
            tempfile.TemporaryDirectory(prefix="snic-bench-build-") as empty:
        with _cache_at(empty), quiet_fds(log):
            cold = _builds(config, lambda m: status.update(f"first build: {m}"))
            warm = _builds(config, lambda m: status.update(f"warm build: {m}"))
        # The baseline of the seeds: the same generation from an empty cache, searching.
        with tempfile.TemporaryDirectory(prefix="snic-bench-build-") as empty, \
                _cache_at(empty), _without_seeds(), quiet_fds(log):
            _paths, seedless = _generate(
                config, lambda m: status.update(f"first build without seeds: {m}"))
    result["first"] = {k: round(v, 1) for k, v in cold.items()}
    result["seedless"] = {k: round(v, 1) for k, v in seedless.items()}
    result["analyses_seedless_over_seeded"] = round(
        seedless["analyses_s"] / max(cold["analyses_s"], 0.1), 1)
    result["warm"] = {k: round(v, 2) for k, v in warm.items()}
    for what, step in (("demo", "simulator_s"), ("device_serve", "device_library_s")):
        first = cold["generate_s"] + cold[step]
        again = warm["generate_s"] + warm[step]
        result[f"{what}_first_build_s"] = round(first, 1)
        result[f"{what}_warm_build_s"] = round(again, 2)
        result[f"{what}_first_over_warm"] = round(first / again, 1)
    return result


def build_show(result, console):
    from rich.table import Table
    table = Table(title=f"first build from an empty cache, {result['design']} "
                        f"(warm: from the cache it filled)")
    for col in ("step", "first (s)", "warm (s)", "first, no seeds (s)"):
        table.add_column(col, justify="right" if col != "step" else "left")
    names = {"generate_s": "generate Verilog", "analyses_s": "  liveness analyses",
             "convert_s": "  conversion", "simulator_s": "cocotb simulator (snic demo)",
             "device_library_s": "device library (snic device serve)"}
    for key, name in names.items():
        seedless = result.get("seedless", {}).get(key)
        table.add_row(name, f"{result['first'][key]:.1f}", f"{result['warm'][key]:.2f}",
                      "" if seedless is None else f"{seedless:.1f}")
    console.print(table)
    console.print(f"first `snic demo` build {result['demo_first_build_s']} s, "
                  f"first `snic device serve` build {result['device_serve_first_build_s']} s")
