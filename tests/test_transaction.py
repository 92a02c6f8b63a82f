"""One control-plane transaction (`supernic.driver.transaction`): plans of register steps run
with a journal and undone backwards.

On the fake NIC of tests/test_control.py (a register file plus the hardware's side of the
handshakes, and the scheduler's flow tables, which cannot be read back): a plan that writes
registers, loads a personality, commits a flow table and runs an action that adds a step of
its own is failed at every write in turn, and the undo must leave the device as it found it;
the undo runs backwards (a deploy's enable bit first); a group that never started is not
undone; a lost transport stops the undo at once; a transaction without a journal reads
nothing before its writes and refuses to undo.
"""

import asyncio

import pytest

from test_control import SMALL_NIC, FakeNic
from supernic.driver.transaction import (Action, Commit, ControlTimeout, Load, Poll, Registers,
                                         Staged, Transaction, Write)
from supernic.driver.transport import TransportLost
from supernic.hw.generate import design_description


@pytest.fixture(scope="module")
def description():
    return design_description(SMALL_NIC)


def _table(tenant, table):
    steps = []
    for i, region in enumerate(table):
        steps += [Write("scheduler", "table_tenant", tenant), Write("scheduler", "table_index", i),
                  Write("scheduler", "table_region", region),
                  Write("scheduler", "table_write", 1)]
    return steps + [Write("scheduler", "table_commit", 1 << tenant), Commit(tenant)]


