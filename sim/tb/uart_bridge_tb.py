"""cocotb testbench: the UART register bridge (hw/board/uart_bridge.py) against its model
(sim/board/uart_bridge_model.py), cocotbext-uart as the host's serial port and cocotbext-axi's
``AxiLiteRam`` as the registers.

``random_requests`` (scenario: ``seed``, ``requests``): random reads and writes with random
strobes and random AXI-Lite stalls, some of them to the bridge's own read-only words (reads of
words past them and writes answered SLVERR); between them bytes that are no command (answered ``?``),
requests cut short and left to time out (no reply; the next request works), and line breaks
(framing errors, counted, the byte dropped). Every reply must equal the model's, and at the end
every word the model holds must read back the same through the bridge.
"""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer
from cocotbext.axi import AxiLiteBus, AxiLiteRam
from cocotbext.uart import UartSink, UartSource
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from supernic.desc.uart_bridge import REPLY_BYTES, TIMEOUT_BYTES, encode_read, encode_write
from supernic.hw.board.uart_bridge import UartAxiLiteBridge
from supernic.hw.csr.axil import AxiLiteSignature
from supernic.sim.board.uart_bridge_model import UartBridgeModel
from supernic.sim.tb.bench_env import design as read_design, env as _env, write_result

__all__ = ["BridgeTestTop", "bridge_simulator"]

CLK_HZ, BAUD = 100e6, 5_000_000      # 20 clocks a bit: a short bench
#: The board words the test top gives the bridge.
BOARD_WORDS = [0x1111_1111 * (k + 1) for k in range(3)]


class BridgeTestTop(wiring.Component):
    def __init__(self):
        self.bridge = UartAxiLiteBridge(CLK_HZ, BAUD, addr_width=16,
                                        board_words=len(BOARD_WORDS))
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1),
                          "m_axil": Out(AxiLiteSignature(16)),
                          "framing_errors": Out(16), "timeouts": Out(16),
                          "dropped_bytes": Out(16)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.bridge = bridge = self.bridge
        m.d.comb += [bridge.rx.eq(self.rx), self.tx.eq(bridge.tx)]
        m.d.comb += [bridge.board[k].eq(v) for k, v in enumerate(BOARD_WORDS)]
        wiring.connect(m, bridge.m_axil, wiring.flipped(self.m_axil))
        for name in ("framing_errors", "timeouts", "dropped_bytes"):
            m.d.comb += getattr(self, name).eq(getattr(bridge, name))
        return m


def bridge_simulator(progress=print):
    import hashlib
    from pathlib import Path
    from supernic.sim.build import build_simulator, generated_component
    description = {"clk_hz": CLK_HZ, "baud": BAUD}
    key = {**description, "bench": hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:12]}
    paths = generated_component("uart_bridge", key, BridgeTestTop, description,
                                progress=progress)
    return build_simulator(paths["verilog"], "uart_bridge", paths["regmap"], progress=progress)


def _stalls(rng):
    while True:
        yield rng.random() < 0.3


@cocotb.test()
async def random_requests(dut):
    read_design()
    rng = random.Random(_env("seed", 1, int))
    count = _env("requests", 150, int)
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    dut.rx.value = 1
    host = UartSource(dut.rx, baud=BAUD)
    device = UartSink(dut.tx, baud=BAUD)
    ram = AxiLiteRam(AxiLiteBus.from_prefix(dut, "m_axil", bus_separator="__"), dut.clk,
                     dut.rst, size=2 ** 16)
    for channel in ("aw", "w", "b", "ar", "r"):
        getattr(ram.write_if if channel in ("aw", "w", "b") else ram.read_if,
                f"{channel}_channel").set_pause_generator(_stalls(random.Random(rng.random())))
    dut.rst.value = 1
    await ClockCycles(dut.clk, 5)
    dut.rst.value = 0
    await RisingEdge(dut.clk)

    model = UartBridgeModel(16, board=BOARD_WORDS)
    byte_ns = 10 * 1e9 / BAUD
    problems, kinds = [], []
    breaks = timeouts = 0

    async def exchange(data, expect):
        await host.write(data)
        await host.wait()
        got = b""
        for _ in range(200):
            if len(got) >= len(expect):
                break
            await Timer(byte_ns, unit="ns")
            got += bytes(device.read_nowait())
        await Timer(3 * byte_ns, unit="ns")      # anything more would be a fault
        got += bytes(device.read_nowait())
        if got != expect:
            problems.append(f"{data.hex()}: got {got.hex() or 'nothing'}, want {expect.hex()}")

    # NIC registers, and the bridge's own words (three, then one past them, then far past).
    addresses = [4 * rng.randrange(64) for _ in range(24)] + [0xFFFC, 0] + [
        0x1_0000, 0x1_0004, 0x1_0008, 0x1_000C, 0x8000_0000]
    for _ in range(count):
        kind = rng.choice(["write"] * 4 + ["read"] * 4 + ["junk", "cut", "break"])
        kinds.append(kind)
        address = rng.choice(addresses)
        if kind == "write":
            data = encode_write(address, rng.getrandbits(32), rng.randrange(16))
            await exchange(data, model.feed(data))
        elif kind == "read":
            data = encode_read(address)
            await exchange(data, model.feed(data))
        elif kind == "junk":
            data = bytes([rng.choice([0x00, 0x3F, 0x41, 0xFF])])
            await exchange(data, model.feed(data))
        elif kind == "cut":
            full = encode_write(address, rng.getrandbits(32)) if rng.random() < 0.5 \
                else encode_read(address)
            data = full[:rng.randrange(1, len(full))]
            await exchange(data, model.feed(data))      # no reply
            await Timer((TIMEOUT_BYTES + 2) * byte_ns, unit="ns")
            model.timeout()
            timeouts += 1
        else:   # a break: the line low for two byte times, then idle
            dut.rx.value = 0
            await Timer(2 * byte_ns, unit="ns")
            dut.rx.value = 1
            await Timer(2 * byte_ns, unit="ns")
            breaks += 1
    # Every word the model holds reads back the same through the bridge.
    for address in sorted(model.memory):
        data = encode_read(address)
        await exchange(data, model.feed(data))
    counters = {name: int(getattr(dut, name).value)
                for name in ("framing_errors", "timeouts", "dropped_bytes")}
    if counters["timeouts"] != timeouts:
        problems.append(f"{counters['timeouts']} timeouts counted, {timeouts} made")
    if counters["framing_errors"] != breaks:
        problems.append(f"{counters['framing_errors']} framing errors counted, {breaks} breaks")
    write_result({"problems": problems[:10], "kinds": kinds, "counters": counters,
                  "words": len(model.memory), "reply_bytes": REPLY_BYTES})
    assert not problems, problems[:5]
