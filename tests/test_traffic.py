"""Tests for supernic.sim.traffic: determinism, sizes, speed, scapy agreement, malformations,
pcap round trip."""

import collections
import dataclasses
import random
import struct
import time
import zlib

import pytest
import scapy.layers.inet  # noqa: F401  (registers the IP/UDP/TCP bindings)
import scapy.layers.inet6  # noqa: F401
import scapy.layers.vxlan  # noqa: F401
from scapy.layers.inet import ICMP, IP, TCP, UDP
from scapy.layers.inet6 import (ICMPv6EchoRequest, IPv6, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                                IPv6ExtHdrHopByHop, IPv6ExtHdrRouting)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import ARP, GRE, Dot1Q, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import NoPayload, Raw

from scapy_dissect import dissect
from supernic.sim import traffic as T
from supernic.sim.traffic import (
    KINDS,
    MALFORMATIONS,
    PacketSpec,
    build,
    checksum16,
    header_length,
    layout,
    random_packets,
    random_spec,
    read_pcap,
    write_pcap,
)

# --- helpers ------------------------------------------------------------------------------------


def l3_offset(frame: bytes) -> tuple[int, int]:
    """(offset after the tags, ethertype) read from raw bytes."""
    off = 12
    et = int.from_bytes(frame[off:off + 2], "big")
    while et in (0x8100, 0x88A8):
        off += 4
        et = int.from_bytes(frame[off:off + 2], "big")
    return off + 2, et


def ipv4_header_ok(frame: bytes, off: int) -> bool:
    ihl = frame[off] & 0x0F
    return checksum16(frame[off:off + 4 * ihl]) == 0


def layer_list(pkt):
    out = []
    while not isinstance(pkt, NoPayload):
        out.append(pkt)
        pkt = pkt.payload
    return out


def split_vxlan(layers):
    for i, layer in enumerate(layers):
        if isinstance(layer, VXLAN):
            return layers[:i], layer, layers[i + 1:]
    return layers, None, []


def check_layers(spec: PacketSpec, layers) -> None:
    """The dissected layers match what the spec says (one encapsulation level)."""
    ntags = sum(isinstance(x, Dot1Q) for x in layers)  # Dot1AD is a Dot1Q subclass
    assert ntags == len(spec.vlans), (spec, layers)
    assert isinstance(layers[0], Ether)
    if spec.l3 is None:
        if spec.ethertype == T.ETH_ARP:
            assert any(isinstance(x, ARP) for x in layers)
        else:
            last_l2 = layers[len(spec.vlans)]
            assert last_l2.type == T.ETH_EXPERIMENTAL
        return
    l3cls = IP if spec.l3 == "ipv4" else IPv6
    other = IPv6 if spec.l3 == "ipv4" else IP
    assert sum(isinstance(x, l3cls) for x in layers) == 1
    assert not any(isinstance(x, other) for x in layers)
    ip = next(x for x in layers if isinstance(x, l3cls))
    # IPv6 extension headers in the spec's order, the last naming the upper-layer protocol
    ext_classes = {0: IPv6ExtHdrHopByHop, 60: IPv6ExtHdrDestOpt, 43: IPv6ExtHdrRouting,
                   44: IPv6ExtHdrFragment, 51: AH}
    exts = [x for x in layers if isinstance(x, tuple(ext_classes.values()))]
    assert [type(x) for x in exts] == [ext_classes[c] for c, _ in spec.ext], (spec, layers)
    assert [len(bytes(x)) - len(bytes(x.payload)) for x in exts] == [n for _, n in spec.ext]
    frag = next((x for x in exts if isinstance(x, IPv6ExtHdrFragment)), None)
    if spec.l3 == "ipv6" and frag is not None:
        assert (frag.offset, bool(frag.m)) == (spec.frag_offset, spec.more_fragments)
        assert spec.fragment == bool(frag.offset or frag.m)
    if spec.l3 == "ipv4":
        assert ip.ihl == spec.ihl
        if spec.fragment:
            assert ip.frag == spec.frag_offset
            assert bool(ip.flags.MF) == spec.more_fragments
            assert spec.frag_offset or spec.more_fragments
        else:
            assert ip.frag == 0 and not ip.flags.MF
    want = {"udp": UDP, "tcp": TCP}.get(spec.l4)
    if spec.l4 == "other":
        want = {1: ICMP, 58: ICMPv6EchoRequest, 47: GRE}.get(spec.proto)
        proto = ip.proto if spec.l3 == "ipv4" else (exts[-1] if exts else ip).nh
        assert proto == spec.proto
    present = [x for x in layers if isinstance(x, (UDP, TCP, ICMP, ICMPv6EchoRequest, GRE))]
    if spec.l4_present and want is not None:
        assert len(present) == 1 and isinstance(present[0], want), (spec, layers)
        if want is TCP:
            assert present[0].dataofs == spec.tcp_doff
    else:
        assert not present, (spec, layers)


