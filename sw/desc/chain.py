"""Chain specifications: data files in ``chains/`` that describe a tenant's NTs and edges.

Format (TOML)::

    edges = [["fw", "nat"], ["nat", "lb"]]   # optional: without it, the nodes form a chain
                                             # in the order given (top-level keys come first
                                             # in TOML)
    [tenant]
    name = "web"
    doc = "what the tenant runs"
    mode = "packet"        # optional: "header" asks for header-only processing (the payload
                           # waits in the packet store), so NTs needing the payload are refused
    keys = [100]           # optional: tenant keys (VLAN ID or VXLAN VNI) the NIC maps here

    [traffic]              # optional: test traffic aimed at the rules (see _traffic)
    dst = ["203.0.113.10"]
    dport = [80, 443]

    [[nodes]]
    name = "fw"
    nt = "acl"
    params = { rules = 8 }  # build parameters
    [nodes.config]          # run-time configuration (rules, tables), loaded over registers
    default = "allow"

Supported shapes (the SuperNIC paper's chains and DAGs, arXiv 2109.07744 §4): a sequence of
stages, where a stage is one NT or a fork into parallel branches (each a chain of NTs, possibly
empty) that join again before the next stage or at the end. The first branch that modifies
packets is the primary: the joined packet is its output, with the drop and mark verdicts of
every branch OR-ed in. So only the primary may hold NTs that change bytes, and a secondary
branch may hold only header-scope NTs that decide on the first beat (bounded latency: the join
buffers the primary while they decide; a store-and-forward NT there could deadlock the fork).

Validation gives one-line errors naming the file and the offending entry: unknown NT, bad
parameter or configuration, dangling edge, cycle, unsupported shape, a modifying NT off the
primary branch, and payload ordering: an NT that reads the payload must not follow one that
rewrites it (it would see ciphertext), an NT that rewrites the payload must not follow one that
seals it with checksums (they would go stale), and ``mode = "header"`` refuses packet-scope NTs.
"""

from dataclasses import dataclass, field

from .config import ConfigError
from .names import check_identifier
from .toml_file import read_toml
from .nt.base import Scope, task_description, task_descriptions

__all__ = ["NodeSpec", "Parallel", "ChainSpec", "load_chain", "parse_chain", "split_chain",
           "ChainError", "PARTS"]


class ChainError(ConfigError):
    pass


#: Register blocks of the design itself; node names become block names, so they are taken.
RESERVED_BLOCKS = ("id", "parser", "chain")


@dataclass
class NodeSpec:
    name: str
    kind: str
    task: type
    params: dict
    config: object

    @property
    def modifies(self):
        return self.task.modifies


@dataclass
class Parallel:
    """A fork into ``branches`` (lists of NodeSpec) that join again; ``primary`` indexes the
    branch whose packets leave the join."""
    branches: list
    primary: int


@dataclass
class ChainSpec:
    name: str
    doc: str
    mode: str
    keys: list
    nodes: dict
    stages: list = field(default_factory=list)
    source: str = ""
    traffic: dict = field(default_factory=dict)

    def node_list(self):
        """Every node in stage order (branches in order)."""
        out = []
        for stage in self.stages:
            if isinstance(stage, Parallel):
                for branch in stage.branches:
                    out += branch
            else:
                out.append(stage)
        return out

    def paths(self):
        """Every source-to-sink path of nodes (for ordering rules)."""
        paths = [[]]
        for stage in self.stages:
            if isinstance(stage, Parallel):
                paths = [p + b for p in paths for b in stage.branches]
            else:
                paths = [p + [stage] for p in paths]
        return paths

    @property
    def scope(self):
        nodes = self.node_list()
        return Scope.PACKET if any(n.task.scope is Scope.PACKET for n in nodes) else Scope.HEADER

    def cycles_per_beat(self, data_width):
        """Region cycles per beat at saturation: the slowest NT's (stages run back to back)."""
        return max([n.task.cycles_per_beat(data_width, n.params) for n in self.node_list()]
                   or [1.0])

    @property
    def header_only(self):
        """Whether the NIC may give this chain only the header beats (the payload waits in
        the packet store): not ``mode = "packet"``, and every NT is header-scope and does not
        need the whole frame (see :mod:`supernic.hw.nt.task`)."""
        return self.mode != "packet" and all(
            n.task.scope is Scope.HEADER and not n.task.needs_frame for n in self.node_list())


