"""Rate limiter: token-bucket policing per tenant or per flow class, dropping or ECN-marking.

**Classes.** A table of ``classes`` slots maps a key to one of ``buckets`` token buckets. A slot
has a kind and a key: ``vlan`` or ``vni`` match the parser's tenant key (``meta.tenant_kind``
and ``meta.tenant_key``: the VXLAN VNI, else the outer VLAN ID), ``dport`` matches the L4
destination port of the innermost flow (``meta.flow.dport``), which the parser leaves 0 when the
flow has no port (not TCP/UDP, IPv4 fragments, non-IP); port 0 never matches. The two key kinds
mix freely in one table; the lowest matching slot wins. A packet no slot matches goes to the
``unmatched`` bucket, or passes unmetered (counted ``skipped``) when ``unmatched_meter`` is 0.

**Buckets.** Each bucket has a rate in bytes per cycle, fixed point with
:data:`RATE_FRACTION_BITS` fractional bits (so 1/65536 byte a cycle, 30 kbit/s at 250 MHz, is
the smallest step), a burst in bytes and an action. Time is ``meta.ts``, the ingress timestamp
(32 bits, wrapping; elapsed time is the difference modulo 2**32), so a decision depends on when
a packet entered the NIC, not on how long it queued, and the model is exact. Timestamps may come
out of order (several ingress ports, tenant queues): a packet is metered at the latest
timestamp seen so far if its own is older (the signed 32-bit difference), so time never runs
backwards. For a packet of
``L`` bytes at time ``ts``, in fixed point::

    tokens = min(burst, tokens + rate * (ts - last_ts)); last_ts = ts
    conform = tokens >= L; if conform: tokens -= L

A bucket starts full (writing a bucket refills it and clears its counters). Conforming packets
pass. Exceeding ones are dropped (``meta.drop``, counted ``dropped``) or, with the ``mark``
action, marked: ``meta.mark = 1`` and, if the outer IP header is ECN-capable (ECT(0) or
ECT(1)), its ECN field becomes CE (RFC 3168 section 5: a router that would drop an
ECN-capable packet for congestion sets CE instead). An IPv4 header checksum is updated
incrementally (RFC 1624 eqn. 3); IPv6 has none. The outer header is the one marked: it is the
one the network path sees, and a tunnel egress copies CE inwards (RFC 6040 section 4.2).
Not-ECT and CE packets are only meta-marked.

**Packet length.** The decision is made on the first beat, before the frame length is known,
so ``L = max(meta.min_len, 60)``: ``min_len`` is the byte count the IP length fields claim
(from the frame start to the end of the outermost and innermost IP packets), which is the frame
length without Ethernet padding and FCS; 60 bytes, the shortest valid frame less its FCS
(IEEE 802.3), is the floor and the length charged for non-IP frames (runts are skipped). A
frame with more trailing bytes than its IP length claims is charged the IP length.

**Counters.** Per bucket: conformed and exceeded packets and bytes (64 bits). Write
``bucket_index`` and read the ``conformed_*``/``exceeded_*`` registers, and ``tokens`` (fixed
point, as the rate) and ``last_ts`` for debugging.

Programming: write the ``bucket_*`` staging registers and 1 to ``bucket_write``; the write
enters the pipeline at its next slot, which waits for the output to move (``bucket_busy`` reads
1 until then; a second ``bucket_write`` before that replaces the first). Classes: write
``class_*`` and 1 to ``class_write``; the slot is written whole in one cycle, so a packet is
classified by the old class or the new one.
"""

import enum
import math
from dataclasses import dataclass, field
from fractions import Fraction

from ..meta import RUNT_BYTES, TenantKind
from ..registers import R, RW, Register
from ..staged import Field, StagedTable
from .base import ConfigError, Param, Scope, TaskConfig, TaskDescription, block_type_name

__all__ = [
    "RateLimiterDescription", "RateLimiterConfig", "Bucket", "TrafficClass", "ClassKind",
    "Action", "RATE_FRACTION_BITS", "RATE_BITS", "BURST_BITS", "TOKEN_BITS", "MIN_PACKET_BYTES",
    "SCRUB_INTERVAL", "BUCKET_COUNTERS", "packet_bytes",
]

RATE_FRACTION_BITS = 16
RATE_BITS = 24                                  # 8.16 fixed point: below 256 bytes a cycle
BURST_BITS = 24                                 # up to 16 MiB
TOKEN_BITS = BURST_BITS + RATE_FRACTION_BITS    # tokens in the rate's fixed point
MIN_PACKET_BYTES = RUNT_BYTES                   # IEEE 802.3 minimum frame less the FCS
SCRUB_INTERVAL = 2 ** 16
BUCKET_COUNTERS = ("conformed_packets", "conformed_bytes", "exceeded_packets", "exceeded_bytes")


