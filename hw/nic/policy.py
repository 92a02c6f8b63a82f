"""Pick logic of the tenant scheduler: the four policies and the selection circuits they share.

Everything here is combinational over one cycle's candidates (one candidate packet a tenant,
see :mod:`.scheduler`) and the policy's registered state; the scheduler applies the state
updates on the cycle a decision is taken. The Python model of the same decisions is
:class:`supernic.sim.nic.scheduler.SchedulerModel`, checked step by step against a trace.

* ``drf``: dominant resource fair queueing (Ghodsi et al., SIGCOMM 2012) in its start-time
  form: each tenant has a start tag, the eligible tenant with the smallest tag goes, and its
  tag grows by the packet's dominant cost times the tenant's inverse weight. Tags compare
  modulo 2**48 (the sign of the difference), so they may wrap.
* ``rr``: one packet per eligible tenant in turn.
* ``drr``: deficit round robin by bytes (Shreedhar and Varghese, SIGCOMM 1995), interleaved:
  every eligible tenant with a positive deficit sends one packet in turn (tenants interleave
  packet by packet; a tenant alone still sends one a cycle); when none has credit left, a new
  round adds each eligible tenant's quantum. Deficits may go negative by less than one packet,
  which the next round repays, so byte shares follow the quanta over any long run.
* ``fifo``: arrival order over all queues (the baseline, with its head-of-line blocking).
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ...desc.drf import tag_increment as drf_tag_increment
from ...desc.nic.scheduler import POLICIES, POLICY_CODES, TAG_BITS

__all__ = ["POLICY_CODES", "POLICIES", "TAG_BITS", "lowest_one", "round_robin_pick",
           "tournament", "tag_before", "PolicyPick"]

def lowest_one(m: Module, bits, n, name):
    """``(any, index)`` of the lowest set bit of the ``n``-bit value ``bits``."""
    index = Signal(range(max(n, 2)), name=f"{name}_index")
    found = Signal(name=f"{name}_any")
    m.d.comb += found.eq(bits.any())
    # A priority chain: the lowest bit is assigned last, so it wins.
    for k in reversed(range(n)):
        with m.If(bits[k]):
            m.d.comb += index.eq(k)
    return found, index


def round_robin_pick(m: Module, bits, pointer, n, name):
    """``(any, index)`` of the first set bit at or after ``pointer``, wrapping around."""
    at_or_after = Signal(n, name=f"{name}_from")
    # `k >= pointer` is always true for the pointer's largest value: written as a comparison,
    # Verilator's lint calls it constant (CMPCONST), so that bit is the constant 1.
    top = (1 << len(pointer)) - 1
    m.d.comb += at_or_after.eq(Cat(Const(1) if k >= top else Const(k, range(max(n, 2))) >= pointer
                                   for k in range(n)))
    upper = Signal(n, name=f"{name}_upper")
    m.d.comb += upper.eq(bits & at_or_after)
    upper_any, upper_index = lowest_one(m, upper, n, f"{name}_hi")
    found, any_index = lowest_one(m, bits, n, f"{name}_lo")
    index = Signal(range(max(n, 2)), name=f"{name}_pick")
    m.d.comb += index.eq(Mux(upper_any, upper_index, any_index))
    return found, index


def tag_before(m: Module, a, b, name):
    """``a`` comes strictly before ``b`` modulo 2**width (the sign bit of ``a - b``)."""
    diff = Signal(len(a), name=f"{name}_diff")
    m.d.comb += diff.eq(a - b)
    return diff[-1]


def tournament(m: Module, entries, better, name):
    """Pairwise selection tree over ``entries`` (``(valid, key)``, index order): returns
    ``(any, index, key)`` of the best valid entry, ``better(x, y)`` meaning key ``x`` strictly
    beats ``y``; a tie keeps the lower index. Depth is log2 of the entry count."""
    n = len(entries)
    ibits = range(max(n, 2))
    level = []
    for k, (valid, key) in enumerate(entries):
        level.append((valid, key, Const(k, ibits)))
    depth = 0
    while len(level) > 1:
        nxt = []
        for j in range(0, len(level) - 1, 2):
            (av, ak, ai), (bv, bk, bi) = level[j], level[j + 1]
            tag = f"{name}_l{depth}_{j // 2}"
            take_b = Signal(name=f"{tag}_b")
            v = Signal(name=f"{tag}_v")
            k = Signal(len(ak), name=f"{tag}_k")
            i = Signal(ibits, name=f"{tag}_i")
            m.d.comb += [
                take_b.eq(bv & (~av | better(bk, ak))),
                v.eq(av | bv), k.eq(Mux(take_b, bk, ak)), i.eq(Mux(take_b, bi, ai)),
            ]
            nxt.append((v, k, i))
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
        depth += 1
    valid, key, index = level[0]
    return valid, index, key


class PolicyPick(wiring.Component):
    """The scheduler's stage 2 as one component: which tenant the policy in force picks this
    cycle, and the policies' own state (DRF tags and virtual time, the RR and DRR pointers,
    DRR deficits), updated on a decision.

    Contract. Each cycle ``policy`` (a code of :data:`POLICY_CODES` built in), the
    ``eligible`` tenants (a candidate with room, dispatchable, no commit pending), the FIFO
    ``contenders`` (a head at all, dispatchable, no commit pending) and each tenant's
    candidate (``bytes``, DRF ``dom`` cost, FIFO ``key``: age then port) are given; out come
    ``pick_valid`` and ``pick``, combinationally. With ``decide`` (the transfer has room) a
    valid pick is a dispatch, and the state moves on: the picked tenant's tag grows by its
    ``dom`` times its ``inv_weight`` (a cycle later, from registers), the pointers pass it,
    its deficit pays its bytes, and a new DRR round adds each eligible tenant's ``quantum``.
    ``backlogged`` drives the no-credit-for-idling rules: a tenant that starts a backlog
    starts at the virtual time (DRF), one that empties keeps only a debt (DRR). ``tag``,
    ``deficit`` and ``vtime`` are read back through the scheduler's registers; ``rise`` and
    ``fall`` (backlogs starting and ending) go to its trace."""

    def __init__(self, tenants, policies, bytes_bits, key_bits, deficit_bits, quantum_bits,
                 weight_bits=16):
        self.tenants = T = tenants
        self.policies = tuple(policies)
        self.deficit_bits = deficit_bits
        tb = range(max(T, 2))
        super().__init__({
            "policy": In(2),
            "eligible": In(T), "contenders": In(T), "backlogged": In(T), "decide": In(1),
            "bytes": In(data.ArrayLayout(bytes_bits, T)),
            "dom": In(data.ArrayLayout(32, T)),
            "key": In(data.ArrayLayout(key_bits, T)),
            "inv_weight": In(data.ArrayLayout(weight_bits, T)),
            "quantum": In(data.ArrayLayout(quantum_bits, T)),
            "pick_valid": Out(1), "pick": Out(tb),
            "tag": Out(data.ArrayLayout(TAG_BITS, T)),
            "deficit": Out(data.ArrayLayout(signed(deficit_bits), T)),
            "vtime": Out(TAG_BITS),
            "rise": Out(T), "fall": Out(T),
        })

    def elaborate(self, platform):
        m = Module()
        T = self.tenants
        codes = {name: POLICY_CODES[name] for name in self.policies}
        eligible, pick, pick_valid = self.eligible, self.pick, self.pick_valid
        dispatch = Signal()
        m.d.comb += dispatch.eq(self.decide & pick_valid)

        tags = [Signal(TAG_BITS, name=f"tag_t{t}") for t in range(T)]
        vtime = Signal(TAG_BITS)
        tag_pending = Signal()
        tag_tenant = Signal(range(max(T, 2)))
        tag_dom = Signal(32)
        tag_increment = Signal(TAG_BITS)
        m.d.comb += tag_increment.eq(drf_tag_increment(
            tag_dom, Array(self.inv_weight[t] for t in range(T))[tag_tenant]))
        was_backlogged = Signal(T)
        m.d.sync += was_backlogged.eq(self.backlogged)
        rise, fall = self.rise, self.fall
        m.d.comb += [rise.eq(self.backlogged & ~was_backlogged),
                     fall.eq(~self.backlogged & was_backlogged)]
        tag_now = [Signal(TAG_BITS, name=f"tag_now_t{t}") for t in range(T)]
        for t in range(T):
            grown = Signal(TAG_BITS, name=f"tag_grown_t{t}")
            m.d.comb += grown.eq(Mux(tag_pending & (tag_tenant == t), tags[t] + tag_increment,
                                     tags[t]))
            behind = tag_before(m, grown, vtime, f"tag_behind_t{t}")
            # A tenant that starts a backlog starts at the virtual time: no credit for idling.
            m.d.comb += tag_now[t].eq(Mux(rise[t] & behind, vtime, grown))
        rr_ptr = Signal(range(max(T, 2)))
        drr_ptr = Signal(range(max(T, 2)))
        deficit = [Signal(signed(self.deficit_bits), name=f"deficit_t{t}") for t in range(T)]
        quanta = [self.quantum[t] for t in range(T)]
        cand_bytes = [self.bytes[t] for t in range(T)]

        def next_index(i):
            return Mux(i == T - 1, 0, i + 1)

        choices = {}
        if "rr" in codes:
            any_, idx = round_robin_pick(m, eligible, rr_ptr, T, "rr")
            choices["rr"] = (any_, idx)
        if "drf" in codes:
            names = iter(range(T * 2))
            any_, idx, _ = tournament(
                m, [(eligible[t], tag_now[t]) for t in range(T)],
                lambda a, b: tag_before(m, a, b, f"drf_cmp{next(names)}"), "drf")
            choices["drf"] = (any_, idx)
        if "drr" in codes:
            positive = Signal(T)
            m.d.comb += positive.eq(Cat(deficit[t] > 0 for t in range(T)))
            credit = Signal(T)
            m.d.comb += credit.eq(eligible & positive)
            refilled = [Signal(signed(self.deficit_bits), name=f"refill_t{t}") for t in range(T)]
            for t in range(T):
                m.d.comb += refilled[t].eq(deficit[t] + quanta[t])
            credit2 = Signal(T)
            m.d.comb += credit2.eq(eligible & Cat(refilled[t] > 0 for t in range(T)))
            a_any, a_idx = round_robin_pick(m, credit, drr_ptr, T, "drr_a")
            b_any, b_idx = round_robin_pick(m, credit2, drr_ptr, T, "drr_b")
            new_round = Signal()
            m.d.comb += new_round.eq(~a_any & eligible.any())
            drr_any = Signal()
            drr_idx = Signal(range(max(T, 2)))
            m.d.comb += [drr_any.eq(a_any | (new_round & b_any)),
                         drr_idx.eq(Mux(a_any, a_idx, b_idx))]
            choices["drr"] = (drr_any, drr_idx)
        if "fifo" in codes:
            f_any, f_idx, _ = tournament(
                m, [(self.contenders[t], self.key[t]) for t in range(T)], lambda a, b: a > b,
                "fifo")
            f_ok = Signal()
            m.d.comb += f_ok.eq(f_any & Array(eligible[t] for t in range(T))[f_idx])
            choices["fifo"] = (f_ok, f_idx)

        with m.Switch(self.policy):
            for name, (any_, idx) in choices.items():
                with m.Case(POLICY_CODES[name]):
                    m.d.comb += [pick_valid.eq(any_), pick.eq(idx)]

        # Policy state updates, only on a decision.
        with m.If(self.decide):
            if "rr" in codes:
                with m.If((self.policy == POLICY_CODES["rr"]) & pick_valid):
                    m.d.sync += rr_ptr.eq(next_index(pick))
            if "drr" in codes:
                with m.If(self.policy == POLICY_CODES["drr"]):
                    with m.If(a_any):
                        m.d.sync += drr_ptr.eq(next_index(a_idx))
                        for t in range(T):
                            with m.If(a_idx == t):
                                m.d.sync += deficit[t].eq(deficit[t] - cand_bytes[t])
                    with m.Elif(new_round):
                        with m.If(b_any):
                            m.d.sync += drr_ptr.eq(next_index(b_idx))
                        for t in range(T):
                            with m.If(eligible[t]):
                                with m.If(b_any & (b_idx == t)):
                                    m.d.sync += deficit[t].eq(refilled[t] - cand_bytes[t])
                                with m.Else():
                                    m.d.sync += deficit[t].eq(refilled[t])
        # No credit for idling (DRR): an empty tenant keeps only a debt.
        for t in range(T):
            with m.If(~self.backlogged[t] & (deficit[t] > 0)):
                m.d.sync += deficit[t].eq(0)

        # DRF tags: the pick compares this cycle's tags, `tag_now`, which already hold the
        # previous dispatch's cost (the multiply runs from registers a cycle after the
        # dispatch) and a new backlog's start at the virtual time, so a tenant dispatched on
        # the previous cycle, or just backlogged, competes with its tag as the model has it.
        m.d.sync += tag_pending.eq(dispatch)
        with m.If(dispatch):
            m.d.sync += [tag_tenant.eq(pick),
                         tag_dom.eq(Array(self.dom[t] for t in range(T))[pick]),
                         vtime.eq(Array(tag_now)[pick])]
        for t in range(T):
            m.d.sync += tags[t].eq(tag_now[t])
            m.d.comb += [self.tag[t].eq(tags[t]), self.deficit[t].eq(deficit[t])]
        m.d.comb += self.vtime.eq(vtime)
        return m
