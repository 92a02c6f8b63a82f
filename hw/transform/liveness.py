"""Which flip-flops of a component are live at a drained packet boundary.

At a boundary stop the component holds no packet: a pipeline's data and metadata registers
hold leftovers of packets that have gone, which only matter while their stage's valid bit is 1.
The boundary state port (``Yieldable(..., state="boundary")``) captures and restores only the
*live* flip-flops (and every memory through its ports); this module decides which they are.

The rule, and why it is sound
-----------------------------
Each flip-flop ``d`` left out (*dead*) has a *guard* ``g``: a live flip-flop of the same
fragment, reset to 0, either 1 bit wide (a stage's valid bit) or a narrow *state register* only
ever assigned constants (an FSM's state, such as a realigner's ``phase``, idle at 0); "``g`` is
1" below means "``g`` is not 0". The boundary stop of the boundary port waits, after the drain,
until every guard is 0 (yieldable.py); so at the captured instant every guard is 0.

Take two runs from that instant that agree on every live flip-flop and memory row (the
captured state restored) and see the same inputs, but whose dead flip-flops hold anything
(the restored instance's leftovers, or random values). The invariant

    R:  every live flip-flop and memory row is equal in both runs, and for every dead ``d``,
        either ``d`` is equal in both runs or its guard ``g`` is 0 (in both: ``g`` is live)

holds at the start (every guard is 0). It is kept, and no output can differ, if:

(a) every *sink* is equal in both runs whenever R holds: the next value of every live
    flip-flop; every output port (a stream's ``valid``; its payload when ``valid`` is 1; an
    input stream's ``ready`` when its ``valid`` is 1; every other output); every memory write
    port's enable, and its address and data when the enable is 1; every asynchronous read
    port's enable and address (a synchronous one's data register is a flip-flop here);
(b) for every dead ``d``: on every path through its fragment's ``sync`` statements, ``d``'s
    next value is equal in both runs, or ``g``'s next value is 0.

Both are checked by a taint analysis over the fragment's statement tree. ``taint(e, facts)`` is
the set of dead flip-flops whose leftovers can reach the value of ``e`` when ``facts`` hold
(bits of values known from the ``If``/``Switch`` conditions around ``e``, from the other
operand of a 1-bit ``&``, from a ``Mux`` select): a dead ``d`` read where ``facts`` say its
guard is 1 is equal in both runs (R), so it adds no taint; combinational signals are followed
to their drivers with the facts of the place that reads them. A fact is only taken from an
expression that is itself untainted there, so it holds in both runs alike. A condition that is
tainted taints everything assigned under it. (b) is checked per path of ``d``'s and ``g``'s
assignments, for ``g`` = 1 (``d`` holding its value keeps it equal) and ``g`` = 0 (``d`` must
be assigned an untainted value, or ``g`` cleared or held at 0); when ``d``'s new value is
tainted by other dead flip-flops, the path is split, two levels deep, on their guards and on
the fragment's state guards (a pipeline stage copying the previous stage's data and valid bit
every cycle; a realigner's output register loaded from its input register only where
``phase`` is idle and the input register full). A split case that contradicts the path's
conditions is infeasible: a condition on a combinational signal or expression is evaluated
again from the facts on flip-flops and inputs alone. A guard is live, so its
next value is a sink, equal in both runs: its value on a path counts even where the path's
condition is tainted.

The inputs. Standing alone, a component sees the same inputs in both runs. As a part of a
larger one (compose.py) it may only assume what its neighbours' sinks promise, the *stream
contract*: an input stream's payload is equal while its ``valid`` is 1, an output stream's
``ready`` while that stream's ``valid`` is 1, everything else always. Under ``contract`` a
read outside it taints with the port itself, which no choice of live flip-flops can clean: a
sink it reaches makes the analysis fail with :class:`ContractError` (the component must be
analysed with its neighbours). Two rules keep the common forms clean: an output's ``ready``
read in ``~o.valid | o.ready`` (an untainted 1 decides an ``|``), and an assignment under a
tainted condition that cannot change its flip-flop (``Elif(o.ready): o_valid.eq(0)`` where
``o_valid`` is 0), with the next value split on the port's ``valid`` as a dead register's
read splits on its guard.

The analysis is a greatest fixpoint: it starts with every flip-flop dead that has a guard
candidate, and moves to the live set every flip-flop that taints a sink or fails (b) with
every candidate, until nothing moves. The flip-flops of ``Print`` traps are always live. What
it cannot prove dead stays live (the rule errs towards capturing more). The differential test
(sim/tb/yield_tb.py ``boundary_soundness``) writes random values into every dead flip-flop
of every library NT at random boundaries and checks the output against the model bit for bit.

Guard candidates are the bits a drain clears (:func:`_draining`) and the flags that say a
packet is half through a stream inside (``in_mid.eq(~i.p.last)``), 0 at any drained packet
boundary. A guard that never returns to 0 after a drain would make the boundary stop wait
forever (the driver's suspend then times out with a clear error): guards are the registers
the analysis needed, which in a pipeline are its stage-valid bits and in a realigner its idle
phase and mid-packet flag. A state guard is tried only where no 1-bit guard serves (its paths
are many).
"""

from amaranth.hdl import Const, Fragment, Module, Signal, Value
from amaranth.hdl._ast import (Assign, Concat, Initial, Operator, Part, Slice, Switch,
                               SwitchValue, _StatementList)
from amaranth.lib import stream, wiring

from .compose import _component_of

__all__ = ["ContractError", "Liveness", "analyse", "seed_holds"]

_INFEASIBLE = object()
#: The widest state register taken as a guard (an FSM of up to 16 states).
_STATE_GUARD_BITS = 4
_NO_FACTS = {}          # the one empty set of facts (the evaluation memo is keyed by identity)

#: Operators :meth:`_Analysis._eval_value` computes on known unsigned operands.
_ARITH = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b,
    "==": lambda a, b: int(a == b), "!=": lambda a, b: int(a != b),
    "<": lambda a, b: int(a < b), "<=": lambda a, b: int(a <= b),
    ">": lambda a, b: int(a > b), ">=": lambda a, b: int(a >= b),
    "r|": lambda a: int(a != 0), "b": lambda a: int(a != 0),
}


class ContractError(Exception):
    """The component's outputs or live state depend on a stream input beyond its port
    contract: it cannot be analysed as a part (compose.py)."""


class _TooMany(Exception):
    """More paths than the analysis follows: the flip-flop stays live."""


class Liveness:
    """The result: ``live`` and ``dead`` (``[(path, fragment, signal)]``, in inventory order)
    and ``guards`` (``{id(dead signal): [guard signals]}``)."""

    def __init__(self, live, dead, guards, why=None, dead_rdports=None):
        self.live, self.dead, self.guards = live, dead, guards
        self.why = why or {}
        #: ``{(memory index, port index): [guard signals]}``: read ports whose data register
        #: is dead at a boundary (it needs no shadow: the state port may use the port).
        self.dead_rdports = dead_rdports or {}

    def guard_signals(self):
        out = {}
        for gs in self.guards.values():
            for g in gs:
                out[id(g)] = g
        return list(out.values())


def _bits_of(value):
    """``[(signal id, bit) or None]`` of a value's bits, LSB first (None: not a signal bit)."""
    if isinstance(value, Signal):
        return [(id(value), k) for k in range(len(value))]
    if isinstance(value, Slice) and isinstance(value.value, Signal):
        return [(id(value.value), k) for k in range(value.start, value.stop)]
    if isinstance(value, Concat):
        out = []
        for part in value.parts:
            out += _bits_of(part)
        return out
    return [None] * len(value)


