"""`verilator --lint-only -Wall` on generated Verilog, with the explained waivers in lint.vlt."""

import re
import subprocess
from collections import Counter
from pathlib import Path

__all__ = ["lint", "WAIVERS"]

WAIVERS = Path(__file__).with_name("lint.vlt")


def lint(verilog_path):
    """Return (ok, report). ``ok`` is True when Verilator prints no warning and no error."""
    from ..toolchain import ensure_verilator
    exe = ensure_verilator()
    cmd = [str(exe), "--lint-only", "-Wall", str(WAIVERS), str(verilog_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("%")]
    rules = Counter(m.group(1) for ln in lines
                    if (m := re.match(r"%(?:Warning|Error)-([A-Z0-9_]+)", ln)))
    ok = proc.returncode == 0 and not lines
    if ok:
        return True, f"lint clean: verilator --lint-only -Wall {WAIVERS.name} {verilog_path}"
    summary = ", ".join(f"{rule}: {n}" for rule, n in rules.most_common()) or "errors"
    return False, f"lint failed ({summary}):\n" + "\n".join(lines[:20])
