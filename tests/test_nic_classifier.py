"""Tenant classifier: entry semantics in the model, configuration errors, and the hardware
against the model on Verilator (random and malformed traffic with VLAN and VXLAN keys that hit
and miss, random idle and backpressure, both default actions; line rate under saturation)."""

import random
from pathlib import Path

import pytest

from supernic.desc.chain import load_chain
from supernic.hw.nic.classifier import TenantClassifier
from supernic.desc.nic.classifier import (ClassifierConfig, ClassifierEntry, DefaultAction, KeyKind, classifier_block)
from supernic.desc.nic.shape import NicShape
from supernic.desc.meta import TenantKind
from supernic.sim.nic.classifier import ClassifierModel
from supernic.sim.parser_model import ParserModel
from supernic.sim.session import run_bench
from supernic.sim.tb.classifier_tb import classifier_simulator, classifier_traffic

SHAPE = NicShape(data_width=64, tenants=5, ports=3)
CHAINS = Path(__file__).resolve().parent.parent / "chains"
TB = "supernic.sim.tb.classifier_tb"


def _meta(kind=TenantKind.NONE, key=0, proto=17, dport=80):
    return {"tenant_kind": int(kind), "tenant_key": key,
            "flow": {"proto": proto, "dport": dport, "sport": 1, "src_ip": 0, "dst_ip": 0,
                     "ipv6": 0}}


def _classify(entries, meta, port=0, default=None):
    config = ClassifierConfig(entries, DefaultAction.DROP if default is None
                              else DefaultAction.TENANT, default or 0)
    return ClassifierModel(config, port).classify(meta)


def test_key_kinds():
    vlan, vni = _meta(TenantKind.VLAN, 100), _meta(TenantKind.VNI, 100)
    none = _meta()
    assert _classify([ClassifierEntry(1, 100)], vlan) == 1
    assert _classify([ClassifierEntry(1, 100)], vni) == 1
    assert _classify([ClassifierEntry(1, 100, kind=KeyKind.VLAN)], vni) is None
    assert _classify([ClassifierEntry(1, 100, kind=KeyKind.VNI)], vni) == 1
    # No key: only a catch-all (kind any, mask 0) takes it, whatever its key bits.
    assert _classify([ClassifierEntry(1, 0)], none) is None
    assert _classify([ClassifierEntry(1, 0, 0xFF)], none) is None
    assert _classify([ClassifierEntry(1, 0x123, 0, KeyKind.VLAN)], none) is None
    assert _classify([ClassifierEntry(1, 0x123, 0)], none) == 1


def test_masks_ports_proto_and_ranges():
    meta = _meta(TenantKind.VNI, 0x12345, proto=6, dport=443)
    assert _classify([ClassifierEntry(2, 0x12000, 0xFFF000)], meta) == 2
    assert _classify([ClassifierEntry(2, 0x13000, 0xFFF000)], meta) is None
    assert _classify([ClassifierEntry(2, 0x12345, ports=(1, 2))], meta, port=0) is None
    assert _classify([ClassifierEntry(2, 0x12345, ports=(1, 2))], meta, port=2) == 2
    assert _classify([ClassifierEntry(2, 0x12345, proto=17)], meta) is None
    assert _classify([ClassifierEntry(2, 0x12345, proto=6)], meta) == 2
    assert _classify([ClassifierEntry(2, 0x12345, dport=(444, 500))], meta) is None
    assert _classify([ClassifierEntry(2, 0x12345, dport=(443, 443))], meta) == 2


