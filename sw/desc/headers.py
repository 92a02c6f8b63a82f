"""Header declarations: the single source for the hardware parser and its Python model.

Each protocol header is declared once, as data: its fields in wire order, how long it is, which
field selects the next header, the sanity checks whose failure flags the packet, and which
metadata slots its fields fill. :mod:`supernic.hw.parser.walk` turns this into gateware and
:mod:`supernic.sim.parser_model` into the reference model; neither knows any protocol by name.

Walk rules shared by both (one header per walk step):

0. A header of a counted group (``Header.group``: the IP extension headers) past the group's
   per-layer limit is not walked: the packet is flagged ``too_deep`` and the walk stops.
1. The fixed part of the header (the sum of its field widths) must lie inside the captured
   window, else the packet is flagged ``truncated`` (the frame ended) or ``too_deep`` (the
   frame goes on past the window) and the walk stops.
2. Fields are extracted and the header's binds are applied; an IP header also sets where its
   datagram ends (``Header.datagram``), which later headers of the layer must fit in.
3. Every failing check raises its flag. A failing error check (a flag in ``ERROR_FLAGS``)
   stops the walk here: the header's length cannot be trusted.
3a. With the build's ``header_checksum`` on, a header that declares a checksum
   (``Header.checksum``) and lies whole inside the window must carry a valid Internet checksum:
   its 16-bit words sum, in one's complement, to 0xFFFF (RFC 1071 section 1; the IPv4 header,
   RFC 791 section 3.1). Otherwise its flag is raised, an error: the walk stops. (A header
   that does not lie whole inside the window stops at rule 4 instead.)
4. The full length (fixed part plus options) must fit the same way as in 1, else it stops.
   ``payload_off`` moves past the header. A failing non-error check (``fragment``) stops the
   walk now: the header is sane but nothing after it is parsed.
5. The select field picks the next header (or ``default_next``); a tunnel header starts a new
   encapsulation layer. A next header beyond the last layer, or beyond the last walk step,
   flags ``too_deep``.
"""

from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

__all__ = [
    "Field", "LengthFrom", "Offset", "EndOf", "HeaderLength", "DatagramLeft", "Check", "Bind",
    "Header", "HEADERS", "HEADERS_BY_NAME", "FIRST_HEADER", "LAYERS", "GROUPS", "header_index",
    "OFFSET", "HEADER_LENGTH", "DATAGRAM_LEFT", "DEFAULT_EXT_HEADERS", "DATAGRAM_END_BITS",
    "read_bytes",
]


@dataclass(frozen=True)
class Field:
    name: str
    width: int  # bits, in wire order (most significant first)


@dataclass(frozen=True)
class LengthFrom:
    """Header length in bytes is ``(field + add) * scale`` (IPv4 IHL, TCP data offset; an
    IPv6 extension header's length counts 8-byte units after the first, RFC 8200 section
    4.3; the Authentication Header's 4-byte units less 2, RFC 4302 section 2.2)."""
    field: str
    scale: int
    add: int = 0

    def bytes(self, value):
        return (value + self.add) * self.scale


class Offset:
    """Bind value: the byte offset of this header in the frame."""
    def __repr__(self):
        return "OFFSET"


class HeaderLength:
    """Check operand: this header's length in bytes as computed from its length rule."""
    def __repr__(self):
        return "HEADER_LENGTH"


class DatagramLeft:
    """Check operand: the bytes of the enclosing IP datagram from this header's start on (its
    IP header's total or payload length says where it ends). A check ``x <= DATAGRAM_LEFT``
    says the header (or the length it claims) lies inside the datagram; with no IP header
    before it in the layer it always holds."""
    def __repr__(self):
        return "DATAGRAM_LEFT"


OFFSET = Offset()
HEADER_LENGTH = HeaderLength()
DATAGRAM_LEFT = DatagramLeft()
# Bits of a datagram end (an offset plus a 16-bit length, as ``min_len``).
DATAGRAM_END_BITS = 17


@dataclass(frozen=True)
class EndOf:
    """Bind value: ``offset + extra + field``, where a length field says the data ends."""
    field: str
    extra: int = 0


