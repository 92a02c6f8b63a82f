"""VLAN push and pop: the models checked with scapy and against the parser (contract rule 4),
and configuration errors. The hardware against the models at 64 and 512 bits (5,000 packets
each, 10% malformed, random idle and backpressure) and saturation at 64 and 1,500 bytes are in
tests/test_nt_contract.py."""

import random

import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether

from supernic.hw.nt.task import ConfigError
from supernic.desc.nt.vlan import VlanPopConfig, VlanPushConfig
from supernic.hw.nt.vlan import VlanPop, VlanPush
from supernic.sim.nt.vlan import VlanPopModel, VlanPushModel, light_mix
from supernic.sim.nt.base import contract_differences as base_contract_differences
from supernic.sim.parser_model import ParserModel
from supernic.sim.traffic import PacketSpec, build, random_packets

PARSER = ParserModel()
# Not compared: the NT keeps the ingress hash and timestamp and does not drop or mark (rule 4);
# the tail flags travel from the input's last beat (hw/nt/realign.py).


def process(model, frame):
    meta = PARSER.parse(frame)
    return model.process(frame, meta)


def push_model(**config):
    model = VlanPushModel(VlanPush.check_params({}))
    model.configure(VlanPushConfig.from_dict("vlan_push", {}, {"vid": 100, **config}))
    return model


def pop_model():
    model = VlanPopModel(VlanPop.check_params({}))
    model.configure(VlanPopConfig())
    return model


def frame_of(rng, size=200, vlans=(), kind="ipv4_udp"):
    l3, l4 = kind.split("_")
    return build(PacketSpec(size=size, vlans=vlans, l3=l3, l4=l4), rng)


def rebuilt_by_scapy(frame):
    """scapy's own lengths and checksums (RFC 791/768/9293/8200) for a frame, with a UDP
    checksum of 0 (none, RFC 768) kept as 0."""
    pkt = Ether(frame)
    for layer in pkt.iterpayloads():
        if isinstance(layer, IP):
            del layer.len, layer.chksum
        elif isinstance(layer, IPv6):
            del layer.plen
        elif isinstance(layer, UDP):
            del layer.len
            if layer.chksum:
                del layer.chksum
        elif isinstance(layer, TCP):
            del layer.chksum
    return bytes(Ether(bytes(pkt)))


def contract_differences(out_frame, out_meta):
    return base_contract_differences(PARSER, out_frame, out_meta)


# ---- models -------------------------------------------------------------------------------


def test_push_inserts_tag_after_macs_verified_by_scapy():
    rng = random.Random(1)
    model = push_model(vid=0x123, pcp=5, dei=1, tpid=0x88A8)
    for kind in ("ipv4_udp", "ipv4_tcp", "ipv6_udp", "ipv6_tcp"):
        frame = frame_of(rng, 300, kind=kind)
        out, meta = process(model, frame)
        assert out == frame[:12] + bytes.fromhex("88a8b123") + frame[12:]
        pkt = Ether(out)
        assert pkt.type == 0x88A8
        tag = pkt.payload  # scapy's Dot1AD, a Dot1Q bound to the S-tag TPID
        assert isinstance(tag, Dot1Q)
        assert (tag.prio, tag.dei, tag.vlan, tag.type) == (5, 1, 0x123, Ether(frame).type)
        assert rebuilt_by_scapy(out) == out  # lengths and checksums untouched by the tag
        assert (meta["vlan_count"], meta["vid"], meta["vid2"]) == (1, 0x123, 0)
        assert (meta["tenant_kind"], meta["tenant_key"]) == (1, 0x123)


def test_push_on_tagged_frame_becomes_outer_tag():
    rng = random.Random(2)
    frame = frame_of(rng, vlans=((0x8100, 7),))
    out, meta = process(push_model(vid=9), frame)
    pkt = Ether(out)
    assert [pkt[Dot1Q].vlan, pkt[Dot1Q].payload.vlan] == [9, 7]
    assert (meta["vlan_count"], meta["vid"], meta["vid2"]) == (2, 9, 7)
    assert meta["l3_off"][0] == 22 and meta["payload_off"] == PARSER.parse(frame)["payload_off"] + 4


def test_push_skips_two_tags_and_headers_at_the_window_edge():
    rng = random.Random(3)
    model = push_model()
    two = frame_of(rng, vlans=((0x88A8, 7), (0x8100, 8)))
    assert process(model, two)[0] == two
    # A 64-byte window and headers ending at byte 62 (TCP with 8 option bytes): 62 + 4 > 64.
    small = VlanPushModel(VlanPush.check_params({}), header_bytes=64)
    small.configure(VlanPushConfig(vid=5))
    frame = build(PacketSpec(size=200, l3="ipv4", l4="tcp", tcp_doff=7), rng)
    meta = ParserModel(64).parse(frame)
    assert meta["payload_off"] == 62
    assert small.process(frame, meta)[0] == frame
    assert small.stats == {"packets": 1, "dropped": 0, "skipped": 1}
    assert model.stats == {"packets": 1, "dropped": 0, "skipped": 1}


