"""Fast, seeded packet generator for tests and the demo.

Packets are built from byte templates with `struct` and `int.to_bytes`; payloads come from
`random.Random.randbytes`. Scapy is only used for pcap I/O (raw bytes, no dissection), because
building with scapy runs at about 2k packets/s; this module makes about 50k+ packets/s.

A `PacketSpec` fixes everything that shapes a packet: tags, protocols, header lengths, frame
size and any malformation. `build(spec, rng)` then draws the field values (addresses, ports,
IDs, payload) from `rng`, so the same spec and seed always give the same bytes. With `flows=N`
the addresses and ports come from one of N fixed flows instead, so flows repeat.

`layout(spec)` returns the start offset of every header of the (untruncated) frame, which tests
use to find fields and the truncation code uses for its cut points.
"""

from __future__ import annotations

import functools
import gc
import random
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from os import PathLike

from ..desc.packet_kinds import KINDS

__all__ = [
    "MALFORMATIONS",
    "SIZE_MIN",
    "SIZE_MAX",
    "PacketSpec",
    "layout",
    "header_length",
    "random_spec",
    "build",
    "random_packets",
    "write_pcap",
    "read_pcap",
    "checksum16",
]

# --- constants ----------------------------------------------------------------------------------

SIZE_MIN = 60  # minimum Ethernet frame without FCS (IEEE 802.3)
SIZE_MAX = 9000  # largest jumbo frame we generate

ETH_IPV4 = 0x0800
ETH_ARP = 0x0806
ETH_IPV6 = 0x86DD
ETH_EXPERIMENTAL = 0x88B5  # IEEE 802 "local experimental ethertype 1"
TPID_CTAG = 0x8100  # IEEE 802.1Q C-tag
TPID_STAG = 0x88A8  # IEEE 802.1Q (802.1ad) S-tag

PROTO_ICMP = 1
PROTO_TCP = 6
PROTO_UDP = 17
PROTO_GRE = 47
PROTO_ICMPV6 = 58
PROTO_ESP = 50  # RFC 4303: the rest is encrypted
PROTO_EXPERIMENTAL = 253  # RFC 3692 "use for experimentation and testing"
# IPv6 extension headers (RFC 8200 section 4) and the Authentication Header (RFC 4302).
EXT_HOP_BY_HOP = 0
EXT_ROUTING = 43
EXT_FRAGMENT = 44
EXT_AH = 51
EXT_DEST_OPTS = 60
_EXT_NAMES = {EXT_HOP_BY_HOP: "hbh", EXT_ROUTING: "routing", EXT_FRAGMENT: "frag6",
              EXT_AH: "ah", EXT_DEST_OPTS: "dstopts"}

VXLAN_PORT = 4789  # RFC 7348 section 5: IANA-assigned UDP destination port
# UDP ports that scapy (and some NICs) treat as VXLAN / VXLAN-GPE; plain UDP flows avoid them so
# the kind of a packet is never ambiguous.
_VXLANISH_PORTS = frozenset({4789, 4790, 6633, 8472, 48879})

MALFORMATIONS = (
    "truncated",
    "ihl_below_5",
    "ipv4_bad_version",
    "ipv6_bad_version",
    "total_length_too_big",
    "total_length_below_ihl",
    "ipv6_payload_length_too_big",
    "udp_length_below_8",
    "udp_length_too_big",
    "ip_length_cuts_l4",
    "ext_length_past_datagram",
    "tcp_doff_below_5",
    "vxlan_bad_flags",
    "runt",
    "random_bytes",
    "empty_ethertype_only",
)

# Which base kinds each malformation can be applied to (None: any kind / no base kind).
_V4 = ("ipv4_udp", "ipv4_tcp", "ipv4_other", "ipv4_frag", "vxlan")
_V6 = ("ipv6_udp", "ipv6_tcp", "ipv6_other", "ipv6_ext", "ipv6_frag", "vxlan")
_MALFORMATION_KINDS: dict[str, tuple[str, ...] | None] = {
    "truncated": None,
    "ihl_below_5": _V4,
    "ipv4_bad_version": _V4,
    "ipv6_bad_version": _V6,
    "total_length_too_big": _V4,
    "total_length_below_ihl": _V4,
    "ipv6_payload_length_too_big": _V6,
    "udp_length_below_8": ("ipv4_udp", "ipv6_udp", "vxlan"),
    "udp_length_too_big": ("ipv4_udp", "ipv6_udp", "vxlan"),
    "ip_length_cuts_l4": ("ipv4_udp", "ipv4_tcp", "ipv6_udp", "ipv6_tcp"),
    "ext_length_past_datagram": ("ipv6_ext",),
    "tcp_doff_below_5": ("ipv4_tcp", "ipv6_tcp"),
    "vxlan_bad_flags": ("vxlan",),
    "runt": None,
    "random_bytes": None,
    "empty_ethertype_only": None,
}
# Outer-L3 version a malformation needs on a VXLAN base packet.
_NEEDS_L3 = {m: "ipv4" for m in _MALFORMATION_KINDS if _MALFORMATION_KINDS[m] is _V4}
_NEEDS_L3.update({m: "ipv6" for m in _MALFORMATION_KINDS if _MALFORMATION_KINDS[m] is _V6})

# Smallest frame (no tags, no options) of each kind; a runt needs this to be below 60 bytes.
_KIND_MIN = {
    "eth": 14,
    "arp": 42,
    "ipv4_udp": 42,
    "ipv4_tcp": 54,
    "ipv4_other": 34,
    "ipv4_frag": 34,
    "ipv6_udp": 62,
    "ipv6_tcp": 74,
    "ipv6_other": 54,
    "ipv6_ext": 62,
    "ipv6_frag": 62,
    "vxlan": 92,
}

_OTHER_PROTOS = {"ipv4": (PROTO_ICMP, PROTO_GRE, PROTO_EXPERIMENTAL),
                 "ipv6": (PROTO_ICMPV6, PROTO_GRE, PROTO_ESP, PROTO_EXPERIMENTAL)}
