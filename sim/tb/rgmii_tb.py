"""cocotb testbench: RGMII (hw/board/rgmii.py) and the MAC in the loopback the board's
loopback bitstream holds, with cocotbext-eth's RGMII source and sink as the PHY.

The ECP5's DDR registers have no simulation model here, so :class:`SimulatedDdrBuffer` stands
in for Amaranth's ``io.DDRBuffer`` with its contract (Amaranth 0.5, ``lib.io.DDRBuffer``): an
input's ``i[0]`` is the value at a rising edge and ``i[1]`` at the falling edge after it, both
presented one cycle later; an output's ``o[0]`` leaves for the clock's high half and ``o[1]``
for its low half, one cycle after they are taken. What this checks is RGMII's nibble order and
control-line encoding (RX_DV and RX_DV XOR RX_ER, RGMII v2.0 section 3.3) on both sides,
against an independent model; the primitives' own timing is the board's to prove.

The PHY sends data centred between ``rx_clk``'s edges (cocotbext-eth's source does) and takes
the transmitted data 2 ns after ``tx_clk``'s edges (its internal delay, RGMII-ID): the sink is
clocked by the NIC's clock shifted by a quarter period.

``loopback`` (scenario: ``seed``, ``frames``): good frames of random sizes, runts, bad FCS and
``rx_er`` bursts in; every good frame must come back as the model's wire bytes (preamble,
padding, FCS), in order; the bad ones are counted and do not.
"""

import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer
from cocotbext.eth import GmiiFrame, RgmiiSink, RgmiiSource
from amaranth.hdl import ClockDomain, ClockSignal, Module, Mux, Signal
from amaranth.lib import data, io, wiring
from amaranth.lib.wiring import In, Out

from supernic.hw.board.mac import MAC_COUNTERS, EthernetMac
from supernic.hw.board.rgmii import RgmiiPhy
from supernic.sim.board.mac_model import PREAMBLE, MacRxModel, fcs, wire_frame
from supernic.sim.tb.bench_env import env as _env, write_result

__all__ = ["SimulatedDdrBuffer", "RgmiiLoopbackTop", "rgmii_simulator"]


class SimulatedDdrBuffer(wiring.Component):
    """``io.DDRBuffer``'s contract for simulation, from flip-flops on both clock edges."""

    def __init__(self, direction, port, *, i_domain=None, o_domain=None):
        self.direction, self.port = direction, port
        self.domain = i_domain if direction == "i" else o_domain
        layout = data.ArrayLayout(len(port), 2)
        super().__init__({"i": Out(layout)} if direction == "i" else {"o": In(layout)})

    def elaborate(self, platform):
        m = Module()
        m.domains.fall = fall = ClockDomain("fall", clk_edge="neg", local=True)
        m.d.comb += fall.clk.eq(ClockSignal(self.domain))
        width = len(self.port)
        if self.direction == "i":
            m.submodules.buf = buf = io.Buffer("i", self.port)
            rise, low = Signal(width), Signal(width)
            m.d[self.domain] += rise.eq(buf.i)
            m.d.fall += low.eq(buf.i)
            m.d[self.domain] += [self.i[0].eq(rise), self.i[1].eq(low)]
        else:
            m.submodules.buf = buf = io.Buffer("o", self.port)
            high, low = Signal(width), Signal(width)
            m.d[self.domain] += [high.eq(self.o[0]), low.eq(self.o[1])]
            m.d.comb += buf.o.eq(Mux(ClockSignal(self.domain), high, low))
        return m


class _Pins:
    """The ``eth_rgmii`` resource's ports, as top-level ports of the simulated design."""

    def __init__(self):
        for name, width, direction in (("rx_clk", 1, "i"), ("rx_ctrl", 1, "i"),
                                       ("rx_data", 4, "i"), ("tx_clk", 1, "o"),
                                       ("tx_ctrl", 1, "o"), ("tx_data", 4, "o"),
                                       ("rst", 1, "o"), ("mdc", 1, "o")):
            setattr(self, name, io.SingleEndedPort(io.IOPort(width, name=f"rgmii_{name}"),
                                                   direction=direction))


