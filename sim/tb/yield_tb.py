"""cocotb testbench: a network task under the state-yielding transform (hw/transform), in its
shell with the ``yld`` port at the top level.

``time_shared``: temporal multiplexing. Two tenants, each with its own random configuration
and traffic, share one NT instance by context switches: stop at a packet boundary, capture
the running tenant's state, restore the other's (and rewrite its read-write configuration
registers, which live in the register file, not in the NT), resume. Each tenant's packets
must equal its own model's (as if it ran alone), and so must its counters.

``model_round_trip``: migration to the Python model and back. The traffic is split in three.
The first third runs on the hardware; the NT is stopped at a packet boundary, captured, and a
fresh model (configured the same) takes the capture over (``load_hw_state``): its counters must
equal the reference model's, and its state must be stable (stored and loaded again, it stores
the same words). The
second third runs on that model alone, in software: every packet must equal the reference's.
The model's state is then written into the hardware (``store_hw_state``), which resumes with the
last third: its packets, counters and tables must equal the reference model's, which ran all
three (the hardware never saw the second third).

``interrupted_traffic``: the NT test's random traffic (random and malformed frames, idle and
backpressure; sim/tb/nt_tb.py) while, at random cycles, the NT is stopped (at once or at the
next packet boundary, alternately), all its state is read through the state port, compared
with what the simulator holds in the same flip-flops and memory rows (read through cocotb
handles named by the state map), overwritten with random words, read back, restored and
resumed (the read-back and the comparison with the simulator on the first stops only, to
keep the run short). Every packet must still equal the model's, bit for bit, in order, and the
counters must agree: state that the port missed, or restored wrong, changes the output.
"""

import collections
import random

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge

from supernic.driver.discovery import read_register, write_register
from supernic.driver.state import register_of_port
from supernic.hw.nt.task import task_class
from supernic.sim.nt.base import model_class
from supernic.hw.parser.meta import meta_layout
from supernic.desc.statemap import StateMap
from supernic.sim.bfm import StreamHarness, pattern
from supernic.sim.tb.bench_env import design as _design, env as _env, write_result
from supernic.sim.tb.nt_tb import (BlockAccess, _setup, check_random_traffic, model_traffic,
                                   packet_checker)


class StatePort:
    """Lean driver of a transformed component's ``yld`` port: one seek, then one word a cycle
    in the state map's address order (the port's address moves on by itself)."""

    def __init__(self, dut, prefix="yld", bus=None, regmap=None):
        self.dut = dut
        # The register bus reads the counters a port shows (hw/transform/inventory.py,
        # find_counters), in the shell's "nt" block, as the driver does in a NIC.
        self.bus, self.regmap = bus, regmap
        self.smap = StateMap.from_json(_design()["state_map"])
        self.clk = dut.clk
        self.edge = RisingEdge(dut.clk)
        sig = {n: getattr(dut, f"{prefix}__{n}") for n in (
            "stop", "at_boundary", "stopped", "addr", "seek", "rdata", "next", "write",
            "wdata")}
        self.__dict__.update(sig)
        for n in ("stop", "at_boundary", "seek", "next", "write", "addr", "wdata"):
            sig[n].value = 0

    async def stop_now(self, at_boundary, limit=100_000):
        """Request a stop; return the cycles until ``stopped``."""
        self.at_boundary.value = int(at_boundary)
        self.stop.value = 1
        for cycles in range(1, limit):
            await self.edge
            if self.stopped.value:
                return cycles - 1   # the edge that showed it sampled the acknowledgement
        raise TimeoutError(f"no stop acknowledgement in {limit} cycles{self._why()}")

    def _why(self):
        """What the transform shows, for a stop that did not come (debugging aid)."""
        out = []
        for name in ("pending", "draining", "stopped", "pos", "cur", "i_mid", "run"):
            try:
                out.append(f"{name}={int(getattr(self.dut.task, name).value)}")
            except (AttributeError, ValueError):
                pass
        return (": " + ", ".join(out)) if out else ""

    async def resume(self):
        self.stop.value = 0
        await self.edge

    # Under cocotb a value read just after an edge is the one that edge sampled (the
    # registers' values before it), so what an edge registers shows after the next one.

    async def go(self, addr, limit=100_000):
        """Move the port to ``addr`` and wait until it is there (a move into the scan chain
        turns it a word a cycle)."""
        self.addr.value = addr
        self.seek.value = 1
        await self.edge
        self.seek.value = 0
        for _ in range(limit):
            await self.edge
            if self.stopped.value:
                return
        raise TimeoutError(f"the state port did not reach address {addr} in {limit} cycles")

    async def read_words(self, addrs):
        """The words of ``addrs``, which must run in map order (a whole pass, or its start),
        one a cycle: a word is registered one edge after the address moved to it, and shows
        after the edge after that. The port moves past the last one too, so a whole pass
        leaves the scan chain home."""
        out = []
        await self.go(addrs[0])
        n = len(addrs)
        for k in range(n + 1):
            self.next.value = int(k < n)
            await self.edge
            if k:
                out.append(int(self.rdata.value))
        self.next.value = 0
        shown = {}
        for item in self.smap.shown():
            if self.bus is None:
                raise RuntimeError("this state map has counters read through registers: "
                                   "give the StatePort the register bus")
            _node, reg = register_of_port(item.port)
            shown[item.port] = await read_register(self.bus, self.regmap, "nt", reg)
        return self.smap.fill_shown(out, shown) if shown else out

    async def write_words(self, addrs, words):
        """Write ``words`` at ``addrs`` (in map order), one a cycle."""
        await self.go(addrs[0])
        for w in words:
            self.wdata.value = w
            self.write.value = 1
            await self.edge
        self.write.value = 0
        await self.edge