_OTHER_HDR = {PROTO_ICMP: ("icmp", 8), PROTO_ICMPV6: ("icmpv6", 8), PROTO_GRE: ("gre", 4)}


# --- the spec -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class PacketSpec:
    """Everything that shapes one packet; field values are drawn by `build`.

    size: total frame length without FCS (the built frame is max(size, header_length)); for a
        truncated packet it is the length before the cut.
    vlans: (tpid, vid) per tag, outermost first; PCP/DEI are random.
    ethertype: only when l3 is None (0x88b5 or 0x0806 ARP).
    l3: "ipv4", "ipv6" or None. l4: "udp", "tcp", "other" or None. proto: the IP protocol /
        next header when l4 == "other" (1, 58, 47, 253).
    ihl: IPv4 header length in 32-bit words (5..15). tcp_doff: TCP data offset (5..15).
    fragment/frag_offset/more_fragments: an IPv4 fragment, or an IPv6 one (its Fragment header
        is in `ext`); frag_offset in 8-byte units. Only a first fragment (offset 0) carries
        the L4 header.
    ext: IPv6 extension headers after the IPv6 header, in order: (type, bytes), the type one
        of 0 (Hop-by-Hop), 60 (Destination Options), 43 (Routing, type 0, no segment left),
        44 (Fragment: 8 bytes; the fragment fields above, or an atomic fragment), 51 (AH).
    vxlan_vni/inner/vxlan_checksum: VXLAN encapsulation of the `inner` frame (its `size` is
        the inner frame length); outer UDP checksum computed only if vxlan_checksum.
    flow: if set, MACs, IPs and ports come from this flow id (so flows repeat).
    malformation: None or a name from MALFORMATIONS. cut: frame length after truncation.
    """

    size: int = SIZE_MIN
    vlans: tuple[tuple[int, int], ...] = ()
    ethertype: int | None = None
    l3: str | None = None
    l4: str | None = None
    proto: int | None = None
    ihl: int = 5
    tcp_doff: int = 5
    fragment: bool = False
    frag_offset: int = 0
    more_fragments: bool = False
    ext: tuple[tuple[int, int], ...] = ()
    vxlan_vni: int | None = None
    vxlan_checksum: bool = False
    inner: PacketSpec | None = None
    flow: int | None = None
    malformation: str | None = None
    cut: int | None = None

    @property
    def kind(self) -> str:
        """The name from KINDS this spec belongs to (the base kind of a malformed packet)."""
        if self.vxlan_vni is not None:
            return "vxlan"
        if self.l3 is None:
            return "arp" if self.ethertype == ETH_ARP else "eth"
        if self.fragment:
            return f"{self.l3}_frag"
        if self.ext:
            return "ipv6_ext"
        return f"{self.l3}_{self.l4}"

    @property
    def ext_bytes(self) -> int:
        """Bytes of the IPv6 extension headers."""
        return sum(n for _, n in self.ext)

    @property
    def l4_present(self) -> bool:
        """True if the L4 header is in the frame (not a non-first fragment)."""
        return self.l4 is not None and not (self.fragment and self.frag_offset != 0)


_SPEC_DEFAULTS = {f.name: f.default for f in fields(PacketSpec)}


def _mk(**kw) -> PacketSpec:
    """Fast trusted PacketSpec constructor for the generator's hot path (a frozen dataclass
    __init__ costs one object.__setattr__ per field); the result equals PacketSpec(**kw)."""
    o = object.__new__(PacketSpec)
    d = o.__dict__
    d.update(_SPEC_DEFAULTS)
    d.update(kw)
    return o


# --- layout -------------------------------------------------------------------------------------


def _l4_header(spec: PacketSpec) -> tuple[str | None, int]:
    if not spec.l4_present:
        return None, 0
    if spec.l4 == "udp":
        return "udp", 8  # RFC 768
    if spec.l4 == "tcp":
        return "tcp", 4 * spec.tcp_doff  # RFC 9293 section 3.1: data offset in 32-bit words
    return _OTHER_HDR.get(spec.proto, (None, 0))


def _headers(spec: PacketSpec, base: int, prefix: str, out: list[tuple[str, int]]) -> int:
    """Append (name, start) for each header of `spec` at `base`; return the header end."""
    out.append((prefix + "eth", base))
    off = base + 12  # IEEE 802.1Q tags sit between the source MAC and the ethertype
    for _ in spec.vlans:
        out.append((prefix + "vlan", off))
        off += 4
    off += 2
    if spec.l3 is None:
        if spec.ethertype == ETH_ARP:
            out.append((prefix + "arp", off))
            off += 28  # RFC 826 for Ethernet/IPv4
        return off
    out.append((prefix + spec.l3, off))
    off += 4 * spec.ihl if spec.l3 == "ipv4" else 40  # RFC 791 IHL / RFC 8200 fixed header
    for code, n in spec.ext:
        out.append((prefix + _EXT_NAMES[code], off))
        off += n
    name, length = _l4_header(spec)
    if name is not None:
        out.append((prefix + name, off))
        off += length
    if spec.vxlan_vni is not None and spec.inner is not None:
        out.append((prefix + "vxlan", off))
        off = _headers(spec.inner, off + 8, prefix + "inner_", out)  # RFC 7348: 8-byte header
    return off


def header_length(spec: PacketSpec) -> int:
    """Bytes of all headers (outer and inner) of a spec: the smallest frame it can build."""
    return _headers(spec, 0, "", [])


