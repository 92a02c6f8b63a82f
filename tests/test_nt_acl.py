"""ACL firewall: rule semantics in the model and configuration errors. The hardware against
the model at 64 and 512 bits (5,000 packets each, random idle and backpressure) and saturation
are in tests/test_nt_contract.py."""

import ipaddress
import random

import pytest

from supernic.desc.nt.acl import AclAction, AclConfig, AclRule
from supernic.hw.nt.acl import AclFirewall
from supernic.hw.nt.task import ConfigError
from supernic.sim.nt.acl import AclModel
from supernic.sim.parser_model import ParserModel
from supernic.sim.traffic import random_packets

PARAMS = AclFirewall.check_params({})


def _flow(src, dst, sport, dport, proto=6):
    ipv6 = ":" in src
    return {"src_ip": int(ipaddress.ip_address(src)), "dst_ip": int(ipaddress.ip_address(dst)),
            "sport": sport, "dport": dport, "proto": proto, "ipv6": int(ipv6)}


def test_rule_fields_match():
    rule = AclConfig.from_dict("acl", PARAMS, {"rules": [
        {"src": "10.0.0.0/8", "dst": "192.168.1.0/24", "sport": "any", "dport": "80-443",
         "proto": "tcp", "action": "drop"}]}).rules[0]
    assert rule.matches(_flow("10.1.2.3", "192.168.1.9", 5000, 443))
    assert not rule.matches(_flow("11.1.2.3", "192.168.1.9", 5000, 443))     # src prefix
    assert not rule.matches(_flow("10.1.2.3", "192.168.2.9", 5000, 443))     # dst prefix
    assert not rule.matches(_flow("10.1.2.3", "192.168.1.9", 5000, 444))     # port range
    assert not rule.matches(_flow("10.1.2.3", "192.168.1.9", 5000, 80, 17))  # protocol
    assert not rule.matches(_flow("::1", "::2", 5000, 80))                   # family


def test_priority_count_and_default():
    config = AclConfig.from_dict("acl", PARAMS, {"default": "drop", "rules": [
        {"dport": 22, "action": "count"},
        {"src": "10.0.0.0/8", "action": "allow"},
        {"dport": 22, "action": "drop"},
    ]})
    model = AclModel(PARAMS)
    model.configure(config)
    meta = ParserModel().parse(random_packets(1, 3, 200, 0, kinds=("ipv4_tcp",))[0][1])
    meta["flow"].update(_flow("10.0.0.1", "1.2.3.4", 1000, 22))
    assert model.process(b"x", meta)[1]["drop"] == 0    # allowed by rule 1, counted by rule 0
    meta["flow"].update(_flow("11.0.0.1", "1.2.3.4", 1000, 22))
    assert model.process(b"x", meta)[1]["drop"] == 1    # dropped by rule 2
    meta["flow"].update(_flow("11.0.0.1", "1.2.3.4", 1000, 23))
    assert model.process(b"x", meta)[1]["drop"] == 1    # default
    assert model.hits[:3] == [2, 1, 1]
    assert model.stats == {"packets": 3, "dropped": 2, "skipped": 0}


def test_non_ip_and_errors_are_skipped():
    model = AclModel(PARAMS)
    model.configure(AclConfig([AclRule(action=AclAction.DROP)], AclAction.DROP))
    parser = ParserModel()
    frames = [f for _, f in random_packets(300, 5, "mixed", 0.3)]
    for frame in frames:
        meta = parser.parse(frame)
        out = model.process(frame, meta)[1]
        applies = meta["l3_kind"][0] != 0 and not any(
            meta["flags"][f] for f in ("truncated", "malformed", "runt"))
        assert out["drop"] == int(applies)
    assert model.stats["dropped"] + model.stats["skipped"] == 300
    assert 0 < model.stats["skipped"] < 300


@pytest.mark.parametrize("raw, message", [
    ({"rules": [{"src": "10.0.0.1/8"}]},
     "nt acl: rules[0].src must be an address prefix such as '10.0.0.0/8' with no host bits "
     "set, or 'any', not '10.0.0.1/8'"),
    ({"rules": [{"dport": "90-80"}]},
     "nt acl: rules[0].dport must be a range within 0-65535 with lo <= hi, not '90-80'"),
    ({"rules": [{"proto": "sctp"}]},
     "nt acl: rules[0].proto must be 'any', one of ['gre', 'icmp', 'icmpv6', 'tcp', 'udp'] "
     "or 0-255, not 'sctp'"),
    ({"rules": [{"action": "reject"}]},
     "nt acl: rules[0].action must be 'allow', 'drop' or 'count', not 'reject'"),
    ({"rules": [{"src": "10.0.0.0/8", "dst": "::/0"}]},
     "nt acl: rules[0].src and .dst must be of one address family, not '10.0.0.0/8' and '::/0'"),
    ({"default": "deny"}, "nt acl: default must be 'allow' or 'drop', not 'deny'"),
    ({"rules": [{}] * 17},
     "nt acl: rules must number at most 16 (build parameter rules), not 17"),
    ({"rule": []}, "nt acl: unknown config key 'rule' (known: default, rules)"),
])
def test_config_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        AclConfig.from_dict("acl", PARAMS, raw)
    assert str(info.value) == message


def test_param_errors():
    with pytest.raises(ConfigError, match="nt acl: parameter rules must be between 1 and 64, "
                                          "not 0"):
        AclFirewall.check_params({"rules": 0})
    with pytest.raises(ConfigError, match="nt acl: unknown parameter 'size'"):
        AclFirewall.check_params({"size": 4})


def test_random_config_round_trips_register_writes():
    config = AclConfig.random(random.Random(2), PARAMS)
    writes = config.register_writes(PARAMS)
    assert writes.count(("rule_write", 1)) == PARAMS["rules"]
    names = {r.name for r in AclFirewall.registers(PARAMS)}
    assert {name for name, _ in writes} <= names