class _Analysis:
    def __init__(self, fragment, component, inventory, force_live, contract=False):
        self._shapes = {}       # id(value) -> (width, signed, value kept alive)
        self._evals = {}        # see _eval_bit
        self._adds = {}         # see _add_fact
        self.inv = inventory
        self.ff = {id(sig): (path, frag, sig) for path, frag, sig in inventory.flip_flops}
        self.comb = {}          # id(signal) -> [(path tests [(test, patterns, k)], lhs, rhs)]
        self.sync = {}          # id(fragment) -> statements
        self.signals = {}
        for _path, frag in inventory.fragments:
            for domain, stmts in frag.statements.items():
                if domain == "comb":
                    self._collect(stmts, [], self.comb)
                else:
                    self.sync[id(frag)] = stmts
        # A synchronous read port's data register is a flip-flop too: it takes the row at
        # the address while enabled. Rows are equal in both runs (R), so its new value is
        # tainted only through the address; the statements below say so to the analysis.
        self.rdports = {}       # id(data signal) -> (memory index, port index, statements)
        for n, (path, mem) in enumerate(inventory.memories):
            parent = inventory.memory_parents[id(mem)]
            for k, port in enumerate(mem._read_ports):
                if port._domain == "comb" or not isinstance(port._data, Signal):
                    continue
                scratch = Module()
                with scratch.If(Value.cast(port._en)):
                    scratch.d.sync += port._data.eq(Value.cast(port._addr))
                stmts = Fragment.get(scratch, None).statements["sync"]
                self.ff[id(port._data)] = ((*path, f"rdport{k}"), parent, port._data)
                self.rdports[id(port._data)] = (n, k, stmts)
        self.force_live = {id(s) for s in force_live}
        # One-bit flip-flops are live (the guards come from them; they cost a bit each).
        self.dead = {k for k, (_p, _f, sig) in self.ff.items()
                     if k not in self.force_live and self._len(sig) > 1}
        self.bit_keys = {(k, 0) for k, (_p, _f, sig) in self.ff.items() if self._len(sig) == 1}
        self.component = component
        # Signals no statement drives hold their reset value (a read port's enable left at
        # 1), unless the component's ports bring them in.
        self.inputs = {id(x) for _p, _m, v in component.signature.flatten(component)
                       for x in Value.cast(v)._rhs_signals()}
        # The stream contract at the component's ports (see the module docstring): an input
        # stream's payload is only known equal in both runs while its valid is 1, an output
        # stream's ready only while its valid is 1. Reading one elsewhere taints with the
        # port's id.
        self.port_conds = {}
        for payload_or_ready, conds in (_stream_contract(component) if contract else ()):
            self.port_conds[id(payload_or_ready)] = conds
            self.bit_keys |= {(id(c), 0) for c in conds}
            if len(payload_or_ready) == 1:
                self.bit_keys.add((id(payload_or_ready), 0))     # an output's ready
            for c in conds:
                self._cone_keys(c, self.bit_keys)
        self.guards = {}        # id(dead flip-flop) -> [guard signals], every one passing (b)
        self.why = {}           # id(flip-flop) -> why it is live (what the analysis saw)
        self.state_guards = {}  # id(fragment) -> its state guard candidates (analyse sets it)
        self._memo = {}
        self._interned = {}     # frozenset of facts -> the one dict with them (_bit_facts)
        self._interned_ids = set()      # ids of those dictionaries (kept alive there)
        self._restricted = {}   # id(facts) -> (its restriction, facts): see _bit_facts
        self._memo_index = {}   # id(signal) -> memo keys of values that read it
        self._snap = self._state_snapshot()

    def _cone_keys(self, value, keys, depth=0):
        """Add to ``keys`` the fact keys that can decide the 1-bit ``value`` (a port's
        ``ready``, computed from the stage-valid bits and an ``advance`` signal): the taint of
        a port read depends on them, so the taint memo must keep them."""
        if depth > 12 or self._len(value) != 1:
            return
        if isinstance(value, Signal):
            if (id(value), 0) in keys and depth:
                return
            keys.add((id(value), 0))
            drivers = self.comb.get(id(value))
            if drivers and len(drivers) == 1 and not drivers[0][0] and drivers[0][1] is value:
                self._cone_keys(drivers[0][2], keys, depth + 1)
        elif isinstance(value, Operator):
            keys.add((self._skey(value), 0))
            self.signals[id(value)] = value         # kept alive: its id is in a key
            for x in value.operands:
                self._cone_keys(x, keys, depth + 1)
        elif isinstance(value, Slice) and value.stop - value.start == 1 \
                and isinstance(value.value, Signal) and value.start == 0:
            self._cone_keys(value.value, keys, depth + 1)

    # -- the statement tree -------------------------------------------------------------

    def _collect(self, stmts, tests, table):
        for st in stmts:
            if isinstance(st, Assign):
                for sig in st.lhs._lhs_signals():
                    table.setdefault(id(sig), []).append((tuple(tests), st.lhs, st.rhs))
                    self.signals[id(sig)] = sig
            elif isinstance(st, Switch):
                for k, (patterns, body, _loc) in enumerate(st.cases):
                    self._collect(body, [*tests, (st, k)], table)

    @staticmethod
    def _case_facts(switch, k):
        """``[(value, bit, v)]`` the test's bits must have for case ``k`` to be taken."""
        return _pattern_facts(switch.test, [c[0] for c in switch.cases], k)

    def _switch_value_eval(self, value, facts, bit, depth):
        # Known only if every feasible case gives the same known bit: stop at the first case
        # that does not (wide multiplexers of a 512-bit datapath have dozens of cases).
        patterns = [c[0] for c in value.cases]
        out = None
        for k, (_patterns, v) in enumerate(value.cases):
            f = facts
            for t, b, x in _pattern_facts(value.test, patterns, k):
                f = self._add_fact(f, t, b, x)
            if f is _INFEASIBLE:
                continue
            got = self._extended_bit(v, f, bit, depth + 1)
            if got is None or (out is not None and got != out):
                return None
            out = got
        return out


    # -- facts ----------------------------------------------------------------------------

    def _len(self, value):
        """``len(value)``, cached: Amaranth recomputes an operator's shape from its operands
        at every call, which dominated the analysis' run time."""
        hit = self._shapes.get(id(value))
        if hit is None:
            shape = value.shape()
            hit = self._shapes[id(value)] = (shape.width, shape.signed, value)
        return hit[0]

    def _signed(self, value):
        self._len(value)
        return self._shapes[id(value)][1]

    def _skey(self, value):
        """A key equal for structurally equal expressions (``a & b`` written twice)."""
        cache = self.__dict__.setdefault("_skeys", {})
        hit = cache.get(id(value))
        if hit is not None:
            return hit[1]
        if isinstance(value, Signal):
            key = id(value)
        elif isinstance(value, Const):
            key = ("c", value.value, self._len(value))
        elif isinstance(value, Slice):
            key = ("s", self._skey(value.value), value.start, value.stop)
        elif isinstance(value, Operator):
            key = ("o", value.operator, tuple(self._skey(a) for a in value.operands))
        else:
            key = ("v", id(value))
        cache[id(value)] = (value, key)         # the value kept alive: its id is the key
        self.__dict__.setdefault("_skey_values", {}).setdefault(key, value)
        return key

    def _add_fact(self, facts, value, bit, v, depth=0):
        """``facts`` with bit ``bit`` of ``value`` known to be ``v``, or _INFEASIBLE.
        Memoised on the facts dictionary itself, like :meth:`_eval_bit`: the same facts
        with the same fact added give the same dictionary back, so evaluations under it
        hit the evaluation memo. A path's facts are rebuilt from the same interned facts
        for every value that reads it; each rebuilt copy missed that memo and evaluated
        its cones again (with the interning in :meth:`_bit_facts`, the 512-bit rate
        limiter's analysis went from 138 s to 47 s)."""
        if facts is _INFEASIBLE or depth > 12 or bit >= self._len(value):
            return facts
        key = (id(facts), id(value), bit, v, depth)
        hit = self._adds.get(key)
        if hit is not None:
            return hit[0]
        out = self.__add_fact(facts, value, bit, v, depth)
        if len(self._adds) > 500_000:
            self._adds.clear()
        self._adds[key] = (out, facts, value)   # both kept alive: their ids are the key
        return out

    def __add_fact(self, facts, value, bit, v, depth):
        if isinstance(value, Const):
            return facts if (value.value >> bit) & 1 == v else _INFEASIBLE
        if isinstance(value, Concat):
            for part in value.parts:
                if bit < self._len(part):
                    return self._add_fact(facts, part, bit, v, depth + 1)
                bit -= self._len(part)
            return facts
        if isinstance(value, Slice):
            return self._add_fact(facts, value.value, value.start + bit, v, depth + 1)
        if isinstance(value, Signal):
            key = (id(value), bit)
            have = facts.get(key)
            if have is not None:
                return facts if have == v else _INFEASIBLE
            if id(value) not in self.comb and id(value) not in self.ff \
                    and id(value) not in self.inputs:
                return facts if (value.init >> bit) & 1 == v else _INFEASIBLE
            facts = {**facts, key: v}
            drivers = self.comb.get(id(value))
            if drivers and len(drivers) == 1:
                tests, lhs, rhs = drivers[0]
                if not tests and lhs is value and bit < self._len(rhs):
                    facts = self._add_fact(facts, rhs, bit, v, depth + 1)
            return facts
        if isinstance(value, Operator) and self._len(value) == 1 and bit == 0:
            # The expression itself (a condition met again, in the same Switch or written
            # again elsewhere: keyed by its structure).
            key = (self._skey(value), 0)
            have = facts.get(key)
            if have is not None:
                return facts if have == v else _INFEASIBLE
            known = self._eval_bit(value, facts)
            if known is not None:
                return facts if known == v else _INFEASIBLE
            facts = {**facts, key: v}
            self.signals[id(value)] = value         # kept alive: its id is a key
            op, args = value.operator, value.operands
            if op == "~" and self._len(args[0]) == 1:
                return self._add_fact(facts, args[0], 0, 1 - v, depth + 1)
            if op == "b" and self._len(args[0]) == 1:
                return self._add_fact(facts, args[0], 0, v, depth + 1)
            if op == "&" and v == 1 and all(self._len(a) == 1 for a in args):
                for a in args:
                    facts = self._add_fact(facts, a, 0, 1, depth + 1)
                return facts
            if op == "|" and v == 0 and all(self._len(a) == 1 for a in args):
                for a in args:
                    facts = self._add_fact(facts, a, 0, 0, depth + 1)
                return facts
            if (op == "==" and v == 1 or op == "!=" and v == 0) and len(args) == 2:
                # A state compared with a constant (``phase == Phase.STREAM``): its bits.
                x, c = args if isinstance(args[1], Const) else args[::-1]
                if isinstance(c, Const) and not isinstance(x, Const) \
                        and self._len(x) <= _STATE_GUARD_BITS \
                        and not self._signed(x) and not self._signed(c):
                    for b in range(self._len(x)):
                        facts = self._add_fact(facts, x, b, (c.value >> b) & 1, depth + 1)
                    return facts
        return facts

    def _eval_bit(self, value, facts, bit=0, depth=0):
        """Bit ``bit`` of ``value`` if ``facts`` decide it, else None. Memoised on the facts
        dictionary itself (kept alive in the entry, so its id is not reused): facts are never
        changed in place, only copied with one more."""
        # Not keyed by depth: the depth bound only limits the work, and a bit found known at
        # any depth is known.
        key = (id(value), bit, id(facts))
        hit = self._evals.get(key)
        if hit is not None:
            return hit[0]
        out = self.__eval_bit(value, facts, bit, depth)
        if len(self._evals) > 500_000:
            self._evals.clear()
        self._evals[key] = (out, value, facts)
        return out

    def __eval_bit(self, value, facts, bit, depth):
        if depth > 12 or bit >= self._len(value):
            return None
        if isinstance(value, Const):
            return (value.value >> bit) & 1
        if isinstance(value, Concat):
            for part in value.parts:
                if bit < self._len(part):
                    return self._eval_bit(part, facts, bit, depth + 1)
                bit -= self._len(part)
            return None
        if isinstance(value, Slice):
            return self._eval_bit(value.value, facts, value.start + bit, depth + 1)
        if isinstance(value, Signal):
            key = (id(value), bit)
            if key in facts:
                return facts[key]
            drivers = self.comb.get(id(value))
            if drivers and len(drivers) == 1:
                tests, lhs, rhs = drivers[0]
                if not tests and lhs is value:
                    return self._eval_bit(rhs, facts, bit, depth + 1)
            if not drivers and id(value) not in self.ff and id(value) not in self.inputs:
                return (value.init >> bit) & 1
            return None
        if isinstance(value, SwitchValue):
            return self._switch_value_eval(value, facts, bit, depth)
        if isinstance(value, Operator) and value.operator == "m":
            sel = self._eval_bit(value.operands[0], facts, 0, depth + 1)
            if sel is None:
                a = self._extended_bit(value.operands[1], facts, bit, depth + 1)
                if a is None:
                    return None
                b = self._extended_bit(value.operands[2], facts, bit, depth + 1)
                return a if a == b else None
            return self._extended_bit(value.operands[1 if sel else 2], facts, bit, depth + 1)
        if isinstance(value, Operator) and self._len(value) == 1 and bit == 0:
            key = (self._skey(value), 0)
            if key in facts:
                return facts[key]
            op, args = value.operator, value.operands
            if op in ("~", "b") and self._len(args[0]) == 1:
                v = self._eval_bit(args[0], facts, 0, depth + 1)
                return v if v is None or op == "b" else 1 - v
            if op in ("&", "|") and all(self._len(a) == 1 for a in args):
                # One controlling operand decides; evaluated lazily, in order.
                control, unknown = (0 if op == "&" else 1), False
                for a in args:
                    v = self._eval_bit(a, facts, 0, depth + 1)
                    if v == control:
                        return control
                    unknown |= v is None
                return None if unknown else 1 - control
        if isinstance(value, Operator) and value.operator in ("==", "!=") and bit == 0:
            # A state guard known to be "not 0" (its ("nz", id) fact) against 0.
            x, c = value.operands
            if isinstance(x, Const):
                x, c = c, x
            if isinstance(c, Const) and c.value == 0 and isinstance(x, Signal) \
                    and facts.get(("nz", id(x))) == 1:
                return int(value.operator == "!=")
        if isinstance(value, Operator) and value.operator in _ARITH:
            # A comparison or sum of narrow operands that the facts fix entirely (a FIFO's
            # level known to be 0 makes `level != 0` known).
            known = self._eval_value(value, facts, depth)
            if known is not None:
                return (known >> bit) & 1
        return None

    def _extended_bit(self, value, facts, bit, depth):
        """Bit ``bit`` of an operand widened to its operator's width: past its own width, 0
        when unsigned, its sign bit when signed (``Mux(idle, 0, keep)``: the 0 is 1 bit wide,
        and its upper bits are known zeros)."""
        n = self._len(value)
        if bit >= n:
            if not self._signed(value):
                return 0
            bit = n - 1
        return self._eval_bit(value, facts, bit, depth)

    def _eval_value(self, value, facts, depth=0):
        """The whole (unsigned, at most 32-bit) value of ``value`` if ``facts`` fix it."""
        if depth > 12 or self._len(value) > 32 or self._signed(value):
            return None
        if isinstance(value, Operator) and value.operator in _ARITH:
            args = []
            for a in value.operands:
                v = self._eval_value(a, facts, depth + 1)
                if v is None:
                    return None
                args.append(v)
            out = _ARITH[value.operator](*args)
            return out & ((1 << self._len(value)) - 1)
        out = 0
        for bit in range(self._len(value)):
            b = self._eval_bit(value, facts, bit, depth + 1)
            if b is None:
                return None
            out |= b << bit
        return out

    # -- the taint memo -------------------------------------------------------------------
    #
    # A taint depends on which flip-flops are dead and on their guards, and the search changes
    # those one flip-flop at a time. Clearing the whole memo at every change made the analysis
    # recompute every cone from scratch at each check (most of its time on the NAT and the
    # checksum NTs); instead each entry is filed under the signals its value reads, and a
    # change forgets only the entries that read, through combinational signals, a flip-flop
    # that changed. The final check of :func:`analyse` starts from an empty memo, so a stale
    # entry could only make a trial fail there, never make the result unsound.

    def _direct_reads(self, value):
        if isinstance(value, Signal):
            return (id(value),)
        cache = self.__dict__.setdefault("_reads_cache", {})
        hit = cache.get(id(value))
        if hit is None:
            hit = cache[id(value)] = (tuple({id(x) for x in value._rhs_signals()}), value)
        return hit[0]

    def _remember(self, key, value):
        index = self._memo_index
        for s in self._direct_reads(value):
            index.setdefault(s, []).append(key)

    def _fanout(self, k):
        """``k`` and every combinational signal whose value reads it, transitively."""
        if not hasattr(self, "_comb_readers"):
            readers = {}
            for s, assigns in self.comb.items():
                for tests, lhs, rhs in assigns:
                    reads = set(self._direct_reads(rhs)) | set(self._direct_reads(lhs))
                    for switch, _k in tests:
                        reads |= set(self._direct_reads(switch.test))
                    for r in reads:
                        readers.setdefault(r, set()).add(s)
            self._comb_readers, self._fanouts = readers, {}
        hit = self._fanouts.get(k)
        if hit is None:
            hit, work = {k}, [k]
            while work:
                for r in self._comb_readers.get(work.pop(), ()):
                    if r not in hit:
                        hit.add(r)
                        work.append(r)
            self._fanouts[k] = hit
        return hit

    def _state_snapshot(self):
        return set(self.dead), {k: tuple(map(id, gs)) for k, gs in self.guards.items()}

    def reset_memo(self):
        """Forget every memoised taint."""
        self._memo.clear()
        self._memo_index = {}
        self._snap = self._state_snapshot()

    def flush(self):
        """Forget the memoised taints that the changes to ``dead`` and ``guards`` since the
        last flush can change."""
        dead, guards = self._state_snapshot()
        old_dead, old_guards = self._snap
        changed = dead ^ old_dead
        changed |= {k for k in guards.keys() | old_guards.keys()
                    if guards.get(k) != old_guards.get(k)}
        self._snap = (dead, guards)
        forget = set()
        for k in changed:
            forget |= self._fanout(k)
        memo, index = self._memo, self._memo_index
        for s in forget:
            for key in index.pop(s, ()):
                memo.pop(key, None)

    # -- taint ----------------------------------------------------------------------------

    def bad(self, t):
        """The part of a taint that breaks a sink: dead flip-flops (a memoised taint may
        still name one since made live) and ports read outside their contract."""
        return (t & self.dead) | frozenset(k for k in t if k in self.port_conds)

    # -- guards: 1-bit flip-flops, or narrow state registers (an FSM) reset to 0 -------------
    #
    # A guard is "0" when every bit is 0 and "1" when it is not: a 1-bit stage-valid flag, or
    # a realigner's phase, whose idle state is 0 (its data registers are read only in the
    # other states). A multi-bit guard's "1" is the fact ``("nz", id)``; its "0", a fact for
    # each bit.

    def _guard_on(self, g, facts):
        """Whether ``facts`` say guard ``g`` is 1 (not 0)."""
        if self._len(g) == 1:
            return facts.get((id(g), 0)) == 1
        return facts.get(("nz", id(g))) == 1 or \
            any(facts.get((id(g), b)) == 1 for b in range(self._len(g)))

    def _guard_known(self, g, facts):
        """Whether ``facts`` decide guard ``g`` (0 or not)."""
        if self._len(g) == 1:
            return (id(g), 0) in facts
        return self._guard_on(g, facts) or \
            all(facts.get((id(g), b)) == 0 for b in range(self._len(g)))

    def _guard_fact(self, facts, g, v):
        """``facts`` with guard ``g`` known to be ``v`` (0 or 1, as above)."""
        if self._len(g) == 1 or facts is _INFEASIBLE:
            return self._add_fact(facts, g, 0, v)
        if v == 0:
            if facts.get(("nz", id(g))) == 1:
                return _INFEASIBLE
            for b in range(self._len(g)):
                facts = self._add_fact(facts, g, b, 0)
            return facts
        if all(facts.get((id(g), b)) == 0 for b in range(self._len(g))):
            return _INFEASIBLE
        return {**facts, ("nz", id(g)): 1}

    def _taint_fact(self, facts, value, bit, v):
        """:meth:`_add_fact` for the taint rules, where the facts are only the guards' keys
        (see :meth:`taint`): a value whose cone holds none of them (a select computed from
        data) is decided by no fact, so it adds none and is infeasible only if it is a
        constant; found without evaluating it again under each set of facts (the adder trees
        of the 512-bit checksum NTs made that most of their analysis)."""
        if facts is _INFEASIBLE or self._bit_cone(value):
            return self._add_fact(facts, value, bit, v)
        known = self._eval_bit(value, _NO_FACTS, bit)
        return facts if known is None or known == v else _INFEASIBLE

    def _bit_cone(self, value):
        """Whether a guard's key (or a port-contract key) is in ``value``'s cone, through
        combinational drivers and their conditions."""
        memo = self.__dict__.setdefault("_bit_cones", {})
        hit = memo.get(id(value))
        if hit is not None:
            return hit[0]
        memo[id(value)] = (False, value)        # a combinational loop adds nothing twice
        out = False
        if isinstance(value, Signal):
            out = (id(value), 0) in self.bit_keys
            for tests, lhs, rhs in self.comb.get(id(value), ()):
                if out:
                    break
                out = self._bit_cone(rhs) or any(self._bit_cone(sw.test) for sw, _k in tests) \
                    or (isinstance(lhs, Part) and self._bit_cone(lhs.offset))
        elif isinstance(value, (Const, Initial)) or not hasattr(value, "shape"):
            out = False
        else:
            if isinstance(value, Operator) and self._len(value) == 1:
                out = (self._skey(value), 0) in self.bit_keys
            if not out:
                if isinstance(value, Operator):
                    subs = value.operands
                elif isinstance(value, Slice):
                    subs = (value.value,)
                elif isinstance(value, Part):
                    subs = (value.value, value.offset)
                elif isinstance(value, Concat):
                    subs = value.parts
                elif isinstance(value, SwitchValue):
                    subs = (value.test, *(v for _p, v in value.cases))
                else:
                    subs = tuple(value._rhs_signals())
                out = any(self._bit_cone(x) for x in subs)
        memo[id(value)] = (out, value)
        return out

    def _bit_facts(self, facts):
        """``facts`` restricted to the guards' keys: the same dictionary for the same
        restriction (one per distinct set, interned), so that the evaluation memo, keyed
        by the dictionary, finds what it computed under the same facts before."""
        if id(facts) in self._interned_ids:
            return facts
        seen = self._restricted.get(id(facts))
        if seen is not None:
            return seen[0]
        items = frozenset((k, v) for k, v in facts.items() if k in self.bit_keys)
        hit = self._interned.get(items)
        if hit is None:
            hit = self._interned[items] = dict(items)
            self._interned_ids.add(id(hit))
        if len(self._restricted) > 500_000:
            self._restricted.clear()
        self._restricted[id(facts)] = (hit, facts)      # facts kept alive: its id is the key
        return hit

    def taint(self, value, facts, depth=0):
        if facts is _INFEASIBLE:
            return frozenset()
        # Only facts about the guards (and the port contract's valid and ready) decide a
        # taint; dropping the others (which only prune infeasible paths) is sound and keeps
        # the memo small.
        facts = self._bit_facts(facts)
        key = (id(value), id(facts))     # interned: one dictionary per set of facts
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        self._remember(key, value)
        self._memo[key] = frozenset()           # a comb loop adds nothing twice
        out = self._taint(value, facts, depth)
        self._memo[key] = out
        return out

    def _taint(self, value, facts, depth):
        if isinstance(value, (Const, Initial)) or not hasattr(value, "shape"):
            return frozenset()
        if isinstance(value, Signal):
            k = id(value)
            if k in self.ff:
                if k in self.dead:
                    # Equal in both runs wherever one of its guards is known to be 1. Before
                    # the analysis gives it guards (while guard candidates are picked) it
                    # counts as equal: that only picks candidates, which the analysis checks.
                    gs = self.guards.get(k)
                    if gs is None or any(self._guard_on(g, facts) for g in gs):
                        return frozenset()
                    return frozenset([k])
                return frozenset()
            conds = self.port_conds.get(k)
            if conds is not None:
                if all(self._eval_bit(c, facts) == 1 for c in conds):
                    return frozenset()
                return frozenset([k])
            if k in self.comb:
                out = set()
                for tests, lhs, rhs in self.comb[k]:
                    f, t = self._path(tests, facts, cheap=True)
                    if f is _INFEASIBLE:
                        continue
                    out |= t | self.taint(rhs, f) | self._lhs_taint(lhs, f)
                return frozenset(out)
            return frozenset()
        if isinstance(value, Operator):
            args = value.operands
            if value.operator == "m":
                sel, a, b = args
                ts = self.taint(sel, facts)
                if ts:
                    return ts | self.taint(a, facts) | self.taint(b, facts)
                return (self.taint(a, self._taint_fact(facts, sel, 0, 1))
                        | self.taint(b, self._taint_fact(facts, sel, 0, 0)))
            if value.operator == "&" and len(args) == 2 and all(self._len(a) == 1 for a in args):
                a, b = args
                ta, tb = self.taint(a, facts), self.taint(b, facts)
                if not ta:
                    tb = self.taint(b, self._taint_fact(facts, a, 0, 1))
                if not tb:
                    ta = self.taint(a, self._taint_fact(facts, b, 0, 1))
                return ta | tb
            if value.operator == "|" and len(args) == 2 and all(self._len(a) == 1 for a in args):
                # Where an untainted operand is 1 the other does not matter.
                a, b = args
                ta, tb = self.taint(a, facts), self.taint(b, facts)
                if not ta and tb:
                    tb = self.taint(b, self._taint_fact(facts, a, 0, 0))
                if not tb and ta:
                    ta = self.taint(a, self._taint_fact(facts, b, 0, 0))
                return ta | tb
            out = frozenset()
            for a in args:
                out |= self.taint(a, facts)
            return out
        if isinstance(value, Slice):
            return self._taint_range(value.value, value.start, value.stop, facts)
        if isinstance(value, Part):
            return self.taint(value.value, facts) | self.taint(value.offset, facts)
        if isinstance(value, Concat):
            out = frozenset()
            for p in value.parts:
                out |= self.taint(p, facts)
            return out
        if isinstance(value, SwitchValue):
            out = self.taint(value.test, facts)
            patterns = [c[0] for c in value.cases]
            for k, (_p, v) in enumerate(value.cases):
                f = facts
                if not out:
                    for t, b, x in _pattern_facts(value.test, patterns, k):
                        f = self._taint_fact(f, t, b, x)
                out |= self.taint(v, f)
            return out
        # Anything else: every signal it reads, unguarded.
        out = set()
        for sig in value._rhs_signals():
            out |= self.taint(sig, facts)
        return frozenset(out)

    def _taint_range(self, value, lo, hi, facts):
        """The taint of bits ``lo:hi`` of ``value`` only: a struct field read out of a signal
        that the other fields' drivers also drive is not tainted by them."""
        if lo <= 0 and hi >= self._len(value):
            return self.taint(value, facts)
        facts = self._bit_facts(facts)
        key = ("range", id(value), lo, hi, id(facts))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        self._remember(key, value)
        self._memo[key] = frozenset()
        out = self.__taint_range(value, lo, hi, facts)
        self._memo[key] = out
        return out

    def __taint_range(self, value, lo, hi, facts):
        if isinstance(value, Const):
            return frozenset()
        if isinstance(value, Slice):
            return self._taint_range(value.value, value.start + lo, value.start + hi, facts)
        if isinstance(value, Concat):
            out, at = frozenset(), 0
            for part in value.parts:
                n = self._len(part)
                if at < hi and lo < at + n:
                    out |= self._taint_range(part, max(lo, at) - at, min(hi, at + n) - at,
                                             facts)
                at += n
            return out
        if isinstance(value, Signal) and id(value) not in self.ff and id(value) in self.comb:
            out = frozenset()
            for tests, lhs, rhs in self.comb[id(value)]:
                if lhs is value:
                    start, stop = 0, self._len(value)
                elif isinstance(lhs, Slice) and lhs.value is value:
                    start, stop = lhs.start, lhs.stop
                else:
                    start = stop = None
                if start is not None and (stop <= lo or hi <= start):
                    continue
                f, t = self._path(tests, facts, cheap=True)
                if f is _INFEASIBLE:
                    continue
                if start is None or self._signed(rhs):
                    out |= t | self.taint(rhs, f) | self._lhs_taint(lhs, f)
                    continue
                a, b = max(lo, start) - start, min(hi, stop) - start
                if a >= self._len(rhs):
                    out |= t            # zero extension: constant bits
                    continue
                out |= t | self._taint_range(rhs, a, min(b, self._len(rhs)), f)
            return out
        if isinstance(value, Operator) and value.operator in ("&", "|", "^", "~") \
                and all(self._len(x) == self._len(value) and not self._signed(x)
                        for x in value.operands) and self._len(value) > 1:
            out = frozenset()
            for x in value.operands:
                out |= self._taint_range(x, lo, hi, facts)
            return out
        return self.taint(value, facts)

    def _lhs_taint(self, lhs, facts):
        if isinstance(lhs, Part):
            return self.taint(lhs.offset, facts) | self._lhs_taint(lhs.value, facts)
        if isinstance(lhs, Slice):
            return self._lhs_taint(lhs.value, facts)
        if isinstance(lhs, Concat):
            out = frozenset()
            for p in lhs.parts:
                out |= self._lhs_taint(p, facts)
            return out
        if isinstance(lhs, SwitchValue):
            out = self.taint(lhs.test, facts)
            for _p, v in lhs.cases:
                out |= self._lhs_taint(v, facts)
            return out
        return frozenset()

    def _case_taint(self, switch, k, facts):
        """The taint of whether case ``k`` of ``switch`` is taken: of the test's bits that
        the patterns of cases ``0..k`` look at (an ``If``/``Elif`` chain is a Switch on the
        ``Cat`` of its conditions, and its first case does not depend on the later ones)."""
        test = switch.test
        n = self._len(test)
        if n == 1:
            return self.taint(test, facts)
        bits = set()
        for patterns, _body, *_rest in switch.cases[:k + 1]:
            for pat in patterns or ():
                bits |= {pos for pos, ch in enumerate(reversed(pat)) if ch in "01"}
        if len(bits) == n:
            return self.taint(test, facts)
        out = frozenset()
        for b in sorted(bits):
            out |= self._taint_range(test, b, b + 1, facts)
        return out

    def _path(self, tests, facts, cheap=False):
        """Facts on a path of ``(switch, case)`` steps and the taint of its conditions
        (``cheap``: for a taint, which only keeps the guards' keys, see :meth:`_taint_fact`)."""
        add = self._taint_fact if cheap else self._add_fact
        taint = frozenset()
        for switch, k in tests:
            t = self._case_taint(switch, k, facts)
            if t:
                taint |= t
                continue
            for value, bit, v in self._case_facts(switch, k):
                facts = add(facts, value, bit, v)
                if facts is _INFEASIBLE:
                    return facts, taint
        return facts, taint

    # -- (a): sinks -------------------------------------------------------------------------

    def sinks(self):
        """``[(what, value, facts)]``: the values that must be untainted."""
        out = []
        for k, (path, frag, sig) in self.ff.items():
            if k not in self.dead:
                out.append((f"{'.'.join(path + (sig.name,))}'", ("next", k), {}))
        for name, member in self.component.signature.members.items():
            port = getattr(self.component, name)
            if member.is_signature and isinstance(member.signature, stream.Signature) \
                    and not member.dimensions:
                valid = Value.cast(port.valid)
                ready = Value.cast(port.ready)
                payload = Value.cast(port.payload)
                if member.flow == wiring.Out:
                    out.append((f"{name}.valid", valid, {}))
                    # While valid, not only when taken: a neighbour may look at the payload
                    # before it says ready (compose.py; AXI-Stream holds it until taken).
                    f = self._add_fact({}, valid, 0, 1)
                    out.append((f"{name}.payload", payload, f))
                else:
                    out.append((f"{name}.ready", ready, self._add_fact({}, valid, 0, 1)))
                continue
            for sub_path, flow, leaf_value in _flatten(member, port, (name,)):
                if flow == wiring.Out:
                    out.append((".".join(map(str, sub_path)), Value.cast(leaf_value), {}))
        for path, mem in self.inv.memories:
            where = ".".join(path)
            for p in mem._write_ports:
                en = Value.cast(p._en)
                out.append((f"{where} write enable", en, {}))
                f = self._add_fact({}, en, 0, 1) if self._len(en) == 1 else {}
                out.append((f"{where} write address", ("when", Value.cast(p._addr), en), f))
                out.append((f"{where} write data", ("when", Value.cast(p._data), en), f))
            for p in mem._read_ports:
                if id(p._data) in self.rdports:
                    # A synchronous port's data register is a flip-flop of the analysis
                    # (its next value reads the enable and the address): live, its next
                    # value is a sink; dead, it has a guard like any other.
                    continue
                en = Value.cast(p._en)
                out.append((f"{where} read enable", en, {}))
                f = self._add_fact({}, en, 0, 1) if self._len(en) == 1 else {}
                out.append((f"{where} read address", Value.cast(p._addr), f))
        return out

    def sink_taint(self, value, facts):
        """The taint of a sink of :meth:`sinks`."""
        if not isinstance(value, tuple):
            return self.taint(value, facts)
        if value[0] == "next":
            return self.next_taint(value[1])
        return self._when_taint(value[1], value[2], facts)

    def _when_taint(self, value, en, facts):
        """The taint of ``value`` where ``en`` is 1 (``facts`` say so). A port's data and
        enable are often driven side by side in the same cases (``If(sweeping): data.eq(0),
        en.eq(...) Else: data.eq(updated), en.eq(write)``): then each case's data is only
        needed where that case's enable is 1, which the single fact ``en == 1`` cannot say."""
        dv, de = self.comb.get(id(value)), self.comb.get(id(en))
        if not (isinstance(value, Signal) and isinstance(en, Signal) and dv and de
                and len(dv) == len(de) and self._len(en) == 1
                and all(tv == te and lv is value and le is en
                        for (tv, lv, _rv), (te, le, _re) in zip(dv, de))):
            return self.taint(value, facts)
        out = set()
        for (tests, _lv, rv), (_te, _le, re) in zip(dv, de):
            f, t = self._path(tests, facts)
            if f is _INFEASIBLE:
                continue
            g = self._add_fact(f, re, 0, 1) if not t else f
            if g is _INFEASIBLE:
                continue
            out |= t | self.taint(rv, g)
        return frozenset(out)

    def statements_of(self, k):
        """The ``sync`` statements that assign flip-flop ``k`` (and its fragment's others)."""
        stmts = self.sync.get(id(self.ff[k][1]), ())
        if k in self.rdports:
            stmts = _StatementList([*stmts, *self.rdports[k][2]])
        return stmts

    def assigns_of(self, k):
        """``[(tests, lhs, rhs)]`` of the assignments to flip-flop ``k``."""
        if k in self.rdports:
            table = {}
            self._collect(self.rdports[k][2], [], table)
            return table.get(k, ())
        return self._sync_assigns(self.ff[k][1]).get(k, ())

    def next_taint(self, k):
        """Taint of flip-flop ``k``'s next value (its hold is itself: untainted when live)."""
        out = self._next_taint(k, {})
        ports = {id(c): c for e in out if e in self.port_conds for c in self.port_conds[e]}
        # An output's ready read outside its contract (``Elif(o.ready): o_valid.eq(0)``):
        # split on the port's valid, which is equal in both runs (a sink), as a dead
        # register's read splits on its guard.
        for c in ports.values():
            split = [self._next_taint(k, self._add_fact({}, c, 0, v)) for v in (1, 0)]
            if not any(e in self.port_conds for t in split for e in t):
                return split[0] | split[1]
        return out

    def _next_taint(self, k, facts):
        sig = self.ff[k][2]
        assigns = self.assigns_of(k)
        out = set()
        for n, (tests, lhs, rhs) in enumerate(assigns):
            f, t = self._path(tests, facts)
            if f is _INFEASIBLE:
                continue
            if t and lhs is sig and self._no_change(sig, rhs, f) \
                    and all(_exclusive(assigns[j][0], tests) for j in range(n)):
                # Taken or not, the flip-flop keeps its value here: no earlier assignment can
                # be taken with it, so without it the circuit is the same where ``f`` holds
                # (and ``f`` holds in both runs: its facts are untainted).
                continue
            out |= t | self.taint(rhs, f) | self._lhs_taint(lhs, f)
        return frozenset(out)

    def _no_change(self, sig, rhs, facts):
        if self._len(sig) > 32:
            return False
        now = self._eval_value(sig, facts)
        return now is not None and now == self._eval_value(rhs, facts)

    def _sync_assigns(self, frag):
        cache = self.__dict__.setdefault("_sync_cache", {})
        if id(frag) not in cache:
            table = {}
            self._collect(self.sync.get(id(frag), ()), [], table)
            cache[id(frag)] = table
        return cache[id(frag)]

    # -- (b): a dead flip-flop's own update ---------------------------------------------------

    def check_dead(self, k, g):
        """Whether (b) holds for dead ``k`` with guard ``g``."""
        _path, frag, sig = self.ff[k]
        watched = (k, id(g))
        stmts = self.statements_of(k)
        for gv in (1, 0):
            try:
                # A state guard (an FSM) is assigned in many branches: it gives up on a
                # register after fewer paths than a 1-bit guard does.
                paths = self._paths(stmts, self._guard_fact({}, g, gv), watched, False,
                                    limit=4096 if self._len(g) == 1 else 256)
            except _TooMany:
                return False
            for facts, taken in paths:
                if self._path_end(taken, facts, gv, sig, g, 2):
                    continue
                # ``k``'s other guards: where one is 1, ``k`` is equal in both runs (the
                # invariant's other conjunct), so holding it keeps it equal (a register kept
                # for a fill unit's beats as well as for the stage's own).
                others = [h for h in self.guards.get(k) or () if h is not g
                          and not self._guard_known(h, facts)]
                if not any(all(self._path_end(taken, self._guard_fact(facts, h, v), gv, sig,
                                              g, 1) for v in (1, 0)) for h in others):
                    return False
        return True

    def _lhs_ids(self, st):
        # Amaranth recomputes a statement's assigned signals on every call (a fifth of the
        # analysis time when measured on the NAT): once per statement here.
        cache = self.__dict__.setdefault("_lhs_cache", {})
        hit = cache.get(id(st))
        if hit is None:
            hit = cache[id(st)] = (frozenset(id(x) for x in st._lhs_signals()), st)
        return hit[0]

    def _paths(self, stmts, facts, watched, dirty, limit=4096):
        """Every ``(facts, [(who, lhs, rhs, dirty)])`` path through ``stmts`` deciding
        which assignments to the ``watched`` flip-flops happen (cases of a Switch exclude
        each other; a tainted condition makes what it guards ``dirty``)."""
        paths = [(facts, [])]
        for st in stmts:
            if not self._lhs_ids(st).intersection(watched):
                continue
            nxt = []
            for f, taken in paths:
                if isinstance(st, Assign):
                    ids = self._lhs_ids(st)
                    nxt.append((f, taken + [("d" if watched[0] in ids else "g", st.lhs,
                                             st.rhs, "dirty" if dirty else None)]))
                    continue
                patterns = [c[0] for c in st.cases]
                for k, (_p, body, _l) in enumerate(st.cases):
                    t = self._case_taint(st, k, f)
                    g = f
                    if not t and not dirty:
                        for v, bit, x in _pattern_facts(st.test, patterns, k):
                            g = self._add_fact(g, v, bit, x)
                    if g is _INFEASIBLE:
                        continue
                    for h, sub in self._paths(body, g, watched, dirty or bool(t)):
                        nxt.append((h, taken + sub))
                if None not in patterns:          # no case taken
                    t = self._case_taint(st, len(st.cases) - 1, f)
                    g = f
                    if not t and not dirty:
                        for pats in patterns:
                            fixed = [(pos, ch) for pos, ch in enumerate(reversed(pats[0]))
                                     if ch in "01"] if len(pats) == 1 else []
                            if len(fixed) == 1:
                                pos, ch = fixed[0]
                                g = self._add_fact(g, st.test, pos, 1 - int(ch))
                    if g is not _INFEASIBLE:
                        nxt.append((g, taken))
            paths = nxt
            if len(paths) > limit:
                raise _TooMany()
        return paths

    def _feasible(self, facts):
        """``facts``, or _INFEASIBLE when the facts on flip-flops and inputs alone (a split's
        new ones among them) contradict a fact on a combinational signal or expression (a
        path's condition ``core_beat`` that no stage can raise where ``phase`` is idle and
        the input register empty)."""
        if facts is _INFEASIBLE:
            return facts
        base = {k: v for k, v in facts.items()
                if k[0] == "nz" or (isinstance(k[0], int)
                                    and (k[0] in self.ff or k[0] in self.inputs))}
        if len(base) == len(facts):
            return facts
        by_key = self.__dict__.get("_skey_values", {})      # kept by _skey
        for key, v in facts.items():
            if key in base:
                continue
            if isinstance(key[0], int):
                drivers = self.comb.get(key[0])
                if not drivers or len(drivers) != 1 or drivers[0][0] \
                        or id(drivers[0][1]) != key[0]:
                    continue
                value, bit = drivers[0][2], key[1]
            else:
                value, bit = by_key.get(key[0]), 0
                if value is None:
                    continue
            got = self._eval_bit(value, base, bit)
            if got is not None and got != v:
                return _INFEASIBLE
        return facts

    def _path_end(self, taken, facts, gv, sig, g, split):
        if facts is _INFEASIBLE:
            return True
        d_state = "hold"
        if any(self._guard_on(h, facts) for h in self.guards.get(id(sig)) or ()
               if h is not g):
            d_state = "clean"           # equal now (another guard is 1): holding keeps it
        g_state = "hold"
        covered = set()
        for who, lhs, rhs, dirty in taken:
            if who == "d":
                t = dirty or (self.taint(rhs, facts) | self._lhs_taint(lhs, facts))
                if t:
                    if split and d_state != "dirty" and dirty is None:
                        # Split on any guard of the tainting flip-flops (a stage's data
                        # registers, all guarded by the stage's valid bit), and on the
                        # fragment's state guards (an FSM deciding which register a
                        # multiplexer reads).
                        split_on = {}
                        for e in t:
                            # A port read outside its contract splits on the port's valid
                            # as a dead register splits on its guards.
                            split_on.update((id(x), x) for x in
                                            self.guards.get(e) or self.port_conds.get(e) or ())
                        split_on.update((id(x), x) for x in
                                        self.state_guards.get(id(self.ff[id(sig)][1]), ()))
                        for ge in split_on.values():
                            if self._guard_known(ge, facts):
                                continue
                            if all(self._path_end(
                                    taken, self._feasible(self._guard_fact(facts, ge, v)), gv,
                                    sig, g, split - 1) for v in (1, 0)):
                                return True
                    d_state = "dirty"
                elif d_state != "dirty":
                    covered |= _covered(lhs, sig)
                    if len(covered) == self._len(sig):
                        d_state = "clean"
            elif isinstance(lhs, Signal):
                # Even under a tainted condition: ``g`` is live, so its next value is a sink
                # (equal in both runs), and on this path of this run it is ``rhs``.
                v = self._eval_bit(rhs, facts) if self._len(lhs) == 1 else \
                    self._eval_value(rhs, facts)
                g_state = ("zero" if v == 0 else "other")
            else:
                g_state = "other"
        if d_state == "clean":
            return True
        if gv == 1 and d_state == "hold":
            return True
        return g_state == "zero" or (g_state == "hold" and gv == 0)