def rtl_handle(dut, path):
    h = dut
    for name in path:
        # A name with a "$" (Amaranth's deduplicated and unnamed signals) is a Verilog escaped
        # identifier: "\\" + name + " " (IEEE 1364-2005 §3.7.1).
        for spelling in (name, f"\\{name} "):
            try:
                h = h._id(spelling, extended=False)
                break
            except (AttributeError, KeyError):
                continue
        else:
            raise KeyError(name)
    return h


def golden_values(dut, smap):
    """``{name: value}`` read straight from the simulator, for the items it can name; and the
    names it could not find."""
    out, missing = {}, []
    for item in smap.items:
        try:
            h = rtl_handle(dut, item.rtl)
            if item.kind == "mem":
                out[item.name] = [int(h[r].value) for r in range(item.depth)]
            else:
                out[item.name] = int(h.value)
        except (AttributeError, IndexError, KeyError, ValueError):
            missing.append(item.name)
    return out, missing


@cocotb.test()
async def interrupted_traffic(dut):
    smap = StateMap.from_json(_design()["state_map"])
    addrs = smap.addresses()
    interrupts = _env("interrupts", 4, int)
    golden_checks = _env("golden_checks", 2, int)

    async def interrupter(rng, report, finished, configure, bus, regmap):
        port = StatePort(dut, bus=bus, regmap=regmap)
        stats = report.setdefault("transform", {
            "state_words": len(addrs), "state_bits": smap.bits, "stops": 0,
            "boundary_stops": 0, "stop_latency_max": 0, "golden_compared": 0,
            "golden_missing": [], "scramble_mismatches": 0, "stop_latencies": []})
        while not finished() and stats["stops"] < interrupts:
            for _ in range(rng.randint(30, 600)):
                await port.edge
                if finished():
                    return
            boundary = stats["stops"] % 2 == 1         # alternately at once and at a boundary
            latency = await port.stop_now(boundary)
            stats["stops"] += 1
            stats["boundary_stops"] += boundary
            stats["stop_latencies"].append(latency)
            stats["stop_latency_max"] = max(stats["stop_latency_max"], latency)
            saved = await port.read_words(addrs)
            if stats["stops"] <= golden_checks:
                want, missing = golden_values(dut, smap)
                got = smap.decode(saved)
                for name, value in want.items():
                    assert got[name] == value, (
                        f"stop {stats['stops']}: state {name} read {got[name]!r} through the "
                        f"state port, simulator holds {value!r}")
                stats["golden_compared"] = len(want)
                stats["golden_missing"] = missing
            values = smap.decode(saved)
            for item in smap.items:
                if item.writable:
                    rows = [rng.getrandbits(item.width) for _ in range(item.depth)]
                    values[item.name] = rows if item.kind == "mem" else rows[0]
            junk = smap.encode(values)
            await port.write_words(addrs, junk)
            if stats["stops"] <= golden_checks:     # the words went where the map says
                back = smap.encode(smap.decode(await port.read_words(addrs)))
                stats["scramble_mismatches"] += sum(a != b for a, b in zip(back, junk))
            await port.write_words(addrs, saved)
            await port.resume()

    await check_random_traffic(dut, during=interrupter,
                               slack=interrupts * (4 * len(addrs) + 1000))


