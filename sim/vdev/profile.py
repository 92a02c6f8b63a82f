"""Where a simulated cycle goes, block by block: Verilator's own profiling under ``perf``.

A profiling build of the virtual device (``build_library(..., variant="profile")``: Verilator's
``--prof-cfuncs``, compiled without inlining) makes every statement of the model a C++ function
named after the Verilog file and line it came from (``..._PROF__<file>__l<line>``).
``perf record`` samples the process while the device runs; each sample's function gives a line,
the line gives the Verilog module it sits in, and the module's place in the instance tree gives
the block: an instance of the top module (``parser0``, ``scheduler``, ``region2``, ``csr`` is
the register file). A module that several blocks instantiate (the two parsers share one module,
regions share personalities) is charged to them in proportion to their instances: Verilator
evaluates every instance every cycle, so equal shares are what the profile cannot tell apart.

Samples outside the model (the harness, Python, Verilator's scheduling loop) are reported as
``outside the design``. The share of each phase Verilator evaluates (``ico``: logic of the
top-level inputs, evaluated on every ``eval()``; ``act``/``nba``: the clock edge's triggers and
sequential logic) comes with it, because the first is what registering inputs would remove.
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["VerilogStructure", "read_structure", "PerfUnavailable", "perf_available",
           "sampled", "perf_symbols", "block_profile", "OUTSIDE"]

OUTSIDE = "outside the design"

_IDENT = r"(\\\S+ |[A-Za-z_][\w$]*)"
_MODULE = re.compile(r"^module " + _IDENT + r"\s*\(")
_INSTANCE = re.compile(r"^\s+" + _IDENT + r"\s+" + _IDENT + r"\s*\($")
_PROF = re.compile(r"_(ico|act|nba|stl)_\w*?__PROF__\w*__l(\d+)")


def _name(ident):
    return ident[1:].strip() if ident.startswith("\\") else ident


@dataclass
class VerilogStructure:
    """Modules of one Verilog file: their line ranges and the instances each holds."""
    top: str
    spans: list = field(default_factory=list)          # (first line, last line, module)
    instances: dict = field(default_factory=dict)      # module -> [(child module, name)]

    def module_at(self, line):
        for first, last, module in self.spans:
            if first <= line <= last:
                return module
        return None

    def lines(self, module):
        return sum(last - first + 1 for first, last, m in self.spans if m == module)

    def paths(self):
        """``{module: {instance path: weight}}``: every path of instance names from the top
        to an instance of the module, each weighted 1 / (the module's instances), so a
        module's weights sum to 1. The top's own logic has the path ``()``."""
        found = defaultdict(list)

        def walk(module, path):
            found[module].append(path)
            for child, name in self.instances.get(module, ()):
                if child in self.instances and child not in path:
                    walk(child, path + (name,))

        walk(self.top, ())
        return {m: {p: 1 / len(ps) for p in ps} for m, ps in found.items()}

    def charge(self, per_module, depth=1):
        """Spread ``{module: amount}`` over the instance paths cut to ``depth`` names."""
        out = defaultdict(float)
        for module, paths in self.paths().items():
            amount = per_module.get(module, 0)
            for path, w in paths.items():
                out[path[:depth]] += amount * w
        return dict(out)

    def block_lines(self, depth=1):
        """Verilog lines per block (instance path cut to ``depth``)."""
        lines = {m: self.lines(m) for m in self.instances}
        return {p: round(n) for p, n in self.charge(lines, depth).items()}


def read_structure(verilog_path, top=None):
    """Parse module boundaries and instances out of a generated Verilog file. The top module
    is ``top`` or the one no other module instantiates."""
    spans, instances = [], {}
    current, first = None, 0
    with open(verilog_path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            if current is None:
                hit = _MODULE.match(line)
                if hit:
                    current, first = _name(hit.group(1)), n
                    instances[current] = []
            elif line.startswith("endmodule"):
                spans.append((first, n, current))
                current = None
            else:
                hit = _INSTANCE.match(line)
                if hit:
                    instances[current].append((_name(hit.group(1)), _name(hit.group(2))))
    if top is None:
        inner = {c for kids in instances.values() for c, _ in kids}
        roots = [m for m in instances if m not in inner]
        if len(roots) != 1:
            raise ValueError(f"{verilog_path}: cannot tell the top module among {roots}")
        top = roots[0]
    return VerilogStructure(top, sorted(spans), instances)


class PerfUnavailable(RuntimeError):
    """``perf`` is not installed or may not sample this process."""


def perf_available():
    return shutil.which("perf") is not None


@contextlib.contextmanager
def sampled(output, frequency=2999):
    """Sample this process with ``perf record`` while the block runs; data in ``output``."""
    if not perf_available():
        raise PerfUnavailable("perf is not installed (linux-tools): no profile")
    log = Path(str(output) + ".log")
    with open(log, "wb") as err:
        proc = subprocess.Popen(["perf", "record", "-F", str(frequency), "-p", str(os.getpid()),
                                 "-o", str(output)], stdout=err, stderr=subprocess.STDOUT)
    # perf attaches a moment after it starts; samples before that are only lost, not wrong.
    time.sleep(0.5)
    if proc.poll() is not None:
        raise PerfUnavailable("perf record could not sample this process: "
                              + log.read_text(errors="replace").strip().splitlines()[-1])
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def perf_symbols(data):
    """``{symbol: samples}`` of a ``perf record`` file."""
    done = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                           "--sort", "symbol", "-F", "sample,symbol", "-q",
                           "--percent-limit", "0"], capture_output=True, text=True)
    if done.returncode:
        raise PerfUnavailable(f"perf report failed: {done.stderr.strip()[-300:]}")
    out = {}
    for line in done.stdout.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0].isdigit():
            # perf pads the symbol column and may append empty columns ("-  -").
            symbol = re.sub(r"(\s+-)+\s*$", "", parts[2]).strip()
            out[symbol] = out.get(symbol, 0) + int(parts[0])
    return out


def block_name(path, top):
    return "/".join(path) if path else f"{top} (top-level wiring)"


def block_profile(structure, symbols):
    """Each block's share of the sampled time (a block: an instance of the top module; its own
    instances under ``children``), the share of the input logic (``ico``) in it, and its
    Verilog lines. ``symbols`` is :func:`perf_symbols`' answer for a run of the profiling build
    of ``structure``'s design."""
    total = sum(symbols.values())
    if not total:
        raise PerfUnavailable("perf recorded no samples")
    samples, ico = defaultdict(float), defaultdict(float)
    phases, outside = defaultdict(float), 0
    for symbol, n in symbols.items():
        hit = _PROF.search(symbol)
        module = structure.module_at(int(hit.group(2))) if hit else None
        if module is None:
            outside += n
            continue
        phases[hit.group(1)] += n
        samples[module] += n
        if hit.group(1) == "ico":
            ico[module] += n

    def rows(depth):
        share = structure.charge(samples, depth)
        inputs = structure.charge(ico, depth)
        lines = structure.block_lines(depth)
        return {path: {"block": block_name(path, structure.top),
                       "share": round(share.get(path, 0) / total, 4),
                       "ico_share": round(inputs.get(path, 0) / total, 4),
                       "verilog_lines": lines.get(path, 0)} for path in lines}

    top, inner = rows(1), rows(2)
    for path, row in inner.items():
        if len(path) == 2:
            top[path[:1]].setdefault("children", []).append(row)
    for path, row in inner.items():
        if len(path) == 1 and "children" in top[path]:
            top[path]["children"].append({**row, "block": f"{row['block']} (own logic)"})
    blocks = sorted(top.values(), key=lambda r: (-r["share"], r["block"]))
    for row in blocks:
        row.get("children", []).sort(key=lambda r: (-r["share"], r["block"]))
    blocks.append({"block": OUTSIDE, "share": round(outside / total, 4), "ico_share": 0.0,
                   "verilog_lines": 0})
    return {"samples": total, "blocks": blocks,
            "phases": {p: round(n / total, 4) for p, n in sorted(phases.items())},
            "outside_share": round(outside / total, 4)}


def profile_run(run, tmpdir=None):
    """Run ``run()`` under ``perf record``; return ``(run's result, symbols)``."""
    with tempfile.TemporaryDirectory(dir=tmpdir, prefix="snic-perf-") as work:
        data = Path(work) / "perf.data"
        with sampled(data):
            result = run()
        return result, perf_symbols(data)
