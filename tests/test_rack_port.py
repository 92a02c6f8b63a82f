"""The rack port and the redirect action in gateware (hw/nic/redirect.py, rack_egress.py,
rack_ingress.py) on the virtual device of the rack test NIC (tests/data/nic_rack.toml), against
their model (sim/nic/rack.py) and the chain models.

Tenant 0 runs the metered chain and is redirected, its flows spread over peers 7 and 9 by flow
bucket; tenant 1 runs the web chain and only the flows of half its buckets are redirected (to
peer 7), the others run here. Random and malformed frames of both tenants and frames of no tenant go in on both endpoint
ports, and rack frames on the rack port: good ones (web frames for this NIC), and ones for
another NIC, of another EtherType or version, runts, garbage. Sources idle and the sink pushes
back at random. Every packet must come out as the models say or be counted: a redirected one
as its rack frame with ``redirect`` set in its tag, a rack frame's inner frame as the web
chain's output with the rack port in its tag, a bad rack frame in ``rx_bad`` only.
"""

import asyncio
import random

import pytest

from supernic.desc.chain import load_chain
from supernic.desc.config import load_config
from supernic.desc.meta import field_offsets
from supernic.desc.nic.rack import RACK_ETHERTYPE, header_beats, nic_mac
from supernic.desc.nic.shape import NicShape
from supernic.driver.control import ControlPlane
from supernic.driver.traffic import delivered_tags
from supernic.sim.build import generated_design
from supernic.sim.chain_model import ChainModel, chain_traffic
from supernic.desc.nic.classifier import ClassifierConfig
from supernic.sim.nic.classifier import ClassifierModel
from supernic.sim.nic.nic_model import tag_frame
from supernic.sim.nic.rack import RackPortModel, decapsulate, encapsulate
from supernic.sim.parser_model import ParserModel
from supernic.sim.traffic import random_packets
from supernic.sim.vdev import DeviceRegisterBus, VirtualDevice

NIC_RACK = "tests/data/nic_rack.toml"
DATA_WIDTH, HEADER_BYTES = 64, 256
NIC_ID, PEER, PEER2, OTHER = 3, 7, 9, 5
#: Tenant 0: all buckets redirected, these to PEER2; tenant 1: only these buckets redirected.
T0_PEER2_BUCKETS, T1_BUCKETS = 0x00F0, 0x0F0F


@pytest.fixture(scope="module")
def device():
    paths = generated_design(load_config(NIC_RACK))
    with VirtualDevice.build(paths["verilog"], paths["regmap"]) as dev:
        yield dev


@pytest.fixture(scope="module")
def plane(device):
    """One control plane for the module's tests (it keeps its records in memory)."""
    async def wait():
        device.run(256)
    return ControlPlane(DeviceRegisterBus(device), device.regmap, None, wait=wait)


def _run(coro):
    return asyncio.run(coro)


def _rack_frames(rng, parser, web_frames, n):
    """``[(frame, good)]``: rack frames for this NIC carrying web frames, and bad ones."""
    hsize = header_beats(DATA_WIDTH) * DATA_WIDTH // 8
    out = []
    for i in range(n):
        inner = web_frames[i % len(web_frames)]
        kind = rng.choice(["good"] * 6 + ["other_nic", "ethertype", "version", "runt",
                                          "garbage", "empty"])
        frame = encapsulate(inner, DATA_WIDTH, NIC_ID, OTHER, 0)
        if kind == "other_nic":
            frame = nic_mac(NIC_ID + 1) + frame[6:]
        elif kind == "ethertype":
            frame = frame[:12] + (RACK_ETHERTYPE ^ 0x100).to_bytes(2, "big") + frame[14:]
        elif kind == "version":
            frame = frame[:14] + bytes([9]) + frame[15:]
        elif kind == "runt":
            frame = frame[:rng.randint(1, hsize)]
        elif kind == "garbage":
            frame = bytes(rng.getrandbits(8) for _ in range(rng.randint(20, 200)))
        elif kind == "empty":
            frame = b""
        out.append((frame, decapsulate(frame, DATA_WIDTH, NIC_ID) is not None))
    return out