@cocotb.test()
async def boundary_soundness(dut):
    """The differential test of the boundary state port (hw/transform/liveness.py): the NT
    test's random and malformed traffic with idle and backpressure, stopped at random packet
    boundaries; each stop captures the state map's words, writes random values into every
    flip-flop, read-port register and memory row *not* in the map (through cocotb handles, by
    RTL name), writes the configuration registers again (what restores configuration state),
    restores the capture, scrambles what is left out once more and resumes. Every packet must
    equal the model's, bit for bit: state that matters after a boundary but was left out of
    the map, or configuration that the registers do not restore, changes the output.

    ``drop_live``: the name of a live flip-flop to treat as left out (scrambled after the
    restore), to show the test bites."""
    smap = StateMap.from_json(_design()["state_map"])
    interrupts = _env("interrupts", 6, int)
    drop = _env("drop_live", "", str)
    dead = [dict(d) for d in smap.dead]
    if drop:
        item = smap.find(drop)
        dead.append({"name": item.name, "width": item.width, "rtl": item.rtl, "guards": []})
    config = [dict(c) for c in smap.config]
    addrs = smap.addresses()
    guards = sorted({g for d in smap.dead for g in d["guards"]})

    def handles(entries, missing):
        out = []
        for d in entries:
            try:
                out.append((d, rtl_handle(dut, d["rtl"])))
            except (AttributeError, KeyError):
                missing.append(d["name"])
        return out

    def scramble(rng, targets):
        bits = 0
        for d, h in targets:
            if d.get("kind") == "mem":
                for r in range(d["depth"]):
                    h[r].value = rng.getrandbits(d["width"])
                bits += d["width"] * d["depth"]
            else:
                h.value = rng.getrandbits(d["width"])
                bits += d["width"]
        return bits

    async def interrupter(rng, report, finished, configure, bus, regmap):
        port = StatePort(dut, bus=bus, regmap=regmap)
        stats = report.setdefault("transform", {
            "mode": smap.mode, "state_words": len(addrs), "live_bits": smap.live_bits,
            "all_flip_flop_bits": smap.all_flip_flop_bits, "dead": len(smap.dead),
            "config": len(smap.config), "stops": 0, "scrambled_bits": 0,
            "config_scrambled_bits": 0, "stop_latencies": [], "missing": []})
        left_out = handles(dead, stats["missing"])
        configured = handles(config, stats["missing"])
        while not finished() and stats["stops"] < interrupts:
            for _ in range(rng.randint(30, 600)):
                await port.edge
                if finished():
                    return
            stats["stop_latencies"].append(await port.stop_now(True))
            stats["stops"] += 1
            saved = await port.read_words(addrs)
            values = smap.decode(saved)
            for g in guards:        # the stop waited for every guard to be 0
                assert values[g] == 0, f"stop {stats['stops']}: guard {g} is {values[g]}"
            # Garbage outside the map before the restore (which must not need it) and again
            # just before the resume (flip-flops left out run on while stopped); the
            # configuration comes back from its registers, written while stopped.
            stats["scrambled_bits"] += scramble(rng, left_out)
            stats["config_scrambled_bits"] += scramble(rng, configured)
            await port.edge
            await configure()
            await port.write_words(addrs, saved)
            scramble(rng, left_out)
            await port.resume()

    await check_random_traffic(dut, during=interrupter,
                               slack=interrupts * (2 * len(addrs) + 1000))