def _exclusive(tests_a, tests_b):
    """Whether two assignments' paths part at different cases of one Switch (at most one
    of them is taken in a cycle)."""
    for (sa, ka), (sb, kb) in zip(tests_a, tests_b):
        if sa is not sb:
            return False
        if ka != kb:
            return True
    return False


def _pattern_facts(test, all_patterns, k):
    out = []
    patterns = all_patterns[k]
    if patterns is not None and len(patterns) == 1:
        pat = patterns[0]
        for pos, ch in enumerate(reversed(pat)):
            if ch in "01":
                out.append((test, pos, int(ch)))
    # Earlier cases not taken: only a one-bit pattern tells a bit (If/Elif chains).
    for patterns_j in all_patterns[:k]:
        if patterns_j is None or len(patterns_j) != 1:
            continue
        fixed = [(pos, ch) for pos, ch in enumerate(reversed(patterns_j[0])) if ch in "01"]
        if len(fixed) == 1:
            pos, ch = fixed[0]
            out.append((test, pos, 1 - int(ch)))
    return out


def _covered(lhs, sig):
    """The bits of ``sig`` an assignment to ``lhs`` writes whatever its value."""
    if lhs is sig:
        return set(range(len(sig)))
    if isinstance(lhs, Slice) and lhs.value is sig:
        return set(range(lhs.start, lhs.stop))
    return set()


