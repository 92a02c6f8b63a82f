"""The catalog of formal properties: what each claims, how its harness is built, and the depth
``snic bench formal`` proves it to (tests/test_formal.py uses a shallower one).

* ``fork``, ``join``: the chain's fork and join (hw/chain/fork.py, join.py) keep the stream
  contract on every output whenever their inputs do.
* ``link``: the region link (hw/nic/link.py) keeps the contract on the four streams it drives,
  and its latch never switches while a packet is half-way through any of its eight ports, in
  the environment the NIC gives it: ``idle`` is the packet store's in-flight count for both
  regions being zero (hw/nic/top.py), and a region gives back only packets it was given.
* ``scheduler``: the tenant scheduler (hw/nic/scheduler.py) isolates tenants and accounts for
  every packet, with every register free; ``scheduler_progress``: in the environment where it
  owes progress, its queued packets drain (neither idle with work nor starving a tenant).
* ``nt_<kind>``: every network task (hw/nt/) keeps the contract on its output for every value
  of its configuration registers, at 64 bits.
"""

from dataclasses import dataclass
from typing import Callable

from amaranth.hdl import Assert, Assume, Cat, Mux, Signal
from amaranth.lib import data
from amaranth.lib.wiring import In

from ...desc.nic.shape import BEATS_BITS
from .contract import ContractHarness

__all__ = ["Property", "PROPERTIES", "ports_of"]

#: Metadata of the chain blocks' proofs: the two verdict bits the join merges.
_VERDICTS = data.StructLayout({"drop": 1, "mark": 1})
_WIDTH = 64
_HEADER_BYTES = 64


@dataclass(frozen=True)
class Property:
    name: str
    doc: str
    build: Callable     # () -> (harness, ports)
    depth: int          # snic bench formal
    ci_depth: int       # tests/test_formal.py
    #: Try k-induction after BMC. Off where it cannot close (state such as counters and
    #: queue memories that induction sees in unreachable combinations): bounded only.
    induction: bool = True


def ports_of(component, inputs_only=False):
    """Every signal of a component's signature, as ports of the top the proof sees (inputs
    not driven in the harness are free). ``inputs_only``: leave the outputs inside, so Yosys
    removes the logic that drives only them (none of it can make an assertion fail)."""
    out = []
    for _path, member, value in component.signature.flatten(component):
        if inputs_only and member.flow != In:
            continue
        out.append(value.as_value() if hasattr(value, "as_value") else value)
    return out


def _fork():
    from ..chain.fork import PacketFork
    dut = PacketFork(_WIDTH, _VERDICTS, 2)
    return ContractHarness(dut, [dut.i], dut.outputs()), ports_of(dut)


def _join():
    from ..chain.join import PacketJoin
    dut = PacketJoin(_WIDTH, _VERDICTS, 2, primary_depth=4)
    return ContractHarness(dut, dut.inputs(), [dut.o]), ports_of(dut)


def _taken(stream):
    return stream.valid & stream.ready


def _mid_packet(m, stream, name):
    """High between a packet's first and last beat on ``stream`` (its first beat taken, its
    last not yet)."""
    mid = Signal(name=f"{name}_mid")
    with m.If(_taken(stream)):
        m.d.sync += mid.eq(~stream.p.last)
    return mid


def _packets(m, started_on, ended_on, name, width=5):
    """Packets whose first beat went on ``started_on`` and whose last has not yet left on
    ``ended_on`` (``_NEVER``: packets begun)."""
    count = Signal(width, name=name)
    first = Signal(init=1, name=f"{name}_first")
    with m.If(_taken(started_on)):
        m.d.sync += first.eq(started_on.p.last)
    began = _taken(started_on) & first
    ended = 0 if ended_on is _NEVER else _taken(ended_on) & ended_on.p.last
    m.d.sync += count.eq(count + began - ended)
    return count


_NEVER = object()


def _ends(m, stream, name, width=5):
    """Packets whose last beat went on ``stream``."""
    count = Signal(width, name=name)
    m.d.sync += count.eq(count + (_taken(stream) & stream.p.last))
    return count