def layout(spec: PacketSpec) -> tuple[tuple[str, int], ...]:
    """Start offset of each header of the untruncated frame, outermost first.

    Names: eth, vlan, arp, ipv4, ipv6, hbh, dstopts, routing, frag6, ah, udp, tcp, icmp, icmpv6,
    gre, vxlan, and the same with an "inner_" prefix after VXLAN; then ("pad", off) for ARP padding or ("payload", off); finally
    ("end", frame_length). For random_bytes the layout is just payload and end.
    """
    m = spec.malformation
    if m == "random_bytes":
        return (("payload", 0), ("end", spec.size))
    if m == "empty_ethertype_only":
        return (("eth", 0), ("payload", 14), ("end", 14))
    out: list[tuple[str, int]] = []
    end = _headers(spec, 0, "", out)
    total = max(spec.size, end)
    out.append(("pad" if spec.ethertype == ETH_ARP else "payload", end))
    out.append(("end", total))
    return tuple(out)


# --- checksums ----------------------------------------------------------------------------------


def checksum16(data: bytes) -> int:
    """Internet checksum (RFC 1071): one's complement of the one's complement sum of 16-bit words.

    Uses 2**16 == 1 (mod 0xFFFF): the end-around-carry sum equals the big integer mod 0xFFFF,
    except that a nonzero input summing to 0 mod 0xFFFF gives 0xFFFF (negative zero).
    """
    if len(data) & 1:
        data += b"\x00"
    n = int.from_bytes(data, "big")
    s = n % 0xFFFF
    if s == 0 and n:
        s = 0xFFFF
    return 0xFFFF - s


_S_HHHH = struct.Struct("!HHHH")
_S_TCP = struct.Struct("!HHIIHHHH")
_S_IPV4 = struct.Struct("!BBHHHBBH")
_S_IPV6 = struct.Struct("!IHBB")
_S_V4PSEUDO = struct.Struct("!BBH")
_S_V6PSEUDO = struct.Struct("!IxxxB")


def _pseudo(l3: str, src: bytes, dst: bytes, proto: int, length: int) -> bytes:
    if l3 == "ipv4":
        # RFC 768 / RFC 9293 section 3.1: src, dst, zero, protocol, L4 length
        return src + dst + _S_V4PSEUDO.pack(0, proto, length)
    # RFC 8200 section 8.1: src, dst, 32-bit upper-layer length, 3 zero bytes, next header
    return src + dst + _S_V6PSEUDO.pack(length, proto)


# --- fast draws ---------------------------------------------------------------------------------
# `Random.choice`/`randint` run several Python-level calls; these use one C-level random() draw.
# They are deterministic for a seed like everything else.


def _pick(rng: random.Random, seq: Sequence):
    return seq[int(rng.random() * len(seq))]


def _rint(rng: random.Random, lo: int, hi: int) -> int:
    """Uniform integer in lo..hi inclusive."""
    return lo + int(rng.random() * (hi - lo + 1))


# --- field values -------------------------------------------------------------------------------


# Field values of one frame, a plain tuple for speed:
# (dst MAC, src MAC, src IPv4, dst IPv4, src IPv6, dst IPv6, src port, dst port)
_Vals = tuple


def _draw_vals(rng: random.Random) -> _Vals:
    b = rng.randbytes(56)
    # Clear the I/G bit (IEEE 802): unicast MACs.
    dmac = bytes([b[0] & 0xFE]) + b[1:6]
    smac = bytes([b[6] & 0xFE]) + b[7:12]
    sport = int.from_bytes(b[52:54], "big") or 1
    dport = int.from_bytes(b[54:56], "big") or 1
    if sport in _VXLANISH_PORTS:
        sport += 10
    if dport in _VXLANISH_PORTS:
        dport += 10
    return (dmac, smac, b[12:16], b[16:20], b[20:36], b[36:52], sport, dport)


_FLOW_CACHE: dict[int, _Vals] = {}


def _flow_vals(flow: int, inner: bool) -> _Vals:
    key = 2 * flow + inner
    v = _FLOW_CACHE.get(key)
    if v is None:
        if len(_FLOW_CACHE) > 65536:
            _FLOW_CACHE.clear()
        v = _FLOW_CACHE[key] = _draw_vals(random.Random(0x5EED0000 + key))
    return v


def _vlan_tci(rng: random.Random, vid: int) -> int:
    # IEEE 802.1Q TCI: PCP (3 bits), DEI (1 bit), VID (12 bits)
    return (rng.getrandbits(4) << 12) | (vid & 0x0FFF)


# --- building -----------------------------------------------------------------------------------


def _l4_bytes(spec: PacketSpec, vals: _Vals, src: bytes, dst: bytes, payload: bytes,
              rng: random.Random, extra: bytes = b"", csum: bool = True) -> bytes:
    """L4 header + payload. `extra` is the rest of a fragmented datagram: it is counted in the
    UDP length and the checksum but not returned."""
    l3 = spec.l3
    l4 = spec.l4
    sport, dport = vals[6], vals[7]
    if l4 == "udp":
        if spec.vxlan_vni is not None:
            dport = VXLAN_PORT
        length = 8 + len(payload) + len(extra)  # RFC 768: header plus data
        c = 0
        if csum:
            hdr0 = _S_HHHH.pack(sport, dport, length, 0)
            c = checksum16(_pseudo(l3, src, dst, PROTO_UDP, length) + hdr0 + payload + extra)
            c = c or 0xFFFF  # RFC 768: a computed zero is sent as all ones (0 = no checksum)
        return _S_HHHH.pack(sport, dport, length, c) + payload
    if l4 == "tcp":
        doff = spec.tcp_doff
        # RFC 9293 section 3.1: seq, ack, data offset/flags, window, checksum, urgent, options
        seq, ack, win = rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(16) or 1
        flags = _pick(rng, (0x010, 0x018, 0x002, 0x012, 0x011, 0x004))
        opts = rng.randbytes(4 * (doff - 5)) if doff > 5 else b""
        w = (doff << 12) | flags
        hdr0 = _S_TCP.pack(sport, dport, seq, ack, w, win, 0, 0) + opts
        length = len(hdr0) + len(payload) + len(extra)
        c = checksum16(_pseudo(l3, src, dst, PROTO_TCP, length) + hdr0 + payload + extra)
        return hdr0[:16] + c.to_bytes(2, "big") + hdr0[18:] + payload
    proto = spec.proto
    if proto == PROTO_ICMP or proto == PROTO_ICMPV6:
        # RFC 792 / RFC 4443: echo request (type 8 / 128), code, checksum, identifier, sequence
        typ = 8 if proto == PROTO_ICMP else 128
        hdr0 = struct.pack("!BBHHH", typ, 0, 0, rng.getrandbits(16), rng.getrandbits(16))
        body = hdr0 + payload + extra
        if proto == PROTO_ICMPV6:  # RFC 4443 section 2.3: includes the RFC 8200 pseudo-header
            body = _pseudo(l3, src, dst, PROTO_ICMPV6, len(body)) + body
        c = checksum16(body)
        return hdr0[:2] + c.to_bytes(2, "big") + hdr0[4:] + payload
    if proto == PROTO_GRE:
        # RFC 2784: no C/K/S bits, version 0, protocol type
        return struct.pack("!HH", 0, ETH_EXPERIMENTAL) + payload
    return payload


