"""Find all the state of an elaborated Amaranth design, as written (no annotations).

Flip-flops are the signals a fragment assigns in a clocked domain (``statements[domain]``'s
left-hand sides); memories are the ``MemoryInstance`` fragments ``lib.memory.Memory``
elaborates into. Only the ``sync`` domain is supported: a design with other clock domains is
refused with a clear error rather than half-captured.

This walks Amaranth 0.5's fragment tree (``Fragment.subfragments``, ``MemoryInstance`` ports),
which is not public API; pyproject pins ``amaranth==0.5.*`` for that reason.
"""

import json
import os
from dataclasses import dataclass, replace

from amaranth.hdl import Cat, Fragment, Print, Shape, Signal, Value
from amaranth.hdl._ast import Assign, Operator, Switch, _StatementList
from amaranth.lib.wiring import Out
from amaranth.hdl._mem import MemoryInstance
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered

from ...cache import cache_root, locked
from .fingerprint import fingerprint
from ...desc.statemap import StateItem, StateMap

__all__ = ["Inventory", "take_inventory", "TransformError", "Trap", "rewrite_prints"]


class TransformError(Exception):
    pass


@dataclass
class Trap:
    """A ``Print`` turned into a trap: where it executed, ``fired`` is set and ``values``
    holds its arguments (packed LSB first) as they were when it would have printed."""
    format: str              # Python format string of the message
    args: list               # [(width, signed)] of each argument, in order
    fired: Signal
    values: Signal
    path: tuple

    def to_json(self, path_name):
        return {"format": self.format, "args": [list(a) for a in self.args],
                "fired": path_name(self.path, self.fired.name),
                "values": path_name(self.path, self.values.name)}


def rewrite_prints(fragment):
    """Replace every ``Print`` in a ``sync`` domain below ``fragment`` by a trap (Synergy's
    ``$display``, §4.3): the print's enable sets ``fired`` and latches its arguments, at the
    same clock edge and under the same conditions the print would have executed. Returns the
    :class:`Trap` list. A ``Print`` in the ``comb`` domain has no clock edge to trap at and is
    refused."""
    traps = []

    def walk_stmts(stmts, path, domain):
        out = []
        for st in stmts:
            if isinstance(st, Print):
                if domain == "comb":
                    raise TransformError(f"{_join(path) or 'top'}: a Print in the comb domain "
                                         f"cannot become a trap; print from a sync domain")
                fmt, args = st.message._to_format_string()
                args = [Value.cast(a) for a in args]
                k = len(traps)
                fired = Signal(name=f"trap{k}_fired")
                values = Signal(max(1, sum(len(a) for a in args)), name=f"trap{k}_values")
                traps.append(Trap(fmt, [(len(a), a.shape().signed) for a in args], fired,
                                  values, path))
                out += [fired.eq(1), values.eq(Cat(*args))]
            elif isinstance(st, Switch):
                out.append(Switch(st.test, [(patterns, walk_stmts(body, path, domain), loc)
                                            for patterns, body, loc in st.cases],
                                  src_loc=st.src_loc))
            else:
                out.append(st)
        return _StatementList(out)

    def walk(frag, path):
        if type(frag) is not Fragment:
            return
        for domain in list(frag.statements):
            frag.statements[domain] = walk_stmts(frag.statements[domain], path, domain)
        for i, (sub, name, _loc) in enumerate(frag.subfragments):
            walk(sub, (*path, name if name is not None else f"U${i}"))

    walk(fragment, ())
    return traps


