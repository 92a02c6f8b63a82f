"""cocotb testbench: the Ethernet MAC (hw/board/mac.py) against its model
(sim/board/mac_model.py), with cocotbext-eth's GMII source and sink as the PHY and
cocotbext-axi's AXI4-Stream source and sink as the NIC.

:class:`MacTestTop` is the MAC with AXI4-Stream names on its NIC side. The receive side runs on
its own clock (``rx_clk``, 125 MHz) and the NIC side on ``clk``, a different period, so frames
cross between unrelated clocks as they do on a board.

``random_traffic`` (scenario: ``seed``, ``frames``, ``pause``: the NIC side's idle and
backpressure, ``clk_ns``):

* receive: good frames from 60 bytes to ``max_frame``, runts, frames past ``max_frame``, bad
  FCS (a flipped bit anywhere), ``rx_er`` on one byte, a wrong byte in the preamble, a
  preamble with no SFD, and bursts too short to hold an FCS. Every good frame must come out, in
  order and byte for byte, unless counted as an overflow; the receiver's counters must equal the
  model's verdicts.
* transmit: random frames from 1 byte to ``max_frame - 4`` under idle on the NIC side. Every
  frame must go out as the model's wire bytes (padding and FCS), without ``tx_er``, at least 12
  idle byte clocks apart.
"""

import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource
from cocotbext.eth import GmiiFrame, GmiiSink, GmiiSource
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from supernic.hw.axis import AxiStreamSignature
from supernic.hw.board.gmii import GmiiSignature
from supernic.hw.board.mac import MAC_COUNTERS, EthernetMac
from supernic.sim.board.mac_model import PREAMBLE, MacRxModel, fcs, wire_frame
from supernic.sim.tb.bench_env import design as read_design, env as _env, write_result

__all__ = ["MacTestTop", "mac_simulator"]

RX_PERIOD_NS = 8


