"""Liveness seeds: an earlier analysis's result, by name, to start the next one from.

The liveness search (liveness.py) is greedy and slow where a pipeline is deep: each stage's
registers are tried dead while the stages before them are still live, so they first get every
guard candidate, and lose the spares one re-check at a time as those stages die (the 512-bit
rate limiter: six minutes, most of the default NIC's first build). Checking a finished result
takes about a second. A seed is such a result: ``{flip-flop name: [guard names]}``.
:func:`liveness.analyse` checks it with the same checks as its final step and starts its
search from it only if they hold, so a stale or wrong seed costs a second and changes nothing.

Seeds come from two places, newest first:

* the cache (``<cache>/liveness-seeds``): every analysis leaves its result there, so the next
  one of the same component (after an edit, at another fingerprint) starts from it;
* ``liveness_seeds.json`` beside this file, shipped with the package, so a fresh machine's
  first ``snic demo`` does not search. ``python -m supernic.tools.liveness_seeds`` rewrites
  it; ``tests/test_transform.py`` checks that every shipped seed still holds.

A seed is keyed by the component's class, data width, and whether it is analysed as a part
under its stream contract. ``SNIC_LIVENESS_SEEDS=0`` turns seeds off (a cold search).
"""

import hashlib
import json
import os
from pathlib import Path

from ...cache import cache_root

__all__ = ["SHIPPED", "seed_key", "find_seed", "remember_seed", "seeds_enabled",
           "load_shipped"]

SHIPPED = Path(__file__).with_name("liveness_seeds.json")


def seeds_enabled():
    return os.environ.get("SNIC_LIVENESS_SEEDS", "1") != "0"


def seed_key(component, contract):
    cls = type(component)
    width = getattr(component, "data_width", None)
    return f"{cls.__module__}.{cls.__qualname__}/w{width}/{'part' if contract else 'whole'}"


def load_shipped():
    try:
        return json.loads(SHIPPED.read_text())
    except FileNotFoundError:
        return {}


def _cache_path(key):
    digest = hashlib.sha256(key.encode()).hexdigest()[:24]
    return cache_root() / "liveness-seeds" / f"{digest}.json"


def find_seed(key):
    """The newest seed for ``key`` (the cache's, else the shipped one), or None."""
    if not seeds_enabled():
        return None
    path = _cache_path(key)
    if path.exists():
        try:
            raw = json.loads(path.read_text())
            if raw.get("key") == key:
                return raw["seed"]
        except (ValueError, KeyError):
            pass                # a damaged entry is only a missed seed
    return load_shipped().get(key)


def remember_seed(key, seed):
    """File ``seed`` in the cache for the next analysis of ``key`` (atomically)."""
    path = _cache_path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps({"key": key, "seed": seed}, sort_keys=True))
    partial.replace(path)