def test_pop_removes_outer_tag_verified_by_scapy():
    rng = random.Random(4)
    model = pop_model()
    frame = frame_of(rng, 300, vlans=((0x88A8, 30), (0x8100, 31)), kind="ipv6_tcp")
    out, meta = process(model, frame)
    assert out == frame[:12] + frame[16:]
    pkt = Ether(out)
    assert pkt.type == 0x8100 and pkt[Dot1Q].vlan == 31
    assert rebuilt_by_scapy(out) == out
    assert (meta["vlan_count"], meta["vid"], meta["vid2"], meta["tenant_key"]) == (1, 31, 0, 31)
    untagged = frame_of(rng)
    assert process(model, untagged)[0] == untagged
    assert model.stats == {"packets": 2, "dropped": 0, "skipped": 1}


def test_pop_reads_third_tag_and_pads_short_frames():
    rng = random.Random(5)
    model = pop_model()
    for tags, count in ((3, 2), (4, 3)):
        vlans = tuple((0x8100, 40 + k) for k in range(tags))
        out, meta = process(model, frame_of(rng, 200, vlans=vlans))
        assert (meta["vlan_count"], meta["vid"], meta["vid2"]) == (count, 41, 42)
        assert not contract_differences(out, meta)
    frame = frame_of(rng, 60, vlans=((0x8100, 3),))  # IEEE 802.1Q: pad to the minimum
    out, meta = process(model, frame)
    assert out == frame[:12] + frame[16:] + bytes(4) and len(out) == 60
    assert not meta["flags"]["runt"] and not contract_differences(out, meta)


@pytest.mark.parametrize("make", [push_model, pop_model], ids=["push", "pop"])
def test_metadata_describes_the_frame_that_leaves(make):
    """Contract rule 4 on 6,000 random valid packets (tags 0 to 4, VXLAN, options, fragments):
    the parser run on every output frame gives the NT's metadata.

    Excluded, for pop only: inputs flagged ``too_deep``. The parser stopped there because a
    header crossed its window or it ran out of walk steps; with 4 bytes less in front, or one
    tag less to walk, it can see further into the popped frame, and knowing what it would find
    means parsing the frame again. The NT keeps the old walk's result. (Push cannot make the
    walk go further; the window edge is skipped, and the walk-step budget is never reached by
    frames with at most two outer tags and one inner tag, which is all the generator makes.)"""
    model = make()
    rng = random.Random(6)
    frames = light_mix(rng, 6000, 0.0, vlan_counts=(0, 1, 2, 3, 4))
    changed = excluded = 0
    for frame in frames:
        meta = PARSER.parse(frame)
        out, out_meta = model.process(frame, meta)
        if out == frame:
            continue
        changed += 1
        if make is pop_model and meta["flags"]["too_deep"]:
            excluded += 1
            continue
        assert not contract_differences(out, out_meta), (frame[:64].hex(), out_meta)
    assert changed > 2000 and excluded < changed / 20


@pytest.mark.parametrize("make", [push_model, pop_model], ids=["push", "pop"])
def test_outputs_verified_by_scapy(make):
    """scapy rebuilds every changed frame with its own lengths and checksums: byte-equal.
    Inputs scapy itself does not rebuild byte for byte (random TCP option bytes that it
    re-encodes) are left out."""
    model = make()
    frames = [f for _, f in random_packets(400, 7, (60, 600), 0.0, vlan_counts=(0, 1, 2),
                                          kinds=("ipv4_udp", "ipv4_tcp", "ipv6_udp", "ipv6_tcp",
                                                 "vxlan"))]
    changed = 0
    for frame in frames:
        if rebuilt_by_scapy(frame) != frame:
            continue
        out, _ = process(model, frame)
        if out != frame:
            changed += 1
            assert rebuilt_by_scapy(out) == out
    assert changed > 100


# ---- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize("raw, message", [
    ({}, "nt vlan_push: setting vid is required"),
    ({"vid": 4095}, "nt vlan_push: vid must be an integer from 0 to 4094, not 4095"),
    ({"vid": "10"}, "nt vlan_push: vid must be an integer from 0 to 4094, not '10'"),
    ({"vid": 1, "pcp": 8}, "nt vlan_push: pcp must be an integer from 0 to 7, not 8"),
    ({"vid": 1, "dei": True}, "nt vlan_push: dei must be an integer from 0 to 1, not True"),
    ({"vid": 1, "tpid": 0x9100},
     "nt vlan_push: tpid must be one of 0x8100 or 0x88a8, not 37120"),
    ({"vid": 1, "prio": 3},
     "nt vlan_push: unknown config key 'prio' (known: dei, pcp, tpid, vid)"),
    ([1], "nt vlan_push: configuration must be a table, not [1]"),
])
def test_push_config_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        VlanPushConfig.from_dict("vlan_push", {}, raw)
    assert str(info.value) == message


def test_pop_config_takes_no_keys():
    assert VlanPopConfig.from_dict("vlan_pop", {}, {}).register_writes({}) == []
    with pytest.raises(ConfigError) as info:
        VlanPopConfig.from_dict("vlan_pop", {}, {"vid": 1})
    assert str(info.value) == "nt vlan_pop: unknown config key 'vid' (known: none)"


def test_push_config_writes_its_registers():
    config = VlanPushConfig.from_dict("vlan_push", {}, {"vid": 7, "pcp": 3, "tpid": 0x88A8})
    writes = dict(config.register_writes({}))
    assert writes == {"tpid": 0x88A8, "pcp": 3, "dei": 0, "vid": 7}
    names = {r.name for r in VlanPush.registers({})}
    assert set(writes) <= names and {"packets", "dropped", "skipped"} <= names
