"""Static NAT for IPv4: source (SNAT) and destination (DNAT) translation tables.

What it translates. The innermost IP header the parser found, the one ``meta.flow`` describes:
for a VXLAN packet the tenant's inner header (RFC 7348), so a NAT in front of a virtual network
translates tenant flows and the underlay addresses stay as they are. Only IPv4 is translated;
IPv6 packets, non-IP packets and VXLAN packets whose inner frame is not IPv4 pass unchanged and
count as skipped, as do packets with parse errors or already dropped (contract rule 3).

Tables. Each table holds ``snat_entries`` / ``dnat_entries`` slots (build parameters). A slot
matches on an IPv4 address (the source for SNAT, the destination for DNAT) and optionally on
the IP protocol and on the L4 port on the same side; it rewrites the address and optionally the
port. The lowest matching slot of each table wins; SNAT and DNAT both look up the packet as it
arrived, and both may apply to one packet. A packet sees a slot either before or after a write,
never half of one.

Ports (NAPT, RFC 3022 section 2.2) need a TCP or UDP header the parser parsed: a slot that
matches on a port or rewrites one applies only to such packets. Address-only slots (Basic NAT,
RFC 3022 section 2.1) apply to every IPv4 packet, other protocols and fragments included.

Checksums. Every rewrite updates the checksums that cover it incrementally, by RFC 1624 eqn. 3
(``HC' = ~(~HC + ~m + m')``), so a checksum that was wrong stays exactly as wrong (a NAT must
not hide corruption, RFC 1624 section 2):

* the IPv4 header checksum, for the address words;
* the TCP or UDP checksum, for the address words (pseudo-header, RFC 768 and RFC 9293 section
  3.1) and the port words. A UDP checksum of 0 means "none" and stays 0; an update that gives
  0 is sent as 0xFFFF (RFC 768);
* for VXLAN, the outer UDP checksum when it is not 0, since the inner header is its payload:
  updated for every inner word that changed (addresses, ports, both inner checksums).

RFC 1624's 0x0000/0xFFFF point (section 3): eqn. 3 is a ones'-complement sum, which is the
all-zero word only when every term is zero. The update always folds in both address pairs (and
for L4 both port pairs), and the pair of an unchanged word, ``~m`` and ``m``, is never all zero;
so the sum is zero only if ``~HC`` is (HC = 0xFFFF) and every word goes from 0xFFFF to 0, i.e.
both addresses from 255.255.255.255 to 0.0.0.0. In every other case the sum is the non-zero
representative of the true sum, and from a correct checksum the result is bit for bit what a
full recomputation gives (scapy's), even for a header that arrived carrying 0xFFFF, the other
zero. In
the degenerate case the result is 0xFFFF where a recomputation gives 0x0000; both verify.

Fragments (the parser flags them and parses no L4 header). Addresses are translated and the
IPv4 header checksum updated in every fragment. A first fragment (offset 0) of TCP or UDP still
carries the L4 checksum, which covers the whole datagram and the pseudo-header: it is updated
when its field lies inside the fragment (IP total length) and the frame, so the reassembled
datagram verifies. A tiny first fragment that splits the L4 header (RFC 1858) keeps its
checksum. Ports are never translated in fragments (no later fragment carries them: RFC 3022
section 6.3), so NAPT slots skip fragments. A TCP or UDP packet that is not a fragment and
whose L4 header the parser did not reach (past its window) is skipped: its checksum could not be
kept right.

``meta.flow`` leaves with the translated addresses and ports (contract rule 4); ``flow_hash``
and ``ts`` keep their ingress values.

Programming a slot: write ``entry_*`` (the staged slot), ``entry_table`` (0 SNAT, 1 DNAT) and
``entry_index``, then write 1 to ``entry_write``; the whole slot is copied in one cycle and its
hit counter cleared. An index past the table is ignored. ``sel_match``, ``sel_rewrite`` and
``sel_hits`` read back the slot ``entry_table``/``entry_index`` (packed as their docs say).

The gateware is :mod:`supernic.hw.nt.nat`.
"""

import ipaddress
from dataclasses import dataclass, field

from ..registers import R, Register
from ..staged import Field, StagedTable
from .base import ConfigError, Param, Scope, TaskConfig, TaskDescription, csr_item

__all__ = ["NatTranslatorDescription", "NatConfig", "NatEntry", "NAT_TABLES", "ENTRY_FLAGS",
           "PROTO_TCP", "PROTO_UDP"]

