"""Static NAT: translation rules and checksums in the model (checked by scapy's own checksum
computation) and configuration errors. The hardware against the model at 64 and 512 bits
(5,000 packets each, random idle and backpressure, 10% malformed) and saturation runs are in
tests/test_nt_contract.py."""

import ipaddress
import random

import pytest
from scapy.all import IP, TCP, UDP, Ether, IPv6, Raw, defragment, fragment

from supernic.desc.nt.nat import NatConfig, NatEntry
from supernic.hw.nt.nat import NatTranslator
from supernic.hw.nt.task import ConfigError
from supernic.sim.nt.checksum import ones_sum, words16
from supernic.sim.nt.checksum_offload import scapy_recomputed, scapy_round_trips
from supernic.sim.nt.nat import NatModel, draw_frames
from supernic.sim.parser_model import ParserModel

PARAMS = NatTranslator.check_params({})
PARSER = ParserModel()
# Explicit addresses: a bare Ether() makes scapy resolve the MAC of the IP destination.
MACS = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}


def _ip(text):
    return int(ipaddress.IPv4Address(text))


def _model(snat=(), dnat=()):
    model = NatModel(PARAMS)
    model.configure(NatConfig(list(snat), list(dnat)))
    return model


def _run(model, frame):
    return model.process(frame, PARSER.parse(frame))


def test_translated_checksums_agree_with_scapy():
    """Thousands of translated packets (SNAT, DNAT, both, NAPT, VXLAN inner with and without
    an outer UDP checksum): every checksum equals scapy's full recomputation, bit for bit.
    The generator's checksums are computed independently of scapy and of the model, and each
    input is first checked to be what scapy would send."""
    rng = random.Random(11)
    model = NatModel(NatTranslator.check_params({"snat_entries": 16, "dnat_entries": 16}))
    kinds = ("ipv4_udp", "ipv4_tcp", "ipv4_other", "vxlan")
    frames = draw_frames(rng, 5000, 0.0, sizes=((1.0, (60, 600)),), kinds=kinds, flows=8,
                         vxlan_checksum=None)
    # One slot per flow address (8 flows, outer and VXLAN inner): Basic NAT and NAPT slots.
    flows = {(f["src_ip"], f["dst_ip"]): f for f in model._flows(frames[:400])}.values()
    snat, dnat = [], []
    for k, f in enumerate(flows):
        snat.append(NatEntry(f["src_ip"], rng.getrandbits(32),
                             to_port=rng.getrandbits(16) if k % 2 else None))
        dnat.append(NatEntry(f["dst_ip"], rng.getrandbits(32), port=f["dport"] if k % 3 == 1
                             else None, to_port=rng.getrandbits(16) if k % 3 else None))
    model.configure(NatConfig(snat, dnat))
    translated = both = vxlan = 0
    for frame in frames:
        if not scapy_round_trips(frame):
            continue
        before = model.stats["snat_hits"], model.stats["dnat_hits"]
        out, meta = _run(model, frame)
        hit = [a - b for a, b in zip((model.stats["snat_hits"], model.stats["dnat_hits"]),
                                     before)]
        if not any(hit):
            assert out == frame
            continue
        translated += 1
        both += all(hit)
        vxlan += meta["vxlan"]
        assert out == scapy_recomputed(out)
        # The metadata describes the packet that leaves (contract rule 4).
        assert meta["flow"] == PARSER.parse(out)["flow"]
    assert translated >= 2000 and vxlan >= 200 and both >= 50


def _tcp_frame(src, dst, sport, dport, payload):
    """A TCP frame of at least 60 bytes (shorter ones are runts, which NTs skip)."""
    return bytes(Ether(**MACS) / IP(src=src, dst=dst) / TCP(sport=sport, dport=dport)
                 / Raw(payload.ljust(10, b".")))


def _fill_word(total):
    """The 16-bit word that brings a ones'-complement sum ``total`` to 0xFFFF (negative zero),
    so that the checksum over it computes to 0x0000."""
    return 0 if total == 0xFFFF else 0xFFFF - total


