"""Rate limiter: the gateware (what it does and how it is configured:
:mod:`supernic.desc.nt.rate_limiter`).

**Hardware.** One bucket operation enters a seven-stage pipeline per metered packet, beside
the packet's first beat; the beats shift through the same stages, so the verdict is ready when
the first beat leaves. Bucket state lives in memories, each updated by a read in one stage and
a write in the next with a read port transparent to that write: back-to-back packets on one
bucket (one a cycle: 64-byte frames at 512 bits) see each other's updates with no stall. The
rate multiply sits in its own stages ahead of the token update, whose loop is one add and a
mux (see :meth:`RateLimiter.elaborate`).

A bucket's time advances only when its packets arrive, so a bucket idle for 2**32 cycles
(17 s at 250 MHz) would see its idle time modulo 2**32. A scrubber prevents that: once per
``scrub_interval`` cycles (build parameter, default
:data:`~supernic.desc.nt.rate_limiter.SCRUB_INTERVAL`) it advances the next bucket (round robin)
to ``now``, the timestamp of the latest metered packet, by the same formula with ``L = 0``.
Because ``min(B, min(B, T + r*a) + r*b) == min(B, T + r*(a + b))``, that changes nothing the
model can see. A scrub takes the first slot in the second half of the interval where no packet
needs the pipeline; under saturation by one-beat packets it takes an input slot at the
interval's end. So every bucket is scrubbed within ``buckets *
scrub_interval`` cycles (at most 2**31: a build asking for more is refused), and between
scrubs a drained limiter has no operation in flight: its stage registers are dead at a packet
boundary (each stage's ``busy`` bit guards them, hw/transform/liveness.py), and a boundary
stop captures none of them. (Scrubbing in every free slot, as before, kept an operation in
flight whenever the input was idle, which made 727 pipeline bits and 377 read-port bits part
of the captured state.) Time still stops if no metered packet arrives at all for 2**32
cycles: a 32-bit timestamp cannot tell.
"""

import enum

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data
from amaranth.lib.memory import Memory, MemoryData

from ...desc.meta import L3Kind
from ...desc.nt.rate_limiter import (BUCKET_COUNTERS, BURST_BITS, MIN_PACKET_BYTES, RATE_BITS,
                                     RATE_FRACTION_BITS, TOKEN_BITS, Action, ClassKind,
                                     RateLimiterDescription)
from ..stream import check_data_width
from .checksum_update import checksum_update
from ..csr.staged import staged_row
from .task import NetworkTask

__all__ = ["RateLimiter", "BucketOp", "bucket_config_layout", "bucket_op_layout"]


class BucketOp(enum.IntEnum):
    """Bucket operations in the pipeline."""
    NONE = 0
    PACKET = 1
    SCRUB = 2
    INIT = 3


def _class_layout(bucket_bits):
    return data.StructLayout({"kind": 2, "key": 24, "bucket": bucket_bits})


def bucket_config_layout():
    return data.StructLayout({"rate": RATE_BITS, "burst": BURST_BITS, "action": 1})


def bucket_counters_layout():
    return data.StructLayout({name: 64 for name in BUCKET_COUNTERS})


def bucket_op_layout(bucket_bits):
    return data.StructLayout({"kind": 2, "bucket": bucket_bits, "ts": 32, "length": 17})


