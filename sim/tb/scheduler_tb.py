"""cocotb testbench: the tenant scheduler in its shell (``SchedulerShell``) against its model.

The bench plays every neighbour of the scheduler: ``P`` ingress ports (AXI4-Stream with the
NIC layout on ``tuser``, tenant, port and sequence number set here), the regions (each a
buffer of random capacity drained at a random rate, with offline periods and header-only
flags) and the completion pulses (a packet is reported done a random while after it left).

``random_traffic``: random tenants (one disabled), sizes from 1 byte to more than a queue holds,
random idle on the ports and backpressure on ``o``, tables changed and committed while traffic
runs. Checks: each packet out equals the packet that went in (bytes, metadata, tag) and comes
out once; per (port, tenant) order; in == out + drops per tenant from the counters; every
dispatch went to an online region with room (checked on the decision cycle, from the trace);
the region is the one the tenant's table in force gives for the flow hash, and a new table is
used only once every older packet of the tenant was reported done; the policy's picks equal
the model's, record by record.

``saturation``: every tenant backlogged (ports flood, ``o`` always ready, regions always free);
shares of output beats per tenant over a window, beats per cycle, and the model check.

``latency``: isolated packets into an empty scheduler (last beat in to first beat out), then one
tenant's back-to-back one-beat packets (beats per cycle).

``lone_tenant``: one tenant's queues on every port filled with one-beat packets while it is held,
then released: dispatches counted cycle by cycle from the trace, beats out, per-port order.
"""

import collections
import json
import os
import random

import cocotb
from amaranth.hdl import Shape
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

from supernic.driver.discovery import read_register, write_register
from supernic.desc.nic.shape import BEATS_BITS, NicShape
from supernic.hw.nic.layout import nic_layout
from supernic.hw.nic.scheduler import trace_layout
from supernic.desc.nic.scheduler import SchedulerConfig, scheduler_block
from supernic.desc.meta import TAIL_FLAGS
from supernic.sim.axil_bus import AxiLiteRegisterBus
from supernic.sim.bfm import frame_to_beats, pattern
from supernic.sim.layout_codec import decode
from supernic.sim.nic.scheduler import SchedulerModel, TenantLoad, expected_shares
from supernic.sim.tb.bench_env import design as _design, env as _env, write_result as _write_result

MAX_REPORTED = 8


class Codec:
    """Bit positions of the NIC tag and the tail flags inside ``tuser``."""

    def __init__(self, shape):
        layout = nic_layout(shape)
        self.hdr_bits = layout["hdr"].shape.size
        tag_off = layout["tag"].offset
        tag = layout["tag"].shape
        self.fields = {name: (tag_off + f.offset, Shape.cast(f.shape).width) for name, f in tag}
        meta = layout["hdr"].shape
        flags_off = meta["flags"].offset
        self.tail_mask = sum(1 << (flags_off + meta["flags"].shape[name].offset)
                             for name in TAIL_FLAGS)
        hash_off = meta["flow_hash"].offset
        self.hash = (hash_off, 32)

    def get(self, user, name):
        off, width = self.fields[name]
        return (user >> off) & ((1 << width) - 1)

    def put(self, user, name, value):
        off, width = self.fields[name]
        return user & ~(((1 << width) - 1) << off) | (value << off)

    def flow_hash(self, user):
        return (user >> self.hash[0]) & 0xFFFF_FFFF


class Bench:
    def __init__(self, dut, design):
        cfg = design["config"]
        self.dut = dut
        self.design = design
        self.shape = NicShape(**cfg["shape"])
        self.queue_beats = cfg["queue_beats"]
        self.table_size = cfg["table_size"]
        self.regmap = design["registers"]
        self.codec = Codec(self.shape)
        self.block = scheduler_block("sched", self.shape, self.table_size)
        self.trace_layout = trace_layout(self.shape, self.queue_beats)
        self.width = self.shape.data_width
        self.cycle = 0
        self.bus = None

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 4, unit="ns").start())
        dut.rst.value = 1
        for p in range(self.shape.ports):
            getattr(dut, f"s_axis{p}__tvalid").value = 0
        dut.m_axis__tready.value = 0
        dut.done_valid.value = 0
        dut.region_online.value = 0
        await ClockCycles(dut.clk, 4)
        dut.rst.value = 0
        await RisingEdge(dut.clk)
        self.bus = AxiLiteRegisterBus.from_prefix(dut, "s_axil", dut.clk, dut.rst)

    async def write(self, reg, value):
        await write_register(self.bus, self.regmap, "sched", reg, value)

    async def read(self, reg):
        return await read_register(self.bus, self.regmap, "sched", reg)

    async def configure(self, config):
        for reg, value in config.register_writes(self.block):
            await self.write(reg, value)

    def packet(self, port, seq, tenant, size, rng):
        """Beats (data, keep, last, user) and the expected (first, last) users."""
        frame = rng.randbytes(size)
        hdr = rng.getrandbits(self.codec.hdr_bits)
        last_user = hdr
        for name, value in (("tenant", tenant), ("port", port), ("seq", seq)):
            last_user = self.codec.put(last_user, name, value)
        first_user = last_user & ~self.codec.tail_mask
        beats = frame_to_beats(frame, self.width)
        out = [(d, k, end, last_user if end else first_user) for d, k, end in beats]
        return frame, out, first_user, last_user

    def decode_trace(self, value):
        return decode(self.trace_layout, value)


