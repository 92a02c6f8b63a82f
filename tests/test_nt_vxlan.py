"""VXLAN encap and decap: the models checked with scapy (its own checksum and length
computation) and against the parser (contract rule 4), a round trip and configuration errors.
The hardware against the models at 64 and 512 bits (5,000 packets each, 10% malformed, random
idle and backpressure) and saturation at 64 and 1,500 bytes are in tests/test_nt_contract.py."""

import random

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Dot1Q, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Raw

from supernic.hw.nt.task import ConfigError
from supernic.desc.nt.vxlan import VxlanDecapConfig, VxlanEncapConfig
from supernic.hw.nt.vxlan import VxlanDecap, VxlanEncap
from supernic.sim.nt.vlan import light_mix
from supernic.sim.nt.vxlan import VxlanDecapModel, VxlanEncapModel, add_inner_tags
from supernic.sim.nt.base import KEPT_FIELDS, contract_differences as base_contract_differences
from supernic.sim.parser_model import ParserModel
from supernic.sim.traffic import random_packets

PARSER = ParserModel()
DEEPER = ParserModel(walk_steps=PARSER.walk_steps + 4)     # encap's four headers in front
ENCAP = {"dst_mac": "02:00:00:00:00:0b", "src_mac": "02:00:00:00:00:0a",
         "src_ip": "192.0.2.1", "dst_ip": "198.51.100.7", "vni": 0xABCDE, "ttl": 17, "df": 1}


def encap_model(buffer_bytes=None, **config):
    params = VxlanEncap.check_params({} if buffer_bytes is None
                                     else {"buffer_bytes": buffer_bytes})
    model = VxlanEncapModel(params)
    model.configure(VxlanEncapConfig.from_dict("vxlan_encap", params, {**ENCAP, **config}))
    return model


def decap_model(header_bytes=256, **config):
    model = VxlanDecapModel({}, header_bytes=header_bytes)
    model.configure(VxlanDecapConfig.from_dict("vxlan_decap", {}, config))
    return model


def process(model, frame, parser=PARSER):
    return model.process(frame, parser.parse(frame))


def contract_differences(out_frame, out_meta):
    return base_contract_differences(PARSER, out_frame, out_meta)


def vxlan_frame(vni=42, inner=None, inner_tags=()):
    """An RFC 7348 frame built by scapy: outer IPv4/UDP 4789 (checksum 0)/VXLAN, inner frame."""
    if inner is None:
        inner = Ether(dst="02:00:00:00:01:02", src="02:00:00:00:01:01")
        for vid in inner_tags:
            inner = inner / Dot1Q(vlan=vid)
        inner = bytes(inner / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1234, dport=80)
                      / Raw(b"hello world"))
    return bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
                 / IP(src="192.0.2.9", dst="192.0.2.10") / UDP(sport=50000, dport=4789, chksum=0)
                 / VXLAN(vni=vni) / Raw(inner)), inner


# ---- encap ----------------------------------------------------------------------------------


def test_encap_headers_match_scapy_checksums_and_lengths():
    """Every output equals the frame scapy builds with its own IPv4 checksum, IPv4 total length
    and UDP length (RFC 791, RFC 1071, RFC 768), UDP checksum 0 (RFC 7348 section 5), VXLAN
    I flag and VNI; the source port is in the dynamic range and follows the flow hash."""
    model = encap_model()
    frames = [f for _, f in random_packets(300, 1, (60, 1500), 0.0,
                                          kinds=("ipv4_udp", "ipv6_tcp", "eth", "arp"))]
    for n, frame in enumerate(frames):
        meta = PARSER.parse(frame)
        out, out_meta = model.process(frame, meta)
        pkt = Ether(out)
        sport = pkt[UDP].sport
        assert 49152 <= sport <= 65535 and sport & 0x3FFF == meta["flow_hash"] & 0x3FFF
        want = (Ether(dst=ENCAP["dst_mac"], src=ENCAP["src_mac"])
                / IP(src=ENCAP["src_ip"], dst=ENCAP["dst_ip"], ttl=17, flags="DF", id=n)
                / UDP(sport=sport, dport=4789, chksum=0) / VXLAN(vni=ENCAP["vni"]) / Raw(frame))
        assert out == bytes(want)
        assert pkt[IP].len == len(out) - 14 and pkt[UDP].len == len(out) - 34
        assert bytes(pkt[VXLAN].payload) == frame
        assert (out_meta["vxlan"], out_meta["vni"], out_meta["inner_l2_off"]) == (1, 0xABCDE, 50)
    assert model.stats == {"packets": 300, "dropped": 0, "skipped": 0}


