"""The DRF arithmetic of supernic.desc.drf against the paper's example, and the one formula the
scheduler's gateware and model share."""

from fractions import Fraction

import pytest
from amaranth.hdl import Const, Mux
from amaranth.sim import Simulator

from supernic.desc.drf import dominant_cost, dominant_share, progressive_filling, tag_increment


def test_the_papers_example():
    """Ghodsi et al., NSDI 2011, section 4: 9 CPUs and 18 GB; user A's tasks need <1 CPU, 4 GB>,
    B's <3 CPUs, 1 GB>. DRF gives A three tasks and B two: both dominant shares 2/3."""
    demands = {"A": {"cpu": 1, "mem": 4}, "B": {"cpu": 3, "mem": 1}}
    rates = progressive_filling(demands, {"A": 1, "B": 1}, {"cpu": 9, "mem": 18})
    assert rates == {"A": pytest.approx(3.0), "B": pytest.approx(2.0)}
    assert dominant_share({"cpu": 3, "mem": 12}, {"cpu": 9, "mem": 18}) == pytest.approx(2 / 3)


def test_weights_and_limits():
    """Weighted (section 4.3): twice the weight, twice the dominant share while nothing binds;
    a tenant held at its limit leaves the rest to the others."""
    demands = {0: {"link": 1.0}, 1: {"link": 1.0}}
    rates = progressive_filling(demands, {0: 1, 1: 2}, {"link": 1.0})
    assert rates == {0: pytest.approx(1 / 3), 1: pytest.approx(2 / 3)}
    rates = progressive_filling(demands, {0: 1, 1: 2}, {"link": 1.0}, limits={1: 0.25})
    assert rates == {0: pytest.approx(0.75), 1: pytest.approx(0.25)}


def test_dominant_share_is_exact_and_knows_what_cannot_fit():
    assert dominant_share({"a": Fraction(1, 3), "b": 0}, {"a": 1, "b": 0}) == Fraction(1, 3)
    assert dominant_share({"a": 1, "b": 1}, {"a": 4, "b": 0}) is None


@pytest.mark.parametrize("beats, to_region, cost, regions, inv_weight", [
    (1, 1, 0x100, 4, 0x100), (40, 8, 0x380, 6, 0x80), (1200, 1200, 0xFFFF, 16, 0xFFFF),
    (3, 3, 0x40, 1, 0x155),
])
def test_the_gateware_and_the_model_compute_the_same_cost(beats, to_region, cost, regions,
                                                           inv_weight):
    """The formula evaluated on signals (a Mux picking the larger, as hw/nic/scheduler.py
    does) gives the model's integers."""
    want_dom = dominant_cost(beats, to_region, cost, regions)
    want_tag = tag_increment(want_dom, inv_weight)
    dom = dominant_cost(Const(beats, 14), Const(to_region, 14), Const(cost, 16), regions,
                        larger=lambda a, b: Mux(b > a, b, a))
    tag = tag_increment(dom, Const(inv_weight, 16))
    got = {}

    async def bench(ctx):
        got["dom"], got["tag"] = ctx.get(dom), ctx.get(tag)
    sim = Simulator(_empty_module())
    sim.add_testbench(bench)
    sim.run()
    assert got == {"dom": want_dom, "tag": want_tag}


def _empty_module():
    from amaranth.hdl import Module
    return Module()
