"""A board's top level: the clocks, the RGMII PHY and the Ethernet MAC, and what the frames go
through: the NIC (a design configuration), or, with none, a loopback that sends every good
frame back where it came from (the MAC and PHY proved on silicon without the NIC).

The NIC's port 0 is the board's Ethernet port; its other ports are idle. Everything the NIC
delivers leaves on that port. The NIC's registers are reached over the board's UART
(:mod:`.uart_bridge`), which the driver reaches through ``SerialBus``.
"""

from amaranth.hdl import ClockDomain, ClockSignal, DomainRenamer, Elaboratable, Module, ResetSignal
from amaranth.lib import io, wiring

from .boards import Board
from .cdc import CounterCrossing
from .clocks import Ecp5Pll
from .mac import MAC_COUNTERS, EthernetMac
from .rgmii import RgmiiPhy

__all__ = ["BoardTop", "BOARD_REGISTERS"]

#: The words the UART bridge answers at BOARD_BASE and up, in order (the design JSON names
#: them under ``board``): the MAC's counters, then the bridge's own.
BOARD_REGISTERS = MAC_COUNTERS + ("uart_framing_errors", "uart_timeouts", "uart_dropped_bytes")

_RGMII_PINS = ("rst", "mdio", "mdc", "tx_clk", "tx_ctrl", "tx_data", "rx_clk", "rx_ctrl",
               "rx_data")


class BoardTop(Elaboratable):
    """``board`` (a :class:`~.boards.Board`) with ``config`` (a
    :class:`~supernic.desc.config.DesignConfig` with a ``[nic]`` section) or the loopback."""

    def __init__(self, board: Board, config=None, max_frame=1522):
        self.board = board
        self.config = config
        self.max_frame = max_frame
        self.data_width = config.data_width if config is not None else 64

    def elaborate(self, platform):
        m = Module()
        board = self.board
        # The NIC's clock (from the PLL) and the PHY's receive clock (from its rx_clk pin),
        # defined here and driven by the blocks that make them.
        m.domains.sync = ClockDomain("sync")
        m.domains.rx = ClockDomain("rx")
        clock = platform.request(board.clock, dir="-")
        m.submodules.clock_buf = clock_buf = io.Buffer("i", clock)
        m.submodules.pll = pll = Ecp5Pll(board.clock_hz, 125e6)
        m.d.comb += pll.clk_in.eq(clock_buf.i)
        if board.reset is not None:
            m.submodules.reset_buf = reset_buf = io.Buffer(
                "i", platform.request(board.reset, dir="-"))
            m.d.comb += pll.rst_in.eq(reset_buf.i)

        eth = platform.request(board.ethernet, 0, dir={name: "-" for name in _RGMII_PINS})
        m.submodules.phy = phy = RgmiiPhy(eth)
        m.submodules.mac = mac = EthernetMac(self.data_width, self.max_frame,
                                             rx_fifo_bytes=4096, tx_fifo_bytes=4096)
        wiring.connect(m, phy.gmii, mac.gmii)

        if self.config is None:
            wiring.connect(m, mac.o, mac.i)
            return m
        return self._nic(m, platform, mac)

    def _nic(self, m, platform, mac):
        from ..nic.top import MultiTenantNic
        from .uart_bridge import UartAxiLiteBridge
        # The NIC makes its own clock domain from its clk and rst ports (hw/shell.py): renamed,
        # so that it does not clash with this top's sync, and fed from it.
        nic = MultiTenantNic(self.config)
        m.submodules.nic = DomainRenamer({"sync": "nic"})(nic)
        m.d.comb += [nic.clk.eq(ClockSignal("sync")), nic.rst.eq(ResetSignal("sync"))]
        rx = nic.s_axis0
        m.d.comb += [rx.tdata.eq(mac.o.p.data), rx.tkeep.eq(mac.o.p.keep),
                     rx.tlast.eq(mac.o.p.last), rx.tvalid.eq(mac.o.valid),
                     mac.o.ready.eq(rx.tready)]
        tx = nic.m_axis
        m.d.comb += [mac.i.p.data.eq(tx.tdata), mac.i.p.keep.eq(tx.tkeep),
                     mac.i.p.last.eq(tx.tlast), mac.i.valid.eq(tx.tvalid),
                     tx.tready.eq(mac.i.ready)]
        uart = platform.request(self.board.uart, 0, dir={"rx": "-", "tx": "-"})
        m.submodules.uart_rx = uart_rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = uart_tx = io.Buffer("o", uart.tx)
        m.submodules.bridge = bridge = UartAxiLiteBridge(
            125e6, addr_width=len(nic.s_axil.awaddr), board_words=len(BOARD_REGISTERS))
        m.d.comb += [bridge.rx.eq(uart_rx.i), uart_tx.o.eq(bridge.tx)]
        # The board's counters, read through the bridge; the receiver's cross from rx.
        values = {"uart_framing_errors": bridge.framing_errors,
                  "uart_timeouts": bridge.timeouts, "uart_dropped_bytes": bridge.dropped_bytes}
        for name in MAC_COUNTERS:
            counter = getattr(mac, name)
            if name.startswith("rx_"):
                m.submodules[f"cross_{name}"] = cross = CounterCrossing(32, "rx")
                m.d.comb += cross.count.eq(counter)
                counter = cross.value
            values[name] = counter
        for k, name in enumerate(BOARD_REGISTERS):
            m.d.comb += bridge.board[k].eq(values[name])
        wiring.connect(m, bridge.m_axil, nic.s_axil)
        return m
