"""RGMII (the HP/Marvell Reduced GMII, v2.0): GMII's byte a clock as a nibble on each edge of
a 125 MHz clock, through the ECP5's DDR registers.

Receive: on ``rx_clk``'s rising edge ``rx_data`` holds bits 3:0 and ``rx_ctrl`` RX_DV, on the
falling edge bits 7:4 and RX_DV XOR RX_ER (RGMII v2.0, section 3.3). The receive side runs in
the ``rx`` domain, clocked by the PHY's ``rx_clk``. Transmit is the mirror image in ``sync``
(125 MHz), and ``tx_clk`` is sent as data, 1 then 0, through the same kind of DDR register so
it leaves edge-aligned with the data. The 2 ns clock-to-data skew RGMII needs is left to the
PHY's internal delays (RGMII-ID), which this board's PHY is strapped for by its vendor; that is
what must be checked first on silicon.
"""

from amaranth.hdl import Cat, ClockSignal, Module, ResetSignal
from amaranth.lib import io, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In

from .gmii import GmiiSignature

__all__ = ["RgmiiPhy"]


class RgmiiPhy(wiring.Component):
    """The board's RGMII pins (``pins``: the ``eth_rgmii`` resource requested with
    ``dir="-"``) on one side, ``gmii`` (the MAC's view, flipped) on the other; it drives the
    clock and reset of the ``rx`` domain (which the caller defines) from ``rx_clk``."""

    def __init__(self, pins, ddr_buffer=io.DDRBuffer):
        self.pins = pins
        # The DDR register: the platform's (ECP5: IDDRX1F/ODDRX1F); a simulation stand-in
        # with the same contract in the tests (sim/tb/rgmii_tb.py).
        self.ddr_buffer = ddr_buffer
        super().__init__({"gmii": In(GmiiSignature())})

    def elaborate(self, platform):
        m = Module()
        pins = self.pins
        m.submodules.rx_clk = rx_clk = io.Buffer("i", pins.rx_clk)
        m.d.comb += ClockSignal("rx").eq(rx_clk.i)
        if platform is not None:
            # 1 Gbit/s: 125 MHz. On the pin: the buffer's output net is renamed in synthesis.
            platform.add_clock_constraint(pins.rx_clk.io, 125e6)
        # The receive side leaves reset with the rest of the design.
        m.submodules.rx_reset = ResetSynchronizer(ResetSignal("sync"), domain="rx")

        m.submodules.rx_data = rx_data = self.ddr_buffer("i", pins.rx_data, i_domain="rx")
        m.submodules.rx_ctrl = rx_ctrl = self.ddr_buffer("i", pins.rx_ctrl, i_domain="rx")
        m.d.comb += [self.gmii.rxd.eq(Cat(rx_data.i[0], rx_data.i[1])),
                     self.gmii.rx_dv.eq(rx_ctrl.i[0]),
                     self.gmii.rx_er.eq(rx_ctrl.i[0] ^ rx_ctrl.i[1])]

        m.submodules.tx_data = tx_data = self.ddr_buffer("o", pins.tx_data, o_domain="sync")
        m.submodules.tx_ctrl = tx_ctrl = self.ddr_buffer("o", pins.tx_ctrl, o_domain="sync")
        m.submodules.tx_clk = tx_clk = self.ddr_buffer("o", pins.tx_clk, o_domain="sync")
        m.d.comb += [tx_data.o[0].eq(self.gmii.txd[:4]), tx_data.o[1].eq(self.gmii.txd[4:]),
                     tx_ctrl.o[0].eq(self.gmii.tx_en),
                     tx_ctrl.o[1].eq(self.gmii.tx_en ^ self.gmii.tx_er),
                     tx_clk.o[0].eq(1), tx_clk.o[1].eq(0)]
        # The PHY is held in reset with the design (the pin is active low; the resource inverts).
        m.submodules.phy_rst = phy_rst = io.Buffer("o", pins.rst)
        m.d.comb += phy_rst.o.eq(ResetSignal("sync"))
        m.submodules.mdc = mdc = io.Buffer("o", pins.mdc)
        m.d.comb += mdc.o.eq(0)     # no management: the PHY runs on its strapped defaults
        return m