#: The parts a chain whose DAG ends in a fork splits into, to run in two linked regions (see
#: :func:`split_chain`): ``load_chain("monitoring.toml#branches")``.
PARTS = ("primary", "branches")


def load_chain(path):
    """The chain in ``path``; ``path#part`` names a part of it (:data:`PARTS`)."""
    path, _, part = str(path).partition("#")
    if part:
        if part not in PARTS:
            raise ChainError(f"{path}: unknown chain part {part!r} (known: {', '.join(PARTS)})")
        return split_chain(load_chain(path))[PARTS.index(part)]
    return parse_chain(read_toml(path, ChainError, "chain specification"), str(path))


def parse_chain(raw, source="<chain>"):
    def fail(message):
        raise ChainError(f"{source}: {message}")

    unknown = set(raw) - {"tenant", "nodes", "edges", "traffic"}
    if unknown:
        fail(f"unknown key {sorted(unknown)[0]!r} (known: edges, nodes, tenant, traffic)")
    tenant = raw.get("tenant", {})
    if not isinstance(tenant, dict):
        fail(f"[tenant] must be a table, not {tenant!r}")
    unknown = set(tenant) - {"name", "doc", "mode", "keys"}
    if unknown:
        fail(f"unknown key tenant.{sorted(unknown)[0]} (known: doc, keys, mode, name)")
    name = tenant.get("name")
    try:
        check_identifier("tenant.name", name)
    except ValueError as e:
        fail(str(e))
    mode = tenant.get("mode", "auto")
    if mode not in ("auto", "header", "packet"):
        fail(f"tenant.mode must be 'auto', 'header' or 'packet', not {mode!r}")
    keys = tenant.get("keys", [])
    if not isinstance(keys, list) or not all(
            isinstance(k, int) and not isinstance(k, bool) and 0 <= k < 2 ** 24 for k in keys):
        fail(f"tenant.keys must be a list of tenant keys (0 to 2**24-1), not {keys!r}")

    raw_nodes = raw.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        fail(f"nodes must be a non-empty list of [[nodes]] tables, not {raw_nodes!r}")
    nodes = {}
    for i, rn in enumerate(raw_nodes):
        if not isinstance(rn, dict):
            fail(f"nodes[{i}] must be a table, not {rn!r}")
        unknown = set(rn) - {"name", "nt", "params", "config"}
        if unknown:
            fail(f"nodes[{i}]: unknown key {sorted(unknown)[0]!r} (known: config, name, nt, "
                 f"params)")
        nname = rn.get("name")
        try:
            check_identifier(f"nodes[{i}].name", nname)
        except ValueError as e:
            fail(str(e))
        if nname in RESERVED_BLOCKS:
            fail(f"node name must not be one of the design's own blocks {RESERVED_BLOCKS}, "
                 f"not {nname!r}")
        if nname in nodes:
            fail(f"node name must be unique, not {nname!r}")
        kind = rn.get("nt")
        if kind not in task_descriptions():
            fail(f"node {nname!r}: unknown NT {kind!r} "
                 f"(known: {', '.join(task_descriptions())})")
        task = task_description(kind)
        try:
            params = task.check_params(rn.get("params", {}))
            config = task.config.from_dict(kind, params, rn.get("config", {}))
        except ConfigError as e:
            fail(f"node {nname!r}: {e}")
        nodes[nname] = NodeSpec(nname, kind, task, params, config)

    if "edges" in raw:
        edges = raw["edges"]
        if not isinstance(edges, list):
            fail(f"edges must be a list of [from, to] pairs, not {edges!r}")
        for e in edges:
            if (not isinstance(e, list) or len(e) != 2
                    or not all(isinstance(x, str) for x in e)):
                fail(f"edge must be a [from, to] pair of node names, not {e!r}")
            for end in e:
                if end not in nodes:
                    fail(f"edge {e!r} names unknown node {end!r} (a dangling edge)")
        edges = [tuple(e) for e in edges]
        if len(set(edges)) != len(edges):
            fail("edges must not repeat")
    else:
        order = list(nodes)
        edges = list(zip(order, order[1:]))

    stages = _stages(nodes, edges, fail)
    spec = ChainSpec(name, tenant.get("doc", ""), mode, keys, nodes, stages, source,
                     _traffic(raw.get("traffic", {}), fail))
    _check_payload_rules(spec, fail)
    return spec