def test_encap_skips_vxlan_oversize_and_window_edge():
    model = encap_model(buffer_bytes=2048)
    already, _ = vxlan_frame()
    big = next(f for _, f in random_packets(50, 2, (2049, 3000), 0.0, kinds=("ipv4_udp",)))
    fits = next(f for _, f in random_packets(50, 2, 2048, 0.0, kinds=("ipv4_udp",)))
    assert process(model, already)[0] == already
    assert process(model, big)[0] == big        # longer than the store-and-forward FIFO
    assert process(model, fits)[0] != fits      # exactly the FIFO's size still fits
    # A 64-byte window: headers ending past byte 14 cannot move 50 bytes further in.
    small = VxlanEncapModel(VxlanEncap.check_params({}), header_bytes=64)
    small.configure(VxlanEncapConfig.from_dict("vxlan_encap", {}, ENCAP))
    assert small.process(fits, ParserModel(64).parse(fits))[0] == fits
    assert model.stats == {"packets": 3, "dropped": 0, "skipped": 2}


def test_encap_of_non_ip_frame_takes_the_outer_flow():
    model = encap_model(df=0)
    frame = next(f for _, f in random_packets(10, 3, 100, 0.0, kinds=("arp",)))
    out, meta = process(model, frame)
    assert meta["flow"] == {"src_ip": 0xC0000201, "dst_ip": 0xC6336407, "proto": 17,
                            "sport": int.from_bytes(out[34:36], "big"), "dport": 4789, "ipv6": 0}
    assert Ether(out)[IP].flags == 0 and not contract_differences(out, meta)


# ---- decap ----------------------------------------------------------------------------------


def test_decap_returns_the_inner_frame():
    model = decap_model()
    frame, inner = vxlan_frame(inner_tags=(100, 200))
    out, meta = process(model, frame)
    assert out == inner
    assert (meta["vlan_count"], meta["vid"], meta["vid2"], meta["tenant_key"]) == (2, 100, 200,
                                                                                   100)
    assert meta["min_len"] == len(inner) and not contract_differences(out, meta)


def test_decap_pads_short_inner_frames():
    frame, inner = vxlan_frame(inner=bytes(Ether(type=0x88B5) / Raw(b"abc")))
    out, meta = process(decap_model(), frame)
    assert out == inner + bytes(60 - len(inner)) and not meta["flags"]["runt"]


def test_decap_vni_filter_counts_others():
    model = decap_model(vni=7)
    for vni in (7, 8, 9):
        frame, inner = vxlan_frame(vni=vni)
        out, _ = process(model, frame)
        assert (out == inner) == (vni == 7)
    plain = next(f for _, f in random_packets(1, 4, 200, 0.0, kinds=("ipv4_tcp",)))
    assert process(model, plain)[0] == plain
    assert model.counters() == {"packets": 4, "dropped": 0, "skipped": 3, "vni_mismatch": 2}
    assert VxlanDecapConfig(7).register_writes({}) == [("vni", 7), ("match_vni", 1)]
    assert VxlanDecapConfig().register_writes({}) == [("vni", 0), ("match_vni", 0)]


def test_decap_skips_what_it_cannot_describe():
    """Four inner tags before IP (the NT reads three), and an inner Ethernet header past a
    64-byte parser window (``inner_l2_off`` unknown)."""
    model = decap_model()
    four, _ = vxlan_frame(inner_tags=(1, 2, 3, 4))
    assert process(model, four)[0] == four
    three, inner = vxlan_frame(inner_tags=(1, 2, 3))
    out, meta = process(model, three)
    assert out == inner and (meta["vlan_count"], meta["vid"], meta["vid2"]) == (3, 1, 2)
    tagged = bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / Dot1Q(vlan=5)
                   / Dot1Q(vlan=6, type=0x0800) / Raw(three[14:]))  # VXLAN header at 58
    parser64 = ParserModel(64)
    assert parser64.parse(tagged)["vxlan"] == 1 and parser64.parse(tagged)["inner_l2_off"] == 0
    narrow = decap_model(header_bytes=64)
    assert narrow.process(tagged, parser64.parse(tagged))[0] == tagged
    assert model.stats["skipped"] == 1 and narrow.stats["skipped"] == 1


def test_encap_then_decap_is_the_identity():
    """Frames of at least 60 bytes come back byte for byte, with the parser's metadata."""
    enc, dec = encap_model(), decap_model()
    frames = light_mix(random.Random(5), 2000, 0.0)
    back = 0
    for frame in frames:
        meta = PARSER.parse(frame)
        if meta["vxlan"] or meta["flags"]["too_deep"]:
            continue
        mid, mid_meta = enc.process(frame, meta)
        out, out_meta = dec.process(mid, mid_meta)
        assert out == frame
        for key in KEPT_FIELDS:
            out_meta[key] = meta[key]
        assert out_meta == meta
        back += 1
    assert back > 1500