def scapy_rebuild(frame: bytes, spec: PacketSpec) -> bytes:
    """Dissect with scapy, delete every checksum scapy can recompute, rebuild.

    Option bytes and payloads are random, and scapy does not re-serialize random TCP/IPv4
    option lists (or a random payload on a port it knows, e.g. DNS) byte for byte. So before
    rebuilding, IPv4 options become one Raw blob, and the innermost L4 header keeps its data
    offset but its options move, unchanged, in front of a Raw payload: the bytes are the same,
    and scapy recomputes every checksum over them. Checksums that cover data not in the frame
    (first fragments), an outer VXLAN UDP checksum of 0, and one after an Authentication
    Header (scapy computes none there) are left alone.
    """
    pkt = dissect(frame)
    lay = layout(spec)
    where = dict(lay)
    layers = layer_list(pkt)
    ips = [x for x in layers if isinstance(x, IP)]
    ip_names = [name for name, _ in lay if name.endswith("ipv4")]
    assert len(ips) == len(ip_names)
    for ip, name in zip(ips, ip_names):
        off = where[name]
        ip.options = [Raw(frame[off + 20:off + 4 * ip.ihl])] if ip.ihl > 5 else []
    l4s = [x for x in layers if isinstance(x, (UDP, TCP, ICMP))]
    if l4s and not isinstance(l4s[-1].payload, VXLAN):
        l4 = l4s[-1]
        if isinstance(l4, TCP):
            tcp_off = where["inner_tcp" if "inner_tcp" in where else "tcp"]
            data = frame[tcp_off + 20:]
            l4.options = []
        else:
            data = frame[where.get("payload", len(frame)):]
        l4.remove_payload()
        if data:
            l4.add_payload(Raw(data))
    for layer in layers:
        if isinstance(layer, IP):
            del layer.chksum
        elif isinstance(layer, (UDP, TCP, ICMP, ICMPv6EchoRequest)):
            ip = layer.underlayer
            if isinstance(ip, IP) and (ip.flags.MF or ip.frag):
                continue  # covers the whole datagram, not just this fragment
            if isinstance(ip, IPv6ExtHdrFragment) and (ip.m or ip.offset) or isinstance(ip, AH):
                continue
            if isinstance(layer, UDP) and isinstance(layer.payload, VXLAN) \
                    and not spec.vxlan_checksum:
                assert layer.chksum == 0  # RFC 7348: zero outer UDP checksum allowed
                continue
            if isinstance(layer, ICMPv6EchoRequest):
                del layer.cksum
            else:
                del layer.chksum
    return bytes(pkt)


# --- determinism and sizes ----------------------------------------------------------------------


def test_deterministic_for_seed():
    a = random_packets(400, seed=11)
    b = random_packets(400, seed=11)
    c = random_packets(400, seed=12)
    assert a == b
    assert [f for _, f in a] != [f for _, f in c]
    spec = a[0][0]
    assert build(spec, random.Random(5)) == build(spec, random.Random(5))


def test_kinds_all_produced_and_filter():
    pkts = random_packets(1500, seed=1, malformed_fraction=0.0)
    assert {s.kind for s, _ in pkts} == set(KINDS)
    pkts = random_packets(200, seed=2, malformed_fraction=0.0, kinds=["vxlan", "arp"])
    assert {s.kind for s, _ in pkts} == {"vxlan", "arp"}
    with pytest.raises(ValueError):
        random_spec(random.Random(0), kinds=["nope"])


@pytest.mark.parametrize("dist", [200, 60, (100, 1500), (4000, 9000)])
def test_sizes_respected(dist):
    for spec, frame in random_packets(500, seed=3, size_dist=dist, malformed_fraction=0.0):
        assert len(frame) == spec.size
        hdr = header_length(spec)
        if isinstance(dist, int):
            assert len(frame) == max(dist, hdr)
        else:
            assert dist[0] <= len(frame) <= max(dist[1], hdr)
        assert 60 <= len(frame) <= 9000


