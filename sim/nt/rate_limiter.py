"""Model of the rate limiter (sw/desc/nt/rate_limiter.py): token buckets on ingress timestamps.

Deliberately plain: a bucket is its tokens (fixed point, :data:`RATE_FRACTION_BITS` fraction
bits, as the hardware keeps them) and the timestamp of its last packet; each metered packet
refills by ``rate * (ts - last)`` (modulo 2**32), caps at the burst, and conforms if ``L`` bytes
are there. The hardware's scrubber, which advances idle buckets between packets, is invisible
here by design: the refill composes exactly (see the hardware module docstring), and
:meth:`RateLimiterModel.verify_hardware` checks the token state with that rule.
"""

from ...desc.meta import L3Kind
from ...desc.nt.rate_limiter import (
    BUCKET_COUNTERS, RATE_FRACTION_BITS, TOKEN_BITS, Action, Bucket, ClassKind, RateLimiterConfig,
    RateLimiterDescription, TrafficClass, packet_bytes)
from ...hw.nt.rate_limiter import bucket_config_layout, BucketOp, bucket_op_layout
from ..layout_codec import decode
from ..parser_model import ParserModel
from ..traffic import random_packets
from .base import StateBridgeError, TaskModel, exact_size_frames, skips
from .checksum import checksum_update

__all__ = ["RateLimiterModel", "mark_ce", "class_keys"]

TS_MODULUS = 2 ** 32


def mark_ce(frame, meta):
    """Set CE in the outer IP header if it is ECT(0) or ECT(1) (RFC 3168 section 5); IPv4 gets
    its header checksum updated (RFC 1624 eqn. 3). Returns the new frame."""
    kind, off = meta["l3_kind"][0], meta["l3_off"][0]
    if kind not in (L3Kind.IPV4, L3Kind.IPV6):
        return frame
    word = int.from_bytes(frame[off:off + 2], "big")
    # IPv4: DSCP then ECN in the low two bits of byte 1; IPv6: the traffic class spans bytes
    # 0-1 and its ECN bits are bits 5:4 of byte 1.
    ecn_shift = 0 if kind == L3Kind.IPV4 else 4
    if (word >> ecn_shift) & 3 not in (1, 2):
        return frame
    new = word | (3 << ecn_shift)
    out = bytearray(frame)
    out[off:off + 2] = new.to_bytes(2, "big")
    if kind == L3Kind.IPV4:
        old_csum = int.from_bytes(frame[off + 10:off + 12], "big")
        out[off + 10:off + 12] = checksum_update(old_csum, [word], [new]).to_bytes(2, "big")
    return bytes(out)


def class_keys(meta):
    """The keys a packet can match: its tenant key, and its L4 destination port if it has one."""
    keys = []
    if meta["tenant_kind"]:
        keys.append((ClassKind(meta["tenant_kind"]), meta["tenant_key"]))
    if meta["flow"]["dport"]:
        keys.append((ClassKind.DPORT, meta["flow"]["dport"]))
    return keys


