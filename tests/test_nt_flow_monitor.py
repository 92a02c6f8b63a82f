"""Flow monitor: table and count-min sketch semantics in the model (checked against a naive
per-flow count), the H3 row hashes and configuration errors. The hardware against the model
at 64 and 512 bits (5,000 packets with repeated flows and back-to-back repeats, random idle
and backpressure; the whole table and sketch read back, sketch queries, clear) and saturation
are in tests/test_nt_contract.py."""

import collections
import math
import random

import pytest

from supernic.desc.nt.flow_monitor import (
    FlowMonitorConfig, sketch_column, sketch_input, sketch_matrix)
from supernic.hw.nt.flow_monitor import FlowMonitor
from supernic.hw.nt.task import ConfigError
from supernic.sim.nt.base import skips
from supernic.sim.nt.flow_monitor import FlowMonitorModel, flow_key, query_hash
from supernic.sim.parser_model import ParserModel
from supernic.sim.traffic import random_packets

SMALL = {"entries": 64, "sketch_rows": 4, "sketch_width": 64}


def _run(params, config, frames):
    model = FlowMonitorModel(FlowMonitor.check_params(params))
    model.configure(config)
    parser = ParserModel()
    truth = collections.defaultdict(lambda: [0, 0, None])   # key -> packets, bytes, query
    for frame in frames:
        meta = parser.parse(frame)
        model.process(frame, meta)
        if not skips(meta) and meta["l3_kind"][0] and config.enabled:
            t = truth[flow_key(meta["flow"])]
            t[0] += 1
            t[1] += len(frame)
            t[2] = meta["flow_hash"], meta["flow"]["proto"]
    return model, truth


@pytest.fixture(scope="module")
def frames():
    return [f for _, f in random_packets(4000, 21, (60, 600), 0.1, flows=50)]


def test_table_counts_whole_flows(frames):
    """A bucket is claimed by a flow's first packet and never released, so every flow in the
    table has all its packets and bytes there; every other packet was a collision."""
    model, truth = _run(SMALL, FlowMonitorConfig(), frames)
    assert 0 < len(model.table) <= SMALL["entries"] < len(truth)
    for bucket, (key, packets, nbytes) in model.table.items():
        assert truth[key][:2] == [packets, nbytes]
        assert truth[key][2][0] % SMALL["entries"] == bucket
    in_table = sum(packets for _, packets, _ in model.table.values())
    assert in_table + model.collisions == sum(t[0] for t in truth.values())
    assert model.collisions > 0
    assert model.stats["skipped"] == model.stats["packets"] - sum(t[0] for t in truth.values())


@pytest.mark.parametrize("what", ["bytes", "packets"])
def test_sketch_estimates(frames, what):
    """Count-min (Cormode and Muthukrishnan 2005): never below the truth; above it by at most
    e/w of the total with probability 1 - e**-d, so nearly every flow is within the bound."""
    model, truth = _run(SMALL, FlowMonitorConfig(sketch=what), frames)
    index = 1 if what == "bytes" else 0
    total = sum(t[index] for t in truth.values())
    assert all(sum(row) == total for row in model.sketch)
    bound = math.e / SMALL["sketch_width"] * total
    over = [model.estimate(*t[2]) - t[index] for t in truth.values()]
    assert min(over) >= 0
    assert sum(o <= bound for o in over) >= 0.9 * len(over)
    heavy = max(truth.values(), key=lambda t: t[index])
    assert model.estimate(*heavy[2]) - heavy[index] <= bound


def test_query_by_flow_key(frames):
    """A flow's 5-tuple gives the hash the sketch was indexed with, so software can ask for
    any flow it knows, seen or not."""
    model, truth = _run(SMALL, FlowMonitorConfig(sketch="packets"), frames[:500])
    for key, (packets, _, (flow_hash, _)) in list(truth.items())[:50]:
        flow = dict(zip(("src_ip", "dst_ip", "sport", "dport", "proto", "ipv6"), key))
        assert query_hash(flow) == flow_hash
        assert model.estimate(query_hash(flow), flow["proto"]) >= packets


def test_h3_rows_are_universal_and_distinct():
    """Each row's column of two different inputs collides with probability 1/w; rows differ;
    a TCP and a UDP flow with one flow hash land apart."""
    bits = 6
    matrices = [sketch_matrix(r, bits) for r in range(4)]
    assert len({tuple(q) for q in matrices}) == 4
    rng = random.Random(3)
    pairs = [(rng.getrandbits(40), rng.getrandbits(40)) for _ in range(20_000)]
    for q in matrices:
        rate = sum(sketch_column(q, a) == sketch_column(q, b) for a, b in pairs) / len(pairs)
        assert abs(rate - 1 / 2 ** bits) < 0.006
    # Linear over GF(2), as the XOR gates compute it.
    a, b = 0x12345678, 0x0F0F1234
    assert sketch_column(matrices[0], a ^ b) == (sketch_column(matrices[0], a)
                                                 ^ sketch_column(matrices[0], b))
    for h in (0, 0xDEADBEEF, 0x80000001):
        assert any(sketch_column(q, sketch_input(h, 6)) != sketch_column(q, sketch_input(h, 17))
                   for q in matrices)


def test_disabled_and_non_ip_are_skipped(frames):
    model, _ = _run(SMALL, FlowMonitorConfig(enabled=False), frames[:200])
    assert model.stats["skipped"] == 200 and not model.table and model.collisions == 0
    model, _ = _run(SMALL, FlowMonitorConfig(), frames[:200])
    assert 0 < model.stats["skipped"] < 200


def test_clear_empties_everything(frames):
    model, _ = _run(SMALL, FlowMonitorConfig(), frames[:500])
    model.clear()
    assert not model.table and model.collisions == 0 and not any(map(any, model.sketch))


@pytest.mark.parametrize("raw, message", [
    ([], "nt flow_monitor: config must be a table, not []"),
    ({"sketchy": 1},
     "nt flow_monitor: unknown config key 'sketchy' (known: enabled, sketch)"),
    ({"enabled": "yes"}, "nt flow_monitor: enabled must be true or false, not 'yes'"),
    ({"sketch": "flows"}, "nt flow_monitor: sketch must be 'bytes' or 'packets', not 'flows'"),
])
def test_config_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        FlowMonitorConfig.from_dict("flow_monitor", FlowMonitor.check_params({}), raw)
    assert str(info.value) == message


def test_config_and_params():
    params = FlowMonitor.check_params({})
    config = FlowMonitorConfig.from_dict("flow_monitor", params, {"sketch": "packets"})
    assert config.register_writes(params) == [("control", 0b01)]
    assert FlowMonitorConfig().register_writes(params) == [("control", 0b11)]
    with pytest.raises(ConfigError) as info:
        FlowMonitor.check_params({"entries": 1000})
    assert str(info.value) == "nt flow_monitor: parameter entries must be a power of two, " \
                              "not 1000"
    with pytest.raises(ConfigError) as info:
        FlowMonitor.check_params({"sketch_rows": 9})
    assert str(info.value) == "nt flow_monitor: parameter sketch_rows must be between 1 and " \
                              "8, not 9"
