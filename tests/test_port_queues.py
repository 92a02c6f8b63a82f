"""One port's tenant queues as a component (hw/nic/queues.py, ``PortQueues``), alone in
Amaranth's simulator, against its contract written out in Python. Random packets of random
tenants (one number past the last: a bad tenant), random enables, idle input cycles, and a
reader that pops heads and reads their beats and metadata at random times, as the transfer
stage does. Checked: every packet's outcome is decided once, on its last beat (enqueued,
queue drop, disabled drop, bad tenant), bad and disabled exactly as the first beat said; a
packet that finds its tenant's queue empty is never dropped for room; committed packets come
back per tenant in arrival order, beat for beat, with their bytes, stamp, flow-table index and
last-beat metadata; ``used`` is the committed beats not yet read and never exceeds the queue.
"""

import random

from amaranth.sim import Simulator

from supernic.desc.nic.scheduler import STAMP_BITS
from supernic.desc.nic.shape import NicShape
from supernic.hw.nic.layout import nic_layout
from supernic.hw.nic.queues import PortQueues
from supernic.hw.nic.scheduler import _desc_layout

SHAPE = NicShape(64, 64, 3, 1, 2)     # three tenants: tenant number 3 is a bad one
Q, D, S = 8, 2, 4
QBITS, DBITS = 3, 1
STAMP_MASK = (1 << STAMP_BITS) - 1


def with_tenant(layout, bits, tenant):
    """``bits`` of a NIC metadata word with its tag's tenant set to ``tenant``."""
    field = layout["tag"]
    at = field.offset + field.shape["tenant"].offset
    width = SHAPE.tenant_bits
    return bits & ~(((1 << width) - 1) << at) | tenant << at


def make_packets(rng, n):
    layout = nic_layout(SHAPE)
    packets = []
    for _ in range(n):
        beats = rng.choice([1, 1, 2, 3, 5, 8, 9])    # 9 never fits a queue of 8
        tenant = rng.choice([0, 0, 1, 2, 3])
        words = [(rng.getrandbits(64), 0xFF) for _ in range(beats)]
        words[-1] = (words[-1][0], (1 << rng.randint(1, 8)) - 1)
        metas = [with_tenant(layout, rng.getrandbits(layout.size), tenant)
                 for _ in range(beats)]
        packets.append({"tenant": tenant, "words": words, "metas": metas,
                        "idle": rng.random() < 0.3})
    return packets