def _flatten(member, value, path):
    """``(path, flow, value)`` of each port below a member, flows seen from the component."""
    if member.is_port:
        yield path, member.flow, value
        return
    for sub_path, sub_member, sub_value in member.signature.flatten(value):
        flow = sub_member.flow if member.flow == wiring.Out else sub_member.flow.flip()
        yield (*path, *sub_path), flow, sub_value


def _draining(a, bits):
    """The bits of ``bits`` (1-bit flip-flops) fit to be guards: the stage-valid and busy bits
    that a drained component clears. A least fixpoint: with no input offered, every output
    ready, every narrow counter and level at its reset value (a drained FIFO is empty) and
    every bit already kept at 0, a bit is kept if it clears on some path and no path sets it.
    A pipeline's first valid bit clears when nothing comes in, the next one then, and so on;
    a stage's data bit (a leftover of the last packet, copied only from the previous stage's
    data), a sticky flag and a mode bit (its value an unknown configuration input) never
    qualify. This only picks guards: soundness does not rest on it
    (the stop waits for every guard to be 0), a wrong pick would make the stop wait."""
    _config, quiet = _quiet(a, bits=False)
    # A busy bit that a multi-cycle operation clears at its last step (ChaCha20's block
    # function: ``busy`` clears when ``pass_`` reaches its last pass, and ``pass_`` counts on by
    # itself while busy) clears on no path where the pass counter sits at its reset value:
    # its clearing path is also looked for with the narrow counters free.
    _config, loose = _quiet(a, bits=False, narrow=False)
    # A bit computed with a configuration input qualifies too when the drain decides it
    # (``e0_valid.eq(accept & last & counted)``, counted from a mode bit): the fixpoint
    # below only keeps bits whose next values the quiet facts fix.
    pool = list(bits)
    kept = []
    while True:
        facts, free = dict(quiet), dict(loose)
        for g in kept:
            for b in range(len(g)):
                facts[(id(g), b)] = free[(id(g), b)] = 0
        more = [g for g in pool if not any(g is k for k in kept)
                and _drains(a, g, facts, quiet, free)]
        if not more:
            break
        kept += more
    # The mid-packet flags join afterwards, not as facts of the fixpoint: a quiet component
    # at reset is not the drained one (a head window whose decision FIFO is empty cannot
    # pass its beats on, and with ``in_mid`` at 0 it would never clear).
    return kept + [g for g in _mid_packet_flags(a, pool) if not any(g is k for k in kept)]


