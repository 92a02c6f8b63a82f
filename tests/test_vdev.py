"""The virtual device (sim/vdev): generated designs in Verilator behind the C++ harness.

The parser-only design and the web chain at 64 bits, random and malformed packets with random
idle and backpressure: every delivered packet equal to the model's (bytes, first- and last-beat
metadata including the ingress timestamp), every packet delivered or counted, counters read
back through the driver's discovery and register access; the same frames on cocotb give the
same counts and counters.
"""

import asyncio
import collections
import copy
from pathlib import Path

import pytest

from supernic.driver.discovery import check_supported, discover, read_register, write_register
from supernic.desc.chain import load_chain
from supernic.desc.config import DesignConfig
from supernic.desc.meta import TAIL_FLAGS
from supernic.hw.parser.meta import meta_layout
from supernic.sim.build import generated_design
from supernic.sim.chain_model import ChainModel, chain_traffic
from supernic.sim.layout_codec import decode, diff
from supernic.sim.parser_model import ParserModel, is_error
from supernic.sim.session import chain_design, chain_simulator, run_bench
from supernic.sim.traffic import random_packets
from supernic.sim.vdev import DeviceRegisterBus, DrainTimeout, VirtualDevice

WEB = Path(__file__).resolve().parent.parent / "chains" / "web.toml"
HEADER_BYTES = 256


@pytest.fixture(scope="module")
def parser_device():
    paths = generated_design(DesignConfig(data_width=64))
    with VirtualDevice.build(paths["verilog"], paths["regmap"]) as device:
        yield device


@pytest.fixture(scope="module")
def web_device():
    paths, _ = chain_design(WEB, DesignConfig(data_width=64))
    with VirtualDevice.build(paths["verilog"], paths["regmap"]) as device:
        yield device


def _first_beat(meta):
    """The metadata on a packet's first beat: the tail flags are only known at its end."""
    first = copy.deepcopy(meta)
    for flag in TAIL_FLAGS:
        first["flags"][flag] = 0
    return first


def _meta_problems(layout, got, want_meta):
    problems = diff(want_meta, decode(layout, got.last_user))
    if got.beats > 1:
        problems += diff(_first_beat(want_meta), decode(layout, got.first_user))
    return problems


def test_parser_matches_model(parser_device):
    device = parser_device
    device.reset()
    device.set_idle(0, 0.3, seed=1)
    device.set_backpressure(0.3, seed=2)
    frames = [f for _, f in random_packets(1500, seed=7, malformed_fraction=0.15)]
    for frame in frames:
        device.push(0, frame)
    bus = DeviceRegisterBus(device)
    regmap = device.regmap["registers"]
    # A register read in the middle of the traffic: the AXI4-Lite master runs cycle by cycle
    # while the streams keep moving.
    device.run(2000)
    mid = asyncio.run(read_register(bus, regmap, "parser", "packets"))
    assert 0 < mid < len(frames)
    device.run_until_drained(quiet=100)
    out = device.pop()
    assert len(out) == len(frames)
    accepted = device.ingress_cycles(0)
    model, layout = ParserModel(HEADER_BYTES), meta_layout(HEADER_BYTES)
    bad = []
    for index, (frame, got) in enumerate(zip(frames, out)):
        meta = model.parse(frame)
        meta["ts"] = accepted[index] % 2 ** 32
        problems = _meta_problems(layout, got, meta)
        if got.data != frame:
            problems.append("data differs")
        if problems:
            bad.append(f"packet {index}: {problems[:4]}")
        assert got.first_cycle <= got.last_cycle
        assert got.first_cycle > accepted[index]
    assert not bad, "\n".join(bad[:5])
    counters = {name: asyncio.run(read_register(bus, regmap, "parser", name))
                for name in ("packets", "bytes", "malformed")}
    assert counters["packets"] == len(frames)
    assert counters["bytes"] == sum(map(len, frames))
    assert counters["malformed"] == sum(is_error(model.parse(f)) for f in frames) > 0


def test_discovery_through_register_bus(parser_device):
    bus = DeviceRegisterBus(parser_device)
    blocks = asyncio.run(discover(bus))
    assert check_supported(blocks) == []
    assert [b.name for b in blocks] == [b["name"] for b in
                                        parser_device.regmap["registers"]["blocks"]]
    value, response = asyncio.run(bus.read_word(blocks[0].base))
    assert value == blocks[0].type_id and response == 0


