"""The tenant classifier described: its register block and its run-time table
(:class:`ClassifierConfig`), which the gateware (:mod:`supernic.hw.nic.classifier`), the model
and the control plane share."""

import collections
import enum
from dataclasses import dataclass, field, replace

from ..meta import TenantKind
from ..registers import R, RW, Register, RegisterBlock
from ..staged import Field, StagedTable
from .shape import NicShape

__all__ = ["ClassifierConfig", "ClassifierEntry", "KeyKind", "DefaultAction", "ClassifierBlock",
           "classifier_block", "entry_fields", "CLASSIFIER_TYPE", "CLASSIFIER_VERSION",
           "KEY_BITS", "MAX_ENTRIES", "check_shape", "check_entries", "is_int"]

CLASSIFIER_TYPE = 0x434C4153  # 'CLAS'
CLASSIFIER_VERSION = 0x0001_0000
KEY_BITS = 24
KEY_MASK_ALL = (1 << KEY_BITS) - 1
#: Slots are flip-flops compared in parallel; ``entry_index`` and ``hit_index`` are 8 bits.
MAX_ENTRIES = 64
INDEX_BITS = 8


class KeyKind(enum.IntEnum):
    """What a slot's key is matched against; VLAN and VNI equal :class:`TenantKind`'s."""
    ANY = 0
    VLAN = int(TenantKind.VLAN)
    VNI = int(TenantKind.VNI)


class DefaultAction(enum.IntEnum):
    DROP = 0
    TENANT = 1


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_entries(entries):
    if not is_int(entries) or not 1 <= entries <= MAX_ENTRIES:
        raise ValueError(f"Classifier entries must be an integer from 1 to {MAX_ENTRIES}, "
                         f"not {entries!r}")
    return entries


def check_shape(shape):
    if not isinstance(shape, NicShape):
        raise TypeError(f"Classifier shape must be a NicShape, not {shape!r}")
    return shape


def entry_table(shape: NicShape):
    """The classifier's slots, which software fills one at a time (sw/desc/staged.py)."""
    return StagedTable("entry", (
        Field("valid", 1, "Staged entry: 1 the slot is in use"),
        Field("kind", 2, "Staged entry: key kind, 0 any, 1 VLAN, 2 VNI"),
        Field("key", KEY_BITS, "Staged entry: VLAN ID or VXLAN VNI"),
        Field("key_mask", KEY_BITS, "Staged entry: key bits compared"),
        Field("ports", shape.ports, "Staged entry: ingress ports bitmask (all ones: any)"),
        Field("proto", 8, "Staged entry: IP protocol, 0 any"),
        Field("dport_lo", 16, "Staged entry: destination port range start"),
        Field("dport_hi", 16, "Staged entry: range end (inclusive)"),
        Field("tenant", shape.tenant_bits, "Staged entry: tenant of matching packets")),
        (Field("entry_index", INDEX_BITS, "Slot the staged entry is written to"),),
        "Write 1: copy the staged entry into its slot")


def entry_fields(shape: NicShape):
    """One slot as the hardware stores it (a layout description, :mod:`supernic.desc.meta`)."""
    return {f.name: f.width for f in entry_table(shape).fields}


class ClassifierBlock(RegisterBlock):
    """The classifier's register block; it remembers the shape and table size it was built
    for, so that :meth:`ClassifierConfig.register_writes` can check a configuration against
    them."""

    def __init__(self, name, shape, entries):
        self.shape = check_shape(shape)
        self.entries = check_entries(entries)
        t = shape.tenant_bits
        super().__init__(name, CLASSIFIER_TYPE, CLASSIFIER_VERSION, [
            Register("packets", 64, R, doc="Packets into the classifier"),
            Register("unmatched", 64, R, doc="Packets no entry matched (dropped or default)"),
            Register("dropped", 64, R, doc="Unmatched packets dropped by the default action"),
            Register("default_action", 1, RW,
                     doc="Unmatched packets: 0 drop, 1 send to default_tenant"),
            Register("default_tenant", t, RW, doc="Tenant of unmatched packets (action 1)"),
            *entry_table(shape).registers(),
            Register("hit_index", INDEX_BITS, RW, doc="Slot whose hit counter hit_count shows"),
            Register("hit_count", 64, R, doc="Packets slot hit_index classified"),
        ], doc="Tenant classifier: key, port, protocol and port-range table")