def _mid_packet_flags(a, bits):
    """The bits of ``bits`` that say "a packet is half through this stream": every
    assignment gives it ``~last`` of one stream of a component in the hierarchy
    (``in_mid.eq(~i.p.last)`` on a taken beat). No drain clears such a bit without a beat,
    so the quiet fixpoint of :func:`_draining` never picks it; but at a drained packet
    boundary every packet that entered has left whole (the NT contract's rule 1: one packet
    out per packet in), so every stream inside is between packets and the bit is 0. As for
    every guard, soundness does not rest on this: the stop waits for the bit to be 0."""
    lasts = set()
    for _path, frag in a.inv.fragments:
        component = _component_of(frag)
        if component is not None:
            lasts |= _stream_lasts(component)
    out = []
    for g in bits:
        if len(g) != 1:
            continue
        assigns = a.assigns_of(id(g))
        if assigns and all(lhs is g and _is_not_of(rhs, lasts) for _t, lhs, rhs in assigns):
            out.append(g)
    return out


def _streams(component):
    """``[(member, port)]``: ``component``'s stream ports (arrays of streams left out)."""
    return [(member, getattr(component, name))
            for name, member in component.signature.members.items()
            if member.is_signature and isinstance(member.signature, stream.Signature)
            and not member.dimensions]


