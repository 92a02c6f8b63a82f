"""Chain specifications: shapes that parse, and every error a user can make, one clear line
each (the messages are pinned)."""

import pytest

from supernic.desc.chain import ChainError, Parallel, load_chain, parse_chain


def _node(name, nt="acl", **extra):
    return {"name": name, "nt": nt, **extra}


def _spec(nodes, edges=None, **tenant):
    raw = {"tenant": {"name": "t", **tenant}, "nodes": nodes}
    if edges is not None:
        raw["edges"] = edges
    return raw


def test_chain_in_node_order():
    spec = parse_chain(_spec([_node("a"), _node("b"), _node("c")]))
    assert [n.name for n in spec.stages] == ["a", "b", "c"]


def test_fork_and_join():
    spec = parse_chain(_spec([_node(x) for x in "abcde"],
                             [["a", "b"], ["a", "c"], ["c", "d"], ["b", "e"], ["d", "e"]]))
    assert spec.stages[0].name == "a"
    par = spec.stages[1]
    assert isinstance(par, Parallel)
    assert [[n.name for n in b] for b in par.branches] == [["b"], ["c", "d"]]
    assert spec.stages[2].name == "e"
    assert [[n.name for n in p] for p in spec.paths()] == [["a", "b", "e"], ["a", "c", "d", "e"]]


def test_fork_to_the_end_and_empty_branch():
    spec = parse_chain(_spec([_node(x) for x in "abc"], [["a", "b"], ["a", "c"]]))
    assert isinstance(spec.stages[1], Parallel) and len(spec.stages) == 2
    spec = parse_chain(_spec([_node(x) for x in "abc"], [["a", "b"], ["a", "c"], ["b", "c"]]))
    assert [[n.name for n in b] for b in spec.stages[1].branches] == [["b"], []]


@pytest.mark.parametrize("raw, message", [
    (_spec([_node("a", nt="acll")]),
     "<chain>: node 'a': unknown NT 'acll' (known: "),
    (_spec([_node("a", params={"rules": 100})]),
     "<chain>: node 'a': nt acl: parameter rules must be between 1 and 64, not 100"),
    (_spec([_node("a", config={"default": "maybe"})]),
     "<chain>: node 'a': nt acl: default must be 'allow' or 'drop', not 'maybe'"),
    (_spec([_node("a"), _node("b")], [["a", "c"]]),
     "<chain>: edge ['a', 'c'] names unknown node 'c' (a dangling edge)"),
    (_spec([_node("a"), _node("b"), _node("c")], [["a", "b"], ["b", "c"], ["c", "b"]]),
     "<chain>: edges form a cycle: b -> c -> b"),
    (_spec([_node("a")], [["a", "a"]]), "<chain>: edge ['a', 'a'] is a cycle: node 'a' feeds itself"),
    (_spec([_node("a"), _node("b"), _node("c")], [["a", "b"]]),
     "<chain>: node 'c' is connected to no other node"),
    (_spec([_node("a"), _node("b"), _node("c")], [["a", "c"], ["b", "c"]]),
     "<chain>: a chain must have exactly one first node (no incoming edge), not ['a', 'b']"),
    (_spec([_node(x) for x in "abcdef"],
           [["a", "b"], ["a", "c"], ["b", "d"], ["b", "e"], ["d", "f"], ["e", "f"], ["c", "f"]]),
     "<chain>: node 'b' forks inside a branch: nested forks are not supported"),
    (_spec([_node("a"), _node("a")]), "<chain>: node name must be unique, not 'a'"),
    (_spec([_node("parser")]),
     "<chain>: node name must not be one of the design's own blocks ('id', 'parser', "
     "'chain'), not 'parser'"),
    (_spec([_node("Fw")]), "<chain>: nodes[0].name must be a lower-case identifier, not 'Fw'"),
    (_spec([_node("a", rules=3)]),
     "<chain>: nodes[0]: unknown key 'rules' (known: config, name, nt, params)"),
    ({"tenant": {"name": "t"}, "nodes": []},
     "<chain>: nodes must be a non-empty list of [[nodes]] tables, not []"),
    (_spec([_node("a")], mode="fast"),
     "<chain>: tenant.mode must be 'auto', 'header' or 'packet', not 'fast'"),
    (_spec([_node("a")], keys=["x"]),
     "<chain>: tenant.keys must be a list of tenant keys (0 to 2**24-1), not ['x']"),
    ({**_spec([_node("a")]), "extra": 1},
     "<chain>: unknown key 'extra' (known: edges, nodes, tenant, traffic)"),
    ({**_spec([_node("a")]), "traffic": {"dst": ["10.0.0.300"]}},
     "<chain>: traffic.dst must list IPv4 addresses, not '10.0.0.300'"),
])
def test_errors(raw, message):
    with pytest.raises(ChainError) as info:
        parse_chain(raw)
    assert str(info.value).startswith(message), str(info.value)


def test_file_errors(tmp_path):
    with pytest.raises(ChainError, match="does not exist"):
        load_chain(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[tenant\n")
    with pytest.raises(ChainError, match=f"{bad}: not valid TOML"):
        load_chain(bad)