@dataclass
class Inventory:
    fragments: list          # [(path, Fragment)] every non-memory fragment
    flip_flops: list         # [(path, Fragment, Signal)] the flip-flops in the state map
    memories: list           # [(path, MemoryInstance)]
    traps: list = None       # [Trap], when the prints were rewritten first
    #: ``"full"``: every flip-flop is in the map; ``"boundary"``: only those live at a drained
    #: packet boundary (liveness.py), the others in ``dead`` with their ``guards``.
    mode: str = "full"
    dead: list = ()          # [(path, Fragment, Signal)] flip-flops left out of the map
    guards: dict = None      # {id(dead signal): [guard Signals]}
    #: ``{id(MemoryInstance): parent Fragment}``: where each memory's ports are driven.
    memory_parents: dict = None
    #: ``{(memory index, read port index): [guard Signals]}``: read ports whose data
    #: register is left out (dead at a boundary).
    dead_rdports: dict = None
    #: ``[(path, Fragment, Signal)]``: configuration flip-flops, left out of the map: they
    #: hold what the configuration registers wrote, which rewriting them restores.
    config: list = ()
    #: Indices (in ``memories``) of memories left out of the map: configuration memories,
    #: and the storage of ``amaranth.lib.fifo`` FIFOs (``fifo_levels``).
    memories_out: frozenset = frozenset()
    #: ``{memory index: level Signal}``: the storage of an ``amaranth.lib.fifo`` FIFO and the
    #: FIFO's ``level``, which every boundary stop waits to be 0.
    fifo_levels: dict = None
    #: ``[(path, Fragment, Signal)]``: command flags (in the map): raised by a configuration
    #: strobe, they ask for configuration writes, so they run while configuration does.
    commands: list = ()
    #: ``[(path, Fragment, Signal, port)]``: live flip-flops that only count (every
    #: assignment adds to the value) and that the output port named ``port`` shows
    #: (:meth:`find_counters`): read through the port, restored by adding.
    counters: list = ()

    def keep_live(self, component, fragment, part=False):
        """Leave out of the map the flip-flops that are dead at a drained packet boundary
        (see liveness.py); the traps' flip-flops always stay. Returns the plan
        (:meth:`apply_plan` repeats it on another elaboration of the same component).

        A component made of parts wired port to port gets the union of its parts' plans
        (compose.py). Any other is analysed under the stream contract that makes it fit to
        be a part, so that it has one plan whether it stands alone or in a chain (one
        analysis, one cache entry); only one that stands alone (not ``part``) and cannot
        meet the contract is analysed without it (its inputs are then the outside world's,
        the same in both runs). Traps stop a component mid-packet: no contract then."""
        from .compose import parts
        from .liveness import ContractError
        force = self._forced()
        if not self.traps:
            split = parts(fragment, component)
            plan = self._composed_plan(split) if split else None
            if plan is not None:
                self.apply_plan(plan)
                return plan
            try:
                return self._cached_plan(fragment, component, force, True)
            except ContractError:
                if part:
                    raise
        return self._cached_plan(fragment, component, force, False)

    def _forced(self):
        """The traps' flip-flops, always kept live (they decide the plan's cache entry)."""
        return [s for t in (self.traps or []) for s in (t.fired, t.values)]

    def plan_cached(self, component, fragment, part=False):
        """Whether :meth:`keep_live` would find its plan in the cache (without analysing).
        Called on a component that is not made of parts (``compose.parts`` is None)."""
        force = self._forced()
        path = self.plan_path(component, fragment)
        if not path.exists():
            return False
        if part or self.traps:
            return True
        # A contract error (remembered) sends keep_live on to the analysis without it.
        return ("contract_error" not in json.loads(path.read_text())
                or self._plan_path(fragment, component, force, False).exists())

    def plan_path(self, component, fragment):
        """The cache entry :meth:`keep_live` looks up first for a component not made of
        parts: two components with the same entry have the same plan."""
        return self._plan_path(fragment, component, self._forced(), not self.traps)

    @staticmethod
    def _plan_path(fragment, component, force, contract):
        key = fingerprint(fragment, component, [*force, "contract" if contract else ""])
        return cache_root() / "liveness" / f"{key}.json"

    def _cached_plan(self, fragment, component, force, contract):
        from .liveness import ContractError
        cached = self._plan_path(fragment, component, force, contract)
        key = cached.stem
        with locked(cached.parent, f".{key}.lock"):
            if cached.exists():
                raw = json.loads(cached.read_text())
            else:
                try:
                    raw = _plan_to_json(self._analysed_plan(fragment, component, force,
                                                            contract))
                except ContractError as e:
                    raw = {"contract_error": str(e)}     # remembered: not tried again
                partial = cached.with_suffix(f".{os.getpid()}.tmp")
                partial.write_text(json.dumps(raw))
                partial.replace(cached)     # atomic: a parallel reader never sees half a file
        if "contract_error" in raw:
            raise ContractError(raw["contract_error"])
        plan = _plan_from_json(raw)
        self.apply_plan(plan)
        return plan

    def _analysed_plan(self, fragment, component, force, contract):
        from .liveness import analyse
        from .seeds import find_seed, remember_seed, seed_key
        # Traps keep their flip-flops live: no seed (found without them) is tried.
        key = None if force else seed_key(component, contract)
        lv = analyse(fragment, component, self, force, contract,
                     seed=find_seed(key) if key else None)
        if key:
            remember_seed(key, lv.seed)
        index = {id(sig): n for n, (_p, _f, sig) in enumerate(self.flip_flops)}
        # A component with traps stops mid-packet and frozen whole: its configuration stays
        # in the map (it could not be rewritten while stopped).
        config = () if self.traps else lv.config
        plan = (tuple(index[id(sig)] for _p, _f, sig in lv.dead),
                {index[k]: tuple(index[id(g)] for g in gs) for k, gs in lv.guards.items()},
                lv.why,
                {port: tuple(index[id(g)] for g in gs) for port, gs in lv.dead_rdports.items()},
                tuple(index[id(sig)] for _p, _f, sig in config),
                frozenset() if self.traps else frozenset(lv.config_memories),
                () if self.traps else tuple(index[id(sig)] for _p, _f, sig in lv.commands))
        return plan

    def _composed_plan(self, split):
        """The union of the plans of ``split``'s parts (compose.py), each analysed (or
        found in the cache) on its own, in this inventory's numbering; None if a part
        cannot be analysed alone."""
        from .liveness import ContractError
        index = {id(sig): n for n, (_p, _f, sig) in enumerate(self.flip_flops)}
        mem_index = {id(mem): n for n, (_p, mem) in enumerate(self.memories)}
        dead, guards, why, ports, config, config_mems, commands = [], {}, {}, {}, [], set(), []
        for path, frag, comp in split:
            sub = take_inventory(frag)
            ffs = [index[id(sig)] for _p, _f, sig in sub.flip_flops]
            mems = [mem_index[id(mem)] for _p, mem in sub.memories]
            try:
                s_dead, s_guards, s_why, s_ports, s_config, s_mems, s_commands = \
                    sub.keep_live(comp, frag, part=True)
            except ContractError:
                return None
            dead += [ffs[n] for n in s_dead]
            guards.update({ffs[n]: tuple(ffs[g] for g in gs) for n, gs in s_guards.items()})
            why.update({_join(path, name): r for name, r in s_why.items()})
            ports.update({(mems[n], k): tuple(ffs[g] for g in gs)
                          for (n, k), gs in s_ports.items()})
            config += [ffs[n] for n in s_config]
            config_mems |= {mems[n] for n in s_mems}
            commands += [ffs[n] for n in s_commands]
        return (tuple(dead), guards, why, ports, tuple(config), frozenset(config_mems),
                tuple(commands))

    def apply_plan(self, plan):
        dead_idx, guard_idx, _why, port_idx, config_idx, config_mems, command_idx = plan
        every = self.flip_flops
        self.commands = [every[n] for n in command_idx]
        out = set(dead_idx) | set(config_idx)
        self.flip_flops = [e for n, e in enumerate(every) if n not in out]
        self.dead = [every[n] for n in dead_idx]
        self.config = [every[n] for n in config_idx]
        self.guards = {id(every[n][2]): [every[g][2] for g in gs]
                       for n, gs in guard_idx.items()}
        self.dead_rdports = {port: [every[g][2] for g in gs] for port, gs in port_idx.items()}
        self.memories_out = frozenset(config_mems) | frozenset(self.fifo_levels or {})
        self.mode = "boundary"

    def guard_signals(self):
        out = {}
        for gs in [*(self.guards or {}).values(), *(self.dead_rdports or {}).values()]:
            for g in gs:
                out[id(g)] = g
        return list(out.values())

    def trap_signals(self):
        """The flip-flops of the ``Print`` traps (``fired``, ``values``): they are reached by
        address, so software can service one trap without a pass over all the state."""
        out = {}
        for t in self.traps or ():
            out[id(t.fired)] = t.fired
            out[id(t.values)] = t.values
        return out

    def find_counters(self, component, word_width):
        """Find the counters a boundary map reaches without the scan chain (``counters``).

        Why. An NT's statistics are 64-bit counters (three in every NT, eleven in the
        checksum verifier), live at every boundary; in the scan chain each of their bits
        costs a multiplexer in front of its adder's output, most of what is left of the
        transform's area on the NTs that count most. But such a counter is readable already:
        it is an ``R`` register, an output port the register file reads. So a capture reads
        it there, and a restore needs no multiplexer either: the counter is cleared (a
        synchronous reset, which the flip-flop has) when its first state word is written,
        and the value is *added* when its last is, through the adder the counter has anyway
        (its increment, 0 while frozen, or'd with the written value, 0 while running).

        A counter here is a live flip-flop wider than a state word (the clear and the add
        take two writes) whose every assignment adds to its own value (``c.eq(c + e)``,
        under any conditions), and which an ``Out`` port of ``component`` shows: the port
        is the flip-flop, or is driven from it by unconditional whole-signal ``comb``
        assignments and nothing else. Only in the boundary map of a component without
        traps (a trap freezes everything where it fires)."""
        if self.mode != "boundary" or self.traps:
            return
        assigned, direct = {}, {}
        for _path, frag in self.fragments:
            stmts = frag.statements.get("comb", ())
            for st in assigns(stmts):
                for sig in st.lhs._lhs_signals():
                    assigned[id(sig)] = assigned.get(id(sig), 0) + 1
            for st in stmts:
                if (isinstance(st, Assign) and isinstance(st.lhs, Signal)
                        and isinstance(st.rhs, Signal) and len(st.lhs) == len(st.rhs)):
                    direct[id(st.lhs)] = st.rhs
        shown = {}
        for path, member, value in component.signature.flatten(component):
            if member.flow != Out or not isinstance(value, Signal):
                continue
            sig, seen = value, set()
            while assigned.get(id(sig)) == 1 and id(sig) in direct and id(sig) not in seen:
                seen.add(id(sig))
                sig = direct[id(sig)]
            shown.setdefault(id(sig), ".".join(str(p) for p in path))
        commands = {id(s) for _p, _f, s in self.commands}
        self.counters = [
            (path, frag, sig, shown[id(sig)]) for path, frag, sig in self.flip_flops
            if id(sig) in shown and id(sig) not in commands and len(sig) > word_width
            and _only_adds(frag.statements["sync"], sig)]

    def layout(self):
        """The sources of the state map's items, in map order: ``("ff", path, signal)`` for
        the scan chain's flip-flops, ``("rdport", path, memory, port index)`` for read-port
        data registers shadowed in the chain, ``("trap", path, signal)`` for the traps'
        flip-flops (by address), ``("reload", path, memory, port index)`` for read-port data
        registers restored through their memory (by address, see :meth:`_reloadable`),
        ``("counter", path, signal, port)`` for the counters read through a port (by
        address, see :meth:`find_counters`), ``("mem", path, memory)``."""
        traps = self.trap_signals()
        counted = {id(sig) for _p, _f, sig, _port in self.counters}
        out = [("ff", path, sig) for path, _f, sig in self.flip_flops
               if id(sig) not in traps and id(sig) not in counted]
        reloads = []
        for n, (path, mem) in enumerate(self.memories):
            for k, port in enumerate(mem._read_ports):
                if port._domain != "comb" and (n, k) not in (self.dead_rdports or {}):
                    if self._reloadable(n, k):
                        reloads.append(("reload", path, mem, k))
                    else:
                        out.append(("rdport", path, mem, k))
        out += [("trap", path, sig) for path, _f, sig in self.flip_flops if id(sig) in traps]
        out += reloads
        out += [("counter", path, sig, port) for path, _f, sig, port in self.counters]
        out += [("mem", path, mem) for n, (path, mem) in enumerate(self.memories)
                if n not in self.memories_out]
        return out

    def _reloadable(self, n, k):
        """Whether read port ``k`` of memory ``n`` can have its data register restored
        through the memory instead of a shadow in the scan chain: the memory is in the map
        and writable (its row 0 takes the value, the port reads it back, and the restore of
        the memory's rows, which comes later in the pass, puts row 0 back), and another of
        its read ports (a combinational one, or one whose data is dead at a boundary) can
        serve the state port, so reading the memory leaves this port's register alone. The
        port must not be transparent: its read-back may meet the write of row 0's own value
        (a memory of one-word rows right after it in the pass), and only a port that reads
        the old value then is sure to read the one just put there."""
        _path, mem = self.memories[n]
        if n in self.memories_out or not mem._write_ports or mem._read_ports[k]._transparent_for:
            return False
        return any(j != k and (p._domain == "comb" or (n, j) in (self.dead_rdports or {}))
                   for j, p in enumerate(mem._read_ports))

    def stop_conditions(self):
        """What every boundary stop waits for, beside the drain: each guard is 0, and each
        FIFO whose storage is left out of the map is empty."""
        out = list(self.guard_signals())
        out += [lv != 0 for lv in (self.fifo_levels or {}).values()] \
            if self.mode == "boundary" else []
        return out

    def state_map(self, word_width):
        """The :class:`~.statemap.StateMap`: the scan chain's flip-flops and read-port
        registers packed bit after bit from address 0, then the traps' flip-flops a word
        each, then the memories, each aligned to its size (a row is a bit field of the
        address)."""
        items, bit = [], 0

        def words(width):
            return max(1, -(-width // word_width))

        layout = self.layout()
        for entry in layout:
            if entry[0] == "ff":
                _kind, path, sig = entry
                w, name = len(sig), _join(path, sig.name)
                init = sig.init & ((1 << w) - 1)
            elif entry[0] == "rdport":
                _kind, path, mem, k = entry
                w, name, init = len(mem._read_ports[k]._data), _join(path, f"rdport{k}"), 0
            else:
                continue
            n = (bit % word_width + w + word_width - 1) // word_width
            items.append(StateItem(name, entry[0], w, bit // word_width, n, init=init,
                                   bit=bit))
            bit += w
        scan_words = -(-bit // word_width)
        addr = scan_words
        for entry in layout:
            if entry[0] != "trap":
                continue
            _kind, path, sig = entry
            n = words(len(sig))
            items.append(StateItem(_join(path, sig.name), "ff", len(sig), addr, n,
                                   init=sig.init & ((1 << len(sig)) - 1)))
            addr += n
        for entry in layout:
            if entry[0] != "reload":
                continue
            _kind, path, mem, k = entry
            w = len(mem._read_ports[k]._data)
            items.append(StateItem(_join(path, f"rdport{k}"), "rdport", w, addr, words(w)))
            addr += words(w)
        for entry in layout:
            if entry[0] != "counter":
                continue
            _kind, path, sig, port = entry
            items.append(StateItem(_join(path, sig.name), "ff", len(sig), addr, words(len(sig)),
                                   init=sig.init & ((1 << len(sig)) - 1), port=port))
            addr += words(len(sig))
        for entry in layout:
            if entry[0] != "mem":
                continue
            _kind, path, mem = entry
            width = Shape.cast(mem._data.shape).width
            n = words(width)
            stride = 1 << (n - 1).bit_length()
            size = stride * (1 << (mem._data.depth - 1).bit_length())
            addr = -(-addr // size) * size          # aligned: the row is a bit field
            # `_raw`: the rows as the memory is built with them (a struct-shaped row left
            # unset reads None through the public sequence).
            rows = [int(v) & ((1 << width) - 1) for v in mem._data.init._raw]
            while rows and not rows[-1]:
                rows.pop()
            items.append(StateItem(_join(path), "mem", width, addr, n, mem._data.depth, stride,
                                   writable=bool(mem._write_ports), init=tuple(rows)))
            addr += size
        # Names are keys (decode, encode, find): a name met again (Amaranth's unnamed
        # signals are all "$signal") gets "$2", "$3"... as Amaranth does in RTL.
        seen = {}
        for k, item in enumerate(items):
            n = seen[item.name] = seen.get(item.name, 0) + 1
            if n > 1:
                items[k] = replace(item, name=f"{item.name}${n}")
        guards = self.guards or {}
        dead = [{"name": _join(path, sig.name), "width": len(sig),
                 "guards": [_join(path, g.name) for g in guards[id(sig)]]}
                for path, _f, sig in self.dead]
        for (n, k), gs in sorted((self.dead_rdports or {}).items()):
            path, mem = self.memories[n]
            dead.append({"name": _join(path, f"rdport{k}"), "width": len(mem._read_ports[k]._data),
                         "guards": [_join(path[:-1], g.name) for g in gs]})
        config = [{"name": _join(path, sig.name), "kind": "ff", "width": len(sig)}
                  for path, _f, sig in self.config]
        for n, (path, mem) in enumerate(self.memories):
            shape = (Shape.cast(mem._data.shape).width, mem._data.depth)
            if n in (self.fifo_levels or {}) and n in self.memories_out:
                dead.append({"name": _join(path), "kind": "mem", "width": shape[0],
                             "depth": shape[1], "guards": [],
                             "empty": _join(path[:-1], self.fifo_levels[n].name)})
            elif n in self.memories_out:
                config.append({"name": _join(path), "kind": "mem", "width": shape[0],
                               "depth": shape[1]})
        return StateMap(word_width, items,
                        [t.to_json(_join) for t in (self.traps or [])], mode=self.mode,
                        all_flip_flop_bits=sum(len(s) for _p, _f, s in
                                               [*self.flip_flops, *self.dead, *self.config]),
                        dead=dead, scan_words=scan_words, config=config)


def _plan_to_json(plan):
    """The plan in a canonical order (the analysis meets registers and guards in an order
    that depends on object ids), so the same design gives the same Verilog in every process
    and a Verilator build keyed by the Verilog is found again."""
    dead, guards, why, ports, config, config_mems, commands = plan
    return {"dead": sorted(dead),
            "guards": {str(k): sorted(v) for k, v in sorted(guards.items())},
            "why": dict(sorted(why.items())),
            "ports": [[n, k, sorted(v)] for (n, k), v in sorted(ports.items())],
            "config": sorted(config), "config_memories": sorted(config_mems),
            "commands": sorted(commands)}


def _plan_from_json(raw):
    return (tuple(raw["dead"]), {int(k): tuple(v) for k, v in raw["guards"].items()},
            raw["why"], {(n, k): tuple(v) for n, k, v in raw["ports"]},
            tuple(raw["config"]), frozenset(raw["config_memories"]), tuple(raw["commands"]))


def assigns(stmts):
    """Every assignment in ``stmts``, at any depth of ``Switch``."""
    for st in stmts:
        if isinstance(st, Switch):
            for _p, body, _l in st.cases:
                yield from assigns(body)
        elif isinstance(st, Assign):
            yield st


def _only_adds(stmts, sig):
    """Whether every assignment to ``sig`` in ``stmts`` (at least one) is the whole
    ``sig.eq(sig + e)``."""
    found = False
    for st in assigns(stmts):
        if not any(s is sig for s in st.lhs._lhs_signals()):
            continue
        if st.lhs is not sig or increment(st, sig) is None:
            return False
        found = True
    return found


def increment(assign, sig):
    """``e`` of an assignment ``sig.eq(sig + e)`` (or ``e + sig``), an unsigned ``e`` that
    does not read ``sig``; else None."""
    rhs = assign.rhs
    if not (isinstance(rhs, Operator) and rhs.operator == "+" and len(rhs.operands) == 2):
        return None
    a, b = rhs.operands
    e = b if a is sig else a if b is sig else None
    if e is None or e.shape().signed or any(s is sig for s in e._rhs_signals()):
        return None
    return e


def _join(path, leaf=None):
    return ".".join([*path, leaf] if leaf is not None else path)


def _fifo_of(fragment):
    """The ``amaranth.lib.fifo`` FIFO a fragment was elaborated from, or None."""
    for origin in getattr(fragment, "origins", None) or ():
        if isinstance(origin, (SyncFIFO, SyncFIFOBuffered)):
            return origin
    return None


def take_inventory(fragment, traps=None):
    inv = Inventory([], [], [], traps, memory_parents={}, fifo_levels={})

    def walk(frag, path, parent=None):
        if isinstance(frag, MemoryInstance):
            inv.memory_parents[id(frag)] = parent
            # A FIFO's storage holds only the entries between its read and write pointers,
            # and a read returns the oldest of them (amaranth.lib.fifo's contract): with the
            # FIFO empty, no row can be read before it is written again.
            fifo = _fifo_of(parent) if parent is not None else None
            if fifo is not None and (frag._read_ports or frag._write_ports):
                inv.fifo_levels[len(inv.memories)] = fifo.level
            for port in [*frag._read_ports, *frag._write_ports]:
                if port._domain not in ("sync", "comb"):
                    raise TransformError(f"memory {_join(path)}: port in domain "
                                         f"{port._domain!r}; only 'sync' is supported")
            if not frag._read_ports and not frag._write_ports:
                return
            inv.memories.append((path, frag))
            return
        if type(frag) is not Fragment:
            raise TransformError(f"{_join(path) or 'top'}: {type(frag).__name__} cannot be "
                                 f"transformed (its state is not visible to Amaranth)")
        inv.fragments.append((path, frag))
        for domain, stmts in frag.statements.items():
            if domain == "comb":
                continue
            if domain != "sync":
                raise TransformError(f"{_join(path) or 'top'}: domain {domain!r}; only the "
                                     f"'sync' domain is supported")
            for sig in stmts._lhs_signals():
                assert isinstance(sig, Signal)
                inv.flip_flops.append((path, frag, sig))
        for i, (sub, name, _loc) in enumerate(frag.subfragments):
            walk(sub, (*path, name if name is not None else f"U${i}"), frag)

    walk(fragment, ())
    return inv
