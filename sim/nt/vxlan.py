"""Models of ``vxlan_encap`` and ``vxlan_decap`` (sw/desc/nt/vxlan.py states the behaviour)."""

import struct

from ...desc.headers import VXLAN_PORT
from ...desc.meta import L3Kind, L4Kind, TenantKind
from ...desc.nt.vxlan import (ENCAP_BYTES, MAX_INNER_TAGS, SPORT_BASE, VxlanDecapConfig,
                              VxlanEncapConfig)
from ..parser_model import ParserModel
from ..traffic import ETH_EXPERIMENTAL, PacketSpec, build, checksum16
from .base import TaskModel, exact_size_frames
from .checksum import internet_checksum
from .vlan import light_mix, pad_frame, vid_of

__all__ = ["VxlanEncapModel", "VxlanDecapModel", "encapsulate", "add_inner_tags"]


def encapsulate(frame, config, ident, flow_hash):
    """``frame`` behind outer Ethernet, IPv4, UDP and VXLAN headers (RFC 7348 section 5)."""
    length = len(frame)
    ip = bytearray(struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, length + ENCAP_BYTES - 14, ident, config.df << 14, config.ttl,
        17, 0, config.src_ip.to_bytes(4, "big"), config.dst_ip.to_bytes(4, "big")))
    ip[10:12] = internet_checksum(bytes(ip)).to_bytes(2, "big")  # RFC 791 / RFC 1071
    sport = SPORT_BASE | (flow_hash & 0x3FFF)
    udp = struct.pack("!HHHH", sport, VXLAN_PORT, length + ENCAP_BYTES - 34, 0)
    vxlan = struct.pack("!II", 0x08 << 24, config.vni << 8)  # I flag; VNI then 8 reserved bits
    return (config.dst_mac.to_bytes(6, "big") + config.src_mac.to_bytes(6, "big") + b"\x08\x00"
            + bytes(ip) + udp + vxlan + frame)


def add_inner_tags(frame, meta, tags, rng):
    """A valid VXLAN ``frame`` with ``tags`` IEEE 802.1Q C-tags added to its inner frame: outer
    IPv4 total length and checksum (or IPv6 payload length) and UDP length grow with it. The
    outer UDP checksum must be 0 (the generator's default for VXLAN)."""
    inner, l3, l4 = meta["inner_l2_off"], meta["l3_off"][0], meta["l4_off"][0]
    added = b"".join(struct.pack("!HH", 0x8100, rng.randint(1, 4094)) for _ in range(tags))
    out = bytearray(frame[:inner + 12] + added + frame[inner + 12:])
    grow = 4 * tags
    if meta["l3_kind"][0] == L3Kind.IPV4:
        out[l3 + 2:l3 + 4] = (int.from_bytes(out[l3 + 2:l3 + 4], "big") + grow).to_bytes(2, "big")
        ihl = 4 * (out[l3] & 0x0F)
        out[l3 + 10:l3 + 12] = b"\0\0"
        out[l3 + 10:l3 + 12] = checksum16(bytes(out[l3:l3 + ihl])).to_bytes(2, "big")
    else:
        out[l3 + 4:l3 + 6] = (int.from_bytes(out[l3 + 4:l3 + 6], "big") + grow).to_bytes(2, "big")
    out[l4 + 4:l4 + 6] = (int.from_bytes(out[l4 + 4:l4 + 6], "big") + grow).to_bytes(2, "big")
    assert out[l4 + 6:l4 + 8] == b"\0\0", "outer UDP checksum must be off"
    return bytes(out)


class VxlanEncapModel(TaskModel):
    config_class = VxlanEncapConfig

    def __init__(self, params, data_width=512, header_bytes=256):
        super().__init__(params, data_width, header_bytes)
        self.ident = 0  # the NT's RFC 791 identification counter

    # hw/nt/vxlan.py's `ident` register advances as a packet's first beat is decided, so at a
    # packet-boundary stop it is the identification the next encapsulated packet gets.
    def load_hw_tables(self, values):
        self.ident = values[self.hw("ident")]

    def store_hw_tables(self, values):
        values[self.hw("ident")] = self.ident

    def apply(self, frame, meta):
        if (meta["vxlan"] or meta["flags"]["keep_error"]
                or len(frame) > self.params["buffer_bytes"]
                or meta["payload_off"] + ENCAP_BYTES > self.header_bytes):
            return None
        c = self.config
        out = encapsulate(frame, c, self.ident, meta["flow_hash"])
        self.ident = (self.ident + 1) & 0xFFFF
        sport = int.from_bytes(out[34:36], "big")
        old_l3 = meta["l3_kind"][0]
        meta["l3_kind"] = [int(L3Kind.IPV4), old_l3]
        meta["l4_kind"] = [int(L4Kind.UDP), meta["l4_kind"][0]]
        meta["l3_off"] = [14, meta["l3_off"][0] + ENCAP_BYTES if meta["l3_off"][0] else 0]
        meta["l4_off"] = [34, meta["l4_off"][0] + ENCAP_BYTES if meta["l4_off"][0] else 0]
        meta["inner_l2_off"] = ENCAP_BYTES
        meta["payload_off"] += ENCAP_BYTES
        meta["vlan_count"] = meta["vid"] = meta["vid2"] = 0  # tags of layer 0 only
        meta["vxlan"], meta["vni"] = 1, c.vni
        meta["tenant_kind"], meta["tenant_key"] = int(TenantKind.VNI), c.vni
        meta["min_len"] = max(len(frame), meta["min_len"]) + ENCAP_BYTES
        if not old_l3:  # the outer IPv4/UDP headers are then the last ones walked
            meta["flow"] = {"src_ip": c.src_ip, "dst_ip": c.dst_ip, "sport": sport,
                            "dport": VXLAN_PORT, "proto": 17, "ipv6": 0}
        return out, meta

    def test_case(self, rng, n, malformed):
        return self.config_class.random(rng, self.params), light_mix(rng, n, malformed)

    def saturation_case(self, rng, n, size):
        return self.config_class.random(rng, self.params), exact_size_frames(rng, n, size)


