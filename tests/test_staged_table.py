"""Staged tables (sw/desc/staged.py, hw/csr/staged.py): one layout gives a table's staging
registers, strobe and selectors, the software writes of a row, and the row as the gateware
reads it. Checked: a field wider than a register splits into halves and joins back (through
the register port, in Amaranth's simulator); the register and write orders; a row may leave
fields staged; unknown fields and missing selectors are refused; the library's staged tables
(ACL rules, NAT slots, rate-limiter buckets and classes, classifier entries) are built from
it and their configurations write through it."""

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from supernic.desc.registers import RW, W1P
from supernic.desc.staged import Field, StagedTable
from supernic.hw.csr.block import csr_signature
from supernic.hw.csr.staged import staged_row

TABLE = StagedTable("rule", (Field("addr", 128, "Staged: addr"), Field("port", 16, "Staged: port")),
                    (Field("rule_index", 4, "Slot"),), "Write 1: copy")


def test_registers_split_wide_fields_and_end_with_the_strobe():
    regs = TABLE.registers()
    assert [(r.name, r.width, r.access) for r in regs] == [
        ("rule_addr_hi", 64, RW), ("rule_addr_lo", 64, RW), ("rule_port", 16, RW),
        ("rule_index", 4, RW), ("rule_write", 1, W1P)]
    assert regs[0].doc == "Staged: addr bits 127:64" and regs[1].doc == "Staged: addr bits 63:0"
    first = StagedTable("x", TABLE.fields, TABLE.selectors, "w", selectors_first=True)
    assert [r.name for r in first.registers()][0] == "rule_index"


def test_row_writes():
    addr = (0xDEAD << 64) | 0xBEEF
    assert TABLE.row_writes({"addr": addr, "port": 80}, rule_index=3) == [
        ("rule_addr_hi", 0xDEAD), ("rule_addr_lo", 0xBEEF), ("rule_port", 80),
        ("rule_index", 3), ("rule_write", 1)]
    # A row may leave fields as staged (an unused NAT slot writes only its flags).
    assert TABLE.row_writes({"port": 1}, rule_index=0) == [
        ("rule_port", 1), ("rule_index", 0), ("rule_write", 1)]
    with pytest.raises(KeyError, match=r"no fields \['colour'\]"):
        TABLE.row_writes({"colour": 1}, rule_index=0)
    with pytest.raises(KeyError, match="the selectors are"):
        TABLE.row_writes({"port": 1})


def test_the_gateware_joins_a_row_as_software_split_it():
    m = Module()
    port = csr_signature(TABLE.registers()).flip().create()
    row = staged_row(port, TABLE)
    addr, port_value = Signal(128), Signal(16)
    m.d.comb += [addr.eq(row["addr"]), port_value.eq(row["port"])]
    want = (0x0123456789ABCDEF << 64) | 0xFEDCBA9876543210
    got = {}

    async def bench(ctx):
        for reg, value in TABLE.row_writes({"addr": want, "port": 4789}, rule_index=1):
            if reg in ("rule_addr_hi", "rule_addr_lo", "rule_port"):
                ctx.set(getattr(port, reg), value)
        got["addr"], got["port"] = ctx.get(addr), ctx.get(port_value)

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    assert got == {"addr": want, "port": 4789}


def test_the_library_tables_are_staged_tables():
    from supernic.desc.nic.classifier import entry_table
    from supernic.desc.nic.shape import NicShape
    from supernic.desc.nt.acl import RULES, AclFirewallDescription
    from supernic.desc.nt.nat import SLOTS, NatTranslatorDescription
    from supernic.desc.nt.rate_limiter import RateLimiterDescription as RL

    tables = [(AclFirewallDescription, RULES), (NatTranslatorDescription, SLOTS),
              (RL, RL.bucket_table(RL.check_params({}))),
              (RL, RL.class_table(RL.check_params({})))]
    for description, table in tables:
        names = [r.name for r in description.registers(description.check_params({}))]
        regs = [r.name for r in table.registers()]
        at = names.index(regs[0])
        assert names[at:at + len(regs)] == regs, description.kind
    shape = NicShape(64, 64, 4, 2, 3)
    from supernic.desc.nic.classifier import classifier_block
    names = [r.name for r in classifier_block("c", shape, 8).registers]
    regs = [r.name for r in entry_table(shape).registers()]
    assert names[names.index(regs[0]):][:len(regs)] == regs
