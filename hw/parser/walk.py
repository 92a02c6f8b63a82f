"""One step of the header walk, generated from the declarations in ``headers.py``.

A walk step looks at the header that starts at ``off`` in the captured window, in one cycle:
a byte-granular shifter brings the header to bit 0, constant slices pull out its fields, and
the binds, checks, length and next-header rules of every declared header are laid out side by
side, selected by ``kind``. Steps are chained with a register between each (see ``parser.py``).
"""

import functools

from amaranth.hdl import Cat, C, Mux, Signal
from amaranth.lib import data

from ...desc.headers import (HEADERS, LAYERS, GROUPS, DATAGRAM_END_BITS, DEFAULT_EXT_HEADERS, LengthFrom,
                      Offset, EndOf, HeaderLength, DatagramLeft, header_index, read_bytes)
from ...desc.meta import ERROR_FLAGS, offset_width
from .meta import meta_layout

__all__ = ["walk_state_layout", "stage_windows", "walk_step", "NTH_HEADERS"]

# Headers whose binds depend on their occurrence count within a layer (VLAN tag 1 vs tag 2).
NTH_HEADERS = tuple(h.name for h in HEADERS if any(b.nth is not None for b in h.binds))
_PASS_THROUGH = ("hdr", "avail", "ended")


def _group_bits(ext_headers):
    return max(1, ext_headers.bit_length())


def walk_state_layout(header_bytes, window=None, ext_headers=DEFAULT_EXT_HEADERS):
    """The state between walk steps. ``window``: the bytes ``(first, end)`` of the captured
    window that ``hdr`` holds (all of it by default; see :func:`stage_windows`).
    ``ext_headers``: the per-layer limit of a counted group's headers (headers.py rule 0)."""
    ow = offset_width(header_bytes)
    first, end = window or (0, header_bytes)
    # An empty window (the finish's) has no field: a zero-width one is a [-1:0] in Verilog.
    return data.StructLayout({
        **({"hdr": (end - first) * 8} if end > first else {}),  # byte first + i at [8i, 8i+8)
        "avail": ow,                    # bytes of the frame inside the window
        "ended": 1,                     # the frame ends inside the window
        "off": ow,                      # where the header to walk starts
        "kind": (len(HEADERS) + 1).bit_length(),  # header_index() of it, 0 when stopped
        "layer": max(1, (LAYERS - 1).bit_length()),
        "counts": data.ArrayLayout(2, max(1, len(NTH_HEADERS))),
        "groups": data.ArrayLayout(_group_bits(ext_headers), len(GROUPS)),
        # Where the layer's IP datagram ends (headers.py rule 2); 0: no IP header yet (an IP
        # header starts past the Ethernet header, so a datagram never ends at 0).
        "dgram_end": DATAGRAM_END_BITS,
        "meta": meta_layout(header_bytes),
    })


def stage_windows(header_bytes, reach, header_checksum=False):
    """``(first, end)`` bytes of the window each walk stage must carry, for the steps of
    ``reach`` (:func:`~.reach.walk_reach`) and the finish after them: what this step and the
    later ones can read. Bytes before a step's lowest offset, or past the furthest any later
    header can reach, are never read again; the finish reads none. Carrying only the rest
    shortens every stage register (Verilator copies each whole register every cycle).
    ``header_checksum``: steps read whole checksummed headers (headers.py rule 3a)."""
    reads = read_bytes(header_checksum)
    windows = []
    for k in range(len(reach)):
        later = reach[k:]
        windows.append((min(r.lo for r in later),
                        max(min(header_bytes, r.hi + reads) for r in later)))
    return windows + [(0, 0)]


def _slot(view, path):
    return functools.reduce(getattr, path.split("."), view)


def _stop_short(m, s, n):
    """The header does not fit: the frame either ended (truncated) or goes on (too deep)."""
    with m.If(s.ended):
        m.d.comb += n.meta.flags.truncated.eq(1)
    with m.Else():
        m.d.comb += n.meta.flags.too_deep.eq(1)
    m.d.comb += n.kind.eq(0)