@dataclass(frozen=True)
class Check:
    """The header is sane only if ``field op value``; otherwise ``flag`` is raised.

    ``field``: a field name or HEADER_LENGTH. ``op`` is one of ``==``, ``>=``, ``has`` (all
    bits of value set), ``<=``. ``value`` is an int, HEADER_LENGTH or (with ``<=``)
    DATAGRAM_LEFT.
    """
    field: Union[str, HeaderLength]
    op: str
    value: Union[int, HeaderLength, DatagramLeft]
    flag: str


@dataclass(frozen=True)
class Bind:
    """Write ``value`` into metadata slot ``slot`` when this header is walked.

    ``value``: a field name, an int, OFFSET or EndOf. ``per_layer`` slots are arrays indexed by
    the encapsulation layer. ``layer``/``nth`` restrict the bind to one layer, or to the n-th
    occurrence of this header within its layer. ``mode="max"`` keeps the larger value.
    """
    slot: str
    value: Union[str, int, Offset, EndOf]
    per_layer: bool = False
    layer: Optional[int] = None
    nth: Optional[int] = None
    mode: str = "set"


@dataclass(frozen=True)
class Header:
    name: str
    fields: tuple
    length: Union[int, LengthFrom, None] = None  # None: the fixed part
    select: Optional[str] = None
    next: Mapping[int, str] = field(default_factory=dict)
    default_next: Optional[str] = None
    tunnel: bool = False
    checks: tuple = ()
    binds: tuple = ()
    # An IP header: where its datagram ends (checks against DATAGRAM_LEFT read it).
    datagram: Optional[EndOf] = None
    # Headers of a group count together against a per-layer limit (rule 0).
    group: Optional[str] = None
    # The flag raised when the header's Internet checksum fails (rule 3a), in builds that
    # check header checksums; None: the header has none that covers only itself.
    checksum: Optional[str] = None

    @property
    def fixed_bytes(self):
        bits = sum(f.width for f in self.fields)
        assert bits % 8 == 0, self.name
        return bits // 8

    @property
    def max_bytes(self):
        if isinstance(self.length, LengthFrom):
            width = self.field(self.length.field).width
            return max(self.fixed_bytes, self.length.bytes((1 << width) - 1))
        return self.fixed_bytes

    def field(self, name):
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"header {self.name} has no field {name!r}")

    def field_position(self, name):
        """(bit position from the start of the header, width) of a field."""
        pos = 0
        for f in self.fields:
            if f.name == name:
                return pos, f.width
            pos += f.width
        raise KeyError(f"header {self.name} has no field {name!r}")


# Ethertypes, IEEE 802.3 / IANA: 802.1Q C-tag 0x8100, 802.1ad S-tag 0x88a8, IPv4, IPv6.
_ETHERTYPE_NEXT = {0x8100: "vlan", 0x88A8: "vlan", 0x0800: "ipv4", 0x86DD: "ipv6"}
# IANA protocol numbers: TCP 6, UDP 17, and the extension headers (RFC 8200 section 4.1):
# Routing 43 and Destination Options 60 (one format, walked as one header), Fragment 44, the
# Authentication Header 51 (RFC 4302, also after IPv4). Hop-by-Hop Options (0) may only come
# first, right after the IPv6 header (RFC 8200 section 4.3): elsewhere it ends the walk. ESP
# (50) encrypts what follows: it ends the walk, with no L4, like any unknown protocol.
_EXT_NEXT = {6: "tcp", 17: "udp", 43: "ipv6_opts", 60: "ipv6_opts", 44: "ipv6_frag", 51: "ah"}
_IP_NEXT = {6: "tcp", 17: "udp", 51: "ah"}
_IPV6_NEXT = {0: "ipv6_opts", **_EXT_NEXT}
# Extension headers walked per layer before the walk gives up (``too_deep``); a build
# parameter (``[parser] ext_headers``). RFC 8200 section 4.1 orders at most six, and real
# traffic rarely carries more than two.
DEFAULT_EXT_HEADERS = 4
GROUPS = ("ip_ext",)
# VXLAN's IANA-assigned UDP port (RFC 7348 section 5).
VXLAN_PORT = 4789