def _run_chain(device, spec, frames, idle, backpressure):
    """Configure, send ``frames``, drain; compare with the chain model the way chain_tb does."""
    device.reset()
    device.set_idle(0, idle, seed=3)
    device.set_backpressure(backpressure, seed=4)
    bus, regmap = DeviceRegisterBus(device), device.regmap["registers"]

    async def configure():
        for node in spec.node_list():
            for reg, value in node.config.register_writes(node.params):
                await write_register(bus, regmap, node.name, reg, value)
    asyncio.run(configure())
    for frame in frames:
        device.push(0, frame)
    device.run_until_drained(quiet=2000)
    accepted = device.ingress_cycles(0)
    model, parser = ChainModel(spec, 64, HEADER_BYTES), ParserModel(HEADER_BYTES)
    layout = meta_layout(HEADER_BYTES)
    pending = collections.deque(enumerate(frames))
    bad = []

    def expected():
        while pending:
            index, frame = pending.popleft()
            meta = parser.parse(frame)
            meta["ts"] = accepted[index] % 2 ** 32
            want = model.process(frame, meta)
            if model.deliver(*want):
                return index, want
        return None, None

    delivered = device.pop()
    for got in delivered:
        index, want = expected()
        if index is None:
            bad.append("a packet came out after the model had delivered every packet")
            break
        problems = _meta_problems(layout, got, want[1])
        if got.data != want[0]:
            problems.append("data differs")
        if problems:
            bad.append(f"packet {index}: {problems[:4]}")
    while pending:
        index, _ = expected()
        if index is not None:
            bad.append(f"packet {index} never came out")

    async def counters():
        out = {"chain": {k: await read_register(bus, regmap, "chain", k)
                         for k in ("delivered", "dropped", "dropped_bytes")}}
        for node in spec.node_list():
            out[node.name] = {k: await read_register(bus, regmap, node.name, k)
                              for k in model.models[node.name].counters()}
        return out
    return delivered, model, asyncio.run(counters()), bad


def test_chain_matches_model(web_device):
    spec = load_chain(WEB)
    frames = chain_traffic(spec, 2000, 11, 0.1, size_dist="light", header_bytes=HEADER_BYTES)
    delivered, model, counters, bad = _run_chain(web_device, spec, frames, 0.3, 0.3)
    assert not bad, "\n".join(bad[:5])
    assert counters["chain"] == model.stats
    assert model.stats["delivered"] == len(delivered) > 0
    assert model.stats["delivered"] + model.stats["dropped"] == len(frames)
    for node in spec.node_list():
        assert counters[node.name] == model.models[node.name].counters(), node.name
        assert counters[node.name]["packets"] == len(frames)


def test_chain_agrees_with_cocotb(web_device, tmp_path):
    """The chain bench on cocotb and the device, same frames: same counts and counters."""
    spec, seed, n = load_chain(WEB), 5, 300
    sim = chain_simulator(WEB, DesignConfig(data_width=64))
    result = run_bench(sim, "random_traffic", {
        "seed": seed, "packets": n, "idle": "none", "backpressure": "none",
        "malformed": 0.1, "sizes": "light"}, test_dir=tmp_path,
        module="supernic.sim.tb.chain_tb")
    assert result["mismatches"] == 0 and not result["problems"]
    frames = chain_traffic(spec, n, seed, 0.1, size_dist="light", header_bytes=HEADER_BYTES)
    delivered, model, counters, bad = _run_chain(web_device, spec, frames, 0.0, 0.0)
    assert not bad, "\n".join(bad[:5])
    assert len(delivered) == result["delivered"]
    assert model.stats["dropped"] == result["dropped"]
    assert counters["chain"] == result["counters"]["chain"]
    for name, values in result["counters"]["nodes"].items():
        assert counters[name] == values, name


def test_contract_errors(parser_device):
    device = parser_device
    device.reset()
    with pytest.raises(ValueError, match=r"Port must be an integer in \[0, 1\), not 1"):
        device.push(1, b"\x00" * 60)
    with pytest.raises(TypeError, match="Frame must be bytes, not str"):
        device.push(0, "frame")
    with pytest.raises(ValueError, match=r"Backpressure probability must be a probability "
                                         r"in \[0, 1\), not 1.5"):
        device.set_backpressure(1.5)
    # A sink that almost never takes a beat: the drain gives up with a clear error, not a hang.
    device.set_backpressure(0.999, seed=1)
    for _ in range(20):
        device.push(0, bytes(1500))
    with pytest.raises(DrainTimeout, match="did not drain within 5000 cycles"):
        device.run_until_drained(max_cycles=5000)
    device.reset()
    device.set_backpressure(0.0)
    assert device.cycle == 0 and device.queued(0) == 0 and device.pop() == []
    device.push(0, b"")        # an empty frame is one beat with no byte kept: it still ends
    device.push(0, bytes(range(60)))
    device.run_until_drained(quiet=50)
    out = device.pop()
    assert [d.data for d in out] == [b"", bytes(range(60))]


def test_cocotb_rate_is_marginal_or_says_it_is_not():
    """Two runs of different length give the marginal rate; on a loaded machine the long run
    may take no longer than the short one, and then the long run's whole rate stands in (a
    negative rate once failed `snic bench device`)."""
    from supernic.sim.vdev.bench import _marginal
    assert _marginal([(100, 2.0), (1000, 3.0)]) == {
        "cycles": 1000, "cycles_per_s": 900.0, "method": "marginal"}
    slow_start = _marginal([(100, 2.0), (1000, 1.9)])
    assert slow_start["method"] == "whole run" and slow_start["cycles_per_s"] == 1000 / 1.9