def _traffic(raw, fail):
    """``[traffic]``: what the tenant's test traffic looks like, so that tests and the demo
    exercise its rules (``dst`` addresses and ``dport`` ports that a share of the IPv4 packets
    are sent to, ``kinds`` of packets, ``flows``)."""
    if not isinstance(raw, dict):
        fail(f"[traffic] must be a table, not {raw!r}")
    unknown = set(raw) - {"dst", "dport", "share", "kinds", "flows"}
    if unknown:
        fail(f"unknown key traffic.{sorted(unknown)[0]} (known: dport, dst, flows, kinds, share)")
    import ipaddress
    from .packet_kinds import KINDS
    for a in raw.get("dst", []):
        try:
            ipaddress.IPv4Address(a)
        except (ValueError, TypeError):
            fail(f"traffic.dst must list IPv4 addresses, not {a!r}")
    for k in raw.get("kinds", []):
        if k not in KINDS:
            fail(f"traffic.kinds must name packet kinds from {list(KINDS)}, not {k!r}")
    share = raw.get("share", 0.5)
    if not isinstance(share, (int, float)) or not 0 <= share <= 1:
        fail(f"traffic.share must be a number from 0 to 1, not {share!r}")
    return dict(raw)


def _stages(nodes, edges, fail):
    succ = {n: [] for n in nodes}
    pred = {n: [] for n in nodes}
    for a, b in edges:
        if a == b:
            fail(f"edge {[a, b]!r} is a cycle: node {a!r} feeds itself")
        succ[a].append(b)
        pred[b].append(a)
    _check_acyclic(nodes, succ, fail)
    isolated = [n for n in nodes if not succ[n] and not pred[n]]
    if len(nodes) > 1 and isolated:
        fail(f"node {isolated[0]!r} is connected to no other node")
    sources = [n for n in nodes if not pred[n]]
    if len(sources) != 1:
        fail(f"a chain must have exactly one first node (no incoming edge), not {sources!r}")
    stages, current, seen = [], sources[0], set()
    while current is not None:
        stages.append(nodes[current])
        seen.add(current)
        outs = succ[current]
        if not outs:
            current = None
        elif len(outs) == 1 and len(pred[outs[0]]) == 1:
            current = outs[0]
        else:
            branches, joins = [], set()
            for start in outs:
                branch, node = [], start
                while node is not None and len(pred[node]) == 1 and node not in seen:
                    if len(succ[node]) > 1:
                        fail(f"node {node!r} forks inside a branch: nested forks are not "
                             f"supported")
                    branch.append(nodes[node])
                    seen.add(node)
                    node = succ[node][0] if succ[node] else None
                joins.add(node)
                branches.append(branch)
            if len(joins) != 1:
                fail(f"the branches forked at {current!r} must all join at one node (or all "
                     f"end), not at {sorted(str(j) for j in joins)}")
            join = joins.pop()
            if join is not None and len(pred[join]) != len(outs):
                fail(f"node {join!r} joins {len(pred[join])} edges but {current!r} forks "
                     f"{len(outs)}: the branches must join where they fork")
            stages.append(Parallel(branches, _primary(branches, current, fail)))
            current = join
    missing = set(nodes) - seen
    if missing:
        fail(f"node {sorted(missing)[0]!r} is not reachable in the supported shape")
    return stages