def classifier_block(name, shape: NicShape, entries: int = 16):
    return ClassifierBlock(name, shape, entries)


@dataclass(frozen=True)
class ClassifierEntry:
    """One table entry. ``ports``: ingress port numbers, or ``None`` for any; ``proto``: 0 for
    any; ``dport``: inclusive ``(lo, hi)``."""
    tenant: int
    key: int = 0
    key_mask: int = KEY_MASK_ALL
    kind: KeyKind = KeyKind.ANY
    ports: tuple | None = None
    proto: int = 0
    dport: tuple = (0, 0xFFFF)

    def __post_init__(self):
        if not is_int(self.tenant) or self.tenant < 0:
            raise ValueError(f"Classifier entry tenant must be a non-negative integer, "
                             f"not {self.tenant!r}")
        for name in ("key", "key_mask"):
            value = getattr(self, name)
            if not is_int(value) or not 0 <= value <= KEY_MASK_ALL:
                raise ValueError(f"Classifier entry {name} must be a {KEY_BITS}-bit integer "
                                 f"(0 to {KEY_MASK_ALL}), not {value!r}")
        if self.kind not in tuple(KeyKind):
            raise ValueError(f"Classifier entry kind must be a KeyKind (0 any, 1 VLAN, 2 VNI), "
                             f"not {self.kind!r}")
        object.__setattr__(self, "kind", KeyKind(self.kind))
        if self.ports is not None:
            if (not isinstance(self.ports, (tuple, list, frozenset, set)) or not self.ports
                    or not all(is_int(p) and p >= 0 for p in self.ports)):
                raise ValueError(f"Classifier entry ports must be None (any) or a non-empty "
                                 f"tuple of port numbers, not {self.ports!r}")
            object.__setattr__(self, "ports", tuple(sorted(set(self.ports))))
        if not is_int(self.proto) or not 0 <= self.proto <= 255:
            raise ValueError(f"Classifier entry proto must be 0 (any) or an IP protocol "
                             f"1-255, not {self.proto!r}")
        dport = self.dport
        if (not isinstance(dport, tuple) or len(dport) != 2 or not all(map(is_int, dport))
                or not 0 <= dport[0] <= dport[1] <= 0xFFFF):
            raise ValueError(f"Classifier entry dport must be a range (lo, hi) within "
                             f"0-65535 with lo <= hi, not {dport!r}")

    def matches(self, meta, port):
        """Does this entry match a packet with parser metadata ``meta`` on ``port``?"""
        kind = meta["tenant_kind"]
        if self.kind == KeyKind.ANY:
            if kind == TenantKind.NONE and self.key_mask != 0:
                return False
        elif kind != self.kind:
            return False
        flow = meta["flow"]
        return (((meta["tenant_key"] ^ self.key) & self.key_mask) == 0
                and (self.ports is None or port in self.ports)
                and (self.proto == 0 or self.proto == flow["proto"])
                and self.dport[0] <= flow["dport"] <= self.dport[1])

    def words(self, shape):
        """The entry as the staging registers take it."""
        all_ports = (1 << shape.ports) - 1
        return {
            "valid": 1, "kind": int(self.kind), "key": self.key, "key_mask": self.key_mask,
            "ports": all_ports if self.ports is None else sum(1 << p for p in self.ports),
            "proto": self.proto, "dport_lo": self.dport[0], "dport_hi": self.dport[1],
            "tenant": self.tenant,
        }


