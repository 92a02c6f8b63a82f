"""Tests for supernic.sim.parser_model: the reference header parser checked against scapy.

The expected metadata is derived independently from scapy's dissection (offsets from scapy's
layers, fields from scapy's fields), never from the header declarations the model is built
from; the flow hash is checked against a bit-by-bit Toeplitz written here and pinned with the
RSS specification's verification vectors. Malformed packets are checked flag by flag against
what the walk rules of ``sw/desc/headers.py`` must raise, and every packet against the
metadata contract (offsets increase, tenant key and flow consistent).
"""

import collections
import ipaddress
import random
import socket

import pytest
import scapy.layers.inet  # noqa: F401  (registers the IP/UDP/TCP bindings)
import scapy.layers.inet6  # noqa: F401
import scapy.layers.vxlan  # noqa: F401
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import (IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment, IPv6ExtHdrHopByHop,
                                IPv6ExtHdrRouting)
from scapy.layers.ipsec import AH, ESP
from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Raw

from scapy_dissect import EXTENSION_HEADERS, dissect
from supernic.desc import headers as H
from supernic.desc.meta import (
    ERROR_FLAGS, FLAGS, RUNT_BYTES, TOEPLITZ_KEY, L3Kind, L4Kind, TenantKind)
from supernic.sim import traffic as T
from supernic.sim.parser_model import ParserModel, is_error

VXLAN_PORT = 4789  # RFC 7348 section 5 (IANA)
MODEL = ParserModel()


def eth():
    """An Ethernet header with fixed MACs (a bare Ether() makes scapy resolve addresses)."""
    return Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02")

# --- independent references -----------------------------------------------------------------


