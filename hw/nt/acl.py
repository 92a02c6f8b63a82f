"""ACL firewall gateware: the NT of :mod:`supernic.desc.nt.acl` (what it matches, its actions
and how a rule is programmed).

Every rule's 64-bit hit counter is held in a counter bank (counter_bank.py: a memory, which
the state-yielding transform reaches through its ports instead of scanning 64 flip-flops a
rule). The rules sit in flip-flops and all of them compare in parallel, as in a TCAM, so the
verdict costs two pipeline stages whatever the rule count and the NT keeps one beat a cycle.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data

from ...desc.meta import L3Kind
from ...desc.nt.acl import RULE_FIELDS, RULES, AclAction, AclFirewallDescription, Family
from ..csr.staged import staged_row
from .counter_bank import CounterBank
from .task import NetworkTask

__all__ = ["AclFirewall"]


def _rule_layout():
    return data.StructLayout(RULE_FIELDS)


class AclFirewall(AclFirewallDescription, NetworkTask):
    """ACL firewall: prioritised 5-tuple rules with prefixes, port ranges and wildcards."""

    def elaborate(self, platform):
        m = Module()
        n = self.p["rules"]
        csr = self.csr
        layout = _rule_layout()
        rules = [Signal(layout, name=f"rule{k}") for k in range(n)]
        m.submodules.hits = hits = CounterBank(n, 64, clears=False)

        # --- rule programming: between first beats only (supernic.desc.nt.acl) --------------
        staged = Signal(layout)
        m.d.comb += [getattr(staged, name).eq(value)
                     for name, value in staged_row(csr, RULES).items()]
        pending = Signal()
        pending_index = Signal(8)

        # --- pipeline: stage A registers the beat, stage B holds the verdict ------------------
        a_valid = Signal()
        b_valid = Signal()
        a_beat = Signal.like(self.i.p)
        b_beat = Signal.like(self.i.p)
        a_first = Signal()
        b_first = Signal()
        in_first = Signal(init=1)
        advance = Signal()
        m.d.comb += [advance.eq(~b_valid | self.o.ready), self.i.ready.eq(advance)]

        with m.If(csr.rule_write):
            m.d.sync += [pending.eq(1), pending_index.eq(csr.rule_index)]
        # A pending write lands on a cycle when no first beat is in stage A being judged.
        apply_write = pending & ~(a_valid & a_first)
        with m.If(apply_write & ~csr.rule_write):
            m.d.sync += pending.eq(0)
            with m.Switch(pending_index):
                for k in range(n):
                    with m.Case(k):
                        m.d.sync += rules[k].eq(staged)

        with m.If(self.i.valid & self.i.ready):
            m.d.sync += in_first.eq(self.i.p.last)

        meta = a_beat.meta
        flow = meta.flow
        is_ip = Signal()
        skip = Signal()
        m.d.comb += [
            is_ip.eq(meta.l3_kind[0] != L3Kind.NONE),
            skip.eq(meta.drop | meta.flags.truncated | meta.flags.malformed | meta.flags.runt
                    | ~is_ip),
        ]
        match = Signal(n)
        for k, r in enumerate(rules):
            fam_ok = Mux(r.family == Family.ANY, 1,
                         Mux(r.family == Family.IPV6, flow.ipv6, ~flow.ipv6))
            m.d.comb += match[k].eq(
                r.valid & fam_ok
                & (((flow.src_ip ^ r.src) & r.src_mask) == 0)
                & (((flow.dst_ip ^ r.dst) & r.dst_mask) == 0)
                & (flow.sport >= r.sport_lo) & (flow.sport <= r.sport_hi)
                & (flow.dport >= r.dport_lo) & (flow.dport <= r.dport_hi)
                & (r.proto_any | (flow.proto == r.proto)))
        terminal = Signal(n)
        counting = Signal(n)
        m.d.comb += [
            terminal.eq(Cat(match[k] & (rules[k].action != AclAction.COUNT) for k in range(n))),
            counting.eq(Cat(match[k] & (rules[k].action == AclAction.COUNT) for k in range(n))),
        ]
        # The first terminal match wins; count rules above it count too.
        winner = Signal(n)      # one-hot of the deciding rule, 0 if none
        above = Signal(n)       # rules strictly before the winner (all if none)
        seen = Const(0, 1)
        for k in range(n):
            m.d.comb += [winner[k].eq(terminal[k] & ~seen), above[k].eq(~seen)]
            seen = seen | terminal[k]
        drop_verdict = Signal()
        m.d.comb += drop_verdict.eq(Mux(
            terminal.any(),
            (Cat(winner[k] & (rules[k].action == AclAction.DROP) for k in range(n))).any(),
            csr.default_drop))

        b_drop = Signal()
        b_skip = Signal()
        b_hits = Signal(n)
        with m.If(advance):
            m.d.sync += [a_valid.eq(self.i.valid), a_beat.eq(self.i.p), a_first.eq(in_first),
                         b_valid.eq(a_valid), b_beat.eq(a_beat), b_first.eq(a_first)]
            with m.If(a_valid & a_first):
                m.d.sync += [b_skip.eq(skip), b_drop.eq(~skip & drop_verdict),
                             b_hits.eq(Mux(skip, 0, winner | (counting & above)))]

        # --- output: verdict on every beat of the packet, counters ---------------------------
        m.d.comb += [self.o.valid.eq(b_valid), self.o.p.eq(b_beat)]
        with m.If(b_drop):
            m.d.comb += self.o.p.meta.drop.eq(1)
        out = self.o.valid & self.o.ready
        with m.If(out & b_first):
            m.d.comb += hits.inc.eq(b_hits)
        end = out & self.o.p.last
        self.count_standard(m, packets=end, dropped=end & b_drop, skipped=end & b_skip)
        m.d.comb += hits.index.eq(csr.hit_index)
        with m.If(csr.hit_index < n):       # the bank sees only the index's low bits
            m.d.comb += csr.hit_count.eq(hits.value)
        return m