def _force_l4_checksum(build, want):
    """A frame from ``build(payload)`` whose L4 checksum, as scapy computes it, is ``want``
    (0x0000 for TCP, 0xFFFF for UDP: the same zero sum): the payload's first word is solved."""
    first = Ether(build(b"\0\0" + 4 * b"payload!")).payload.payload.chksum
    word = _fill_word(~first & 0xFFFF if first != 0xFFFF else 0xFFFF)
    frame = build(word.to_bytes(2, "big") + 4 * b"payload!")
    assert Ether(frame).payload.payload.chksum == want
    return frame


def test_zero_checksum_results_rfc1624_and_rfc768():
    """A TCP checksum that recomputes to 0x0000 comes out 0x0000 (eqn. 3 never yields the
    other zero here); a UDP one comes out 0xFFFF, as RFC 768 and scapy send a computed 0."""
    new = "192.0.2.99"
    model = _model(dnat=[NatEntry(_ip("10.0.0.2"), _ip(new))])
    # TCP: pick the frame as it must leave (checksum 0), then rebuild it with the old address.
    target = _force_l4_checksum(
        lambda p: _tcp_frame("10.0.0.1", new, 1000, 80, p), 0)
    pkt = Ether(target)
    pkt[IP].dst = "10.0.0.2"
    del pkt[IP].chksum, pkt[TCP].chksum
    out, _ = _run(model, bytes(pkt))
    assert Ether(out)[TCP].chksum == 0 and out == scapy_recomputed(out) == target
    # UDP: scapy sends a computed 0 as 0xFFFF.
    target = _force_l4_checksum(
        lambda p: bytes(Ether(**MACS) / IP(src="10.0.0.1", dst=new) / UDP(sport=5, dport=6)
                        / Raw(p)),
        0xFFFF)
    pkt = Ether(target)
    pkt[IP].dst = "10.0.0.2"
    del pkt[IP].chksum, pkt[UDP].chksum
    out, _ = _run(model, bytes(pkt))
    assert Ether(out)[UDP].chksum == 0xFFFF and out == scapy_recomputed(out) == target


def _ipv4_header_with_checksum(src, dst, want):
    """An IPv4 frame whose header checksum field is ``want`` and verifies: the identification
    is solved so that the other header words sum to 0xFFFF (checksum 0x0000 or 0xFFFF)."""
    def build(ident):
        return bytes(Ether(**MACS) / IP(src=src, dst=dst, id=ident, proto=1)
                     / Raw(b"\x08\0" + 30 * b"x"))
    hdr = bytearray(build(0)[14:34])
    hdr[10:12] = b"\0\0"
    frame = bytearray(build(_fill_word(ones_sum(words16(bytes(hdr))))))
    frame[24:26] = want.to_bytes(2, "big")
    assert ones_sum(words16(bytes(frame[14:34]))) == 0xFFFF   # it verifies
    return bytes(frame)


def test_ipv4_checksum_negative_zero_rfc1624():
    """RFC 1624 section 3: 0x0000 and 0xFFFF are both zero in ones'-complement arithmetic.
    A header that arrived carrying 0xFFFF (where scapy computes 0x0000) comes out with exactly
    scapy's checksum; only when every term is zero (both addresses 255.255.255.255 to 0.0.0.0
    and HC 0xFFFF) does eqn. 3 give 0xFFFF, which verifies as well as scapy's 0x0000."""
    frame = _ipv4_header_with_checksum("10.1.1.1", "10.2.2.2", 0xFFFF)
    model = _model(snat=[NatEntry(_ip("10.1.1.1"), _ip("172.16.0.7"))])
    out, _ = _run(model, frame)
    assert out == scapy_recomputed(out)
    assert ones_sum(words16(out[14:34])) == 0xFFFF

    frame = _ipv4_header_with_checksum("255.255.255.255", "255.255.255.255", 0xFFFF)
    model = _model(snat=[NatEntry(0xFFFFFFFF, 0)], dnat=[NatEntry(0xFFFFFFFF, 0)])
    out, _ = _run(model, frame)
    assert out[24:26] == b"\xff\xff"
    assert scapy_recomputed(out)[24:26] == b"\x00\x00"
    assert ones_sum(words16(out[14:34])) == 0xFFFF                    # both verify
    assert ones_sum(words16(scapy_recomputed(out)[14:34])) == 0xFFFF