class ClassKind(enum.IntEnum):
    """What a class slot matches; VLAN and VNI equal :class:`TenantKind` on purpose."""
    NONE = 0
    VLAN = int(TenantKind.VLAN)
    VNI = int(TenantKind.VNI)
    DPORT = 3


class Action(enum.IntEnum):
    DROP = 0
    MARK = 1


def packet_bytes(meta):
    """``L``, the bytes a packet is charged (see the module docstring)."""
    return max(meta["min_len"], MIN_PACKET_BYTES)


# --- configuration ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Bucket:
    """``rate`` in 1/65536 bytes a cycle, ``burst`` in bytes."""
    rate: int = 0
    burst: int = 0
    action: Action = Action.DROP

    @property
    def burst_fixed(self):
        return self.burst << RATE_FRACTION_BITS


@dataclass(frozen=True)
class TrafficClass:
    kind: ClassKind
    key: int
    bucket: int


_KEY_NAMES = {"vlan": ClassKind.VLAN, "vni": ClassKind.VNI, "dport": ClassKind.DPORT}
_KEY_RANGES = {
    ClassKind.VLAN: (0, 4095, "a VLAN ID from 0 to 4095"),
    ClassKind.VNI: (0, 2 ** 24 - 1, "a VNI from 0 to 16777215"),
    ClassKind.DPORT: (1, 65535, "a port from 1 to 65535 (port 0 never matches)"),
}
_MAX_RATE = Fraction(2 ** RATE_BITS - 1, 2 ** RATE_FRACTION_BITS)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _table(kind, where, raw, known):
    if not isinstance(raw, dict):
        raise ConfigError(f"nt {kind}: {where} must be a table, not {raw!r}")
    unknown = set(raw) - set(known)
    if unknown:
        raise ConfigError(f"nt {kind}: {where} has unknown key {sorted(unknown)[0]!r} "
                          f"(known: {', '.join(sorted(known))})")


def _rate(kind, where, value):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(
            value) or not 0 <= value <= _MAX_RATE:
        raise ConfigError(f"nt {kind}: {where} must be a number of bytes per cycle from 0 to "
                          f"{float(_MAX_RATE):.5f}, not {value!r}")
    fixed = round(Fraction(value) * 2 ** RATE_FRACTION_BITS)
    if value and not fixed:
        raise ConfigError(f"nt {kind}: {where} must be 0 or at least 1/65536 byte per cycle, "
                          f"not {value!r}")
    return fixed


def _bucket_ref(kind, where, value, count):
    if not _is_int(value) or not 0 <= value < count:
        span = f"0 to {count - 1}" if count else "none configured"
        raise ConfigError(f"nt {kind}: {where} must be the index of a bucket in buckets "
                          f"({span}), not {value!r}")
    return value


