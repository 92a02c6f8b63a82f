"""L4 load balancer: packets to a virtual IP go to a backend chosen by Maglev hashing.

What it does. A packet whose flow (the innermost 5-tuple of the metadata) is IPv4 TCP or UDP
to the configured virtual IP (VIP), and optionally to its port and protocol, is sent to a
backend: the destination address becomes the backend's, and the destination port too when the
backend has one (port 0 keeps the packet's port). The IPv4 header checksum and the TCP or UDP
checksum are updated incrementally (RFC 1624 eqn. 3; a UDP checksum of 0 stays 0, RFC 768), and
``meta.flow.dst_ip``/``dport`` follow (contract rule 4; ``flow_hash`` keeps its ingress value).
Every other packet passes unchanged and counts in ``skipped``; so do IPv4 fragments (the parser
does not reach their L4 header) and IPv6 (a v4 VIP only). The NT never drops.

Choosing the backend (Eisenbud et al., Maglev, NSDI 2016, §3.4). The control plane builds a
lookup table of ``M`` entries (``M`` prime, build parameter ``table_size``), each a backend
number, with :func:`supernic.desc.maglev.build_table`, and loads it over the registers. The
hardware reads entry ``flow_hash mod M`` and then the backend's address and port from a second
table, so a flow keeps its backend as long as the table is unchanged, and a backend change
moves only about ``1/N`` of the flows. ``M`` stays prime as the paper requires (that is what
makes each backend's preference list a full permutation).

Tunnels. The LB acts on the flow the metadata names: the innermost parsed IP header, i.e. the
tenant's packet inside VXLAN, since the VIP is a tenant service address and ``flow_hash`` is the
inner flow's. A VXLAN packet's outer UDP checksum, when not 0, covers the inner frame and must be
updated too. The inner IPv4 header sums to the same value before and after (its checksum update
cancels the address change), so the outer checksum moves by the inner L4 segment's change: for
TCP, or UDP with a checksum, the L4 checksum absorbed the address change of the pseudo-header,
so the segment changes by ``old address - new address``; for UDP without a checksum only the
port changes.

Registers. ``control`` (bit 0 enable, bit 1 match the VIP port, bit 2 match the VIP protocol),
``vip``, ``vip_port``, ``vip_proto``; backends are written through ``backend_index``,
``backend_addr`` (address << 16 | port) and ``backend_write``, and lookup table entries through
``table_entry`` (slot << 8 | backend) and ``table_write``. ``backend_read``/``table_read`` load
``backend_data``/``table_data`` from the entry the same index registers name. Table writes
take effect at once, also under traffic: a packet in flight keeps the backend it read.

The gateware is :mod:`supernic.hw.nt.load_balancer`.
"""

import ipaddress
from dataclasses import dataclass, field

from ..maglev import build_table, is_prime
from ..registers import R, RW, W1P, Register
from .base import ConfigError, Param, Scope, TaskConfig, TaskDescription

__all__ = ["L4LoadBalancerDescription", "LoadBalancerConfig", "Backend", "CONTROL_ENABLE",
           "CONTROL_MATCH_PORT", "CONTROL_MATCH_PROTO", "TABLE_SLOT_SHIFT"]

CONTROL_ENABLE = 1 << 0
CONTROL_MATCH_PORT = 1 << 1
CONTROL_MATCH_PROTO = 1 << 2
#: ``table_entry`` is ``slot << TABLE_SLOT_SHIFT | backend``.
TABLE_SLOT_SHIFT = 8

_PROTOS = {"tcp": 6, "udp": 17}


# --- configuration ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Backend:
    """A backend: IPv4 address (int), port (0 keeps the packet's port) and Maglev name."""
    ip: int
    port: int = 0
    name: str = ""

    @property
    def key(self):
        """The name Maglev hashes: the given name, else ``address:port``."""
        return self.name or f"{ipaddress.IPv4Address(self.ip)}:{self.port}"


