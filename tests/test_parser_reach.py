"""The walk steps are built only for the headers, layers and offsets each step can meet
(hw/parser/reach.py). That is sound only if no frame ever takes a step outside its set: here the
parser model walks frames built to go deep and wide (random header stacks from the declarations,
every option length, tunnels, tag stacks), the shipped traffic generator's valid and malformed
packets, and random bytes, and every header it meets must lie inside the step's set."""

import random

import pytest

from supernic.hw.parser.headers import FIRST_HEADER, HEADERS_BY_NAME, LengthFrom
from supernic.hw.parser.reach import header_lengths, walk_reach
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
    One frame in three stacks tags: it takes the first choice (VLAN) three times in five."""
    frame, name = b"", FIRST_HEADER
    stacking = rng.random() < 1 / 3
    for _ in range(max_headers):
        h = HEADERS_BY_NAME[name]
        values = {f.name: rng.getrandbits(f.width) for f in h.fields}
        hlen = h.fixed_bytes
        if isinstance(h.length, LengthFrom):
            legal = header_lengths(h)
            hlen = rng.choice(legal) if rng.random() < 0.875 else rng.randrange(64) * 4
            values[h.length.field] = hlen // h.length.scale
        choices = list(h.next.items()) if h.select else []
        nxt = None
        if choices and rng.random() < 0.9:
            key, nxt = (choices[0] if stacking and rng.random() < 0.6
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
    model = ParserModel(header_bytes, walk_steps)
    reach = walk_reach(header_bytes, walk_steps)
    met = set()
    for frame in _frames(walk_steps):
        trace = []
        model.parse(frame, trace=trace)
        for step, name, layer, off in trace:
            r = reach[step]
            assert name in r.layers and layer in r.layers[name], (step, name, layer, frame.hex())
            assert r.lo <= off <= r.hi, (step, name, off, r, frame.hex())
            met.add((step, name, layer))
    # The frames do go everywhere the steps are built for: every (step, header, layer) the
    # reach allows is met, so a set too large would show up as well as one too small.
    allowed = {(k, n, lay) for k, r in enumerate(reach) for n, ls in r.layers.items() for lay in ls}
    assert met <= allowed and (allowed == met or not cover)


def test_the_first_steps_are_fixed():
    reach = walk_reach(256, 11)
    assert reach[0].layers == {"ethernet": frozenset({0})} and reach[0].lo == reach[0].hi == 0
    assert set(reach[1].layers) == {"vlan", "ipv4", "ipv6"} and reach[1].lo == reach[1].hi == 14
    # IPv4 options: the header after IPv4 at offset 14 starts anywhere from 34 to 74.
    assert reach[2].lo == 18 and reach[2].hi == 74