NAT_TABLES = ("snat", "dnat")
#: The slots software fills one at a time (sw/desc/staged.py), either table's by entry_table.
SLOTS = StagedTable("entry", (
    Field("addr", 32, "Staged slot: IPv4 address to match"),
    Field("port", 16, "Staged slot: L4 port to match"),
    Field("proto", 8, "Staged slot: IP protocol to match"),
    Field("new_addr", 32, "Staged slot: IPv4 address written"),
    Field("new_port", 16, "Staged slot: L4 port written"),
    Field("flags", 4, "Staged slot: bit 0 valid, 1 match protocol, 2 match port, "
                      "3 rewrite port")),
    (Field("entry_table", 1, "Table of the slot written or read: 0 SNAT, 1 DNAT"),
     Field("entry_index", 6, "Slot written by entry_write and read by sel_*")),
    "Write 1: copy the staged slot into the table", selectors_first=True)
#: Bits of ``entry_flags`` (and of ``sel_match`` bits 59:56).
ENTRY_FLAGS = {"valid": 0, "match_proto": 1, "match_port": 2, "rewrite_port": 3}

PROTO_TCP, PROTO_UDP = 6, 17
_PROTOS = {"tcp": PROTO_TCP, "udp": PROTO_UDP, "icmp": 1, "gre": 47}


@dataclass(frozen=True)
class NatEntry:
    """One slot: match ``addr`` (and ``proto``/``port`` unless None), rewrite to ``to`` (and
    the port to ``to_port`` unless None). Addresses are ints."""
    addr: int
    to: int
    proto: int | None = None
    port: int | None = None
    to_port: int | None = None

    @property
    def napt(self):
        """Needs a parsed TCP/UDP header: it matches or rewrites a port."""
        return self.port is not None or self.to_port is not None

    def matches(self, addr, proto, port, has_l4):
        return (addr == self.addr and (self.proto is None or proto == self.proto)
                and (not self.napt or has_l4) and (self.port is None or port == self.port))

    def flags(self):
        return (1 << ENTRY_FLAGS["valid"] | (self.proto is not None) << ENTRY_FLAGS["match_proto"]
                | (self.port is not None) << ENTRY_FLAGS["match_port"]
                | (self.to_port is not None) << ENTRY_FLAGS["rewrite_port"])

    def match_word(self):
        """``sel_match`` read-back: address, port << 32, protocol << 48, flags << 56."""
        return (self.addr | (self.port or 0) << 32 | (self.proto or 0) << 48
                | self.flags() << 56)

    def rewrite_word(self):
        """``sel_rewrite`` read-back: new address, new port << 32."""
        return self.to | (self.to_port or 0) << 32


def _ipv4(kind, where, value):
    try:
        if not isinstance(value, str):
            raise ValueError
        return int(ipaddress.IPv4Address(value))
    except ValueError:
        raise ConfigError(f"nt {kind}: {where} must be an IPv4 address such as '10.0.0.1', "
                          f"not {value!r}") from None


def _port(kind, where, value, any_ok):
    if any_ok and value == "any":
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFF:
        return value
    what = "'any' or a port 0-65535" if any_ok else "a port 0-65535"
    raise ConfigError(f"nt {kind}: {where} must be {what}, not {value!r}")


def _proto(kind, where, value):
    if value == "any":
        return None
    if isinstance(value, str) and value in _PROTOS:
        return _PROTOS[value]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 255:
        return value
    raise ConfigError(f"nt {kind}: {where} must be 'any', one of {sorted(_PROTOS)} or 0-255, "
                      f"not {value!r}")


_ENTRY_KEYS = ("addr", "port", "proto", "to", "to_port")