def test_redirect_and_rack_port_against_the_models(device, plane):
    metered, web = load_chain("chains/metered.toml"), load_chain("chains/web.toml")
    _run(plane.deploy("chains/metered.toml", 0))
    _run(plane.deploy("chains/web.toml", 1))
    regs = plane.regs
    for reg, value in (("nic_id", NIC_ID), ("t0_peer", PEER), ("t0_peer2", PEER2),
                       ("t0_peer2_buckets", T0_PEER2_BUCKETS), ("t1_peer", PEER),
                       ("t1_buckets", T1_BUCKETS), ("redirect_enable", 0b11)):
        _run(regs.write("rack", reg, value))
    model = RackPortModel(DATA_WIDTH, 4, NIC_ID)
    model.enable, model.peers[0], model.peers2[0] = 0b11, PEER, PEER2
    model.peer2_buckets[0], model.peers[1], model.buckets[1] = T0_PEER2_BUCKETS, PEER, T1_BUCKETS

    rng, parser = random.Random(8), ParserModel(HEADER_BYTES)
    frames = {0: [], 1: [], 2: []}         # per port: (frame, what it is)
    web_frames = [tag_frame(f, parser.parse(f), 100)
                  for f in chain_traffic(web, 300, 5, 0.1, "mixed", HEADER_BYTES)]
    metered_frames = [tag_frame(f, parser.parse(f), rng.choice(metered.keys))
                      for f in chain_traffic(metered, 300, 6, 0.1, "mixed", HEADER_BYTES)]
    keys = set(metered.keys) | set(web.keys)
    stray = [f for _, f in random_packets(60, 7, "mixed", 0.3)
             if parser.parse(f)["tenant_key"] not in keys]
    # What each frame is, by the classifier's model (a malformed frame may lose its key).
    classifier = ClassifierModel(ClassifierConfig.from_tenants(
        [(0, metered.keys), (1, web.keys)]), 0)
    names = {0: "metered", 1: "web", None: "stray"}

    def label(frame):
        return names[classifier.classify(parser.parse(frame))]
    for port in (0, 1):
        mix = [(f, label(f)) for f in metered_frames[port::2] + web_frames[port::2] + stray]
        rng.shuffle(mix)
        frames[port] = mix
    good_inner = [f for f in web_frames if label(f) == "web"]
    frames[2] = [(f, "good" if good else "bad")
                 for f, good in _rack_frames(rng, parser, good_inner, 240)]
    for port in range(3):
        device.set_idle(port, 0.2, seed=port + 1)
        for frame, _ in frames[port]:
            device.push(port, frame)
    device.set_backpressure(0.3, seed=9)
    device.run_until_drained(quiet=2000)
    device.set_backpressure(0)
    out = device.pop()
    description = device.regmap
    tags = delivered_tags(out, description)
    offset, _ = field_offsets(NicShape.from_description(description).nic_fields())[
        "tag.redirect"]
    redirect = [p.first_user >> offset & 1 for p in out]

    # Inputs by (port, seq): the classifier numbers what reaches it, so bad rack frames,
    # dropped in front of the rack port's parser, take no number.
    named = {}
    for port in (0, 1):
        for k, (frame, what) in enumerate(frames[port]):
            named[(port, k)] = (frame, what)
    good = [(f, w) for f, w in frames[2] if w == "good"]
    for k, (frame, what) in enumerate(good):
        named[(2, k)] = (frame, what)

    web_model = ChainModel(web, DATA_WIDTH, HEADER_BYTES)
    seen = set()
    for k, packet in enumerate(out):
        key = (int(tags["port"][k]), int(tags["seq"][k]))
        assert key in named and key not in seen, f"output {k} names no input {key}"
        seen.add(key)
        frame, what = named[key]
        flow_hash = parser.parse(frame)["flow_hash"]
        tenant = {"metered": 0, "web": 1, "good": 1}.get(what)
        assert tenant is not None and int(tags["tenant"][k]) == tenant, (what, key)
        if key[0] != 2 and model.redirects(tenant, flow_hash):
            assert redirect[k] == 1, f"{what} packet {key} was not redirected"
            want = encapsulate(frame, DATA_WIDTH, model.peer(tenant, flow_hash), NIC_ID, key[0])
            assert packet.data == want, key
        else:
            assert redirect[k] == 0, f"{what} packet {key} left as a rack frame"
            inner = decapsulate(frame, DATA_WIDTH, NIC_ID) if key[0] == 2 else frame
            assert what in ("web", "good"), (what, key)
            result, meta = web_model.process(inner, parser.parse(inner))
            assert not meta["drop"] and packet.data == result, f"{what} {key} differs"
    # What did not come out was dropped and counted: by the web chain's ACL (the model says
    # which), by the classifier (stray frames, no tenant), at the rack port, or, for web
    # packets the model passes, in tenant 1's queue (the sink pushed back).
    missing = [named[k] for k in named if k not in seen]
    acl = queued = 0
    for frame, what in missing:
        assert what in ("web", "good", "stray"), f"a {what} packet was lost"
        if what == "web":
            assert not model.redirects(1, parser.parse(frame)["flow_hash"]), "lost redirect"
        if what in ("web", "good"):
            inner = decapsulate(frame, DATA_WIDTH, NIC_ID) if what == "good" else frame
            if web_model.process(inner, parser.parse(inner))[1]["drop"]:
                acl += 1
            else:
                queued += 1
    counted = {f"{block}.{name}": _run(regs.read(block, name)) for block, name in (
        ("egress", "t1_dropped"), ("scheduler", "t1_queue_drops"), ("store", "drops"),
        ("store", "stall_drops"), ("classifier0", "dropped"), ("classifier1", "dropped"),
        ("classifier2", "dropped"))}
    lost_in_nic = (counted["scheduler.t1_queue_drops"] + counted["store.drops"]
                   + counted["store.stall_drops"])
    # A packet the queue dropped never met the ACL: the ACL drops at most the model's.
    assert counted["egress.t1_dropped"] + lost_in_nic == acl + queued
    assert 0 < counted["egress.t1_dropped"] <= acl and queued <= lost_in_nic
    stray_missing = sum(1 for _, what in missing if what == "stray")
    assert stray_missing == sum(1 for p in (0, 1) for _, w in frames[p] if w == "stray")
    assert counted["classifier0.dropped"] + counted["classifier1.dropped"] == stray_missing
    assert counted["classifier2.dropped"] == 0     # every good rack frame is a web one
    for frame, what in frames[2]:
        model.receive(frame)
    for port in (0, 1):
        for frame, what in frames[port]:
            if what in ("metered", "web"):
                model.send(0 if what == "metered" else 1, frame, port,
                           parser.parse(frame)["flow_hash"])
    got = {name: _run(regs.read("rack", name)) for name in model.counters()}
    assert got == model.counters()
    assert got["rx_bad"] > 0 and got["rx"] > 0 and got["t0_redirected"] > 0
    assert 0 < got["t1_redirected"] < sum(1 for p in (0, 1) for _, w in frames[p] if w == "web")
    _run(regs.write("rack", "redirect_enable", 0))