def _stream_lasts(component):
    """Keys (see :func:`_bit_key`) of the ``last`` bits of ``component``'s streams."""
    out = set()
    for _member, port in _streams(component):
        payload = port.payload
        if hasattr(payload, "last"):
            key = _bit_key(Value.cast(payload.last))
            if key is not None:
                out.add(key)
    return out


def _bit_key(value):
    """``(id(signal), bit)`` of a 1-bit signal or a 1-bit slice of one, else None."""
    if isinstance(value, Signal) and len(value) == 1:
        return (id(value), 0)
    if isinstance(value, Slice) and value.stop - value.start == 1 \
            and isinstance(value.value, Signal):
        return (id(value.value), value.start)
    return None


def _is_not_of(value, keys):
    return (isinstance(value, Operator) and value.operator == "~"
            and _bit_key(value.operands[0]) in keys)


def _is_state(a, sig):
    """A narrow register only ever assigned constants: an FSM's state (``phase``), not a
    shift amount or a count that holds what the last packet left."""
    return (1 < len(sig) <= _STATE_GUARD_BITS and not sig.shape().signed
            and all(isinstance(rhs, Const) and lhs is sig
                    for _t, lhs, rhs in a.assigns_of(id(sig))))


def _drains(a, g, facts, quiet, *more):
    """Whether ``g`` stays 0 under ``facts`` and clears on some path from another value of
    the ``quiet`` component (or under one of ``more`` fact sets). The clearing path is looked
    for without the facts of the bits already kept: a register that holds a packet's record
    clears as the FIFO behind it hands over the packet's last beat (VXLAN encapsulation's
    ``cur_valid``), which a draining FIFO does before it is empty, so the fact "the FIFO is
    empty" would hide the only way out."""
    if len(g) == 1:
        zero = _with(facts, g, 0)

        def set_(f):
            return _with(f, g, 1)
    else:
        # A state register (an FSM): it stays idle (0) when drained, and some state leads
        # back to idle in one step (a free-running counter that only wraps does not).
        zero = {**facts, **{(id(g), b): 0 for b in range(len(g))}}

        def set_(f):
            return {**{k: v for k, v in f.items() if k[0] != id(g)}, ("nz", id(g)): 1}
    return (_next_values(a, g, zero) <= {0, "hold"}
            and any(0 in _next_values(a, g, set_(f)) for f in (facts, quiet, *more)))


def _quiet(a, bits=True, narrow=True):
    """``(config inputs, facts)``: the ids of the component's configuration inputs (every
    input port outside its streams), and the facts of a quiet component: no input stream
    offers a beat, every output stream is ready, no register is accessed (the inputs the
    component names in ``pulse_inputs()``, a register write's one-cycle strobes, are 0),
    every narrow multi-bit flip-flop (a FIFO level, a pointer, a beat count, a stage's valid
    bit) is at its reset value (wide ones are data; with ``narrow`` False, none is)."""
    quiet = {}
    config = set()
    for name, member in a.component.signature.members.items():
        port = getattr(a.component, name)
        if member.is_signature and isinstance(member.signature, stream.Signature) \
                and not member.dimensions:
            if member.flow == wiring.In:
                quiet = a._add_fact(quiet, Value.cast(port.valid), 0, 0)
            else:
                quiet = a._add_fact(quiet, Value.cast(port.ready), 0, 1)
            continue
        for _path, flow, leaf in _flatten(member, port, (name,)):
            if flow == wiring.In:
                config |= {id(x) for x in Value.cast(leaf)._rhs_signals()}
    for pulse in getattr(a.component, "pulse_inputs", lambda: ())():
        for bit in range(len(pulse)):
            quiet = a._add_fact(quiet, Value.cast(pulse), bit, 0)
    quiet = dict(quiet)
    for _path, _frag, sig in a.inv.flip_flops:
        # Flip-flops have no combinational driver to follow: their facts are plain entries.
        if (narrow and 1 < len(sig) <= 16) or (bits and len(sig) == 1):
            for bit in range(len(sig)):
                quiet[(id(sig), bit)] = (sig.init >> bit) & 1
    return config, quiet