def _ipv4(kind, where, value):
    try:
        if isinstance(value, str):
            return int(ipaddress.IPv4Address(value))
    except ValueError:
        pass
    raise ConfigError(f"nt {kind}: {where} must be an IPv4 address such as '10.0.0.1', "
                      f"not {value!r}")


def _port(kind, where, value, extra=""):
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 0xFFFF:
        return value
    raise ConfigError(f"nt {kind}: {where} must be a port 1-65535{extra}, not {value!r}")


@dataclass
class LoadBalancerConfig(TaskConfig):
    vip: int = 0
    port: int | None = None
    proto: int | None = None
    backends: tuple = ()
    enabled: bool = True
    _tables: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, kind, params, raw):
        if not isinstance(raw, dict):
            raise ConfigError(f"nt {kind}: config must be a table, not {raw!r}")
        known = ("backends", "enabled", "port", "proto", "vip")
        unknown = set(raw) - set(known)
        if unknown:
            raise ConfigError(f"nt {kind}: unknown config key {sorted(unknown)[0]!r} "
                              f"(known: {', '.join(known)})")
        vip = _ipv4(kind, "vip", raw.get("vip"))
        port = raw.get("port", "any")
        port = None if port == "any" else _port(kind, "port", port, " or 'any'")
        proto = raw.get("proto", "any")
        if proto == "any":
            proto = None
        elif proto in _PROTOS:
            proto = _PROTOS[proto]
        elif not (isinstance(proto, int) and not isinstance(proto, bool)
                  and proto in _PROTOS.values()):
            raise ConfigError(f"nt {kind}: proto must be 'any', 'tcp', 'udp', 6 or 17, "
                              f"not {proto!r}")
        enabled = raw.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"nt {kind}: enabled must be true or false, not {enabled!r}")
        raw_backends = raw.get("backends")
        if not isinstance(raw_backends, list) or not raw_backends:
            raise ConfigError(f"nt {kind}: backends must be a non-empty list of tables, "
                              f"not {raw_backends!r}")
        if len(raw_backends) > params["backends"]:
            raise ConfigError(f"nt {kind}: backends must number at most {params['backends']} "
                              f"(build parameter backends), not {len(raw_backends)}")
        backends, names = [], set()
        for i, b in enumerate(raw_backends):
            where = f"backends[{i}]"
            if not isinstance(b, dict):
                raise ConfigError(f"nt {kind}: {where} must be a table, not {b!r}")
            unknown = set(b) - {"ip", "port", "name"}
            if unknown:
                raise ConfigError(f"nt {kind}: {where} has unknown key {sorted(unknown)[0]!r} "
                                  f"(known: ip, name, port)")
            ip = _ipv4(kind, f"{where}.ip", b.get("ip"))
            bport = 0
            if "port" in b:
                bport = _port(kind, f"{where}.port", b["port"],
                              " (omit it to keep the destination port)")
            name = b.get("name", "")
            if not isinstance(name, str) or ("name" in b and not name):
                raise ConfigError(f"nt {kind}: {where}.name must be a non-empty string, "
                                  f"not {name!r}")
            backend = Backend(ip, bport, name)
            if backend.key in names:
                raise ConfigError(f"nt {kind}: {where} name must be unique, not "
                                  f"{backend.key!r}")
            names.add(backend.key)
            backends.append(backend)
        return cls(vip, port, proto, tuple(backends), enabled)

    @property
    def control(self):
        return ((CONTROL_ENABLE if self.enabled else 0)
                | (CONTROL_MATCH_PORT if self.port is not None else 0)
                | (CONTROL_MATCH_PROTO if self.proto is not None else 0))

    def table(self, params):
        """The Maglev lookup table for this backend set (``table_size`` entries)."""
        size = params["table_size"]
        if size not in self._tables:
            self._tables[size] = build_table([b.key for b in self.backends], size)
        return self._tables[size]

    def register_writes(self, params):
        # Disabled while the tables load, so no packet sees a half-written table; enabled last.
        writes = [("control", 0), ("vip", self.vip), ("vip_port", self.port or 0),
                  ("vip_proto", self.proto or 0)]
        for index, b in enumerate(self.backends):
            writes += [("backend_index", index), ("backend_addr", b.ip << 16 | b.port),
                       ("backend_write", 1)]
        for slot, backend in enumerate(self.table(params)):
            writes += [("table_entry", slot << TABLE_SLOT_SHIFT | backend), ("table_write", 1)]
        writes.append(("control", self.control))
        return writes

    @classmethod
    def random(cls, rng, params):
        backends = []
        for _ in range(rng.randint(1, params["backends"])):
            port = 0 if rng.random() < 0.3 else rng.randint(1, 0xFFFF)
            backends.append(Backend(rng.getrandbits(32), port))
        # Addresses are random, so a duplicate key is all but impossible; drop it if it comes.
        unique = {b.key: b for b in backends}
        return cls(vip=rng.getrandbits(32),
                   port=rng.randint(1, 0xFFFF) if rng.random() < 0.5 else None,
                   proto=rng.choice([None, None, 6, 17]),
                   backends=tuple(unique.values()))


