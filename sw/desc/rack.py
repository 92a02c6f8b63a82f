"""A rack of SuperNICs, as ``rack.toml`` describes it: the NICs (each a design configuration),
the endpoints attached to each, the tenants the endpoints host, and the top-of-rack switch that
joins them (SuperNIC, arXiv 2109.07744, "Distributed SuperNIC").

    [rack]
    name = "three"
    clock_mhz = 250        # every NIC's clock: latencies in ns and rates in Gbit/s use it
    topology = "switch"    # the ToR switch places tenants and balances their flows

    [switch]
    latency_ns = 400       # port to port (a cut-through ToR switch)
    buffer_bytes = 65536   # per output port; a packet that does not fit is dropped and counted

    [[nic]]
    name = "nic0"
    design = "web.toml"    # a design configuration: a path relative to this file, or a name
    link_gbps = 16         #   in chains/; the NIC's link to the switch: rate and latency
    link_ns = 100

    [[endpoint]]
    name = "h0"
    nic = "nic0"           # the sNIC this endpoint is attached to (its home)
    link_gbps = 10
    link_ns = 100

    [[tenant]]
    name = "alice"
    chain = "metered"      # a chain specification: a path relative to this file, or a name
    endpoint = "h0"        #   in chains/; the endpoint that sends its packets and gets the
    nic = "nic0"           #   results; optional: the sNIC to deploy it on (default: placed)
    instances = 1

Times are converted to whole cycles of the rack clock once, here, so the simulation works in
cycles only. The lookahead of the lockstep simulation (the longest window in which no NIC can
see a packet another NIC sent in the same window) is the shortest NIC-to-switch-to-NIC path.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SnicError
from .names import check_identifier
from .toml_file import read_toml

__all__ = ["RackError", "RackConfig", "NicEntry", "Endpoint", "RackTenant", "load_rack",
           "parse_rack", "TOPOLOGIES"]

#: ``switch``: the ToR switch places chains and balances flows across the sNICs (SuperNIC
#: "switch-attached" pool). ``pool``: the sNICs' peer-to-peer control plane (the paper's
#: "intermediate pool"), which needs the NICs' redirect action.
TOPOLOGIES = ("switch", "pool")

_CHAINS = Path(__file__).resolve().parent.parent.parent / "chains"


class RackError(SnicError, ValueError):
    """A rack description that cannot be used (one line)."""


@dataclass(frozen=True)
class NicEntry:
    name: str
    design: Path            # the design configuration's file
    link_bytes_per_cycle: float
    link_cycles: int


@dataclass(frozen=True)
class Endpoint:
    name: str
    nic: str                # its home sNIC
    link_bytes_per_cycle: float
    link_cycles: int


@dataclass(frozen=True)
class RackTenant:
    name: str
    chain: Path             # the chain specification's file
    endpoint: str
    nic: str | None = None  # None: the rack places it
    instances: int = 1
    weight: int = 1


@dataclass(frozen=True)
class RackConfig:
    name: str
    clock_mhz: float
    topology: str
    switch_cycles: int
    buffer_bytes: int
    nics: tuple
    endpoints: tuple
    tenants: tuple = field(default=())
    source: Path | None = None

    def nic(self, name):
        for n in self.nics:
            if n.name == name:
                return n
        raise RackError(f"rack {self.name} has no NIC {name!r} (NICs: "
                        f"{', '.join(n.name for n in self.nics)})")

    def endpoint(self, name):
        for e in self.endpoints:
            if e.name == name:
                return e
        raise RackError(f"rack {self.name} has no endpoint {name!r}")

    def tenant(self, name):
        for t in self.tenants:
            if t.name == name:
                return t
        raise RackError(f"rack {self.name} has no tenant {name!r} (tenants: "
                        f"{', '.join(t.name for t in self.tenants) or 'none'})")

    @property
    def lookahead(self):
        """Cycles from a NIC's output to the earliest moment another NIC can receive it: the
        lockstep window (conservative synchronisation, as FireSim's token-based network)."""
        # The bound over any pair of NIC links: the shortest one twice.
        return max(1, 2 * min(n.link_cycles for n in self.nics) + self.switch_cycles)

    def cycles(self, ns):
        return ns_to_cycles(ns, self.clock_mhz)


def ns_to_cycles(ns, clock_mhz):
    return max(0, math.ceil(ns * clock_mhz / 1000 - 1e-9))


def _resolve(base, raw, suffix, what, fail):
    """A file named in the rack: relative to the rack file, or by name in chains/."""
    if not isinstance(raw, str) or not raw:
        fail(f"{what} must be a file name, not {raw!r}")
    for candidate in (base / raw, _CHAINS / raw, _CHAINS / f"{raw}{suffix}"):
        if candidate.is_file():
            return candidate.resolve()
    fail(f"{what} {raw!r} is neither a file beside the rack description nor one in chains/")


def _number(table, key, default, what, fail, low=0.0, integer=False):
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low \
            or (integer and not isinstance(value, int)):
        kind = "an integer" if integer else "a number"
        fail(f"{what}.{key} must be {kind} of at least {low:g}, not {value!r}")
    return value


def _table(raw, key, fail, many=False):
    value = raw.get(key, [] if many else {})
    if many:
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            fail(f"[[{key}]] must be an array of tables")
    elif not isinstance(value, dict):
        fail(f"[{key}] must be a table")
    return value


def _unknown(table, known, what, fail):
    extra = sorted(set(table) - set(known))
    if extra:
        fail(f"{what}: unknown key {extra[0]!r} (known: {', '.join(known)})")


def parse_rack(raw, source=None):
    """A :class:`RackConfig` from the TOML table ``raw`` (``source``: its file, for relative
    names and messages)."""
    where = str(source) if source else "<rack>"
    base = Path(source).resolve().parent if source else Path.cwd()

    def fail(message):
        raise RackError(f"{where}: {message}")

    if not isinstance(raw, dict):
        fail("a rack description is a TOML table")
    _unknown(raw, ("rack", "switch", "nic", "endpoint", "tenant"), "the rack description", fail)
    rack = _table(raw, "rack", fail)
    _unknown(rack, ("name", "clock_mhz", "topology"), "[rack]", fail)
    name = rack.get("name", Path(source).stem if source else "rack")
    try:
        check_identifier("rack.name", name)
    except ValueError as e:
        fail(str(e))
    clock = _number(rack, "clock_mhz", 250, "rack", fail, low=1)
    topology = rack.get("topology", "switch")
    if topology not in TOPOLOGIES:
        fail(f"rack.topology must be one of {', '.join(TOPOLOGIES)}, not {topology!r}")
    switch = _table(raw, "switch", fail)
    _unknown(switch, ("latency_ns", "buffer_bytes"), "[switch]", fail)
    switch_cycles = ns_to_cycles(_number(switch, "latency_ns", 400, "switch", fail), clock)
    buffer_bytes = _number(switch, "buffer_bytes", 65536, "switch", fail, low=64, integer=True)

    def rate(entry, what):
        gbps = _number(entry, "link_gbps", 10, what, fail, low=0.001)
        return gbps * 1e9 / 8 / (clock * 1e6)

    seen = set()

    def unique(entry, what):
        n = entry.get("name")
        try:
            check_identifier(f"every {what}'s name", n)
        except ValueError as e:
            fail(str(e))
        if n in seen:
            fail(f"the name {n!r} is used twice")
        seen.add(n)
        return n

    nics = []
    for entry in _table(raw, "nic", fail, many=True):
        _unknown(entry, ("name", "design", "link_gbps", "link_ns"), "[[nic]]", fail)
        n = unique(entry, "[[nic]]")
        nics.append(NicEntry(n, _resolve(base, entry.get("design"), ".toml",
                                         f"nic {n}: design", fail),
                             rate(entry, f"nic {n}"),
                             ns_to_cycles(_number(entry, "link_ns", 100, f"nic {n}", fail),
                                          clock)))
    if not nics:
        fail("a rack needs at least one [[nic]]")
    nic_names = {n.name for n in nics}
    endpoints = []
    for entry in _table(raw, "endpoint", fail, many=True):
        _unknown(entry, ("name", "nic", "link_gbps", "link_ns"), "[[endpoint]]", fail)
        n = unique(entry, "[[endpoint]]")
        home = entry.get("nic", nics[0].name)
        if home not in nic_names:
            fail(f"endpoint {n}: nic {home!r} is not one of the rack's NICs")
        endpoints.append(Endpoint(n, home, rate(entry, f"endpoint {n}"),
                                  ns_to_cycles(_number(entry, "link_ns", 100, f"endpoint {n}",
                                                       fail), clock)))
    endpoint_names = {e.name for e in endpoints}
    tenants = []
    for entry in _table(raw, "tenant", fail, many=True):
        _unknown(entry, ("name", "chain", "endpoint", "nic", "instances", "weight"),
                 "[[tenant]]", fail)
        n = unique(entry, "[[tenant]]")
        where_from = entry.get("endpoint")
        if where_from not in endpoint_names:
            fail(f"tenant {n}: endpoint {where_from!r} is not one of the rack's endpoints")
        nic = entry.get("nic")
        if nic is not None and nic not in nic_names:
            fail(f"tenant {n}: nic {nic!r} is not one of the rack's NICs")
        tenants.append(RackTenant(
            n, _resolve(base, entry.get("chain"), ".toml", f"tenant {n}: chain", fail),
            where_from, nic,
            _number(entry, "instances", 1, f"tenant {n}", fail, low=1, integer=True),
            _number(entry, "weight", 1, f"tenant {n}", fail, low=1, integer=True)))
    return RackConfig(name, float(clock), topology, switch_cycles, buffer_bytes, tuple(nics),
                      tuple(endpoints), tuple(tenants), Path(source) if source else None)


def load_rack(path):
    return parse_rack(read_toml(path, RackError, "rack description"), path)