@dataclass
class ClassifierConfig:
    """The run-time table: the same object programs the hardware and the model."""
    entries: list = field(default_factory=list)
    default_action: DefaultAction = DefaultAction.DROP
    default_tenant: int = 0

    def __post_init__(self):
        self.entries = list(self.entries)
        for index, entry in enumerate(self.entries):
            if not isinstance(entry, ClassifierEntry):
                raise TypeError(f"Classifier entry {index} must be a ClassifierEntry, "
                                f"not {entry!r}")
        if self.default_action not in tuple(DefaultAction):
            raise ValueError(f"Classifier default action must be 0 (drop) or 1 (tenant), "
                             f"not {self.default_action!r}")
        self.default_action = DefaultAction(self.default_action)
        if not is_int(self.default_tenant) or self.default_tenant < 0:
            raise ValueError(f"Classifier default tenant must be a non-negative integer, "
                             f"not {self.default_tenant!r}")

    def check(self, shape: NicShape, entries: int):
        """Raise ValueError unless the configuration fits a classifier of ``shape`` with
        ``entries`` slots; return it."""
        check_shape(shape)
        if len(self.entries) > entries:
            raise ValueError(f"Classifier entries must number at most {entries} (the table "
                             f"size), not {len(self.entries)}")
        for index, entry in enumerate(self.entries):
            if entry.tenant >= shape.tenants:
                raise ValueError(f"Classifier entry {index} tenant must be below "
                                 f"{shape.tenants} (nic.tenants), not {entry.tenant!r}")
            if entry.ports is not None and max(entry.ports) >= shape.ports:
                raise ValueError(f"Classifier entry {index} ports must be below "
                                 f"{shape.ports} (nic.ports), not {entry.ports!r}")
        if self.default_tenant >= shape.tenants:
            raise ValueError(f"Classifier default tenant must be below {shape.tenants} "
                             f"(nic.tenants), not {self.default_tenant!r}")
        return self

    def register_writes(self, block):
        """``[(register name, value), ...]`` in write order: the defaults, then every slot
        (unused slots written invalid, so a table loads over an older one)."""
        if not isinstance(block, ClassifierBlock):
            raise TypeError(f"Classifier block must be the one classifier_block() returns, "
                            f"not {block!r}")
        self.check(block.shape, block.entries)
        writes = [("default_action", int(self.default_action)),
                  ("default_tenant", self.default_tenant)]
        table = entry_table(block.shape)
        empty = {f.name: 0 for f in table.fields}
        for index in range(block.entries):
            words = (self.entries[index].words(block.shape) if index < len(self.entries)
                     else empty)
            writes += table.row_writes(words, entry_index=index)
        return writes

    @classmethod
    def from_tenants(cls, tenants, default=None, shape=None, entries=None):
        """One exact-key entry (kind any: a VLAN ID or a VXLAN VNI) per key of each tenant.

        ``tenants``: ``[(tenant id, keys), ...]``, ``keys`` as in a chain specification's
        ``[tenant]`` table; ``default``: the tenant of unmatched packets, or ``None`` to drop
        them. With ``shape`` (and ``entries``) the result is checked against the hardware.
        """
        table, owner = [], {}
        for tenant, keys in tenants:
            if not is_int(tenant) or tenant < 0:
                raise ValueError(f"Tenant id must be a non-negative integer, not {tenant!r}")
            if isinstance(keys, (str, bytes)) or not hasattr(keys, "__iter__"):
                raise ValueError(f"Tenant {tenant} keys must be a list of VLAN IDs or VXLAN "
                                 f"VNIs, not {keys!r}")
            for key in keys:
                if not is_int(key) or not 0 <= key <= KEY_MASK_ALL:
                    raise ValueError(f"Tenant {tenant} key must be a VLAN ID or VXLAN VNI "
                                     f"(0 to {KEY_MASK_ALL}), not {key!r}")
                if key in owner:
                    # Two tenants claiming one key is a configuration mistake, not a priority.
                    raise ValueError(f"Tenant key {key} must belong to one tenant, not to "
                                     f"tenants {owner[key]} and {tenant}")
                owner[key] = tenant
                table.append(ClassifierEntry(tenant, key))
        if default is None:
            config = cls(table, DefaultAction.DROP, 0)
        else:
            config = cls(table, DefaultAction.TENANT, default)
        if shape is not None:
            config.check(shape, MAX_ENTRIES if entries is None else entries)
        return config

    @classmethod
    def random(cls, rng, shape: NicShape, entries: int, metas=()):
        """A random table of overlapping entries (masks, port sets, protocols, port ranges),
        cut from ``metas`` (parser metadata of the test traffic) so that many entries hit."""
        metas = list(metas)
        keyed = [m for m in metas if m["tenant_kind"] != TenantKind.NONE]
        seen = collections.Counter((m["tenant_kind"], m["tenant_key"]) for m in keyed)
        # Keys seen more than once belong to repeating flows: entries cut from them hit often.
        common = [m for m in keyed if seen[m["tenant_kind"], m["tenant_key"]] > 1] or keyed
        table = []
        for _ in range(rng.randint(max(1, entries // 2), entries)):
            tenant = rng.randrange(shape.tenants)
            ports = None
            if rng.random() < 0.3:
                ports = tuple(p for p in range(shape.ports) if rng.random() < 0.6) or (0,)
            if table and rng.random() < 0.25:
                # An overlap: a broader variant of an entry, placed before or after it.
                base = rng.choice(table)
                wide = (0, 0xFFFF) if base.key_mask else base.dport  # no match-all entries
                table.insert(rng.randrange(len(table) + 1), replace(
                    base, tenant=tenant, key_mask=base.key_mask & rng.choice([0xFFF, 0xF0F0F0]),
                    ports=ports, proto=rng.choice([0, base.proto]), dport=wide))
                continue
            r = rng.random()
            if r < 0.15 or not metas:
                # Catch-alls (mask 0) by port, protocol or destination port: these also take
                # packets without a tenant key.
                flow = rng.choice(metas)["flow"] if metas else {"proto": 17, "dport": 53}
                table.append(ClassifierEntry(
                    tenant, rng.getrandbits(KEY_BITS), 0, KeyKind.ANY, ports,
                    rng.choice([0, flow["proto"]]), _random_range(rng, flow["dport"])))
                continue
            meta = rng.choice(common if r < 0.85 else keyed) if keyed else rng.choice(metas)
            r = rng.random()
            if r < 0.5:
                mask = KEY_MASK_ALL
            elif r < 0.7:
                mask = 0xFFF
            elif r < 0.9:
                mask = rng.getrandbits(KEY_BITS)
            else:
                mask = 0
            key = meta["tenant_key"] ^ (rng.getrandbits(KEY_BITS) & ~mask & KEY_MASK_ALL)
            if rng.random() < 0.1:
                key ^= 1 << rng.randrange(KEY_BITS)  # a near miss
            kind = (KeyKind.ANY if meta["tenant_kind"] == TenantKind.NONE else
                    rng.choice([KeyKind.ANY, KeyKind(meta["tenant_kind"]),
                                KeyKind(meta["tenant_kind"]), rng.choice(list(KeyKind))]))
            flow = meta["flow"]
            proto = 0 if rng.random() < 0.7 else rng.choice([flow["proto"], 6, 17])
            dport = (0, 0xFFFF) if rng.random() < 0.6 else _random_range(rng, flow["dport"])
            table.append(ClassifierEntry(tenant, key, mask, kind, ports, proto, dport))
        action = rng.choice(list(DefaultAction))
        return cls(table, action, rng.randrange(shape.tenants))


def _random_range(rng, port):
    r = rng.random()
    if r < 0.3:
        return (port, port)
    spread = rng.choice([100, 2000, 30000])
    return (max(0, port - rng.randrange(spread)), min(0xFFFF, port + rng.randrange(spread)))
