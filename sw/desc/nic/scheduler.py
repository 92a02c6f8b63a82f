"""The tenant scheduler described: its register block, the policies' run-time codes and its
run-time configuration (:class:`SchedulerConfig`), which the gateware
(:mod:`supernic.hw.nic.scheduler`), the model and the control plane share."""

from dataclasses import dataclass

from ..config import ConfigError
from ..registers import R, RW, W1P, Register, RegisterBlock
from .shape import NicShape

__all__ = ["SchedulerConfig", "scheduler_block", "scheduler_registers", "SCHEDULER_TYPE",
           "SCHEDULER_VERSION", "POLICY_CODES", "POLICIES", "TAG_BITS", "bytes_bits",
           "DEFAULT_QUANTUM", "COST_ONE", "index_bits", "is_pow2", "deficit_bits"]

#: Run-time codes of the ``policy`` register, fixed whatever subset a build compiles in.
POLICY_CODES = {"drf": 0, "rr": 1, "drr": 2, "fifo": 3}
POLICIES = tuple(POLICY_CODES)

#: DRF start tags: units of 1/(256 * regions) beat; 48 bits wrap after about 2**38 beats.
TAG_BITS = 48

SCHEDULER_TYPE = 0x53434844  # 'SCHD'
SCHEDULER_VERSION = 0x0001_0002     # 1.1: tenant_hold; 1.2: bucket_select, bucket_beats
LOAD_BITS = 32              # per-bucket dispatched beats, wrapping: read differences
STAMP_BITS = 32
COST_ONE = 0x100            # 1.0 in the 8.8 fixed point of weights and costs
DEFAULT_QUANTUM = 2048      # bytes: above one MTU frame, so a round moves every tenant
QUANTUM_BITS = 16
IN_FLIGHT_BITS = 16


def is_pow2(x):
    return isinstance(x, int) and not isinstance(x, bool) and x > 0 and x & (x - 1) == 0


def index_bits(n):
    return max(1, (n - 1).bit_length())


def bytes_bits(shape: NicShape, queue_beats):
    """Bits of a queued packet's length in bytes."""
    return (queue_beats * shape.beat_bytes).bit_length()


def deficit_bits(shape, queue_beats):
    return max(bytes_bits(shape, queue_beats), QUANTUM_BITS) + 2


def scheduler_registers(shape: NicShape, table_size=16):
    T, Rg = shape.tenants, shape.regions
    regs = [
        Register("policy", 2, RW, reset=POLICY_CODES["drf"],
                 doc="0 drf, 1 rr, 2 drr, 3 fifo (a policy not built in selects the first one)"),
        Register("tenant_enable", T, RW, reset=2 ** T - 1,
                 doc="Bit t: tenant t's packets are queued (0: dropped and counted)"),
    ]
    for t in range(T):
        regs += [
            Register(f"t{t}_inv_weight", 16, RW, reset=COST_ONE,
                     doc=f"Tenant {t}: 1/weight in 8.8 fixed point (drf)"),
            Register(f"t{t}_quantum", QUANTUM_BITS, RW, reset=DEFAULT_QUANTUM,
                     doc=f"Tenant {t}: bytes added to its deficit a round (drr): weight x quantum"),
        ]
    for r in range(Rg):
        regs.append(Register(f"r{r}_cost", 16, RW, reset=COST_ONE,
                             doc=f"Region {r}: cycles a beat occupies it, 8.8 fixed point (drf)"))
    regs += [
        Register("table_tenant", shape.tenant_bits, RW, doc="Staged table write: tenant"),
        Register("table_index", index_bits(table_size), RW, doc="Staged table write: entry"),
        Register("table_region", shape.region_bits, RW, doc="Staged table write: region"),
        Register("table_write", 1, W1P, doc="Write 1: write the staged entry to the shadow table"),
        Register("table_commit", T, W1P,
                 doc="Bit t: swap tenant t's shadow table in once nothing of it is in flight"),
        Register("commit_pending", T, R, doc="Bit t: tenant t's table commit is waiting"),
        Register("virtual_time", TAG_BITS, R, doc="Start tag of the last dispatched packet (drf)"),
        Register("bad_tenant_drops", 64, R,
                 doc="Packets dropped for a tenant number the build does not have"),
    ]
    for t in range(T):
        regs += [
            Register(f"t{t}_enqueued", 64, R, doc=f"Tenant {t}: packets queued whole"),
            Register(f"t{t}_queue_drops", 64, R,
                     doc=f"Tenant {t}: packets dropped, queue or descriptors full"),
            Register(f"t{t}_disabled_drops", 64, R,
                     doc=f"Tenant {t}: packets dropped while the tenant was disabled"),
            Register(f"t{t}_dispatched", 64, R, doc=f"Tenant {t}: packets dispatched"),
            Register(f"t{t}_dispatched_beats", 64, R, doc=f"Tenant {t}: beats dispatched"),
            Register(f"t{t}_backlog_beats", 32, R, doc=f"Tenant {t}: beats queued now"),
            Register(f"t{t}_in_flight", IN_FLIGHT_BITS, R,
                     doc=f"Tenant {t}: packets dispatched and not yet reported done"),
            Register(f"t{t}_tag", TAG_BITS, R, doc=f"Tenant {t}: DRF start tag"),
            Register(f"t{t}_deficit", 32, R, doc=f"Tenant {t}: DRR deficit in bytes "
                                                 f"(two's complement)"),
        ]
    # Last, so the registers of version 1.0 keep their addresses.
    regs.append(Register("tenant_hold", T, RW, reset=0,
                         doc="Bit t: tenant t's packets are queued but not dispatched (a "
                             "region's context switch)"))
    regs += [
        Register("bucket_select", index_bits(T * table_size), RW,
                 doc="Flow-table entry bucket_beats reads: tenant x table_size + index"),
        Register("bucket_beats", LOAD_BITS, R,
                 doc="Beats dispatched through the selected entry (wraps)"),
    ]
    return regs