def _link():
    from ...desc.nic.shape import NicShape
    from ..nic.link import RegionLink
    dut = RegionLink(NicShape(data_width=_WIDTH, header_bytes=_HEADER_BYTES, tenants=2,
                              regions=2), primary_depth=4)
    into = [dut.store_a_in, dut.store_b_in, dut.region_a_o, dut.region_b_o]
    out = [dut.store_a_out, dut.store_b_out, dut.region_a_i, dut.region_b_i]

    # The scheduler's dispatches into the store (free inputs of the proof): a packet is in
    # flight for its region from its dispatch (its side-FIFO entry, whose level is the store's
    # region_in_flight, hw/nic/store.py) until its last beat comes back from the region.
    dispatch = {"a": Signal(name="dispatch_a"), "b": Signal(name="dispatch_b")}

    def environment(m, started):
        flights = {}
        for side, (to_region, back) in {"a": (dut.store_a_in, dut.store_a_out),
                                        "b": (dut.store_b_in, dut.store_b_out)}.items():
            dispatched = Signal(5, name=f"dispatched_{side}")
            m.d.sync += dispatched.eq(dispatched + dispatch[side])
            began = _packets(m, to_region, _NEVER, f"began_{side}")
            returned = _ends(m, back, f"returned_{side}")
            flights[side] = flight = Signal(5, name=f"flight_{side}")
            m.d.comb += flight.eq(dispatched - returned)
            mid = _mid_packet(m, to_region, f"to_region_{side}")
            # The store sends a region only packets dispatched to it, and keeps the counts
            # small at the depths proven.
            m.d.comb += [Assume(~to_region.valid | mid | (began != dispatched)),
                         Assume(dispatched < 8)]
        m.d.comb += dut.idle.eq((flights["a"] == 0) & (flights["b"] == 0))
        # The scheduler dispatches nothing to B while it reads offline.
        m.d.comb += Assume(~dispatch["b"] | dut.b_online)
        # A region gives back only packets it was given, and ends one only after it has
        # taken all of it (NTs drop by marking: every beat goes through, hw/nt/task.py).
        for side, (i, o) in {"a": (dut.region_a_i, dut.region_a_o),
                             "b": (dut.region_b_i, dut.region_b_o)}.items():
            inside = _packets(m, i, o, f"inside_{side}")
            ended_in, ended_out = _ends(m, i, f"ended_in_{side}"), _ends(m, o, f"ended_out_{side}")
            mid_out = _mid_packet(m, o, f"out_{side}")
            m.d.comb += [Assume(~o.valid | (inside != 0) | mid_out),
                         Assume(~(o.valid & o.p.last) | (ended_in != ended_out))]
        # The latch switches only between packets on every port.
        mids = [_mid_packet(m, s, f"port{k}") for k, s in enumerate(into + out)]
        was = Signal(name="linked_before")
        m.d.sync += was.eq(dut.linked)
        switching = started & (was != dut.linked)
        for mid in mids:
            m.d.comb += Assert(~switching | ~mid)

    ports = [p for p in ports_of(dut) if p is not dut.idle] + list(dispatch.values())
    return ContractHarness(dut, into, out, environment), ports


def _small_scheduler(T, R):
    """The scheduler the proofs see: ``T`` tenants on one port, ``R`` regions, 4-beat queues
    of two packets, the round-robin policy alone."""
    from ...desc.nic.shape import NicShape
    from ..nic.scheduler import TenantScheduler
    return TenantScheduler(NicShape(data_width=32, header_bytes=_HEADER_BYTES, tenants=T,
                                    ports=1, regions=R),
                           queue_beats=4, queue_packets=2, table_size=2, policies=("rr",))


