"""Checksum verification and offload: the rules in the models (checked against the traffic
generator's own checksums and scapy's) and configuration errors. Both NTs in hardware against
their models at 64 and 512 bits (5,000 packets each, random idle and backpressure, 10%
malformed, 30% with a spoiled checksum, oversize frames at one width) and saturation runs are
in tests/test_nt_contract.py."""

import random

import pytest
from scapy.all import IP, TCP, UDP, Ether, IPv6
from scapy.layers.vxlan import VXLAN

from supernic.desc.nt.checksum import OffloadConfig, VerifyConfig
from supernic.hw.nt.checksum import ChecksumOffload, ChecksumVerify
from supernic.hw.nt.task import ConfigError
from supernic.sim.nt.checksum_offload import (ChecksumOffloadModel, ChecksumVerifyModel,
                                              checksum_fields, corrupt_checksums,
                                              scapy_recomputed, scapy_round_trips)
from supernic.sim.nt.nat import draw_frames
from supernic.sim.parser_model import ParserModel

PARAMS = ChecksumVerify.check_params({})
PARSER = ParserModel()
# Explicit addresses: a bare Ether() makes scapy resolve the MAC of the IP destination.
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
IP_KINDS = ("ipv4_udp", "ipv4_tcp", "ipv4_other", "ipv4_frag", "ipv6_udp", "ipv6_tcp",
            "ipv6_other", "vxlan")
BAD_COUNTERS = ("ipv4_bad", "tcp_bad", "udp_bad")


def _verifier(drop_bad=True, params=PARAMS):
    model = ChecksumVerifyModel(params)
    model.configure(VerifyConfig(drop_bad))
    return model


def _offload(**fill):
    model = ChecksumOffloadModel(PARAMS)
    model.configure(OffloadConfig(**fill))
    return model


def _run(model, frame):
    return model.process(frame, PARSER.parse(frame))


def _frames(n, seed, **kw):
    return draw_frames(random.Random(seed), n, 0.0, sizes=((1.0, (60, 700)),), kinds=IP_KINDS,
                       vxlan_checksum=None, **kw)


def test_generator_checksums_all_verify():
    """The traffic generator computes checksums its own way: the verifier finds none bad and
    the offload rewrites every one to the value it already had."""
    verify, offload = _verifier(), _offload()
    for frame in _frames(4000, 1):
        assert _run(verify, frame)[1]["drop"] == 0
        assert _run(offload, frame)[0] == frame
    stats = verify.counters()
    assert all(stats[c] == 0 for c in BAD_COUNTERS)
    assert min(stats["ipv4_good"], stats["tcp_good"], stats["udp_good"]) > 500
    assert stats["udp_unchecked"] > 0        # VXLAN outer headers carrying 0
    assert offload.stats["tcp_filled"] == stats["tcp_good"]


def test_each_spoiled_checksum_is_found_and_dropped():
    """One checksum field per frame set to a value that is not the right one (nor its other
    zero): one bad checksum of the right kind (two when it sits under a VXLAN outer UDP
    checksum, which then fails too), and the packet dropped."""
    rng = random.Random(2)
    verify = _verifier()
    found = 0
    for frame in _frames(2000, 2):
        meta = PARSER.parse(frame)
        fields = checksum_fields(frame, meta)
        if not fields:
            continue
        at = rng.choice(fields)
        old = int.from_bytes(frame[at:at + 2], "big")
        if old == 0:
            continue                        # a UDP "no checksum" stays unchecked whatever
        new = (old + rng.randrange(1, 0xFFFE)) % 0xFFFF or 0xFFFF   # not congruent to old
        outer = meta["l4_off"][0]
        covered = meta["vxlan"] and frame[outer + 6:outer + 8] != b"\0\0" and at > outer + 8
        before = {c: verify.stats[c] for c in BAD_COUNTERS}
        out = _run(verify, frame[:at] + new.to_bytes(2, "big") + frame[at + 2:])[1]
        grew = {c: verify.stats[c] - before[c] for c in BAD_COUNTERS}
        assert sum(grew.values()) == 1 + covered
        assert not covered or grew["udp_bad"] >= 1
        assert out["drop"] == 1
        found += 1
    assert found > 1400 and verify.stats["dropped"] == found


def test_offload_output_agrees_with_scapy():
    """Thousands of frames with spoiled checksums through the offload: every IPv4, TCP and UDP
    checksum that leaves equals scapy's full recomputation, bit for bit."""
    rng = random.Random(3)
    offload = _offload()
    frames = corrupt_checksums(rng, [f for f in _frames(3000, 3) if scapy_round_trips(f)], 0.6)
    mended = 0
    for frame in frames:
        out = _run(offload, frame)[0]
        assert out == scapy_recomputed(out)
        mended += out != frame
    assert mended > 1000


def test_vxlan_outer_checksum_covers_mended_inner():
    """Spoiled inner checksums under an outer UDP checksum: the inner ones are written first,
    and the outer one covers the inner frame as it leaves."""
    inner = Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2") / TCP(sport=1, dport=2) / (40 * b"i")
    pkt = (Ether(**MACS) / IP(src="192.0.2.1", dst="192.0.2.2") / UDP(sport=999, dport=4789)
           / VXLAN(vni=7) / inner)
    good = bytes(pkt)
    bad = bytearray(good)
    inner_ip = 14 + 20 + 8 + 8 + 14
    bad[inner_ip + 10:inner_ip + 12] = b"\x12\x34"            # inner IPv4 header checksum
    bad[inner_ip + 20 + 16:inner_ip + 20 + 18] = b"\x56\x78"  # inner TCP checksum
    out = _run(_offload(), bytes(bad))[0]
    assert out == good == scapy_recomputed(good)
    verify = _verifier()
    assert _run(verify, bytes(bad))[1]["drop"] == 1
    assert verify.stats["ipv4_bad"] == 1 and verify.stats["tcp_bad"] == 1
    assert verify.stats["udp_bad"] == 1 and verify.stats["ipv4_good"] == 1  # outer spoiled too