def test_priority_default_counters_and_seq():
    config = ClassifierConfig([ClassifierEntry(3, 7, proto=6), ClassifierEntry(1, 7),
                               ClassifierEntry(2, 7)], DefaultAction.TENANT, 4)
    model = ClassifierModel(config, 1)
    tags = [model.tag(_meta(TenantKind.VLAN, 7, proto=p)) for p in (6, 17)]
    tags.append(model.tag(_meta(TenantKind.VLAN, 8)))
    assert [t["tenant"] for t in tags] == [3, 1, 4]
    assert [t["seq"] for t in tags] == [0, 1, 2]
    assert all(t["port"] == 1 and t["beats"] == 0 and t["region"] == 0 for t in tags)
    assert model.hits == [1, 1, 0]
    assert model.counters() == {"packets": 3, "unmatched": 1, "dropped": 0}
    config.default_action = DefaultAction.DROP
    assert model.tag(_meta(TenantKind.VLAN, 8)) is None
    assert model.counters() == {"packets": 4, "unmatched": 2, "dropped": 1}
    model.next_seq = 2 ** 16 - 1
    assert model.tag(_meta(TenantKind.VLAN, 7))["seq"] == 2 ** 16 - 1
    assert model.tag(_meta(TenantKind.VLAN, 7))["seq"] == 0


def test_from_chain_specifications():
    specs = [load_chain(CHAINS / f"{name}.toml") for name in ("web", "metered", "secure")]
    config = ClassifierConfig.from_tenants([(i, s.keys) for i, s in enumerate(specs)],
                                           default=None, shape=SHAPE, entries=16)
    assert [(e.tenant, e.key, e.kind, e.key_mask) for e in config.entries] == [
        (0, 100, KeyKind.ANY, 0xFFFFFF), (1, 10, KeyKind.ANY, 0xFFFFFF),
        (1, 20, KeyKind.ANY, 0xFFFFFF), (2, 30, KeyKind.ANY, 0xFFFFFF)]
    assert config.default_action == DefaultAction.DROP
    model = ClassifierModel(config, 0)
    assert model.classify(_meta(TenantKind.VNI, 20)) == 1
    assert model.classify(_meta(TenantKind.VLAN, 30)) == 2
    assert model.classify(_meta(TenantKind.VLAN, 31)) is None
    config = ClassifierConfig.from_tenants([(0, [5])], default=3)
    assert (config.default_action, config.default_tenant) == (DefaultAction.TENANT, 3)