class Regions:
    """The regions as the bench models them: a buffer of ``cap`` beats each, drained at
    ``rate`` beats a cycle, with offline periods; drives the region ports."""

    def __init__(self, dut, n, rng, caps, rates, always_free=False):
        self.dut, self.n, self.rng = dut, n, rng
        self.caps, self.rates = caps, rates
        self.occ = [0] * n
        self.online = [1] * n
        self.header = [0] * n
        self.offline_until = [0] * n
        self.always_free = always_free
        self.driven = None  # (free list, empty bits, online bits, header bits) this cycle
        self.toggling = not always_free

    def drive(self, cycle):
        rng = self.rng
        free = []
        for r in range(self.n):
            if self.occ[r] and rng.random() < self.rates[r]:
                self.occ[r] -= 1
            if self.toggling:
                if self.online[r] and rng.random() < 0.002:
                    self.online[r] = 0
                    self.offline_until[r] = cycle + rng.randint(5, 150)
                    self.header[r] = int(rng.random() < 0.4)
                elif not self.online[r] and cycle >= self.offline_until[r]:
                    self.online[r] = 1
            elif not self.online[r]:
                self.online[r] = 1
            free.append((1 << BEATS_BITS) - 1 if self.always_free
                        else max(0, self.caps[r] - self.occ[r]))
        empty = [int(o == 0) for o in self.occ]
        state = (free, empty, list(self.online), list(self.header))
        if state != self.driven:
            self.dut.region_free.value = sum(f << (BEATS_BITS * r) for r, f in enumerate(free))
            self.dut.region_empty.value = sum(e << r for r, e in enumerate(empty))
            self.dut.region_online.value = sum(o << r for r, o in enumerate(self.online))
            self.dut.header_only.value = sum(h << r for r, h in enumerate(self.header))
            self.driven = state


