"""cocotb testbench for :mod:`supernic.sim.tb.csr_top` (the register file over AXI4-Lite).

Every bus response is compared with :class:`~supernic.sim.csr_model.RegisterFileModel`; the driver
side (``discover``, ``read_register``) runs over the same bus as it would on hardware. The free
running ``cycles`` counter cannot be predicted by the model, so its reads are checked by their
own rule instead: a lo/hi pair must be a value the counter had while the lo read was in flight.
"""

import itertools
import logging
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from supernic.driver.discovery import check_supported, discover, read_register
from supernic.driver.transport import Response
from supernic.desc.registers import RW, W1P
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.csr_model import RegisterFileModel
from supernic.sim.tb.csr_top import BUILD_ID, CYCLES_INIT, CYCLES_STEP, csr_test_map

# A hung handshake must end the test with a failure, not stall the run. The longest test needs
# about 10 us of simulated time.
TIMEOUT_US = 200

# RW registers of the test block and the top-level port that shows each one.
RW_PORTS = {("test", "control"): "control_out", ("test", "mode"): "mode_out",
            ("test", "limit"): "limit_out", ("test", "push"): "push_out"}


def cycles_step_count(value):
    """How many steps the counter took to reach ``value``, or None if it never held it."""
    steps, remainder = divmod(value - CYCLES_INIT, CYCLES_STEP)
    return steps if remainder == 0 and steps >= 0 else None


def random_pauses(rng, probability):
    return (rng.random() < probability for _ in itertools.count())


