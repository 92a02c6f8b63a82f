"""A DAG's branches in two regions at once (hw/nic/link.py, sw/desc/chain.py split_chain).

The monitoring chain (VXLAN decapsulation, then a flow monitor beside an audit ACL) runs split
over a linked pair of regions of a 64-bit NIC: the flow monitor in region 0, the audit ACL in
region 1, each behind its own copy of the decapsulation. A web tenant runs in region 2.
Random traffic from both ports, 10% malformed, with idle and backpressure: every delivered
packet equals the model of the whole, unsplit chain, and every NT's counters too (both copies
of the decapsulation), and every ingress packet is delivered or counted.
"""

import copy
from importlib.resources import files
from pathlib import Path

import pytest

from supernic.desc.chain import ChainError, load_chain, parse_chain, split_chain
from supernic.desc.config import ConfigError, DesignConfig, load_config
from supernic.sim.chain_model import ChainModel, chain_traffic
from supernic.sim.parser_model import ParserModel
from supernic.sim.session import design_simulator, run_bench
from supernic.sim.tb.scenario import NicScenario

LINK_NIC = load_config(Path(__file__).parent / "data" / "nic_link.toml")
MONITORING = str(files("supernic.chains") / "monitoring.toml")


def test_split_parts_of_the_monitoring_chain():
    primary = load_chain(MONITORING + "#primary")
    branches = load_chain(MONITORING + "#branches")
    assert primary.name == "monitoring_primary" and branches.name == "monitoring_branches"
    assert [n.name for n in primary.stages] == ["decap", "monitor"]
    assert [n.name for n in branches.stages] == ["decap", "audit"]
    assert primary.source.endswith("monitoring.toml#primary")


def test_split_pair_computes_the_whole_chain():
    """The parts' models, joined as the link joins (the primary's packet, the branches' drop
    and mark OR-ed in), give the whole chain's model output packet for packet."""
    whole_spec = load_chain(MONITORING)
    primary_spec, branches_spec = split_chain(whole_spec)
    whole, primary, branches = (ChainModel(s, 64, 256) for s in (whole_spec, primary_spec,
                                                                 branches_spec))
    parser = ParserModel(256)
    drops = 0
    for frame in chain_traffic(whole_spec, 400, 3, 0.1, "light", 256):
        meta = parser.parse(frame)
        want = whole.process(frame, copy.deepcopy(meta))
        got, got_meta = primary.process(frame, copy.deepcopy(meta))
        _, verdict = branches.process(frame, copy.deepcopy(meta))
        got_meta["drop"] |= verdict["drop"]
        got_meta["mark"] |= verdict["mark"]
        assert (got, got_meta) == want
        drops += verdict["drop"]
    assert drops > 0        # the audit ACL's verdicts do matter


@pytest.mark.parametrize("edges, message", [
    ([["a", "b"], ["b", "c"]], "it has no fork"),
    ([["a", "b"], ["a", "c"], ["b", "d"], ["c", "d"]], "nodes follow the join (d)"),
])
def test_split_refusals(edges, message):
    nodes = [{"name": n, "nt": "acl"} for n in "abcd"[:len({x for e in edges for x in e})]]
    spec = parse_chain({"tenant": {"name": "t"}, "nodes": nodes, "edges": edges}, "t.toml")
    with pytest.raises(ChainError, match=message.replace("(", r"\(").replace(")", r"\)")):
        split_chain(spec)
    with pytest.raises(ChainError, match="unknown chain part 'middle'"):
        load_chain(MONITORING + "#middle")


def test_links_are_checked():
    regions = (("web",), ("web",), ("web",))
    with pytest.raises(ConfigError, match="pairs of distinct region indices"):
        DesignConfig(regions=regions, links=((0, 0),))
    with pytest.raises(ConfigError, match="pairs of distinct region indices"):
        DesignConfig(regions=regions, links=((0, 3),))
    with pytest.raises(ConfigError, match="one link only"):
        DesignConfig(regions=regions, links=((0, 1), (1, 2)))


def test_nic_runs_a_dag_split_across_linked_regions(tmp_path):
    result = run_bench(design_simulator(LINK_NIC), "random_traffic", NicScenario(
        seed=13, packets=1500, policy="drf", malformed=0.1),
        test_dir=tmp_path, module="supernic.sim.tb.nic_tb")
    assert result["mismatches"] == 0 and not result["problems"], result
    monitoring = result["tenants"]["0"]
    assert monitoring["chain"] == "monitoring" and monitoring["regions"] == [0]
    # Only the audit ACL in region 1 drops the monitoring tenant's packets: its verdicts
    # reached the egress through the link's join.
    assert monitoring["delivered"] > 100 and monitoring["nt_dropped"] > 0, monitoring
    # Nothing was dispatched to the branch region itself.
    assert set(result["dispatched"]) == {"0", "2"}, result["dispatched"]


def test_link_takes_effect_only_when_both_regions_are_empty():
    """RegionLink alone (Amaranth's simulator): a request waits while the store has packets
    for either region and while region B still holds a packet it was given linked; linked,
    a beat for A reaches both regions and B reads offline to the scheduler; unlinked, the
    regions are wired to their own store ports again."""
    from amaranth.sim import Simulator

    from supernic.desc.nic.shape import NicShape
    from supernic.hw.nic.link import RegionLink

    link = RegionLink(NicShape(64, 256, 2, 2, 3))
    seen = {}

    async def bench(ctx):
        ctx.set(link.b_online_in, 1)
        ctx.set(link.request, 1)
        ctx.set(link.idle, 0)
        await ctx.tick().repeat(3)
        seen["waits_for_idle"] = ctx.get(link.linked)
        ctx.set(link.idle, 1)
        await ctx.tick()
        seen["linked"], seen["b_online"] = ctx.get(link.linked), ctx.get(link.b_online)
        # One single-beat packet for A: both regions are offered it; B takes it, A not yet.
        ctx.set(link.store_a_in.valid, 1)
        ctx.set(link.store_a_in.p.last, 1)
        ctx.set(link.store_a_in.p.data, 0x1234)
        ctx.set(link.region_b_i.ready, 1)
        seen["both_offered"] = (ctx.get(link.region_a_i.valid), ctx.get(link.region_b_i.valid),
                                ctx.get(link.region_b_i.p.data))
        await ctx.tick()
        ctx.set(link.region_a_i.ready, 1)
        await ctx.tick()
        ctx.set(link.store_a_in.valid, 0)
        # Unlink: B still holds its packet, so the link stays.
        ctx.set(link.request, 0)
        await ctx.tick().repeat(3)
        seen["held_by_b"] = ctx.get(link.linked)
        ctx.set(link.region_b_o.valid, 1)
        ctx.set(link.region_b_o.p.last, 1)
        await ctx.tick()                 # the join takes B's beat (its verdict)
        ctx.set(link.region_b_o.valid, 0)
        await ctx.tick().repeat(2)
        seen["unlinked"] = ctx.get(link.linked)
        ctx.set(link.store_b_in.valid, 1)
        seen["b_own"] = ctx.get(link.region_b_i.valid)

    sim = Simulator(link)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["waits_for_idle"] == 0
    assert seen["linked"] == 1 and seen["b_online"] == 0
    assert seen["both_offered"] == (1, 1, 0x1234)
    assert seen["held_by_b"] == 1
    assert seen["unlinked"] == 0 and seen["b_own"] == 1