def scheduler_block(name, shape: NicShape, table_size=16):
    return RegisterBlock(name, SCHEDULER_TYPE, SCHEDULER_VERSION,
                         scheduler_registers(shape, table_size),
                         doc="Tenant queues and the fair scheduler")


def _fixed(value, what):
    """8.8 fixed point of a positive real, clamped to 16 bits."""
    code = round(value * COST_ONE)
    if not 1 <= code <= 0xFFFF:
        raise ConfigError(f"{what} must be a number whose 8.8 fixed point fits 16 bits "
                          f"(about 0.004 to 255.99), not {value!r}")
    return code


@dataclass
class SchedulerConfig:
    """Run-time configuration of :class:`TenantScheduler`, shared with the model.

    ``weights`` (per tenant) give DRF inverse weights and DRR quanta (``weight * quantum``
    bytes); ``region_costs`` are cycles a beat occupies a region; ``tables`` are per-tenant
    lists of ``table_size`` regions (``None``: keep the reset table, region ``t mod R``);
    ``enables`` per tenant.
    """
    tenants: int = 4
    regions: int = 4
    table_size: int = 16
    policy: str = "drf"
    weights: tuple = ()
    quantum: int = DEFAULT_QUANTUM
    region_costs: tuple = ()
    tables: tuple | None = None
    enables: tuple = ()

    def __post_init__(self):
        if self.policy not in POLICY_CODES:
            raise ConfigError(f"scheduler policy must be one of {list(POLICY_CODES)}, "
                              f"not {self.policy!r}")
        self.weights = tuple(self.weights) or (1.0,) * self.tenants
        self.region_costs = tuple(self.region_costs) or (1.0,) * self.regions
        self.enables = tuple(self.enables) or (True,) * self.tenants
        for name, values, n in (("weights", self.weights, self.tenants),
                                ("region_costs", self.region_costs, self.regions),
                                ("enables", self.enables, self.tenants)):
            if len(values) != n:
                raise ConfigError(f"scheduler {name} must have {n} entries, not {len(values)}")
        for t, w in enumerate(self.weights):
            _fixed(1 / w if isinstance(w, (int, float)) and w > 0 else 0, f"weights[{t}]")
            q = round(w * self.quantum)
            if not 1 <= q < 2 ** QUANTUM_BITS:
                raise ConfigError(f"scheduler weights[{t}] x quantum must be 1 to "
                                  f"{2 ** QUANTUM_BITS - 1} bytes, not {q!r}")
        for r, c in enumerate(self.region_costs):
            _fixed(c, f"region_costs[{r}]")
        if self.tables is not None:
            self.tables = tuple(tuple(row) for row in self.tables)
            if len(self.tables) != self.tenants or any(
                    len(row) != self.table_size or any(
                        not isinstance(x, int) or not 0 <= x < self.regions for x in row)
                    for row in self.tables):
                raise ConfigError(f"scheduler tables must be {self.tenants} lists of "
                                  f"{self.table_size} region numbers below {self.regions}")

    @classmethod
    def for_deployment(cls, shape: NicShape, table_size, regions, policy="drf", weights=None,
                       region_costs=None):
        """The configuration for tenants running in ``regions`` (tenant -> list of regions):
        each tenant's table spreads its flow-hash buckets over its regions in turn; tenants
        not listed are disabled. ``weights`` (tenant -> weight) and ``region_costs`` (region ->
        cycles a beat) default to 1."""
        weights = weights or {}
        region_costs = region_costs or {}
        tables = []
        for t in range(shape.tenants):
            mine = list(regions.get(t, ())) or [t % shape.regions]
            tables.append([mine[i % len(mine)] for i in range(table_size)])
        return cls(shape.tenants, shape.regions, table_size, policy,
                   tuple(weights.get(t, 1) for t in range(shape.tenants)),
                   region_costs=tuple(region_costs.get(r, 1.0) for r in range(shape.regions)),
                   tables=tuple(tables),
                   enables=tuple(t in regions for t in range(shape.tenants)))

    def inv_weight(self, t):
        return _fixed(1 / self.weights[t], f"weights[{t}]")

    def tenant_quantum(self, t):
        return round(self.weights[t] * self.quantum)

    def cost(self, r):
        return _fixed(self.region_costs[r], f"region_costs[{r}]")

    def table(self, t):
        if self.tables is None:
            return [t % self.regions] * self.table_size
        return list(self.tables[t])

    def register_writes(self, block):
        """``[(register, value), ...]`` in write order: weights, costs, tables (committed), the
        policy, enables last (so no packet is queued under a half-written configuration)."""
        writes = []
        for t in range(self.tenants):
            writes += [(f"t{t}_inv_weight", self.inv_weight(t)),
                       (f"t{t}_quantum", self.tenant_quantum(t))]
        for r in range(self.regions):
            writes.append((f"r{r}_cost", self.cost(r)))
        if self.tables is not None:
            for t in range(self.tenants):
                for i, region in enumerate(self.tables[t]):
                    writes += [("table_tenant", t), ("table_index", i),
                               ("table_region", region), ("table_write", 1)]
            writes.append(("table_commit", 2 ** self.tenants - 1))
        writes += [("policy", POLICY_CODES[self.policy]),
                   ("tenant_enable", sum(int(bool(e)) << t for t, e in enumerate(self.enables)))]
        names = {reg.name for reg in block.registers}
        for name, _ in writes:
            if name not in names:
                raise ConfigError(f"scheduler register {name!r} is not in block {block.name!r} "
                                  f"(configuration built for another shape)")
        return writes