def _frame(spec: PacketSpec, length: int, rng: random.Random, inner: bool = False) -> bytes:
    """Build the frame of `spec` with exactly max(length, header_length(spec)) bytes."""
    vals = _draw_vals(rng) if spec.flow is None else _flow_vals(spec.flow, inner)
    dmac, smac = vals[0], vals[1]
    vlans = spec.vlans
    if vlans:
        tags = b"".join(struct.pack("!HH", tpid, _vlan_tci(rng, vid)) for tpid, vid in vlans)
    else:
        tags = b""
    l3off = 14 + 4 * len(vlans)
    l3 = spec.l3
    if l3 is None:
        et = spec.ethertype if spec.ethertype is not None else ETH_EXPERIMENTAL
        head = tags + et.to_bytes(2, "big")
        if et == ETH_ARP:
            # RFC 826: Ethernet (1), IPv4 (0x0800), hlen 6, plen 4, op 1 request / 2 reply
            op = 1 + rng.getrandbits(1)
            if op == 1:
                dmac = b"\xff" * 6  # requests are broadcast
            tha = bytes(6) if op == 1 else vals[0]
            arp = struct.pack("!HHBBH", 1, ETH_IPV4, 6, 4, op) + smac + vals[2] + tha + vals[3]
            pad = length - l3off - 28
            # Ethernet padding after the ARP packet is not part of it
            return dmac + smac + head + arp + (bytes(pad) if pad > 0 else b"")
        n = length - l3off
        return dmac + smac + head + (rng.randbytes(n) if n > 0 else b"")

    v4 = l3 == "ipv4"
    l4 = spec.l4
    fragment = spec.fragment
    l4_present = l4 is not None and not (fragment and spec.frag_offset != 0)
    l3hdr = 4 * spec.ihl if v4 else 40 + spec.ext_bytes
    if not l4_present:
        l4hdr = 0
    elif l4 == "udp":
        l4hdr = 8
    elif l4 == "tcp":
        l4hdr = 4 * spec.tcp_doff
    else:
        l4hdr = _OTHER_HDR.get(spec.proto, ("", 0))[1]
    vni = spec.vxlan_vni
    vx = vni is not None and spec.inner is not None
    if vx:
        inner_len = length - l3off - l3hdr - l4hdr - 8
        inner_frame = _frame(spec.inner, inner_len, rng, True)  # type: ignore[arg-type]
        # RFC 7348 section 5: flags (I bit 0x08), 24 reserved bits, 24-bit VNI, 8 reserved bits
        payload = _VXLAN_FLAGS + ((vni & 0xFFFFFF) << 8).to_bytes(4, "big") + inner_frame
    else:
        n = length - l3off - l3hdr - l4hdr
        payload = rng.randbytes(n) if n > 0 else b""

    if v4:
        src, dst = vals[2], vals[3]
    else:
        src, dst = vals[4], vals[5]
    if not l4_present:
        seg = payload
    else:
        extra = b""
        if fragment and spec.more_fragments:
            # A first fragment's L4 length/checksum cover the whole datagram (RFC 791).
            extra = rng.randbytes(8 * _rint(rng, 1, 64))
        seg = _l4_bytes(spec, vals, src, dst, payload, rng, extra,
                        csum=not vx or spec.vxlan_checksum)
    proto = PROTO_UDP if l4 == "udp" else PROTO_TCP if l4 == "tcp" else \
        spec.proto or PROTO_EXPERIMENTAL

    if v4:
        # RFC 791 section 3.1
        ihl = spec.ihl
        if fragment:
            ff = (0x2000 if spec.more_fragments else 0) | (spec.frag_offset & 0x1FFF)
        else:
            ff = 0x4000 * rng.getrandbits(1)  # DF at random
        r = rng.getrandbits(40)
        tos, ident, ttl = r & 0xFF, (r >> 8) & 0xFFFF, ((r >> 24) & 0xFF) or 64
        opts = rng.randbytes(4 * (ihl - 5)).translate(_NO_SOURCE_ROUTE) if ihl > 5 else b""
        h = _S_IPV4.pack(0x40 | ihl, tos, 4 * ihl + len(seg), ident, ff, ttl, proto, 0)
        c = checksum16(h + src + dst + opts)
        l3b = h[:10] + c.to_bytes(2, "big") + src + dst + opts
        return b"".join((dmac, smac, tags, b"\x08\x00", l3b, seg))
    # RFC 8200 section 3: version 6, traffic class, flow label, payload length, next header
    ext = _ext_bytes(spec, proto, rng)
    r = rng.getrandbits(36)
    h = _S_IPV6.pack((6 << 28) | (r & 0x0FFFFFFF), len(ext) + len(seg),
                     spec.ext[0][0] if spec.ext else proto, (r >> 28) or 64)
    return b"".join((dmac, smac, tags, b"\x86\xdd", h, src, dst, ext, seg))