class VxlanDecapModel(TaskModel):
    # No state beyond the counters.

    config_class = VxlanDecapConfig

    def __init__(self, params, data_width=512, header_bytes=256):
        super().__init__(params, data_width, header_bytes)
        self.stats["vni_mismatch"] = 0

    def apply(self, frame, meta):
        inner = meta["inner_l2_off"]
        if not meta["vxlan"] or not inner:
            return None
        if self.config.vni is not None and meta["vni"] != self.config.vni:
            self.stats["vni_mismatch"] += 1
            return None
        l3k, l4k = meta["l3_kind"][1], meta["l4_kind"][1]
        tags_end = meta["l3_off"][1] if l3k else meta["payload_off"]
        tags = (tags_end - inner - 14) >> 2
        if l3k and tags > MAX_INNER_TAGS:
            return None
        out = pad_frame(frame[inner:])
        l3o = meta["l3_off"][1] - inner if l3k else 0
        meta["l3_kind"], meta["l4_kind"] = [l3k, 0], [l4k, 0]
        meta["l3_off"] = [l3o, 0]
        meta["l4_off"] = [meta["l4_off"][1] - inner if l4k else 0, 0]
        meta["inner_l2_off"] = 0
        meta["payload_off"] -= inner
        meta["vxlan"] = meta["vni"] = 0
        count = min(tags, 3)
        meta["vlan_count"] = count
        meta["vid"] = vid_of(out, 14) if count >= 1 else 0
        meta["vid2"] = vid_of(out, 18) if count >= 2 else 0
        meta["tenant_kind"] = int(TenantKind.VLAN if count else TenantKind.NONE)
        meta["tenant_key"] = meta["vid"]
        if l3k == L3Kind.IPV4:  # RFC 791: total length at IP + 2
            meta["min_len"] = l3o + int.from_bytes(out[l3o + 2:l3o + 4], "big")
        elif l3k == L3Kind.IPV6:  # RFC 8200: payload length at IP + 4, after 40 bytes
            meta["min_len"] = l3o + 40 + int.from_bytes(out[l3o + 4:l3o + 6], "big")
        else:
            meta["min_len"] = 0
            meta["flow"] = {k: 0 for k in meta["flow"]}
        return out, meta

    def test_case(self, rng, n, malformed):
        """Mostly VXLAN (4 flows, so VNIs repeat), a third of the valid ones with 1-3 more inner
        tags. At 64 bits only one VNI is decapsulated (the others are counted), at other widths
        every VNI, so each width's hardware run covers one of the two modes."""
        frames = light_mix(rng, n, malformed, flows=4,
                           kinds=("vxlan", "vxlan", "vxlan", "ipv4_udp", "ipv6_tcp", "eth"))
        parser = ParserModel(self.header_bytes)
        vnis = []
        for k, frame in enumerate(frames):
            meta = parser.parse(frame)
            if meta["vxlan"] and meta["inner_l2_off"] and not meta["flags"]["malformed"]:
                vnis.append(meta["vni"])
                if rng.random() < 0.35 and meta["l3_kind"][0] and not meta["flags"]["truncated"]:
                    frames[k] = add_inner_tags(frame, meta, rng.randint(1, 3), rng)
        only = rng.choice(vnis) if vnis and self.data_width == 64 else None
        return VxlanDecapConfig(only), frames

    def saturation_case(self, rng, n, size):
        if size >= 92:  # outer IPv4 50 + inner Ethernet 14, IPv4 20, UDP 8
            return VxlanDecapConfig(), exact_size_frames(rng, n, size, kinds=("vxlan",))
        # Smaller VXLAN frames carry an inner frame with no IP (just its Ethernet header).
        return VxlanDecapConfig(), [build(PacketSpec(
            size=size, l3="ipv4", l4="udp", vxlan_vni=rng.getrandbits(24),
            inner=PacketSpec(size=size - ENCAP_BYTES, ethertype=ETH_EXPERIMENTAL)), rng)
            for _ in range(n)]
