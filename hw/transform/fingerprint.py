"""A fingerprint of an elaborated design, for caching what is costly to derive from it.

The liveness analysis (liveness.py) takes seconds to minutes on a large NT and is repeated for
every build of every design that holds the NT. Its result is a function of the elaborated
fragment tree, of the component's ports and of which inputs are strobes, so it is cached under
a hash of them: every statement and expression, with each signal numbered in the order it is
first met (Amaranth's names may repeat, its object ids differ from run to run), its name,
shape and reset value; every memory and its ports; each fragment's origin types (a FIFO of
``amaranth.lib.fifo`` is treated specially); the component's ``pulse_inputs()``; and the
source of the analysis itself. Two designs with the same
fingerprint are the same circuit with the same names, so a plan made for one (by inventory
index) fits the other.
"""

import hashlib
from pathlib import Path

from amaranth.hdl import Const, Signal, Value
from amaranth.hdl._ast import (Assign, Concat, Initial, Operator, Part, Slice, Switch,
                               SwitchValue)
from amaranth.hdl._mem import MemoryInstance

__all__ = ["fingerprint"]

_SOURCES = ("liveness.py", "inventory.py", "fingerprint.py", "compose.py", "seeds.py")


def fingerprint(fragment, component, extra=()):
    """A hex digest of ``fragment`` (elaborated from ``component``), its ports and
    ``extra`` (values that also decide the result, e.g. the signals forced live)."""
    numbers = {}
    out = []

    def sig(s):
        n = numbers.get(id(s))
        if n is None:
            n = numbers[id(s)] = len(numbers)
            shape = s.shape()
            return ("S", n, s.name, shape.width, shape.signed, s.init)
        return ("s", n)

    def val(v):
        if isinstance(v, Signal):
            return sig(v)
        if isinstance(v, Const):
            return ("c", v.value, len(v), v.shape().signed)
        if isinstance(v, Operator):
            return ("o", v.operator, tuple(val(x) for x in v.operands))
        if isinstance(v, Slice):
            return ("sl", val(v.value), v.start, v.stop)
        if isinstance(v, Part):
            return ("p", val(v.value), val(v.offset), v.width, v.stride)
        if isinstance(v, Concat):
            return ("cat", tuple(val(x) for x in v.parts))
        if isinstance(v, SwitchValue):
            return ("sv", val(v.test), tuple((p, val(x)) for p, x in v.cases))
        if isinstance(v, Initial):
            return ("initial",)
        if isinstance(v, Value):
            return (type(v).__name__, repr(v))
        return ("py", repr(v))

    def stmts(ss):
        res = []
        for st in ss:
            if isinstance(st, Assign):
                res.append(("a", val(st.lhs), val(st.rhs)))
            elif isinstance(st, Switch):
                res.append(("sw", val(st.test),
                            tuple((p, stmts(body)) for p, body, _loc in st.cases)))
            else:
                res.append((type(st).__name__, repr(st)))
        return tuple(res)

    def port(p):
        return (p._domain, val(Value.cast(p._addr)), val(Value.cast(p._data)),
                val(Value.cast(p._en)), tuple(getattr(p, "_transparent_for", ()) or ()))

    def walk(frag, path):
        if isinstance(frag, MemoryInstance):
            out.append(("mem", path, repr(frag._data.shape), frag._data.depth,
                        hashlib.sha256(repr(list(frag._data.init._raw)).encode()).hexdigest(),
                        tuple(port(p) for p in frag._read_ports),
                        tuple(port(p) for p in frag._write_ports)))
            return
        origins = tuple(type(o).__qualname__ for o in (getattr(frag, "origins", None) or ()))
        out.append(("frag", path, type(frag).__name__, origins))
        for domain, ss in frag.statements.items():
            out.append(("dom", domain, stmts(ss)))
        for i, (sub, name, _loc) in enumerate(frag.subfragments):
            walk(sub, (*path, name if name is not None else f"U${i}"))

    walk(fragment, ())
    for path, member, value in component.signature.flatten(component):
        out.append(("port", path, member.flow.name,
                    val(value.as_value() if hasattr(value, "as_value") else Value.cast(value))))
    # Which inputs are one-cycle strobes decides the guards (liveness.py ``_quiet``), and a W1P
    # register's port looks like an RW one's.
    out.append(("pulses", tuple(val(Value.cast(x)) for x in
                                getattr(component, "pulse_inputs", lambda: ())())))
    out.append(("extra", tuple(val(x) if isinstance(x, Value) else repr(x) for x in extra)))
    here = Path(__file__).parent
    for name in _SOURCES:
        out.append(("src", name, hashlib.sha256((here / name).read_bytes()).hexdigest()))
    return hashlib.sha256(repr(out).encode()).hexdigest()[:24]

