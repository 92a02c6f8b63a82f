"""Resource use of a configured design, block by block (``snic resources --config C``).

A block is an instance of the design's top module (``parser0``, ``scheduler``, ``csr``,
``region2``, ...), as in the virtual device's cycle profile (sim/vdev/profile.py), so the two
tables line up. Each distinct block module is synthesised once per target with the same
scripts as the per-NT table (:data:`~supernic.tools.resources.TARGETS`, flattened, out of
context), on ``jobs`` cores, largest first; two instances of one module (the two parsers) count
twice in the total. The top module's own logic (wiring, the id and shape constants) is not a
block and is left out of the total; it holds no flip-flops worth counting.

Each block is synthesised from a file of its own: its module and every module under it, with
the design's name in the module names replaced by ``design`` (:func:`block_verilog`). Results
are cached by :func:`~supernic.tools.resources.synthesize` on that text, so a block that is the
same circuit in two designs (the parsers, scheduler and store of the default NIC with and
without transformed regions) is synthesised once.
"""

import hashlib
import os
import multiprocessing
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from .resources import _COLUMNS, DEFAULT_TARGETS, TARGETS, _synthesize_job, yosys_version

__all__ = ["design_resources", "print_design_table", "block_verilog"]


def block_verilog(lines, structure, module, design, out_dir):
    """``(path, top)``: the Verilog of ``module`` (``lines``: the lines of the file that
    :func:`~supernic.sim.vdev.profile.read_structure` read into ``structure``) and of every
    module under it, the design's name ``design`` in module names replaced by ``design``, in
    ``out_dir`` under a name made from the text's hash."""
    keep, work = set(), [module]
    while work:
        m = work.pop()
        if m in keep or m not in structure.instances:
            continue
        keep.add(m)
        work += [child for child, _name in structure.instances[m]]
    text = "".join("".join(lines[first - 1:last]) + "\n"
                   for first, last, m in structure.spans if m in keep)
    # Module names are escaped identifiers, ``\<design>.<path> ``, or, for a module converted
    # on its own (hw/separate.py), plain ones, ``<design>__<name>``.
    text = text.replace(f"\\{design}.", "\\design.").replace(f"{design}__", "design__")
    top = module
    for sep in (".", "__"):
        if module.startswith(design + sep):
            top = "design" + sep + module[len(design) + len(sep):]
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = Path(out_dir) / f"{top}-{digest}.v"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(text)
        partial.replace(path)
    return path, top


def design_resources(config, targets=DEFAULT_TARGETS, jobs=1, progress=None):
    """Synthesise every block of ``config``'s design; a JSON-serialisable dict::

        {"design", "width", "yosys", "targets",
         "blocks": [{"block", "module", "verilog_lines", target: {lut, ff, ..., seconds}}],
         "total": {target: {lut, ff, ...}}, "errors": [...], "seconds"}
    """
    from ..sim.build import generated_design
    from ..cache import cache_root
    from ..sim.vdev.profile import read_structure
    t0 = time.monotonic()
    progress = progress or (lambda message: None)
    paths = generated_design(config, progress=progress)
    structure = read_structure(paths["verilog"])
    instances = [(name, module) for module, name in structure.instances[structure.top]
                 if module in structure.instances]
    lines = {path[0]: n for path, n in structure.block_lines(1).items() if path}
    modules = dict.fromkeys(module for _, module in instances)   # each module once
    progress("checking Yosys (its first run compiles it, 30 to 45 s)...")
    version = yosys_version()
    # Largest first (Verilog lines under the block), so the longest runs do not start last.
    size = {module: lines.get(name, 0) for name, module in instances}
    work = sorted(((m, t) for m in modules for t in targets), key=lambda mt: -size[mt[0]])
    done, errors = {}, []
    # Spawned workers: the parent holds Amaranth's built-in Yosys (wasmtime), which does not
    # survive a fork.
    text = Path(paths["verilog"]).read_text(errors="replace").splitlines(keepends=True)
    files = {m: block_verilog(text, structure, m, structure.top,
                              cache_root() / "resources" / "blocks")
             for m in modules}
    with ProcessPoolExecutor(max_workers=jobs,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        running = {pool.submit(_synthesize_job, str(files[m][0]), files[m][1], t, version):
                   (m, t) for m, t in work}
        while running:
            finished, _ = wait(running, timeout=1, return_when=FIRST_COMPLETED)
            for future in finished:
                m, t = running.pop(future)
                value = future.result()
                if "error" in value:
                    errors.append({"module": m, "target": t, "message": value["error"]})
                else:
                    done[m, t] = value
            progress(f"synthesised {len(done) + len(errors)}/{len(work)} block modules "
                     f"({time.monotonic() - t0:.0f} s)")
    blocks, total = [], {t: dict.fromkeys(_COLUMNS, 0) for t in targets}
    for name, module in sorted(instances):
        row = {"block": name, "module": module, "verilog_lines": lines.get(name, 0)}
        for t in targets:
            if (module, t) in done:
                row[t] = {c: done[module, t][c] for c in (*_COLUMNS, "seconds", "cached")}
                for c in _COLUMNS:
                    total[t][c] += done[module, t][c]
        blocks.append(row)
    return {"design": config.name, "width": config.data_width, "yosys": version,
            "targets": {t: {"device": TARGETS[t].device, "script": TARGETS[t].commands("<top>")}
                        for t in targets},
            "blocks": blocks, "total": total, "errors": errors,
            "seconds": round(time.monotonic() - t0, 1)}


def print_design_table(result, console):
    from rich.table import Table
    version = " ".join(result["yosys"].split()[:2])
    targets = list(result["targets"])
    table = Table(title=f"resources per block of {result['design']} ({result['width']}-bit), "
                        f"{version}",
                  caption="out of context, flattened per block (the per-NT scripts); "
                          "bram18: 18 kbit blocks; the top module's own wiring is not counted")
    table.add_column("block")
    table.add_column("Verilog lines", justify="right")
    for t in targets:
        table.add_column(f"{t} LUT", justify="right")
        table.add_column(f"{t} FF", justify="right")
        table.add_column(f"{t} bram18", justify="right")
    for row in result["blocks"]:
        cells = [row["block"], f"{row['verilog_lines']:,}"]
        for t in targets:
            r = row.get(t)
            cells += [f"{r['lut']:,}", f"{r['ff']:,}", str(r["bram18"])] if r else ["-"] * 3
        table.add_row(*cells)
    cells = ["total", f"{sum(r['verilog_lines'] for r in result['blocks']):,}"]
    for t in targets:
        r = result["total"][t]
        cells += [f"{r['lut']:,}", f"{r['ff']:,}", str(r["bram18"])]
    table.add_row(*cells, style="bold")
    console.print(table)
    for error in result["errors"]:
        console.print(f"skipped {error['module']} {error['target']}: {error['message']}",
                      soft_wrap=True)
