"""What each walk step can meet: the headers, their encapsulation layers and their offsets.

Step 0 always walks Ethernet at offset 0, step 1 always starts at offset 14, and only after a
few steps can every header appear anywhere in the window. A walk step built for every header at
every offset spends its logic on cases that never occur: the byte shifter that brings the
header to bit 0 (eight levels of 2:1 multiplexers over the window) and the binds and checks of
headers that cannot be there. Knowing the reachable set per step, each step gets the shifter of
its own offset range and the cases of its own headers. Behaviour is unchanged: a case that
cannot be reached is never selected.

The walk rules are those of :mod:`.headers`; the set is an over-approximation (a length field
takes every value its error checks let through), which is all the pruning needs.
"""

import functools
from dataclasses import dataclass

from ...desc.headers import (HEADERS_BY_NAME, FIRST_HEADER, LAYERS, GROUPS, DEFAULT_EXT_HEADERS,
                      LengthFrom)
from ...desc.meta import ERROR_FLAGS

__all__ = ["StepReach", "walk_reach", "header_lengths", "successors", "FIRST_STATE"]


@dataclass(frozen=True)
class StepReach:
    """The headers one walk step can walk: ``{header name: frozenset of layers}``, and the
    smallest and largest offset any of them can start at."""
    layers: dict
    lo: int
    hi: int


def header_lengths(h):
    """Every length in bytes ``h`` can have when its walk goes on past it: a length field's
    values that no error check on that field refutes (RFC 791's IHL >= 5, TCP's data
    offset >= 5), in bytes by the length rule."""
    if not isinstance(h.length, LengthFrom):
        return (h.fixed_bytes,)
    width = h.field(h.length.field).width
    ops = {"==": lambda v, x: v == x, ">=": lambda v, x: v >= x, "<=": lambda v, x: v <= x,
           "has": lambda v, x: (v & x) == x}
    checks = [c for c in h.checks if c.field == h.length.field and c.flag in ERROR_FLAGS
              and isinstance(c.value, int)]
    return tuple(h.length.bytes(v) for v in range(1 << width)
                 if all(ops[c.op](v, c.value) for c in checks))


def _next(h):
    names = set(h.next.values()) if h.select else set()
    if h.default_next:
        names.add(h.default_next)
    return names


# The walk's start: Ethernet at offset 0 of the outer layer, no counted header yet.
FIRST_STATE = (FIRST_HEADER, 0, 0, (0,) * len(GROUPS))


def successors(state, header_bytes, ext_headers=DEFAULT_EXT_HEADERS):
    """The states a walk step can go on to from ``state``, ``(header, layer, offset, headers
    of each group walked in the layer)``, in a fixed order: rules 0, 1, 4 and 5 of
    headers.py, a length field taking every value its error checks let through."""
    name, layer, off, count = state
    h = HEADERS_BY_NAME[name]
    if h.group is not None:
        g = GROUPS.index(h.group)
        if count[g] >= ext_headers:
            return []   # met, to be flagged, but not walked
        count = count[:g] + (count[g] + 1,) + count[g + 1:]
    if h.tunnel:
        if layer == LAYERS - 1:
            return []
        layer, count = layer + 1, FIRST_STATE[3]
    out = []
    for hlen in header_lengths(h):
        end = off + hlen
        # Rules 1 and 4 of headers.py: the walk goes on only inside the window.
        if off + h.fixed_bytes > header_bytes or end > header_bytes:
            continue
        out += [(n, layer, end, count) for n in sorted(_next(h))]
    return out


@functools.cache
def walk_reach(header_bytes, walk_steps, ext_headers=DEFAULT_EXT_HEADERS):
    """:class:`StepReach` of each of ``walk_steps`` steps of a window of ``header_bytes``,
    with at most ``ext_headers`` headers of a counted group walked per layer (rule 0 of
    headers.py: one more is met, to be flagged, but not walked)."""
    states = {FIRST_STATE}
    steps = []
    for _ in range(walk_steps):
        layers = {}
        for name, layer, _off, _count in states:
            layers.setdefault(name, set()).add(layer)
        offsets = [s[2] for s in states] or [0]
        steps.append(StepReach({n: frozenset(ls) for n, ls in layers.items()},
                               min(offsets), max(offsets)))
        states = {n for st in states for n in successors(st, header_bytes, ext_headers)}
    return tuple(steps)