def _stream_contract(component):
    """``[(signal, [conditions])]``: what a component may assume of its stream ports when it
    is one of several connected port to port (hw/transform/compose.py). Its neighbours promise
    only what this analysis checks of their outputs (the sinks): an input stream's payload
    equal in both runs while its ``valid`` is 1, an output stream's ``ready`` while its
    ``valid`` is 1; ``valid`` itself and every other input always."""
    out = []
    for member, port in _streams(component):
        valid, ready = Value.cast(port.valid), Value.cast(port.ready)
        if not (isinstance(valid, Signal) and isinstance(ready, Signal)):
            continue
        if member.flow == wiring.In:
            payload = Value.cast(port.payload)
            if isinstance(payload, Signal):
                out.append((payload, [valid]))
        else:
            out.append((ready, [valid]))
    return out


def _with(facts, g, v):
    """``facts`` with the 1-bit flip-flop ``g`` at ``v`` instead."""
    return {**facts, (id(g), 0): v}


def _signal_reads(a):
    """``reads(value)``: the ids of the signals ``value`` reads that no combinational
    statement drives (flip-flops and inputs), following combinational signals."""
    memo = {}

    def reads(value):
        if isinstance(value, (Const, Initial)) or not hasattr(value, "shape"):
            return frozenset()
        hit = memo.get(id(value))
        if hit is not None:
            return hit
        memo[id(value)] = frozenset()
        out = set()
        for sig in value._rhs_signals():
            drivers = a.comb.get(id(sig))
            if not drivers:
                out.add(id(sig))
                continue
            for tests, _lhs, rhs in drivers:
                out |= reads(rhs)
                for switch, _k in tests:
                    out |= reads(switch.test)
        memo[id(value)] = out = frozenset(out)
        return out
    return reads


def _next_values(a, g, facts):
    """The next values of ``g`` on the paths through its fragment: 0, 1, "hold" or None
    (a multi-bit ``g``: its whole value, "hold" or None)."""
    if facts is _INFEASIBLE:
        return set()
    frag = a.ff[id(g)][1]
    try:
        paths = a._paths(a.sync.get(id(frag), ()), facts, (id(g), id(g)), False)
    except _TooMany:
        return {None}
    out = set()
    for f, taken in paths:
        values = {"hold"}
        for _who, lhs, rhs, _dirty in taken:
            if lhs is not g:
                values = None
            elif len(g) == 1:
                values = _bit_choices(a, rhs, f)
            else:
                values = {a._eval_value(rhs, f)}
            values = {None} if values is None else values
        out |= values
    return out


def _bit_choices(a, value, facts, depth=0):
    """The values bit 0 of ``value`` may take under ``facts``: a set of 0 and 1 when every
    choice is decided (a multiplexer whose select is unknown but whose inputs are known), or
    None when it rests on something unknown (an input, a register's contents)."""
    known = a._eval_bit(value, facts)
    if known is not None:
        return {known}
    if depth > 8:
        return None
    if isinstance(value, Signal):
        drivers = a.comb.get(id(value))
        if drivers and len(drivers) == 1 and not drivers[0][0] and drivers[0][1] is value:
            return _bit_choices(a, drivers[0][2], facts, depth + 1)
        return None
    if isinstance(value, Operator) and value.operator == "m":
        out = set()
        for v, branch in ((1, value.operands[1]), (0, value.operands[2])):
            f = a._add_fact(facts, value.operands[0], 0, v)
            if f is _INFEASIBLE:
                continue
            c = _bit_choices(a, branch, f, depth + 1)
            if c is None:
                return None
            out |= c
        return out
    if isinstance(value, SwitchValue):
        out = set()
        patterns = [c[0] for c in value.cases]
        for k, (_p, v) in enumerate(value.cases):
            f = facts
            for t, b, x in _pattern_facts(value.test, patterns, k):
                f = a._add_fact(f, t, b, x)
            if f is _INFEASIBLE:
                continue
            c = _bit_choices(a, v, f, depth + 1)
            if c is None:
                return None
            out |= c
        return out
    return None


def _ff_reads(a):
    """``{id(flip-flop): set of flip-flop ids}``: what each flip-flop's next value reads
    (through combinational signals, conditions included), and ``[(sink index, set)]`` for
    the output and memory-port sinks of :meth:`_Analysis.sinks`."""
    memo = {}

    def reads(value):
        if isinstance(value, (Const, Initial)) or not hasattr(value, "shape"):
            return frozenset()
        hit = memo.get(id(value))
        if hit is not None:
            return hit
        memo[id(value)] = frozenset()           # a combinational loop adds nothing twice
        out = set()
        for sig in value._rhs_signals():
            if id(sig) in a.ff:
                out.add(id(sig))
            for tests, lhs, rhs in a.comb.get(id(sig), ()):
                out |= reads(rhs)
                for switch, _k in tests:
                    out |= reads(switch.test)
                if isinstance(lhs, Part):
                    out |= reads(lhs.offset)
        memo[id(value)] = out = frozenset(out)
        return out

    nxt = {}
    for k, (_path, frag, _sig) in a.ff.items():
        out = set()
        for tests, lhs, rhs in a.assigns_of(k):
            out |= reads(rhs)
            for switch, _k in tests:
                out |= reads(switch.test)
            if isinstance(lhs, Part):
                out |= reads(lhs.offset)
        nxt[k] = out
    sinks = [(n, reads(value) if not isinstance(value, tuple) else
              reads(value[1]) | reads(value[2]))
             for n, (_what, value, _f) in enumerate(a.sinks())
             if not (isinstance(value, tuple) and value[0] == "next")]
    return nxt, sinks


def analyse(fragment, component, inventory, force_live=(), contract=False, seed=None):
    """The :class:`Liveness` of ``inventory``'s flip-flops (see the module docstring).

    Greedy, from the outputs back: every flip-flop starts live, and one at a time (in reverse
    inventory order, so a pipeline's last stage goes before the stage that feeds it) each is
    tried dead, with the guard candidates that pass (b). The trial re-checks whatever reads
    it: the guards of dead flip-flops that read it (a guard dropped there re-checks what
    reads that one in turn) and the sinks (live flip-flops' next values, outputs, memory
    ports). It is kept only if every dead flip-flop keeps a guard and every sink stays
    untainted, so the result is consistent after every step; otherwise everything the trial
    changed is undone. Passes repeat until one makes no flip-flop dead: a flip-flop refused
    early may pass once what reads it is dead and guarded.

    With ``contract``, the component's stream inputs are only trusted as far as
    :func:`_stream_contract` says (it is analysed as a part of a larger component, see
    compose.py); :class:`ContractError` when that is not enough (a live register latches
    the input payload whatever ``valid`` says).

    ``seed`` (``{name: [guard names]}``, see seeds.py) is a result found before, by name: if
    every one of its flip-flops is dead with its guards by the same checks as the final one
    below, the search starts from it (one pass then finds nothing more where the design is
    the same), else from nothing. A seed is a certificate, checked, never trusted."""
    a, by_frag, guard_ids = _prepared(fragment, component, inventory, force_live, contract)

    def candidates(k):
        _p, frag, _sig = a.ff[k]
        return [g for g in by_frag.get(id(frag), []) if id(g) != k and id(g) not in a.dead]

    a.dead = set()
    a.guards = {}
    a.state_guards = {f: [g for g in gs if len(g) > 1] for f, gs in by_frag.items()}
    a.reset_memo()
    nxt, out_sinks = _ff_reads(a)
    readers = {}
    for k, rs in nxt.items():
        for e in rs:
            readers.setdefault(e, set()).add(k)
    sink_readers = {}
    all_sinks = a.sinks()
    for n, rs in out_sinks:
        for e in rs:
            sink_readers.setdefault(e, []).append(n)
    # Guard candidates are tried last, and only while no dead flip-flop uses them (a guard
    # must be live); once dead, a candidate guards nothing more.
    trial_order = [k for k in reversed(list(a.ff))
                   if k not in a.force_live and k not in guard_ids]
    trial_order += [k for k in reversed(list(a.ff))
                    if k not in a.force_live and k in guard_ids]
    a.seeded = bool(seed) and _apply_seed(a, seed, by_frag)
    # A flip-flop that no candidate guards is not tried again: more dead flip-flops only taint
    # its next value more, and take facts and candidates away, so no later pass can find it a
    # guard. (One that failed because a live reader sees it may pass once that reader is dead.)
    # On the rate limiter this saves a third of the analysis (its 16 class slots, tried in
    # every pass).
    final = set()

    def trial(e):
        a.dead.add(e)
        # Its own guards, a greatest fixpoint: each guard's check may rest on the others
        # (where another guard is 1 the register is equal, see check_dead).
        # 1-bit guards first; a state guard (whose paths are many) only where none serves.
        for pool in ([g for g in candidates(e) if len(g) == 1],
                     [g for g in candidates(e) if len(g) > 1]):
            guards = pool
            while guards:
                a.guards[e] = guards
                a.flush()
                keep = [g for g in guards if a.check_dead(e, g)]
                if len(keep) == len(guards):
                    break
                guards = keep
            if guards:
                break
        if not guards:
            a.guards.pop(e, None)
            a.dead.discard(e)
            a.flush()
            final.add(e)
            return "no guard keeps it"
        a.guards[e] = guards
        saved = {}
        work = [e]
        # A guard made dead guards nothing more.
        for k, gs in list(a.guards.items()):
            if k != e and any(x is a.ff[e][2] for x in gs):
                saved[k] = gs
                a.guards[k] = [x for x in gs if x is not a.ff[e][2]]
                if not a.guards[k]:
                    a.dead.discard(e)
                    a.guards.pop(e, None)
                    a.guards.update(saved)
                    a.flush()
                    return f"it alone guards {_name(a, k)}"
                work.append(k)
        seen_sink = set()
        why = None
        while work and why is None:
            x = work.pop()
            a.flush()
            for k in readers.get(x, ()):
                if k in a.dead:
                    if k == e and x == e:
                        continue
                    keep = [g for g in a.guards[k] if a.check_dead(k, g)]
                    if len(keep) != len(a.guards[k]):
                        saved.setdefault(k, a.guards[k])
                        a.guards[k] = keep
                        if not keep:
                            why = f"the guards of {_name(a, k)} fail"
                            break
                        work.append(k)
                else:
                    t = a.bad(a.next_taint(k))
                    if t:
                        why = f"reaches {_name(a, k)}'"
                        break
            if why is None:
                for n in sink_readers.get(x, ()):
                    if n in seen_sink:
                        continue
                    what, value, facts = all_sinks[n]
                    if a.bad(a.sink_taint(value, facts)):
                        why = f"reaches {what}"
                        break
            if why is None and x == e:
                # e's own guards may have rested on guards dropped since.
                keep = [g for g in a.guards[e] if a.check_dead(e, g)]
                if not keep:
                    why = "no guard keeps it"
                a.guards[e] = keep or a.guards[e]
        if why is not None:
            a.dead.discard(e)
            a.guards.pop(e, None)
            a.guards.update(saved)
            a.flush()
        return why

    while True:
        made = 0
        for e in trial_order:
            if e in a.dead or e in final:
                continue
            why = trial(e)
            if why is None:
                made += 1
                a.why.pop(e, None)
            else:
                a.why[e] = why
        if not made:
            break
    # Fewer guards: every guard is a bit the stop waits for, so each one that the result can
    # do without goes (dropped from every list, kept only if every dead flip-flop keeps a
    # guard and everything still checks). The last ones tried are those most certain to
    # clear in a drain.
    _config, quiet = _quiet(a)
    order = {k: n for n, k in enumerate(a.ff)}

    def certain(g):
        return _next_values(a, g, _with(quiet, g, 1)) & {0} and \
            _next_values(a, g, _with(quiet, g, 0)) <= {0, "hold"}
    used = {}
    for gs in a.guards.values():
        for g in gs:
            used[id(g)] = g
    for g in sorted(used.values(), key=lambda g: (bool(certain(g)), -order[id(g)])):
        saved = {k: gs for k, gs in a.guards.items() if any(x is g for x in gs)}
        if any(len(gs) == 1 for gs in saved.values()):
            continue
        for k in saved:
            a.guards[k] = [x for x in saved[k] if x is not g]
        a.flush()
        if not (all(a.check_dead(k, x) for k in a.dead for x in a.guards[k])
                and _sinks_clean(a)):
            a.guards.update(saved)
    # A last full check: every dead flip-flop's guards and every sink, as the argument
    # needs them (the trials checked only what each change could reach).
    a.reset_memo()
    for k in a.dead:
        a.guards[k] = [g for g in a.guards[k] if a.check_dead(k, g)]
        assert a.guards[k], f"liveness: {_name(a, k)} lost its guards"
    for what, value, facts in a.sinks():
        t = a.sink_taint(value, facts)
        if contract and a.bad(t) and not (t & a.dead):
            raise ContractError(f"{what} reads a stream input outside its contract")
        assert not a.bad(t), f"liveness: {what} is tainted"
    live = [e for e in inventory.flip_flops if id(e[2]) not in a.dead]
    dead = [e for e in inventory.flip_flops if id(e[2]) in a.dead]
    why = {_name(a, k): r for k, r in a.why.items() if k not in a.dead}
    dead_rdports = {a.rdports[k][:2]: a.guards[k] for k in a.dead if k in a.rdports}
    config, config_memories, commands = _configuration(a, guard_ids)
    out = Liveness(live, dead, {k: a.guards[k] for k in a.dead if k not in a.rdports}, why,
                   dead_rdports)
    out.config = [e for e in inventory.flip_flops if id(e[2]) in config]
    out.config_memories = config_memories
    out.commands = [e for e in inventory.flip_flops if id(e[2]) in commands]
    # The result by name, a seed for the next analysis of the same design (seeds.py).
    out.seed = {_name(a, k): [g.name for g in a.guards[k]] for k in a.dead}
    out.seeded = a.seeded
    return out