class RateLimiterModel(TaskModel):
    config_class = RateLimiterConfig

    def configure(self, config):
        super().configure(config)
        n = self.params["buckets"]
        self.buckets = [config.bucket(i) for i in range(n)]
        self.tokens = [b.burst_fixed for b in self.buckets]   # every bucket starts full
        self.last = [None] * n
        self.counts = [dict(conformed_packets=0, conformed_bytes=0, exceeded_packets=0,
                            exceeded_bytes=0) for _ in range(n)]
        self.now = None

    def classify(self, meta):
        """The bucket of a packet, or ``None`` if it passes unmetered."""
        keys = class_keys(meta)
        for c in self.config.classes:
            if (c.kind, c.key) in keys:
                return c.bucket
        return self.config.unmatched

    def meter(self, index, ts, length):
        """One packet of ``length`` bytes at ``ts`` on bucket ``index``: True if it conforms."""
        b = self.buckets[index]
        if self.now is not None and (ts - self.now) % TS_MODULUS >= TS_MODULUS // 2:
            ts = self.now          # older than the latest packet: metered at the latest
        if self.last[index] is not None:
            elapsed = (ts - self.last[index]) % TS_MODULUS
            self.tokens[index] = min(b.burst_fixed, self.tokens[index] + b.rate * elapsed)
        self.last[index] = ts
        self.now = ts
        need = length << RATE_FRACTION_BITS
        conform = self.tokens[index] >= need
        if conform:
            self.tokens[index] -= need
        kind = "conformed" if conform else "exceeded"
        self.counts[index][f"{kind}_packets"] += 1
        self.counts[index][f"{kind}_bytes"] += length
        return conform

    def apply(self, frame, meta):
        index = self.classify(meta)
        if index is None:
            return None
        if self.meter(index, meta["ts"], packet_bytes(meta)):
            return frame, meta
        if self.buckets[index].action == Action.DROP:
            meta["drop"] = 1
            return frame, meta
        meta["mark"] = 1
        return mark_ce(frame, meta), meta

    # --- test traffic ---------------------------------------------------------------------------

    def _frames(self, rng, n, malformed):
        """Mostly small frames, some medium, a few jumbo (up to 9000 bytes), from 24 repeating
        flows so that tenant keys (VLAN IDs, VNIs) and ports recur."""
        seed = rng.randrange(2 ** 32)
        parts = [(0.79, (60, 256)), (0.2, (257, 1500)), (0.01, (1501, 9000))]
        frames = []
        for k, (share, sizes) in enumerate(parts):
            count = n - len(frames) if k == len(parts) - 1 else round(n * share)
            frames += [f for _, f in random_packets(count, seed + k, sizes, malformed,
                                                    flows=24)]
        rng.shuffle(frames)
        return frames

    def _config_for(self, rng, metas, span):
        """Classes on the commonest keys of ``metas``, rates a fraction of each bucket's offered
        load over ``span`` cycles (3% to 35% of it), so that packets exceed in every bucket."""
        nb = min(self.params["buckets"], 6)
        counts = {}
        for meta in metas:
            if not skips(meta):
                for key in class_keys(meta):
                    counts[key] = counts.get(key, 0) + 1
        ranked = sorted(counts, key=lambda k: (-counts[k], k))
        chosen = []
        for kind in (ClassKind.VLAN, ClassKind.VNI, ClassKind.DPORT):
            chosen += [k for k in ranked if k[0] == kind][:4]
        rng.shuffle(chosen)
        chosen = chosen[:self.params["classes"]]
        classes = [TrafficClass(kind, key, i % nb) for i, (kind, key) in enumerate(chosen)]
        unmatched = rng.choice([None, nb - 1, nb - 1])
        probe = RateLimiterModel(self.params, self.data_width, self.header_bytes)
        probe.configure(RateLimiterConfig([Bucket(1, 1)] * nb, classes, unmatched))
        offered = [0] * nb
        for meta in metas:
            index = None if skips(meta) else probe.classify(meta)
            if index is not None:
                offered[index] += packet_bytes(meta)
        buckets = []
        for i in range(nb):
            load = offered[i] / span                      # bytes per cycle
            rate = max(1, int(load * rng.uniform(0.03, 0.35) * 2 ** RATE_FRACTION_BITS))
            buckets.append(Bucket(rate, rng.randint(1500, 12000),
                                  Action.DROP if i % 2 == 0 else Action.MARK))
        return RateLimiterConfig(buckets, classes, unmatched)

    def test_case(self, rng, n, malformed):
        frames = self._frames(rng, n, malformed)
        parser = ParserModel(self.header_bytes)
        sample = frames[:1000]
        metas = [parser.parse(f) for f in sample]
        # The bench spaces packets 1 to 400 cycles apart (mean 200.5).
        return self._config_for(rng, metas, 200.5 * len(sample)), frames

    def saturation_case(self, rng, n, size):
        """Every packet metered: a few port classes and the rest on bucket 0, so back-to-back
        packets hit one bucket; half the buckets mark."""
        frames = exact_size_frames(rng, n, size)
        parser = ParserModel(self.header_bytes)
        ports = list(dict.fromkeys(parser.parse(f)["flow"]["dport"] for f in frames[:8]))
        nb = min(4, self.params["buckets"])
        classes = [TrafficClass(ClassKind.DPORT, p, 1 + i % (nb - 1))
                   for i, p in enumerate(p for p in ports if p)][:self.params["classes"]]
        buckets = [Bucket(rng.randrange(1, 2 ** 20), 3000, Action(i % 2)) for i in range(nb)]
        return RateLimiterConfig(buckets, classes, 0), frames

    # --- state moved from and to the hardware (hw/transform) -----------------------------------
    def load_hw_tables(self, values):
        """A bucket is its tokens and the timestamp they are valid at, as in the hardware's
        memories; the per-bucket counts are 64-bit fields of one row, in :data:`BUCKET_COUNTERS`
        order. An operation is in stage ``k`` while ``s{k}_busy`` is 1. At a boundary stop
        none is (the busy bits are the guards the stop waits for, and the stage registers are
        not in the boundary map); an immediate stop may find a scrub (or a configuration's
        INIT) there: a scrub in stages 3 to 5 has written its bucket's ``last`` and not yet
        its tokens, so its refill (held in the stage registers) is applied here, as stage 5
        would have. The refill composes exactly, so a scrub changes nothing the model can
        see."""
        # (Configuration state is in a boundary map only by its registers: the model has it
        # from ``configure``.)
        hw = self.hw
        if values.get(hw("init_pending")):
            raise StateBridgeError("a bucket configuration write is pending in the rate "
                                   "limiter: capture again once bucket_busy reads 0")
        for i in range(len(self.buckets)):
            self.tokens[i] = values[hw("tokens")][i]
            self.last[i] = values[hw("last")][i]
            row = values[hw("counts")][i]
            self.counts[i] = {name: row >> (64 * k) & (2 ** 64 - 1)
                              for k, name in enumerate(BUCKET_COUNTERS)}
        self.now = values[hw("now")] if values[hw("now_valid")] else None
        bb = RateLimiterDescription.bucket_bits_of(self.params)
        for k in range(1, 7):
            if not values[hw("busy")[k - 1]]:
                continue
            op = decode(bucket_op_layout(bb), values[hw("op")[k - 1]])
            b = op["bucket"]
            if op["kind"] == BucketOp.PACKET:
                raise StateBridgeError(f"a packet operation is in stage {k} of the rate "
                                       f"limiter: stop it at a packet boundary")
            if op["kind"] == BucketOp.INIT:          # the new configuration is in config_mem
                burst = (decode(bucket_config_layout(), values[hw("config")][b])["burst"]
                         if hw("config") in values else self.buckets[b].burst)
                self.tokens[b] = burst << RATE_FRACTION_BITS
                self.last[b] = op["ts"]
                self.counts[b] = dict.fromkeys(BUCKET_COUNTERS, 0)
            elif op["kind"] == BucketOp.SCRUB and 3 <= k <= 5:
                if k == 5:
                    refill, burst = values[hw("refill")], values[hw("burst")]
                else:
                    config = decode(bucket_config_layout(), values[hw("stage_config")[k]])
                    product = (config["rate"] * values[hw("elapsed")] if k == 3
                               else values[hw("product")])
                    refill = min(product, 2 ** TOKEN_BITS)
                    burst = config["burst"] << RATE_FRACTION_BITS
                self.tokens[b] = min(burst, self.tokens[b] + refill)
                self.last[b] = op["ts"]

    def store_hw_tables(self, values):
        """The model's buckets into the memories; the pipeline's operations (scrubs, which
        the load applied) are cancelled (their busy bits cleared), so none writes a bucket
        after the restore."""
        for i in range(len(self.buckets)):
            values[self.hw("tokens")][i] = self.tokens[i]
            if self.last[i] is not None:        # else full: any time refills it to the burst
                values[self.hw("last")][i] = self.last[i]
            values[self.hw("counts")][i] = sum(self.counts[i][name] << (64 * k)
                                               for k, name in enumerate(BUCKET_COUNTERS))
        values[self.hw("now_valid")] = int(self.now is not None)
        if self.now is not None:
            values[self.hw("now")] = self.now
        for item in self.hw("busy"):
            values[item] = 0

    # --- state read-back ------------------------------------------------------------------------

    async def verify_hardware(self, access):
        """Counters must be equal. Tokens may have been advanced by the scrubber to a later
        time ``t`` between the bucket's last packet and the latest metered packet; then they
        must equal ``min(burst, tokens + rate * (t - last))``."""
        problems = []
        for index, b in enumerate(self.buckets):
            await access.write("bucket_index", index)
            for name, want in self.counts[index].items():
                got = await access.read(name)
                if got != want:
                    problems.append(f"bucket {index}: {name} {got}, model {want}")
            tokens, last = await access.read("tokens"), await access.read("last_ts")
            if self.last[index] is None:
                want = b.burst_fixed
            else:
                ahead = (last - self.last[index]) % TS_MODULUS
                if ahead > (self.now - self.last[index]) % TS_MODULUS:
                    problems.append(f"bucket {index}: last_ts {last:#x} outside the model's "
                                    f"{self.last[index]:#x}..{self.now:#x}")
                    continue
                want = min(b.burst_fixed, self.tokens[index] + b.rate * ahead)
            if tokens != want:
                problems.append(f"bucket {index}: tokens {tokens:#x} at {last:#x}, model "
                                f"{want:#x}")
        return problems