class RateLimiter(RateLimiterDescription, NetworkTask):
    """Rate limiter: token buckets per tenant or L4 port class, dropping or ECN-marking."""

    def __init__(self, data_width, header_bytes=256, **params):
        if check_data_width(data_width) < 16:
            # The IPv4 checksum word must arrive in one beat to be updated as it passes.
            raise ValueError(f"Data width must be at least 16 for the rate limiter, "
                             f"not {data_width!r}")
        super().__init__(data_width, header_bytes, **params)
        n = self.p["buckets"]
        self.bucket_config = MemoryData(shape=bucket_config_layout(), depth=n, init=[])
        self.bucket_last = MemoryData(shape=32, depth=n, init=[])
        self.bucket_tokens = MemoryData(shape=TOKEN_BITS, depth=n, init=[])
        self.bucket_counters = MemoryData(shape=bucket_counters_layout(), depth=n, init=[])

    def elaborate(self, platform):
        m = Module()
        csr = self.csr
        nc = self.p["classes"]
        bb = self.bucket_bits_of(self.p)
        bpb = self.data_width // 8
        shift = bpb.bit_length() - 1
        frac = RATE_FRACTION_BITS

        m.submodules.config_mem = config_mem = Memory(data=self.bucket_config)
        m.submodules.last_mem = last_mem = Memory(data=self.bucket_last)
        m.submodules.tokens_mem = tokens_mem = Memory(data=self.bucket_tokens)
        m.submodules.counters_mem = counters_mem = Memory(data=self.bucket_counters)

        # --- pipeline skeleton: stage k holds beat k and the bucket operation beside it ------
        stages = 7
        valid = [None] + [Signal(name=f"s{k}_valid") for k in range(1, stages + 1)]
        beat = [None] + [Signal.like(self.i.p, name=f"s{k}_beat") for k in range(1, stages + 1)]
        first = [None] + [Signal(name=f"s{k}_first") for k in range(1, stages + 1)]
        unmetered = [None] + [Signal(name=f"s{k}_unmetered") for k in range(1, stages + 1)]
        op = [None] + [Signal(bucket_op_layout(bb), name=f"s{k}_op") for k in range(1, 7)]
        # busy[k]: an operation is in stage k (its op, and the registers stage k computes for
        # it, mean something only then).
        busy = [None] + [Signal(name=f"s{k}_busy") for k in range(1, 7)]
        en = Signal()
        hold = Signal()
        m.d.comb += [
            en.eq(~valid[stages] | self.o.ready),
            self.i.ready.eq(en & ~hold),
        ]
        with m.If(en):
            for k in range(2, stages):      # stage 7 is written by the rewrite below
                m.d.sync += [valid[k].eq(valid[k - 1]), beat[k].eq(beat[k - 1]),
                             first[k].eq(first[k - 1]), unmetered[k].eq(unmetered[k - 1])]
            for k in range(2, 7):
                m.d.sync += [op[k].eq(op[k - 1]), busy[k].eq(busy[k - 1])]

        # --- stage 0: classify the first beat and issue one operation a slot ------------------
        slots = [Signal(_class_layout(bb), name=f"class{k}") for k in range(nc)]
        with m.If(csr.class_write):
            # Written whole in one cycle: a packet never sees half a class.
            with m.Switch(csr.class_index):
                for k in range(nc):
                    with m.Case(k):
                        m.d.sync += slots[k].eq(Cat(*staged_row(
                            csr, self.class_table(self.p)).values()))

        meta = self.i.p.meta
        in_first = Signal(init=1)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += in_first.eq(self.i.p.last)
        skip = Signal()
        m.d.comb += skip.eq(meta.drop | meta.flags.truncated | meta.flags.malformed
                            | meta.flags.runt)
        match = Signal(nc)
        for k, s in enumerate(slots):
            m.d.comb += match[k].eq(Mux(
                s.kind == ClassKind.DPORT,
                (meta.flow.dport != 0) & (s.key == meta.flow.dport),
                (s.kind != ClassKind.NONE) & (s.kind == meta.tenant_kind)
                & (s.key == meta.tenant_key)))
        class_bucket = Signal(bb)
        for k in reversed(range(nc)):      # the last assignment wins: the lowest slot
            with m.If(match[k]):
                m.d.comb += class_bucket.eq(slots[k].bucket)
        matched = Signal()
        metered = Signal()
        length = Signal(17)
        m.d.comb += [
            matched.eq(match.any()),
            metered.eq(~skip & (matched | csr.unmatched_meter)),
            length.eq(Mux(meta.min_len > MIN_PACKET_BYTES, meta.min_len, MIN_PACKET_BYTES)),
        ]

        # Bucket writes wait in staging registers for their slot.
        init_pending = Signal()
        init_bucket = Signal(bb)
        init_config = Signal(bucket_config_layout())
        now = Signal(32)            # the latest ts of any metered packet
        now_valid = Signal()
        # Timestamps may arrive out of order: a NIC with several ingress ports interleaves
        # packets stamped on different ports, and queues reorder tenants. A packet is metered
        # at max(now, ts), so time never runs backwards for a bucket and the scrubber (which
        # advances idle buckets to now) stays invisible: refilling in steps equals refilling
        # at once. With timestamps in order this is just ts.
        ts_ahead = Signal(32)
        m.d.comb += ts_ahead.eq(meta.ts - now)
        t_eff = Signal(32)
        m.d.comb += t_eff.eq(Mux(~now_valid | ~ts_ahead[31], meta.ts, now))
        scrub_next = Signal(bb)
        interval = self.p["scrub_interval"]
        scrub_timer = Signal(range(interval))
        scrub_due = Signal()
        scrub_ripe = Signal()       # the interval's second half: a free slot scrubs
        m.d.comb += [
            csr.bucket_busy.eq(init_pending),
            scrub_due.eq(scrub_timer == interval - 1),
            scrub_ripe.eq(scrub_timer[-1]),
            hold.eq(init_pending | scrub_due),
        ]
        m.d.sync += scrub_timer.eq(Mux(scrub_due, scrub_timer, scrub_timer + 1))

        packet_op = Signal()
        m.d.comb += packet_op.eq(self.i.valid & self.i.ready & in_first & metered)
        config_wp = config_mem.write_port()
        m.d.comb += [config_wp.addr.eq(init_bucket), config_wp.data.eq(init_config)]
        op0 = Signal(bucket_op_layout(bb))
        with m.If(init_pending):
            # The configuration is written now; operations behind this one read it, those
            # ahead have read theirs already. The INIT refills the bucket, clears its counters.
            m.d.comb += [op0.kind.eq(BucketOp.INIT), op0.bucket.eq(init_bucket), op0.ts.eq(now),
                         config_wp.en.eq(en)]
        with m.Elif(packet_op):
            m.d.comb += [op0.kind.eq(BucketOp.PACKET), op0.bucket.eq(Mux(matched, class_bucket,
                                                                    csr.unmatched_bucket)),
                         op0.ts.eq(t_eff), op0.length.eq(length)]
        with m.Elif(scrub_ripe):
            m.d.comb += [op0.kind.eq(BucketOp.SCRUB), op0.bucket.eq(scrub_next), op0.ts.eq(now)]
        with m.If(en):
            m.d.sync += [
                valid[1].eq(self.i.valid & self.i.ready), beat[1].eq(self.i.p),
                first[1].eq(in_first), unmetered[1].eq(in_first & ~metered), op[1].eq(op0),
                busy[1].eq(init_pending | packet_op | scrub_ripe),
            ]
            with m.If(init_pending):
                m.d.sync += init_pending.eq(0)
            with m.Elif(packet_op):
                m.d.sync += [now.eq(t_eff), now_valid.eq(1)]
            with m.Elif(scrub_ripe):
                m.d.sync += [scrub_next.eq(scrub_next + 1), scrub_timer.eq(0)]
        with m.If(csr.bucket_write):
            m.d.sync += [init_pending.eq(1), init_bucket.eq(csr.bucket_index),
                         init_config.rate.eq(csr.bucket_rate),
                         init_config.burst.eq(csr.bucket_burst),
                         init_config.action.eq(csr.bucket_action)]

        # --- stages 1-2: configuration and last_ts (read in 1, last_ts written in 2) ----------
        config_rp = config_mem.read_port()
        last_wp = last_mem.write_port()
        last_rp = last_mem.read_port(transparent_for=(last_wp,))
        m.d.comb += [
            config_rp.addr.eq(op[1].bucket), config_rp.en.eq(en),
            last_rp.addr.eq(op[1].bucket), last_rp.en.eq(en),
            last_wp.addr.eq(op[2].bucket), last_wp.data.eq(op[2].ts),
            last_wp.en.eq(en & busy[2]),
        ]
        # Elapsed cycles modulo 2**32: right across the timestamp's wrap.
        elapsed = Signal(32)
        m.d.comb += elapsed.eq(op[2].ts - last_rp.data)
        s3_config = Signal(bucket_config_layout())
        s3_elapsed = Signal(32)
        with m.If(en):
            m.d.sync += [s3_config.eq(config_rp.data), s3_elapsed.eq(elapsed)]

        # --- stages 3-4: rate * elapsed, registered on both sides (a DSP multiplier) ----------
        s4_product = Signal(RATE_BITS + 32)
        s4_config = Signal(bucket_config_layout())
        with m.If(en):
            m.d.sync += [s4_product.eq(s3_config.rate * s3_elapsed), s4_config.eq(s3_config)]
        # Any refill of 2**40 or more fills every bucket: clamp, so the loop adders stay short.
        refill = Signal(TOKEN_BITS + 1)
        m.d.comb += refill.eq(Mux(s4_product >= 2 ** TOKEN_BITS, 2 ** TOKEN_BITS, s4_product))
        burst_fixed = Signal(TOKEN_BITS)
        length_fixed = Signal(17 + frac)
        m.d.comb += [burst_fixed.eq(s4_config.burst << frac),
                     length_fixed.eq(op[4].length << frac)]
        # Differences precomputed a stage early: the token loop in stage 5 is then one add
        # per candidate and a mux.
        wide = signed(TOKEN_BITS + 3)
        s5_refill = Signal(TOKEN_BITS + 1)
        s5_burst = Signal(TOKEN_BITS)
        s5_refill_less_burst = Signal(wide)
        s5_refill_less_length = Signal(wide)
        s5_burst_less_length = Signal(wide)
        s5_action = Signal()
        with m.If(en):
            m.d.sync += [
                s5_refill.eq(refill), s5_burst.eq(burst_fixed),
                s5_refill_less_burst.eq(refill - burst_fixed),
                s5_refill_less_length.eq(refill - length_fixed),
                s5_burst_less_length.eq(burst_fixed - length_fixed),
                s5_action.eq(s4_config.action),
            ]

        # --- stages 4-5: tokens (read in 4, updated and written in 5) -------------------------
        tokens_wp = tokens_mem.write_port()
        tokens_rp = tokens_mem.read_port(transparent_for=(tokens_wp,))
        m.d.comb += [tokens_rp.addr.eq(op[4].bucket), tokens_rp.en.eq(en)]
        tokens = tokens_rp.data
        over_burst = Signal(wide)
        sum_less_length = Signal(wide)
        m.d.comb += [over_burst.eq(tokens + s5_refill_less_burst),
                     sum_less_length.eq(tokens + s5_refill_less_length)]
        conform = Signal()
        new_tokens = Signal(TOKEN_BITS)
        # tokens' = min(B, T + R): if T + R >= B the bucket is full and conform means B >= L.
        with m.If(over_burst >= 0):
            m.d.comb += [conform.eq(s5_burst_less_length >= 0),
                         new_tokens.eq(Mux(conform, s5_burst_less_length, s5_burst))]
        with m.Else():
            m.d.comb += [conform.eq(sum_less_length >= 0),
                         new_tokens.eq(Mux(conform, sum_less_length, tokens + s5_refill))]
        m.d.comb += [
            tokens_wp.addr.eq(op[5].bucket),
            tokens_wp.data.eq(Mux(op[5].kind == BucketOp.INIT, s5_burst, new_tokens)),
            tokens_wp.en.eq(en & busy[5]),
        ]
        s6_conform = Signal()
        s6_action = Signal()
        with m.If(en):
            m.d.sync += [s6_conform.eq(conform), s6_action.eq(s5_action)]

        # --- stages 5-6: counters (read in 5, written in 6) -----------------------------------
        counters_wp = counters_mem.write_port()
        counters_rp = counters_mem.read_port(transparent_for=(counters_wp,))
        m.d.comb += [counters_rp.addr.eq(op[5].bucket), counters_rp.en.eq(en)]
        old_counts = counters_rp.data
        new_counts = Signal(bucket_counters_layout())
        m.d.comb += new_counts.eq(old_counts)
        with m.If(op[6].kind == BucketOp.INIT):
            m.d.comb += new_counts.eq(0)
        with m.Elif(s6_conform):
            m.d.comb += [new_counts.conformed_packets.eq(old_counts.conformed_packets + 1),
                         new_counts.conformed_bytes.eq(old_counts.conformed_bytes
                                                       + op[6].length)]
        with m.Else():
            m.d.comb += [new_counts.exceeded_packets.eq(old_counts.exceeded_packets + 1),
                         new_counts.exceeded_bytes.eq(old_counts.exceeded_bytes + op[6].length)]
        m.d.comb += [
            counters_wp.addr.eq(op[6].bucket), counters_wp.data.eq(new_counts),
            counters_wp.en.eq(en & busy[6]
                              & ((op[6].kind == BucketOp.PACKET) | (op[6].kind == BucketOp.INIT))),
        ]

        # Per-bucket registers, through read ports of their own.
        csr_counters = counters_mem.read_port()
        csr_tokens = tokens_mem.read_port()
        csr_last = last_mem.read_port()
        for port in (csr_counters, csr_tokens, csr_last):
            m.d.comb += port.addr.eq(csr.bucket_index)
        for name in BUCKET_COUNTERS:
            m.d.comb += getattr(csr, name).eq(getattr(csr_counters.data, name))
        m.d.comb += [csr.tokens.eq(csr_tokens.data), csr.last_ts.eq(csr_last.data)]

        # --- stage 6 -> 7: the verdict on every beat, ECN marking -----------------------------
        b6 = beat[6]
        verdict_drop = Signal()
        verdict_mark = Signal()
        exceed = Signal()
        m.d.comb += exceed.eq(busy[6] & (op[6].kind == BucketOp.PACKET) & ~s6_conform)
        held_drop = Signal()
        held_mark = Signal()
        m.d.comb += [
            verdict_drop.eq(Mux(first[6], exceed & (s6_action == Action.DROP), held_drop)),
            verdict_mark.eq(Mux(first[6], exceed & (s6_action == Action.MARK), held_mark)),
        ]
        with m.If(en & valid[6] & first[6]):
            m.d.sync += [held_drop.eq(verdict_drop), held_mark.eq(verdict_mark)]

        # Beats of the packet seen so far, saturating past the last one the header can reach.
        beat_limit = (self.header_bytes + 16) // bpb + 1
        beat_no = Signal(range(beat_limit + 1))
        with m.If(en & valid[6]):
            m.d.sync += beat_no.eq(Mux(b6.last, 0, Mux(beat_no == beat_limit, beat_limit,
                                                        beat_no + 1)))

        nwords = bpb // 2
        # 16-bit words in network order: word k is bytes 2k (high) and 2k + 1 (low).
        words = [Cat(b6.data[16 * k + 8:16 * k + 16], b6.data[16 * k:16 * k + 8])
                 for k in range(nwords)]
        l3_off = b6.meta.l3_off[0]
        v4 = Signal()
        v6 = Signal()
        m.d.comb += [v4.eq(b6.meta.l3_kind[0] == L3Kind.IPV4),
                     v6.eq(b6.meta.l3_kind[0] == L3Kind.IPV6)]
        # Ethernet and 802.1Q tags are 14 + 4n bytes, so l3_off is even and the word holding
        # the ECN bits (IPv4 version/IHL/DSCP/ECN, IPv6 version/traffic class) and the IPv4
        # checksum word never straddle a beat.
        csum_off = Signal(len(l3_off) + 1)
        m.d.comb += csum_off.eq(l3_off + 10)
        tos_beat, tos_lane = l3_off >> shift, l3_off[1:shift] if shift > 1 else Const(0, 1)
        csum_beat, csum_lane = csum_off >> shift, csum_off[1:shift] if shift > 1 else Const(0, 1)

        def word_at(lane, name):
            out = Signal(16, name=name)
            with m.Switch(lane):
                for k in range(nwords):
                    with m.Case(k):
                        m.d.comb += out.eq(words[k])
            return out
        tos_word = word_at(tos_lane, "tos_word")
        old_csum = word_at(csum_lane, "old_csum")
        ecn = Signal(2)
        m.d.comb += ecn.eq(Mux(v4, tos_word[0:2], tos_word[4:6]))
        ce_word = Signal(16)
        m.d.comb += ce_word.eq(tos_word | Mux(v4, 0x0003, 0x0030))
        set_ce = Signal()
        m.d.comb += set_ce.eq(valid[6] & verdict_mark & (v4 | v6) & (beat_no == tos_beat)
                              & ((ecn == 1) | (ecn == 2)))    # ECT(1), ECT(0): RFC 3168 s5
        # At narrow widths the checksum passes beats after the ECN field: remember the change.
        seen_ce = Signal()
        seen_old = Signal(16)
        seen_new = Signal(16)
        with m.If(en & valid[6]):
            with m.If(set_ce):
                m.d.sync += [seen_ce.eq(1), seen_old.eq(tos_word), seen_new.eq(ce_word)]
            with m.If(b6.last):
                m.d.sync += seen_ce.eq(0)
        word_old = Signal(16)
        word_new = Signal(16)
        m.d.comb += [word_old.eq(Mux(set_ce, tos_word, seen_old)),
                     word_new.eq(Mux(set_ce, ce_word, seen_new))]
        new_csum = checksum_update(m, old_csum, [word_old], [word_new], name="ce_csum")
        fix_csum = Signal()
        m.d.comb += fix_csum.eq(valid[6] & v4 & (beat_no == csum_beat) & (set_ce | seen_ce))

        out_words = []
        for k in range(nwords):
            w = Signal(16, name=f"out_word{k}")
            m.d.comb += w.eq(words[k])
            with m.If(set_ce & (tos_lane == k)):
                m.d.comb += w.eq(ce_word)
            with m.Elif(fix_csum & (csum_lane == k)):
                m.d.comb += w.eq(new_csum)
            out_words.append(Cat(w[8:16], w[0:8]))
        s7_dropped = Signal()
        with m.If(en):
            m.d.sync += [
                valid[7].eq(valid[6]), beat[7].eq(b6), beat[7].data.eq(Cat(*out_words)),
                beat[7].meta.drop.eq(b6.meta.drop | verdict_drop),
                beat[7].meta.mark.eq(b6.meta.mark | verdict_mark),
                first[7].eq(first[6]), unmetered[7].eq(unmetered[6]),
                s7_dropped.eq(verdict_drop),
            ]

        # --- output and the standard counters -------------------------------------------------
        m.d.comb += [self.o.valid.eq(valid[7]), self.o.p.eq(beat[7])]
        start = self.o.valid & self.o.ready & first[7]
        self.count_standard(m, packets=start, dropped=start & s7_dropped,
                            skipped=start & unmetered[7])
        return m