# --- description ------------------------------------------------------------------------------

class L4LoadBalancerDescription(TaskDescription):
    kind = "l4lb"
    doc = "L4 load balancer: Maglev consistent hashing of a virtual IP's flows onto backends."
    scope = Scope.HEADER
    modifies = True
    drops = False
    type_id = 0x4C34_4C42  # 'L4LB'
    params = (
        Param("backends", 16, low=1, high=256, doc="Backend slots"),
        Param("table_size", 1021, low=3, high=131071,
              doc="Maglev lookup table entries M (a prime, Maglev §3.4)"),
    )
    config = LoadBalancerConfig
    model = "load_balancer:LoadBalancerModel"

    @classmethod
    def shared_state(cls, params):
        # Never drops; its lookup table and backends are configuration (full maps only).
        return {**super().shared_state(params), "table": "table", "backends": "backends"}

    @classmethod
    def check_params(cls, raw):
        params = super().check_params(raw)
        if not is_prime(params["table_size"]):
            raise ConfigError(f"nt {cls.kind}: parameter table_size must be a prime, "
                              f"not {params['table_size']!r}")
        return params

    @classmethod
    def task_registers(cls, params):
        slot_bits = (params["table_size"] - 1).bit_length()
        return [
            Register("control", 3, RW, doc="Bit 0 enable, bit 1 match vip_port, "
                                           "bit 2 match vip_proto"),
            Register("vip", 32, RW, doc="Virtual IPv4 address"),
            Register("vip_port", 16, RW, doc="VIP destination port (if control bit 1)"),
            Register("vip_proto", 8, RW, doc="VIP IP protocol, 6 or 17 (if control bit 2)"),
            Register("backend_index", 8, RW, doc="Backend slot backend_write/_read address"),
            Register("backend_addr", 48, RW, doc="Backend IPv4 address << 16 | port "
                                                 "(port 0: keep the packet's port)"),
            Register("backend_write", 1, W1P, doc="Write 1: backend_addr -> slot"),
            Register("backend_read", 1, W1P, doc="Write 1: slot -> backend_data"),
            Register("backend_data", 48, R, doc="Backend slot read by backend_read"),
            Register("table_entry", TABLE_SLOT_SHIFT + slot_bits, RW,
                     doc="Lookup table slot << 8 | backend number"),
            Register("table_write", 1, W1P, doc="Write 1: table_entry's backend -> its slot"),
            Register("table_read", 1, W1P, doc="Write 1: table_entry's slot -> table_data"),
            Register("table_data", 8, R, doc="Backend number in the slot read by table_read"),
        ]
