"""Reference model of the header parser, derived from the same declarations as the hardware.

Deliberately naive: walk the frame's bytes header by header with the rules written in
:mod:`supernic.desc.headers`. The hardware must produce exactly this metadata for every
packet (see ``tests/test_parser_hw.py``); scapy checks the model (``tests/test_parser_model.py``).
"""

from ..desc.headers import (
    HEADERS_BY_NAME, FIRST_HEADER, LAYERS, DEFAULT_EXT_HEADERS, LengthFrom, Offset, EndOf,
    HeaderLength, DatagramLeft)
from ..desc.meta import RUNT_BYTES, TENANT_KEY_RULES, TOEPLITZ_KEY, ERROR_FLAGS
from ..hw.parser.meta import meta_layout
from .layout_codec import zero
from .traffic import checksum16
from .toeplitz import toeplitz, flow_hash_input

__all__ = ["ParserModel", "DEFAULT_HEADER_BYTES", "DEFAULT_WALK_STEPS", "is_error"]

DEFAULT_HEADER_BYTES = 256
# Deepest path we parse in full: Ethernet, two VLAN tags, IP, UDP, VXLAN, inner Ethernet,
# two inner tags, inner IP, inner L4.
DEFAULT_WALK_STEPS = 11


def is_error(meta):
    return any(meta["flags"][f] for f in ERROR_FLAGS)


def _extract(header, raw: bytes):
    value = int.from_bytes(raw, "big")
    total = len(raw) * 8
    out, pos = {}, 0
    for f in header.fields:
        out[f.name] = (value >> (total - pos - f.width)) & ((1 << f.width) - 1)
        pos += f.width
    return out


def _set_slot(meta, slot, index, value, mode):
    *path, leaf = slot.split(".")
    node = meta
    for p in path:
        node = node[p]
    if index is not None:
        node = node[leaf]
        leaf = index
    if mode == "max":
        value = max(node[leaf], value)
    node[leaf] = value


