"""The parser's metadata: the struct that travels beside every beat of a packet.

Flags (``flags``): ``truncated`` a header is cut by the end of the frame; ``too_deep`` the walk
ran past the capture window, the last walk step or the last layer (not an error: the rest is
treated as payload); ``malformed`` a header failed a sanity check; ``fragment`` an IPv4 fragment
(not an error: L4 is not parsed); ``runt`` the frame is shorter than 60 bytes (IEEE 802.3
minimum of 64 bytes less the FCS). The tail flags ``length_error`` (an IP length field claims
more bytes than the frame has) and ``keep_error`` (``keep`` broke the stream contract) are only
known at the end of the frame and are valid on the beat with ``last`` set; they read 0 before.

The flow 5-tuple is the innermost one (for VXLAN, the tenant's inner flow); offsets of the
outer (index 0) and inner (index 1) L3/L4 headers let network tasks find any header.

Three fields are not parsed from the frame: ``ts`` is the ingress timestamp, the parser's cycle
counter (32 bits, wrapping) on the cycle it accepted the packet's first beat, so that timed
network tasks (token buckets) and latency figures depend on when a packet entered, not on how
long it queued; ``drop`` is set by a network task that drops the packet (the tasks behind it
pass it untouched and the chain's egress discards and counts it); ``mark`` is set by a policer
that marks instead of dropping (see :mod:`supernic.hw.nt.task`).
"""

import enum

__all__ = [
    "FLAGS", "ERROR_FLAGS", "TAIL_FLAGS", "L3Kind", "L4Kind", "TenantKind", "FLOW_FIELDS",
    "offset_width", "meta_fields", "field_width", "field_offsets", "TENANT_KEY_RULES", "RUNT_BYTES",
    "TOEPLITZ_KEY",
]

FLAGS = ("truncated", "too_deep", "malformed", "fragment", "runt", "length_error", "keep_error")
ERROR_FLAGS = ("truncated", "malformed", "runt", "length_error", "keep_error")
TAIL_FLAGS = ("length_error", "keep_error")
RUNT_BYTES = 60


class L3Kind(enum.IntEnum):
    NONE = 0
    IPV4 = 1
    IPV6 = 2


class L4Kind(enum.IntEnum):
    NONE = 0
    TCP = 1
    UDP = 2


class TenantKind(enum.IntEnum):
    NONE = 0
    VLAN = 1
    VNI = 2


# The tenant key is the first rule whose condition slot is non-zero: a VXLAN VNI names a
# virtual network (RFC 7348), else the outer VLAN ID (IEEE 802.1Q), else no key.
TENANT_KEY_RULES = (("vxlan", "vni", TenantKind.VNI), ("vlan_count", "vid", TenantKind.VLAN))

# The Microsoft RSS default Toeplitz key (40 bytes), so the flow hash matches what host NICs
# compute and can be checked against the RSS specification's verification vectors.
TOEPLITZ_KEY = bytes.fromhex(
    "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa")


# The innermost flow 5-tuple and its family bit, field: bits (hw/parser/meta.py lays them out).
FLOW_FIELDS = {"src_ip": 128, "dst_ip": 128, "sport": 16, "dport": 16, "proto": 8, "ipv6": 1}


def offset_width(header_bytes):
    """Bits for a byte offset inside (or just past) the capture window."""
    return header_bytes.bit_length()


# A layout is described in plain Python so that software can find fields without Amaranth: an
# int is that many bits, a dict a struct (members packed in order from bit 0), a tuple
# ``(element, count)`` an array. hw/parser/meta.py turns the same description into Amaranth
# layouts, so the two cannot disagree about bit positions.
def meta_fields(header_bytes):
    """The metadata beside every beat, as a layout description."""
    ow = offset_width(header_bytes)
    return {
        "flags": {name: 1 for name in FLAGS},
        "l3_kind": (2, 2),
        "l4_kind": (2, 2),
        "l3_off": (ow, 2),
        "l4_off": (ow, 2),
        "inner_l2_off": ow,
        "payload_off": ow,
        "vlan_count": 2,
        "vid": 12,
        "vid2": 12,
        "vxlan": 1,
        "vni": 24,
        "tenant_kind": 2,
        "tenant_key": 24,
        "min_len": 17,
        "flow": dict(FLOW_FIELDS),
        "flow_hash": 32,
        "ts": 32,
        "drop": 1,
        "mark": 1,
    }


def field_width(shape):
    """Bits of a layout description."""
    if isinstance(shape, dict):
        return sum(field_width(s) for s in shape.values())
    if isinstance(shape, tuple):
        elem, count = shape
        return field_width(elem) * count
    return shape


def field_offsets(fields, base=0):
    """``{path: (offset, width)}`` of every member of a struct description, nested members
    named ``outer.inner``."""
    out = {}
    at = base
    for name, shape in fields.items():
        width = field_width(shape)
        out[name] = (at, width)
        if isinstance(shape, dict):
            out.update({f"{name}.{k}": v for k, v in field_offsets(shape, at).items()})
        at += width
    return out