@pytest.mark.parametrize("make", [encap_model, decap_model], ids=["encap", "decap"])
def test_metadata_describes_the_frame_that_leaves(make):
    """Contract rule 4 on 6,000 random valid packets (a third with 1-3 extra inner tags for
    decap): the parser run on every output frame gives the NT's metadata.

    Excluded, for decap only: inputs flagged ``too_deep``. The parser stopped inside the inner
    frame because a header crossed its window (or it ran out of walk steps, or the inner frame
    is itself VXLAN: a third layer); without the outer 50+ bytes in front, the parser sees
    further into the inner frame, and knowing what it would find means parsing it again. The
    NT keeps the old walk's result. (Encap cannot make the walk go further: headers that would
    cross the window are skipped.)

    For encap, the parser that re-walks the output has four more walk steps: the four headers
    put in front (Ethernet, IP, UDP, VXLAN) each take one, and a deep input (tags and IPv6
    extension headers) may have used all of the NIC parser's steps; the NT keeps that walk's
    result, which a parser of the same steps would cut short."""
    model = make()
    rng = random.Random(8)
    if make is decap_model:
        config, frames = model.test_case(rng, 6000, 0.0)
        model.configure(config)
    else:
        frames = light_mix(rng, 6000, 0.0)
    changed = excluded = 0
    for frame in frames:
        meta = PARSER.parse(frame)
        out, out_meta = model.process(frame, meta)
        if out == frame:
            continue
        changed += 1
        if make is decap_model and meta["flags"]["too_deep"]:
            excluded += 1
            continue
        parser = PARSER if make is decap_model else DEEPER
        assert not base_contract_differences(parser, out, out_meta), (frame[:96].hex(), out_meta)
    assert changed > 2000 and excluded < changed / 10


def test_added_inner_tags_keep_the_frame_valid():
    rng = random.Random(9)
    frame, _ = vxlan_frame()
    tagged = add_inner_tags(frame, PARSER.parse(frame), 2, rng)
    pkt = Ether(tagged)
    rebuilt = pkt.copy()
    del rebuilt[IP].len, rebuilt[IP].chksum, rebuilt[UDP].len
    assert bytes(rebuilt) == tagged and pkt[VXLAN].payload[Dot1Q].payload[Dot1Q]


# ---- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize("raw, message", [
    ({k: v for k, v in ENCAP.items() if k != "vni"}, "nt vxlan_encap: setting vni is required"),
    ({**ENCAP, "vni": 1 << 24},
     "nt vxlan_encap: vni must be an integer from 0 to 16777215, not 16777216"),
    ({**ENCAP, "dst_mac": "02:00:00:00:00"},
     "nt vxlan_encap: dst_mac must be a MAC address like \"02:00:00:00:00:01\", "
     "not '02:00:00:00:00'"),
    ({**ENCAP, "src_ip": "10.0.0.256"},
     "nt vxlan_encap: src_ip must be an IPv4 address like \"192.0.2.1\", not '10.0.0.256'"),
    ({**ENCAP, "ttl": 0}, "nt vxlan_encap: ttl must be an integer from 1 to 255, not 0"),
    ({**ENCAP, "df": 2}, "nt vxlan_encap: df must be an integer from 0 to 1, not 2"),
    ({**ENCAP, "sport": 1},
     "nt vxlan_encap: unknown config key 'sport' (known: df, dst_ip, dst_mac, src_ip, "
     "src_mac, ttl, vni)"),
])
def test_encap_config_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        VxlanEncapConfig.from_dict("vxlan_encap", {}, raw)
    assert str(info.value) == message


def test_decap_config_errors_and_params():
    with pytest.raises(ConfigError) as info:
        VxlanDecapConfig.from_dict("vxlan_decap", {}, {"vni": -1})
    assert str(info.value) == "nt vxlan_decap: vni must be an integer from 0 to 16777215, not -1"
    with pytest.raises(ConfigError) as info:
        VxlanEncap.check_params({"buffer_bytes": 3000})
    assert str(info.value) == ("nt vxlan_encap: parameter buffer_bytes must be a power of two, "
                               "not 3000")


def test_encap_config_writes_its_registers():
    config = VxlanEncapConfig.from_dict("vxlan_encap", {}, ENCAP)
    writes = dict(config.register_writes({}))
    assert writes == {"dst_mac": 0x02000000000B, "src_mac": 0x02000000000A,
                      "src_ip": 0xC0000201, "dst_ip": 0xC6336407, "vni": 0xABCDE, "ttl": 17,
                      "df": 1}
    params = VxlanEncap.check_params({})
    assert set(writes) <= {r.name for r in VxlanEncap.registers(params)}
    assert {"match_vni", "vni", "vni_mismatch"} <= {r.name for r in VxlanDecap.registers({})}