def test_headers_bigger_than_size():
    spec = PacketSpec(size=60, l3="ipv4", l4="tcp", ihl=15, tcp_doff=15)
    frame = build(spec, random.Random(1))
    assert len(frame) == 14 + 60 + 60 == header_length(spec)


def test_mixed_size_distribution():
    sizes = [s.size for s, _ in random_packets(6000, seed=4, malformed_fraction=0.0,
                                               kinds=["ipv4_udp", "ipv6_tcp"])]
    n = len(sizes)
    frac = [sum(lo <= x <= hi for x in sizes) / n
            for lo, hi in ((60, 256), (257, 1500), (1501, 4000), (4001, 9000))]
    # headers larger than a small request push a few packets up a bucket; allow slack
    assert 0.53 <= frac[0] <= 0.65
    assert 0.26 <= frac[1] <= 0.36
    assert 0.05 <= frac[2] <= 0.11
    assert 0.007 <= frac[3] <= 0.035
    assert max(sizes) <= 9000 and min(sizes) >= 60


def test_speed(capsys):
    t0 = time.perf_counter()
    pkts = random_packets(10_000, seed=5)
    dt = time.perf_counter() - t0
    t0 = time.perf_counter()
    random_packets(10_000, seed=5, size_dist=200, malformed_fraction=0.0)
    dt200 = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\ntraffic: 10k mixed packets {len(pkts) / dt:,.0f} packets/s; "
              f"10k 200-byte packets {10_000 / dt200:,.0f} packets/s")


# --- scapy agreement ----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [21, 22])
def test_valid_packets_parse_in_scapy(seed):
    pkts = random_packets(300, seed=seed, size_dist=(60, 1600), malformed_fraction=0.0,
                          vxlan_checksum=None)
    for spec, frame in pkts:
        pkt = dissect(frame)
        assert bytes(pkt) == frame
        outer, vx, inner = split_vxlan(layer_list(pkt))
        check_layers(spec, outer)
        if spec.vxlan_vni is None:
            assert vx is None
            continue
        assert vx is not None and vx.vni == spec.vxlan_vni and vx.flags == 0x08
        assert outer[-1].dport == T.VXLAN_PORT
        assert spec.inner is not None
        check_layers(spec.inner, inner)
        assert len(frame) - dict(layout(spec))["inner_eth"] == spec.inner.size


@pytest.mark.parametrize("seed", [31, 32])
def test_scapy_agrees_on_checksums_and_lengths(seed):
    pkts = random_packets(300, seed=seed, size_dist="mixed", malformed_fraction=0.0,
                          vxlan_checksum=None)
    for spec, frame in pkts:
        assert scapy_rebuild(frame, spec) == frame, spec
        if spec.l3 is None:
            continue
        off, et = l3_offset(frame)
        # the L3 length covers exactly the rest of the frame (no padding in valid packets)
        if et == 0x0800:
            assert ipv4_header_ok(frame, off)
            assert struct.unpack_from("!H", frame, off + 2)[0] == len(frame) - off
        else:
            assert struct.unpack_from("!H", frame, off + 4)[0] == len(frame) - off - 40
        if spec.l4 == "udp" and not spec.fragment:
            l4 = dict(layout(spec))["udp"]
            assert struct.unpack_from("!H", frame, l4 + 4)[0] == len(frame) - l4


def test_vxlan_checksum_option():
    for flag in (False, True):
        for spec, frame in random_packets(40, seed=6, kinds=["vxlan"], malformed_fraction=0.0,
                                          vxlan_checksum=flag):
            assert spec.vxlan_checksum is flag
            udp = dict(layout(spec))["udp"]
            c = struct.unpack_from("!H", frame, udp + 6)[0]
            assert (c != 0) is flag
            assert scapy_rebuild(frame, spec) == frame


def test_fragments():
    seen = set()
    for spec, frame in random_packets(600, seed=7, kinds=["ipv4_frag"], malformed_fraction=0.0):
        off, et = l3_offset(frame)
        assert et == 0x0800
        ff = struct.unpack_from("!H", frame, off + 6)[0]
        mf, offset = bool(ff & 0x2000), ff & 0x1FFF
        assert mf or offset
        assert (mf, offset) == (spec.more_fragments, spec.frag_offset)
        if mf:  # RFC 791: all but the last fragment carry a multiple of 8 data bytes
            assert (len(frame) - off - 4 * spec.ihl) % 8 == 0
        seen.add(("first" if not offset else "middle" if mf else "last", spec.l4))
    assert {v for v, _ in seen} == {"first", "middle", "last"}
    assert {l4 for _, l4 in seen} == {"udp", "tcp", "other"}