class CsrTb:
    def __init__(self, dut, salt=0):
        self.dut = dut
        self.rng = random.Random(cocotb.RANDOM_SEED + salt)
        self.regmap = csr_test_map()
        self.regmap_json = self.regmap.to_json()
        self.model = RegisterFileModel(self.regmap_json)
        self.model.set_input("id", "build", BUILD_ID)
        self.words = self.model.words
        self.kicks = []
        self.strobes = []
        Clock(dut.clk, 4, unit="ns").start()
        self.bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", reset=dut.rst)
        # cocotbext-axi logs every transfer at INFO; thousands of lines hide the failure.
        self.bus.master.write_if.log.setLevel(logging.WARNING)
        self.bus.master.read_if.log.setLevel(logging.WARNING)

    async def reset(self):
        self.dut.rst.value = 1
        self.dut.status_in.value = 0
        self.dut.flags_in.value = 0
        self.dut.pop_in.value = 0
        await ClockCycles(self.dut.clk, 4)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)
        cocotb.start_soon(self._monitor_kicks())

    async def _monitor_kicks(self):
        # Sample between edges: a one-cycle strobe is then seen exactly once.
        while True:
            await FallingEdge(self.dut.clk)
            value = int(self.dut.kick_out.value)
            if value:
                self.kicks.append(value)
            # An access strobe comes with the register's value after the access: a pushed
            # value is in place when its strobe pulses, a popped one still shows.
            if int(self.dut.pop_stb_out.value):
                self.strobes.append(("pop_stb", int(self.dut.pop_in.value)))
            if int(self.dut.push_stb_out.value):
                self.strobes.append(("push_stb", int(self.dut.push_out.value)))

    def backpressure(self, probability):
        """Random pauses on every channel: valid gaps on AW/W/AR, ready gaps on B/R."""
        if probability == 0:
            self.bus.set_pause_generators()
            return
        self.bus.set_pause_generators(
            *(random_pauses(self.rng, probability) for _ in range(5)))

    def cycles_now(self):
        return int(self.dut.cycles_out.value)

    def set_inputs(self):
        status = self.rng.getrandbits(32)
        flags = self.rng.getrandbits(7)
        self.dut.status_in.value = status
        self.dut.flags_in.value = flags
        self.model.set_input("test", "status", status)
        self.model.set_input("test", "flags", flags)
        pop = self.rng.getrandbits(16)
        self.dut.pop_in.value = pop
        self.model.set_input("test", "pop", pop)

    def check_outputs(self):
        for (block, reg), port in RW_PORTS.items():
            got = int(getattr(self.dut, port).value)
            assert got == self.model.get(block, reg), (
                f"{port} = {got:#x}, model {self.model.get(block, reg):#x}")

    def check_kicks(self):
        expected = [bits for block, reg, bits in self.model.pulses if reg == "kick"]
        assert self.kicks == expected, f"kick strobes {self.kicks}, model {expected}"
        expected = [(reg, value) for block, reg, value in self.model.pulses
                    if reg.endswith("_stb")]
        assert self.strobes == expected, f"access strobes {self.strobes}, model {expected}"

    def random_address(self):
        choice = self.rng.random()
        if choice < 0.7:
            return self.rng.choice(list(self.words))
        if choice < 0.85:
            # Just past a block: inside its alignment slot but not mapped.
            block = self.rng.choice(self.regmap_json["blocks"])
            return block["base"] + self.rng.randrange(block["size"], 0x100, 4)
        return self.rng.randrange(0, 1 << 16, 4)

    def random_strobe(self):
        if self.rng.random() < 0.6:
            return 0b1111
        first = self.rng.randrange(4)
        count = self.rng.randrange(1, 5 - first)
        return ((1 << count) - 1) << first

    async def read_and_check(self, address, cycles_lo):
        """Read ``address`` and compare with the model. ``cycles_lo`` is the value of the last
        ``cycles_lo`` read (None before any); the new one is returned, to thread through."""
        value, response = await self.bus.read_word(address)
        expected_value, expected_response = self.model.read(address)
        assert response == expected_response, (
            f"read {address:#06x}: {response!r}, model {expected_response!r}")
        word = self.words.get(address)
        if word is not None and word.register == "cycles":
            if word.part == 0:
                return value
            if cycles_lo is None:
                assert value == 0, f"cycles_hi before any lo read: {value:#x}, want 0"
            else:
                pair = value << 32 | cycles_lo
                assert cycles_step_count(pair) is not None, f"torn 64-bit read {pair:#x}"
            return cycles_lo
        assert value == expected_value, (
            f"read {address:#06x}: {value:#010x}, model {expected_value:#010x}")
        return cycles_lo


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def test_discovery(dut):
    """The driver walks the block list and finds what the map describes."""
    tb = CsrTb(dut)
    await tb.reset()
    blocks = await discover(tb.bus)
    described = tb.regmap_json["blocks"]
    assert [(b.base, b.type_id, b.version, b.next) for b in blocks] == [
        (d["base"], d["type"], d["version"], d["next"]) for d in described]
    unknown = check_supported(blocks)
    assert [b.base for b in unknown] == [tb.regmap.bases["test"]]
    assert blocks[0].name == "id" and (blocks[0].major, blocks[0].minor) == (1, 0)
    assert await read_register(tb.bus, tb.regmap_json, "id", "build") == BUILD_ID
    assert await read_register(tb.bus, tb.regmap_json, "test", "limit") == 0x0123_4567_89AB_CDEF
    before = tb.cycles_now()
    cycles = await read_register(tb.bus, tb.regmap_json, "test", "cycles")
    assert cycles_step_count(cycles) is not None
    assert before <= cycles <= tb.cycles_now()


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def test_reset_values(dut):
    """Every mapped word reads its reset value; RW ports hold their reset values."""
    tb = CsrTb(dut)
    await tb.reset()
    tb.check_outputs()
    cycles_lo = None
    for address in sorted(tb.words):
        cycles_lo = await tb.read_and_check(address, cycles_lo)


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
@cocotb.parametrize(backpressure=[0.0, 0.5])
async def test_random_traffic(dut, backpressure):
    """Random reads and writes (partial strobes, unmapped and read-only addresses) against the
    model, optionally with random valid gaps and ready backpressure on every channel."""
    tb = CsrTb(dut, salt=int(backpressure * 100))
    await tb.reset()
    tb.backpressure(backpressure)
    cycles_lo = None
    for _ in range(400):
        if tb.rng.random() < 0.2:
            tb.set_inputs()
        address = tb.random_address()
        if tb.rng.random() < 0.5:
            cycles_lo = await tb.read_and_check(address, cycles_lo)
        else:
            value = tb.rng.getrandbits(32)
            strobe = tb.random_strobe()
            response = await tb.bus.write_word(address, value, strobe)
            expected = tb.model.write(address, value, strobe)
            assert response == expected, (
                f"write {address:#06x} {value:#010x}/{strobe:#06b}: {response!r}, "
                f"model {expected!r}")
            tb.check_outputs()
    await ClockCycles(dut.clk, 2)
    tb.check_kicks()


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def test_concurrent_read_write(dut):
    """Reads and writes in flight at the same time do not disturb each other."""
    tb = CsrTb(dut, salt=7)
    await tb.reset()
    tb.backpressure(0.3)
    write_words = [a for a, w in tb.words.items() if w.block == "test" and w.access in (RW, W1P)]
    read_words = [a for a, w in tb.words.items()
                  if w.block == "id" or w.access is None or w.register in ("status", "flags")]

    async def writer():
        for _ in range(150):
            address = tb.rng.choice(write_words)
            value = tb.rng.getrandbits(32)
            response = await tb.bus.write_word(address, value)
            assert response == tb.model.write(address, value) == Response.OKAY

    async def reader():
        for _ in range(150):
            await tb.read_and_check(tb.rng.choice(read_words), cycles_lo=None)

    tasks = [cocotb.start_soon(writer()), cocotb.start_soon(reader())]
    for task in tasks:
        await task
    tb.check_outputs()
    await ClockCycles(dut.clk, 2)
    tb.check_kicks()


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def test_counter_latch(dut):
    """A lo read latches hi: the pair is the value the counter had at the lo read, however long
    software waits before reading hi, and hi reads repeat until the next lo read."""
    tb = CsrTb(dut, salt=11)
    await tb.reset()
    lo_address = tb.regmap.address_of("test", "cycles_lo")
    hi_address = tb.regmap.address_of("test", "cycles_hi")
    assert await tb.bus.read32(hi_address) == 0
    for _ in range(20):
        before = tb.cycles_now()
        lo = await tb.bus.read32(lo_address)
        after = tb.cycles_now()
        # Long enough for the counter's hi word to move at least once.
        await ClockCycles(dut.clk, tb.rng.randrange(20, 60))
        hi = await tb.bus.read32(hi_address)
        value = hi << 32 | lo
        assert cycles_step_count(value) is not None, f"torn 64-bit read {value:#x}"
        assert before <= value <= after, f"{value:#x} not read between {before:#x}, {after:#x}"
        assert (tb.cycles_now() >> 32) != hi
        await ClockCycles(dut.clk, tb.rng.randrange(1, 30))
        assert await tb.bus.read32(hi_address) == hi


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def test_write_channel_order(dut):
    """A write completes whether W comes before AW or AW before W, and not before both."""
    tb = CsrTb(dut, salt=13)
    await tb.reset()
    write_if = tb.bus.master.write_if
    address = tb.regmap.address_of("test", "control")
    for first_held, ready_name in ((write_if.aw_channel, "s_axil__wready"),
                                   (write_if.w_channel, "s_axil__awready")):
        value = tb.rng.getrandbits(32)
        first_held.pause = True
        task = cocotb.start_soon(tb.bus.write_word(address, value))
        await ClockCycles(dut.clk, 10)
        assert not task.done() and int(dut.s_axil__bvalid.value) == 0
        # The channel that did arrive is held, and the slave takes no second beat on it.
        assert int(getattr(dut, ready_name).value) == 0
        first_held.pause = False
        assert await task == Response.OKAY == tb.model.write(address, value)
        tb.check_outputs()