def _primary(branches, fork, fail):
    modifying = [i for i, b in enumerate(branches) if any(n.modifies for n in b)]
    if len(modifying) > 1:
        names = [n.name for i in modifying for n in branches[i] if n.modifies]
        fail(f"only one branch of the fork at {fork!r} may modify packets, not branches "
             f"holding {names}")
    primary = modifying[0] if modifying else 0
    for i, branch in enumerate(branches):
        if i == primary:
            continue
        for n in branch:
            if n.task.scope is not Scope.HEADER:
                fail(f"node {n.name!r} ({n.kind}) needs the whole packet, so it must be on the "
                     f"primary branch of the fork at {fork!r}")
    return primary


def _check_acyclic(nodes, succ, fail):
    state = {}

    def visit(n, path):
        state[n] = "active"
        for m in succ[n]:
            if state.get(m) == "active":
                cycle = path[path.index(m):] + [n, m] if m in path else [n, m]
                fail(f"edges form a cycle: {' -> '.join(cycle)}")
            if m not in state:
                visit(m, path + [n])
        state[n] = "done"

    for n in nodes:
        if n not in state:
            visit(n, [])


def _check_payload_rules(spec, fail):
    if spec.mode == "header":
        for n in spec.node_list():
            if n.task.scope is Scope.PACKET or n.task.needs_frame:
                fail(f"node {n.name!r} ({n.kind}) needs the whole packet, but tenant.mode is "
                     f"'header' (the payload waits in the packet store)")
    for path in spec.paths():
        writer = sealer = None
        for n in path:
            if getattr(n.task, "reads_payload", False) and writer is not None:
                fail(f"node {n.name!r} ({n.kind}) reads the payload after {writer.name!r} "
                     f"({writer.kind}) rewrote it")
            if getattr(n.task, "writes_payload", False):
                if sealer is not None:
                    fail(f"node {n.name!r} ({n.kind}) rewrites the payload after "
                         f"{sealer.name!r} ({sealer.kind}) computed its checksums")
                writer = n
            if getattr(n.task, "seals_payload", False):
                sealer = n


def split_chain(spec):
    """``spec`` as two chains for two linked regions that run at the same time: *primary* (the
    nodes before the fork, then the primary branch) and *branches* (the nodes before the fork
    again, then the secondary branches, forked and joined if there are several). The NIC
    gives both regions every packet and merges the branches' drop and mark verdicts into the
    primary's packet (:mod:`supernic.hw.nic.link`), which is what the join inside one region
    does: the pair's output equals the whole chain's.

    Only a DAG whose last stage is its fork can split: a node after the join would see the
    merged verdicts, which the primary region does not have yet. The nodes before the fork run
    in both regions; that is sound because every NT is a function of its packet sequence and
    their metadata (the Python models are exactly that), so both copies compute the same
    packets (each keeps its own counters)."""
    import dataclasses

    def fail(message):
        raise ChainError(f"{spec.source or spec.name}: cannot split across regions: {message}")
    forks = [i for i, stage in enumerate(spec.stages) if isinstance(stage, Parallel)]
    if not forks:
        fail("it has no fork")
    if forks[-1] != len(spec.stages) - 1:
        fail(f"nodes follow the join ({', '.join(n.name for n in spec.stages[forks[-1] + 1:])})"
             f"; they would need the merged verdicts")
    if len(forks) > 1:
        fail("it forks more than once")
    prefix, fork = spec.stages[:-1], spec.stages[-1]
    secondaries = [b for i, b in enumerate(fork.branches) if i != fork.primary and b]
    if not secondaries:
        fail("every secondary branch is empty")
    primary_stages = prefix + fork.branches[fork.primary]
    if len(secondaries) == 1:
        branch_stages = prefix + secondaries[0]
    else:
        branch_stages = prefix + [Parallel(secondaries, 0)]

    def part(name, stages):
        nodes = {}
        for stage in stages:
            for n in (sum(stage.branches, []) if isinstance(stage, Parallel) else [stage]):
                nodes[n.name] = n
        return dataclasses.replace(spec, name=f"{spec.name}_{name}", nodes=nodes,
                                   stages=stages, source=f"{spec.source}#{name}")
    return part(PARTS[0], primary_stages), part(PARTS[1], branch_stages)