def test_bad_checksum_stays_exactly_as_bad():
    """An incremental update keeps a wrong checksum wrong by the same amount (RFC 1624)."""
    model = _model(snat=[NatEntry(_ip("10.0.0.1"), _ip("198.51.100.1"), 6, 1000, 2000)])
    good = _tcp_frame("10.0.0.1", "10.0.0.2", 1000, 80, b"hello")
    bad = bytearray(good)
    bad[50:52] = (int.from_bytes(good[50:52], "big") ^ 0x0F0F).to_bytes(2, "big")
    out_good, _ = _run(model, good)
    out_bad, _ = _run(model, bytes(bad))
    assert out_good == scapy_recomputed(out_good)
    assert int.from_bytes(out_bad[50:52], "big") != int.from_bytes(out_good[50:52], "big")
    assert out_bad[:50] == out_good[:50] and out_bad[52:] == out_good[52:]
    assert Ether(out_bad)[TCP].sport == 2000


@pytest.mark.parametrize("l4", [UDP, TCP])
def test_fragments_reassemble_with_valid_checksums(l4):
    """Every fragment gets the new addresses; the first fragment's L4 checksum (over the whole
    datagram) is updated, so scapy's reassembly verifies. NAPT slots never apply to fragments."""
    payload = random.Random(3).randbytes(3100)
    datagram = IP(src="10.9.9.9", dst="10.8.8.8", id=77) / l4(sport=1234, dport=80) / payload
    frames = [bytes(Ether(**MACS) / f) for f in fragment(datagram, fragsize=1000)]
    assert len(frames) == 4
    model = _model(snat=[NatEntry(_ip("10.9.9.9"), _ip("192.0.2.1"), port=1234, to_port=9),
                         NatEntry(_ip("10.9.9.9"), _ip("192.0.2.2"))],
                   dnat=[NatEntry(_ip("10.8.8.8"), _ip("203.0.113.5"))])
    outs = []
    for frame in frames:
        out, meta = _run(model, frame)
        assert out[14 + 12:14 + 20] == bytes([192, 0, 2, 2, 203, 0, 113, 5])
        assert out == scapy_recomputed(out)       # IPv4 header checksums
        outs.append(Ether(out)[IP])
    assert model.hits["snat"] == [0, 4, 0, 0, 0, 0, 0, 0]
    whole = defragment(outs)[0]
    rebuilt = whole.copy()
    del rebuilt[l4].chksum
    assert whole[l4].chksum == IP(bytes(rebuilt))[l4].chksum
    assert whole[l4].sport == 1234


def test_slot_rules_priority_and_napt():
    """Lowest slot wins; protocol and port qualifiers; NAPT needs a parsed TCP/UDP header."""
    model = _model(dnat=[
        NatEntry(_ip("10.0.0.2"), _ip("1.1.1.1"), proto=17),
        NatEntry(_ip("10.0.0.2"), _ip("2.2.2.2"), port=443, to_port=8443),
        NatEntry(_ip("10.0.0.2"), _ip("3.3.3.3")),
    ])
    cases = [
        (bytes(Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(dport=443) / (20 * b"x")),
         "1.1.1.1", 443),
        (_tcp_frame("10.0.0.1", "10.0.0.2", 5, 443, b"x"), "2.2.2.2", 8443),
        (_tcp_frame("10.0.0.1", "10.0.0.2", 5, 444, b"x"), "3.3.3.3", 444),
    ]
    for frame, dst, dport in cases:
        out, meta = _run(model, frame)
        assert Ether(out)[IP].dst == dst and out == scapy_recomputed(out)
        assert meta["flow"]["dst_ip"] == _ip(dst) and meta["flow"]["dport"] == dport
    assert model.hits["dnat"][:3] == [1, 1, 1]


def test_udp_without_checksum_stays_zero():
    model = _model(snat=[NatEntry(_ip("10.0.0.1"), _ip("10.0.0.100"), to_port=7)])
    frame = bytearray(bytes(Ether(**MACS) / IP(src="10.0.0.1", dst="10.0.0.2") / UDP()
                            / (5 * b"abcd")))
    frame[40:42] = b"\0\0"
    out, _ = _run(model, bytes(frame))
    assert out[40:42] == b"\0\0" and Ether(out)[UDP].sport == 7
    assert out == scapy_recomputed(out)