@cocotb.test(timeout_time=TIMEOUT_US, timeout_unit="us")
async def test_responses_hold(dut):
    """Under ready backpressure, rvalid/rdata/rresp and bvalid/bresp hold until taken."""
    tb = CsrTb(dut, salt=17)
    await tb.reset()
    read_if, write_if = tb.bus.master.read_if, tb.bus.master.write_if
    cases = [("read", tb.regmap.address_of("id", "scratch")), ("read", 0xFFF0),
             ("write", tb.regmap.address_of("id", "type")), ("write", 0xFFF0)]
    for kind, address in cases:
        # Let the previous response's valid drop so it is not mistaken for this one.
        await ClockCycles(dut.clk, 2)
        if kind == "read":
            channel, valid, payload = read_if.r_channel, "rvalid", ("rdata", "rresp")
            task = cocotb.start_soon(tb.bus.read_word(address))
        else:
            channel, valid, payload = write_if.b_channel, "bvalid", ("bresp",)
            task = cocotb.start_soon(tb.bus.write_word(address, 0xFFFF_FFFF))
        channel.pause = True
        while not int(getattr(dut, f"s_axil__{valid}").value):
            await RisingEdge(dut.clk)
        held = [int(getattr(dut, f"s_axil__{name}").value) for name in payload]
        for _ in range(10):
            await RisingEdge(dut.clk)
            assert int(getattr(dut, f"s_axil__{valid}").value) == 1
            assert [int(getattr(dut, f"s_axil__{name}").value) for name in payload] == held
        channel.pause = False
        result = await task
        expected = tb.model.read(address) if kind == "read" else tb.model.write(address,
                                                                                0xFFFF_FFFF)
        assert result == expected, f"{kind} {address:#06x}: {result!r}, model {expected!r}"
