"""Fuzz frames for the parser: random header stacks from the traffic generator, then one
mutation each, chosen to reach what well-formed traffic never does.

Each frame is drawn from its own ``random.Random`` seeded by ``(seed, index)``, so any frame of
a campaign can be made again alone (:func:`fuzz_frame`). The mutations:

``none``          the generated frame as it is (10% of them malformed by the generator itself);
``bit_flips``     1 to 8 random bits flipped among the header bytes and the 8 after them;
``truncate``      cut at a uniformly drawn offset inside the headers (every offset over a run);
``length_lie``    a length field of a header the walk meets (those its declaration reads: the
                  header length, the datagram end, ``min_len``) set to its value plus or minus
                  1 to 8, to 0, to its maximum or to a random value: lies in both directions;
``field_lie``     any field of a header the walk meets set to a random value (a next-header
                  selector then sends the walk down another path);
``ext_chain``     IPv6, outer or inside VXLAN, with 0 to ``ext_headers + 2`` extension
                  headers of random kinds in any order (beyond the limit is ``too_deep``),
                  a third of them behind 1 to 5 VLAN tags (the walk's step limit);
``tag_stack``     0 to 10 VLAN tags of both TPIDs, up to the walk's step limit (the metadata
                  holds two);
``tunnel_in_tunnel`` VXLAN inside VXLAN (a third layer is ``too_deep``);
``eth_garbage``   an Ethernet header naming IPv4, IPv6, a tag or ARP, then random bytes;
``random_bytes``  1 to 300 random bytes;
``tiny``          0 to 20 bytes (zero-length frames included);
``max_size``      a generated frame of 9,000 bytes (the largest jumbo frame we carry).

Where the headers are comes from the reference model's own walk (its ``trace``), and which
fields hold lengths from the declarations in ``sw/desc/headers.py``; nothing here knows a
protocol by hand except through the generator.
"""

import random
from dataclasses import replace

from ..desc.headers import HEADERS_BY_NAME, EndOf, LengthFrom, DEFAULT_EXT_HEADERS
from .traffic import (
    EXT_AH, EXT_DEST_OPTS, EXT_FRAGMENT, EXT_HOP_BY_HOP, EXT_ROUTING, SIZE_MAX, TPID_CTAG,
    TPID_STAG, build, layout, random_spec)

__all__ = ["MUTATIONS", "FRAME_MUTATIONS", "fuzz_frame", "fuzz_frames", "mutate",
           "length_fields"]

#: Mutation names and how often each is drawn.
MUTATIONS = {
    "none": 0.14, "bit_flips": 0.20, "truncate": 0.14, "length_lie": 0.16, "field_lie": 0.10,
    "ext_chain": 0.09, "tag_stack": 0.05, "tunnel_in_tunnel": 0.01, "eth_garbage": 0.04,
    "random_bytes": 0.03, "tiny": 0.02, "max_size": 0.02,
}
_NAMES = tuple(MUTATIONS)
_CUMULATIVE = []
_total = 0.0
for _w in MUTATIONS.values():
    _total += _w
    _CUMULATIVE.append(_total)

# Base frames: mostly short (the parser only reads the first ``header_bytes``), a tenth of the
# generator's mixed sizes up to 9,000 bytes.
_SHORT = (60, 400)
_EXT_CODES = (EXT_HOP_BY_HOP, EXT_DEST_OPTS, EXT_ROUTING, EXT_FRAGMENT, EXT_AH)
_ETHERTYPES = (0x0800, 0x86DD, TPID_CTAG, TPID_STAG, 0x0806)


def length_fields(header):
    """Names of the fields of ``header`` whose value a length rule reads: its own length
    (:class:`LengthFrom`), where its datagram ends, and any :class:`EndOf` it binds."""
    names = set()
    if isinstance(header.length, LengthFrom):
        names.add(header.length.field)
    if header.datagram is not None:
        names.add(header.datagram.field)
    names.update(b.value.field for b in header.binds if isinstance(b.value, EndOf))
    return sorted(names)


_LENGTH_FIELDS = {name: length_fields(h) for name, h in HEADERS_BY_NAME.items()}


def _draw(rng):
    x = rng.random() * _total
    for name, edge in zip(_NAMES, _CUMULATIVE):
        if x < edge:
            return name
    return _NAMES[-1]


def _base(rng, size=None, **kw):
    if size is None:
        size = "mixed" if rng.random() < 0.1 else _SHORT
    spec = random_spec(rng, size, malformed_fraction=0.1, **kw)
    return spec, build(spec, rng)


def _header_end(spec, frame):
    """Where the generated headers end (the payload or padding starts)."""
    lay = layout(spec)
    return min(lay[-2][1], len(frame))


def _write_bits(buf, start, width, value):
    """Write ``value`` (``width`` bits, most significant first) at bit ``start`` of ``buf``."""
    first, last = start // 8, (start + width - 1) // 8
    span = last - first + 1
    shift = span * 8 - (start - first * 8) - width
    word = int.from_bytes(buf[first:last + 1], "big")
    mask = ((1 << width) - 1) << shift
    word = (word & ~mask) | ((value << shift) & mask)
    buf[first:last + 1] = word.to_bytes(span, "big")


def _read_bits(buf, start, width):
    first, last = start // 8, (start + width - 1) // 8
    span = last - first + 1
    shift = span * 8 - (start - first * 8) - width
    return (int.from_bytes(buf[first:last + 1], "big") >> shift) & ((1 << width) - 1)