def _scheduler():
    """The scheduler (hw/nic/scheduler.py) with two tenants on one port, two regions, 4-beat
    queues, the round-robin policy alone (the policy only picks which tenant goes next) and
    every CSR free (tables, commits, enables, holds written at will).

    The data of each input packet carries its tenant (the first beat's tag, which picks its
    queue) in its low bits, so a beat that leaves with another tenant's tag, or another
    tenant's data under its tag, shows at the output."""
    from amaranth.hdl import Array
    T, R = 2, 2
    dut = _small_scheduler(T, R)
    i, o, csr = dut.i[0], dut.o, dut.csr
    counters = {name: [getattr(csr, f"t{t}_{name}") for t in range(T)]
                for name in ("enqueued", "queue_drops", "disabled_drops", "dispatched")}

    def environment(m, started):
        # Input: the packet's tenant is its first beat's tag; its data says so on every beat.
        first = Signal(init=1, name="in_first")
        owner = Signal(1, name="in_owner")
        tenant = Signal(1, name="in_tenant")
        m.d.comb += tenant.eq(Mux(first, i.p.meta.tag.tenant, owner))
        with m.If(i.valid):
            m.d.sync += [first.eq(i.p.last), owner.eq(tenant)]
        m.d.comb += Assume(~i.valid | (i.p.data[:1] == tenant))
        arrived = [Signal(8, name=f"arrived_t{t}") for t in range(T)]
        departed = [Signal(8, name=f"departed_t{t}") for t in range(T)]
        for t in range(T):
            m.d.sync += [
                arrived[t].eq(arrived[t] + (i.valid & i.p.last & (tenant == t))),
                departed[t].eq(departed[t] + (_taken(o) & o.p.last & (o.p.meta.tag.tenant == t))),
            ]
        # Regions a tenant's table has held, from reset (region t mod R) and every write.
        allowed = [[Signal(init=int(r == t % R), name=f"allowed_t{t}_r{r}") for r in range(R)]
                   for t in range(T)]
        with m.If(csr.table_write):
            for t in range(T):
                for r in range(R):
                    with m.If((csr.table_tenant == t) & (csr.table_region == r)):
                        m.d.sync += allowed[t][r].eq(1)
        tag = o.p.meta.tag
        beats = Signal(BEATS_BITS, name="out_beats")
        with m.If(_taken(o)):
            m.d.sync += beats.eq(Mux(o.p.last, 0, beats + 1))
        m.d.comb += [
            # Isolation: every beat leaves with its own tenant's tag, to a region in that
            # tenant's table, as many beats as the tag says.
            Assert(~o.valid | (o.p.data[:1] == tag.tenant)),
            Assert(~o.valid | Array(Array(row) for row in allowed)[tag.tenant][tag.region]),
            Assert(~(o.valid & o.p.last) | (beats + 1 == tag.beats)),
        ]
        for t in range(T):
            counted = Signal(8, name=f"counted_t{t}")
            m.d.comb += counted.eq(counters["enqueued"][t] + counters["queue_drops"][t]
                                   + counters["disabled_drops"][t])
            m.d.comb += [
                # Accounting: every packet that arrives is queued or counted dropped, once;
                # nothing leaves that was not dispatched, nor is dispatched unqueued.
                Assert(counted == arrived[t]),
                Assert(departed[t] <= counters["dispatched"][t]),
                Assert(counters["dispatched"][t] <= counters["enqueued"][t]),
                Assume(arrived[t] < 64),
            ]

    return ContractHarness(dut, [], [o], environment), ports_of(dut, inputs_only=True)


#: Bounds of the scheduler's progress property (found by BMC: 4 idle cycles and two passes
#: fail; see _scheduler_progress).
IDLE_BOUND, PASS_BOUND = 5, 3


