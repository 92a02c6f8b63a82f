"""The board's clocks: the NIC's ``sync`` domain at 125 MHz from the board oscillator through
an ECP5 PLL, and resets that leave only once the PLL has locked.

``EHXPLLL`` (Lattice FPGA-TN-02200, ECP5 sysCLOCK PLL): the output is
``f_in / CLKI_DIV * CLKFB_DIV`` with the feedback taken from CLKOP, and the VCO,
``f_out * CLKOP_DIV``, must lie between 400 and 800 MHz. 125 MHz is the RGMII transmit clock
at 1 Gbit/s (clause 35), so the transmitter runs in ``sync`` itself.
"""

from amaranth.hdl import ClockSignal, Const, Instance, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["Ecp5Pll", "pll_dividers"]


def pll_dividers(f_in, f_out):
    """``(CLKI_DIV, CLKFB_DIV, CLKOP_DIV)`` giving exactly ``f_out`` from ``f_in`` (Hz) with the
    VCO in range, the VCO as high as it goes (less jitter); ValueError if none does."""
    best = None
    for clki in range(1, 129):
        for clkfb in range(1, 81):
            if abs(f_in / clki * clkfb - f_out) > 1:
                continue
            for clkop in range(1, 129):
                vco = f_out * clkop
                if 400e6 <= vco <= 800e6 and (best is None or vco > best[0]):
                    best = (vco, clki, clkfb, clkop)
    if best is None:
        raise ValueError(f"no ECP5 PLL setting gives {f_out / 1e6:g} MHz from "
                         f"{f_in / 1e6:g} MHz exactly")
    return best[1:]


class Ecp5Pll(wiring.Component):
    """``clk_in`` at ``f_in`` in; the clock and reset of ``domain`` (defined by the caller) at
    ``f_out``, held in reset until the PLL locks and ``rst_in`` is low (synchronised into the
    domain)."""

    def __init__(self, f_in, f_out=125e6, domain="sync"):
        self.f_in, self.f_out, self.domain = f_in, f_out, domain
        self.dividers = pll_dividers(f_in, f_out)
        super().__init__({"clk_in": In(1), "rst_in": In(1), "locked": Out(1)})

    def elaborate(self, platform):
        m = Module()
        clki, clkfb, clkop = self.dividers
        clk = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=str(self.f_in / 1e6), a_FREQUENCY_PIN_CLKOP=str(self.f_out / 1e6),
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=clki, p_CLKFB_DIV=clkfb, p_CLKOP_DIV=clkop, p_CLKOP_ENABLE="ENABLED",
            p_CLKOP_CPHASE=clkop - 1, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            i_CLKI=self.clk_in, i_CLKFB=clk, i_RST=Const(0), i_STDBY=Const(0),
            i_PHASESEL0=Const(0), i_PHASESEL1=Const(0), i_PHASEDIR=Const(1),
            i_PHASESTEP=Const(1), i_PHASELOADREG=Const(1), i_PLLWAKESYNC=Const(0),
            i_ENCLKOP=Const(0),
            o_CLKOP=clk, o_LOCK=self.locked)
        m.d.comb += ClockSignal(self.domain).eq(clk)
        m.submodules.reset_sync = ResetSynchronizer(~self.locked | self.rst_in,
                                                    domain=self.domain)
        if platform is not None:
            platform.add_clock_constraint(clk, self.f_out)
        return m
