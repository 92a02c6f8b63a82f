"""VXLAN encapsulation and decapsulation (RFC 7348).

``vxlan_encap`` prepends 50 bytes: an outer Ethernet header (configured MACs, ethertype IPv4),
an IPv4 header (RFC 791: version 4, IHL 5, configured source, destination, TTL and DF, a
per-NT identification counter, total length and header checksum computed, RFC 1071), a UDP
header (RFC 768; destination port 4789; source port ``0xC000 | flow_hash[13:0]``, a hash of the
inner flow in the dynamic range 49152-65535 as RFC 7348 section 5 recommends; checksum 0, which
RFC 7348 section 5 allows over IPv4; length computed) and the VXLAN header (I flag, configured
VNI). It skips packets that are already VXLAN, packets whose ``keep`` broke the stream contract,
packets whose parsed headers end within 50 bytes of the parser window (their encapsulated
headers would cross it and the parser would describe the new frame differently), and packets
longer than the ``buffer_bytes`` build parameter.

``vxlan_decap`` strips every byte before ``inner_l2_off`` from VXLAN packets (optionally only
those of one configured VNI: others are counted in ``vni_mismatch`` and skipped) and skips
everything else, including VXLAN packets whose inner Ethernet header lies past the parser window
and inner frames with more than three tags before an IP header. A frame left shorter than 60
bytes is padded with zero bytes to 60, the IEEE 802.3 minimum a VTEP's Ethernet port would send
(hence ``Scope.PACKET``: the padding depends on the frame's end).

Metadata of a changed packet describes the frame that leaves (contract rule 4), as the parser
computes it:

* encap: layer 0 is the new IPv4/UDP, layer 1 the old frame's layer 0 (offsets + 50);
  ``inner_l2_off`` 50; no outer tags (the parser records tags of layer 0 only); ``vxlan`` and the
  VNI, which becomes the tenant key; ``min_len`` is the outer IPv4 end, ``max(length,
  min_len) + 50``; ``flow`` is kept when the old frame had IP, else it becomes the outer 5-tuple.
* decap: layer 1 moves to layer 0 (offsets - ``inner_l2_off``); VXLAN fields cleared; the inner
  frame's tags become the frame's tags: their count from the offsets, the VIDs (and the tenant
  key) read from the frame after realignment, like the inner IP length field that gives
  ``min_len``; ``flow`` is kept when the inner frame has IP, else zero (the parser's flow comes
  from the last IP header walked).

``flow_hash``, ``ts``, ``drop`` and ``mark`` are kept; the tail flags pass through to the last
beat.

Configuration: ``vxlan_encap`` takes ``dst_mac``, ``src_mac`` (MAC addresses), ``src_ip``,
``dst_ip`` (IPv4 addresses) and ``vni``, all required, and ``ttl`` (64) and ``df`` (1), held in
RW registers of the same names; ``vxlan_decap`` takes an optional ``vni`` (without it every VNI
is decapsulated), held in ``vni`` and ``match_vni``.
"""

from .base import (Param, Scope, TaskConfig, TaskDescription, block_type_name,
                   csr_item)
from .vlan import REQUIRED, check_settings, int_setting, ipv4_setting, mac_setting
from ..registers import R, RW, Register

__all__ = ["VxlanEncapDescription", "VxlanDecapDescription", "VxlanEncapConfig",
           "VxlanDecapConfig", "ENCAP_BYTES", "SPORT_BASE", "VNI_MAX", "MAX_INNER_TAGS"]

# Outer Ethernet 14 + IPv4 20 (RFC 791, no options) + UDP 8 (RFC 768) + VXLAN 8 (RFC 7348).
ENCAP_BYTES = 50
SPORT_BASE = 0xC000  # RFC 7348 section 5 / RFC 6335: dynamic ports 49152-65535, 14 free bits
VNI_MAX = 2 ** 24 - 1
MAX_INNER_TAGS = 3