@pytest.mark.parametrize("call, message", [
    (lambda: ClassifierConfig.from_tenants([(5, [1])], shape=SHAPE),
     "Classifier entry 0 tenant must be below 5 (nic.tenants), not 5"),
    (lambda: ClassifierConfig.from_tenants([(1, [2 ** 24])]),
     "Tenant 1 key must be a VLAN ID or VXLAN VNI (0 to 16777215), not 16777216"),
    (lambda: ClassifierConfig.from_tenants([(0, [1]), (1, [1])]),
     "Tenant key 1 must belong to one tenant, not to tenants 0 and 1"),
    (lambda: ClassifierConfig.from_tenants([(0, list(range(17)))], shape=SHAPE, entries=16),
     "Classifier entries must number at most 16 (the table size), not 17"),
    (lambda: ClassifierConfig.from_tenants([(0, [1])], default=7, shape=SHAPE),
     "Classifier default tenant must be below 5 (nic.tenants), not 7"),
    (lambda: ClassifierConfig([ClassifierEntry(0, ports=(3,))]).check(SHAPE, 16),
     "Classifier entry 0 ports must be below 3 (nic.ports), not (3,)"),
    (lambda: ClassifierEntry(0, 2 ** 24),
     "Classifier entry key must be a 24-bit integer (0 to 16777215), not 16777216"),
    (lambda: ClassifierEntry(0, dport=(90, 80)),
     "Classifier entry dport must be a range (lo, hi) within 0-65535 with lo <= hi, "
     "not (90, 80)"),
    (lambda: ClassifierEntry(0, proto=256),
     "Classifier entry proto must be 0 (any) or an IP protocol 1-255, not 256"),
    (lambda: ClassifierEntry(0, kind=3),
     "Classifier entry kind must be a KeyKind (0 any, 1 VLAN, 2 VNI), not 3"),
    (lambda: TenantClassifier(SHAPE, 3),
     "Classifier port must be an integer from 0 to 2, not 3"),
    (lambda: TenantClassifier(SHAPE, 0, entries=65),
     "Classifier entries must be an integer from 1 to 64, not 65"),
])
def test_errors(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


def test_register_writes_cover_the_table():
    block = classifier_block("classifier", SHAPE, 8)
    assert (block.type_id, block.version) == (0x434C4153, 0x0001_0000)
    config = ClassifierConfig.random(random.Random(3), SHAPE, 8)
    writes = config.register_writes(block)
    assert writes.count(("entry_write", 1)) == 8
    assert [v for r, v in writes if r == "entry_index"] == list(range(8))
    assert {name for name, _ in writes} <= {r.name for r in block.registers}
    any_port = ClassifierConfig([ClassifierEntry(0, 1)]).register_writes(block)
    assert ("entry_ports", 0b111) in any_port


def test_random_traffic_exercises_the_table():
    """The bench's traffic and table: keys of both kinds hit and miss, catch-alls apply."""
    frames = classifier_traffic(random.Random(1), 600, 0.1)
    parser = ParserModel()
    metas = [parser.parse(f) for f in frames]
    config = ClassifierConfig.random(random.Random(2), SHAPE, 16, metas[:300])
    hit = {(m["tenant_kind"], any(e.matches(m, 2) for e in config.entries)) for m in metas}
    assert {(1, True), (1, False), (2, True), (2, False), (0, False)} <= hit


@pytest.fixture(scope="module")
def simulator():
    return classifier_simulator(SHAPE, port=2, entries=16)


@pytest.mark.parametrize("default", ["drop", "tenant"])
def test_hardware_matches_model(simulator, default, tmp_path):
    result = run_bench(simulator, "random_traffic", {
        "seed": 10 if default == "drop" else 14, "packets": 2000,
        "default": default, "malformed": 0.1,
        "idle": "random", "backpressure": "random",
    }, test_dir=tmp_path, module=TB)
    assert result["mismatches"] == 0
    assert result["counters"] == result["model_counters"]
    assert result["hits"] == result["model_hits"]
    counters = result["counters"]
    assert counters["packets"] == result["packets_out"] + counters["dropped"]
    assert counters["unmatched"] > 0 and sum(1 for h in result["hits"] if h) >= 3
    if default == "drop":
        assert counters["dropped"] == counters["unmatched"] > 0
    else:
        assert counters["dropped"] == 0
    kinds = result["kinds"]
    assert kinds.get("hit_kind1", 0) > 0 and kinds.get("hit_kind2", 0) > 0
    assert kinds.get("miss_kind1", 0) > 0 and kinds.get("miss_kind2", 0) > 0
    assert kinds["overlapping"] > 0 and kinds["errors_classified"] > 0


@pytest.mark.parametrize("default", ["tenant", "drop"])
def test_saturation_is_line_rate(simulator, default, tmp_path):
    result = run_bench(simulator, "saturation", {
        "size": 64, "packets": 300, "default": default,
    }, test_dir=tmp_path, module=TB)
    assert result["in_beats_per_cycle"] > 0.99
    if default == "tenant":
        assert result["out_beats_per_cycle"] > 0.99
        assert result["latency_cycles"] <= 2
    else:
        assert result["dropped"] > 0


def test_hardware_matches_model_512(tmp_path):
    """A short run at 512 bits (the default NIC shape: one beat holds a small packet)."""
    sim = classifier_simulator(NicShape(data_width=512), port=1, entries=16)
    result = run_bench(sim, "random_traffic", {
        "seed": 11, "packets": 1000, "default": "drop",
        "idle": "random", "backpressure": "random",
    }, test_dir=tmp_path, module=TB)
    assert result["mismatches"] == 0
    assert result["counters"] == result["model_counters"]
    assert result["hits"] == result["model_hits"]
    counters = result["counters"]
    assert counters["packets"] == result["packets_out"] + counters["dropped"]
    assert counters["dropped"] > 0 and result["packets_out"] > 0