def test_ipv6_and_non_ip_are_skipped():
    model = _model(snat=[NatEntry(0, 1)], dnat=[NatEntry(0, 2)])
    for frame in (bytes(Ether(**MACS) / IPv6() / UDP() / (b"x" * 20)),
                  bytes(Ether(type=0x88B5, **MACS) / (b"x" * 50))):
        assert _run(model, frame)[0] == frame
    out, meta = _run(model, bytes(Ether(**MACS) / IP(src="0.0.0.0", dst="0.0.0.0") / UDP()
                                  / (b"x" * 20)))
    assert Ether(out)[IP].src == "0.0.0.1" and Ether(out)[IP].dst == "0.0.0.2"
    assert model.stats["skipped"] == 2 and model.stats["snat_hits"] == 1


@pytest.mark.parametrize("raw, message", [
    ({"snat": [{"addr": "10.0.0.1"}]}, "nt nat: snat[0].to must be given"),
    ({"dnat": [{"addr": "10.0.0.256", "to": "1.2.3.4"}]},
     "nt nat: dnat[0].addr must be an IPv4 address such as '10.0.0.1', not '10.0.0.256'"),
    ({"snat": [{"addr": "10.0.0.1", "to": "::1"}]},
     "nt nat: snat[0].to must be an IPv4 address such as '10.0.0.1', not '::1'"),
    ({"snat": [{"addr": "10.0.0.1", "to": "1.2.3.4", "port": 70000}]},
     "nt nat: snat[0].port must be 'any' or a port 0-65535, not 70000"),
    ({"snat": [{"addr": "10.0.0.1", "to": "1.2.3.4", "to_port": "any"}]},
     "nt nat: snat[0].to_port must be a port 0-65535, not 'any'"),
    ({"snat": [{"addr": "10.0.0.1", "to": "1.2.3.4", "proto": "sctp"}]},
     "nt nat: snat[0].proto must be 'any', one of ['gre', 'icmp', 'tcp', 'udp'] or 0-255, "
     "not 'sctp'"),
    ({"snat": [{"addr": "10.0.0.1", "to": "1.2.3.4", "via": 1}]},
     "nt nat: snat[0] has unknown key 'via' (known: addr, port, proto, to, to_port)"),
    ({"snat": [{"addr": "10.0.0.1", "to": "1.2.3.4"}] * 9},
     "nt nat: snat must have at most 8 entries (build parameter snat_entries), not 9"),
    ({"snat": {"addr": "10.0.0.1"}},
     "nt nat: snat must be a list of tables, not {'addr': '10.0.0.1'}"),
    ({"snat": ["10.0.0.1"]}, "nt nat: snat[0] must be a table, not '10.0.0.1'"),
    ({"nat": []}, "nt nat: unknown config key 'nat' (known: dnat, snat)"),
    ([], "nt nat: config must be a table, not []"),
])
def test_config_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        NatConfig.from_dict("nat", PARAMS, raw)
    assert str(info.value) == message


def test_config_and_param_round_trip():
    config = NatConfig.from_dict("nat", PARAMS, {
        "snat": [{"addr": "10.0.0.1", "to": "192.0.2.1", "proto": "tcp", "port": 22,
                  "to_port": 2222}],
        "dnat": [{"addr": "198.51.100.7", "to": "10.0.0.7"}]})
    assert config.snat == [NatEntry(_ip("10.0.0.1"), _ip("192.0.2.1"), 6, 22, 2222)]
    assert config.dnat == [NatEntry(_ip("198.51.100.7"), _ip("10.0.0.7"))]
    writes = config.register_writes(PARAMS)
    assert writes.count(("entry_write", 1)) == PARAMS["snat_entries"] + PARAMS["dnat_entries"]
    assert {n for n, _ in writes} <= {r.name for r in NatTranslator.registers(PARAMS)}
    with pytest.raises(ConfigError, match="nt nat: parameter dnat_entries must be between 1 "
                                          "and 64, not 65"):
        NatTranslator.check_params({"dnat_entries": 65})