@dataclass
class RateLimiterConfig(TaskConfig):
    """Buckets (index = position), classes in priority order, and the unmatched policy:
    a bucket index or ``None`` (pass unmetered)."""
    buckets: list = field(default_factory=list)
    classes: list = field(default_factory=list)
    unmatched: int | None = None

    def bucket(self, index):
        """Bucket ``index``; one not configured has rate 0 and burst 0 (everything exceeds)."""
        return self.buckets[index] if index < len(self.buckets) else Bucket()

    @classmethod
    def from_dict(cls, kind, params, raw):
        _table(kind, "config", raw, ("buckets", "classes", "unmatched"))
        raw_buckets = raw.get("buckets", [])
        if not isinstance(raw_buckets, list):
            raise ConfigError(f"nt {kind}: buckets must be a list of tables, not {raw_buckets!r}")
        if len(raw_buckets) > params["buckets"]:
            raise ConfigError(f"nt {kind}: buckets must number at most {params['buckets']} "
                              f"(build parameter buckets), not {len(raw_buckets)}")
        buckets = []
        for i, b in enumerate(raw_buckets):
            where = f"buckets[{i}]"
            _table(kind, where, b, ("rate", "burst", "action"))
            for key in ("rate", "burst"):
                if key not in b:
                    raise ConfigError(f"nt {kind}: {where} must give a {key}, not {b!r}")
            rate = _rate(kind, f"{where}.rate", b["rate"])
            burst = b["burst"]
            if not _is_int(burst) or not 0 <= burst < 2 ** BURST_BITS:
                raise ConfigError(f"nt {kind}: {where}.burst must be a whole number of bytes "
                                  f"from 0 to {2 ** BURST_BITS - 1}, not {burst!r}")
            action = b.get("action", "drop")
            if action not in ("drop", "mark"):
                raise ConfigError(f"nt {kind}: {where}.action must be 'drop' or 'mark', "
                                  f"not {action!r}")
            buckets.append(Bucket(rate, burst, Action[action.upper()]))

        raw_classes = raw.get("classes", [])
        if not isinstance(raw_classes, list):
            raise ConfigError(f"nt {kind}: classes must be a list of tables, not {raw_classes!r}")
        if len(raw_classes) > params["classes"]:
            raise ConfigError(f"nt {kind}: classes must number at most {params['classes']} "
                              f"(build parameter classes), not {len(raw_classes)}")
        classes, seen = [], {}
        for i, c in enumerate(raw_classes):
            where = f"classes[{i}]"
            _table(kind, where, c, (*_KEY_NAMES, "bucket"))
            keys = [k for k in _KEY_NAMES if k in c]
            if len(keys) != 1:
                raise ConfigError(f"nt {kind}: {where} must have exactly one key of dport, "
                                  f"vlan, vni, not {c!r}")
            ckind = _KEY_NAMES[keys[0]]
            low, high, what = _KEY_RANGES[ckind]
            key = c[keys[0]]
            if not _is_int(key) or not low <= key <= high:
                raise ConfigError(f"nt {kind}: {where}.{keys[0]} must be {what}, not {key!r}")
            if "bucket" not in c:
                raise ConfigError(f"nt {kind}: {where} must give a bucket, not {c!r}")
            bucket = _bucket_ref(kind, f"{where}.bucket", c["bucket"], len(buckets))
            if (ckind, key) in seen:
                raise ConfigError(f"nt {kind}: {where} must not repeat the key of "
                                  f"classes[{seen[ckind, key]}], not {c!r}")
            seen[ckind, key] = i
            classes.append(TrafficClass(ckind, key, bucket))

        unmatched = raw.get("unmatched", "pass")
        if unmatched != "pass":
            if not _is_int(unmatched) or not 0 <= unmatched < len(buckets):
                span = f"0 to {len(buckets) - 1}" if buckets else "none configured"
                raise ConfigError(f"nt {kind}: unmatched must be 'pass' or the index of a bucket "
                                  f"in buckets ({span}), not {unmatched!r}")
        return cls(buckets, classes, None if unmatched == "pass" else unmatched)

    def register_writes(self, params):
        writes = []
        # Every bucket is written, so a reconfiguration leaves no stale bucket behind.
        buckets = RateLimiterDescription.bucket_table(params)
        for index in range(params["buckets"]):
            b = self.bucket(index)
            writes += buckets.row_writes({"rate": b.rate, "burst": b.burst,
                                          "action": int(b.action)}, bucket_index=index)
        classes = RateLimiterDescription.class_table(params)
        for index in range(params["classes"]):
            c = self.classes[index] if index < len(self.classes) else TrafficClass(
                ClassKind.NONE, 0, 0)
            writes += classes.row_writes({"kind": int(c.kind), "key": c.key,
                                          "bucket": c.bucket}, class_index=index)
        writes += [("unmatched_bucket", self.unmatched or 0),
                   ("unmatched_meter", int(self.unmatched is not None))]
        return writes

    @classmethod
    def random(cls, rng, params):
        """Random buckets and classes with random keys (the model's test case aims its classes
        at the keys in its traffic instead)."""
        nb = rng.randint(1, params["buckets"])
        buckets = [Bucket(rng.randrange(1, 2 ** RATE_BITS) >> rng.randrange(RATE_BITS),
                          rng.randrange(2 ** rng.randint(6, 16)),
                          rng.choice(list(Action))) for _ in range(nb)]
        classes = []
        for _ in range(rng.randint(0, params["classes"])):
            ckind = rng.choice([ClassKind.VLAN, ClassKind.VNI, ClassKind.DPORT])
            low, high, _ = _KEY_RANGES[ckind]
            key = rng.randint(low, high)
            if all((c.kind, c.key) != (ckind, key) for c in classes):
                classes.append(TrafficClass(ckind, key, rng.randrange(nb)))
        return cls(buckets, classes, rng.choice([None, rng.randrange(nb)]))


# --- description --------------------------------------------------------------------------------