def _plan(tx, nic):
    """Registers, a personality load, tenant 1's table committed, an action running a step of
    its own (tenant 0's table), the enable mask last."""
    size = nic.description["config"]["table_size"]

    before_0, before_1 = list(nic.tables[0]), list(nic.tables[1])

    async def nested():
        await tx.run([Staged("tenant 0's table", tuple(_table(0, [1] * size)),
                             undo=lambda: _table(0, before_0))])
    return [Write("scheduler", "r1_cost", 0x180), Load(1, 1, "secure"),
            Write("scheduler", "t1_inv_weight", 0x80), Write("scheduler", "r1_cost", 0x200),
            Staged("tenant 1's table", tuple(_table(1, [0, 1] * (size // 2))),
                   undo=lambda: _table(1, before_1)),
            Action("a nested step", nested),
            Write("scheduler", "tenant_enable", 0b10)]


def _image(nic):
    """What must come back: every register but a region's load status, and the tables."""
    values, tables, shadows, _ = nic.image()
    loaded = {(f"region{r}", reg) for r in range(nic.shape.regions)
              for reg in ("active", "loads", "online")}
    return {k: v for k, v in values.items() if k not in loaded}, tables


def _prepared(description):
    nic = FakeNic(description)
    # Values other than the reset ones, so a restore to reset would show.
    asyncio.run(Registers(nic, description).write("scheduler", "tenant_enable", 0b01))
    asyncio.run(Registers(nic, description).write("scheduler", "t1_inv_weight", 0x40))
    return nic


def test_a_failure_at_every_write_is_undone(description):
    clean = _prepared(description)
    start = clean.writes
    tx = Transaction(Registers(clean, description))
    asyncio.run(tx.run(_plan(tx, clean)))
    total = clean.writes - start
    assert clean.tables[1][:2] == [0, 1] and clean.tables[0][0] == 1
    assert total > 20
    for k in range(1, total + 1):
        nic = _prepared(description)
        before = _image(nic)
        nic.fail_at = nic.writes + k
        tx = Transaction(Registers(nic, description))
        with pytest.raises(Exception, match="SLVERR"):
            asyncio.run(tx.run(_plan(tx, nic)))
        assert asyncio.run(tx.undo()) == [] and not tx.gone
        assert _image(nic) == before, k
        assert tx.started == []


def test_the_undo_runs_backwards(description):
    nic = _prepared(description)
    tx = Transaction(Registers(nic, description))
    failing = Action("a step that fails", _raise)
    asyncio.run(_expect_failure(tx.run(_plan(tx, nic) + [failing])))
    nic.log.clear()
    asyncio.run(tx.undo())
    order = [w[:2] for w in nic.log]
    # The enable mask first, then the nested table, then tenant 1's, then the registers
    # backwards from their last write: r1_cost (written twice) once, to its value before the
    # transaction, then t1_inv_weight, then the load's index; the staging registers last.
    assert order[0] == ("scheduler", "tenant_enable")
    commits = [i for i, w in enumerate(nic.log) if w[1] == "table_commit"]
    assert [nic.log[i][3] for i in commits] == [0b01, 0b10]
    after = order[commits[-1] + 1:]
    assert after[:3] == [("scheduler", "r1_cost"), ("scheduler", "t1_inv_weight"),
                         ("region1", "load_index")]
    assert order.count(("scheduler", "r1_cost")) == 1
    assert nic.model.get("scheduler", "r1_cost") == 0x100
    assert nic.model.get("scheduler", "t1_inv_weight") == 0x40


def test_a_group_that_never_started_is_not_undone(description):
    nic = _prepared(description)
    tx = Transaction(Registers(nic, description))
    size = description["config"]["table_size"]
    undone = []
    plan = [Write("scheduler", "r0_cost", 0x300), Action("a failure", _raise),
            Staged("tenant 1's table", tuple(_table(1, [0] * size)),
                   undo=lambda: undone.append(1) or [])]
    asyncio.run(_expect_failure(tx.run(plan)))
    assert asyncio.run(tx.undo()) == [] and undone == []
    assert nic.model.get("scheduler", "r0_cost") == 0x100


class _Lost(FakeNic):
    """Loses the transport at the ``lose_at``-th write: every access fails from then on."""
    lose_at = None

    def write(self, address, value, strobe=0b1111):
        if self.lose_at is not None and self.writes + 1 >= self.lose_at:
            raise TransportLost("the device process died")
        return super().write(address, value, strobe)


def test_a_lost_transport_stops_the_undo(description):
    nic = _Lost(description)
    tx = Transaction(Registers(nic, description))
    nic.lose_at = nic.writes + 6
    with pytest.raises(TransportLost):
        asyncio.run(tx.run(_plan(tx, nic)))
    writes = nic.writes
    assert asyncio.run(tx.undo()) == [] and tx.gone
    assert nic.writes == writes         # one attempt found the bus gone; no more were made


def test_undo_problems_are_reported_and_the_rest_still_undone(description):
    nic = _prepared(description)
    tx = Transaction(Registers(nic, description))
    asyncio.run(_expect_failure(tx.run(
        [Write("scheduler", "r0_cost", 0x300), Write("scheduler", "r1_cost", 0x300),
         Action("a failure", _raise)])))
    nic.fail_at = nic.writes + 1        # the first restore (r1_cost) fails
    problems = asyncio.run(tx.undo())
    assert len(problems) == 1 and problems[0].startswith("restoring scheduler.r1_cost: ")
    assert nic.model.get("scheduler", "r0_cost") == 0x100


def test_without_a_journal_nothing_is_read_and_nothing_undone(description):
    nic = _prepared(description)
    reads = []
    real = nic.read
    nic.read = lambda address: reads.append(address) or real(address)

    async def never():
        return False
    tx = Transaction(Registers(nic, description, timeout=0.01), undoable=False)
    asyncio.run(tx.run([Write("scheduler", "r0_cost", 0x300),
                        Poll("something that never happens", never, give_up=True)]))
    assert reads == [] and tx.journal == {}
    assert tx.completed[-1].what == "something that never happens"
    with pytest.raises(ControlTimeout, match="timed out after 0.01 s waiting for a drain"):
        asyncio.run(tx.run([Poll("a drain", never)]))
    with pytest.raises(TypeError, match="cannot be undone"):
        asyncio.run(tx.undo())


def test_a_plan_is_checked_before_any_write(description):
    nic = _prepared(description)
    writes = nic.writes
    tx = Transaction(Registers(nic, description))
    for plan, match in (([Write("scheduler", "r0_cost", 1 << 16)], "must fit in 16 bits"),
                        ([Staged("x", (Write("scheduler", "commit_pending", 1),))],
                         "scheduler.commit_pending is read-only"),
                        ([Write("scheduler", "nothing", 1)], "not in the design")):
        with pytest.raises(Exception, match=match):
            tx.check(plan)
    assert nic.writes == writes


async def _raise():
    raise RuntimeError("a step failed")


async def _expect_failure(coroutine):
    with pytest.raises(RuntimeError, match="a step failed"):
        await coroutine