def toeplitz_ref(key: bytes, data: bytes) -> int:
    """Toeplitz hash as the RSS specification states it: for every set input bit i (most
    significant bit of the first byte first), XOR in the 32 key bits starting at key bit i."""
    k = int.from_bytes(key, "big")
    kbits = len(key) * 8
    assert kbits >= len(data) * 8 + 32
    result = 0
    for i in range(len(data) * 8):
        if (data[i // 8] >> (7 - i % 8)) & 1:
            result ^= (k >> (kbits - 32 - i)) & 0xFFFFFFFF
    return result


def rss_input(flow: dict) -> bytes:
    """RSS hash input of a scapy-derived flow: addresses, then ports only if there is L4."""
    if flow["ipv6"]:
        data = flow["src_ip"].to_bytes(16, "big") + flow["dst_ip"].to_bytes(16, "big")
    else:
        data = flow["src_ip"].to_bytes(4, "big") + flow["dst_ip"].to_bytes(4, "big")
    if flow["has_l4"]:
        data += flow["sport"].to_bytes(2, "big") + flow["dport"].to_bytes(2, "big")
    return data


def _off(frame: bytes, layer) -> int:
    """Offset of a dissected layer: what is left of the frame from it on."""
    raw = bytes(layer)
    assert frame.endswith(raw), "scapy does not rebuild this layer byte for byte"
    return len(frame) - len(raw)


def scapy_expect(frame: bytes) -> dict:
    """Expected metadata of a valid frame, derived from scapy's dissection only.

    Walk: Ether, 802.1Q/802.1ad tags, IPv4/IPv6, extension headers, TCP/UDP; VXLAN (RFC 7348:
    UDP destination port 4789 only, although scapy also decodes source port 4789) starts the
    inner layer. An IPv4 fragment (MF set or offset != 0) ends the walk after the IPv4
    header, an IPv6 one after its Fragment header. Extension headers (RFC 8200 section 4:
    Hop-by-Hop only right after IPv6; the Authentication Header, RFC 4302, after either IP)
    each name the flow's protocol; ESP and anything else end the walk.
    Extra key ``flow.has_l4`` says whether the innermost flow has ports (for the RSS input).
    """
    pkt = dissect(frame)
    exp = {
        "flags": {f: 0 for f in FLAGS},
        "l3_kind": [0, 0], "l4_kind": [0, 0], "l3_off": [0, 0], "l4_off": [0, 0],
        "inner_l2_off": 0, "payload_off": 0, "vlan_count": 0, "vid": 0, "vid2": 0,
        "vxlan": 0, "vni": 0, "tenant_kind": 0, "tenant_key": 0, "min_len": 0,
        "flow": {"src_ip": 0, "dst_ip": 0, "sport": 0, "dport": 0, "proto": 0, "ipv6": 0,
                 "has_l4": False},
    }
    flow = exp["flow"]
    l2 = pkt
    for depth in range(2):
        assert isinstance(l2, Ether)
        if depth == 1:
            exp["inner_l2_off"] = _off(frame, l2)
        cur = l2.payload
        vids = []
        while isinstance(cur, Dot1Q):  # Dot1AD (S-tag) is a Dot1Q subclass
            vids.append(cur.vlan)
            cur = cur.payload
        exp["payload_off"] = _off(frame, cur)  # end of the last ethertype
        if depth == 0 and vids:
            exp["vlan_count"] = min(len(vids), 3)
            exp["vid"] = vids[0]
            exp["vid2"] = vids[1] if len(vids) > 1 else 0
        if type(cur) is IP:
            l3off = _off(frame, cur)
            exp["l3_kind"][depth], exp["l3_off"][depth] = int(L3Kind.IPV4), l3off
            flow.update(src_ip=int(ipaddress.IPv4Address(cur.src)),
                        dst_ip=int(ipaddress.IPv4Address(cur.dst)),
                        proto=cur.proto, ipv6=0, sport=0, dport=0, has_l4=False)
            exp["min_len"] = max(exp["min_len"], l3off + cur.len)
            # the IPv4 header (with options) ends where scapy's payload starts
            exp["payload_off"] = _off(frame, cur.payload)
            assert exp["payload_off"] == l3off + 4 * cur.ihl
            if cur.flags.MF or cur.frag != 0:
                exp["flags"]["fragment"] = 1
                break
        elif type(cur) is IPv6:
            l3off = _off(frame, cur)
            exp["l3_kind"][depth], exp["l3_off"][depth] = int(L3Kind.IPV6), l3off
            flow.update(src_ip=int(ipaddress.IPv6Address(cur.src)),
                        dst_ip=int(ipaddress.IPv6Address(cur.dst)),
                        proto=cur.nh, ipv6=1, sport=0, dport=0, has_l4=False)
            exp["min_len"] = max(exp["min_len"], l3off + 40 + cur.plen)
            exp["payload_off"] = _off(frame, cur.payload)
            assert exp["payload_off"] == l3off + 40
        else:
            break
        l4, exts = cur.payload, 0
        while isinstance(l4, EXTENSION_HEADERS if type(cur) is IPv6 else AH):
            if isinstance(l4, IPv6ExtHdrHopByHop) and exts:
                break   # Hop-by-Hop anywhere but first: the walk ends
            exts += 1
            assert exts <= MODEL.ext_headers, "the generator stays within the limit"
            flow["proto"] = l4.nh
            exp["payload_off"] = _off(frame, l4.payload)
            if isinstance(l4, IPv6ExtHdrFragment) and (l4.m or l4.offset):
                exp["flags"]["fragment"] = 1
                break
            l4 = l4.payload
        if exp["flags"]["fragment"]:
            break
        if type(l4) is TCP:
            assert flow["proto"] == 6
            exp["l4_kind"][depth], exp["l4_off"][depth] = int(L4Kind.TCP), _off(frame, l4)
        elif type(l4) is UDP:
            assert flow["proto"] == 17
            exp["l4_kind"][depth], exp["l4_off"][depth] = int(L4Kind.UDP), _off(frame, l4)
        else:
            break
        flow.update(sport=l4.sport, dport=l4.dport, has_l4=True)
        exp["payload_off"] = _off(frame, l4.payload)
        if type(l4) is UDP and l4.dport == VXLAN_PORT and depth == 0:
            vx = l4.payload
            assert isinstance(vx, VXLAN), "scapy did not decode UDP port 4789 as VXLAN"
            exp["vxlan"], exp["vni"] = 1, vx.vni
            l2 = vx.payload
            exp["payload_off"] = _off(frame, l2)
            continue
        break
    if exp["vxlan"]:
        exp["tenant_kind"], exp["tenant_key"] = int(TenantKind.VNI), exp["vni"]
    elif exp["vlan_count"]:
        exp["tenant_kind"], exp["tenant_key"] = int(TenantKind.VLAN), exp["vid"]
    return exp


def diff(exp: dict, got: dict, prefix="") -> list[str]:
    out = []
    for k, v in exp.items():
        if k == "has_l4":
            continue
        if isinstance(v, dict):
            out += diff(v, got[k], f"{prefix}{k}.")
        elif got[k] != v:
            out.append(f"{prefix}{k}: model {got[k]!r}, scapy {v!r}")
    return out


# --- the metadata contract (holds for any input) ----------------------------------------------


def check_contract(meta: dict, frame: bytes, model: ParserModel = MODEL) -> None:
    ctx = frame.hex()
    chain = []
    for name, present, off in (
            ("l3_off[0]", meta["l3_kind"][0], meta["l3_off"][0]),
            ("l4_off[0]", meta["l4_kind"][0], meta["l4_off"][0]),
            ("inner_l2_off", meta["inner_l2_off"], meta["inner_l2_off"]),
            ("l3_off[1]", meta["l3_kind"][1], meta["l3_off"][1]),
            ("l4_off[1]", meta["l4_kind"][1], meta["l4_off"][1])):
        if present:
            chain.append((name, off))
        else:
            assert off == 0, (name, ctx)
    offs = [o for _, o in chain]
    assert all(a < b for a, b in zip(offs, offs[1:])), (chain, ctx)
    assert all(o <= meta["payload_off"] for o in offs), (chain, meta["payload_off"], ctx)
    assert meta["payload_off"] <= min(len(frame), model.header_bytes), ctx
    # an L4 header needs the L3 header of its layer; the inner layer needs VXLAN
    for i in range(2):
        assert not meta["l4_kind"][i] or meta["l3_kind"][i], ctx
        assert meta["l3_kind"][i] in (0, 1, 2) and meta["l4_kind"][i] in (0, 1, 2), ctx
    if meta["inner_l2_off"] or meta["l3_kind"][1]:
        assert meta["vxlan"] and meta["l4_kind"][0] == L4Kind.UDP and meta["inner_l2_off"], ctx
    if not meta["vxlan"]:
        assert meta["vni"] == 0, ctx
    # tenant key
    if meta["vxlan"]:
        assert (meta["tenant_kind"], meta["tenant_key"]) == (TenantKind.VNI, meta["vni"]), ctx
    elif meta["vlan_count"]:
        assert (meta["tenant_kind"], meta["tenant_key"]) == (TenantKind.VLAN, meta["vid"]), ctx
    else:
        assert (meta["tenant_kind"], meta["tenant_key"]) == (TenantKind.NONE, 0), ctx
    if meta["vlan_count"] < 2:
        assert meta["vid2"] == 0, ctx
    if meta["vlan_count"] == 0:
        assert meta["vid"] == 0, ctx
    # the flow is the innermost one
    inner = 1 if meta["l3_kind"][1] else 0
    flow = meta["flow"]
    if meta["l3_kind"][inner] == 0:
        assert flow == {"src_ip": 0, "dst_ip": 0, "sport": 0, "dport": 0, "proto": 0,
                        "ipv6": 0}, ctx
    else:
        assert flow["ipv6"] == (meta["l3_kind"][inner] == L3Kind.IPV6), ctx
        if not flow["ipv6"]:
            assert flow["src_ip"] >> 32 == 0 and flow["dst_ip"] >> 32 == 0, ctx
    if meta["l4_kind"][inner] == 0:
        assert flow["sport"] == 0 and flow["dport"] == 0, ctx
    # flags
    assert set(meta["flags"]) == set(FLAGS)
    assert meta["flags"]["runt"] == int(len(frame) < RUNT_BYTES
                                        and len(frame) <= model.header_bytes), ctx
    assert meta["flags"]["length_error"] == int(len(frame) < meta["min_len"]), ctx
    if meta["flags"]["truncated"]:
        assert len(frame) <= model.header_bytes, ctx
    assert is_error(meta) == any(meta["flags"][f] for f in ERROR_FLAGS)


# --- fixtures ---------------------------------------------------------------------------------

# Sizes: the generator's mixed distribution (jumbo included), small, exact 1500, jumbo.
_VALID_SETS = ((700, 101, "mixed"), (300, 102, (60, 128)), (300, 103, 1500),
               (200, 104, (8000, T.SIZE_MAX)))


@pytest.fixture(scope="module")
def valid():
    """[(spec, frame, scapy-expected, model meta)] for ~1500 valid packets of every kind."""
    out = []
    for n, seed, size in _VALID_SETS:
        for spec, frame in T.random_packets(n, seed=seed, size_dist=size, malformed_fraction=0.0,
                                            vxlan_checksum=None):
            out.append((spec, frame, scapy_expect(frame), MODEL.parse(frame)))
    return out


@pytest.fixture(scope="module")
def malformed():
    pkts = T.random_packets(450, seed=201, size_dist="mixed", malformed_fraction=1.0)
    return [(spec, frame, MODEL.parse(frame)) for spec, frame in pkts]


# --- 0. the oracle's assumptions ------------------------------------------------------------


def test_scapy_vxlan_binding():
    """scapy decodes VXLAN on UDP destination port 4789 (and also on source port 4789, which
    RFC 7348 does not: the oracle therefore checks the destination port itself)."""
    assert H.VXLAN_PORT == T.VXLAN_PORT == VXLAN_PORT
    inner = eth() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2)
    for udp in (UDP(sport=1234, dport=4789), UDP(sport=4789, dport=1234)):
        pkt = Ether(bytes(eth() / IP() / udp / VXLAN(vni=77) / inner))
        assert isinstance(pkt[UDP].payload, VXLAN) and pkt[VXLAN].vni == 77
    # The model follows the RFC: source port 4789 alone is plain UDP.
    frame = bytes(eth() / IP() / UDP(sport=4789, dport=1234) / VXLAN(vni=77) / inner)
    meta = MODEL.parse(frame)
    assert meta["vxlan"] == 0 and meta["l3_kind"][1] == 0
    assert meta["payload_off"] == 14 + 20 + 8
    frame = bytes(eth() / IP() / UDP(sport=1234, dport=4789) / VXLAN(vni=77) / inner)
    meta = MODEL.parse(frame)
    assert meta["vxlan"] == 1 and meta["vni"] == 77 and meta["inner_l2_off"] == 14 + 20 + 16


def test_toeplitz_ref_rss_vectors():
    """The test's own Toeplitz against the RSS specification's verification table."""
    a4 = socket.inet_aton("66.9.149.187") + socket.inet_aton("161.142.100.80")
    assert toeplitz_ref(TOEPLITZ_KEY, a4) == 0x323E8FC2
    assert toeplitz_ref(TOEPLITZ_KEY, a4 + (2794).to_bytes(2, "big")
                        + (1766).to_bytes(2, "big")) == 0x51CCC178
    a6 = (socket.inet_pton(socket.AF_INET6, "3ffe:2501:200:1fff::7")
          + socket.inet_pton(socket.AF_INET6, "3ffe:2501:200:3::1"))
    assert toeplitz_ref(TOEPLITZ_KEY, a6) == 0x2CC18CD5
    assert toeplitz_ref(TOEPLITZ_KEY, a6 + (2794).to_bytes(2, "big")
                        + (1766).to_bytes(2, "big")) == 0x40207D3D


# --- 1. valid packets against scapy ---------------------------------------------------------


def test_valid_packets_cover_every_kind(valid):
    kinds = collections.Counter(spec.kind for spec, *_ in valid)
    assert set(kinds) == set(T.KINDS), kinds
    assert min(kinds.values()) >= 50, kinds
    assert {len(spec.vlans) for spec, *_ in valid} == {0, 1, 2}
    assert max(len(frame) for _, frame, *_ in valid) > 8000
    frags = {(spec.more_fragments, spec.frag_offset == 0) for spec, *_ in valid if spec.fragment}
    assert frags == {(True, True), (True, False), (False, False)}


def test_valid_packets_match_scapy(valid):
    bad = []
    for spec, frame, exp, meta in valid:
        d = diff(exp, meta)
        if d:
            bad.append(f"{spec.kind} {frame.hex()}\n    " + "\n    ".join(d))
    assert not bad, f"{len(bad)} of {len(valid)} packets differ:\n" + "\n".join(bad[:10])


def _edge_packets():
    """Hand-built packets the generator does not make, for the same scapy comparison."""
    a4 = dict(src="10.1.2.3", dst="10.4.5.6")
    a6 = dict(src="2001:db8::1", dst="2001:db8::2")
    pad = Raw(bytes(30))

    def vx(inner, vni=99, outer_tags=()):
        pkt = eth()
        for tpid, vid in outer_tags:
            pkt = pkt / (Dot1AD(vlan=vid) if tpid == 0x88A8 else Dot1Q(vlan=vid))
        return (pkt / IP(src="192.0.2.1", dst="192.0.2.2")
                / UDP(sport=33333, dport=VXLAN_PORT) / VXLAN(vni=vni) / inner)

    return [
        eth() / Dot1AD(vlan=10) / Dot1Q(vlan=20) / Dot1Q(vlan=30) / IP(**a4) / UDP() / pad,
        eth() / Dot1Q(vlan=0) / IP(**a4) / TCP(sport=1, dport=2) / pad,  # priority tag
        eth() / Dot1Q(vlan=4095) / IPv6(**a6) / UDP(sport=3, dport=4) / pad,
        vx(eth() / IP(**a4) / ICMP() / pad),                   # inner: no ports
        vx(eth() / IPv6(**a6, nh=59) / pad),
        vx(eth() / IP(**a4, flags="MF") / UDP(sport=7, dport=8) / pad),  # inner fragment
        vx(eth() / IP(**a4, frag=5, proto=6) / pad),
        vx(eth() / Dot1AD(vlan=3) / Dot1Q(vlan=4) / IP(**a4) / TCP(sport=5, dport=6) / pad),
        vx(eth() / IPv6(**a6) / TCP(sport=5, dport=6) / pad, vni=0),
        vx(eth() / IP(**a4) / UDP(sport=9, dport=10) / pad, outer_tags=((0x88A8, 11),)),
        vx(eth() / Raw(bytes(50))),                             # inner non-IP ethertype
        eth() / IP(**a4, ihl=6, options=[]) / Raw(b"\x01\x01\x01\x01") / pad,  # NOP options
        eth() / IPv6(**a6, nh=6) / TCP(sport=80, dport=81, dataofs=15, options=[])
        / Raw(bytes(40)) / pad,
    ]


def test_edge_packets_match_scapy():
    for pkt in _edge_packets():
        frame = bytes(pkt)
        exp, meta = scapy_expect(frame), MODEL.parse(frame)
        d = diff(exp, meta)
        assert not d, (frame.hex(), d)
        check_contract(meta, frame)
        assert meta["flow_hash"] == toeplitz_ref(TOEPLITZ_KEY, rss_input(exp["flow"]))


def _extension_packets():
    """IPv6 extension headers and AH (RFC 8200 section 4, RFC 4302), built with scapy."""
    a4 = dict(src="10.1.2.3", dst="10.4.5.6")
    a6 = dict(src="2001:db8::1", dst="2001:db8::2")
    pad = Raw(bytes(30))

    def ah(nh, icv=4):      # RFC 4302 section 2.2: payload length in 4-byte units less 2
        return AH(nh=nh, payloadlen=(12 + icv) // 4 - 2, spi=0x100, icv=bytes(icv))

    vx = (eth() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=33333, dport=VXLAN_PORT)
          / VXLAN(vni=5))
    return [
        eth() / IPv6(**a6) / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt() / IPv6ExtHdrRouting()
        / TCP(sport=1, dport=2) / pad,
        eth() / IPv6(**a6) / IPv6ExtHdrRouting(addresses=["2001:db8::9"], segleft=0)
        / UDP(sport=3, dport=4) / pad,
        eth() / IPv6(**a6) / IPv6ExtHdrHopByHop() / IPv6ExtHdrFragment(id=7)   # atomic
        / UDP(sport=5, dport=6) / pad,
        eth() / IPv6(**a6) / IPv6ExtHdrFragment(m=1) / UDP(sport=7, dport=8) / pad,  # first
        eth() / IPv6(**a6) / IPv6ExtHdrDestOpt() / IPv6ExtHdrFragment(offset=9, nh=6) / pad,
        eth() / IPv6(**a6) / IPv6ExtHdrFragment(offset=3, m=1, nh=17) / pad,         # middle
        eth() / IPv6(**a6, nh=51) / ah(6, 12) / TCP(sport=9, dport=10) / pad,
        eth() / IPv6(**a6) / IPv6ExtHdrDestOpt(nh=51) / ah(17) / UDP(sport=11, dport=12) / pad,
        eth() / IP(**a4, proto=51) / ah(17) / UDP(sport=13, dport=14) / pad,
        eth() / IP(**a4, proto=51) / ah(50) / ESP(spi=9) / pad,
        eth() / IPv6(**a6) / ESP(spi=3) / pad,                    # ESP ends the walk
        eth() / IPv6(**a6, nh=59) / pad,                          # no next header
        eth() / Dot1Q(vlan=3) / IPv6(**a6) / IPv6ExtHdrHopByHop() / TCP(sport=15, dport=16) / pad,
        vx / eth() / IPv6(**a6) / IPv6ExtHdrHopByHop() / IPv6ExtHdrDestOpt()
        / UDP(sport=17, dport=18) / pad,                          # the same inside VXLAN
        vx / eth() / IPv6(**a6) / IPv6ExtHdrFragment(m=1) / TCP(sport=19, dport=20) / pad,
        eth() / IPv6(**a6) / IPv6ExtHdrDestOpt(nh=0) / IPv6ExtHdrHopByHop()  # HBH not first
        / TCP(sport=21, dport=22) / pad,
    ]


def test_extension_headers_match_scapy():
    """Every extension header is walked (the flow gets the upper layer's protocol and ports),
    a fragment (M or an offset) stops before L4 like an IPv4 one, an atomic fragment does
    not, ESP and a Hop-by-Hop header anywhere but first end the walk; inside VXLAN too."""
    seen = collections.Counter()
    for pkt in _extension_packets():
        frame = bytes(pkt)
        exp, meta = scapy_expect(frame), MODEL.parse(frame)
        d = diff(exp, meta)
        assert not d, (pkt.summary(), d)
        assert not is_error(meta) and not meta["flags"]["too_deep"], (pkt.summary(), meta)
        check_contract(meta, frame)
        assert meta["flow_hash"] == toeplitz_ref(TOEPLITZ_KEY, rss_input(exp["flow"]))
        seen[(bool(meta["flags"]["fragment"]), exp["flow"]["has_l4"])] += 1
    assert seen[(False, True)] >= 8 and seen[(True, False)] >= 4 and seen[(False, False)] >= 3
    # a few by hand, so the oracle is not all there is
    meta = MODEL.parse(bytes(_extension_packets()[0]))
    assert (meta["l4_kind"][0], meta["l4_off"][0], meta["flow"]["proto"]) == (L4Kind.TCP,
                                                                           14 + 40 + 24, 6)
    meta = MODEL.parse(bytes(_extension_packets()[-1]))
    assert meta["l4_kind"][0] == 0 and meta["flow"]["proto"] == 0
    assert meta["payload_off"] == 14 + 40 + 8


@pytest.mark.parametrize("limit", [0, 1, 4, 5])
def test_extension_header_limit_is_too_deep(limit):
    """Five Destination Options headers before TCP: walked with a limit of five; with less,
    the first header past the limit is too deep (not an error) and the walk stops there."""
    a6 = dict(src="2001:db8::1", dst="2001:db8::2")
    pkt = eth() / IPv6(**a6)
    for _ in range(5):
        pkt = pkt / IPv6ExtHdrDestOpt()
    frame = bytes(pkt / TCP(sport=1, dport=2) / Raw(bytes(20)))
    model = ParserModel(ext_headers=limit)
    meta = model.parse(frame)
    check_contract(meta, frame, model)
    assert not is_error(meta)
    if limit >= 5:
        assert not meta["flags"]["too_deep"] and meta["l4_kind"][0] == L4Kind.TCP
    else:
        assert meta["flags"]["too_deep"] and meta["l4_kind"][0] == 0
        assert meta["payload_off"] == 14 + 40 + 8 * limit
        assert meta["flow"]["proto"] == 60     # the header not walked


def _lie(frame, at, value):
    out = bytearray(frame)
    out[at:at + 2] = value.to_bytes(2, "big")
    return bytes(out)


def test_length_lies_are_malformed():
    """RFC 768's UDP length and RFC 9293's data offset must fit the IP datagram (its total
    or payload length), and so must every extension header: a lie is ``malformed``, outer
    or inner. A shorter UDP length and Ethernet padding after the datagram are not lies."""
    a4 = dict(src="10.1.2.3", dst="10.4.5.6")
    a6 = dict(src="2001:db8::1", dst="2001:db8::2")
    udp4 = bytes(eth() / IP(**a4) / UDP(sport=1, dport=2) / Raw(bytes(4)))
    udp6 = bytes(eth() / IPv6(**a6) / UDP(sport=1, dport=2) / Raw(bytes(4)))
    tcp4 = bytes(eth() / IP(**a4) / TCP(sport=1, dport=2) / Raw(bytes(4)))

    def flags(frame):
        meta = MODEL.parse(frame + bytes(max(0, 60 - len(frame))))   # padded to 60 bytes
        return {f for f in FLAGS if meta["flags"][f]}

    assert flags(udp4) == set() and flags(udp6) == set() and flags(tcp4) == set()
    assert len(udp4) < 60           # the padding above is after the datagram: still valid
    assert flags(_lie(udp4, 14 + 20 + 4, 13)) == {"malformed"}     # UDP length 12 + 1
    assert flags(_lie(udp4, 14 + 20 + 4, 12)) == set()
    assert flags(_lie(udp4, 14 + 20 + 4, 9)) == set()              # shorter: allowed
    assert flags(_lie(udp6, 14 + 40 + 4, 0xFFFF)) == {"malformed"}
    # the IP datagram ends inside the L4 header (IPv4 checksum left alone: not checked)
    assert flags(_lie(udp4, 14 + 2, 20 + 7)) == {"malformed"}
    assert flags(_lie(tcp4, 14 + 2, 20 + 19)) == {"malformed"}
    assert flags(_lie(udp6, 14 + 4, 7)) == {"malformed"}
    # TCP's data offset (in 32-bit words) past the datagram
    lied = bytearray(tcp4)
    lied[14 + 20 + 12] = (7 << 4) | (lied[14 + 20 + 12] & 0x0F)   # 28 bytes of 24
    assert flags(bytes(lied)) == {"malformed"}
    # an extension header longer than the datagram
    ext = bytearray(bytes(eth() / IPv6(**a6) / IPv6ExtHdrDestOpt() / UDP(sport=1, dport=2)))
    assert flags(bytes(ext)) == set()
    ext[14 + 40 + 1] = 2           # 24 bytes where 16 are left
    assert flags(bytes(ext)) == {"malformed"}
    # inside VXLAN: the inner UDP length against the inner IP datagram
    vx = bytes(eth() / IP(src="192.0.2.1", dst="192.0.2.2")
               / UDP(sport=33333, dport=VXLAN_PORT) / VXLAN(vni=5)) + udp4
    inner_udp = len(vx) - len(udp4) + 14 + 20
    assert flags(vx) == set()
    meta = MODEL.parse(_lie(vx, inner_udp + 4, 40))
    assert meta["flags"]["malformed"] and meta["l4_kind"] == [L4Kind.UDP, L4Kind.UDP]


def _scapy_checksum_ok(ip_bytes):
    """scapy's verdict on an IPv4 header: its checksum field equals the one scapy computes
    for the same header with the field cleared."""
    ip = IP(ip_bytes)
    fresh = ip.copy()
    fresh.chksum = None
    return ip.chksum == IP(bytes(fresh)).chksum


def test_ipv4_header_checksum_matches_scapy():
    """With ``header_checksum`` on, an IPv4 header whose checksum scapy finds wrong is
    ``malformed`` (outer or inner, with options), and one scapy finds right is not; every byte
    of the header counts, options included, and nothing after it. Off (the default), the
    checksum is never looked at. A frame padded to 60 bytes stays valid."""
    on = ParserModel(header_checksum=True)
    rng = random.Random(11)
    from scapy.layers.inet import IPOption_NOP, IPOption_RR
    a4 = dict(src="10.1.2.3", dst="10.4.5.6")
    plain = bytes(eth() / IP(**a4) / UDP(sport=1, dport=2) / Raw(bytes(4)))
    opts = bytes(eth() / IP(**a4, options=[IPOption_RR(routers=["192.0.2.9"] * 9)])
                 / TCP(sport=3, dport=4))
    nop = bytes(eth() / IP(**a4, options=[IPOption_NOP()] * 4) / UDP(sport=5, dport=6))
    vx = bytes(eth() / IP(src="192.0.2.1", dst="192.0.2.2")
               / UDP(sport=33333, dport=VXLAN_PORT) / VXLAN(vni=5)) + opts
    inner_ip = len(vx) - len(opts) + 14
    assert len(plain) < 60 and IP(opts[14:]).ihl == 15
    checked = 0
    for frame, ip_off in ((plain, 14), (opts, 14), (nop, 14), (vx, 14), (vx, inner_ip)):
        frame = frame + bytes(max(0, 60 - len(frame)))
        ihl = (frame[ip_off] & 0x0F) * 4
        assert not on.parse(frame)["flags"]["malformed"]
        # Flip every bit of the header once (the checksum itself included), and bits after it.
        for bit in range(ihl * 8 + 64):
            bad = bytearray(frame)
            bad[ip_off + bit // 8] ^= 0x80 >> (bit % 8)
            if bit >= ihl * 8:
                # After the header: not the checksum's business.
                assert on.parse(bytes(bad))["flags"] == MODEL.parse(bytes(bad))["flags"]
                continue
            if bad[ip_off] >> 4 != 4 or bad[ip_off] & 0x0F != frame[ip_off] & 0x0F:
                continue    # version or IHL: malformed (or another length) anyway
            checked += 1
            assert not _scapy_checksum_ok(bytes(bad[ip_off:]))
            meta, off = on.parse(bytes(bad)), MODEL.parse(bytes(bad))
            assert meta["flags"]["malformed"], (ip_off, bit)
            assert not off["flags"]["malformed"] or bit // 8 in (2, 3), (ip_off, bit)
        # Random headers with a fresh checksum pass; the same with a random one fail.
        for _ in range(20):
            bad = bytearray(frame)
            bad[ip_off + 4:ip_off + 6] = rng.randbytes(2)            # identification
            ip = IP(bytes(bad[ip_off:]))
            ip.chksum = None
            good = bytes(bad[:ip_off]) + bytes(ip)[:ihl] + bytes(bad[ip_off + ihl:])
            assert _scapy_checksum_ok(good[ip_off:])
            assert not on.parse(good)["flags"]["malformed"]
            lie = bytearray(good)
            lie[ip_off + 10:ip_off + 12] = rng.randbytes(2)
            assert (on.parse(bytes(lie))["flags"]["malformed"]
                    == (not _scapy_checksum_ok(bytes(lie[ip_off:]))))
    assert checked > 600
    # A header cut by the frame's end is truncated, not judged on bytes it does not have.
    cut = on.parse(opts[:14 + 40])
    assert cut["flags"]["truncated"] and cut["flags"] == MODEL.parse(opts[:14 + 40])["flags"]


def test_walk_steps_exhausted_is_too_deep():
    """Three outer tags plus two inner tags need 12 walk steps; the model has 11."""
    inner = eth() / Dot1Q(vlan=1) / Dot1Q(vlan=2) / IP() / TCP() / Raw(bytes(20))
    pkt = (eth() / Dot1AD(vlan=5) / Dot1Q(vlan=6) / Dot1Q(vlan=7) / IP()
           / UDP(sport=1, dport=VXLAN_PORT) / VXLAN(vni=3) / inner)
    frame = bytes(pkt)
    meta = MODEL.parse(frame)
    assert meta["flags"]["too_deep"] and not is_error(meta), meta["flags"]
    assert meta["l3_kind"][1] == L3Kind.IPV4 and meta["l4_kind"][1] == 0
    assert meta["flow"]["sport"] == meta["flow"]["dport"] == 0  # inner IP, no inner ports
    assert meta["vlan_count"] == 3 and (meta["vid"], meta["vid2"]) == (5, 6)
    check_contract(meta, frame)


def test_valid_packets_offsets_match_generator_layout(valid):
    """Cross-check of the oracle: scapy's offsets are where the generator put the headers."""
    for spec, frame, exp, _ in valid:
        where = dict(T.layout(spec))
        for i, prefix in enumerate(("", "inner_")):
            if exp["l3_kind"][i]:
                name = prefix + ("ipv4" if exp["l3_kind"][i] == L3Kind.IPV4 else "ipv6")
                assert where[name] == exp["l3_off"][i], spec
            if exp["l4_kind"][i]:
                name = prefix + ("tcp" if exp["l4_kind"][i] == L4Kind.TCP else "udp")
                assert where[name] == exp["l4_off"][i], spec
        if exp["vxlan"]:
            assert where["inner_eth"] == exp["inner_l2_off"]
            assert exp["vni"] == spec.vxlan_vni


def test_valid_packets_no_error_flags(valid):
    for spec, frame, exp, meta in valid:
        assert not is_error(meta), (spec, frame.hex(), meta["flags"])
        assert not meta["flags"]["too_deep"], frame.hex()
        assert meta["flags"]["fragment"] == int(spec.fragment), frame.hex()
        assert meta["min_len"] in (0, len(frame)), frame.hex()  # no IP padding when valid


def test_fragment_payload_off_is_after_ipv4_header():
    """A fragment is parsed up to and including its IPv4 header ("stop before L4", headers.py),
    so payload_off is right after that header, as for any other non-TCP/UDP protocol."""
    ip = IP(src="10.0.0.1", dst="10.0.0.2", proto=17, flags="MF", frag=0)
    frame = bytes(eth() / ip / Raw(bytes(40)))
    meta = MODEL.parse(frame)
    assert meta["flags"]["fragment"] == 1 and meta["l4_kind"][0] == 0
    assert meta["l3_off"][0] == 14 and meta["flow"]["sport"] == 0
    assert meta["payload_off"] == 14 + 20


def test_fragment_options_cut_by_frame_end():
    """Rule 4 of headers.py: a header whose options do not fit is truncated, fragment or not."""
    frame = bytes(eth() / IP(src="10.0.0.1", dst="10.0.0.2", ihl=15, options=[],
                               frag=100, proto=253) / Raw(bytes(100)))
    frame = frame[:14 + 40]  # inside the 40 option bytes
    meta = MODEL.parse(frame)
    assert meta["flags"]["fragment"] and meta["flags"]["length_error"]
    assert is_error(meta)
    check_contract(meta, frame)
    assert meta["flags"]["truncated"]


# --- 2. flow hash -----------------------------------------------------------------------------


def test_flow_hash_matches_independent_toeplitz(valid):
    seen = collections.Counter()
    for spec, frame, exp, meta in valid:
        want = toeplitz_ref(TOEPLITZ_KEY, rss_input(exp["flow"])) if exp["l3_kind"][0] else \
            toeplitz_ref(TOEPLITZ_KEY, b"")
        assert meta["flow_hash"] == want, (spec.kind, frame.hex(), hex(meta["flow_hash"]))
        seen[(exp["flow"]["ipv6"], exp["flow"]["has_l4"])] += 1
    assert len(seen) == 4, seen  # v4/v6, with and without ports


def _rss_frames(v6: bool):
    """(frame, expected hash) pairs built with scapy from the RSS specification's vectors."""
    if v6:
        l3 = IPv6(src="3ffe:2501:200:1fff::7", dst="3ffe:2501:200:3::1")
        no_ports, ports = 0x2CC18CD5, 0x40207D3D
    else:
        l3 = IP(src="66.9.149.187", dst="161.142.100.80")
        no_ports, ports = 0x323E8FC2, 0x51CCC178
    pad = Raw(bytes(32))
    out = [
        (eth() / l3.copy() / TCP(sport=2794, dport=1766) / pad, ports),
        (eth() / l3.copy() / UDP(sport=2794, dport=1766) / pad, ports),
        (eth() / Dot1Q(vlan=5) / l3.copy() / TCP(sport=2794, dport=1766) / pad, ports),
    ]
    if v6:
        out += [(eth() / IPv6(src=l3.src, dst=l3.dst, nh=59) / pad, no_ports),
                (eth() / IPv6(src=l3.src, dst=l3.dst, nh=253) / pad, no_ports)]
    else:
        out += [(eth() / IP(src=l3.src, dst=l3.dst, proto=253) / pad, no_ports),
                (eth() / IP(src=l3.src, dst=l3.dst) / ICMP() / pad, no_ports),
                # fragments hash on the addresses only (first, middle)
                (eth() / IP(src=l3.src, dst=l3.dst, flags="MF")
                 / UDP(sport=2794, dport=1766) / pad, no_ports),
                (eth() / IP(src=l3.src, dst=l3.dst, frag=3, proto=6) / pad, no_ports)]
    # the tenant's inner flow under VXLAN, whatever the outer flow
    outer = eth() / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=5555, dport=VXLAN_PORT)
    out.append((outer / VXLAN(vni=0x123456) / eth() / l3.copy()
                / TCP(sport=2794, dport=1766) / pad, ports))
    return [(bytes(p), h) for p, h in out]


@pytest.mark.parametrize("v6", [False, True], ids=["ipv4", "ipv6"])
def test_flow_hash_rss_vectors(v6):
    for frame, want in _rss_frames(v6):
        meta = MODEL.parse(frame)
        assert not is_error(meta), (frame.hex(), meta["flags"])
        assert meta["flow_hash"] == want, (frame.hex(), hex(meta["flow_hash"]), hex(want))
        assert meta["flow_hash"] == toeplitz_ref(TOEPLITZ_KEY, rss_input(
            scapy_expect(frame)["flow"]))


# --- 3. malformed packets ---------------------------------------------------------------------

# Error flags each malformation must raise, given the walk rules of headers.py (every one of
# these is a frame long enough not to be a runt; the header fits and a check fails, or the
# IP length claims more than the frame has).
_EXPECTED_ERRORS = {
    "ihl_below_5": {"malformed"},               # ihl >= 5
    "ipv4_bad_version": {"malformed"},          # version == 4
    "ipv6_bad_version": {"malformed"},          # version == 6
    "total_length_too_big": {"length_error"},   # offset + total_length > frame
    "total_length_below_ihl": {"malformed"},    # total_length >= IHL * 4
    "ipv6_payload_length_too_big": {"length_error"},
    "udp_length_below_8": {"malformed"},        # length >= 8
    "udp_length_too_big": {"malformed"},        # length <= datagram left (RFC 768)
    "ip_length_cuts_l4": {"malformed"},         # the L4 header inside the datagram
    "ext_length_past_datagram": {"malformed"},  # an extension header inside the datagram
    "tcp_doff_below_5": {"malformed"},          # data offset >= 5
    "vxlan_bad_flags": {"malformed"},           # I flag set
    "runt": {"runt"},
}
# Headers the model walks (traffic.layout names, without the "inner_" prefix).
_WALKED = {"eth", "vlan", "ipv4", "ipv6", "hbh", "dstopts", "routing", "frag6", "ah", "udp",
           "tcp", "vxlan"}


def _walked_end(spec) -> int:
    """End of the last header the model walks in the untruncated frame of a valid spec."""
    lay = T.layout(spec)
    end = 0
    for (name, off), (_, nxt) in zip(lay, lay[1:]):
        base = name.removeprefix("inner_")
        if base not in _WALKED:
            continue
        if spec.fragment and base in ("udp", "tcp"):
            continue  # the walk stops at a fragment's IPv4 header
        end = nxt
    return end


def _errors(meta) -> set:
    return {f for f in ERROR_FLAGS if meta["flags"][f]}


def test_malformations_all_produced(malformed):
    counts = collections.Counter(spec.malformation for spec, *_ in malformed)
    assert set(counts) == set(T.MALFORMATIONS), counts
    assert min(counts.values()) >= 15, counts


@pytest.mark.parametrize("mal", sorted(_EXPECTED_ERRORS))
def test_malformation_raises_its_flag(malformed, mal):
    n = 0
    for spec, frame, meta in malformed:
        if spec.malformation != mal:
            continue
        n += 1
        assert _errors(meta) == _EXPECTED_ERRORS[mal], (spec.kind, frame.hex(), meta["flags"])
        assert not meta["flags"]["too_deep"], frame.hex()
        # An IPv6 fragment says so in a header after IPv6: a bad IPv6 header stops before it.
        stopped = spec.l3 == "ipv6" and mal == "ipv6_bad_version"
        assert meta["flags"]["fragment"] == int(spec.fragment and not stopped), frame.hex()
    assert n


def test_malformation_truncated(malformed):
    """Cut inside a header the model walks: truncated. Cut at or after the end of the walked
    headers: not truncated, and length_error whenever there is an IP header (IP lengths of a
    generated frame cover it to its end). Either way a runt below 60 bytes."""
    inside = after = 0
    for spec, frame, meta in malformed:
        if spec.malformation != "truncated":
            continue
        cut = len(frame)
        assert cut == spec.cut
        ctx = (spec.kind, cut, frame.hex(), meta["flags"])
        errors = _errors(meta) - {"runt"}
        assert meta["flags"]["runt"] == int(cut < RUNT_BYTES), ctx
        assert not meta["flags"]["too_deep"], ctx
        walked = _walked_end(spec)
        if cut < walked:
            inside += 1
            assert meta["flags"]["truncated"], ctx
            assert errors <= {"truncated", "length_error"}, ctx
        else:
            after += 1
            has_ip = spec.l3 is not None
            assert errors == ({"length_error"} if has_ip else set()), ctx
    assert inside >= 10 and after >= 5, (inside, after)


def test_malformation_empty_and_random(malformed):
    n = 0
    for spec, frame, meta in malformed:
        if spec.malformation == "empty_ethertype_only":
            n += 1
            et = int.from_bytes(frame[12:14], "big")
            # the next header (tag or IP) does not fit in a 14-byte frame
            want = {"runt", "truncated"} if et in (0x0800, 0x86DD, 0x8100, 0x88A8) else {"runt"}
            assert _errors(meta) == want, frame.hex()
            assert meta["payload_off"] == 14
        elif spec.malformation == "random_bytes":
            assert meta["flags"]["runt"] == int(len(frame) < RUNT_BYTES)
    assert n


def test_malformed_packets_contract(malformed):
    for spec, frame, meta in malformed:
        check_contract(meta, frame)


def test_random_bytes_every_length():
    rng = random.Random(301)
    for n in range(0, 301):
        for _ in range(4):
            frame = rng.randbytes(n)
            meta = MODEL.parse(frame)
            check_contract(meta, frame)
            if n < 14:
                assert meta["flags"]["truncated"] and meta["payload_off"] == 0
    # also with the interesting ethertypes forced, so the walk goes deeper into random bytes
    for n in range(0, 301):
        for et in (b"\x08\x00", b"\x86\xdd", b"\x81\x00", b"\x88\xa8"):
            frame = (rng.randbytes(12) + et + rng.randbytes(max(0, n - 14)))[:n]
            check_contract(MODEL.parse(frame), frame)


# --- 4. contract on valid packets and small windows -----------------------------------------


def test_valid_packets_contract(valid):
    for spec, frame, exp, meta in valid:
        check_contract(meta, frame)


def _vxlan_v6_frame(size):
    inner = (eth() / IPv6(src="2001:db8::1", dst="2001:db8::2")
             / TCP(sport=1000, dport=2000))
    pkt = (eth() / Dot1Q(vlan=7) / IPv6(src="2001:db8::a", dst="2001:db8::b")
           / UDP(sport=40000, dport=VXLAN_PORT) / VXLAN(vni=42) / inner)
    return bytes(pkt / Raw(bytes(max(0, size - len(pkt)))))


def test_small_window_too_deep_not_truncated():
    small = ParserModel(header_bytes=64)
    frame = _vxlan_v6_frame(1500)
    assert len(frame) == 1500
    meta = small.parse(frame)
    # Ethernet 0-14, tag 14-18, IPv6 18-58, UDP 58-66: UDP does not fit in 64 bytes
    assert meta["flags"]["too_deep"] and not meta["flags"]["truncated"], meta["flags"]
    assert not is_error(meta), meta["flags"]
    assert meta["l3_kind"] == [L3Kind.IPV6, 0] and meta["l3_off"][0] == 18
    assert meta["l4_kind"] == [0, 0] and meta["payload_off"] == 58 and meta["vxlan"] == 0
    assert meta["tenant_kind"] == TenantKind.VLAN and meta["tenant_key"] == 7
    check_contract(meta, frame, small)
    # the full window parses it all, and the inner flow wins
    meta = MODEL.parse(frame)
    assert not meta["flags"]["too_deep"] and not is_error(meta)
    assert meta["vxlan"] and meta["vni"] == 42 and meta["l4_kind"] == [L4Kind.UDP, L4Kind.TCP]
    assert (meta["flow"]["sport"], meta["flow"]["dport"]) == (1000, 2000)
    # the window ends inside the IPv4 options of a long frame: too deep too (rule 4)
    frame = bytes(eth() / Dot1Q(vlan=1) / Dot1Q(vlan=2) / IP(ihl=15, options=[])
                  / Raw(bytes(1040)))
    meta = small.parse(frame)
    assert meta["flags"]["too_deep"] and not is_error(meta), meta["flags"]
    check_contract(meta, frame, small)


def test_small_window_truncated_short_frame():
    small = ParserModel(header_bytes=64)
    full = _vxlan_v6_frame(100)
    frame = full[:40]  # inside the IPv6 header; the frame ends inside the window
    for model in (small, MODEL):
        meta = model.parse(frame)
        assert meta["flags"]["truncated"] and meta["flags"]["runt"], meta["flags"]
        assert not meta["flags"]["too_deep"]
        assert meta["l3_kind"] == [0, 0] and meta["payload_off"] == 18
        check_contract(meta, frame, model)
    # a frame of exactly the window size ends inside it: truncated, not too deep
    frame = full[:64]
    meta = small.parse(frame)
    assert meta["flags"]["truncated"] and not meta["flags"]["too_deep"], meta["flags"]
    assert meta["flags"]["length_error"]  # the IPv6 payload length claims 100 - 58 bytes
    check_contract(meta, frame, small)


def test_small_window_on_valid_packets(valid):
    """Any window: headers cut by the window give too_deep, never truncated, on a long frame;
    whatever the model does parse agrees with the full window."""
    small = ParserModel(header_bytes=64)
    for spec, frame, exp, full in valid[:400]:
        meta = small.parse(frame)
        check_contract(meta, frame, small)
        if len(frame) > 64:
            assert not meta["flags"]["truncated"], frame.hex()
            assert not is_error(meta), (frame.hex(), meta["flags"])
            walked = _walked_end(spec)
            assert meta["flags"]["too_deep"] == int(walked > 64), frame.hex()
        if not meta["flags"]["too_deep"]:
            assert meta == full, frame.hex()
