"""Formal properties (hw/formal/properties.py) proven by YoWASP Yosys and yosys-smtbmc with
Boolector, at the shallow CI depth (``snic bench formal`` goes deeper), and proof that the flow
bites: a fork whose outputs drop a beat they offered fails the same check, with a trace (with
either solver), and so does a scheduler that tags a leaving beat with an arriving one's tenant.
"""

from pathlib import Path

import pytest

from amaranth.hdl import Cat, Module, Signal

from supernic.hw.chain.fork import PacketFork
from supernic.hw.formal.contract import ContractHarness
from supernic.hw.formal.properties import PROPERTIES, Property, ports_of
from supernic.hw.nic.scheduler import TenantScheduler
from supernic.tools.formal import SOLVERS, check_property

# Induction is tried where it is cheap and known to close (the chain blocks); elsewhere the
# CI run is bounded model checking only.
INDUCTION = {"fork", "join"}


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_property_holds(name, tmp_path):
    prop = PROPERTIES[name]
    result = check_property(prop, prop.ci_depth, induction=name in INDUCTION, keep=tmp_path)
    assert result["result"] != "failed", result
    if name in INDUCTION:
        assert result["result"] == "proven"


class HastyFork(PacketFork):
    """Withdraws a beat from every output as soon as any output took it (the outputs still
    waiting lose their offer: the contract's violation)."""

    def elaborate(self, platform):
        m = Module()
        outs = self.outputs()
        taken = Signal()
        for o in outs:
            m.d.comb += [o.p.eq(self.i.p), o.valid.eq(self.i.valid & ~taken)]
        any_taking = Cat(o.valid & o.ready for o in outs).any()
        m.d.comb += self.i.ready.eq(Cat(o.ready for o in outs).all())
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += taken.eq(0)
        with m.Elif(any_taking):
            m.d.sync += taken.eq(1)
        return m


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_contract_violation_is_found(solver, tmp_path):
    from supernic.hw.formal.properties import _VERDICTS

    def build():
        dut = HastyFork(64, _VERDICTS, 2)
        return ContractHarness(dut, [dut.i], dut.outputs()), ports_of(dut)
    prop = Property("hasty_fork", "a broken fork", build, 8, 8)
    result = check_property(prop, 8, keep=tmp_path, solver=solver)
    assert result["result"] == "failed"
    assert any("contract.py" in a for a in result["assertions"])
    assert (tmp_path / "hasty_fork.vcd").stat().st_size > 0


class ArrivalTagScheduler(TenantScheduler):
    """Tags each leaving beat with the tenant of the beat arriving at the same time, not of
    the queue it left: another tenant's packet under the wrong tag."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.o.p.meta.tag.tenant.eq(self.i[0].p.meta.tag.tenant)
        return m


def test_an_isolation_violation_is_found(monkeypatch, tmp_path):
    import supernic.hw.nic.scheduler as scheduler
    monkeypatch.setattr(scheduler, "TenantScheduler", ArrivalTagScheduler)
    result = check_property(PROPERTIES["scheduler"], 8, induction=False, keep=tmp_path)
    assert result["result"] == "failed", result
    assert any("properties.py" in a for a in result["assertions"])


def _fixed_priority(m, bits, pointer, n, name):
    """A round robin that forgets its pointer: the lowest-numbered tenant always wins."""
    from supernic.hw.nic.policy import lowest_one
    return lowest_one(m, bits, n, f"{name}_fixed")


def _wedged(m, bits, pointer, n, name):
    """A round robin that picks no one when every tenant is eligible."""
    from supernic.hw.nic.policy import lowest_one
    found, index = lowest_one(m, bits, n, f"{name}_fixed")
    return (found & (bits != (1 << n) - 1) if n > 1 else found), index


@pytest.mark.parametrize("pick, broken", [(_fixed_priority, "Assert(passed < PASS_BOUND)"),
                                          (_wedged, "Assert(idle < IDLE_BOUND)")])
def test_a_progress_violation_is_found(pick, broken, monkeypatch, tmp_path):
    """The progress property bites at its CI depth: a picker that starves a tenant fails the
    no-starvation claim, one that deadlocks when both tenants wait fails work conservation."""
    import supernic.hw.formal.properties as properties
    import supernic.hw.nic.candidates as candidates
    import supernic.hw.nic.policy as policy
    # Both round robins: the tenant pick's (hw/nic/policy.py) and each tenant's port pick
    # (hw/nic/candidates.py).
    monkeypatch.setattr(policy, "round_robin_pick", pick)
    monkeypatch.setattr(candidates, "round_robin_pick", pick)
    prop = PROPERTIES["scheduler_progress"]
    result = check_property(prop, prop.ci_depth, induction=False, keep=tmp_path)
    assert result["result"] == "failed", result
    source = Path(properties.__file__).read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if broken in text)
    assert [a.rsplit("/", 1)[-1] for a in result["assertions"]] == [f"properties.py:{line}"]