class Run:
    """The per-cycle loop: ports in, ``o`` out, trace, regions, completion pulses."""

    def __init__(self, bench, regions, idle, backpressure, done_delay, rng):
        self.b, self.regions, self.rng = bench, regions, rng
        self.idle, self.backpressure, self.done_delay = idle, backpressure, done_delay
        P = bench.shape.ports
        self.queues = [collections.deque() for _ in range(P)]   # beats to send per port
        self.completed = []          # (cycle, port, seq) of each last beat in
        self.packets_out = []        # dicts
        self.records = []            # (cycle, trace int)
        self.picks = collections.deque()
        self.pick_log = []          # (cycle, tenant) of every dispatch
        self.unsent = [0] * bench.shape.regions
        self.problems = []
        self.done_queue = collections.deque()
        self.done_cycles = {}        # (port, seq) -> cycle the done pulse went
        self.out_beats = 0
        self.first_out = self.last_out = None
        self.stop = False

    def problem(self, text):
        if len(self.problems) < MAX_REPORTED:
            self.problems.append(f"cycle {self.b.cycle}: {text}")

    def on_pick(self, cycle, rec):
        t = rec["pick"]
        c = rec["cand"][t]
        free, empty, online, _ = self.regions.driven
        r, n = c["region"], c["to_region"]
        un = self.unsent[r]
        if not online[r]:
            self.problem(f"tenant {t} dispatched to offline region {r}")
        if not (n + un <= free[r] or (empty[r] and un == 0)):
            self.problem(f"tenant {t} dispatched {n} beats to region {r} with free {free[r]}, "
                         f"{un} unsent, empty {empty[r]}")
        self.unsent[r] += n
        self.picks.append((cycle, t, c["beats"], r, n))
        self.pick_log.append((cycle, t))

    async def loop(self, on_packet, max_cycles, until):
        b = self.b
        dut = b.dut
        codec = b.codec
        P = b.shape.ports
        nbytes = b.width // 8
        ins = [(getattr(dut, f"s_axis{p}__tdata"), getattr(dut, f"s_axis{p}__tkeep"),
                getattr(dut, f"s_axis{p}__tlast"), getattr(dut, f"s_axis{p}__tuser"),
                getattr(dut, f"s_axis{p}__tvalid")) for p in range(P)]
        cur = [[None, None, None, None, 0] for _ in range(P)]  # driven values, valid
        pending_beat = [None] * P
        m_valid, m_data, m_keep = dut.m_axis__tvalid, dut.m_axis__tdata, dut.m_axis__tkeep
        m_last, m_user, m_ready = dut.m_axis__tlast, dut.m_axis__tuser, dut.m_axis__tready
        trace = dut.decision
        done_valid, done_tenant = dut.done_valid, dut.done_tenant
        ready = False
        chunks, first_user, pick = [], None, None
        region_beats = 0
        done_on = False
        edge = RisingEdge(dut.clk)
        start = b.cycle
        while not until():
            await edge
            b.cycle += 1
            cycle = b.cycle
            if cycle - start > max_cycles:
                raise TimeoutError(f"scheduler run stalled: {len(self.packets_out)} packets out "
                                   f"after {max_cycles} cycles")
            tr = int(trace.value)
            if tr & 1:
                self.records.append((cycle, tr))
                rec = b.decode_trace(tr)
                if rec["pick_valid"]:
                    self.on_pick(cycle, rec)
            for p in range(P):
                beat = pending_beat[p]
                if beat is not None:   # ready is tied high: a valid beat is taken
                    pending_beat[p] = None
                    if beat[2]:
                        self.completed.append((cycle, p, codec.get(beat[3], "seq")))
            if ready and int(m_valid.value):
                keep = int(m_keep.value)
                raw = int(m_data.value).to_bytes(nbytes, "little")
                chunks.append(raw[:keep.bit_length()] if keep & (keep + 1) == 0
                              else bytes(x for j, x in enumerate(raw) if keep >> j & 1))
                self.out_beats += 1
                if self.first_out is None:
                    self.first_out = cycle
                self.last_out = cycle
                if len(chunks) == 1:
                    first_user = int(m_user.value)
                    pick = self.picks.popleft() if self.picks else None
                    region_beats = 0
                if pick is not None and region_beats < pick[4]:
                    region_beats += 1
                    self.unsent[pick[3]] -= 1
                    self.regions.occ[pick[3]] += 1
                if int(m_last.value):
                    last_user = int(m_user.value)
                    t = codec.get(last_user, "tenant")
                    pkt = {"data": b"".join(chunks), "first": first_user, "last": last_user,
                           "beats": len(chunks), "cycle": cycle, "pick": pick,
                           "first_cycle": cycle - len(chunks) + 1}
                    self.packets_out.append(pkt)
                    on_packet(pkt)
                    if pick is None or pick[1] != t or pick[2] != len(chunks):
                        self.problem(f"packet out (tenant {t}, {len(chunks)} beats) is not the "
                                     f"dispatch the trace shows ({pick})")
                    key = (codec.get(last_user, "port"), codec.get(last_user, "seq"))
                    self.done_queue.append((cycle + self.done_delay(), t, key))
                    chunks = []
            self.regions.drive(cycle)
            if self.done_queue and self.done_queue[0][0] <= cycle:
                _, t, key = self.done_queue.popleft()
                self.done_cycles[key] = cycle
                done_tenant.value = t
                done_valid.value = 1
                done_on = True
            elif done_on:
                done_valid.value = 0
                done_on = False
            for p in range(P):
                q = self.queues[p]
                data, keep, tlast, tuser, tvalid = ins[p]
                c = cur[p]
                if q and not next(self.idle[p]):
                    beat = q.popleft()
                    for k, handle in enumerate((data, keep, tlast, tuser)):
                        if c[k] != beat[k]:
                            handle.value = beat[k]
                            c[k] = beat[k]
                    if not c[4]:
                        tvalid.value = 1
                        c[4] = 1
                    pending_beat[p] = beat
                elif c[4]:
                    tvalid.value = 0
                    c[4] = 0
            r = not next(self.backpressure)
            if r != ready:
                m_ready.value = r
                ready = r

    def model_check(self, model):
        """Replay the trace through the model; returns the number of differing picks."""
        bad = 0
        for cycle, value in self.records:
            rec = self.b.decode_trace(value)
            want = model.step(rec)
            got = rec["pick"] if rec["pick_valid"] else None
            if want != "any" and want != got:
                bad += 1
                self.problem(f"trace at cycle {cycle}: model picks {want}, hardware {got} "
                             f"(eligible {rec['eligible']:#x}, backlogged "
                             f"{rec['backlogged']:#x})")
        return bad