def run(seed, packets=300, cycles=6000, read_rate=0.3, enable_flips=0.01, dut=None):
    """The contract's violations, and how many packets met each outcome."""
    rng = random.Random(seed)
    traffic = make_packets(rng, packets)
    layout = nic_layout(SHAPE)
    dut = dut or PortQueues(SHAPE, Q, D, S, _desc_layout(SHAPE, Q, D, S))
    T = SHAPE.tenants
    problems = []
    outcomes = {"enqueued": 0, "queue_drop": 0, "disabled_drop": 0, "bad": 0}
    committed = {t: [] for t in range(T)}     # packets committed, in order, not yet read
    unread = {t: 0 for t in range(T)}         # committed beats not yet read (the model's used)
    reading_packet = {}                       # tenant -> the packet its reads return

    async def bench(ctx):
        enable = 0b111
        sending = []                          # (packet, beat) still to drive
        queue = list(traffic)
        reading = None                        # (tenant, packet, descriptor, beat index)
        for cycle in range(cycles):
            if rng.random() < enable_flips:
                enable ^= 1 << rng.randrange(T)
            ctx.set(dut.enable, enable)
            ctx.set(dut.now, cycle & STAMP_MASK)
            # --- the packet at the input ------------------------------------------------------
            if not sending and queue:
                pk = queue.pop(0)
                sending = [(pk, k) for k in range(len(pk["words"]))]
            valid = bool(sending) and not (sending[0][0]["idle"] and rng.random() < 0.5)
            ctx.set(dut.i.valid, valid)
            if valid:
                pk, k = sending[0]
                t = pk["tenant"]
                if k == 0:
                    # What the first beat decides by: the enable bit, and whether the
                    # tenant's queue is empty (nothing committed and unread, nothing read).
                    pk["enabled_at_first"] = t < T and bool(enable >> t & 1)
                    pk["empty_at_first"] = (t < T and unread[t] == 0 and not committed[t]
                                            and reading is None)
                ctx.set(dut.i.p.data, pk["words"][k][0])
                ctx.set(dut.i.p.keep, pk["words"][k][1])
                ctx.set(dut.i.p.last, k == len(pk["words"]) - 1)
                ctx.set(dut.i.p.meta, layout.from_bits(pk["metas"][k]))
            # --- the reader ---------------------------------------------------------------------
            pops, advance, release = 0, 0, 0
            ctx.set(dut.data_en, 0)
            ctx.set(dut.meta_en, 0)
            if reading is None and rng.random() < read_rate:
                ready = [t for t in range(T) if ctx.get(dut.head_valid) >> t & 1]
                if ready:
                    t = rng.choice(ready)
                    head = ctx.get(dut.head[t])
                    pops = 1 << t
                    reading = (t, head, 0)
            issued = None
            if reading is not None:
                t, head, k = reading
                row = ctx.get(dut.rd_ptr[t]) & (Q - 1)
                ctx.set(dut.data_addr, row | t << QBITS)
                ctx.set(dut.data_en, 1)
                advance = 1 << t
                if k == 0:
                    ctx.set(dut.meta_addr, head.slot | t << DBITS)
                    ctx.set(dut.meta_en, 1)
                    release = 1 << t
                issued = (t, head, k)
                reading = None if k + 1 == head.beats else (t, head, k + 1)
            ctx.set(dut.pop, pops)
            ctx.set(dut.advance, advance)
            ctx.set(dut.release, release)
            # ``used`` as of this cycle, before its commits and reads count.
            for t in range(T):
                if ctx.get(dut.used[t]) != unread[t]:
                    problems.append(f"cycle {cycle}: used[{t}] {ctx.get(dut.used[t])}, "
                                    f"want {unread[t]}")
                if unread[t] > Q:
                    problems.append(f"cycle {cycle}: tenant {t} holds {unread[t]} beats")
            # --- outcomes strobed this cycle ---------------------------------------------------
            strobes = {name: ctx.get(getattr(dut, name)) for name in outcomes}
            if valid and sending[0][1] == len(sending[0][0]["words"]) - 1:
                pk = sending[0][0]
                t = pk["tenant"]
                fired = [name for name, bits in strobes.items()
                         if (bits if name == "bad" else bits >> t & 1 if t < T else 0)]
                want = ("bad" if t >= T else "disabled_drop" if not pk["enabled_at_first"]
                        else None)
                if len(fired) != 1:
                    problems.append(f"cycle {cycle}: packet of tenant {t}: outcomes {fired}")
                elif want and fired != [want]:
                    problems.append(f"cycle {cycle}: tenant {t}: {fired[0]}, want {want}")
                elif (fired == ["queue_drop"] and pk["empty_at_first"]
                      and len(pk["words"]) <= Q):
                    problems.append(f"cycle {cycle}: tenant {t}: dropped into an empty queue")
                else:
                    outcomes[fired[0]] += 1
                    if fired == ["enqueued"]:
                        pk["stamp"] = cycle & STAMP_MASK
                        committed[t].append(pk)
                        unread[t] += len(pk["words"])
            elif any(strobes.values()):
                problems.append(f"cycle {cycle}: an outcome strobed off a last beat: {strobes}")
            await ctx.tick()
            if valid:
                sending.pop(0)
            # --- what this cycle's read returns, a cycle later --------------------------------
            if issued is not None:
                t, head, k = issued
                if k == 0:
                    if not committed[t]:
                        problems.append(f"tenant {t}: a head with nothing committed")
                        break
                    pk = reading_packet[t] = committed[t].pop(0)
                    last_keep = pk["words"][-1][1]
                    want = {"beats": len(pk["words"]),
                            "bytes": 8 * (len(pk["words"]) - 1) + bin(last_keep).count("1"),
                            "stamp": pk["stamp"],
                            "index": layout.from_bits(pk["metas"][-1]).hdr.flow_hash % S}
                    got = {name: getattr(head, name) for name in want}
                    if got != want:
                        problems.append(f"tenant {t}: descriptor {got} != {want}")
                    if ctx.get(dut.meta) != pk["metas"][-1]:
                        problems.append(f"tenant {t}: metadata is not the last beat's")
                pk = reading_packet[t]
                if k >= len(pk["words"]):
                    problems.append(f"tenant {t}: a head of {head.beats} beats for a packet "
                                    f"of {len(pk['words'])}")
                    break
                word = ctx.get(dut.data)
                want_word = pk["words"][k][0] | pk["words"][k][1] << 64
                if word != want_word:
                    problems.append(f"tenant {t} beat {k}: data {word:#x} != {want_word:#x}")
                unread[t] -= 1

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return problems, outcomes


def test_packets_queue_per_tenant_and_leave_in_order():
    for seed in range(3):
        problems, outcomes = run(seed)
        assert problems == [], problems[:5]
        assert all(n > 5 for n in outcomes.values()), outcomes


def test_a_queue_that_overfills_is_caught(monkeypatch):
    """The check bites: a room check one beat too generous (``used + beats <= Q``) overwrites
    the oldest unread beats of a full queue."""
    import types

    import supernic.hw.nic.queues as queues

    source = open(queues.__file__).read()
    assert source.count("used_t + cnt < Q") == 1
    mutant = types.ModuleType(queues.__name__)
    mutant.__package__ = queues.__package__
    exec(compile(source.replace("used_t + cnt < Q", "used_t + cnt <= Q"), queues.__file__,
                 "exec"), mutant.__dict__)
    dut = mutant.PortQueues(SHAPE, Q, D, S, _desc_layout(SHAPE, Q, D, S))
    problems, _ = run(0, read_rate=0.05, dut=dut)
    assert problems