@dataclass
class NatConfig(TaskConfig):
    """``snat`` and ``dnat``: lists of :class:`NatEntry`, slot 0 first (highest priority)."""
    snat: list = field(default_factory=list)
    dnat: list = field(default_factory=list)

    @classmethod
    def from_dict(cls, kind, params, raw):
        if not isinstance(raw, dict):
            raise ConfigError(f"nt {kind}: config must be a table, not {raw!r}")
        unknown = set(raw) - set(NAT_TABLES)
        if unknown:
            raise ConfigError(f"nt {kind}: unknown config key {sorted(unknown)[0]!r} "
                              f"(known: dnat, snat)")
        tables = {}
        for table in NAT_TABLES:
            entries = raw.get(table, [])
            if not isinstance(entries, list):
                raise ConfigError(f"nt {kind}: {table} must be a list of tables, "
                                  f"not {entries!r}")
            size = params[f"{table}_entries"]
            if len(entries) > size:
                raise ConfigError(f"nt {kind}: {table} must have at most {size} entries "
                                  f"(build parameter {table}_entries), not {len(entries)}")
            out = []
            for i, e in enumerate(entries):
                where = f"{table}[{i}]"
                if not isinstance(e, dict):
                    raise ConfigError(f"nt {kind}: {where} must be a table, not {e!r}")
                unknown = set(e) - set(_ENTRY_KEYS)
                if unknown:
                    raise ConfigError(f"nt {kind}: {where} has unknown key "
                                      f"{sorted(unknown)[0]!r} (known: {', '.join(_ENTRY_KEYS)})")
                for key in ("addr", "to"):
                    if key not in e:
                        raise ConfigError(f"nt {kind}: {where}.{key} must be given")
                to_port = e.get("to_port")
                out.append(NatEntry(
                    _ipv4(kind, f"{where}.addr", e["addr"]), _ipv4(kind, f"{where}.to", e["to"]),
                    _proto(kind, f"{where}.proto", e.get("proto", "any")),
                    _port(kind, f"{where}.port", e.get("port", "any"), True),
                    None if to_port is None else _port(kind, f"{where}.to_port", to_port, False)))
            tables[table] = out
        return cls(**tables)

    def register_writes(self, params):
        writes = []
        for t, table in enumerate(NAT_TABLES):
            entries = getattr(self, table)
            for index in range(params[f"{table}_entries"]):
                if index < len(entries):
                    e = entries[index]
                    row = {"addr": e.addr, "port": e.port or 0, "proto": e.proto or 0,
                           "new_addr": e.to, "new_port": e.to_port or 0, "flags": e.flags()}
                else:
                    row = {"flags": 0}      # an unused slot is invalid
                writes += SLOTS.row_writes(row, entry_table=t, entry_index=index)
        return writes

    @classmethod
    def random(cls, rng, params, flows=()):
        """Slots cut from ``flows`` (IPv4 5-tuple dicts of the traffic) so that they match:
        address-only, protocol-qualified and port (NAPT) slots, some rewriting the port."""
        tables = {}
        for table in NAT_TABLES:
            side = "src" if table == "snat" else "dst"
            entries = []
            size = params[f"{table}_entries"]
            for _ in range(rng.randint(max(1, size // 2), size)):
                if flows and rng.random() < 0.9:
                    flow = rng.choice(flows)
                    addr, proto, port = flow[f"{side}_ip"], flow["proto"], flow[f"{side[0]}port"]
                else:
                    addr, proto = rng.getrandbits(32), rng.choice([6, 17])
                    port = rng.getrandbits(16)
                kind = rng.random()
                entries.append(NatEntry(
                    addr, rng.getrandbits(32),
                    proto if kind > 0.4 and proto in (6, 17) or kind > 0.9 else None,
                    port if kind > 0.6 and proto in (6, 17) else None,
                    rng.getrandbits(16) if kind > 0.5 and rng.random() < 0.7 else None))
            tables[table] = entries
        return cls(**tables)


# --- description ------------------------------------------------------------------------------

class NatTranslatorDescription(TaskDescription):
    kind = "nat"
    doc = "Static IPv4 NAT: SNAT and DNAT tables with incremental checksum updates."
    scope = Scope.HEADER
    modifies = True
    drops = False
    type_id = 0x4E415434  # 'NAT4'
    params = (
        Param("snat_entries", 8, low=1, high=64, doc="Source translation slots"),
        Param("dnat_entries", 8, low=1, high=64, doc="Destination translation slots"),
    )
    config = NatConfig
    model = "nat:NatModel"

    @classmethod
    def shared_state(cls, params):
        # Never drops; per-slot hit counters in one bank (SNAT's slots, then DNAT's); the
        # slots are configuration (full maps only).
        return {**super().shared_state(params),
                **{name: csr_item(name) for name in ("snat_hits", "dnat_hits", "misses")},
                "hits": "hits",
                **{t: [f"{t}{k}" for k in range(params[f"{t}_entries"])] for t in NAT_TABLES}}

    @classmethod
    def task_registers(cls, params):
        return [
            Register("snat_hits", 64, R, doc="Packets whose source an SNAT slot translated"),
            Register("dnat_hits", 64, R, doc="Packets whose destination a DNAT slot translated"),
            Register("misses", 64, R, doc="IPv4 packets NAT applied to that no slot matched"),
            *SLOTS.registers(),
            Register("sel_match", 64, R, doc="Selected slot: address, port << 32, "
                                             "protocol << 48, flags << 56"),
            Register("sel_rewrite", 64, R, doc="Selected slot: new address, new port << 32"),
            Register("sel_hits", 64, R, doc="Packets the selected slot translated"),
        ]