class RateLimiterDescription(TaskDescription):
    kind = "rate_limiter"
    doc = "Rate limiter: token buckets per tenant or L4 port class, dropping or ECN-marking."
    scope = Scope.HEADER
    modifies = True
    type_id = block_type_name("RLIM")
    params = (
        Param("buckets", 16, low=2, high=1024, power_of_two=True, doc="Token buckets"),
        Param("classes", 16, low=1, high=64, doc="Classification slots"),
        Param("scrub_interval", SCRUB_INTERVAL, low=16, high=2 ** 24, power_of_two=True,
              doc="Cycles without a free slot after which a scrub takes an input slot"),
    )
    config = RateLimiterConfig
    model = "rate_limiter:RateLimiterModel"

    @classmethod
    def shared_state(cls, params):
        # The buckets' memories; the time base; a configuration write pending; the metering
        # pipeline's stages 1 to 6 (``busy``, ``op``), and what stages 3 to 5 hold of a scrub
        # (full maps only: a boundary capture finds them idle).
        stages = range(1, 7)
        return {**super().shared_state(params),
                "tokens": "tokens_mem", "last": "last_mem", "counts": "counters_mem",
                "config": "config_mem", "now": "now", "now_valid": "now_valid",
                "init_pending": "init_pending",
                "busy": [f"s{k}_busy" for k in stages], "op": [f"s{k}_op" for k in stages],
                "stage_config": {k: f"s{k}_config" for k in (3, 4)},
                "elapsed": "s3_elapsed", "product": "s4_product", "refill": "s5_refill",
                "burst": "s5_burst"}

    @classmethod
    def check_params(cls, raw):
        params = super().check_params(raw)
        # Every bucket must be scrubbed before its elapsed time (modulo 2**32) can wrap; the
        # scrubber visits one bucket per interval. Half the wrap leaves room for timestamps
        # out of order (a signed 32-bit difference, see ``t_eff`` in hw/nt/rate_limiter.py).
        if params["buckets"] * params["scrub_interval"] > 2 ** 31:
            raise ConfigError(f"nt {cls.kind}: parameters buckets * scrub_interval must be at "
                              f"most 2**31 cycles (a bucket is scrubbed once in that many), "
                              f"not {params['buckets']} * {params['scrub_interval']}")
        return params

    @staticmethod
    def bucket_bits_of(params):
        return (params["buckets"] - 1).bit_length()

    @classmethod
    def bucket_table(cls, params):
        """The buckets, which software programs one at a time (sw/desc/staged.py)."""
        return StagedTable("bucket", (
            Field("rate", RATE_BITS,
                  f"Staged rate, bytes per cycle with {RATE_FRACTION_BITS} fraction bits"),
            Field("burst", BURST_BITS, "Staged burst, bytes"),
            Field("action", 1, "Staged action on exceed: 0 drop, 1 mark")),
            (Field("bucket_index", cls.bucket_bits_of(params),
                   "Bucket that bucket_write programs and the per-bucket registers show"),),
            "Write 1: program bucket bucket_index, refill it, clear its counters",
            selectors_first=True)

    @classmethod
    def class_table(cls, params):
        """The traffic classes, which software programs one at a time."""
        return StagedTable("class", (
            Field("kind", 2, "Staged class kind: 0 unused, 1 VLAN, 2 VNI, 3 L4 destination port"),
            Field("key", 24, "Staged class key (VLAN ID, VNI or port)"),
            Field("bucket", cls.bucket_bits_of(params), "Staged bucket of the class")),
            (Field("class_index", max(1, (params["classes"] - 1).bit_length()),
                   "Class slot that class_write programs"),),
            "Write 1: copy the staged class into its slot", selectors_first=True)

    @classmethod
    def task_registers(cls, params):
        bb = cls.bucket_bits_of(params)
        return [
            *cls.bucket_table(params).registers(),
            Register("bucket_busy", 1, R, doc="1 while a bucket write waits for its slot; "
                                              "write the next bucket once it reads 0"),
            *cls.class_table(params).registers(),
            Register("unmatched_bucket", bb, RW, doc="Bucket for packets no class matches"),
            Register("unmatched_meter", 1, RW,
                     doc="1: meter unmatched packets in unmatched_bucket; 0: pass them"),
            Register("conformed_packets", 64, R, doc="Bucket bucket_index: packets conformed"),
            Register("conformed_bytes", 64, R, doc="Bucket bucket_index: bytes conformed"),
            Register("exceeded_packets", 64, R, doc="Bucket bucket_index: packets exceeded"),
            Register("exceeded_bytes", 64, R, doc="Bucket bucket_index: bytes exceeded"),
            Register("tokens", TOKEN_BITS, R,
                     doc=f"Bucket bucket_index: tokens, bytes with {RATE_FRACTION_BITS} "
                         "fraction bits, as of last_ts"),
            Register("last_ts", 32, R, doc="Bucket bucket_index: time of its last update"),
        ]
