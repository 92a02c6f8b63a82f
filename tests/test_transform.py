"""The state-yielding transform (hw/transform).

On a small component in Amaranth's simulator: the state map, stop at once and at a packet
boundary, reading and writing flip-flops, read-port registers and memory rows, resume, and the
errors. Then every library NT on Verilator: random and malformed traffic under idle and
backpressure, stopped at random cycles (alternately at once and at a packet boundary), all
state captured, checked against the simulator's own flip-flops and memory rows, scrambled,
read back, restored and resumed; the output must equal the model's bit for bit. And two
tenants time-sharing one NT instance by context switches, each as if alone.
"""

import json
import random
from pathlib import Path

import pytest
from amaranth.hdl import Cat, ClockDomain, Const, Fragment, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory, MemoryData
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from supernic.driver.state import service_traps
from supernic.hw.nt.task import task_classes
from supernic.hw.transform import StateMap, TransformError, Yieldable, state_map_of
from supernic.sim.session import run_bench, task_simulator

BEAT = data.StructLayout({"data": 8, "last": 1})


class Scrambler(wiring.Component):
    """Each beat out is its data XOR a table row that the previous beats wrote: a 40-bit
    accumulator (two words of state), a 16-row memory with a synchronous read port, and a
    one-beat output register. Exact output depends on all of its state."""

    i: In(stream.Signature(BEAT))
    o: Out(stream.Signature(BEAT))

    def __init__(self):
        super().__init__()
        self.table = MemoryData(shape=8, depth=16, init=range(16))

    def elaborate(self, platform):
        m = Module()
        m.submodules.table = table = Memory(data=self.table)
        wp, rp = table.write_port(), table.read_port()
        acc = Signal(40)
        held = Signal(8)
        held_last = Signal()
        busy = Signal()     # a beat waits for its table row (read latency 1)
        m.d.comb += [rp.addr.eq(self.i.payload.data[:4]), rp.en.eq(~busy)]
        m.d.comb += self.i.ready.eq(~busy)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [held.eq(self.i.payload.data), held_last.eq(self.i.payload.last),
                         busy.eq(1), acc.eq(acc + self.i.payload.data + 1)]
        with m.If(busy & (~self.o.valid | self.o.ready)):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.data.eq(held ^ rp.data),
                         self.o.payload.last.eq(held_last), busy.eq(0)]
            m.d.comb += [wp.addr.eq(held[4:]), wp.data.eq(acc[:8]), wp.en.eq(1)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m


def reference(beats):
    """The Scrambler's output for ``beats`` ((data, last) pairs), run without interruption."""
    table, acc, out = list(range(16)), 0, []
    for value, last in beats:
        row = table[value & 15]
        acc = (acc + value + 1) % 2 ** 40
        out.append((value ^ row, last))
        table[value >> 4] = acc & 0xFF
    return out


def run_scrambler(beats, interrupt, before=None, state="full"):
    return _run_component(Yieldable(Scrambler(), state=state), beats, interrupt, before)


def _run_component(dut, beats, interrupt, before=None, gap=False):
    """Send ``beats`` through ``dut``, a transformed component with a beat stream in and out
    (a source and a sink with backpressure, each its own process; with ``gap``, the source
    idles a cycle after every beat taken). ``before(ctx, y)`` is awaited before the first cycle;
    ``interrupt(ctx, y, cycle, progress)`` every cycle (``progress``: beats ``"in"`` so far and
    the beats ``"out"``); if it returns True the run ends there. Returns ``(beats out, beats
    taken)``."""
    progress = {"in": 0, "out": []}
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def sink(ctx):
        # Its own process, so beats leaving while an interrupt runs are seen too.
        cycle = 0
        async for _, _, gave, value, last in ctx.tick().sample(
                dut.o.valid & dut.o.ready, dut.o.payload.data, dut.o.payload.last):
            if gave:
                progress["out"].append((value, last))
            cycle += 1
            ctx.set(dut.o.ready, cycle % 3 != 2)        # some backpressure

    async def source(ctx):
        # Its own process too: input keeps being offered while an interrupt runs (a stop at
        # a packet boundary waits for the packet to finish entering).
        async for _, _, took in ctx.tick().sample(dut.i.valid & dut.i.ready):
            progress["in"] += bool(took)
            k = progress["in"]
            ctx.set(dut.i.valid, k < len(beats) and not (gap and took))
            if k < len(beats):
                ctx.set(dut.i.payload.data, beats[k][0])
                ctx.set(dut.i.payload.last, beats[k][1])

    async def control(ctx):
        if before is not None:
            await before(ctx, dut.yld)
        cycle = 0
        while len(progress["out"]) < len(beats) and cycle < 20_000:
            await ctx.tick()
            cycle += 1
            if await interrupt(ctx, dut.yld, cycle, progress):
                return
        assert cycle < 20_000, "stalled"

    sim.add_testbench(source, background=True)
    sim.add_testbench(sink, background=True)
    sim.add_testbench(control)
    sim.run()
    return progress["out"], progress["in"]


BEATS = [((37 * n + 11) & 0xFF, n % 3 == 2) for n in range(60)]


def test_state_map_lists_every_register_and_row():
    smap = state_map_of(Scrambler(), state="full")
    kinds = {item.name: (item.kind, item.width) for item in smap.items}
    assert kinds["acc"] == ("ff", 40)
    assert kinds["held"] == ("ff", 8)
    assert kinds["table.rdport0"] == ("rdport", 8)
    # The scan chain: flip-flops and read-port registers packed bit after bit from address 0.
    chain = [i for i in smap.items if i.in_chain]
    assert [i.bit for i in chain] == [sum(c.width for c in chain[:k]) for k in range(len(chain))]
    assert smap.scan_words == -(-smap.chain_bits // 32)
    assert all(i.addr == i.bit // 32 for i in chain)
    table = smap.find("table")
    assert (table.kind, table.depth, table.width, table.words) == ("mem", 16, 8, 1)
    assert table.addr % 16 == 0                          # rows are an aligned bit field
    assert smap.bits == sum(i.width * i.depth for i in smap.items)
    assert StateMap.from_json(smap.to_json()).items == smap.items
    assert len(smap.addresses()) == smap.words


@pytest.mark.parametrize("kind", sorted(task_classes()))
def test_every_nt_state_item_has_a_name(kind):
    """Users read state maps: no item is an unnamed ``$signal`` (a tuple-unpacked Signal
    gets no name from Amaranth: one declaration a line)."""
    smap = state_map_of(task_classes()[kind](64, 256))
    assert [i.name for i in smap.items if "$signal" in i.name] == []


def test_runs_unchanged_when_never_stopped():
    async def never(ctx, y, cycle, progress):
        pass
    out, _ = run_scrambler(BEATS, never)
    assert out == reference(BEATS)


async def _stop(ctx, y, at_boundary):
    ctx.set(y.stop, 1)
    ctx.set(y.at_boundary, at_boundary)
    cycles = 0
    while not ctx.get(y.stopped):
        await ctx.tick()
        cycles += 1
    return cycles


async def _go(ctx, y, addr):
    """Move the state port to ``addr``; wait until it is there (the scan chain may turn)."""
    ctx.set(y.addr, addr)
    ctx.set(y.seek, 1)
    await ctx.tick()
    ctx.set(y.seek, 0)
    for _ in range(1000):
        if ctx.get(y.stopped):
            return
        await ctx.tick()
    raise TimeoutError(f"the state port did not reach address {addr}")


async def _read(ctx, y, addrs):
    """A pass (``addrs`` in map order): one seek, then a word a cycle, moving past each (a
    whole pass leaves the scan chain home)."""
    await _go(ctx, y, addrs[0])
    words = []
    for _ in addrs:
        ctx.set(y.next, 1)
        await ctx.tick()
        words.append(ctx.get(y.rdata))
    ctx.set(y.next, 0)
    return words


async def _write(ctx, y, addrs, words):
    await _go(ctx, y, addrs[0])
    for w in words:
        ctx.set(y.wdata, w)
        ctx.set(y.write, 1)
        await ctx.tick()
    ctx.set(y.write, 0)


@pytest.mark.parametrize("state,at_boundary", [("full", 0), ("full", 1), ("boundary", 1)])
def test_stop_capture_scramble_restore_resume(state, at_boundary):
    smap = state_map_of(Scrambler(), state=state)
    addrs = smap.addresses()
    seen = {}

    async def interrupt(ctx, y, cycle, progress):
        if cycle % 37:
            return
        seen.setdefault("latency", []).append(await _stop(ctx, y, at_boundary))
        saved = await _read(ctx, y, addrs)
        frozen = await _read(ctx, y, addrs)
        assert frozen == saved, "state changed while stopped"
        junk = [(a * 2654435761 + cycle) & 0xFFFF_FFFF for a in addrs]
        junk = smap.encode(smap.decode(junk))        # bits beyond each item's width are 0
        await _write(ctx, y, addrs, junk)
        assert await _read(ctx, y, addrs) == junk
        await _write(ctx, y, addrs, saved)
        ctx.set(y.stop, 0)
        await ctx.tick()

    out, _ = run_scrambler(BEATS, interrupt, state=state)
    assert out == reference(BEATS)
    assert len(seen["latency"]) >= 3
    if not at_boundary:
        assert set(seen["latency"]) == {1}


def test_reset_words_give_a_fresh_instance():
    """The state map knows every item's reset value: restored mid-run at a packet boundary,
    they make the component start over (a fresh context for a new tenant)."""
    smap = state_map_of(Scrambler(), state="full")
    assert smap.find("table").init == tuple(range(16)) and smap.find("acc").init == 0
    addrs = smap.addresses()
    at = {}

    async def interrupt(ctx, y, cycle, progress):
        if at or len(progress["out"]) < 30:
            return
        await _stop(ctx, y, 1)
        at["in"], at["out"] = progress["in"], len(progress["out"])
        await _write(ctx, y, addrs, smap.reset_words())
        ctx.set(y.stop, 0)
        await ctx.tick()

    out, _ = run_scrambler(BEATS, interrupt)
    assert at["in"] == at["out"] and at["out"] % 3 == 0          # drained, at a boundary
    assert out[:at["out"]] == reference(BEATS)[:at["out"]]
    assert out[at["out"]:] == reference(BEATS[at["in"]:])
    assert StateMap.from_json(smap.to_json()).reset_words() == smap.reset_words()


def test_boundary_stop_waits_for_the_packet_and_drains():
    """Stopped at a boundary, the component holds no packet: every beat taken has left, and the
    last one left ended a packet; it stays stopped until ``stop`` drops."""
    checked = []

    async def interrupt(ctx, y, cycle, progress):
        if cycle % 23 != 4:
            return
        await _stop(ctx, y, 1)
        out = progress["out"]
        assert len(out) == progress["in"] and out[-1][1] == 1
        for _ in range(5):
            await ctx.tick()
            assert ctx.get(y.stopped)
        checked.append(cycle)
        ctx.set(y.stop, 0)
        await ctx.tick()

    out, _ = run_scrambler(BEATS, interrupt)
    assert out == reference(BEATS)
    assert len(checked) >= 3


def test_capture_moves_state_to_a_second_instance():
    """Migration in miniature: stop instance A at a packet boundary mid-stream, capture it,
    restore the capture into a fresh instance B, send B the beats A did not take: A's output
    then B's equals the uninterrupted run, bit for bit."""
    smap = state_map_of(Scrambler(), state="full")
    addrs = smap.addresses()
    captured = []

    async def capture(ctx, y, cycle, progress):
        if cycle == 50:
            await _stop(ctx, y, 1)
            captured.extend(await _read(ctx, y, addrs))
            return True

    out_a, taken = run_scrambler(BEATS, capture)
    assert 0 < taken < len(BEATS)

    async def restore(ctx, y):
        await _stop(ctx, y, 0)
        await _write(ctx, y, addrs, captured)
        ctx.set(y.stop, 0)
        await ctx.tick()

    async def never(ctx, y, cycle, progress):
        pass

    out_b, _ = run_scrambler(BEATS[taken:], never, before=restore)
    assert out_a + out_b == reference(BEATS)


def test_errors_are_clear():
    with pytest.raises(TransformError, match="not an amaranth.lib.wiring.Component"):
        Yieldable(Module())

    class TwoClocks(wiring.Component):
        o: Out(1)

        def elaborate(self, platform):
            m = Module()
            m.domains.fast = ClockDomain()
            m.d.fast += self.o.eq(~self.o)
            return m

    with pytest.raises(TransformError, match="domain 'fast'"):
        Yieldable(TwoClocks())

    class HasYld(wiring.Component):
        yld: In(1)

        def elaborate(self, platform):
            return Module()

    with pytest.raises(TransformError, match="already has a port named 'yld'"):
        Yieldable(HasYld())


# The 64-bit build parameters of the NT contract tests (tests/test_nt_contract.py, which checks
# they agree), whose 64-bit builds are these transformed NTs: each build is made once and serves
# both.
BUILD_PARAMS_64 = {
    "chacha20": {"rounds_per_cycle": 5},
    "csum_verify": {"max_frame_bytes": 2048},
    "csum_offload": {"max_frame_bytes": 9216},
    "vxlan_encap": {"buffer_bytes": 4096},
}


@pytest.mark.parametrize("kind", sorted(task_classes()))
def test_nt_interrupted_equals_uninterrupted(kind, tmp_path):
    sim = task_simulator(kind, 64, BUILD_PARAMS_64.get(kind), yieldable="full")
    smap = StateMap.from_json(json.loads(Path(sim.regmap_path).read_text())["state_map"])
    # Each stop reads and writes every word a few times, one a cycle under cocotb: NTs with
    # large memories (checksum rings, flow tables) get two stops, the others four.
    stops = 4 if smap.words < 5000 else 2
    r = run_bench(sim, "interrupted_traffic",
                  {"packets": 300, "seed": 5, "interrupts": stops,
                   "golden_checks": 1 if stops == 2 else 2},
                  test_dir=tmp_path, module="supernic.sim.tb.yield_tb")
    t = r["transform"]
    assert r["packets_out"] == r["packets_in"] == 300
    assert r["mismatches"] == 0
    assert t["stops"] == stops and t["boundary_stops"] == stops // 2
    assert t["golden_missing"] == [], f"state the simulator could not name: {t['golden_missing']}"
    assert t["golden_compared"] == len(smap.items)
    assert t["scramble_mismatches"] == 0


@pytest.mark.parametrize("kind", ["flow_monitor", "rate_limiter"])
def test_read_ports_restored_through_their_memory(kind, tmp_path):
    """A live read port whose memory has another port for the state port is restored through
    the memory (its value written into row 0, read back by the port, row 0 restored after):
    random values written into every item, the CSR read ports' data registers too, must read
    back as written, and the capture written back must resume the traffic unchanged."""
    sim = task_simulator(kind, 64, BUILD_PARAMS_64.get(kind), yieldable="boundary")
    smap = StateMap.from_json(json.loads(Path(sim.regmap_path).read_text())["state_map"])
    reloaded = [i for i in smap.items if i.kind == "rdport" and not i.in_chain]
    assert reloaded and not any(i.kind == "rdport" and i.in_chain for i in smap.items)
    r = run_bench(sim, "interrupted_traffic",
                  {"packets": 200, "seed": 11, "interrupts": 2,
                   "golden_checks": 2},
                  test_dir=tmp_path, module="supernic.sim.tb.yield_tb")
    t = r["transform"]
    assert r["packets_out"] == r["packets_in"] == 200 and r["mismatches"] == 0
    assert t["stops"] == 2 and t["golden_missing"] == []
    assert t["golden_compared"] == len(smap.items)
    assert t["scramble_mismatches"] == 0


@pytest.mark.parametrize("kind", sorted(task_classes()))
def test_nt_boundary_state_is_sound(kind, tmp_path):
    """The boundary state port's differential test (sim/tb/yield_tb.py ``boundary_soundness``):
    at random packet boundaries, every flip-flop left out of the map gets random values and
    the capture is restored; the output must still equal the model's, bit for bit."""
    sim = task_simulator(kind, 64, BUILD_PARAMS_64.get(kind), yieldable="boundary")
    smap = StateMap.from_json(json.loads(Path(sim.regmap_path).read_text())["state_map"])
    assert smap.mode == "boundary" and smap.live_bits <= smap.all_flip_flop_bits
    r = run_bench(sim, "boundary_soundness",
                  {"packets": 300, "seed": 7, "interrupts": 6},
                  test_dir=tmp_path, module="supernic.sim.tb.yield_tb")
    t = r["transform"]
    assert r["packets_out"] == r["packets_in"] == 300
    assert r["mismatches"] == 0, r.get("reports")
    assert t["stops"] == 6 and t["missing"] == []
    assert t["scrambled_bits"] == 6 * sum(d["width"] * d.get("depth", 1) for d in smap.dead)
    assert t["config_scrambled_bits"] == 6 * sum(c["width"] * c.get("depth", 1)
                                                 for c in smap.config)


@pytest.mark.parametrize("drop", ["csr__packets", "h_count"])
def test_boundary_soundness_test_bites(drop, tmp_path):
    """The differential test fails when the map misses a live flip-flop: one left out by hand
    (scrambled after the restore, as if the map did not have it) changes the load balancer's
    counter or its packets."""
    sim = task_simulator("l4lb", 64, yieldable="boundary")
    smap = StateMap.from_json(json.loads(Path(sim.regmap_path).read_text())["state_map"])
    assert smap.find(drop).kind == "ff"
    try:
        r = run_bench(sim, "boundary_soundness",
                      {"packets": 300, "seed": 7, "interrupts": 20,
                       "drop_live": drop},
                      test_dir=tmp_path, module="supernic.sim.tb.yield_tb")
    except SystemExit:          # cocotb's runner: the bench failed
        return
    assert r["mismatches"] > 0 or r["counters"] != r["model_counters"]


class Delay(wiring.Component):
    """A one-beat register stage; with ``leak`` its data register also drives ``peek``."""

    def __init__(self, leak=False):
        self.leak = leak
        members = {"i": In(stream.Signature(BEAT)), "o": Out(stream.Signature(BEAT))}
        if leak:
            members["peek"] = Out(8)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        beat = Signal(BEAT)
        valid = Signal()
        m.d.comb += [self.i.ready.eq(~valid | self.o.ready), self.o.valid.eq(valid),
                     self.o.payload.eq(beat)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.eq(self.i.payload), valid.eq(1)]
        with m.Elif(self.o.ready):
            m.d.sync += valid.eq(0)
        if self.leak:
            m.d.comb += self.peek.eq(beat.data)
        return m


def test_boundary_map_leaves_out_only_guarded_stage_registers():
    """The Scrambler's beat registers, and its table's read-port register, are dead at a
    drained boundary (read only while busy or while the output is valid, which the stop waits
    to be 0); the accumulator and the table are not. A register an output reads unguarded
    stays live."""
    smap = state_map_of(Scrambler(), state="boundary")
    assert smap.mode == "boundary"
    guards = {d["name"]: d["guards"] for d in smap.dead}
    assert set(guards) == {"held", "held_last", "o__payload", "table.rdport0"}
    assert "busy" in guards["held"] and "busy" in guards["held_last"]
    assert guards["o__payload"] == ["o__valid"] and "busy" in guards["table.rdport0"]
    names = {i.name for i in smap.items}
    assert {"acc", "busy", "o__valid", "table"} <= names and "table.rdport0" not in names
    assert smap.all_flip_flop_bits == state_map_of(Scrambler(), state="full").flip_flop_bits - 8
    assert smap.live_bits == smap.all_flip_flop_bits - 18
    assert [d["name"] for d in state_map_of(Delay(), state="boundary").dead] == ["beat"]
    assert state_map_of(Delay(leak=True), state="boundary").dead == []


class Housekeeper(wiring.Component):
    """A one-stage pipeline that software feeds too: a write of ``go`` (a register's
    one-cycle strobe) leaves an operation pending, which takes the next slot instead of a beat
    (as the rate limiter's bucket writes do). ``op`` is read only while ``busy``."""

    def __init__(self, pulses=True):
        self.pulses = pulses
        super().__init__({"i": In(stream.Signature(BEAT)), "o": Out(stream.Signature(BEAT)),
                          "go": In(1)})

    def pulse_inputs(self):
        return [self.go] if self.pulses else []

    def elaborate(self, platform):
        m = Module()
        pending = Signal()
        busy = Signal()
        op = Signal(BEAT)
        m.d.comb += [self.i.ready.eq(~pending & self.o.ready), self.o.valid.eq(busy),
                     self.o.payload.eq(op)]
        with m.If(self.o.ready):
            m.d.sync += [busy.eq(pending | self.i.valid),
                         op.eq(Mux(pending, Cat(Const(0x55, 8), 1), self.i.payload))]
            with m.If(pending):
                m.d.sync += pending.eq(0)
        with m.If(self.go):
            m.d.sync += pending.eq(1)
        return m


def test_a_flag_a_register_write_raises_counts_as_drained():
    """A quiet component gets no register writes: with ``go`` named a strobe
    (``pulse_inputs``), ``pending`` clears in a drain, so ``busy`` does, and ``busy`` guards
    ``op``. Without it ``pending`` might be raised again in every cycle, ``busy`` is no
    guard and ``op`` stays live."""
    smap = state_map_of(Housekeeper())
    assert {d["name"]: d["guards"] for d in smap.dead} == {"op": ["busy"]}
    assert state_map_of(Housekeeper(pulses=False)).dead == []


def test_the_rate_limiter_and_checksums_keep_no_operation_in_flight():
    """The rate limiter scrubs only in the second half of its interval, so a drained limiter
    has no bucket operation in flight: each stage's operation, the values computed for it
    and the pipeline's read-port registers are dead under the stage's busy bit (the CSR's
    read ports stay live: software sees them). The checksum engine's picked words start
    from 0 at a packet's first beat (guarded by ``in_mid``) and its sums are read only while
    a packet is half through them (``acc_mid``)."""
    from supernic.hw.nt.checksum import ChecksumVerify
    from supernic.hw.nt.rate_limiter import RateLimiter
    smap = state_map_of(RateLimiter(64, **RateLimiter.check_params({})))
    guards = {d["name"]: set(d["guards"]) for d in smap.dead}
    for k in range(1, 7):
        assert f"s{k}_busy" in guards[f"s{k}_op"], k
    for name in ("s3_config", "s3_elapsed", "s4_product", "s5_refill", "s6_conform",
                 "config_mem.rdport0", "tokens_mem.rdport0", "counters_mem.rdport0"):
        assert name in guards, name
    names = {i.name for i in smap.items}
    assert {"init_pending", "now", "scrub_timer", "counters_mem.rdport1"} <= names
    assert smap.live_bits == 301
    smap = state_map_of(ChecksumVerify(64, **ChecksumVerify.check_params({})))
    guards = {d["name"]: set(d["guards"]) for d in smap.dead}
    for layer in range(2):
        for name in ("vihl", "len", "hcs", "l4cs"):
            assert "in_mid" in guards[f"held{layer}_{name}"]
        for name in ("hdr", "addr", "l4"):
            assert "acc_mid" in guards[f"acc{layer}_{name}"]


def test_a_multi_cycle_operation_drains_and_guards_its_state():
    """ChaCha20's iterative block function keeps its 16 state words and its request while
    ``busy``, which clears at the last pass (``pass_`` counts on by itself while busy): the
    analysis finds that clearing path with the pass counter free, so ``busy`` guards them.
    The keystream FIFO's 512-bit read data is read only under its ``r_rdy``, so its read
    port needs no shadow, and the previous keystream word only under ``started`` (a word of
    this packet used already). The flow monitor's table clear walks ``clear_at`` the same way
    under ``clearing``."""
    from supernic.hw.nt.chacha20 import ChaCha20Task
    from supernic.hw.nt.flow_monitor import FlowMonitor
    smap = state_map_of(ChaCha20Task(64, **ChaCha20Task.check_params({})))
    guards = {d["name"]: set(d["guards"]) for d in smap.dead}
    for name in ["core.saved", "core.pass_"] + [f"core.state_w{i}" for i in range(16)]:
        assert "core.busy" in guards[name], name
    assert "keystream.storage.rdport0" in guards
    assert not any(i.kind == "rdport" for i in smap.items)
    assert guards["previous"] == {"started"}
    assert smap.live_bits == 401 and smap.chain_bits == 401 - 5 * 64     # 5 counters
    smap = state_map_of(FlowMonitor(64, **FlowMonitor.check_params({})))
    guards = {d["name"]: set(d["guards"]) for d in smap.dead}
    assert guards["clear_at"] == {"clearing"}


def test_a_realigner_keeps_only_what_crosses_packets_live():
    """The realigner (hw/nt/realign.py, inside the VLAN and VXLAN NTs) keeps a packet's
    first-beat state in its input register (``x_meta``, ``x_head``) until the core copies it.
    It is read only while that beat waits (``x_valid``) or its packet is half through
    (``in_mid``, the mid-packet flag), so both guard it; the output register is read only
    while ``o_valid``, and the core's copies only where ``phase`` is not idle, which the
    analysis sees by splitting on ``phase`` where a multiplexer picks input or core. The
    beat itself (``x_data``, ``x_keep``, ...) is read only under ``x_valid`` (``streamed``),
    and the previous beat (``c_prev_data``) is loaded as a packet leaves the idle phase, so
    neither crosses a boundary: what stays live is the valid bits, ``phase``, and the
    packet's shift and fill counts."""
    from supernic.hw.nt.realign import Realigner
    from supernic.hw.parser.meta import meta_layout
    smap = state_map_of(Realigner(64, meta_layout(64), max_head=4, max_drop=0))
    guards = {d["name"]: set(d["guards"]) for d in smap.dead}
    for name in ("x_meta", "x_head", "x_hrem", "x_data", "x_keep", "x_last", "x_tail"):
        assert guards[name] == {"x_valid", "in_mid"}, name
    for name in ("o_data", "o_meta"):
        assert guards[name] == {"o_valid"}, name
    for name in ("c_meta", "c_head", "c_prev_data", "c_prev_keep"):
        assert guards[name] == {"phase"}, name
    assert smap.live_bits == 21 and smap.all_flip_flop_bits == 1918


def test_boundary_stop_always_drains():
    """With the boundary port an immediate stop request still drains to a boundary: a
    capture from it would miss the flip-flops left out of the map."""
    seen = []

    async def interrupt(ctx, y, cycle, progress):
        if cycle % 29 != 3:
            return
        await _stop(ctx, y, 0)
        out = progress["out"]
        assert len(out) == progress["in"] and (not out or out[-1][1] == 1)
        seen.append(cycle)
        ctx.set(y.stop, 0)
        await ctx.tick()

    out, _ = _run_component(Yieldable(Scrambler(), state="boundary"), BEATS, interrupt)
    assert out == reference(BEATS) and len(seen) >= 3
    with pytest.raises(TransformError, match="state must be one of full, boundary"):
        Yieldable(Scrambler(), state="live")


@pytest.mark.parametrize("kind", sorted(task_classes()))
def test_nt_migrates_to_the_model_and_back(kind, tmp_path):
    """Hardware state becomes model state and back (sim/tb/yield_tb.py ``model_round_trip``):
    a third of the traffic on the hardware, a third on the model that took the hardware's
    state over, a third on the hardware again after the model's state was written into it;
    every packet, counter and table equals the reference model's."""
    sim = task_simulator(kind, 64, BUILD_PARAMS_64.get(kind), yieldable=True)
    r = run_bench(sim, "model_round_trip", {"packets": 300, "seed": 13},
                  test_dir=tmp_path, module="supernic.sim.tb.yield_tb")
    assert not r["problems"] and not r["reports"], r
    assert r["packets_out"] == 200 and r["software_packets"] == 100
    assert r["round_trip_stable"]


def test_a_model_without_a_state_mapping_says_so():
    from supernic.sim.nt.base import StateBridgeError, TaskModel
    from supernic.sim.nt.vlan import VlanPopModel
    with pytest.raises(StateBridgeError, match="TaskModel has no mapping between the hardware"):
        TaskModel({}).load_hw_state({})
    model = VlanPopModel({}, 64, 256)
    model.stats["dropped"] = 1          # a counter the hardware ties to 0 cannot go back
    with pytest.raises(StateBridgeError, match="counter 'dropped' is 1, but the hardware keeps "
                                               "no state for it"):
        model.store_hw_state({"packets": 0, "skipped": 0})


def test_driver_refuses_a_design_without_the_transform(tmp_path, capsys):
    from supernic.driver.cli import main
    from supernic.driver.state import RegionState, StateError
    with pytest.raises(StateError, match="nic.yieldable = true"):
        RegionState(None, {"registers": {}, "regions": []}, 0)
    # No device served at that socket: one clear line, exit code 2.
    assert main(["state", "suspend", "--region", "0", "--socket",
                 str(tmp_path / "none.sock")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snic: error:") and len(err.strip().splitlines()) == 1
    assert main(["state", "restore", "--region", "0", "--socket",
                 str(tmp_path / "none.sock")]) == 2
    assert "restore needs a snapshot file" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["acl", "rate_limiter", "l4lb", "vlan_push"])
def test_two_tenants_time_share_one_nt(kind, tmp_path):
    """Temporal multiplexing: two tenants with different configurations and traffic take
    turns on one NT instance; each context switch captures one tenant's state and restores the
    other's (tables in flip-flops for the ACL, token buckets and counters in memories for the
    rate limiter, consistent-hash tables for the load balancer, only configuration registers
    for VLAN push). Each tenant's output and counters equal its own model running alone."""
    sim = task_simulator(kind, 64, BUILD_PARAMS_64.get(kind), yieldable=True)
    r = run_bench(sim, "time_shared", {"packets": 200, "seed": 11,
                                       "switches": 6},
                  test_dir=tmp_path, module="supernic.sim.tb.yield_tb")
    assert r["turns"] >= 6
    for t, tenant in enumerate(r["tenants"]):
        assert tenant["packets_out"] == 200 and tenant["mismatches"] == 0, tenant["reports"]
        assert r["counters"][str(t)]["hw"] == r["counters"][str(t)]["model"]


class Chatty(wiring.Component):
    """Passes beats through a register and prints, from the sync domain, every beat whose
    data is odd (with a running count, and a signed value) and every packet end."""

    i: In(stream.Signature(BEAT))
    o: Out(stream.Signature(BEAT))

    def elaborate(self, platform):
        from amaranth.hdl import Format, Print
        m = Module()
        count = Signal(16)
        delta = Signal(signed(8))
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(self.i.payload),
                         count.eq(count + 1), delta.eq(self.i.payload.data - 100)]
            with m.If(self.i.payload.data[0]):
                m.d.sync += Print(Format("beat {:d}: {:02x} delta {}", count,
                                         self.i.payload.data, delta))
            with m.If(self.i.payload.last):
                m.d.sync += Print("end of packet", count)
        return m


def test_prints_become_traps():
    """Synergy's $display: each Print stops the component where it executed; software reads
    its arguments through the state port, formats them, clears the trap and the component
    runs on. The text equals what the print would have printed, in order, and the output
    stream is unchanged."""
    smap = state_map_of(Chatty())
    assert [t["format"] for t in smap.traps] == ["beat {:d}: {:02x} delta {}\n",
                                                 "end of packet {}\n"]
    printed, want, count, delta = [], [], 0, 0
    for value, last in BEATS:
        if value & 1:
            want.append(f"beat {count:d}: {value:02x} delta {delta}\n")
        if last:
            want.append(f"end of packet {count}\n")
        count, delta = count + 1, (value - 100 + 128) % 256 - 128

    async def service(ctx, y, cycle, progress):
        if not ctx.get(y.trapped):
            return
        while not ctx.get(y.stopped):
            await ctx.tick()

        async def read_word(addr):
            return (await _read(ctx, y, [addr]))[0]

        async def write_word(addr, value):
            await _write(ctx, y, [addr], [value])
        # The driver's trap service (sw/driver/state.py), over this port.
        printed.extend(await service_traps(smap, read_word, write_word))
        await ctx.tick()

    dut = Yieldable(Chatty())
    out, _ = _run_component(dut, BEATS, service)
    assert out == BEATS
    assert printed == want


# -- a component made of parts (hw/transform/compose.py) ----------------------------------------

class Sampler(wiring.Component):
    """A one-beat stage that XORs each beat with ``prev``: the input's data as it was on
    the last cycle nothing was offered. Upstream of it a drained stage's data register is
    what ``prev`` takes, so it breaks the stream contract (it reads a payload without
    ``valid``): a chain holding it must be analysed whole."""

    i: In(stream.Signature(BEAT))
    o: Out(stream.Signature(BEAT))

    def elaborate(self, platform):
        m = Module()
        prev = Signal(8)
        m.d.comb += self.i.ready.eq(~self.o.valid | self.o.ready)
        with m.If(~self.i.valid):
            m.d.sync += prev.eq(self.i.payload.data)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.valid.eq(1), self.o.payload.data.eq(self.i.payload.data ^ prev),
                         self.o.payload.last.eq(self.i.payload.last)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m


class Chain(wiring.Component):
    """``parts`` (components with a beat stream in and out) wired back to back, nothing
    else: the form compose.py splits."""

    i: In(stream.Signature(BEAT))
    o: Out(stream.Signature(BEAT))

    def __init__(self, *parts):
        super().__init__()
        self.parts = parts

    def elaborate(self, platform):
        m = Module()
        prev = wiring.flipped(self.i)
        for n, part in enumerate(self.parts):
            m.submodules[f"part{n}"] = part
            wiring.connect(m, prev, part.i)
            prev = part.o
        wiring.connect(m, prev, wiring.flipped(self.o))
        return m


def _boundary_differential(make, seed=3):
    """Stop ``Yieldable(make(), state="boundary")`` at packet boundaries, capture, write
    random values into every flip-flop left out of the map, restore, scramble them again and
    resume: ``(output, uninterrupted output, bits scrambled)``."""
    rng = random.Random(seed)
    beats = [(rng.getrandbits(8), n % 4 == 3) for n in range(80)]

    async def never(ctx, y, cycle, progress):
        pass

    # Idle after each beat: what a contract-breaking part samples then is upstream's
    # leftover data register.
    reference_out, _ = _run_component(Yieldable(make(), state="boundary"), beats, never,
                                      gap=True)
    dut = Yieldable(make(), state="boundary")
    addrs = dut.state_map.addresses()
    scrambled = [0]

    def scramble(ctx):
        for _p, _f, sig in dut.inventory.dead:
            ctx.set(sig, rng.getrandbits(len(sig)))
            scrambled[0] += len(sig)

    async def interrupt(ctx, y, cycle, progress):
        if cycle % 37 != 5:
            return
        await _stop(ctx, y, 1)
        saved = await _read(ctx, y, addrs)
        scramble(ctx)
        await ctx.tick()
        await _write(ctx, y, addrs, saved)
        scramble(ctx)
        ctx.set(y.stop, 0)
        await ctx.tick()

    out, _ = _run_component(dut, beats, interrupt, gap=True)
    return out, reference_out, scrambled[0]


def test_a_chain_is_analysed_part_by_part():
    """A chain of parts wired port to port gets the union of its parts' plans: each part's
    dead registers are those it has alone, and the stop waits for every part's guards. At
    random boundaries, scrambling everything left out changes nothing."""
    from supernic.hw.transform.compose import parts

    chain = Chain(Scrambler(), Delay(), Scrambler())
    split = parts(Fragment.get(chain, None), chain)
    assert [path for path, _f, _c in split] == [("part0",), ("part1",), ("part2",)]
    dead = {d["name"] for d in state_map_of(chain, state="boundary").dead}
    alone = {d["name"] for d in state_map_of(Scrambler(), state="boundary").dead}
    assert dead == ({f"part0.{n}" for n in alone} | {"part1.beat"}
                    | {f"part2.{n}" for n in alone})
    out, want, bits = _boundary_differential(lambda: Chain(Scrambler(), Delay(), Scrambler()))
    assert bits > 0 and out == want


def test_a_part_that_breaks_the_stream_contract_makes_its_chain_whole(tmp_path, monkeypatch):
    """The Sampler reads its input payload while nothing is offered: as a part it cannot
    meet the contract (liveness.ContractError), so its chain is analysed whole and the Delay
    before it keeps its data register. The differential run stays equal; and it bites: with
    the contract switched off, the parts' union leaves that register out and the output
    changes."""
    from supernic.hw.transform import liveness

    make = lambda: Chain(Delay(), Sampler())        # noqa: E731
    smap = state_map_of(make(), state="boundary")
    assert "part0.beat" not in {d["name"] for d in smap.dead}
    out, want, _bits = _boundary_differential(make)
    assert out == want

    monkeypatch.setenv("SNIC_CACHE", str(tmp_path))      # no plan made with the contract
    monkeypatch.setattr(liveness, "_stream_contract", lambda component: [])
    assert "part0.beat" in {d["name"] for d in state_map_of(make(), state="boundary").dead}
    out, want, bits = _boundary_differential(make)
    assert bits > 0 and out != want


def test_parts_are_analysed_on_every_core_then_found_by_elaboration(tmp_path, monkeypatch):
    """transform/parallel.py runs a chain's part analyses in worker processes, each distinct
    part once (the chain's two Scramblers are one circuit); elaboration then finds every plan
    in the cache and analyses nothing, and the state map is the one made one part after
    another."""
    from supernic.hw.transform import liveness
    from supernic.hw.transform.parallel import analyse_all

    make = lambda: Chain(Scrambler(), Delay(), Scrambler())     # noqa: E731
    monkeypatch.setenv("SNIC_CACHE", str(tmp_path / "serial"))
    serial = state_map_of(make(), state="boundary").to_json()
    monkeypatch.setenv("SNIC_CACHE", str(tmp_path / "parallel"))
    assert sorted(analyse_all([make()], jobs=2)) == ["Delay", "Scrambler"]
    assert analyse_all([make()], jobs=2) == {}

    def analysed(*args):
        raise AssertionError("analysed again instead of found in the cache")
    monkeypatch.setattr(liveness, "analyse", analysed)
    assert state_map_of(make(), state="boundary").to_json() == serial


class Tally(wiring.Component):
    """A one-beat stage with statistics: ``beats`` (64 bits) counts the beats taken,
    ``total`` (40 bits) adds up their data, ``lasts`` counts packets but shows only its low
    byte, and a beat leaves with its data XOR ``total``'s low byte, so the output depends on
    ``total``. ``beats`` and ``total`` are counters a port shows; ``lasts`` is not (its port
    is a slice of it) and stays in the scan chain."""

    def __init__(self):
        super().__init__({"i": In(stream.Signature(BEAT)), "o": Out(stream.Signature(BEAT)),
                          "beats": Out(64), "total": Out(40), "lasts_low": Out(8)})

    def elaborate(self, platform):
        m = Module()
        beat = Signal(BEAT)
        valid = Signal()
        total = Signal(40)
        lasts = Signal(64)
        m.d.comb += [self.i.ready.eq(~valid | self.o.ready), self.o.valid.eq(valid),
                     self.o.payload.data.eq(beat.data ^ total[:8]),
                     self.o.payload.last.eq(beat.last),
                     self.total.eq(total), self.lasts_low.eq(lasts[:8])]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.eq(self.i.payload), valid.eq(1),
                         self.beats.eq(self.beats + 1), total.eq(total + self.i.payload.data)]
            with m.If(self.i.payload.last):
                m.d.sync += lasts.eq(lasts + 1)
        with m.Elif(self.o.ready):
            m.d.sync += valid.eq(0)
        return m


def tally_reference(beats):
    total, out = 0, []
    for value, last in beats:
        total = (total + value) % 2 ** 40
        out.append((value ^ (total & 0xFF), last))
    return out


def test_counters_are_read_through_their_ports_and_restored_by_adding():
    """A counter that a port shows is not in the scan chain: a capture reads the port, and
    writing its words restores it (a clear, then an add through its own adder). Stopped
    at boundaries, every counter is set to random values through the state port and read
    back through its port, then the capture is restored: the output (which depends on
    ``total``) and the counters end as if never stopped."""
    smap = state_map_of(Tally())
    shown = {i.name: i.port for i in smap.shown()}
    assert shown == {"beats": "beats", "total": "total"}
    assert smap.find("lasts").in_chain and not smap.find("beats").in_chain
    assert smap.live_bits == 64 + 64 + 40 + 1        # lasts, beats, total, valid
    addrs, stops = smap.addresses(), []
    dut = Yieldable(Tally())

    async def read(ctx, y):
        words = await _read(ctx, y, addrs)
        return smap.fill_shown(words, {"beats": ctx.get(dut.beats),
                                       "total": ctx.get(dut.total)})

    async def interrupt(ctx, y, cycle, progress):
        if cycle % 11:
            return
        await _stop(ctx, y, 1)
        saved = await read(ctx, y)
        for _ in range(3):
            await ctx.tick()
        assert await read(ctx, y) == saved, "a counter moved while stopped"
        values = smap.decode(saved)
        for name in shown:
            values[name] = random.Random(cycle).getrandbits(smap.find(name).width)
        junk = smap.encode(values)
        await _write(ctx, y, addrs, junk)
        assert await read(ctx, y) == junk
        await _write(ctx, y, addrs, saved)
        stops.append(smap.decode(saved)["beats"])
        ctx.set(y.stop, 0)
        await ctx.tick()

    out, _ = _run_component(dut, BEATS, interrupt)
    assert out == tally_reference(BEATS)
    assert len(stops) >= 3 and stops == sorted(stops) and stops[-1] > 0
