"""A component made of components connected port to port is analysed one part at a time.

A chain personality is NTs (and the fork and join of a parallel stage) wired stream to
stream, with no logic of its own. Analysed whole, the liveness search (liveness.py) follows
every combinational path across the NTs with the facts of each place that reads it, and its
cost grows much faster than the sum of its parts (the default design's 512-bit ``secure``
personality took over ten minutes; its NTs alone take seconds to three minutes). Each NT is
instead analysed on its own, exactly as when it is transformed by itself (the same plan, from
the same cache), and the personality's plan is the union of its parts' plans.

Why the union is sound. liveness.py proves, for one component, that two runs that agree on
its live state and see the same inputs give the same outputs, where "the same" is the
component's port contract: ``valid`` and every port outside a stream always, an output
stream's payload while its ``valid`` is 1, an input stream's ``ready`` while its ``valid`` is
1; and it assumes no more of its own inputs (``_stream_contract``). Here every
connection is a plain wire from one part's port to the same role of a neighbour's port
(checked below: anything else falls back to the whole analysis), so what each part promises
of its outputs is what its neighbours assume of their inputs. By induction over the cycles
after a boundary stop every part keeps its invariant, so the personality's outputs, which are
parts' outputs, are the same in both runs. The stop waits for the union of the parts' guards
(and every FIFO's level) to be 0, as each part's argument needs.

A part that cannot meet the contract (liveness.ContractError: a live register that latches its
input payload whatever ``valid`` says) makes its whole component fall back to one analysis
(inventory.py). tests/test_transform.py scrambles every flip-flop left out of a chain at random
boundaries, and shows that a chain holding such a part breaks if the contract is ignored.
"""

from amaranth.hdl import Fragment, Signal, Value
from amaranth.hdl._ast import Assign
from amaranth.lib import stream, wiring

__all__ = ["parts"]


def parts(fragment, component):
    """``[(path, fragment, component)]``: the parts to analyse one by one, or None when
    ``fragment`` (elaborated from ``component``) is not only parts wired port to port."""
    found = _parts(fragment, component, ())
    return found if found and len(found) > 1 else None


def _component_of(fragment):
    for origin in getattr(fragment, "origins", None) or ():
        if isinstance(origin, wiring.Component):
            return origin
    return None


def _roles(component):
    """``{id(signal): (stream key or None, role)}`` of a component's ports, or None if a
    stream port has a form the contract does not cover (an array of streams, a constant
    ``valid`` or ``ready``)."""
    out = {}
    for name, member in component.signature.members.items():
        port = getattr(component, name)
        if member.is_signature and isinstance(member.signature, stream.Signature):
            if member.dimensions:
                return None
            key = (id(component), name)
            for role in ("valid", "ready", "payload"):
                value = Value.cast(getattr(port, role))
                if not isinstance(value, Signal):
                    return None
                out[id(value)] = (key, role)
            continue
        if member.is_port:
            values = [port]
        else:
            values = [v for _p, _m, v in member.signature.flatten(port)]
        for v in values:
            for sig in Value.cast(v)._rhs_signals():
                out[id(sig)] = (None, "plain")
    return out


def _components(fragment, component):
    """``component`` and the components that elaborated the fragments below ``fragment``."""
    out = [component]
    for sub, _name, _loc in getattr(fragment, "subfragments", ()):
        c = _component_of(sub)
        if c is not None:
            out += _components(sub, c)
    return out


def _parts(fragment, component, path):
    if type(fragment) is not Fragment or component is None:
        return None
    if any(domain != "comb" for domain in fragment.statements):
        return None                     # flip-flops of its own: not just wiring
    roles = _roles(component)
    if roles is None:
        return None
    children = []
    for i, (sub, name, _loc) in enumerate(fragment.subfragments):
        c = _component_of(sub) if type(sub) is Fragment else None
        if c is None or _roles(c) is None:
            return None                 # a memory, an instance or plain logic
        children.append((sub, c, (*path, name if name is not None else f"U${i}")))
    # A wrapper may wire the ports of components further down (a personality connects each
    # NT's register port inside its task graph): every component below counts.
    for sub, c, _p in children:
        for below in _components(sub, c):
            r = _roles(below)
            if r is not None:
                roles.update(r)
    # Every statement a wire between ports of the same role, each stream wired to one stream.
    partner = {}
    for st in fragment.statements.get("comb", ()):
        if not (isinstance(st, Assign) and isinstance(st.lhs, Signal)
                and isinstance(st.rhs, Signal)):
            return None
        a, b = roles.get(id(st.lhs)), roles.get(id(st.rhs))
        if a is None or b is None or a[1] != b[1]:
            return None
        if a[0] is not None:
            for x, y in ((a[0], b[0]), (b[0], a[0])):
                if partner.setdefault(x, y) != y:
                    return None
    out = []
    for sub, c, sub_path in children:
        inner = _parts(sub, c, sub_path)
        out += inner if inner is not None else [(sub_path, sub, c)]
    return out