def test_vlan_tags_and_double_tag_tpids():
    tpids = collections.Counter()
    for spec, frame in random_packets(300, seed=8, malformed_fraction=0.0, vlan_counts=(2,)):
        assert len(spec.vlans) == 2
        outer = struct.unpack_from("!HH", frame, 12)
        inner = struct.unpack_from("!HH", frame, 16)
        assert outer[0] in (0x88A8, 0x8100) and inner[0] == 0x8100
        assert (outer[1] & 0xFFF, inner[1] & 0xFFF) == (spec.vlans[0][1], spec.vlans[1][1])
        tpids[outer[0]] += 1
    assert tpids[0x88A8] and tpids[0x8100]


def test_flows_repeat():
    pkts = random_packets(500, seed=9, malformed_fraction=0.0, flows=4,
                          kinds=["ipv4_udp", "ipv4_tcp"])
    tuples = set()
    for spec, frame in pkts:
        off, _ = l3_offset(frame)
        ihl = frame[off] & 0x0F
        tuples.add((frame[6:12], frame[off + 12:off + 20], frame[off + 4 * ihl:off + 4 * ihl + 4]))
    assert len(tuples) <= 4
    assert {s.flow for s, _ in pkts} == {0, 1, 2, 3}


# --- malformations ------------------------------------------------------------------------------


def malformed(m: str, n: int = 60, seed: int = 0, **kw):
    rng = random.Random(zlib.crc32(m.encode()) ^ seed)
    out = []
    for _ in range(n):
        spec = random_spec(rng, (60, 600), malformed_fraction=1.0, malformations=[m], **kw)
        assert spec.malformation == m
        out.append((spec, build(spec, rng)))
    return out


def test_malformed_fraction_and_all_produced():
    pkts = random_packets(3000, seed=10, malformed_fraction=0.1)
    frac = sum(s.malformation is not None for s, _ in pkts) / len(pkts)
    assert 0.08 <= frac <= 0.12
    pkts = random_packets(1500, seed=10, malformed_fraction=1.0)
    assert {s.malformation for s, _ in pkts} == set(MALFORMATIONS)


def test_malformation_ipv4_fields():
    for m in ("ihl_below_5", "ipv4_bad_version", "total_length_too_big",
              "total_length_below_ihl"):
        for spec, frame in malformed(m):
            off, et = l3_offset(frame)
            assert et == 0x0800
            version, ihl = frame[off] >> 4, frame[off] & 0x0F
            total = struct.unpack_from("!H", frame, off + 2)[0]
            if m == "ihl_below_5":
                assert version == 4 and ihl < 5
            elif m == "ipv4_bad_version":
                assert version != 4 and ihl == spec.ihl
            elif m == "total_length_too_big":
                assert version == 4 and total > len(frame) - off
            else:
                assert version == 4 and ihl >= 5 and total < 4 * ihl
            if m != "ihl_below_5":
                # only the claimed field is wrong: the header checksum still holds
                assert checksum16(frame[off:off + 4 * spec.ihl]) == 0


def test_malformation_ipv6_fields():
    for spec, frame in malformed("ipv6_bad_version"):
        off, et = l3_offset(frame)
        assert et == 0x86DD and frame[off] >> 4 != 6
    for spec, frame in malformed("ipv6_payload_length_too_big"):
        off, et = l3_offset(frame)
        assert et == 0x86DD and frame[off] >> 4 == 6
        assert struct.unpack_from("!H", frame, off + 4)[0] > len(frame) - off - 40


def test_malformation_l4_and_vxlan_fields():
    for spec, frame in malformed("udp_length_below_8"):
        off, et = l3_offset(frame)
        nh = frame[off + 9] if et == 0x0800 else frame[off + 6]
        assert nh == 17
        l4 = dict(layout(spec))["udp"]
        assert struct.unpack_from("!H", frame, l4 + 4)[0] < 8
    for spec, frame in malformed("tcp_doff_below_5"):
        off, et = l3_offset(frame)
        nh = frame[off + 9] if et == 0x0800 else frame[off + 6]
        assert nh == 6
        l4 = dict(layout(spec))["tcp"]
        assert frame[l4 + 12] >> 4 < 5
    for spec, frame in malformed("vxlan_bad_flags"):
        lay = dict(layout(spec))
        assert struct.unpack_from("!H", frame, lay["udp"] + 2)[0] == 4789
        assert frame[lay["vxlan"]] & 0x08 == 0