def _bits_list(value, n):
    return [bool(value >> k & 1) for k in range(n)]


def _as_model_record(bench, rec):
    T = bench.shape.tenants
    out = dict(rec)
    for name in ("eligible", "backlogged"):
        out[name] = _bits_list(rec[name], T)
    return out


class _ModelAdapter:
    """Feeds decoded trace records (masks as ints) to the model (masks as lists)."""

    def __init__(self, bench, model):
        self.bench, self.model = bench, model

    def step(self, rec):
        return self.model.step(_as_model_record(self.bench, rec))


async def _counters(bench):
    out = {}
    for t in range(bench.shape.tenants):
        for name in ("enqueued", "queue_drops", "disabled_drops", "dispatched",
                     "dispatched_beats", "backlog_beats", "in_flight", "tag", "deficit"):
            out[f"t{t}_{name}"] = await bench.read(f"t{t}_{name}")
    out["bad_tenant_drops"] = await bench.read("bad_tenant_drops")
    out["commit_pending"] = await bench.read("commit_pending")
    return out


@cocotb.test()
async def random_traffic(dut):
    design = _design()
    b = Bench(dut, design)
    sh = b.shape
    T, P, NR, S = sh.tenants, sh.ports, sh.regions, b.table_size
    seed = _env("seed", 1, int)
    n = _env("packets", 400, int)
    policy = _env("policy", "drf")
    rng = random.Random(seed)
    await b.start()

    disabled = T - 1
    tables = [[rng.randrange(NR) for _ in range(S)] for _ in range(T)]
    config = SchedulerConfig(
        tenants=T, regions=NR, table_size=S, policy=policy,
        weights=tuple(rng.choice([1.0, 2.0, 0.5]) for _ in range(T)), quantum=512,
        region_costs=tuple(rng.choice([1.0, 2.0, 8.0]) for _ in range(NR)), tables=tables,
        enables=tuple(t != disabled for t in range(T)))
    await b.configure(config)

    queue_bytes = b.queue_beats * sh.beat_bytes
    sent = collections.Counter()
    inputs = {}
    for p in range(P):
        beats_p = []
        for seq in range(n):
            r = rng.random()
            size = (1 if r < 0.08 else rng.randint(queue_bytes + 1, queue_bytes + 300)
                    if r < 0.12 else rng.randint(queue_bytes // 2, queue_bytes) if r < 0.2
                    else rng.randint(2, 300))
            t = rng.randrange(T)
            frame, beats, first, last = b.packet(p, seq, t, size, rng)
            inputs[(p, seq)] = (frame, first, last, t, len(beats))
            beats_p += beats
            sent[t] += 1
        b_run_beats = beats_p
        if p == 0:
            run = Run(b, Regions(dut, NR, rng, [rng.randint(4, 80) for _ in range(NR)],
                                 [rng.uniform(0.3, 1.0) for _ in range(NR)]),
                      [pattern("random", rng, 0.2) for _ in range(P)],
                      pattern("random", rng, 0.2), lambda: rng.randint(0, 40), rng)
        run.queues[p].extend(b_run_beats)

    # Table epochs a tenant may be using: (commit start cycle, table).
    epochs = {t: [(0, tables[t])] for t in range(T)}
    changes = _env("table_changes", 4, int)

    async def reconfigure():
        crng = random.Random(seed ^ 0x7AB1E)
        for _ in range(changes):
            await ClockCycles(dut.clk, crng.randint(300, 1500))
            t = crng.randrange(T - 1)
            while (await b.read("commit_pending")) >> t & 1:
                await ClockCycles(dut.clk, 20)
            table = [crng.randrange(NR) for _ in range(S)]
            for i, region in enumerate(table):
                await b.write("table_tenant", t)
                await b.write("table_index", i)
                await b.write("table_region", region)
                await b.write("table_write", 1)
            epochs[t].append((b.cycle, table))
            await b.write("table_commit", 1 << t)

    # Holds: a random tenant's packets queue but must not be dispatched for a while (the
    # control plane's context switch). (cycle from, cycle to) per tenant, as written.
    holds = collections.defaultdict(list)

    async def hold_some():
        hrng = random.Random(seed ^ 0x401D)
        for _ in range(_env("holds", 4, int)):
            await ClockCycles(dut.clk, hrng.randint(200, 1200))
            t = hrng.randrange(T - 1)
            await b.write("tenant_hold", 1 << t)
            start = b.cycle
            await ClockCycles(dut.clk, hrng.randint(100, 800))
            holds[t].append((start, b.cycle))
            await b.write("tenant_hold", 0)

    reconf = cocotb.start_soon(reconfigure())
    holding = cocotb.start_soon(hold_some())
    quiet = {"since": 0, "count": 0}

    def until():
        inputs_done = not any(run.queues)
        if inputs_done:
            run.regions.toggling = False
        busy = (run.out_beats != quiet["count"] or run.done_queue or not reconf.done()
                or not holding.done())
        if busy or not inputs_done:
            quiet["since"] = b.cycle
            quiet["count"] = run.out_beats
        return b.cycle - quiet["since"] > 400

    total_beats = sum(len(q) for q in run.queues)
    await run.loop(lambda pkt: None, max_cycles=20 * total_beats + 50_000, until=until)
    await ClockCycles(dut.clk, 4)
    counters = await _counters(b)

    # --- checks ------------------------------------------------------------------------------
    codec = b.codec
    seen = set()
    order = {}
    epoch_at = {t: 0 for t in range(T)}
    out_count = collections.Counter()
    done_by_tenant = collections.defaultdict(list)   # (key, dispatch cycle) per tenant
    bucket_beats = collections.Counter()                # (tenant, entry) -> beats out
    for pkt in run.packets_out:
        key = (codec.get(pkt["last"], "port"), codec.get(pkt["last"], "seq"))
        if key not in inputs:
            run.problem(f"packet out with unknown port/seq {key}")
            continue
        frame, first, last, t, nbeats = inputs[key]
        if key in seen:
            run.problem(f"packet {key} came out twice")
        seen.add(key)
        out_count[t] += 1
        if pkt["data"] != frame:
            run.problem(f"packet {key}: bytes differ ({len(pkt['data'])} out, {len(frame)} in)")
        region = codec.get(pkt["last"], "region")
        if nbeats == 1:
            first = last
        for name, got, want in (("first", pkt["first"], first), ("last", pkt["last"], last)):
            if codec.get(got, "beats") != nbeats or codec.get(got, "region") != region:
                run.problem(f"packet {key}: {name}-beat tag beats/region "
                            f"{codec.get(got, 'beats')}/{codec.get(got, 'region')}, "
                            f"want {nbeats}/{region}")
            strip = codec.put(codec.put(got, "beats", 0), "region", 0)
            if strip != want:
                run.problem(f"packet {key}: {name}-beat metadata differs "
                            f"(xor {strip ^ want:#x})")
        if nbeats > b.queue_beats:
            run.problem(f"packet {key} of {nbeats} beats is bigger than a queue, yet came out")
        prev = order.get((key[0], t))
        if prev is not None and key[1] <= prev:
            run.problem(f"port {key[0]} tenant {t}: seq {key[1]} after {prev}")
        order[(key[0], t)] = key[1]
        # Region: the table in force; a newer one only once all older packets were done.
        index = codec.flow_hash(pkt["last"]) % S
        dispatch_cycle = pkt["pick"][0] if pkt["pick"] else pkt["first_cycle"]
        e = epoch_at[t]
        if epochs[t][e][1][index] != region:
            later = [k for k in range(e + 1, len(epochs[t]))
                     if epochs[t][k][1][index] == region and epochs[t][k][0] < dispatch_cycle]
            if not later:
                run.problem(f"packet {key} of tenant {t} went to region {region}, table in "
                            f"force says {epochs[t][e][1][index]}")
            else:
                epoch_at[t] = later[0]
                # Packets dispatched before the commit was written must all have been
                # reported done before this one went (later ones may use either table).
                commit_cycle = epochs[t][later[0]][0]
                late = [k for k, sent_at in done_by_tenant[t] if sent_at < commit_cycle
                        and run.done_cycles.get(k, 1 << 62) >= dispatch_cycle]
                if late:
                    run.problem(f"tenant {t}: packet {key} used a new table at cycle "
                                f"{dispatch_cycle} while {len(late)} older were in flight")
        done_by_tenant[t].append((key, dispatch_cycle))
        bucket_beats[(t, index)] += nbeats

    # Beats dispatched through each flow-table entry: what came out, by flow hash.
    for t in range(T):
        for i in range(S):
            await b.write("bucket_select", t * S + i)
            got = await b.read("bucket_beats")
            if got != bucket_beats[(t, i)]:
                run.problem(f"tenant {t} entry {i}: bucket_beats {got}, "
                            f"{bucket_beats[(t, i)]} beats came out through it")
    for t in range(T):
        enq, qd, dd = (counters[f"t{t}_enqueued"], counters[f"t{t}_queue_drops"],
                       counters[f"t{t}_disabled_drops"])
        if sent[t] != enq + qd + dd:
            run.problem(f"tenant {t}: {sent[t]} in != {enq} enqueued + {qd} queue drops + "
                        f"{dd} disabled drops")
        if out_count[t] != enq or counters[f"t{t}_dispatched"] != enq:
            run.problem(f"tenant {t}: {out_count[t]} out, {counters[f't{t}_dispatched']} "
                        f"dispatched, {enq} enqueued")
        if (dd != 0) != (t == disabled) or (t == disabled and dd != sent[t]):
            run.problem(f"tenant {t}: {dd} disabled drops of {sent[t]} sent")
        if counters[f"t{t}_backlog_beats"] or counters[f"t{t}_in_flight"]:
            run.problem(f"tenant {t}: backlog {counters[f't{t}_backlog_beats']} in flight "
                        f"{counters[f't{t}_in_flight']} after the run")
    # One cycle of slack: the trace record of a pick is registered.
    held_picks = [(cycle, t) for cycle, t in run.pick_log
                  if any(start + 1 < cycle <= end for start, end in holds[t])]
    if held_picks:
        run.problem(f"{len(held_picks)} dispatches of held tenants, first {held_picks[0]} "
                    f"(holds {dict(holds)})")
    if counters["bad_tenant_drops"] or counters["commit_pending"]:
        run.problem(f"bad tenant drops {counters['bad_tenant_drops']}, commits pending "
                    f"{counters['commit_pending']:#x} after the run")

    model = SchedulerModel(config)
    mismatches = run.model_check(_ModelAdapter(b, model))
    if policy == "drf":
        for t in range(T):
            if counters[f"t{t}_tag"] != model.tags[t]:
                run.problem(f"tenant {t}: tag {counters[f't{t}_tag']:#x}, model "
                            f"{model.tags[t]:#x}")
    drops = sum(counters[f"t{t}_queue_drops"] for t in range(T))
    result = {
        "policy": policy, "packets_in": sum(sent.values()), "packets_out": len(run.packets_out),
        "queue_drops": drops,
        "disabled_drops": sum(counters[f"t{t}_disabled_drops"] for t in range(T)),
        "records": len(run.records), "model_mismatches": mismatches,
        "table_epochs_used": sum(epoch_at.values()), "table_changes": changes,
        "holds": sum(len(v) for v in holds.values()),
        "held_cycles": sum(e - s for v in holds.values() for s, e in v),
        "cycles": b.cycle, "problems": run.problems,
    }
    _write_result(result)
    assert not run.problems, "\n".join(run.problems)


@cocotb.test()
async def saturation(dut):
    design = _design()
    b = Bench(dut, design)
    sh = b.shape
    T, P, NR, S = sh.tenants, sh.ports, sh.regions, b.table_size
    policy = _env("policy", "drf")
    sizes = json.loads(_env("sizes", json.dumps([64] * T)))
    weights = json.loads(_env("weights", json.dumps([1.0] * T)))
    costs = json.loads(_env("costs", json.dumps([1.0] * NR)))
    warmup = _env("warmup", 600, int)
    window = _env("cycles", 4000, int)
    tenants = _env("tenants", T, int)
    rng = random.Random(_env("seed", 3, int))
    await b.start()
    config = SchedulerConfig(
        tenants=T, regions=NR, table_size=S, policy=policy, weights=tuple(weights),
        quantum=_env("quantum", 512, int), region_costs=tuple(costs),
        tables=[[t % NR] * S for t in range(T)])
    await b.configure(config)

    run = Run(b, Regions(dut, NR, rng, [0] * NR, [1.0] * NR, always_free=True),
              [pattern("none", rng) for _ in range(P)], pattern("none", rng), lambda: 0, rng)
    # Ports flood; each port gives every tenant the same beats, so each tenant is offered
    # P / tenants beats a cycle, more than any share it can get.
    seqs = [0] * P
    offered = [[0] * tenants for _ in range(P)]
    sent = {}

    def refill():
        for p in range(P):
            q = run.queues[p]
            while len(q) < 64:
                t = min(range(tenants), key=lambda k: (offered[p][k], (k - p) % tenants))
                frame, beats, first, last = b.packet(p, seqs[p] & 0xFFFF, t, sizes[t], rng)
                sent[(p, seqs[p] & 0xFFFF)] = t
                seqs[p] += 1
                offered[p][t] += len(beats)
                q.extend(beats)

    start = b.cycle
    counts = {"beats": [0] * T, "packets": [0] * T, "bytes": [0] * T}
    order_problems = []

    def on_packet(pkt):
        if pkt["first_cycle"] < start + warmup:
            return
        t = b.codec.get(pkt["last"], "tenant")
        counts["beats"][t] += pkt["beats"]
        counts["packets"][t] += 1
        counts["bytes"][t] += len(pkt["data"])

    def until():
        refill()
        return b.cycle - start >= warmup + window

    refill()
    await run.loop(on_packet, max_cycles=warmup + window + 10, until=until)

    # fifo: output in completion order (cycle of the last beat in, then the port).
    completion = {(p, s): (c, p) for c, p, s in run.completed}
    keys = [completion.get((b.codec.get(pkt["last"], "port"), b.codec.get(pkt["last"], "seq")))
            for pkt in run.packets_out]
    in_order = all(k is not None for k in keys) and keys == sorted(keys)
    if policy == "fifo" and not in_order:
        bad = next(i for i in range(1, len(keys)) if keys[i] is None or keys[i] < keys[i - 1])
        order_problems.append(f"fifo output is not in completion order: packet {bad} completed "
                              f"{keys[bad]} after {keys[bad - 1]}")
        if os.environ.get("SNIC_DEBUG"):
            for i in range(max(0, bad - 12), bad + 2):
                pk = run.packets_out[i]
                order_problems.append(str((i, keys[i], b.codec.get(pk["last"], "tenant"),
                                           pk["first_cycle"], pk["pick"])))

    model = SchedulerModel(config)
    mismatches = run.model_check(_ModelAdapter(b, model))
    loads = []
    for t in range(T):
        nbeats = -(-sizes[t] // sh.beat_bytes)
        loads.append(TenantLoad(nbeats, sizes[t], t % NR, nbeats))
    active = list(range(tenants))
    expected = expected_shares(policy, [loads[t] for t in active], SchedulerConfig(
        tenants=len(active), regions=NR, table_size=S, policy=policy,
        weights=tuple(weights[t] for t in active), quantum=config.quantum,
        region_costs=tuple(costs)))
    total = sum(counts["beats"]) or 1
    shares = [counts["beats"][t] / total for t in active]
    dominant = []
    for t in active:
        region = counts["beats"][t] * costs[t % NR] / NR
        dominant.append(max(counts["beats"][t], region) / window / weights[t])
    result = {
        "policy": policy, "sizes": sizes, "weights": weights, "costs": costs,
        "tenants": tenants, "window": window, "beats": counts["beats"],
        "packets": counts["packets"], "bytes": counts["bytes"], "shares": shares,
        "expected_shares": expected, "dominant_shares": dominant,
        "out_beats_per_cycle": total / window, "fifo_order": in_order,
        "model_mismatches": mismatches, "records": len(run.records),
        "problems": run.problems + order_problems,
    }
    _write_result(result)
    assert not run.problems and not order_problems, "\n".join(run.problems + order_problems)


@cocotb.test()
async def latency(dut):
    """Isolated packets: last beat in to first beat out; then one tenant's 1-beat flood."""
    design = _design()
    b = Bench(dut, design)
    sh = b.shape
    T, P, NR, S = sh.tenants, sh.ports, sh.regions, b.table_size
    policy = _env("policy", "drf")
    rng = random.Random(5)
    await b.start()
    config = SchedulerConfig(tenants=T, regions=NR, table_size=S, policy=policy)
    await b.configure(config)
    run = Run(b, Regions(dut, NR, rng, [0] * NR, [1.0] * NR, always_free=True),
              [pattern("none", rng) for _ in range(P)], pattern("none", rng), lambda: 0, rng)
    latencies = []
    seq = 0
    for size in (1, sh.beat_bytes * 3, 200, 1):
        frame, beats, first, last = b.packet(0, seq, seq % T, size, rng)
        seq += 1
        run.queues[0].extend(beats)
        n_out = len(run.packets_out)
        await run.loop(lambda pkt: None, 200, lambda: len(run.packets_out) > n_out)
        in_cycle = run.completed[-1][0]
        latencies.append(run.packets_out[-1]["first_cycle"] - in_cycle)
    # One tenant, 1-beat packets back to back from one port.
    n = 200
    for k in range(n):
        frame, beats, first, last = b.packet(0, seq, 0, 1, rng)
        seq += 1
        run.queues[0].extend(beats)
    n_out = len(run.packets_out)
    quiet = {"since": b.cycle, "count": 0}

    def until():
        if run.queues[0] or len(run.packets_out) != quiet["count"]:
            quiet["since"], quiet["count"] = b.cycle, len(run.packets_out)
        return b.cycle - quiet["since"] > 50

    await run.loop(lambda pkt: None, 10 * n, until)
    burst = run.packets_out[n_out:]
    one_tenant = len(burst) / (burst[-1]["cycle"] - burst[0]["cycle"] + 1)
    result = {"policy": policy, "latency_cycles": latencies,
              "one_tenant_1beat_beats_per_cycle": one_tenant,
              "burst_packets_out": len(burst), "problems": run.problems}
    _write_result(result)
    assert not run.problems, "\n".join(run.problems)


@cocotb.test()
async def lone_tenant(dut):
    """One tenant's queues filled with one-beat packets while it is held, then released: the
    cycles between its first and last dispatch, counted from the trace (one dispatch a cycle
    means ``packets`` dispatches in ``packets`` consecutive cycles)."""
    design = _design()
    b = Bench(dut, design)
    sh = b.shape
    T, P, NR, S = sh.tenants, sh.ports, sh.regions, b.table_size
    policy = _env("policy", "drf")
    per_port = _env("packets", 16, int)
    tenant = _env("tenant", 1, int)
    rng = random.Random(7)
    await b.start()
    # The tenant's flows spread over every region, so no region's room is the limit.
    config = SchedulerConfig(tenants=T, regions=NR, table_size=S, policy=policy,
                             tables=[[i % NR for i in range(S)]] * T)
    await b.configure(config)
    await b.write("tenant_hold", 1 << tenant)
    run = Run(b, Regions(dut, NR, rng, [0] * NR, [1.0] * NR, always_free=True),
              [pattern("none", rng) for _ in range(P)], pattern("none", rng), lambda: 0, rng)
    for p in range(P):
        for seq in range(per_port):
            run.queues[p].extend(b.packet(p, seq, tenant, 1, rng)[1])
    n = P * per_port
    await run.loop(lambda pkt: None, 200, lambda: len(run.completed) >= n)
    await ClockCycles(dut.clk, 4)   # the last descriptors reach their FIFOs' heads
    queued = await b.read(f"t{tenant}_enqueued")
    # Released while the loop watches the trace: dispatches start before the write returns.
    cocotb.start_soon(b.write("tenant_hold", 0))
    await run.loop(lambda pkt: None, 50 * n, lambda: len(run.packets_out) >= queued)
    picks = [c for c, t in run.pick_log if t == tenant]
    order = all(
        [b.codec.get(pkt["last"], "seq") for pkt in run.packets_out
         if b.codec.get(pkt["last"], "port") == p] == list(range(per_port)) for p in range(P))
    model = SchedulerModel(config)
    result = {"policy": policy, "queued": queued, "dispatches": len(picks),
              "dispatch_cycles": picks[-1] - picks[0] + 1 if picks else None,
              "out_cycles": (run.packets_out[-1]["cycle"] - run.packets_out[0]["cycle"] + 1
                             if run.packets_out else None),
              "in_order": order, "model_mismatches": run.model_check(_ModelAdapter(b, model)),
              "problems": run.problems}
    _write_result(result)
    assert not run.problems, "\n".join(run.problems)