class MacTestTop(wiring.Component):
    def __init__(self, data_width, max_frame, rx_fifo_bytes, tx_fifo_bytes):
        self.mac = EthernetMac(data_width, max_frame, rx_fifo_bytes, tx_fifo_bytes)
        super().__init__({
            "gmii": Out(GmiiSignature()),
            "m_axis": Out(AxiStreamSignature(data_width)),
            "s_axis": In(AxiStreamSignature(data_width)),
            **{name: Out(32) for name in MAC_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = mac = self.mac
        wiring.connect(m, wiring.flipped(self.gmii), mac.gmii)
        m.d.comb += [self.m_axis.tdata.eq(mac.o.p.data), self.m_axis.tkeep.eq(mac.o.p.keep),
                     self.m_axis.tlast.eq(mac.o.p.last), self.m_axis.tvalid.eq(mac.o.valid),
                     mac.o.ready.eq(self.m_axis.tready),
                     mac.i.p.data.eq(self.s_axis.tdata), mac.i.p.keep.eq(self.s_axis.tkeep),
                     mac.i.p.last.eq(self.s_axis.tlast), mac.i.valid.eq(self.s_axis.tvalid),
                     self.s_axis.tready.eq(mac.i.ready)]
        for name in MAC_COUNTERS:
            m.d.comb += getattr(self, name).eq(getattr(mac, name))
        return m


def mac_simulator(data_width=64, max_frame=2048, rx_fifo_bytes=4096, tx_fifo_bytes=4096,
                  progress=print):
    """:class:`MacTestTop` built (and cached) for cocotb."""
    import hashlib
    from pathlib import Path
    from supernic.sim.build import build_simulator, generated_component
    name = f"mac_w{data_width}_m{max_frame}_r{rx_fifo_bytes}_t{tx_fifo_bytes}"
    description = {"data_width": data_width, "max_frame": max_frame,
                   "rx_fifo_bytes": rx_fifo_bytes, "tx_fifo_bytes": tx_fifo_bytes}
    key = {**description, "bench": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]}
    paths = generated_component(
        name, key, lambda: MacTestTop(data_width, max_frame, rx_fifo_bytes, tx_fifo_bytes),
        description, progress=progress)
    return build_simulator(paths["verilog"], name, paths["regmap"], progress=progress)


# --- cocotb side ----------------------------------------------------------------------------

def _pauses(rng, rate):
    """A pause generator for cocotbext-axi: bursts of ``rate`` pauses, some stretches none."""
    while True:
        busy = rng.random() < 0.5
        for _ in range(rng.randrange(1, 200)):
            yield busy and rng.random() < rate


def _rx_bursts(rng, count, max_frame):
    """``(kind, GmiiFrame)``: each kind of good and bad burst the receiver must tell apart."""
    kinds = ["good"] * 6 + ["runt", "long", "fcs", "er", "preamble", "no_sfd", "tiny", "jumbo"]
    for _ in range(count):
        kind = rng.choice(kinds)
        size = {"good": rng.randrange(60, min(max_frame - 4, 400)),
                "jumbo": rng.randrange(max_frame - 64, max_frame - 3),
                "runt": rng.randrange(1, 60), "long": rng.randrange(max_frame - 3,
                                                                      max_frame + 40),
                "tiny": 0}.get(kind, rng.randrange(60, 300))
        body = bytes(rng.getrandbits(8) for _ in range(size))
        wire = bytearray(PREAMBLE[rng.randrange(0, 7):] + body + fcs(body))
        error = None
        if kind == "tiny":
            wire = bytearray(PREAMBLE + bytes(rng.getrandbits(8) for _ in range(rng.randrange(5))))
        elif kind == "fcs":
            bit = rng.randrange(8 * (len(wire) - 8))
            wire[8 + bit // 8] ^= 1 << (bit % 8)
        elif kind == "er":
            error = [0] * len(wire)
            error[rng.randrange(len(wire))] = 1
        elif kind == "preamble":
            wire[rng.randrange(0, 6)] = rng.choice([0x00, 0x5D, 0xFF])
        elif kind == "no_sfd":
            wire = bytearray(b"\x55" * rng.randrange(1, 12))
        yield kind, GmiiFrame(wire, error)


@cocotb.test()
async def random_traffic(dut):
    design = read_design()
    max_frame = design["max_frame"]
    rng = random.Random(_env("seed", 1, int))
    count = _env("frames", 200, int)
    pause = _env("pause", 0.3, float)
    clk_ns = _env("clk_ns", 7, float)

    cocotb.start_soon(Clock(dut.clk, clk_ns, unit="ns").start())
    cocotb.start_soon(Clock(dut.rx_clk, RX_PERIOD_NS, unit="ns").start())
    gmii_rx = GmiiSource(dut.gmii__rxd, dut.gmii__rx_er, dut.gmii__rx_dv, dut.rx_clk)
    gmii_tx = GmiiSink(dut.gmii__txd, dut.gmii__tx_er, dut.gmii__tx_en, dut.clk)
    for bfm in (gmii_rx, gmii_tx):
        bfm.log.setLevel(logging.WARNING)       # not a line per frame
    nic_out = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis", bus_separator="__"),
                            dut.clk, dut.rst)
    nic_in = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis", bus_separator="__"),
                             dut.clk, dut.rst)
    nic_out.set_pause_generator(_pauses(random.Random(rng.random()), pause))
    nic_in.set_pause_generator(_pauses(random.Random(rng.random()), pause))
    dut.rst.value = 1
    dut.rx_rst.value = 1
    await Timer(10 * RX_PERIOD_NS, unit="ns")
    dut.rst.value = 0
    dut.rx_rst.value = 0
    await RisingEdge(dut.clk)

    t0 = get_sim_time("step")
    await RisingEdge(dut.clk)
    period = get_sim_time("step") - t0      # the NIC clock's period, in the sink's time steps

    # Receive: every burst to the model and to the PHY side.
    model = MacRxModel(max_frame)
    kinds = []
    for kind, burst in _rx_bursts(rng, count, max_frame):
        kinds.append(kind)
        model.receive(bytes(burst.data), burst.error)
        await gmii_rx.send(burst)
    # Transmit: frames from the NIC side.
    sent = [bytes(rng.getrandbits(8) for _ in range(rng.choice(
        [rng.randrange(1, 61), rng.randrange(60, 300), rng.randrange(1, max_frame - 3)])))
        for _ in range(count // 2)]
    for frame in sent:
        await nic_in.send(AxiStreamFrame(frame))

    received, wire = [], []
    # Quiet for as long as a largest frame takes to cross at a byte a cycle under pauses:
    # only whole frames show up at the sink.
    quiet, settle = 0, 4 * max_frame + 1000
    while quiet < settle:
        await ClockCycles(dut.clk, 100)
        busy = False
        while not nic_out.empty():
            received.append(bytes((await nic_out.recv()).tdata))
            busy = True
        while not gmii_tx.empty():
            wire.append(await gmii_tx.recv())
            busy = True
        busy = busy or not gmii_rx.empty() or gmii_rx.active or not nic_in.empty()
        quiet = 0 if busy else quiet + 100

    counters = {name: int(getattr(dut, name).value) for name in MAC_COUNTERS}
    problems = []
    # Good frames out in order; the ones missing are the overflows counted.
    want = iter(model.frames)
    missing = []
    for got in received:
        for frame in want:
            if frame == got:
                break
            missing.append(len(frame))
        else:
            problems.append(f"frame out of order or not sent: {got[:16].hex()}... "
                            f"({len(got)} bytes)")
            break
    missing += [len(frame) for frame in want]
    if len(missing) != counters["rx_overflows"]:
        problems.append(f"{len(missing)} good frames missing (sizes {missing[:5]}), "
                        f"{counters['rx_overflows']} counted as overflows")
    for verdict, n in model.counts.items():
        if counters[f"rx_{verdict}"] != n:
            problems.append(f"rx_{verdict}: {counters[f'rx_{verdict}']}, model {n}")
    # Transmitted frames: the model's bytes, no error, the gap kept.
    if len(wire) != len(sent):
        problems.append(f"{len(sent)} frames sent by the NIC, {len(wire)} on the wire")
    gaps = []
    for k, (frame, got) in enumerate(zip(sent, wire)):
        # GmiiSink keeps no byte of the clock on which tx_en rises (it starts its frame
        # there): the first preamble byte is checked by its start time instead.
        want_wire, got_wire = wire_frame(frame)[1:], bytes(got.data)
        if got_wire != want_wire:
            at = next((i for i, (a, b) in enumerate(zip(got_wire, want_wire)) if a != b),
                      min(len(got_wire), len(want_wire)))
            problems.append(f"transmitted frame {k} ({len(frame)} bytes) differs from the "
                            f"model at byte {at} of {len(want_wire)} (got {len(got_wire)}): "
                            f"{got_wire[max(0, at - 4):at + 8].hex()} against "
                            f"{want_wire[max(0, at - 4):at + 8].hex()}")
        if got.error and any(got.error):
            problems.append(f"transmitted frame {k} has tx_er")
        if k:
            # Idle clocks between two frames: from the first clock without tx_en to the
            # first with it again.
            gaps.append(round((got.sim_time_start - wire[k - 1].sim_time_end) / period))
    if gaps and min(gaps) < 12:
        problems.append(f"an inter-frame gap of {min(gaps)} clocks (802.3 clause 4.4.2: 12)")
    write_result({"problems": problems[:10], "counters": counters, "kinds": kinds,
                  "received": len(received), "transmitted": len(wire),
                  "good": len(model.frames), "min_gap_clocks": min(gaps) if gaps else None,
                  "clk_ns": clk_ns})
    assert not problems, problems[:5]
