"""ACL firewall: prioritised rules over the innermost 5-tuple.

A rule matches a packet when every field matches: source and destination address under a
prefix mask (IPv4 or IPv6, or either family), source and destination port inside an inclusive
range, and the IP protocol (or any). Rule 0 has the highest priority. Actions:

* ``allow`` and ``drop`` are terminal: the first matching terminal rule decides;
* ``count`` only counts: every matching ``count`` rule above the deciding rule counts the
  packet and matching goes on (an ``iptables`` rule without a target);
* no terminal match: the default action (``allow`` or ``drop``) decides.

Every rule has a 64-bit hit counter (read through ``hit_index``/``hit_count``).

Applies to IP packets (the outer L3 header is IPv4 or IPv6); others are skipped, like packets
with parse errors or already dropped (contract rule 3). Non-first IPv4 fragments carry no L4
header, so they match with ports 0 (the parser leaves them 0).

Programming a rule: write the ``rule_*`` staging registers, then ``rule_index`` and a 1 to
``rule_write``; the slot changes between packets' first beats, so a packet never sees half a
rule. The control plane writes masks, not prefix lengths: :class:`AclConfig` converts.

The gateware is :mod:`supernic.hw.nt.acl`.
"""

import enum
import ipaddress
from dataclasses import dataclass, field

from ..registers import R, RW, Register
from ..staged import Field, StagedTable
from .base import ConfigError, Param, Scope, TaskConfig, TaskDescription

__all__ = ["AclFirewallDescription", "AclConfig", "AclRule", "AclAction", "Family", "RULE_FIELDS"]


class AclAction(enum.IntEnum):
    ALLOW = 0
    DROP = 1
    COUNT = 2


class Family(enum.IntEnum):
    ANY = 0
    IPV4 = 1
    IPV6 = 2


_PROTOS = {"tcp": 6, "udp": 17, "icmp": 1, "icmpv6": 58, "gre": 47}

#: The rule table, which software fills one rule at a time (sw/desc/staged.py): a rule as the
#: hardware stores it, field by field, in the order of the gateware's rule layout;
#: :meth:`AclRule.words` gives the values.
RULES = StagedTable("rule", tuple(Field(name, width, f"Staged rule: {doc}")
                                  for name, width, doc in (
    ("src", 128, "src"), ("src_mask", 128, "src_mask"), ("dst", 128, "dst"),
    ("dst_mask", 128, "dst_mask"),
    ("sport_lo", 16, "source port range start"), ("sport_hi", 16, "range end"),
    ("dport_lo", 16, "destination port range start"), ("dport_hi", 16, "range end"),
    ("proto", 8, "IP protocol"), ("proto_any", 1, "1: any protocol"),
    ("family", 2, "0 any, 1 IPv4, 2 IPv6"),
    ("action", 2, "0 allow, 1 drop, 2 count"), ("valid", 1, "1: slot in use"))),
    (Field("rule_index", 8, "Slot the staged rule is written to"),),
    "Write 1: copy the staged rule into its slot")
RULE_FIELDS = {f.name: f.width for f in RULES.fields}     # name: width in bits


@dataclass(frozen=True)
class AclRule:
    """One rule; ``src``/``dst`` are ``ipaddress`` networks or ``None`` (any)."""
    src: object = None
    dst: object = None
    sport: tuple = (0, 0xFFFF)
    dport: tuple = (0, 0xFFFF)
    proto: int | None = None
    action: AclAction = AclAction.ALLOW

    @property
    def family(self):
        nets = [n for n in (self.src, self.dst) if n is not None]
        if not nets:
            return Family.ANY
        return Family.IPV4 if nets[0].version == 4 else Family.IPV6

    def matches(self, flow):
        fam = self.family
        if fam is Family.IPV4 and flow["ipv6"] or fam is Family.IPV6 and not flow["ipv6"]:
            return False
        for net, addr in ((self.src, flow["src_ip"]), (self.dst, flow["dst_ip"])):
            if net is not None and (addr & _mask(net)) != int(net.network_address):
                return False
        return (self.sport[0] <= flow["sport"] <= self.sport[1]
                and self.dport[0] <= flow["dport"] <= self.dport[1]
                and (self.proto is None or self.proto == flow["proto"]))

    def words(self):
        """The rule as the hardware stores it (addresses in the low bits for IPv4)."""
        def net(n):
            return (0, 0) if n is None else (int(n.network_address), _mask(n))
        src, src_mask = net(self.src)
        dst, dst_mask = net(self.dst)
        return {
            "src": src, "src_mask": src_mask, "dst": dst, "dst_mask": dst_mask,
            "sport_lo": self.sport[0], "sport_hi": self.sport[1],
            "dport_lo": self.dport[0], "dport_hi": self.dport[1],
            "proto": self.proto or 0, "proto_any": int(self.proto is None),
            "family": int(self.family), "action": int(self.action), "valid": 1,
        }