def test_malformation_sizes():
    for spec, frame in malformed("random_bytes"):
        assert 1 <= len(frame) <= 300 and len(frame) == spec.size
    for spec, frame in malformed("empty_ethertype_only"):
        assert len(frame) == 14
    kinds = collections.Counter()
    for spec, frame in malformed("runt", n=300):
        assert 14 <= len(frame) < 60 and len(frame) == spec.size
        kinds[spec.kind] += 1
        if spec.l3 is None:
            continue
        # a runt is otherwise valid: lengths match, checksums hold
        assert scapy_rebuild(frame, spec) == frame
        off, et = l3_offset(frame)
        if et == 0x0800:
            assert struct.unpack_from("!H", frame, off + 2)[0] == len(frame) - off
            assert ipv4_header_ok(frame, off)
        else:
            assert struct.unpack_from("!H", frame, off + 4)[0] == len(frame) - off - 40
    assert {"eth", "arp", "ipv4_udp", "ipv4_tcp", "ipv4_frag"} <= set(kinds)


def meaningful_starts(spec: PacketSpec) -> dict[int, str]:
    """Header start offsets > 0 that lie before the end of the meaningful data."""
    lay = layout(spec)
    end = lay[-2][1] if lay[-2][0] == "pad" else lay[-1][1]
    return {off: name for name, off in lay[:-1] if 0 < off < end}


@pytest.mark.parametrize("kind", KINDS)
def test_truncation_reaches_every_kind_of_boundary(kind):
    hit, names, mid = set(), set(), 0
    for spec, frame in malformed("truncated", n=1500, kinds=[kind]):
        full = layout(spec)[-1][1]
        assert len(frame) == spec.cut and 1 <= spec.cut < full
        full_frame = build(dataclasses.replace(spec, malformation=None, cut=None),
                           random.Random(0))
        assert len(full_frame) == full
        starts = meaningful_starts(spec)
        names |= set(starts.values())
        if spec.cut in starts:
            hit.add(starts[spec.cut])
        else:
            mid += 1
    assert names == hit, (kind, names - hit)
    assert mid > 50  # cuts inside headers happen too


def test_truncation_every_boundary_of_one_spec():
    """For a fixed deep spec every header boundary offset, and inside every header, is cut."""
    inner = PacketSpec(size=200, vlans=((0x8100, 5),), l3="ipv4", l4="tcp", ihl=6, tcp_doff=7)
    spec = PacketSpec(size=400, vlans=((0x88A8, 1), (0x8100, 2)), l3="ipv6", l4="udp",
                      vxlan_vni=77, inner=inner, malformation="truncated")
    lay = layout(spec)
    want = sorted(meaningful_starts(spec))
    assert [name for name, _ in lay] == [
        "eth", "vlan", "vlan", "ipv6", "udp", "vxlan", "inner_eth", "inner_vlan", "inner_ipv4",
        "inner_tcp", "payload", "end"]
    rng = random.Random(3)
    cuts = collections.Counter(T._choose_cut(rng, spec) for _ in range(4000))
    assert set(want) <= set(cuts)
    starts = [off for _, off in lay]
    for a, b in zip(starts, starts[1:]):
        assert any(a < c < b for c in cuts), (a, b)  # a cut inside every header
    assert min(cuts) >= 1 and max(cuts) < lay[-1][1]
    frame = build(spec, random.Random(1))
    assert len(frame) == 400 - 1  # no cut given: one byte short


# --- pcap ---------------------------------------------------------------------------------------


def test_pcap_round_trip(tmp_path):
    pkts = random_packets(400, seed=12, malformed_fraction=0.2)
    pkts.append((PacketSpec(size=9000, l3="ipv4", l4="udp"),
                 build(PacketSpec(size=9000, l3="ipv4", l4="udp"), random.Random(1))))
    path = tmp_path / "t.pcap"
    write_pcap(path, pkts)
    assert read_pcap(path) == [f for _, f in pkts]
    path2 = tmp_path / "t2.pcap"
    write_pcap(path2, [f for _, f in pkts])
    assert path2.read_bytes() == path.read_bytes()