def _l3_flow_binds(src, dst, proto, ipv6):
    # An inner IP header replaces the flow: its L4 ports start empty again so a flow never
    # mixes an inner address with an outer port.
    return (
        Bind("flow.src_ip", src), Bind("flow.dst_ip", dst), Bind("flow.proto", proto),
        Bind("flow.sport", 0), Bind("flow.dport", 0), Bind("flow.ipv6", ipv6),
    )


HEADERS = (
    Header(
        "ethernet",
        (Field("dst", 48), Field("src", 48), Field("ethertype", 16)),
        select="ethertype", next=_ETHERTYPE_NEXT,
        binds=(Bind("inner_l2_off", OFFSET, layer=1),),
    ),
    Header(
        "vlan",  # IEEE 802.1Q tag after its TPID: PCP, DEI, VID, then the next ethertype
        (Field("pcp", 3), Field("dei", 1), Field("vid", 12), Field("ethertype", 16)),
        select="ethertype", next=_ETHERTYPE_NEXT,
        binds=(
            Bind("vid", "vid", layer=0, nth=0), Bind("vlan_count", 1, layer=0, nth=0),
            Bind("vid2", "vid", layer=0, nth=1), Bind("vlan_count", 2, layer=0, nth=1),
            Bind("vlan_count", 3, layer=0, nth=2),
        ),
    ),
    Header(
        "ipv4",  # RFC 791 section 3.1
        (Field("version", 4), Field("ihl", 4), Field("dscp", 6), Field("ecn", 2),
         Field("total_length", 16), Field("ident", 16), Field("reserved", 1), Field("df", 1),
         Field("mf", 1), Field("frag_offset", 13), Field("ttl", 8), Field("protocol", 8),
         Field("checksum", 16), Field("src", 32), Field("dst", 32)),
        length=LengthFrom("ihl", 4), select="protocol", next=_IP_NEXT,
        checks=(
            Check("version", "==", 4, "malformed"),
            Check("ihl", ">=", 5, "malformed"),
            Check("total_length", ">=", HEADER_LENGTH, "malformed"),
            # Only the first fragment carries the L4 header, and no fragment carries the whole
            # flow: stop before L4 and hash on addresses only (as RSS does).
            Check("mf", "==", 0, "fragment"),
            Check("frag_offset", "==", 0, "fragment"),
        ),
        binds=(
            Bind("l3_off", OFFSET, per_layer=True), Bind("l3_kind", 1, per_layer=True),
            *_l3_flow_binds("src", "dst", "protocol", 0),
            Bind("min_len", EndOf("total_length"), mode="max"),
        ),
        datagram=EndOf("total_length"),
        # Off by default ([parser] header_checksum): a NIC forwards what a router would have
        # dropped, and the check costs a 30-word adder on every step that can meet IPv4.
        checksum="malformed",
    ),
    Header(
        "ipv6",  # RFC 8200 section 3
        (Field("version", 4), Field("traffic_class", 8), Field("flow_label", 20),
         Field("payload_length", 16), Field("next_header", 8), Field("hop_limit", 8),
         Field("src", 128), Field("dst", 128)),
        select="next_header", next=_IPV6_NEXT,
        checks=(Check("version", "==", 6, "malformed"),),
        binds=(
            Bind("l3_off", OFFSET, per_layer=True), Bind("l3_kind", 2, per_layer=True),
            *_l3_flow_binds("src", "dst", "next_header", 1),
            Bind("min_len", EndOf("payload_length", 40), mode="max"),
        ),
        datagram=EndOf("payload_length", 40),
    ),
    Header(
        # Hop-by-Hop Options, Routing, Destination Options (RFC 8200 sections 4.3, 4.4, 4.6):
        # next header, length in 8-byte units after the first 8, then options or routing
        # data, which the walk skips. Each binds the flow's protocol to its next header, so
        # the flow says the upper-layer protocol, whatever headers came between.
        "ipv6_opts",
        (Field("next_header", 8), Field("hdr_ext_len", 8), Field("data", 48)),
        length=LengthFrom("hdr_ext_len", 8, add=1), select="next_header", next=_EXT_NEXT,
        group="ip_ext",
        checks=(Check(HEADER_LENGTH, "<=", DATAGRAM_LEFT, "malformed"),),
        binds=(Bind("flow.proto", "next_header"),),
    ),
    Header(
        # Fragment (RFC 8200 section 4.5). The IPv4 rule: a fragment (M set or an offset)
        # stops the walk before L4, first fragments included, so every fragment of a datagram
        # hashes alike, on its addresses (as RSS does). An atomic fragment (no M, offset 0,
        # RFC 6946) is a whole datagram: the walk goes on.
        "ipv6_frag",
        (Field("next_header", 8), Field("reserved", 8), Field("frag_offset", 13),
         Field("res", 2), Field("m", 1), Field("ident", 32)),
        select="next_header", next=_EXT_NEXT, group="ip_ext",
        checks=(
            Check(HEADER_LENGTH, "<=", DATAGRAM_LEFT, "malformed"),
            Check("m", "==", 0, "fragment"),
            Check("frag_offset", "==", 0, "fragment"),
        ),
        binds=(Bind("flow.proto", "next_header"),),
    ),
    Header(
        # Authentication Header (RFC 4302 section 2): next header, payload length in 4-byte
        # units less 2, reserved, SPI, sequence number, then the integrity check value. The
        # fixed part alone is 3 units: a payload length of 0 is malformed.
        "ah",
        (Field("next_header", 8), Field("payload_len", 8), Field("reserved", 16),
         Field("spi", 32), Field("seq", 32)),
        length=LengthFrom("payload_len", 4, add=2), select="next_header", next=_EXT_NEXT,
        group="ip_ext",
        checks=(
            Check("payload_len", ">=", 1, "malformed"),
            Check(HEADER_LENGTH, "<=", DATAGRAM_LEFT, "malformed"),
        ),
        binds=(Bind("flow.proto", "next_header"),),
    ),
    Header(
        "udp",  # RFC 768: the length covers header and data, inside the IP datagram
        (Field("sport", 16), Field("dport", 16), Field("length", 16), Field("checksum", 16)),
        select="dport", next={VXLAN_PORT: "vxlan"},
        checks=(Check("length", ">=", 8, "malformed"),
                Check("length", "<=", DATAGRAM_LEFT, "malformed")),
        binds=(
            Bind("l4_off", OFFSET, per_layer=True), Bind("l4_kind", 2, per_layer=True),
            Bind("flow.sport", "sport"), Bind("flow.dport", "dport"),
        ),
    ),
    Header(
        "tcp",  # RFC 9293 section 3.1
        (Field("sport", 16), Field("dport", 16), Field("seq", 32), Field("ack", 32),
         Field("data_offset", 4), Field("reserved", 4), Field("flags", 8), Field("window", 16),
         Field("checksum", 16), Field("urgent", 16)),
        length=LengthFrom("data_offset", 4),
        checks=(Check("data_offset", ">=", 5, "malformed"),
                Check(HEADER_LENGTH, "<=", DATAGRAM_LEFT, "malformed")),
        binds=(
            Bind("l4_off", OFFSET, per_layer=True), Bind("l4_kind", 1, per_layer=True),
            Bind("flow.sport", "sport"), Bind("flow.dport", "dport"),
        ),
    ),
    Header(
        "vxlan",  # RFC 7348 section 5: the I flag (0x08) must be set for a valid VNI
        (Field("flags", 8), Field("reserved0", 24), Field("vni", 24), Field("reserved1", 8)),
        default_next="ethernet", tunnel=True,
        checks=(Check("flags", "has", 0x08, "malformed"),),
        binds=(Bind("vni", "vni", layer=0), Bind("vxlan", 1, layer=0)),
    ),
)

HEADERS_BY_NAME = {h.name: h for h in HEADERS}
FIRST_HEADER = "ethernet"
LAYERS = 2  # outer and one tunnelled (inner) layer


def header_index(name):
    """Walk-state code of a header: 0 means "stopped", headers count from 1."""
    for i, h in enumerate(HEADERS):
        if h.name == name:
            return i + 1
    raise KeyError(f"unknown header {name!r}")


def read_bytes(header_checksum=False):
    """Bytes a walk step reads from a header's start: its fixed part, or with checksums on,
    the whole of the longest header whose checksum it checks (IPv4 with 40 bytes of options)."""
    fixed = max(h.fixed_bytes for h in HEADERS)
    if header_checksum:
        fixed = max([fixed] + [h.max_bytes for h in HEADERS if h.checksum])
    return fixed