def _scheduler_progress():
    """Queued packets drain, split into two claims that each have a short counterexample when
    broken (so BMC at a modest depth finds it), where "every queued packet eventually leaves"
    as one bounded-liveness assertion needs a depth past every queue's worth of packets (a
    wait of 6 cycles at depth 24 did not finish in six minutes):

    * work conservation: while some tenant has a packet queued and not dispatched, the output
      is never idle for ``IDLE_BOUND`` or more cycles;
    * no starvation: a tenant with a packet queued is passed over by fewer than ``PASS_BOUND``
      dispatches of the other tenant (round robin; two, not one, because its ``enqueued``
      counter rises when the descriptor is written, a cycle or two before the descriptor
      FIFO shows the scheduler that packet).

    Each dispatch moves at most ``queue_beats`` beats, so together they bound the wait of every
    queued packet. The environment is the one where the scheduler owes progress: every tenant
    enabled and not held, no table commit pending, every region online, empty and with room.
    The output is always ready (with ``ready`` free and its low cycles not counted, BMC to
    depth 16 did not finish in seven minutes, against 16 s); the input traffic, table writes,
    completions and every other register are free."""
    T, R = 2, 2
    dut = _small_scheduler(T, R)
    o, csr = dut.o, dut.csr

    def environment(m, started):
        m.d.comb += [Assume(dut.region_online == (1 << R) - 1),
                     Assume(dut.region_empty == (1 << R) - 1),
                     Assume(csr.tenant_enable == (1 << T) - 1),
                     Assume(csr.tenant_hold == 0),
                     Assume(csr.table_commit == 0),
                     Assume(o.ready)]
        for r in range(R):
            m.d.comb += Assume(dut.region_free[r] == (1 << len(dut.region_free[r])) - 1)
        dispatched = [getattr(csr, f"t{t}_dispatched")[:8] for t in range(T)]
        queued = [getattr(csr, f"t{t}_enqueued")[:8] != dispatched[t] for t in range(T)]
        before = [Signal(8, name=f"dispatched_before_t{t}") for t in range(T)]
        m.d.sync += [before[t].eq(dispatched[t]) for t in range(T)]
        went = [dispatched[t] != before[t] for t in range(T)]
        any_queued = Cat(queued).any()
        idle = Signal(range(IDLE_BOUND + 1), name="idle_with_work")
        with m.If(o.valid | ~any_queued):
            m.d.sync += idle.eq(0)
        with m.Elif(idle != IDLE_BOUND):
            m.d.sync += idle.eq(idle + 1)
        m.d.comb += Assert(idle < IDLE_BOUND)
        for t in range(T):
            passed = Signal(range(PASS_BOUND + 1), name=f"passed_over_t{t}")
            with m.If(~queued[t] | went[t]):
                m.d.sync += passed.eq(0)
            with m.Elif(went[1 - t] & (passed != PASS_BOUND)):
                m.d.sync += passed.eq(passed + 1)
            m.d.comb += Assert(passed < PASS_BOUND)

    return ContractHarness(dut, [], [o], environment), ports_of(dut, inputs_only=True)


def _nt(kind):
    def build():
        from ..nt.task import task_class
        cls = task_class(kind)
        dut = cls(_WIDTH, _HEADER_BYTES)
        return ContractHarness(dut, [dut.i], [dut.o]), ports_of(dut)
    return build


def _catalog():
    from ..nt.task import task_classes
    props = [
        Property("fork", "the chain fork keeps the stream contract on both outputs", _fork,
                 24, 12),
        Property("join", "the chain join keeps the stream contract on its output", _join,
                 24, 12),
        # The link's bench depth: 12 cycles of BMC take 15 minutes (879 and 960 s measured,
        # induction not closing); 16 did not finish in 27 minutes. Its CI depth: 6 takes
        # 107 s alone, 8 took 360 s of a CI run's 77 minutes.
        Property("link", "the region link keeps the stream contract on the four streams it "
                 "drives and switches only between packets", _link, 12, 6),
        Property("scheduler", "the scheduler keeps the stream contract; every beat leaves "
                 "with its own tenant's tag and data, to a region its table has held, with "
                 "as many beats as its tag says; every arriving packet is queued or counted "
                 "dropped, once; none leaves undispatched or is dispatched unqueued",
                 _scheduler, 12, 8, induction=False),
        # Depth 16 is the least at which both broken pickers of tests/test_formal.py fail
        # (at 12 both pass); 16 takes about 16 s, 20 about 240 to 260 s.
        Property("scheduler_progress", "queued packets drain: while a packet is queued the "
                 f"output is never idle {IDLE_BOUND} cycles, and no tenant with a queued "
                 f"packet is passed over {PASS_BOUND} times", _scheduler_progress, 20, 16,
                 induction=False),
    ]
    for kind in task_classes():
        props.append(Property(f"nt_{kind}", f"the {kind} NT keeps the stream contract on its "
                              f"output for every register value", _nt(kind), 8, 4))
    return {p.name: p for p in props}


PROPERTIES = _catalog()