class VxlanEncapConfig(TaskConfig):
    SPEC = {
        "dst_mac": (REQUIRED, mac_setting),
        "src_mac": (REQUIRED, mac_setting),
        "src_ip": (REQUIRED, ipv4_setting),
        "dst_ip": (REQUIRED, ipv4_setting),
        "vni": (REQUIRED, int_setting(0, VNI_MAX)),
        "ttl": (64, int_setting(1, 255)),
        "df": (1, int_setting(0, 1)),
    }

    def __init__(self, dst_mac, src_mac, src_ip, dst_ip, vni, ttl=64, df=1):
        self.dst_mac, self.src_mac = dst_mac, src_mac
        self.src_ip, self.dst_ip = src_ip, dst_ip
        self.vni, self.ttl, self.df = vni, ttl, df

    @classmethod
    def from_dict(cls, kind, params, raw):
        return cls(**check_settings(kind, raw, cls.SPEC))

    def register_writes(self, params):
        return [("dst_mac", self.dst_mac), ("src_mac", self.src_mac), ("src_ip", self.src_ip),
                ("dst_ip", self.dst_ip), ("vni", self.vni), ("ttl", self.ttl), ("df", self.df)]

    @classmethod
    def random(cls, rng, params):
        def unicast_mac():  # IEEE 802: I/G bit (first octet, bit 0) clear
            return rng.getrandbits(48) & ~(1 << 40)
        return cls(dst_mac=unicast_mac(), src_mac=unicast_mac(), src_ip=rng.getrandbits(32),
                   dst_ip=rng.getrandbits(32), vni=rng.getrandbits(24), ttl=rng.randint(1, 255),
                   df=rng.randrange(2))

    def __repr__(self):
        return (f"VxlanEncapConfig(dst_mac={self.dst_mac:#014x}, src_mac={self.src_mac:#014x}, "
                f"src_ip={self.src_ip:#010x}, dst_ip={self.dst_ip:#010x}, vni={self.vni}, "
                f"ttl={self.ttl}, df={self.df})")


class VxlanDecapConfig(TaskConfig):
    SPEC = {"vni": (None, int_setting(0, VNI_MAX))}

    def __init__(self, vni=None):
        self.vni = vni  # None: every VNI

    @classmethod
    def from_dict(cls, kind, params, raw):
        return cls(**check_settings(kind, raw, cls.SPEC))

    def register_writes(self, params):
        return [("vni", self.vni or 0), ("match_vni", int(self.vni is not None))]

    @classmethod
    def random(cls, rng, params):
        return cls(rng.getrandbits(24) if rng.random() < 0.5 else None)

    def __repr__(self):
        return f"VxlanDecapConfig(vni={self.vni})"


class VxlanEncapDescription(TaskDescription):
    kind = "vxlan_encap"
    doc = "Encapsulate packets in outer Ethernet/IPv4/UDP/VXLAN (RFC 7348)"
    scope = Scope.PACKET  # the outer lengths need the whole frame
    modifies = True
    drops = False
    type_id = block_type_name("VXEN")
    params = (
        # At most 32 KiB: the outer IPv4 total length (16 bits) must hold the frame + 36.
        Param("buffer_bytes", 16384, low=2048, high=32768, power_of_two=True,
              doc="Store-and-forward FIFO; longer packets pass unchanged (skipped)"),
    )
    config = VxlanEncapConfig
    model = "vxlan:VxlanEncapModel"

    @classmethod
    def shared_state(cls, params):
        # The standard counters; the RFC 791 identification counter.
        return {**super().shared_state(params), "ident": "ident"}

    @classmethod
    def task_registers(cls, params):
        return [
            Register("dst_mac", 48, RW, doc="Outer destination MAC (the remote VTEP or gateway)"),
            Register("src_mac", 48, RW, doc="Outer source MAC"),
            Register("src_ip", 32, RW, doc="Outer IPv4 source (this VTEP)"),
            Register("dst_ip", 32, RW, doc="Outer IPv4 destination (the remote VTEP)"),
            Register("vni", 24, RW, doc="VXLAN network identifier"),
            Register("ttl", 8, RW, reset=64, doc="Outer IPv4 TTL"),
            Register("df", 1, RW, reset=1, doc="Outer IPv4 don't-fragment flag"),
        ]


class VxlanDecapDescription(TaskDescription):
    kind = "vxlan_decap"
    doc = "Strip the outer headers of VXLAN packets (RFC 7348)"
    scope = Scope.PACKET  # short inner frames are padded at their end
    modifies = True
    drops = False
    type_id = block_type_name("VXDE")
    config = VxlanDecapConfig
    model = "vxlan:VxlanDecapModel"

    @classmethod
    def shared_state(cls, params):
        return {**super().shared_state(params), "vni_mismatch": csr_item("vni_mismatch")}

    @classmethod
    def task_registers(cls, params):
        return [
            Register("match_vni", 1, RW, doc="1: decapsulate only packets of VNI vni"),
            Register("vni", 24, RW, doc="The VNI to decapsulate when match_vni is 1"),
            Register("vni_mismatch", 64, R, doc="VXLAN packets skipped for another VNI"),
        ]
