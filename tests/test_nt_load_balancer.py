"""L4 load balancer: the rewrite against scapy's checksums, Maglev flow affinity in the model,
the exact mod-M circuit and configuration errors. The hardware against the model at 64 and
512 bits (5,000 packets each, random idle and backpressure, VXLAN with and without outer
checksums) and saturation are in tests/test_nt_contract.py."""

import collections
import ipaddress
import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.layers.vxlan import VXLAN

from supernic.desc.nt.load_balancer import Backend, LoadBalancerConfig
from supernic.hw.nt.load_balancer import L4LoadBalancer, flow_index
from supernic.hw.nt.task import ConfigError
from supernic.sim.nt.base import skips
from supernic.sim.nt.load_balancer import (
    LoadBalancerModel, balanced_layer, rewrite_destination, strip_udp_checksum)
from supernic.sim.parser_model import ParserModel
from supernic.sim.traffic import random_packets

PARAMS = L4LoadBalancer.check_params({})
PARSER = ParserModel()


def _checksums_ok(frame):
    """Rebuild ``frame`` with scapy computing every IPv4, TCP and UDP checksum (a UDP checksum
    of 0, "none", stays 0) and compare: equal bytes mean every checksum is right."""
    pkt = Ether(frame)
    layer = pkt
    while layer:
        if isinstance(layer, (IP, TCP)) or (isinstance(layer, UDP) and layer.chksum != 0):
            layer.chksum = None
        layer = layer.payload
    return bytes(pkt) == frame


def _v4(addr):
    return int(ipaddress.IPv4Address(addr))


def _inner_vxlan(inner_l4, outer=IP(src="192.0.2.1", dst="192.0.2.2"), outer_csum=True):
    inner = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
             / IP(src="172.16.0.5", dst="10.0.0.100") / inner_l4 / (b"tenant data " * 5))
    pkt = Ether() / outer / UDP(sport=51000, dport=4789) / VXLAN(vni=77) / inner
    frame = bytes(pkt)
    if not outer_csum:
        pkt = Ether(frame)
        pkt[UDP].chksum = 0
        frame = bytes(pkt)
    return frame


REWRITE_CASES = {
    "tcp": Ether() / IP(src="1.2.3.4", dst="10.0.0.100") / TCP(sport=4000, dport=80) / (b"x" * 40),
    "udp": Ether() / IP(src="1.2.3.4", dst="10.0.0.100") / UDP(sport=4000, dport=53)
    / (b"q" * 30),
    "udp_no_checksum": Ether() / IP(src="1.2.3.4", dst="10.0.0.100")
    / UDP(sport=4000, dport=53, chksum=0) / (b"q" * 30),
    "vlan_ip_options": Ether() / Dot1Q(vlan=5) / IP(src="1.2.3.4", dst="10.0.0.100",
                                                   options=b"\x01" * 8)
    / TCP(sport=1, dport=443, options=[("MSS", 1460)]) / (b"y" * 10),
    "vxlan_tcp": _inner_vxlan(TCP(sport=3333, dport=80)),
    "vxlan_udp": _inner_vxlan(UDP(sport=3333, dport=80)),
    "vxlan_udp_no_inner_checksum": _inner_vxlan(UDP(sport=3333, dport=80, chksum=0)),
    "vxlan_no_outer_checksum": _inner_vxlan(UDP(sport=3333, dport=80), outer_csum=False),
    "vxlan_over_ipv6": _inner_vxlan(UDP(sport=3333, dport=80),
                                    outer=IPv6(src="2001:db8::1", dst="2001:db8::2")),
    "vxlan_over_ipv6_no_inner_checksum": _inner_vxlan(
        UDP(sport=3333, dport=80, chksum=0), outer=IPv6(src="2001:db8::1", dst="2001:db8::2")),
}