class ParserModel:
    """``parse(frame)`` returns the metadata dict the hardware gives on the packet's last beat."""

    def __init__(self, header_bytes=DEFAULT_HEADER_BYTES, walk_steps=DEFAULT_WALK_STEPS,
                 ext_headers=DEFAULT_EXT_HEADERS, header_checksum=False):
        if header_bytes < RUNT_BYTES:
            raise ValueError(f"Header window must be at least {RUNT_BYTES} bytes, "
                             f"not {header_bytes!r}")
        self.header_bytes = header_bytes
        self.walk_steps = walk_steps
        self.ext_headers = ext_headers
        self.header_checksum = header_checksum
        self.layout = meta_layout(header_bytes)
        self._slot_max = {}

    @classmethod
    def of(cls, config):
        """The model of the parser ``config`` builds: a :class:`~supernic.desc.config.DesignConfig`
        or the ``config`` mapping a generated design's description carries."""
        get = config.get if isinstance(config, dict) else lambda k, d: getattr(config, k, d)
        return cls(get("header_bytes", DEFAULT_HEADER_BYTES),
                   get("walk_steps", DEFAULT_WALK_STEPS),
                   get("ext_headers", DEFAULT_EXT_HEADERS),
                   get("header_checksum", False))

    def parse(self, frame: bytes, keep_error=False, length=None, trace=None):
        """Metadata for ``frame``. ``length`` (the count of kept bytes) defaults to its size.
        ``trace``, a list, receives ``(step, header name, layer, offset)`` of every header the
        walk meets (what hw/parser/reach.py must cover)."""
        length = len(frame) if length is None else length
        meta = zero(self.layout)
        flags = meta["flags"]
        avail = min(length, self.header_bytes)
        ended = length <= self.header_bytes
        if ended and length < RUNT_BYTES:
            flags["runt"] = 1
        off, layer, counts, groups, dgram_end = 0, 0, {}, {}, None
        kind = HEADERS_BY_NAME[FIRST_HEADER]
        for step in range(self.walk_steps):
            h = kind
            if trace is not None:
                trace.append((step, h.name, layer, off))
            if h.group is not None:
                if groups.get(h.group, 0) >= self.ext_headers:
                    flags["too_deep"] = 1
                    kind = None
                    break
                groups[h.group] = groups.get(h.group, 0) + 1
            fixed = h.fixed_bytes
            if off + fixed > avail:
                flags["truncated" if ended else "too_deep"] = 1
                kind = None
                break
            fields = _extract(h, frame[off:off + fixed])
            hlen = (h.length.bytes(fields[h.length.field])
                    if isinstance(h.length, LengthFrom) else fixed)
            nth = counts.get(h.name, 0)
            for b in h.binds:
                if b.layer is not None and b.layer != layer:
                    continue
                if b.nth is not None and b.nth != nth:
                    continue
                if isinstance(b.value, Offset):
                    v = off
                elif isinstance(b.value, EndOf):
                    v = off + b.value.extra + fields[b.value.field]
                elif isinstance(b.value, str):
                    v = fields[b.value]
                else:
                    v = b.value
                _set_slot(meta, b.slot, layer if b.per_layer else None, v, b.mode)
            counts[h.name] = min(nth + 1, 3)
            if h.datagram is not None:
                dgram_end = off + h.datagram.extra + fields[h.datagram.field]
            verdicts = []  # (ok, flag) of every check, then of the checksum (rule 3a)
            for c in h.checks:
                got = hlen if isinstance(c.field, HeaderLength) else fields[c.field]
                if isinstance(c.value, DatagramLeft):
                    ok = dgram_end is None or off + got <= dgram_end
                else:
                    ref = hlen if isinstance(c.value, HeaderLength) else c.value
                    ok = {"==": got == ref, ">=": got >= ref, "<=": got <= ref,
                          "has": (got & ref) == ref}[c.op]
                verdicts.append((ok, c.flag))
            if self.header_checksum and h.checksum and off + hlen <= avail:
                # A valid header's checksum over itself is 0 (RFC 1071 section 1).
                verdicts.append((checksum16(frame[off:off + hlen]) == 0, h.checksum))
            failed = last = False
            for ok, flag in verdicts:
                if not ok:
                    flags[flag] = 1
                    if flag in ERROR_FLAGS:
                        failed = True
                    else:
                        last = True
            if failed:
                kind = None
                break
            if off + hlen > avail:
                flags["truncated" if ended else "too_deep"] = 1
                kind = None
                break
            off += hlen
            meta["payload_off"] = off
            if last:
                kind = None
                break
            nxt = h.next.get(fields[h.select]) if h.select else None
            nxt = nxt or h.default_next
            if nxt is None:
                kind = None
                break
            if h.tunnel:
                layer += 1
                counts, groups, dgram_end = {}, {}, None
                if layer >= LAYERS:
                    flags["too_deep"] = 1
                    kind = None
                    break
            kind = HEADERS_BY_NAME[nxt]
        if kind is not None:
            flags["too_deep"] = 1
        for cond, key, tenant_kind in TENANT_KEY_RULES:
            if meta[cond]:
                meta["tenant_kind"] = int(tenant_kind)
                meta["tenant_key"] = meta[key]
                break
        meta["flow_hash"] = toeplitz(TOEPLITZ_KEY, flow_hash_input(meta["flow"]))
        # Tail flags: known once the whole frame has been counted.
        flags["length_error"] = int(length < meta["min_len"])
        flags["keep_error"] = int(bool(keep_error))
        return meta


def tenant_key_reader(config):
    """A function from a frame to its tenant key as the parser ``config`` builds reads it
    (``None`` for a frame with none): what the device server checks a tenant's pushes on."""
    parser = ParserModel.of(config)

    def read_key(frame):
        meta = parser.parse(frame)
        return meta["tenant_key"] if meta.get("tenant_kind") else None
    return read_key
