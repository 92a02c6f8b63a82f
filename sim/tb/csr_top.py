"""A small design around :class:`~supernic.hw.csr.regfile.RegisterFile` for the cocotb test.

Two blocks: the ID block, and a test block with every access kind and width class. The 64-bit
``cycles`` counter is free-running and steps its lo word past 2**32 every 16 cycles, so a read
that took lo and hi at different times would give a value the counter never had: the test sees
whether the lo/hi latch works.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from supernic.hw.csr.axil import AxiLiteSignature
from supernic.hw.csr.regfile import RegisterFile
from supernic.desc.registers import R, RW, W1P, Register, RegisterBlock, RegisterMap

__all__ = ["BUILD_ID", "CYCLES_INIT", "CYCLES_STEP", "ADDR_WIDTH", "csr_test_map", "CsrTop"]

BUILD_ID = 0x20250601
# An odd step whose lo part is near 2**28, so the lo word wraps (and hi moves) every 16 cycles.
CYCLES_INIT = 0x0000_0000_FFFF_FF00
CYCLES_STEP = 0x0000_0000_1000_0001
ADDR_WIDTH = 16


def csr_test_map():
    return RegisterMap([
        RegisterBlock("id", 0x534E4943, 0x0001_0000, [
            Register("build", 32, R, doc="Build identifier"),
            Register("scratch", 32, RW, reset=0x5A5A_5A5A, doc="Free for software"),
        ], doc="Identifies the design"),
        RegisterBlock("test", 0x54455354, 0x0001_0003, [
            Register("status", 32, R, doc="Driven by the status_in port"),
            Register("flags", 7, R, doc="Driven by the flags_in port"),
            Register("cycles", 64, R, doc="Free-running counter"),
            Register("control", 32, RW, reset=0xCAFE_F00D),
            Register("mode", 12, RW, reset=0x5A5),
            Register("limit", 64, RW, reset=0x0123_4567_89AB_CDEF),
            Register("kick", 8, W1P, doc="One strobe per bit on kick_out"),
            Register("pop", 16, R, strobe=True, doc="Driven by pop_in; a read strobes"),
            Register("push", 16, RW, strobe=True, doc="A write strobes, the value in place"),
        ], doc="Register file test block"),
    ])


class CsrTop(wiring.Component):
    s_axil: In(AxiLiteSignature(ADDR_WIDTH))
    status_in: In(32)
    flags_in: In(7)
    control_out: Out(32)
    mode_out: Out(12)
    limit_out: Out(64)
    kick_out: Out(8)
    cycles_out: Out(64)
    pop_in: In(16)
    push_out: Out(16)
    pop_stb_out: Out(1)
    push_stb_out: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.regfile = regfile = RegisterFile(csr_test_map(), ADDR_WIDTH)
        wiring.connect(m, wiring.flipped(self.s_axil), regfile.s_axil)

        cycles = Signal(64, init=CYCLES_INIT)
        m.d.sync += cycles.eq(cycles + CYCLES_STEP)

        m.d.comb += [
            regfile.field("id", "build").eq(BUILD_ID),
            regfile.field("test", "status").eq(self.status_in),
            regfile.field("test", "flags").eq(self.flags_in),
            regfile.field("test", "cycles").eq(cycles),
            self.control_out.eq(regfile.field("test", "control")),
            self.mode_out.eq(regfile.field("test", "mode")),
            self.limit_out.eq(regfile.field("test", "limit")),
            self.kick_out.eq(regfile.field("test", "kick")),
            self.cycles_out.eq(cycles),
            regfile.field("test", "pop").eq(self.pop_in),
            self.push_out.eq(regfile.field("test", "push")),
            self.pop_stb_out.eq(regfile.field("test", "pop_stb")),
            self.push_stb_out.eq(regfile.field("test", "push_stb")),
        ]
        return m