@pytest.mark.parametrize("case", list(REWRITE_CASES))
@pytest.mark.parametrize("port", [None, 8080])
def test_rewrite_keeps_every_checksum_right(case, port):
    frame = bytes(REWRITE_CASES[case])
    assert _checksums_ok(frame)
    meta = PARSER.parse(frame)
    layer = balanced_layer(meta)
    assert layer == (1 if case.startswith("vxlan") else 0)
    new_port = meta["flow"]["dport"] if port is None else port
    out = rewrite_destination(frame, meta, _v4("10.9.8.7"), new_port)
    assert len(out) == len(frame) and _checksums_ok(out)
    pkt = Ether(out)
    ip = pkt[VXLAN].payload[IP] if layer else pkt[IP]
    l4 = ip.payload
    assert ip.dst == "10.9.8.7" and l4.dport == new_port
    if case.endswith("no_checksum") or case.endswith("no_inner_checksum"):
        assert l4.chksum == 0                                  # RFC 768: none stays none
    if case == "vxlan_no_outer_checksum":
        assert pkt[UDP].chksum == 0
    # Only the destination words and checksums change.
    changed = {i for i, (a, b) in enumerate(zip(frame, out)) if a != b}
    ip_off, l4_off = meta["l3_off"][layer], meta["l4_off"][layer]
    allowed = set(range(ip_off + 10, ip_off + 12)) | set(range(ip_off + 16, ip_off + 20)) \
        | set(range(l4_off + 2, l4_off + 4)) | set(range(l4_off + 6, l4_off + 8)) \
        | set(range(l4_off + 16, l4_off + 18)) \
        | set(range(meta["l4_off"][0] + 6, meta["l4_off"][0] + 8))
    assert changed and changed <= allowed


def test_rewrite_random_frames_against_scapy():
    """Generated IPv4 TCP/UDP and VXLAN frames (tags, outer checksums on and off). Frames
    whose random IP or TCP option bytes scapy does not re-serialise byte for byte are left
    out: there the rebuild differs before any rewrite."""
    rng = random.Random(11)
    frames = [f for _, f in random_packets(600, 12, (60, 400), 0.0,
                                           kinds=("ipv4_udp", "ipv4_tcp", "vxlan"),
                                           vxlan_checksum=None)]
    done = 0
    for frame in frames:
        meta = PARSER.parse(frame)
        if balanced_layer(meta) is None or not _checksums_ok(frame):
            continue
        out = rewrite_destination(frame, meta, rng.getrandbits(32), rng.randint(1, 65535))
        assert _checksums_ok(out), frame.hex()
        done += 1
    assert done > 200


def test_strip_udp_checksum_against_scapy():
    """The helper that gives test traffic UDP without checksums keeps the outer one right."""
    for case in ("udp", "vxlan_udp", "vxlan_over_ipv6"):
        frame = bytes(REWRITE_CASES[case])
        out = strip_udp_checksum(frame, PARSER.parse(frame))
        pkt = Ether(out)
        inner = pkt[VXLAN].payload if case != "udp" else pkt
        assert inner[UDP].chksum == 0 and _checksums_ok(out)


def _config(**kw):
    raw = {"vip": "10.0.0.100", "backends": [{"ip": f"10.1.0.{i}"} for i in range(1, 6)]}
    raw.update(kw)
    return LoadBalancerConfig.from_dict("l4lb", PARAMS, raw)


def _model(config, params=PARAMS):
    model = LoadBalancerModel(params)
    model.configure(config)
    return model


def test_flows_stay_on_their_backend():
    """Same flow, same backend, over many packets; and the flows spread over all backends."""
    config = _config(backends=[{"ip": f"10.1.0.{i}", "port": 9000 + i} for i in range(1, 6)])
    model = _model(config)
    frames = model.aim(random.Random(1), [f for _, f in random_packets(
        3000, 2, (60, 300), 0.0, flows=40, kinds=("ipv4_udp", "ipv4_tcp", "vxlan"))], 1.0)
    placed = collections.defaultdict(set)
    for frame in frames:
        meta = PARSER.parse(frame)
        key = tuple(meta["flow"].values())
        out, out_meta = model.process(frame, meta)
        if meta["flow"]["dst_ip"] == config.vip and balanced_layer(meta) is not None:
            placed[key].add((out_meta["flow"]["dst_ip"], out_meta["flow"]["dport"]))
            assert PARSER.parse(out)["flow"] == out_meta["flow"]   # rule 4: metadata follows
            assert out_meta["flow_hash"] == meta["flow_hash"]      # the ingress hash stays
    assert len(placed) > 100
    assert all(len(backends) == 1 for backends in placed.values())
    assert {b for s in placed.values() for b in s} == {
        (b.ip, b.port) for b in config.backends}


