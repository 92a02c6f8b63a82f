"""The walk steps are built only for the headers, layers and offsets each step can meet
(hw/parser/reach.py). That is sound only if no frame ever takes a step outside its set: here the
parser model walks frames built to go deep and wide (random header stacks from the declarations,
every option length, tunnels, tag stacks), the shipped traffic generator's valid and malformed
packets, and random bytes, and every header it meets must lie inside the step's set."""

import random

import pytest

from supernic.desc.headers import FIRST_HEADER, HEADERS_BY_NAME, LengthFrom
from supernic.hw.parser.reach import FIRST_STATE, header_lengths, successors, walk_reach
from supernic.sim import traffic as T
from supernic.sim.parser_model import ParserModel


def _pack(h, values):
    """The header's fixed part on the wire, fields in order (most significant first)."""
    value, total = 0, 0
    for f in h.fields:
        value = (value << f.width) | (values.get(f.name, 0) & ((1 << f.width) - 1))
        total += f.width
    return value.to_bytes(total // 8, "big")


def random_stack(rng, max_headers):
    """A frame of headers chained by their select fields, each with random field values, a
    random legal (or, one time in eight, any) length and its options, from ``FIRST_HEADER``.
    One frame in three stacks tags: it takes the first choice (VLAN) three times in five. One
    in four chains extension headers (a counted group, headers.py rule 0): it takes one
    whenever it can two times in three, often at its shortest."""
    frame, name = b"", FIRST_HEADER
    stacking = rng.random() < 1 / 3
    chaining = rng.random() < 1 / 4
    for _ in range(max_headers):
        h = HEADERS_BY_NAME[name]
        values = {f.name: rng.getrandbits(f.width) for f in h.fields}
        hlen = h.fixed_bytes
        if isinstance(h.length, LengthFrom):
            legal = header_lengths(h)
            hlen = rng.choice(legal) if rng.random() < 0.875 else rng.randrange(64) * 4
            if chaining and h.group is not None and rng.random() < 0.5:
                hlen = legal[0]
            values[h.length.field] = hlen // h.length.scale - h.length.add
        choices = list(h.next.items()) if h.select else []
        nxt = None
        grouped = [c for c in choices if HEADERS_BY_NAME[c[1]].group is not None]
        if choices and rng.random() < 0.9:
            key, nxt = (choices[0] if stacking and rng.random() < 0.6
                        else rng.choice(grouped) if grouped and chaining and rng.random() < 2 / 3
                        else rng.choice(choices))
            values[h.select] = key
        elif h.default_next:
            nxt = h.default_next
        length_field = getattr(h.length, "field", None)
        for c in h.checks:   # mostly sane, so the walk goes on; the length chosen above stays
            if c.field != length_field and rng.random() < 0.9 and isinstance(c.value, int):
                values[c.field] = c.value if c.op != "has" else values[c.field] | c.value
        body = _pack(h, values)
        frame += body + rng.randbytes(max(0, hlen - len(body)))
        if nxt is None:
            break
        name = nxt
    return frame + rng.randbytes(rng.randrange(64))


def _witness(path, header_bytes):
    """A frame whose walk follows ``path``, ``[(header name, offset)]`` from the first header:
    each header's select field names the next one, its length field the gap to it, its
    checks hold (an IP datagram as long as it can be, a UDP length of 8)."""
    frame = b""
    for (name, off), nxt in zip(path, path[1:] + [None]):
        h = HEADERS_BY_NAME[name]
        values = {c.field: (c.value | 0 if c.op == "has" else c.value) for c in h.checks
                  if isinstance(c.field, str) and isinstance(c.value, int)}
        values.update({f.name: 0xFFFF for f in h.fields
                       if h.datagram is not None and f.name == h.datagram.field})
        if "length" in values or name == "udp":
            values["length"] = 8
        hlen = h.fixed_bytes
        if nxt is not None:
            hlen = nxt[1] - off
            if h.select and nxt[0] not in (h.default_next,):
                values[h.select] = next(k for k, n in h.next.items() if n == nxt[0])
        if isinstance(h.length, LengthFrom):
            values[h.length.field] = hlen // h.length.scale - h.length.add
        body = _pack(h, values)
        frame += body + bytes(max(0, hlen - len(body)))
    return frame + bytes(header_bytes + 64)


def witnesses(header_bytes, walk_steps):
    """One frame for each (step, header, layer) :func:`walk_reach` allows, found by the same
    search (``successors``) with the path kept: if the model meets each where its frame says, no step is
    built for a header it cannot meet."""
    states = {FIRST_STATE: [(FIRST_HEADER, 0)]}
    out = {}
    for step in range(walk_steps):
        following = {}
        for state, path in states.items():
            out.setdefault((step, state[0], state[1]), path)
            for nxt in successors(state, header_bytes):
                following.setdefault(nxt, path + [(nxt[0], nxt[2])])
        states = following
    return {key: _witness(path, header_bytes) for key, path in out.items()}


def _frames(walk_steps):
    rng = random.Random(2026)
    for _ in range(20000):
        yield random_stack(rng, walk_steps + 2)
    for _, frame in T.random_packets(1500, seed=31, size_dist="mixed", malformed_fraction=0.3):
        yield frame
    for n in range(0, 300, 3):
        for et in (b"\x08\x00", b"\x86\xdd", b"\x81\x00", b"\x88\xa8"):
            yield (rng.randbytes(12) + et + rng.randbytes(max(0, n - 14)))[:n]


# The 20-step walk is only checked for soundness: random stacks seldom go 20 headers deep.
@pytest.mark.parametrize("header_bytes, walk_steps, cover",
                         [(256, 11, True), (128, 11, True), (64, 4, True), (256, 20, False)])
def test_every_walked_header_is_in_its_steps_reach(header_bytes, walk_steps, cover):
    """Random stacks, generated and random frames: every header the model meets is in its
    step's set. Each (step, header, layer) the set allows has a witness frame that the model
    walks there: a set too large would show up as well as one too small."""
    model = ParserModel(header_bytes, walk_steps)
    reach = walk_reach(header_bytes, walk_steps)
    met = set()
    frames = list(_frames(walk_steps))
    if cover:
        found = witnesses(header_bytes, walk_steps)
        frames += found.values()
    for frame in frames:
        trace = []
        model.parse(frame, trace=trace)
        for step, name, layer, off in trace:
            r = reach[step]
            assert name in r.layers and layer in r.layers[name], (step, name, layer, frame.hex())
            assert r.lo <= off <= r.hi, (step, name, off, r, frame.hex())
            met.add((step, name, layer))
    allowed = {(k, n, lay) for k, r in enumerate(reach) for n, ls in r.layers.items() for lay in ls}
    assert met <= allowed and (allowed == met or not cover), sorted(allowed - met)
    if cover:
        assert set(found) == allowed


def test_the_first_steps_are_fixed():
    reach = walk_reach(256, 11)
    assert reach[0].layers == {"ethernet": frozenset({0})} and reach[0].lo == reach[0].hi == 0
    assert set(reach[1].layers) == {"vlan", "ipv4", "ipv6"} and reach[1].lo == reach[1].hi == 14
    # IPv4 options: the header after IPv4 at offset 14 starts anywhere from 34 to 74.
    assert reach[2].lo == 18 and reach[2].hi == 74