def _configuration(a, guard_ids):
    """``(flip-flop ids, memory indices, command ids)`` of the configuration: state that holds
    what the
    configuration registers last wrote, so rewriting the registers restores it, and it need
    not cross the state port. Every assignment to such a flip-flop (every write port of such a
    memory) takes its value and address only from configuration inputs (the component's input
    ports outside its streams, which the register file drives) and other configuration state,
    and happens only when one of those asks for it (a write strobe, a pending-write flag): the
    timing may depend on the traffic (a write waits for a gap between packets), the value may
    not. A least fixpoint, from the inputs: a counter (which reads itself) or a pointer never
    joins, a pending-write flag set and cleared under a strobe does, then what it writes. The
    flip-flops stay live for the argument of the module docstring (their next values are
    sinks), and the differential test scrambles them and rewrites the registers."""
    config_in, _quiet_facts = _quiet(a, bits=False)
    reads = _signal_reads(a)
    # A guard may be a command (the ACL's ``pending``: a rule write raises it, the write
    # clears it, and it guards the rule index it holds), never configuration.
    cmd_cands = {k for k in a.ff if k not in a.dead and k not in a.force_live
                 and k not in a.rdports}
    cands = cmd_cands - guard_ids
    def asked(facts):
        """The signals a path's conditions require to be 1 (a strobe, a pending flag)."""
        if facts is _INFEASIBLE:
            return set()
        return {key[0] for key, v in facts.items() if v == 1 and isinstance(key[0], int)}

    entries = {}
    for k in cmd_cands:
        out = []
        for tests, lhs, rhs in a.assigns_of(k):
            value = set(reads(rhs))
            if isinstance(lhs, Part):
                value |= reads(lhs.offset)
            facts, _taint = a._path(tests, {})
            out.append((value, asked(facts)))
        entries[k] = out
    # Commands: 1-bit flags that a configuration input raises (a write strobe) and the
    # hardware clears (a pending write, a table clear running). They stay in the map (a
    # command in flight is not configuration), but a write they ask for is configuration's.
    commands = set()
    for k in cmd_cands:
        if a._len(a.ff[k][2]) != 1 or not entries[k]:
            continue
        sets = [request for (value, request), (_t, _l, rhs) in zip(entries[k], a.assigns_of(k))
                if not (isinstance(rhs, Const) and rhs.value == 0)]
        if sets and all(request & config_in for request in sets):
            commands.add(k)
    conf = set()
    while True:
        ok = config_in | conf
        asks = ok | commands
        more = {k for k in cands - conf - commands if entries[k]
                and all(value <= ok and request & asks for value, request in entries[k])}
        if not more:
            break
        conf |= more
    ok = config_in | conf
    memories = set()
    for n, (_path, mem) in enumerate(a.inv.memories):
        ports = mem._write_ports
        if ports and all(
                (reads(Value.cast(p._data)) | reads(Value.cast(p._addr))) <= ok
                and asked(a._add_fact({}, Value.cast(p._en), 0, 1)) & (ok | commands)
                for p in ports):
            memories.add(n)
    # Commands that ask for no configuration write are plain live flags.
    used = set()
    for k in conf:
        for _value, request in entries[k]:
            used |= request & commands
    for n in memories:
        for p in a.inv.memories[n][1]._write_ports:
            used |= asked(a._add_fact({}, Value.cast(p._en), 0, 1)) & commands
    return conf, memories, used


def _prepared(fragment, component, inventory, force_live, contract):
    """The analysis state, the guard candidates of each fragment (``{id(fragment):
    [signal]}``) and their ids."""
    a = _Analysis(fragment, component, inventory, force_live, contract)
    bits = [sig for _path, _frag, sig in inventory.flip_flops
            if sig.init == 0 and id(sig) not in a.force_live
            and (len(sig) == 1 or _is_state(a, sig))]
    by_frag = {}
    guard_ids = set()
    for sig in _draining(a, bits):
        by_frag.setdefault(id(a.ff[id(sig)][1]), []).append(sig)
        guard_ids.add(id(sig))
        if len(sig) > 1:        # its facts must survive the taint memo's filter
            a.bit_keys |= {(id(sig), b) for b in range(len(sig))} | {("nz", id(sig))}
    a.__dict__.pop("_bit_cones", None)      # made with the keys before
    a._restricted.clear()                   # likewise
    return a, by_frag, guard_ids


def seed_holds(fragment, component, inventory, seed, contract=False):
    """Whether ``seed`` (see :func:`analyse`) passes the checks that would let
    :func:`analyse` start from it, without searching further."""
    a, by_frag, _ids = _prepared(fragment, component, inventory, (), contract)
    a.dead, a.guards = set(), {}
    a.state_guards = {f: [g for g in gs if len(g) > 1] for f, gs in by_frag.items()}
    return _apply_seed(a, seed, by_frag)


def _apply_seed(a, seed, by_frag):
    """Make ``seed``'s flip-flops dead with its guards if the checks of the final step of
    :func:`analyse` hold for them (every guard keeps its flip-flop, every sink is clean);
    whether they did. The search spends most of its time re-checking dead registers whose
    spare guards fail one by one as the stages before them die (the 512-bit rate limiter:
    six minutes); checking a result takes about a second."""
    by_name = {_name(a, k): k for k in a.ff}
    dead, guards = set(), {}
    for name, gnames in seed.items():
        k = by_name.get(name)
        if k is None or k in a.force_live or not gnames:
            return False
        pool = {g.name: g for g in by_frag.get(id(a.ff[k][1]), ()) if id(g) != k}
        if any(n not in pool for n in gnames):
            return False
        dead.add(k)
        guards[k] = [pool[n] for n in gnames]
    if any(id(g) in dead for gs in guards.values() for g in gs):
        return False                    # a guard must be live
    a.dead, a.guards = dead, guards
    a.reset_memo()
    if all(a.check_dead(k, g) for k in dead for g in guards[k]) and _sinks_clean(a):
        return True
    a.dead, a.guards = set(), {}
    a.reset_memo()
    return False


def _sinks_clean(a):
    for _what, value, facts in a.sinks():
        t = a.sink_taint(value, facts)
        if a.bad(t):
            return False
    return True


def _name(a, k):
    path, _frag, sig = a.ff[k]
    return ".".join((*path, sig.name))