def _mask(net):
    bits = net.max_prefixlen
    return ((1 << net.prefixlen) - 1) << (bits - net.prefixlen)


def _port_range(kind, where, value):
    if isinstance(value, int) and not isinstance(value, bool):
        lo = hi = value
    elif isinstance(value, str) and value.strip() == "any":
        lo, hi = 0, 0xFFFF
    elif isinstance(value, str):
        lo_s, _, hi_s = value.partition("-")
        try:
            lo, hi = int(lo_s), int(hi_s or lo_s)
        except ValueError:
            raise ConfigError(f"nt {kind}: {where} must be a port or a range 'lo-hi', "
                              f"not {value!r}") from None
    else:
        raise ConfigError(f"nt {kind}: {where} must be a port or a range 'lo-hi', not {value!r}")
    if not 0 <= lo <= hi <= 0xFFFF:
        raise ConfigError(f"nt {kind}: {where} must be a range within 0-65535 with lo <= hi, "
                          f"not {value!r}")
    return lo, hi


def _network(kind, where, value):
    if value is None or value == "any":
        return None
    try:
        return ipaddress.ip_network(value, strict=True)
    except (ValueError, TypeError):
        raise ConfigError(f"nt {kind}: {where} must be an address prefix such as "
                          f"'10.0.0.0/8' with no host bits set, or 'any', not {value!r}") from None