class RgmiiLoopbackTop(wiring.Component):
    def __init__(self, max_frame=1522):
        self.max_frame = max_frame
        # phy_tx_clk: the clock the bench's PHY samples the transmitted data on (unused here).
        super().__init__({"phy_tx_clk": In(1), **{name: Out(32) for name in MAC_COUNTERS}})

    def elaborate(self, platform):
        m = Module()
        m.domains.rx = ClockDomain("rx")        # clocked by the PHY's rx_clk pin (RgmiiPhy)
        m.submodules.phy = phy = RgmiiPhy(_Pins(), ddr_buffer=SimulatedDdrBuffer)
        m.submodules.mac = mac = EthernetMac(64, self.max_frame, 4096, 4096)
        wiring.connect(m, phy.gmii, mac.gmii)
        wiring.connect(m, mac.o, mac.i)
        for name in MAC_COUNTERS:
            m.d.comb += getattr(self, name).eq(getattr(mac, name))
        return m


def rgmii_simulator(progress=print):
    import hashlib
    from pathlib import Path
    from supernic.sim.build import build_simulator, generated_component
    key = {"bench": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]}
    paths = generated_component("rgmii_loopback", key, RgmiiLoopbackTop, {"max_frame": 1522},
                                progress=progress)
    return build_simulator(paths["verilog"], "rgmii_loopback", paths["regmap"],
                           progress=progress)


# --- cocotb side ----------------------------------------------------------------------------

@cocotb.test()
async def loopback(dut):
    rng = random.Random(_env("seed", 1, int))
    count = _env("frames", 60, int)
    cocotb.start_soon(Clock(dut.rgmii_rx_clk, 8, unit="ns").start())
    cocotb.start_soon(Clock(dut.clk, 8, unit="ns").start())
    # The PHY's view of tx_clk: the NIC's clock 2 ns later (its internal delay, RGMII-ID).
    cocotb.start_soon(_delayed_copy(dut.clk, dut.phy_tx_clk, 2, 8))
    source = RgmiiSource(dut.rgmii_rx_data, dut.rgmii_rx_ctrl, dut.rgmii_rx_clk)
    sink = RgmiiSink(dut.rgmii_tx_data, dut.rgmii_tx_ctrl, dut.phy_tx_clk)
    for bfm in (source, sink):
        bfm.log.setLevel(logging.WARNING)
    dut.rst.value = 1
    dut.rx_rst.value = 1
    await ClockCycles(dut.clk, 10)
    dut.rst.value = 0
    dut.rx_rst.value = 0
    await ClockCycles(dut.clk, 5)

    model = MacRxModel(1522)
    kinds = []
    for _ in range(count):
        kind = rng.choice(["good"] * 5 + ["runt", "fcs", "er"])
        kinds.append(kind)
        size = rng.randrange(1, 60) if kind == "runt" else rng.randrange(60, 600)
        body = bytes(rng.getrandbits(8) for _ in range(size))
        wire = bytearray(PREAMBLE + body + fcs(body))
        error = None
        if kind == "fcs":
            wire[-1] ^= 0x10
        elif kind == "er":
            error = [0] * len(wire)
            error[rng.randrange(8, len(wire))] = 1
        model.receive(bytes(wire), error)
        await source.send(GmiiFrame(wire, error))
    back = []
    quiet = 0
    while quiet < 3000:
        await ClockCycles(dut.clk, 100)
        got = not sink.empty()
        while not sink.empty():
            back.append(await sink.recv())
        quiet = 0 if got or not source.empty() or source.active else quiet + 100
    problems = []
    want = [wire_frame(f) for f in model.frames]
    got = [bytes(f.data) for f in back]
    if got != want:
        first = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b),
                     min(len(got), len(want)))
        problems.append(f"{len(got)} frames back, {len(want)} expected; first difference at "
                        f"frame {first}")
    counters = {name: int(getattr(dut, name).value) for name in MAC_COUNTERS}
    for verdict, n in model.counts.items():
        if counters[f"rx_{verdict}"] != n:
            problems.append(f"rx_{verdict}: {counters[f'rx_{verdict}']}, model {n}")
    write_result({"problems": problems, "kinds": kinds, "back": len(got),
                  "good": len(want), "counters": counters})
    assert not problems, problems


async def _delayed_copy(clk, copy, ns, period_ns):
    """Drive ``copy`` as ``clk`` delayed by ``ns``."""
    while True:
        await RisingEdge(clk)
        await Timer(ns, unit="ns")
        copy.value = 1
        await Timer(period_ns / 2, unit="ns")
        copy.value = 0