def test_udp_zero_checksum_rules():
    """UDP checksum 0: none over IPv4 (RFC 768), invalid over IPv6 (RFC 8200 8.1), allowed on
    a VXLAN outer header over IPv6 (RFC 7348 section 5, RFC 6935)."""
    def zeroed(pkt):
        pkt[UDP].chksum = 0
        return bytes(pkt)
    v4 = zeroed(Ether(**MACS) / IP() / UDP(sport=5, dport=6) / (30 * b"x"))
    v6 = zeroed(Ether(**MACS) / IPv6() / UDP(sport=5, dport=6) / (30 * b"x"))
    tunnel = zeroed(Ether(**MACS) / IPv6() / UDP(sport=5, dport=4789) / VXLAN(vni=1)
                    / Ether(**MACS) / IP() / TCP() / (20 * b"x"))
    verify = _verifier()
    assert _run(verify, v4)[1]["drop"] == 0 and verify.stats["udp_unchecked"] == 1
    assert _run(verify, v6)[1]["drop"] == 1 and verify.stats["udp_bad"] == 1
    assert _run(verify, tunnel)[1]["drop"] == 0 and verify.stats["udp_unchecked"] == 2
    offload = _offload()
    assert _run(offload, v4)[0] == v4
    assert Ether(_run(offload, v6)[0])[UDP].chksum == Ether(bytes(
        Ether(**MACS) / IPv6() / UDP(sport=5, dport=6) / (30 * b"x")))[UDP].chksum
    assert _run(offload, tunnel)[0] == tunnel


def test_padding_fragments_and_unhandled_outcomes():
    """Ethernet padding is not summed; fragments get their IPv4 header checked only; length
    errors, oversize frames and packets with nothing to check pass unchanged as skipped."""
    verify = _verifier(params=ChecksumVerify.check_params({"max_frame_bytes": 1536}))
    padded = bytes(Ether(**MACS) / IP() / TCP() / (10 * b"x")) + b"\xaa" * 20
    assert _run(verify, padded)[1]["drop"] == 0 and verify.stats["tcp_good"] == 1
    frag = bytearray(bytes(Ether(**MACS) / IP(flags="MF", proto=17) / (40 * b"f")))
    assert _run(verify, bytes(frag))[1]["drop"] == 0
    assert verify.stats["ipv4_good"] == 2 and verify.stats["udp_good"] == 0
    skipped = [
        bytes(Ether(**MACS) / IP(len=500) / UDP() / (30 * b"x")),               # length_error
        bytes(Ether(**MACS) / IP() / UDP(chksum=1) / (2000 * b"x")),            # oversize
        bytes(Ether(**MACS) / IPv6(nh=59) / (30 * b"x")),                       # nothing to check
    ]
    for frame in skipped:
        out = _run(verify, frame)
        assert out[0] == frame and out[1]["drop"] == 0
    assert verify.stats["skipped"] == 3 and verify.stats["oversize"] == 1
    assert verify.stats["udp_bad"] == 0


def test_offload_fill_enables():
    frame = bytearray(bytes(Ether(**MACS) / IP() / TCP() / (20 * b"x")))
    frame[24:26] = b"\0\0"                      # IPv4 header checksum
    frame[50:52] = b"\0\0"                      # TCP checksum
    for fill, mended in (({}, 2), ({"tcp": False}, 1), ({"ipv4": False, "tcp": False}, 0)):
        out = _run(_offload(**fill), bytes(frame))[0]
        assert sum(out[a:a + 2] != frame[a:a + 2] for a in (24, 50)) == mended


@pytest.mark.parametrize("cls, raw, message", [
    (VerifyConfig, {"drop": True}, "nt csum_verify: unknown config key 'drop' (known: drop_bad)"),
    (VerifyConfig, {"drop_bad": 1}, "nt csum_verify: drop_bad must be true or false, not 1"),
    (VerifyConfig, "yes", "nt csum_verify: config must be a table, not 'yes'"),
    (OffloadConfig, {"tcp": "on"}, "nt csum_offload: tcp must be true or false, not 'on'"),
    (OffloadConfig, {"sctp": True},
     "nt csum_offload: unknown config key 'sctp' (known: ipv4, tcp, udp)"),
])
def test_config_errors(cls, raw, message):
    kind = "csum_verify" if cls is VerifyConfig else "csum_offload"
    with pytest.raises(ConfigError) as info:
        cls.from_dict(kind, PARAMS, raw)
    assert str(info.value) == message


def test_config_and_params():
    assert OffloadConfig.from_dict("csum_offload", PARAMS, {"udp": False}).register_writes(
        PARAMS) == [("fill", 0b011)]
    assert VerifyConfig.from_dict("csum_verify", PARAMS, {"drop_bad": True}).register_writes(
        PARAMS) == [("drop_bad", 1)]
    with pytest.raises(ConfigError) as info:
        ChecksumOffload.check_params({"max_frame_bytes": 9000})
    assert str(info.value) == ("nt csum_offload: parameter max_frame_bytes must be one of "
                               "[1536, 2048, 4096, 9216, 16384], not 9000")