async def _start(dut):
    """What the tests of a transformed NT start from: ``(bus, nt, task, width, header bytes,
    register map, state map, its addresses, seed, packets, state port, metadata layout)``."""
    design, bus, _ = await _setup(dut)
    cfg, nt = design["config"], design["nt"]
    smap = StateMap.from_json(design["state_map"])
    return (bus, nt, task_class(nt["kind"]), cfg["data_width"], cfg["header_bytes"],
            design["registers"], smap, smap.addresses(), _env("seed", 1, int),
            _env("packets", 300, int), StatePort(dut, bus=bus, regmap=design["registers"]),
            meta_layout(cfg["header_bytes"]))


@cocotb.test()
async def model_round_trip(dut):
    bus, nt, task, width, hbytes, regmap, smap, addrs, seed, n, port, layout = await _start(dut)
    params = nt["params"]
    rng = random.Random(seed)

    reference = model_class(task)(params, width, hbytes)
    config, frames = reference.test_case(random.Random(seed ^ 0xC0F), n, 0.1)
    reference.configure(config)
    for reg, value in config.register_writes(params):
        await write_register(bus, regmap, "nt", reg, value)
    parts = [frames[:n // 3], frames[n // 3:2 * n // 3], frames[2 * n // 3:]]
    ts = [rng.randrange(2 ** 32)]

    def traffic(model, k):
        """Part ``k`` as ``model`` sees it: the same metadata and timestamps for any model."""
        beats, expected = model_traffic(model, parts[k], hbytes, width,
                                        random.Random(seed * 7 + k), 0.02, start_ts=ts[k])
        if len(ts) == k + 1:
            ts.append(expected[-1][1][1]["ts"] if expected else ts[k])
        return beats, expected

    harness = StreamHarness(dut, width)
    stats, reports = collections.Counter(), []

    async def on_hardware(k):
        beats, expected = traffic(reference, k)
        await harness.run(beats, len(parts[k]), pattern("random", rng), pattern("random", rng),
                          max_cycles=40 * len(beats) + 20_000,
                          on_packet=packet_checker(expected, layout, stats, reports))

    await on_hardware(0)
    await port.stop_now(at_boundary=True)
    captured = await port.read_words(addrs)
    migrated = model_class(task)(params, width, hbytes)
    migrated.configure(config)
    migrated.load_hw_state(smap.decode(captured))
    problems = []
    if migrated.counters() != reference.counters():
        problems.append(f"counters after the first third: model from the hardware "
                        f"{migrated.counters()}, reference {reference.counters()}")
    # Stored and loaded again, the state must not move: a second model loaded from what the
    # first stores, stores the same words.
    def stored(model):
        values = smap.decode(captured)
        model.store_hw_state(values)
        return smap.encode(values)
    again = model_class(task)(params, width, hbytes)
    again.configure(config)
    again.load_hw_state(smap.decode(stored(migrated)))
    stable = stored(again) == stored(migrated)
    if not stable:
        problems.append("the state moves when stored into the hardware and loaded again")

    # The second third in software, on the migrated model.
    _, want = traffic(reference, 1)
    _, got = traffic(migrated, 1)
    software_mismatches = sum(a != b for a, b in zip(got, want))
    if software_mismatches:
        problems.append(f"{software_mismatches} of {len(want)} packets differ between the "
                        f"migrated model and the reference")
    if migrated.counters() != reference.counters():
        problems.append(f"counters after the second third: migrated {migrated.counters()}, "
                        f"reference {reference.counters()}")

    # Back into the hardware, then the last third.
    values = smap.decode(captured)
    migrated.store_hw_state(values)
    await port.write_words(addrs, smap.encode(values))
    await port.resume()
    await on_hardware(2)
    await ClockCycles(dut.clk, 8)
    want_counters = reference.counters()
    hw_counters = {name: await read_register(bus, regmap, "nt", name) for name in want_counters}
    if hw_counters != want_counters:
        problems.append(f"counters at the end: hw {hw_counters}, reference {want_counters}")
    if hasattr(reference, "verify_hardware"):
        problems += await reference.verify_hardware(BlockAccess(bus, regmap))
    result = {"kind": nt["kind"], "state_words": len(addrs), "parts": [len(p) for p in parts],
              "packets_out": stats["packets"], "software_packets": len(want),
              "round_trip_stable": stable, "counters": hw_counters,
              "problems": problems[:5], "reports": reports}
    write_result(result)
    assert not reports, "\n".join(reports)
    assert stats["packets"] == len(parts[0]) + len(parts[2])
    assert not problems, "\n".join(problems[:5])


@cocotb.test()
async def time_shared(dut):
    bus, nt, task, width, hbytes, regmap, smap, addrs, seed, n, port, layout = await _start(dut)
    switches = _env("switches", 6, int)
    rng = random.Random(seed)

    async def configure(writes):
        """A tenant's configuration registers, written while the NT is stopped: they restore
        its configuration state (left out of a boundary map), before its context comes back
        (so a write's side effects on the rest of the state are overwritten)."""
        for reg, value in writes:
            await write_register(bus, regmap, "nt", reg, value)

    async def stop_and_capture():
        await port.stop_now(at_boundary=True)
        return await port.read_words(addrs)

    # The reset state, before any configuration: each tenant's context starts from it.
    reset_state = await stop_and_capture()
    await port.resume()
    tenants = []
    for t in range(2):
        model = model_class(task)(nt["params"], width, hbytes)
        config, frames = model.test_case(random.Random(seed * 7 + t), n, 0.1)
        model.configure(config)
        writes = config.register_writes(nt["params"])
        await port.stop_now(at_boundary=True)
        await port.write_words(addrs, reset_state)
        await port.resume()
        for reg, value in writes:
            await write_register(bus, regmap, "nt", reg, value)
        await ClockCycles(dut.clk, 4)
        context = await stop_and_capture()
        await port.resume()
        beats, expected = model_traffic(model, frames, hbytes, width, rng, 0.02)
        starts = [i for i, b in enumerate(beats) if i == 0 or beats[i - 1][2]]
        stats = collections.Counter()
        tenants.append({
            "model": model, "context": context, "beats": beats, "starts": starts,
            "sent": 0, "expected": expected, "stats": stats, "reports": [],
            "writes": list(writes)})
    # Packets per turn: the traffic split into switches + 1 turns per tenant.
    per_turn = -(-n // (switches // 2 + 1))
    harness = StreamHarness(dut, width)
    active, turns = None, 0
    while any(t["sent"] < n for t in tenants):
        t = next(k for k in (turns % 2, 1 - turns % 2) if tenants[k]["sent"] < n)
        tenant = tenants[t]
        if active != t:
            await port.stop_now(at_boundary=True)
            if active is not None:
                tenants[active]["context"] = await port.read_words(addrs)
            await configure(tenant["writes"])
            await port.write_words(addrs, tenant["context"])
            await port.resume()
            active = t
        first, last = tenant["sent"], min(n, tenant["sent"] + per_turn)
        end = tenant["starts"][last] if last < n else len(tenant["beats"])
        on_packet = packet_checker(tenant["expected"], layout, tenant["stats"],
                                   tenant["reports"])
        await harness.run(tenant["beats"][tenant["starts"][first]:end], last - first,
                          pattern("random", rng), pattern("random", rng),
                          max_cycles=40 * (end - tenant["starts"][first]) + 20_000,
                          on_packet=on_packet)
        tenant["sent"] = last
        turns += 1
    # Each tenant's counters, read with its own context loaded.
    counters = {}
    for t in (active, 1 - active):
        if t != active:
            await port.stop_now(at_boundary=True)
            await configure(tenants[t]["writes"])
            await port.write_words(addrs, tenants[t]["context"])
            await port.resume()
        want = tenants[t]["model"].counters()
        got = {name: await read_register(bus, regmap, "nt", name) for name in want}
        counters[t] = {"hw": got, "model": want}
    result = {
        "kind": nt["kind"], "turns": turns, "state_words": len(addrs),
        "tenants": [{"packets_out": t["stats"]["packets"], "mismatches": t["stats"]["mismatches"],
                     "reports": t["reports"]} for t in tenants],
        "counters": counters,
    }
    write_result(result)
    for t, tenant in enumerate(tenants):
        assert not tenant["reports"], f"tenant {t}: " + "\n".join(tenant["reports"])
        assert tenant["stats"]["packets"] == n
        assert counters[t]["hw"] == counters[t]["model"], f"tenant {t}: {counters[t]}"