def _lie(rng, frame, model, lengths_only):
    """Set one field of a header the model's walk meets; None if the walk meets no header
    whose field fits in the frame."""
    trace = []
    model.parse(frame, trace=trace)
    choices = []
    for _step, name, _layer, off in trace:
        header = HEADERS_BY_NAME[name]
        names = _LENGTH_FIELDS[name] if lengths_only else [f.name for f in header.fields]
        for field in names:
            pos, width = header.field_position(field)
            if (off * 8 + pos + width + 7) // 8 <= len(frame):
                choices.append((off * 8 + pos, width))
    if not choices:
        return None
    start, width = rng.choice(choices)
    buf = bytearray(frame)
    top = (1 << width) - 1
    if lengths_only:
        true = _read_bits(buf, start, width)
        how = rng.random()
        if how < 0.6:
            value = true + rng.choice((-1, 1)) * rng.randint(1, 8)
        elif how < 0.7:
            value = 0
        elif how < 0.8:
            value = top
        else:
            value = rng.randint(0, top)
        value = min(max(value, 0), top)
    else:
        value = rng.randint(0, top)
    _write_bits(buf, start, width, value)
    return bytes(buf)


def _ext_chain(rng, ext_headers):
    chain = []
    for _ in range(rng.randint(0, ext_headers + 2)):
        code = rng.choice(_EXT_CODES)
        if code == EXT_FRAGMENT:
            n = 8
        elif code == EXT_AH:
            n = rng.choice((12, 16, 24))  # 12: the shortest AH (no ICV), legal after IPv4
        elif code == EXT_ROUTING:
            n = 8 + 16 * rng.randint(0, 2)
        else:
            n = 8 * rng.randint(1, 4)
        chain.append((code, n))
    return tuple(chain)


def _tags(rng, n):
    return tuple((rng.choice((TPID_CTAG, TPID_STAG)), rng.randrange(4096)) for _ in range(n))


def fuzz_frame(seed, index, model, ext_headers=DEFAULT_EXT_HEADERS):
    """``(mutation, frame)`` number ``index`` of the campaign ``seed``. ``model``: the
    :class:`~supernic.sim.parser_model.ParserModel` whose walk says where the headers are."""
    rng = random.Random(seed * 0x1_0000_0000 + index)
    mutation = _draw(rng)
    if mutation == "tiny":
        return mutation, rng.randbytes(rng.randint(0, 20))
    if mutation == "random_bytes":
        return mutation, rng.randbytes(rng.randint(1, 300))
    if mutation == "eth_garbage":
        et = rng.choice(_ETHERTYPES).to_bytes(2, "big")
        return mutation, rng.randbytes(12) + et + rng.randbytes(rng.randint(0, 300))
    if mutation == "max_size":
        return mutation, _base(rng, SIZE_MAX)[1]
    if mutation == "tag_stack":
        spec = random_spec(rng, _SHORT, kinds=("ipv4_udp", "ipv4_tcp", "ipv6_udp", "ipv6_tcp",
                                               "eth", "vxlan"))
        return mutation, build(replace(spec, vlans=_tags(rng, rng.randint(0, 10))), rng)
    if mutation == "tunnel_in_tunnel":
        outer = random_spec(rng, _SHORT, kinds=("vxlan",))
        inner = random_spec(rng, _SHORT, kinds=("vxlan",))
        return mutation, build(replace(outer, inner=inner), rng)
    if mutation == "ext_chain":
        spec = random_spec(rng, _SHORT, kinds=("ipv6_udp", "ipv6_tcp", "ipv6_other", "vxlan"))
        if spec.inner is not None and spec.inner.l3 == "ipv6" and rng.random() < 0.5:
            spec = replace(spec, inner=replace(spec.inner, ext=_ext_chain(rng, ext_headers)))
        elif spec.l3 == "ipv6":
            spec = replace(spec, ext=_ext_chain(rng, ext_headers))
        if rng.random() < 1 / 3:
            spec = replace(spec, vlans=_tags(rng, rng.randint(1, 5)))
        return mutation, build(spec, rng)
    spec, frame = _base(rng)
    return mutate(rng, frame, model, mutation, _header_end(spec, frame))


#: The mutations :func:`mutate` applies to a given frame.
FRAME_MUTATIONS = ("bit_flips", "truncate", "length_lie", "field_lie")


def mutate(rng, frame, model, mutation=None, header_end=None):
    """``(mutation, frame)``: ``frame`` with one of :data:`FRAME_MUTATIONS` (``None``: drawn
    uniformly) applied; ``("none", frame)`` when it has nothing to work on. ``header_end``:
    where the headers end (default: where the model's walk stopped)."""
    if mutation is None:
        mutation = rng.choice(FRAME_MUTATIONS)
    if header_end is None and mutation in ("bit_flips", "truncate"):
        header_end = min(max(model.parse(frame)["payload_off"], 14), len(frame))
    if mutation == "bit_flips":
        end = min(header_end + 8, len(frame))
        if end == 0:
            return "none", frame
        buf = bytearray(frame)
        for _ in range(rng.randint(1, 8)):
            bit = rng.randrange(end * 8)
            buf[bit // 8] ^= 0x80 >> (bit % 8)
        return mutation, bytes(buf)
    if mutation == "truncate":
        return mutation, frame[:rng.randint(0, header_end)]
    if mutation in ("length_lie", "field_lie"):
        lied = _lie(rng, frame, model, mutation == "length_lie")
        return (mutation, lied) if lied is not None else ("none", frame)
    return "none", frame


def fuzz_frames(seed, start, count, model, ext_headers=DEFAULT_EXT_HEADERS):
    """Frames ``start`` to ``start + count - 1`` of the campaign ``seed``."""
    return [fuzz_frame(seed, i, model, ext_headers) for i in range(start, start + count)]