@dataclass
class AclConfig(TaskConfig):
    rules: list = field(default_factory=list)
    default: AclAction = AclAction.ALLOW

    @classmethod
    def from_dict(cls, kind, params, raw):
        if not isinstance(raw, dict):
            raise ConfigError(f"nt {kind}: config must be a table, not {raw!r}")
        unknown = set(raw) - {"rules", "default"}
        if unknown:
            raise ConfigError(f"nt {kind}: unknown config key {sorted(unknown)[0]!r} "
                              f"(known: default, rules)")
        default = raw.get("default", "allow")
        if default not in ("allow", "drop"):
            raise ConfigError(f"nt {kind}: default must be 'allow' or 'drop', not {default!r}")
        rules = []
        raw_rules = raw.get("rules", [])
        if not isinstance(raw_rules, list):
            raise ConfigError(f"nt {kind}: rules must be a list of tables, not {raw_rules!r}")
        if len(raw_rules) > params["rules"]:
            raise ConfigError(f"nt {kind}: rules must number at most {params['rules']} "
                              f"(build parameter rules), not {len(raw_rules)}")
        for i, r in enumerate(raw_rules):
            where = f"rules[{i}]"
            if not isinstance(r, dict):
                raise ConfigError(f"nt {kind}: {where} must be a table, not {r!r}")
            unknown = set(r) - {"src", "dst", "sport", "dport", "proto", "action"}
            if unknown:
                raise ConfigError(f"nt {kind}: {where} has unknown key {sorted(unknown)[0]!r} "
                                  f"(known: action, dport, dst, proto, sport, src)")
            src = _network(kind, f"{where}.src", r.get("src"))
            dst = _network(kind, f"{where}.dst", r.get("dst"))
            if src is not None and dst is not None and src.version != dst.version:
                raise ConfigError(f"nt {kind}: {where}.src and .dst must be of one address "
                                  f"family, not {r.get('src')!r} and {r.get('dst')!r}")
            proto = r.get("proto", "any")
            if proto == "any":
                proto = None
            elif isinstance(proto, str) and proto in _PROTOS:
                proto = _PROTOS[proto]
            elif not (isinstance(proto, int) and not isinstance(proto, bool)
                      and 0 <= proto <= 255):
                raise ConfigError(f"nt {kind}: {where}.proto must be 'any', one of "
                                  f"{sorted(_PROTOS)} or 0-255, not {proto!r}")
            action = r.get("action", "allow")
            if action not in ("allow", "drop", "count"):
                raise ConfigError(f"nt {kind}: {where}.action must be 'allow', 'drop' or "
                                  f"'count', not {action!r}")
            rules.append(AclRule(src, dst, _port_range(kind, f"{where}.sport", r.get("sport", "any")),
                                 _port_range(kind, f"{where}.dport", r.get("dport", "any")),
                                 proto, AclAction[action.upper()]))
        return cls(rules, AclAction[default.upper()])

    def register_writes(self, params):
        writes = [("default_drop", int(self.default == AclAction.DROP))]
        empty = {k: 0 for k in RULE_FIELDS}
        for index in range(params["rules"]):
            words = self.rules[index].words() if index < len(self.rules) else empty
            writes += RULES.row_writes(words, rule_index=index)
        return writes

    @classmethod
    def random(cls, rng, params, flows=()):
        """Rules cut from ``flows`` (5-tuple dicts of the traffic) so they match."""
        rules = []
        for _ in range(rng.randint(1, params["rules"])):
            flow = rng.choice(flows) if flows else None
            action = rng.choice([AclAction.ALLOW, AclAction.DROP, AclAction.DROP,
                                 AclAction.COUNT])
            if flow is None or rng.random() < 0.15:
                rules.append(AclRule(proto=rng.choice([None, 6, 17]), action=action,
                                     dport=_random_range(rng, rng.randrange(65536))))
                continue
            bits = 128 if flow["ipv6"] else 32
            cls_ = ipaddress.IPv6Network if flow["ipv6"] else ipaddress.IPv4Network

            def net(addr):
                if rng.random() < 0.3:
                    return None
                plen = rng.choice([0, bits // 4, bits // 2, bits - 8, bits])
                m = ((1 << plen) - 1) << (bits - plen)
                return cls_((addr & m, plen))
            rules.append(AclRule(
                net(flow["src_ip"]), net(flow["dst_ip"]),
                _random_range(rng, flow["sport"]), _random_range(rng, flow["dport"]),
                rng.choice([None, flow["proto"]]), action))
        return cls(rules, rng.choice([AclAction.ALLOW, AclAction.DROP]))


def _random_range(rng, port):
    r = rng.random()
    if r < 0.3:
        return (0, 0xFFFF)
    if r < 0.6:
        return (port, port)
    return (max(0, port - rng.randrange(1000)), min(0xFFFF, port + rng.randrange(1000)))


class AclFirewallDescription(TaskDescription):
    kind = "acl"
    doc = "ACL firewall: prioritised 5-tuple rules with prefixes, port ranges and wildcards."
    scope = Scope.HEADER
    modifies = False
    type_id = 0x41434C46  # 'ACLF'
    params = (Param("rules", 16, low=1, high=64, doc="Rule slots"),)
    config = AclConfig
    model = "acl:AclModel"

    @classmethod
    def shared_state(cls, params):
        # ``hits``: the per-rule counter bank (hw/nt/counter_bank.py, sim/counter_bank.py).
        return {**super().shared_state(params), "hits": "hits"}

    @classmethod
    def task_registers(cls, params):
        regs = [Register("default_drop", 1, RW, doc="Default action: 0 allow, 1 drop")]
        regs += RULES.registers()
        regs += [
            Register("hit_index", 8, RW, doc="Rule whose hit counter hit_count shows"),
            Register("hit_count", 64, R, doc="Packets that matched rule hit_index and counted"),
        ]
        return regs
