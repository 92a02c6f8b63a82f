"""The simulator's own options, measured on a design's NIC: what pays on these machines.

Each build variant of :data:`.build.VARIANTS` that can speed the virtual device up is built and
run on the same workload as ``snic bench device`` (two tenants saturating both ports), beside
the normal build, in one run:

* ``threads2``: Verilator's ``--threads 2``;
* ``pgo``: GCC's profile-guided optimisation: the ``pgo-train`` build runs the workload in a
  child process (the counts are written when it exits), then the ``pgo`` build compiles with
  them.

Each row gives the build's seconds (0 when it came from the cache) and its cycles/s, and the
ratio to the normal build. Nothing here changes what ``VirtualDevice.build`` uses by default:
the note that comes with the figures says what was kept.
"""

import pickle
import subprocess
import sys
import time
from pathlib import Path

from .build import build_library

__all__ = ["option_rates"]


def _train(config, cycles):
    from .bench import nic_saturated_rate
    nic_saturated_rate(config, cycles, progress=lambda m: None, variant="pgo-train")


def _timed_build(verilog, variant, progress, profile_data=None):
    t = time.monotonic()
    library, _ = build_library(verilog, progress=progress, variant=variant,
                               profile_data=profile_data)
    return library, round(time.monotonic() - t, 1)


def option_rates(config, cycles=100_000, variants=("threads2", "pgo"), progress=print):
    """``{"normal": {...}, variant: {...}}``, each with ``build_seconds``, ``cycles_per_s`` and
    (variants) ``ratio`` to the normal build."""
    from ..build import generated_design
    from .bench import nic_saturated_rate
    verilog = generated_design(config, progress=progress)["verilog"]
    rows = {}
    for variant in (None, *variants):
        name = variant or "normal"
        if variant == "pgo":
            library, seconds = _timed_build(verilog, "pgo-train", progress)
            obj = Path(library).parent / "obj"
            for old in obj.glob("*.gcda"):   # counts add up over runs: train from zero
                old.unlink()
            progress(f"training run of the pgo-train build ({cycles:,} cycles)...")
            t = time.monotonic()
            # A child process of its own: the counts are written when it exits.
            child = subprocess.run(
                [sys.executable, "-c", "import pickle, sys; from supernic.sim.vdev.options "
                 "import _train; _train(*pickle.loads(sys.stdin.buffer.read()))"],
                input=pickle.dumps((config, cycles)), capture_output=True)
            if child.returncode:
                tail = child.stderr.decode(errors="replace").strip().splitlines()[-1:]
                raise RuntimeError(f"the PGO training run failed (exit {child.returncode}): "
                                   f"{' '.join(tail)}")
            train = round(time.monotonic() - t, 1)
            _, more = _timed_build(verilog, "pgo", progress, profile_data=obj)
            seconds = round(seconds + train + more, 1)
            run = nic_saturated_rate(config, cycles, progress=progress, variant="pgo",
                                     profile_data=obj)
        else:
            _, seconds = _timed_build(verilog, variant, progress)
            run = nic_saturated_rate(config, cycles, progress=progress, variant=variant)
        rows[name] = {"build_seconds": seconds, "cycles_per_s": round(run["cycles_per_s"]),
                      "delivered": run["delivered"]}
    base = rows["normal"]["cycles_per_s"]
    for name, row in rows.items():
        row["ratio"] = round(row["cycles_per_s"] / base, 3)
    return {"cycles": cycles, "design": config.name, "width": config.data_width, **rows}