def _ext_bytes(spec: PacketSpec, proto: int, rng: random.Random) -> bytes:
    """The IPv6 extension headers of `spec`, each naming the next (the last: `proto`)."""
    out = []
    for i, (code, n) in enumerate(spec.ext):
        nxt = spec.ext[i + 1][0] if i + 1 < len(spec.ext) else proto
        if code in (EXT_HOP_BY_HOP, EXT_DEST_OPTS):
            # RFC 8200 sections 4.3/4.6: length in 8-byte units after the first 8; the
            # options are one PadN (type 1, RFC 8200 section 4.2) filling the header
            out.append(bytes((nxt, n // 8 - 1, 1, n - 4)) + bytes(n - 4))
        elif code == EXT_ROUTING:
            # RFC 8200 section 4.4: routing type 0 with no segment left, so the L4
            # pseudo-header's destination is the IPv6 header's (section 8.1); 16-byte addresses
            out.append(bytes((nxt, n // 8 - 1, 0, 0)) + bytes(4) + rng.randbytes(n - 8))
        elif code == EXT_FRAGMENT:
            # RFC 8200 section 4.5: offset in 8-byte units, M flag, identification; an
            # atomic fragment (offset 0, no M; RFC 6946) when the spec is no fragment
            field = (spec.frag_offset << 3) | spec.more_fragments if spec.fragment else 0
            out.append(struct.pack("!BBHI", nxt, 0, field, rng.getrandbits(32)))
        else:
            # RFC 4302 section 2: payload length in 4-byte units less 2, reserved, SPI (0 is
            # reserved), sequence number, integrity check value
            out.append(struct.pack("!BBHII", nxt, n // 4 - 2, 0, rng.getrandbits(32) | 1,
                                   rng.getrandbits(32)) + rng.randbytes(n - 12))
    return b"".join(out)


# IPv4 option bytes are random, but never the LSRR (0x83) / SSRR (0x89) option types: with a
# source route the UDP/TCP pseudo-header uses the final destination (RFC 9293 section 3.1), which
# random bytes would make ambiguous.
_NO_SOURCE_ROUTE = bytes.maketrans(b"\x83\x89", b"\x93\x99")
_VXLAN_FLAGS = b"\x08\x00\x00\x00"  # RFC 7348: I flag set, reserved bits zero


def _l3_offsets(spec: PacketSpec) -> tuple[int, int]:
    """(L3 offset, L4 offset) of the outer packet."""
    l3off = 14 + 4 * len(spec.vlans)
    return l3off, l3off + (4 * spec.ihl if spec.l3 == "ipv4" else 40 + spec.ext_bytes)


def _fix_ipv4_checksum(buf: bytearray, l3off: int, hlen: int) -> None:
    buf[l3off + 10:l3off + 12] = b"\x00\x00"
    c = checksum16(bytes(buf[l3off:l3off + hlen]))
    buf[l3off + 10:l3off + 12] = c.to_bytes(2, "big")


def build(spec: PacketSpec, rng: random.Random) -> bytes:
    """Build the frame (no FCS) of `spec`, drawing field values and payload from `rng`."""
    m = spec.malformation
    if m == "random_bytes":
        return rng.randbytes(spec.size)
    if m == "empty_ethertype_only":
        v = _draw_vals(rng) if spec.flow is None else _flow_vals(spec.flow, False)
        et = spec.ethertype
        if et is None:
            et = rng.choice((ETH_IPV4, ETH_IPV6, TPID_CTAG, TPID_STAG, ETH_ARP, ETH_EXPERIMENTAL))
        return v[0] + v[1] + et.to_bytes(2, "big")
    frame = _frame(spec, spec.size, rng)
    if m is None or m == "runt":
        return frame
    if m == "truncated":
        return frame[:spec.cut if spec.cut is not None else len(frame) - 1]

    buf = bytearray(frame)
    l3off, l4off = _l3_offsets(spec)
    hlen = l4off - l3off
    if m == "ihl_below_5":  # RFC 791: IHL >= 5
        buf[l3off] = 0x40 | rng.randrange(5)
        _fix_ipv4_checksum(buf, l3off, hlen)
    elif m == "ipv4_bad_version":
        buf[l3off] = (rng.choice((0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) << 4) \
            | (buf[l3off] & 0x0F)
        _fix_ipv4_checksum(buf, l3off, hlen)
    elif m == "total_length_too_big":
        present = len(buf) - l3off
        buf[l3off + 2:l3off + 4] = rng.randint(present + 1, 0xFFFF).to_bytes(2, "big")
        _fix_ipv4_checksum(buf, l3off, hlen)
    elif m == "total_length_below_ihl":  # RFC 791: total length includes the header
        buf[l3off + 2:l3off + 4] = rng.randrange(hlen).to_bytes(2, "big")
        _fix_ipv4_checksum(buf, l3off, hlen)
    elif m == "ipv6_bad_version":
        v = rng.choice((0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15))
        buf[l3off] = (v << 4) | (buf[l3off] & 0x0F)
    elif m == "ipv6_payload_length_too_big":
        present = len(buf) - l3off - 40
        buf[l3off + 4:l3off + 6] = rng.randint(present + 1, 0xFFFF).to_bytes(2, "big")
    elif m == "udp_length_below_8":  # RFC 768: length includes the 8-byte header
        buf[l4off + 4:l4off + 6] = rng.randrange(8).to_bytes(2, "big")
    elif m == "udp_length_too_big":  # RFC 768: the datagram ends where IP says (no padding)
        buf[l4off + 4:l4off + 6] = rng.randint(len(buf) - l4off + 1, 0xFFFF).to_bytes(2, "big")
    elif m == "ip_length_cuts_l4":  # the IP datagram ends inside the L4 header
        l4len = 8 if spec.l4 == "udp" else 4 * spec.tcp_doff
        cut = hlen + rng.randrange(l4len)
        if spec.l3 == "ipv4":
            buf[l3off + 2:l3off + 4] = cut.to_bytes(2, "big")
            _fix_ipv4_checksum(buf, l3off, hlen)
        else:
            buf[l3off + 4:l3off + 6] = (cut - 40).to_bytes(2, "big")
    elif m == "ext_length_past_datagram":
        # The first extension header claims more than the datagram holds: its length field
        # lies when it can say so, else the IPv6 payload length ends inside it.
        code, n = spec.ext[0]
        at, left = l3off + 40, len(buf) - l3off - 40
        unit, add = (4, 2) if code == EXT_AH else (8, 1)
        if left // unit - add < 255:
            buf[at + 1] = rng.randint(left // unit - add + 1, 255)
        else:
            buf[l3off + 4:l3off + 6] = rng.randrange(n).to_bytes(2, "big")
    elif m == "tcp_doff_below_5":  # RFC 9293: data offset >= 5
        buf[l4off + 12] = (rng.randrange(5) << 4) | (buf[l4off + 12] & 0x0F)
    elif m == "vxlan_bad_flags":  # RFC 7348: the I flag (0x08) must be set
        buf[l4off + 8] = rng.randrange(256) & 0xF7
    else:
        raise ValueError(f"unknown malformation {m!r}")
    return bytes(buf)


# --- random specs -------------------------------------------------------------------------------

SizeDist = str | int | tuple[int, int] | None


def _draw_size(rng: random.Random, size: SizeDist) -> int:
    if size is None or size == "mixed":
        r = rng.random()
        if r < 0.60:
            return _rint(rng, 60, 256)
        if r < 0.90:
            return _rint(rng, 257, 1500)
        if r < 0.98:
            return _rint(rng, 1501, 4000)
        return _rint(rng, 4001, SIZE_MAX)
    if isinstance(size, int):
        return size
    if isinstance(size, tuple) and len(size) == 2:
        return _rint(rng, size[0], size[1])
    raise ValueError(f"bad size distribution {size!r}")


def _size_bounds(size: SizeDist) -> tuple[int, int]:
    """Sizes a drawn size may be nudged within (to keep RFC 791 fragment rules)."""
    if isinstance(size, int):
        return size, size
    if isinstance(size, tuple):
        return size[0], size[1]
    return SIZE_MIN, SIZE_MAX


def _draw_vlans(rng: random.Random, n: int, flow: int | None, inner: bool = False
                ) -> tuple[tuple[int, int], ...]:
    if n == 0:
        return ()
    src = rng if flow is None else random.Random(0x71A40000 + 2 * flow + inner)
    vids = [_rint(src, 1, 4094) for _ in range(n)]  # VID 0 (priority tag) and 4095 reserved
    if n == 1:
        return ((TPID_CTAG, vids[0]),)
    # IEEE 802.1Q: S-tag (0x88a8) outside a C-tag; 0x8100-in-0x8100 is also seen in practice
    outer = _pick(rng, (TPID_STAG, TPID_CTAG))
    return ((outer, vids[0]),) + tuple((TPID_CTAG, v) for v in vids[1:])


def _l3l4_len(l3: str, l4: str | None, proto: int | None, ihl: int, doff: int,
              l4_present: bool = True, ext: int = 0) -> int:
    """Bytes of an L3 header, `ext` bytes of IPv6 extension headers and the L4 header that
    follows (same rules as `_headers`)."""
    n = 4 * ihl if l3 == "ipv4" else 40 + ext
    if l4_present and l4 is not None:
        n += 8 if l4 == "udp" else 4 * doff if l4 == "tcp" else _OTHER_HDR.get(proto, ("", 0))[1]
    return n


def _base_spec(rng: random.Random, kind: str, nvlans: int, size: int, flow: int | None,
               minimal: bool = False, vxlan_checksum: bool | None = False,
               l3: str | None = None, bounds: tuple[int, int] | None = None) -> PacketSpec:
    """A valid spec of `kind`; its size is the actual frame length (>= header length).

    bounds: (lo, hi) the size may be moved within by up to 7 bytes so that a first or middle
    IPv4 fragment can carry a multiple of 8 data bytes; None: size is exact."""
    vlans = _draw_vlans(rng, nvlans, flow)
    l3off = 14 + 4 * nvlans
    if kind == "eth":
        return _mk(size=max(size, l3off), vlans=vlans, ethertype=ETH_EXPERIMENTAL,
                          flow=flow)
    if kind == "arp":
        return _mk(size=max(size, l3off + 28), vlans=vlans, ethertype=ETH_ARP, flow=flow)
    # Half the IPv4 headers / TCP headers carry options (RFC 791 IHL, RFC 9293 data offset).
    ihl = 5 if minimal or rng.random() < 0.5 else _rint(rng, 6, 15)
    doff = 5 if minimal or rng.random() < 0.5 else _rint(rng, 6, 15)
    if kind == "vxlan":
        outer = l3 or _pick(rng, ("ipv4", "ipv6"))
        if outer != "ipv4":
            ihl = 5
        inv = rng.getrandbits(1)
        ivlans = _draw_vlans(rng, inv, flow, True)
        il3, il4 = _pick(rng, ("ipv4", "ipv6")), _pick(rng, ("udp", "tcp"))
        iihl = _rint(rng, 5, 15) if il3 == "ipv4" and not minimal else 5
        idoff = _rint(rng, 5, 15) if il4 == "tcp" and not minimal else 5
        # An inner IPv6 header is followed by one extension header a time in three (one, so
        # the deepest stack still fits the parser's default 11 walk steps).
        iext = ()
        if il3 == "ipv6" and not minimal and rng.random() < 1 / 3:
            code = _pick(rng, (EXT_HOP_BY_HOP, EXT_DEST_OPTS, EXT_ROUTING, EXT_FRAGMENT, EXT_AH))
            iext = ((code, _ext_length(rng, code)),)
        vni = rng.getrandbits(24) if flow is None else \
            random.Random(0x7E110000 + flow).getrandbits(24)
        csum = bool(rng.getrandbits(1)) if vxlan_checksum is None else vxlan_checksum
        l4off = l3off + _l3l4_len(outer, None, None, ihl, 5)
        # outer UDP (RFC 768) + VXLAN (RFC 7348) = 16 bytes before the inner frame
        inner_hdr = 14 + 4 * inv + _l3l4_len(il3, il4, None, iihl, idoff,
                                             ext=sum(n for _, n in iext))
        total = max(size, l4off + 16 + inner_hdr)
        inner = _mk(size=total - l4off - 16, vlans=ivlans, l3=il3, l4=il4, ihl=iihl,
                    tcp_doff=idoff, ext=iext, flow=flow)
        return _mk(size=total, vlans=vlans, l3=outer, l4="udp", ihl=ihl, vxlan_vni=vni,
                          vxlan_checksum=csum, inner=inner, flow=flow)
    l3k, l4k = kind.split("_")
    if l4k in ("frag", "ext"):
        l4k = _pick(rng, ("udp", "tcp", "other"))
    if l3k != "ipv4":
        ihl = 5
    if l4k != "tcp":
        doff = 5
    proto = _pick(rng, _OTHER_PROTOS[l3k]) if l4k == "other" else None
    ext = _draw_ext(rng, kind)
    ext_len = sum(n for _, n in ext)
    if not kind.endswith("_frag"):
        total = max(size, l3off + _l3l4_len(l3k, l4k, proto, ihl, doff, ext=ext_len))
        return _mk(size=total, vlans=vlans, l3=l3k, l4=l4k, proto=proto, ihl=ihl,
                   tcp_doff=doff, ext=ext, flow=flow)
    # first (MF, offset 0), middle (MF, offset > 0) or last (offset > 0, no MF)
    variant = int(rng.random() * 3)
    l3len = 4 * ihl if l3k == "ipv4" else 40 + ext_len
    hdr = l3off + _l3l4_len(l3k, l4k, proto, ihl, doff, variant == 0, ext_len)
    total = max(size, hdr)
    data = total - l3off - l3len
    r = data % 8
    if variant < 2 and r:
        # RFC 791 and RFC 8200 section 4.5: all fragments but the last carry a multiple of
        # 8 data bytes. Nudge a drawn size to fit; with an exact size make this the last
        # fragment instead.
        lo, hi = bounds if bounds is not None else (size, size)
        if lo < hi and total - r >= max(lo, hdr):
            total -= r
        elif lo < hi and (total + 8 - r <= hi or total == hdr):
            total += 8 - r
        else:
            variant = 2
            total = max(size, l3off + l3len)
        data = total - l3off - l3len
    off = 0 if variant == 0 else _rint(rng, 1, min(0x1FFF, (0xFFFF - l3len - data) // 8))
    return _mk(size=total, vlans=vlans, l3=l3k, l4=l4k, proto=proto, ihl=ihl,
               tcp_doff=doff, ext=ext, fragment=True, frag_offset=off,
               more_fragments=variant < 2, flow=flow)


def _ext_length(rng: random.Random, code: int) -> int:
    if code == EXT_FRAGMENT:
        return 8
    if code == EXT_AH:
        return _pick(rng, (16, 24))  # RFC 4302 section 2.2: a multiple of 8 bytes in IPv6
    if code == EXT_ROUTING:
        return 8 + 16 * _rint(rng, 0, 2)  # type 0: a 16-byte address a unit pair
    return 8 * _rint(rng, 1, 4)


def _draw_ext(rng: random.Random, kind: str) -> tuple[tuple[int, int], ...]:
    """IPv6 extension headers of `kind`: for ipv6_ext one to three, the first never a
    Fragment (Hop-by-Hop only first, RFC 8200 section 4.3); for ipv6_frag an optional
    header before the Fragment header, which comes last (the rest is the fragmentable part)."""
    if kind == "ipv6_ext":
        codes = [_pick(rng, (EXT_HOP_BY_HOP, EXT_DEST_OPTS, EXT_ROUTING, EXT_AH))]
        codes += [_pick(rng, (EXT_DEST_OPTS, EXT_ROUTING, EXT_FRAGMENT, EXT_AH))
                  for _ in range(_rint(rng, 0, 2))]
    elif kind == "ipv6_frag":
        codes = [EXT_FRAGMENT]
        if rng.random() < 0.5:
            codes.insert(0, _pick(rng, (EXT_HOP_BY_HOP, EXT_DEST_OPTS, EXT_ROUTING)))
    else:
        return ()
    return tuple((c, _ext_length(rng, c)) for c in codes)


def _cut_points(spec: PacketSpec) -> tuple[list[int], list[tuple[int, int]]]:
    """Header boundaries strictly inside the meaningful frame, and (start, end) spans to cut in."""
    lay = layout(spec)
    end = lay[-1][1]
    if lay[-2][0] == "pad":
        end = lay[-2][1]  # cutting only padding away is no truncation
    starts = sorted({off for _, off in lay[:-1]} | {end})
    bounds = [o for o in starts if 0 < o < end]
    spans = [(a, b) for a, b in zip(starts, starts[1:]) if b - a >= 2 and b <= end]
    return bounds, spans


def random_spec(rng: random.Random, size: SizeDist = None, kinds: Iterable[str] | None = None,
                malformed_fraction: float = 0.0, *, vlan_counts: Sequence[int] = (0, 1, 2),
                flows: int | None = None, vxlan_checksum: bool | None = False,
                malformations: Iterable[str] | None = None) -> PacketSpec:
    """Draw a spec. size: None/"mixed", an int, or (lo, hi). kinds: names from KINDS (default
    all). With probability malformed_fraction the packet gets a malformation drawn uniformly
    from `malformations` (default MALFORMATIONS) among those that fit `kinds`. vlan_counts: tag
    counts to draw from. flows: draw addresses/ports/VIDs/VNIs from this many fixed flows.
    vxlan_checksum: compute the outer UDP checksum of VXLAN packets (None: at random).
    A drawn (not fixed) size may move by up to 7 bytes, within the range, so that a first or
    middle IPv4 fragment carries a multiple of 8 data bytes (RFC 791); the returned spec's size
    is always the built frame's length (except truncated packets: see `cut`)."""
    allowed = KINDS if kinds is None else _check_kinds(tuple(kinds))
    vcounts = vlan_counts if type(vlan_counts) is tuple else tuple(vlan_counts)
    flow = int(rng.random() * flows) if flows else None
    mal = None
    if malformed_fraction > 0 and rng.random() < malformed_fraction:
        cands = _malformation_candidates(
            allowed, vcounts, MALFORMATIONS if malformations is None else tuple(malformations))
        if cands:
            mal = _pick(rng, cands)
    if mal is None:
        return _base_spec(rng, _pick(rng, allowed), _pick(rng, vcounts), _draw_size(rng, size),
                          flow, vxlan_checksum=vxlan_checksum, bounds=_size_bounds(size))
    if mal == "random_bytes":
        return PacketSpec(size=rng.randint(1, 300), malformation=mal)
    if mal == "empty_ethertype_only":
        return PacketSpec(size=14, flow=flow, malformation=mal)
    if mal == "runt":
        pairs = [(k, n) for k in allowed for n in vcounts if _KIND_MIN[k] + 4 * n < SIZE_MIN]
        kind, n = rng.choice(pairs)
        return _runt_spec(rng, kind, n, flow)
    need = _MALFORMATION_KINDS[mal]
    kinds_ok = [k for k in allowed if need is None or k in need]
    kind = rng.choice(kinds_ok)
    spec = _base_spec(rng, kind, rng.choice(vcounts), _draw_size(rng, size), flow,
                      vxlan_checksum=vxlan_checksum, l3=_NEEDS_L3.get(mal),
                      bounds=_size_bounds(size))
    spec = replace(spec, malformation=mal)
    if mal == "truncated":
        spec = replace(spec, cut=_choose_cut(rng, spec))
    return spec


def _choose_cut(rng: random.Random, spec: PacketSpec) -> int:
    """Half the time a header boundary (each equally likely), else a point inside a header or
    the payload, so every boundary and every header is a reachable cut."""
    bounds, spans = _cut_points(spec)
    if spans and (not bounds or rng.random() < 0.5):
        a, b = rng.choice(spans)
        return rng.randint(a + 1, b - 1)
    return rng.choice(bounds)


def _runt_spec(rng: random.Random, kind: str, nvlans: int, flow: int | None) -> PacketSpec:
    """A valid-looking frame of `kind` shorter than 60 bytes: no options, exact lengths."""
    for _ in range(64):  # e.g. ICMPv6 or a TCP first fragment may not fit; draw again
        spec = _base_spec(rng, kind, nvlans, 0, flow, minimal=True)
        if spec.size < SIZE_MIN:
            break
    else:
        spec = PacketSpec(vlans=spec.vlans, ethertype=ETH_EXPERIMENTAL, flow=flow)
    size = rng.randint(header_length(spec), SIZE_MIN - 1)
    if spec.fragment and spec.more_fragments and (size - _l3_offsets(spec)[1]) % 8:
        # RFC 791: only the last fragment may carry a data length that is not a multiple of 8
        spec = replace(spec, more_fragments=False, frag_offset=rng.randint(1, 1000))
    return replace(spec, size=size, malformation="runt")


@functools.cache
def _check_kinds(kinds: tuple[str, ...]) -> tuple[str, ...]:
    for k in kinds:
        if k not in KINDS:
            raise ValueError(f"unknown kind {k!r}")
    if not kinds:
        raise ValueError("no kinds to draw from")
    return kinds


@functools.cache
def _malformation_candidates(kinds: tuple[str, ...], vcounts: tuple[int, ...],
                             mals: tuple[str, ...]) -> tuple[str, ...]:
    for m in mals:
        if m not in MALFORMATIONS:
            raise ValueError(f"unknown malformation {m!r}")
    return tuple(m for m in mals if _fits(m, kinds, vcounts))


def _fits(mal: str, kinds: tuple[str, ...], vcounts: tuple[int, ...]) -> bool:
    if mal == "runt":
        return any(_KIND_MIN[k] + 4 * n < SIZE_MIN for k in kinds for n in vcounts)
    need = _MALFORMATION_KINDS[mal]
    return need is None or any(k in need for k in kinds)


def random_packets(n: int, seed: int, size_dist: SizeDist = "mixed",
                   malformed_fraction: float = 0.1, **kw) -> list[tuple[PacketSpec, bytes]]:
    """n (spec, frame) pairs from one `random.Random(seed)`; kw go to `random_spec`."""
    rng = random.Random(seed)
    out = []
    # The cyclic GC would rescan the growing list on every collection (about 20% of the run
    # time); nothing created here forms a cycle, so pause it.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(n):
            spec = random_spec(rng, size_dist, malformed_fraction=malformed_fraction, **kw)
            out.append((spec, build(spec, rng)))
    finally:
        if was_enabled:
            gc.enable()
    return out


# --- pcap ---------------------------------------------------------------------------------------


def write_pcap(path: str | PathLike, packets: Iterable[bytes | tuple[PacketSpec, bytes]]) -> None:
    """Write frames (or (spec, frame) pairs) as an Ethernet pcap; timestamps are 1 us apart so
    the file is the same for the same packets."""
    from scapy.utils import PcapWriter

    with PcapWriter(str(path), linktype=1, sync=False) as w:  # LINKTYPE_ETHERNET
        for i, p in enumerate(packets):
            data = p[1] if isinstance(p, tuple) else p
            if not w.header_present:
                w.write_header(data)
            w.write_packet(data, sec=i // 1_000_000, usec=i % 1_000_000)


def read_pcap(path: str | PathLike) -> list[bytes]:
    """The frames of a pcap file, as bytes."""
    from scapy.utils import RawPcapReader

    with RawPcapReader(str(path)) as r:
        return [bytes(data) for data, _meta in r]
