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

from amaranth.hdl import Cat, Const, Module, Mux, Signal

from ...desc.nic.scheduler import POLICIES, POLICY_CODES, TAG_BITS

__all__ = ["POLICY_CODES", "POLICIES", "TAG_BITS", "lowest_one", "round_robin_pick",
           "tournament", "tag_before"]

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
