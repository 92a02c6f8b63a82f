"""Rewrite the shipped liveness seeds (hw/transform/liveness_seeds.json, see seeds.py).

    python -m supernic.tools.liveness_seeds [--widths 64,512] [--only KIND,KIND] [--cold] [-j N]

Analyses every NT of the library (or ``--only`` those) at each data width, in a scratch cache
so nothing cached is reused, and files each result as the seed of its key: the NT analysed
as a part under its stream contract (how a chain personality analyses it), and whole where
the contract does not hold. Seeds already shipped start each search (the search then checks
them and looks for more) unless ``--cold``: after a change to the analysis itself, regenerate
cold so the shipped seeds are what a search from nothing finds. Prints each analysis's time.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

__all__ = ["main"]


def _analyse(kind, width, cold):
    """``(kind, width, seconds, {key: seed})`` of one NT, in a scratch cache."""
    with tempfile.TemporaryDirectory(prefix="snic-seeds-") as scratch:
        os.environ["SNIC_CACHE"] = scratch
        if cold:
            os.environ["SNIC_LIVENESS_SEEDS"] = "0"
        from supernic.hw.nt.task import task_class
        from supernic.hw.transform.yieldable import state_map_of
        t0 = time.monotonic()
        state_map_of(task_class(kind)(width))
        seconds = time.monotonic() - t0
        found = {}
        for path in (Path(scratch) / "liveness-seeds").glob("*.json"):
            raw = json.loads(path.read_text())
            found[raw["key"]] = raw["seed"]
        return kind, width, seconds, found


def main(argv=None):
    from rich.console import Console

    from supernic.hw.nt.task import task_classes
    from supernic.hw.transform.seeds import SHIPPED, load_shipped

    ap = argparse.ArgumentParser(prog="python -m supernic.tools.liveness_seeds",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="64,512")
    ap.add_argument("--only", default="", help="comma-separated NT kinds (default: all)")
    ap.add_argument("--cold", action="store_true", help="search from nothing")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)
    kinds = [k for k in args.only.split(",") if k] or list(task_classes())
    widths = [int(w) for w in args.widths.split(",")]
    console = Console(stderr=True)
    seeds = load_shipped()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        jobs = [pool.submit(_analyse, k, w, args.cold) for k in kinds for w in widths]
        for job in as_completed(jobs):
            kind, width, seconds, found = job.result()
            console.print(f"{kind:<14} {width:>4} bits  {seconds:7.1f} s  "
                          f"{sum(len(s) for s in found.values()):4d} dead registers")
            seeds.update(found)
    SHIPPED.write_text(json.dumps(dict(sorted(seeds.items())), indent=1, sort_keys=True) + "\n")
    console.print(f"wrote {SHIPPED} ({len(seeds)} seeds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