def test_backend_without_port_keeps_the_port():
    model = _model(_config(backends=[{"ip": "10.1.0.1"}]))
    frame = bytes(REWRITE_CASES["tcp"])
    out, meta = model.process(frame, PARSER.parse(frame))
    assert Ether(out)[IP].dst == "10.1.0.1" and Ether(out)[TCP].dport == 80
    assert meta["flow"]["dport"] == 80 and model.stats["skipped"] == 0


@pytest.mark.parametrize("what, config, frame", [
    ("other address", {}, Ether() / IP(dst="10.0.0.101") / TCP(dport=80)),
    ("other port", {"port": 443}, Ether() / IP(dst="10.0.0.100") / TCP(dport=80)),
    ("other protocol", {"proto": "udp"}, Ether() / IP(dst="10.0.0.100") / TCP(dport=80)),
    ("disabled", {"enabled": False}, Ether() / IP(dst="10.0.0.100") / TCP(dport=80)),
    ("no L4 header", {}, Ether() / IP(dst="10.0.0.100", proto=1) / (b"\x08" + b"\0" * 30)),
    ("fragment", {}, Ether() / IP(dst="10.0.0.100", flags="MF") / UDP(dport=80) / (b"f" * 8)),
    ("IPv6", {}, Ether() / IPv6(dst="::a00:64") / TCP(dport=80)),
    ("runt", {}, (Ether() / IP(dst="10.0.0.100") / UDP(dport=80))),
])
def test_skipped(what, config, frame):
    model = _model(_config(**config))
    frame = bytes(frame)
    out, meta = model.process(frame, PARSER.parse(frame))
    assert out == frame and model.stats == {"packets": 1, "dropped": 0, "skipped": 1}, what


def test_matching_port_and_protocol():
    model = _model(_config(port=80, proto="tcp"))
    frame = bytes(REWRITE_CASES["tcp"])
    out, _ = model.process(frame, PARSER.parse(frame))
    assert out != frame and model.stats["skipped"] == 0


@pytest.mark.parametrize("size", [3, 251, 1021, 65521, 131071])
def test_flow_index_is_exactly_mod_m(size):
    """The divider-free mod-M circuit against Python's %, in Amaranth's simulator."""
    m = Module()
    value = Signal(32)
    total, reduce = flow_index(m, value, size)
    index = reduce(total)
    rng = random.Random(size)
    cases = [0, 1, size - 1, size, 2 ** 32 - 1] + [rng.getrandbits(32) for _ in range(300)]
    sim = Simulator(m)

    async def bench(ctx):
        for v in cases:
            ctx.set(value, v)
            assert ctx.get(index) == v % size, v

    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("raw, message", [
    ([], "nt l4lb: config must be a table, not []"),
    ({"vip": "10.0.0.1", "backends": [{"ip": "1.1.1.1"}], "vips": 1},
     "nt l4lb: unknown config key 'vips' (known: backends, enabled, port, proto, vip)"),
    ({"vip": "10.0.0.256", "backends": [{"ip": "1.1.1.1"}]},
     "nt l4lb: vip must be an IPv4 address such as '10.0.0.1', not '10.0.0.256'"),
    ({"vip": "::1", "backends": [{"ip": "1.1.1.1"}]},
     "nt l4lb: vip must be an IPv4 address such as '10.0.0.1', not '::1'"),
    ({"vip": "10.0.0.1", "port": 0, "backends": [{"ip": "1.1.1.1"}]},
     "nt l4lb: port must be a port 1-65535 or 'any', not 0"),
    ({"vip": "10.0.0.1", "proto": "icmp", "backends": [{"ip": "1.1.1.1"}]},
     "nt l4lb: proto must be 'any', 'tcp', 'udp', 6 or 17, not 'icmp'"),
    ({"vip": "10.0.0.1", "enabled": 1, "backends": [{"ip": "1.1.1.1"}]},
     "nt l4lb: enabled must be true or false, not 1"),
    ({"vip": "10.0.0.1", "backends": []},
     "nt l4lb: backends must be a non-empty list of tables, not []"),
    ({"vip": "10.0.0.1", "backends": [{"ip": "1.1.1.1"}] * 17},
     "nt l4lb: backends must number at most 16 (build parameter backends), not 17"),
    ({"vip": "10.0.0.1", "backends": ["1.1.1.1"]},
     "nt l4lb: backends[0] must be a table, not '1.1.1.1'"),
    ({"vip": "10.0.0.1", "backends": [{"ip": "1.1.1.1", "weight": 2}]},
     "nt l4lb: backends[0] has unknown key 'weight' (known: ip, name, port)"),
    ({"vip": "10.0.0.1", "backends": [{"ip": "1.1.1"}]},
     "nt l4lb: backends[0].ip must be an IPv4 address such as '10.0.0.1', not '1.1.1'"),
    ({"vip": "10.0.0.1", "backends": [{"ip": "1.1.1.1", "port": 70000}]},
     "nt l4lb: backends[0].port must be a port 1-65535 (omit it to keep the destination "
     "port), not 70000"),
    ({"vip": "10.0.0.1", "backends": [{"ip": "1.1.1.1", "name": ""}]},
     "nt l4lb: backends[0].name must be a non-empty string, not ''"),
    ({"vip": "10.0.0.1", "backends": [{"ip": "1.1.1.1"}, {"ip": "1.1.1.1"}]},
     "nt l4lb: backends[1] name must be unique, not '1.1.1.1:0'"),
])
def test_config_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        LoadBalancerConfig.from_dict("l4lb", PARAMS, raw)
    assert str(info.value) == message


