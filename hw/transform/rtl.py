"""Verilog for a design holding transformed components, with each state map's items named as
they appear in that Verilog.

Amaranth names a signal in every module that uses it (deduplicating clashes), so the name of a
flip-flop in RTL is only known once the design is prepared. Converting from the same prepared
design that gives the names keeps the two in step.
"""

import os
from dataclasses import replace

from amaranth.hdl import Fragment
from amaranth.hdl import _ir
from amaranth.lib import wiring

__all__ = ["convert_with_state_maps", "component_ports"]


def component_ports(component):
    """Top-level ports of a component, as ``verilog.convert`` derives them."""
    ports = {}
    for path, member, value in component.signature.flatten(component):
        if hasattr(value, "as_value"):
            value = value.as_value()
        direction = (_ir.PortDirection.Input if member.flow == wiring.In
                     else _ir.PortDirection.Output)
        ports["__".join(map(str, path))] = (value, direction)
    return ports


def _by_path(design, root):
    """``{inventory path: fragment info}`` below ``root`` (a prepared fragment). Paths use the
    names the design gave its submodules (as the inventory does); the infos hold the names
    Verilog uses, which may carry a ``$n`` to tell apart a submodule and a signal."""
    out = {}

    def walk(frag, path):
        out[path] = design.fragments[frag]
        for i, (sub, name, _loc) in enumerate(frag.subfragments):
            walk(sub, (*path, name if name is not None else f"U${i}"))

    walk(root, ())
    return out


def _rtl_map(design, yieldable):
    owner_frag = design.elaboratables[yieldable]
    owner = design.fragments[owner_frag]
    inner = next(sub for sub, name, _ in owner_frag.subfragments if name == "inner")
    frags = _by_path(design, inner)
    inv, smap = yieldable.inventory, yieldable.state_map
    items = iter(smap.items)
    ports = iter(yieldable.read_port_signals)

    def rtl(path, sig=None):
        info = frags[path]
        return info.name[1:] if sig is None else (*info.name[1:], info.signal_names[sig])

    out = []
    for entry in inv.layout():
        kind, path = entry[0], entry[1]
        if kind in ("ff", "trap", "counter"):
            info = frags[path]
            out.append(replace(next(items), rtl=(*info.name[1:], info.signal_names[entry[2]])))
        elif kind == "rdport":
            sig = next(ports)
            out.append(replace(next(items), rtl=(*owner.name[1:], owner.signal_names[sig])))
        elif kind == "reload":
            # The port's own data register, in the module that holds the memory.
            data = entry[2]._read_ports[entry[3]]._data
            out.append(replace(next(items), rtl=rtl(path[:-1], data)))
        else:
            out.append(replace(next(items), rtl=frags[path].name[1:]))

    sources = [rtl(path, sig) for path, _frag, sig in inv.dead]
    for (n, k) in sorted((inv.dead_rdports or {})):
        path, mem = inv.memories[n]
        sources.append(rtl(path[:-1], mem._read_ports[k]._data))
    config = [rtl(path, sig) for path, _frag, sig in inv.config]
    for n, (path, _mem) in enumerate(inv.memories):
        if n in inv.memories_out:
            (sources if n in (inv.fifo_levels or {}) else config).append(rtl(path))
    dead = [{**entry, "rtl": name} for entry, name in zip(smap.dead, sources)]
    config = [{**entry, "rtl": name} for entry, name in zip(smap.config, config)]
    return replace(smap, items=out, dead=dead, config=config)


def convert_with_state_maps(top, name, yieldables):
    """``(verilog text, {label: StateMap with rtl names})`` for the component ``top`` and the
    :class:`~.yieldable.Yieldable` instances inside it (``{label: instance}``)."""
    os.environ.setdefault("AMARANTH_USE_YOSYS", "builtin")
    from amaranth.back import verilog

    design = Fragment.get(top, None).prepare(component_ports(top), hierarchy=(name,))
    text, _ = verilog.convert_fragment(design, name=name, emit_src=False)
    return text, {label: _rtl_map(design, y) for label, y in yieldables.items()}