def _checksum_ok(m, win, h, hlen, prefix):
    """Rule 3a in gateware: the one's complement sum of the header's 16-bit words (those
    inside ``hlen``) is 0xFFFF. Thirty words of an IPv4 header with options add into 21 bits
    (RFC 1071 section 2(A): the order does not matter, so one adder tree and the carries at
    the end). One end-around fold leaves at most 0xFFFF + 29; a second fold would only matter
    above 0xFFFF, where the result is at most 29, never 0xFFFF: compare the 17 bits instead."""
    assert h.fixed_bytes % 2 == 0 and (not isinstance(h.length, LengthFrom)
                                       or h.length.scale % 2 == 0), h.name
    words = []
    for i in range(h.max_bytes // 2):
        word = Cat(win[16 * i + 8:16 * i + 16], win[16 * i:16 * i + 8])  # wire byte 2i on top
        words.append(word if 2 * i + 2 <= h.fixed_bytes else Mux(2 * i + 2 <= hlen, word, 0))
    while len(words) > 1:   # a balanced tree: log2(30) = 5 adder levels, not 29
        pairs = [words[k] + words[k + 1] for k in range(0, len(words) - 1, 2)]
        words = pairs + words[len(pairs) * 2:]
    total = Signal(16 + (h.max_bytes // 2).bit_length(), name=f"{prefix}_{h.name}_csum_sum")
    once = Signal(17, name=f"{prefix}_{h.name}_csum_fold")
    m.d.comb += [total.eq(words[0]), once.eq(total[:16] + total[16:])]
    return once == 0xFFFF


def _header_case(m, s, n, h, win, prefix, layers=range(LAYERS), ext_headers=DEFAULT_EXT_HEADERS,
                 header_checksum=False):
    fixed = h.fixed_bytes
    raw = win[:fixed * 8]
    be = Cat(*[raw[8 * i:8 * i + 8] for i in reversed(range(fixed))])  # wire byte 0 on top
    fields = {}
    for f in h.fields:
        pos, width = h.field_position(f.name)
        fields[f.name] = Signal(width, name=f"{prefix}_{h.name}_{f.name}")
        m.d.comb += fields[f.name].eq(be[fixed * 8 - pos - width:fixed * 8 - pos])
    if isinstance(h.length, LengthFrom):
        hlen = Signal(range(h.max_bytes + 1), name=f"{prefix}_{h.name}_length")
        m.d.comb += hlen.eq((fields[h.length.field] + h.length.add) * h.length.scale)
    else:
        hlen = C(fixed)
    # Wide enough for the longest header from the last offset (an IPv6 extension header
    # may claim 2,048 bytes): a wrapped end would pass rule 4's check.
    end = Signal(range((1 << len(s.off)) + h.max_bytes + 1), name=f"{prefix}_{h.name}_end")
    m.d.comb += end.eq(s.off + hlen)

    full = C(0)
    if h.group is not None:
        gi = GROUPS.index(h.group)
        full = s.groups[gi] >= ext_headers
        m.d.comb += n.groups[gi].eq(s.groups[gi] + 1)
    dgram = s.dgram_end
    if h.datagram is not None:
        dgram = Signal(DATAGRAM_END_BITS, name=f"{prefix}_{h.name}_dgram_end")
        m.d.comb += dgram.eq(s.off + h.datagram.extra + fields[h.datagram.field])
    with m.If(full):
        m.d.comb += [n.meta.flags.too_deep.eq(1), n.kind.eq(0)]
    with m.Elif(s.off + fixed > s.avail):
        _stop_short(m, s, n)
    with m.Else():
        if h.datagram is not None:
            m.d.comb += n.dgram_end.eq(dgram)
        count = None
        if h.name in NTH_HEADERS:
            ci = NTH_HEADERS.index(h.name)
            count = s.counts[ci]
            m.d.comb += n.counts[ci].eq(Mux(count == 3, 3, count + 1))
        for b in h.binds:
            if b.layer is not None and b.layer not in layers:
                continue  # this step never walks the header in that layer (reach.py)
            cond = C(1)
            if b.layer is not None:
                cond &= s.layer == b.layer
            if b.nth is not None:
                cond &= count == b.nth
            if isinstance(b.value, Offset):
                value = s.off
            elif isinstance(b.value, EndOf):
                value = s.off + b.value.extra + fields[b.value.field]
            elif isinstance(b.value, str):
                value = fields[b.value]
            else:
                value = C(b.value)
            targets = ([(s.layer == i, _slot(n.meta, b.slot)[i], _slot(s.meta, b.slot)[i])
                        for i in range(LAYERS) if i in layers] if b.per_layer
                       else [(C(1), _slot(n.meta, b.slot), _slot(s.meta, b.slot))])
            for sel, target, current in targets:
                if b.mode == "max":
                    sel = sel & (value > current)
                with m.If(cond & sel):
                    m.d.comb += target.eq(value)
        verdicts = []  # (ok, flag) of every check, then of the checksum (rule 3a)
        for c in h.checks:
            got = hlen if isinstance(c.field, HeaderLength) else fields[c.field]
            if isinstance(c.value, DatagramLeft):
                # (The header's own end is computed already: no second adder for it.)
                last_byte = end if isinstance(c.field, HeaderLength) else s.off + got
                ok = (dgram == 0) | (last_byte <= dgram)
            else:
                ref = hlen if isinstance(c.value, HeaderLength) else C(c.value)
                ok = {"==": got == ref, ">=": got >= ref, "<=": got <= ref,
                      "has": (got & ref) == ref}[c.op]
            verdicts.append((ok, c.flag))
        if header_checksum and h.checksum:
            verdicts.append(((end > s.avail) | _checksum_ok(m, win, h, hlen, prefix), h.checksum))
        failed = C(0)  # an error check failed: stop before trusting the length
        last = C(0)    # a non-error check failed (a fragment): this header is the last
        for ok, flag in verdicts:
            with m.If(~ok):
                m.d.comb += getattr(n.meta.flags, flag).eq(1)
            if flag in ERROR_FLAGS:
                failed |= ~ok
            else:
                last |= ~ok
        with m.If(failed):
            m.d.comb += n.kind.eq(0)
        with m.Elif(end > s.avail):
            _stop_short(m, s, n)
        with m.Else():
            m.d.comb += [n.off.eq(end), n.meta.payload_off.eq(end)]
            default = header_index(h.default_next) if h.default_next else 0
            next_kind = Signal.like(n.kind, name=f"{prefix}_{h.name}_next_kind")
            if h.select:
                with m.Switch(fields[h.select]):
                    for value, name in h.next.items():
                        with m.Case(value):
                            m.d.comb += next_kind.eq(header_index(name))
                    with m.Default():
                        m.d.comb += next_kind.eq(default)
            else:
                m.d.comb += next_kind.eq(default)
            m.d.comb += n.kind.eq(Mux(last, 0, next_kind))
            if h.tunnel:
                with m.If((next_kind != 0) & ~last):
                    with m.If(s.layer == LAYERS - 1):
                        m.d.comb += [n.meta.flags.too_deep.eq(1), n.kind.eq(0)]
                    with m.Else():
                        m.d.comb += n.layer.eq(s.layer + 1)
                        m.d.comb += [c.eq(0) for c in [*n.counts, *n.groups]]
                        m.d.comb += n.dgram_end.eq(0)


class _Split:
    """A struct layout as separate signals, one per leaf field.

    Amaranth lowers every conditional assignment to a slice of a wide signal by walking the whole
    signal, so a 2800-bit comb state with ~100 assignments took minutes to convert. One signal
    per field keeps each assignment list small (conversion in seconds).
    """

    def __init__(self, layout, name):
        self._layout = layout
        self._parts = {}
        for fname, f in layout:
            self._parts[fname] = _split(f.shape, f"{name}__{fname}")

    def __getattr__(self, name):
        try:
            return self.__dict__["_parts"][name]
        except KeyError:
            raise AttributeError(name) from None

    def leaves(self):
        for fname, f in self._layout:
            yield from _leaves(self._parts[fname])

    def as_value(self):
        parts = sorted(((f.offset, _as_value(self._parts[n])) for n, f in self._layout),
                       key=lambda p: p[0])
        return Cat(*[v for _, v in parts])


def _split(shape, name):
    if isinstance(shape, data.StructLayout):
        return _Split(shape, name)
    if isinstance(shape, data.ArrayLayout):
        return [_split(shape.elem_shape, f"{name}__{i}") for i in range(shape.length)]
    return Signal(shape, name=name)


def _leaves(part):
    if isinstance(part, _Split):
        yield from part.leaves()
    elif isinstance(part, list):
        for p in part:
            yield from _leaves(p)
    else:
        yield part


def _as_value(part):
    if isinstance(part, _Split):
        return part.as_value()
    if isinstance(part, list):
        return Cat(*[_as_value(p) for p in part])
    return part


def _view_leaves(view, layout):
    for fname, f in layout:
        sub = getattr(view, fname)
        if isinstance(f.shape, data.StructLayout):
            yield from _view_leaves(sub, f.shape)
        elif isinstance(f.shape, data.ArrayLayout):
            for i in range(f.shape.length):
                if isinstance(f.shape.elem_shape, data.StructLayout):
                    yield from _view_leaves(sub[i], f.shape.elem_shape)
                else:
                    yield sub[i]
        else:
            yield sub


def _byte_shifter(m, value, offset, out_bytes, name):
    """``out_bytes`` bytes of ``value`` starting at byte ``offset`` (zeros past its end).

    A log shifter of 2:1 muxes, largest step first so each stage keeps only the bytes still
    reachable. (``bit_select`` gives a cell whose every output bit depends on every input bit;
    Amaranth's combinational-cycle check then takes minutes on a 2 kbit window.) Each stage is
    its own signal: Amaranth's AST passes copy shared subexpressions, and a nested mux that
    names its input twice per level would grow as 2**levels.
    """
    for k in reversed(range(len(offset))):
        step = 8 << k
        keep = (out_bytes + (1 << k) - 1) * 8
        shifted = value[step:step + keep] if step < len(value) else C(0, keep)
        stage = Signal(keep, name=f"{name}_shift{k}")
        m.d.comb += stage.eq(Mux(offset[k], shifted, value[:keep]))
        value = stage
    return value[:out_bytes * 8]


def walk_step(m, s, state_out, header_bytes, reach, windows, name="walk",
              ext_headers=DEFAULT_EXT_HEADERS, header_checksum=False):
    """Statements that drive ``state_out`` (a view, assigned in ``sync``) one header on from
    ``s``. The window and frame facts pass through; the walk fields are recomputed.

    ``reach`` (a :class:`~.reach.StepReach`): build only the headers, layers and offsets this
    step can meet. ``windows``: the ``(first, end)`` window bytes ``s`` and ``state_out``
    carry (:func:`stage_windows`). ``ext_headers``: headers.py rule 0's limit.
    ``header_checksum``: check declared header checksums (rule 3a)."""
    layout = walk_state_layout(header_bytes, ext_headers=ext_headers)
    changing = data.StructLayout({k: f.shape for k, f in layout if k not in _PASS_THROUGH})
    n = _Split(changing, name)
    m.d.comb += [a.eq(b) for a, b in zip(n.leaves(), _view_leaves(s, changing))]
    lo, hi, kinds = reach.lo, reach.hi, reach.layers
    # The shifter sees the window from the lowest offset on (zeros past its end), shifted by
    # the offset above it.
    rel = C(0, 0)
    if hi > lo:
        rel = Signal((hi - lo).bit_length(), name=f"{name}_rel_off")
        m.d.comb += rel.eq(s.off - lo)
    (first, _), (out_first, out_end) = windows
    # Only a step that can meet a checksummed header reads past the fixed parts.
    reads = read_bytes(header_checksum and any(h.checksum for h in HEADERS if h.name in kinds))
    win = _byte_shifter(m, Cat(s.hdr[(lo - first) * 8:], C(0, reads * 8)), rel, reads, name)
    with m.Switch(s.kind):
        for h in HEADERS:
            if h.name in kinds:
                with m.Case(header_index(h.name)):
                    _header_case(m, s, n, h, win, name, kinds[h.name], ext_headers,
                                 header_checksum)
    carried = ([state_out.hdr.eq(s.hdr[(out_first - first) * 8:(out_end - first) * 8])]
               if out_end > out_first else [])
    return (carried
            + [getattr(state_out, k).eq(getattr(s, k)) for k in _PASS_THROUGH if k != "hdr"]
            + [getattr(state_out, k).eq(_as_value(getattr(n, k))) for k, _ in changing])