def test_param_errors():
    with pytest.raises(ConfigError) as info:
        L4LoadBalancer.check_params({"table_size": 1024})
    assert str(info.value) == "nt l4lb: parameter table_size must be a prime, not 1024"
    with pytest.raises(ConfigError) as info:
        L4LoadBalancer.check_params({"backends": 0})
    assert str(info.value) == "nt l4lb: parameter backends must be between 1 and 256, not 0"


def test_register_writes_load_the_whole_table():
    config = _config(port=80, proto="tcp")
    writes = config.register_writes(PARAMS)
    assert writes[0] == ("control", 0) and writes[-1] == ("control", 0b111)
    assert writes.count(("table_write", 1)) == PARAMS["table_size"]
    assert writes.count(("backend_write", 1)) == len(config.backends)
    names = {r.name for r in L4LoadBalancer.registers(PARAMS)}
    assert {name for name, _ in writes} <= names
    assert Backend(_v4("10.1.0.1")).key == "10.1.0.1:0"


def test_random_traffic_covers_every_rewrite_path():
    """The bench's traffic (the model's test_case) balances plain and VXLAN flows, TCP and
    UDP, with and without UDP and outer checksums: every path of the rewrite is compared."""
    model = LoadBalancerModel(PARAMS)
    config, frames = model.test_case(random.Random(7), 4000, 0.1)
    model.configure(config.__class__(config.vip, None, None, config.backends))  # match all
    seen = collections.Counter()
    for frame in frames:
        meta = PARSER.parse(frame)
        if skips(meta) or not model.matches(meta):
            continue
        layer = balanced_layer(meta)
        at = meta["l4_off"][layer]
        tcp = meta["l4_kind"][layer] == 1
        csum = int.from_bytes(frame[at + (16 if tcp else 6):][:2], "big")
        outer = int.from_bytes(frame[meta["l4_off"][0] + 6:][:2], "big") if layer else None
        seen[("vxlan" if layer else "plain", "tcp" if tcp else "udp" if csum else "udp0",
              None if outer is None else bool(outer))] += 1
    for path in [("plain", "tcp", None), ("plain", "udp", None), ("plain", "udp0", None)] + [
            ("vxlan", l4, outer) for l4 in ("tcp", "udp", "udp0") for outer in (True, False)]:
        assert seen[path] >= 3, (path, seen)
