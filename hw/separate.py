"""Blocks converted to Verilog on their own: once per distinct block, on every core.

Amaranth converts a design as one tree and writes a module for every instance, so the default
NIC's two identical parsers, and the web and secure personalities that regions 0 and 1 both
hold, were each converted twice (the parser alone takes 12 s), and Verilator then compiled each
copy as its own C++ class. One process did all of it.

A block wrapped with :func:`separate` is, while :func:`separate_modules` is collecting (the
Verilog generator, hw/generate.py), an ``Instance`` of a module converted from it by itself:
the first time a key is met, a forked process starts converting that block (fork: Amaranth's
objects cannot be pickled), while the parent goes on with the rest of the design; a block with
a key already met becomes another instance of the same module. Outside a collection (Amaranth's
simulator, the transform's analysis, anything else that elaborates the design) the wrapper is
the block itself, so nothing but the Verilog's module structure changes. The instance keeps the
block's name in the hierarchy, so every hierarchical name stays the same.

The ports follow Amaranth's naming for a component converted alone: each signature member's
path joined with ``__``, plus ``clk`` and ``rst`` of the ``sync`` domain.
"""

import contextlib
import multiprocessing
import os
import tempfile
from pathlib import Path

from amaranth.hdl import ClockSignal, Elaboratable, Instance, ResetSignal, Value
from amaranth.lib import wiring

__all__ = ["separate", "separate_modules", "SeparateError"]

_COLLECTOR = None


class SeparateError(RuntimeError):
    pass


class _Collector:
    def __init__(self, prefix, workdir):
        self.prefix = prefix
        self.workdir = Path(workdir)
        self.modules = {}           # key -> (module name, Process, output path)

    def module_for(self, component, key, local):
        hit = self.modules.get(key)
        if hit is not None:
            return hit[0]
        name = f"{self.prefix}__{local}"
        if any(n == name for n, _p, _o in self.modules.values()):
            name = f"{name}_{len(self.modules)}"
        out = self.workdir / f"{name}.v"
        proc = multiprocessing.get_context("fork").Process(
            target=_convert, args=(component, name, out), daemon=True)
        proc.start()
        self.modules[key] = (name, proc, out)
        return name

    def texts(self):
        """The modules' Verilog, each waited for."""
        out = []
        for name, proc, path in self.modules.values():
            proc.join()
            if proc.exitcode != 0 or not path.exists():
                error = path.with_suffix(".err")
                raise SeparateError(f"converting {name} failed: "
                                    + (error.read_text() if error.exists() else
                                       f"exit code {proc.exitcode}"))
            out.append(path.read_text())
        return out


def _convert(component, name, out):
    try:
        os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
        from amaranth.back import verilog
        text = verilog.convert(component, name=name, emit_src=False)
        # One top per file: the design's own. A separate module is instanced by it.
        text = text.replace("(* top =  1  *)\n", "")
        start = text.find(f"module {name}(")
        header = text[start:text.find(");", start)].replace("(", " ").replace(",", " ")
        if start < 0 or not {"clk", "rst"} <= set(header.split()):
            raise SeparateError(f"{name} has no sync clock port; it cannot be separated")
        out.with_suffix(".tmp").write_text(text)
        out.with_suffix(".tmp").replace(out)
    except BaseException as e:      # noqa: BLE001 (reported by the parent, in one line)
        out.with_suffix(".err").write_text(f"{type(e).__name__}: {e}")
        os._exit(1)


class _Separate(Elaboratable):
    def __init__(self, component, key, local):
        self.component = component
        self.key = key
        self.local = local

    def elaborate(self, platform):
        if _COLLECTOR is None or multiprocessing.current_process().daemon:
            return self.component       # (a daemonic process may not start processes)
        name = _COLLECTOR.module_for(self.component, self.key, self.local)
        # The parent never elaborates it (the forked child converts it): no "unused" warning
        # for it or the blocks it holds.
        _mark_used(self.component, set())
        ports = [("i", "clk", ClockSignal()), ("i", "rst", ResetSignal())]
        for path, member, value in self.component.signature.flatten(self.component):
            port = "__".join(str(p) for p in path)
            direction = "i" if member.flow == wiring.In else "o"
            ports.append((direction, port, Value.cast(value)))
        return Instance(name, *ports)


def _mark_used(obj, seen):
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Elaboratable):
        obj._MustUse__used = True
        items = vars(obj).values()
    elif isinstance(obj, dict):
        items = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    else:
        return
    for x in items:
        _mark_used(x, seen)


def separate(component, key, local):
    """``component`` (a ``wiring.Component`` with a ``sync`` domain) as its own module while
    :func:`separate_modules` collects; ``key`` (hashable) names what decides its circuit: two
    blocks with equal keys must be the same circuit. ``local`` names the module."""
    return _Separate(component, key, local)


@contextlib.contextmanager
def separate_modules(prefix):
    """Collect the separated blocks elaborated inside; yields a list that, on exit, holds the
    Verilog of each distinct one (module names ``<prefix>__<local>``)."""
    global _COLLECTOR
    if _COLLECTOR is not None:
        raise SeparateError("separate_modules does not nest")
    texts = []
    with tempfile.TemporaryDirectory(prefix="snic-separate-") as workdir:
        _COLLECTOR = _Collector(prefix, workdir)
        collector = _COLLECTOR
        try:
            yield texts
        except BaseException:
            for _n, proc, _o in collector.modules.values():
                proc.kill()
            raise
        finally:
            _COLLECTOR = None
        texts += collector.texts()