def test_redirect_choice_holds_for_a_whole_packet(device, plane):
    """Flipping ``redirect_enable`` while packets flow never splits one: every output is
    either a whole rack frame or a whole packet through the queues, and none is lost."""
    regs = plane.regs
    parser = ParserModel(HEADER_BYTES)
    web = load_chain("chains/web.toml")
    _run(plane.refresh())
    if 1 not in plane.deployed:
        _run(plane.deploy("chains/web.toml", 1))
    # Everything this test relies on is written here: under xdist it may run alone.
    _run(regs.write("rack", "nic_id", NIC_ID))
    _run(regs.write("rack", "t1_peer", PEER))
    _run(regs.write("rack", "t1_buckets", 0xFFFF))
    frames = [tag_frame(f, parser.parse(f), 100)
              for f in chain_traffic(web, 200, 12, 0.0, (400, 1500), HEADER_BYTES)]
    start = device.ingress_cycles(0)
    for frame in frames:
        device.push(0, frame)
    rng = random.Random(3)
    for _ in range(60):
        device.run(rng.randint(5, 120))
        _run(regs.write("rack", "redirect_enable", rng.choice([0, 0b10])))
    _run(regs.write("rack", "redirect_enable", 0))
    device.run_until_drained(quiet=2000)
    out = device.pop()
    tags = delivered_tags(out, device.regmap)
    offset, _ = field_offsets(NicShape.from_description(device.regmap).nic_fields())[
        "tag.redirect"]
    web_model = ChainModel(web, DATA_WIDTH, HEADER_BYTES)
    base = len(start)
    ways, seen = [0, 0], set()
    for k, packet in enumerate(out):
        assert int(tags["port"][k]) == 0
        i = (int(tags["seq"][k]) - base) % 65536
        seen.add(i)
        frame = frames[i]
        if packet.first_user >> offset & 1:
            assert packet.data == encapsulate(frame, DATA_WIDTH, PEER, NIC_ID, 0), i
            ways[1] += 1
        else:
            result, meta = web_model.process(frame, parser.parse(frame))
            assert not meta["drop"] and packet.data == result, i
            ways[0] += 1
    assert ways[0] > 0 and ways[1] > 0, ways
    for i, frame in enumerate(frames):
        if i not in seen:    # not out either way: the web chain's ACL dropped it
            assert web_model.process(frame, parser.parse(frame))[1]["drop"], i
