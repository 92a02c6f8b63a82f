"""Model of a tenant's chain or DAG: the NT models wired like the hardware graph.

``ChainModel.process(frame, meta)`` runs a packet through every stage: NTs in order, and for a
fork every branch on its own copy, then the join's rule (the primary branch's packet with the
drop and mark verdicts of all branches OR-ed). The egress drop stage is :meth:`deliver`.

:func:`chain_traffic` makes test traffic for a chain: random packets (valid and malformed, of
the kinds the spec's ``[traffic]`` asks for), a share of the IPv4 TCP/UDP ones re-aimed at the
spec's ``dst`` addresses and ``dport`` ports with correct checksums, so rules and VIPs match.
"""

import copy
import random

from ..desc.chain import ChainSpec, Parallel
from .nt.base import model_class
from .nt.checksum import internet_checksum
from .parser_model import ParserModel
from .nt.base import light_frames
from .traffic import random_packets

__all__ = ["ChainModel", "chain_traffic", "retarget"]


class ChainModel:
    def __init__(self, spec: ChainSpec, data_width=512, header_bytes=256):
        self.spec = spec
        self.models = {}
        for node in spec.node_list():
            model = model_class(node.task)(node.params, data_width, header_bytes)
            model.configure(node.config)
            self.models[node.name] = model
        self.stats = {"delivered": 0, "dropped": 0, "dropped_bytes": 0}

    def _run(self, nodes, frame, meta):
        for node in nodes:
            frame, meta = self.models[node.name].process(frame, meta)
        return frame, meta

    def process(self, frame, meta):
        """The packet and metadata that reach the egress (``meta["drop"]`` set if dropped)."""
        for stage in self.spec.stages:
            if isinstance(stage, Parallel):
                results = [self._run(branch, frame, copy.deepcopy(meta))
                           for branch in stage.branches]
                frame, meta = results[stage.primary]
                meta["drop"] = int(any(m["drop"] for _, m in results))
                meta["mark"] = int(any(m["mark"] for _, m in results))
            else:
                frame, meta = self.models[stage.name].process(frame, meta)
        return frame, meta

    # --- state moved from and to the hardware (hw/transform) -----------------------------------
    #: Where a node's state sits in a chain personality's state map: ``graph.<node>.<item>``.
    NODE_PREFIX = "graph.{}."

    def load_hw_state(self, values):
        """Every NT model takes over its node's state from ``values``, the state map's decode
        of a chain personality stopped at a packet boundary (see
        :meth:`~supernic.sim.nt.base.TaskModel.load_hw_state`)."""
        for name, model in self.models.items():
            model.load_hw_state(self._node_values(values, name))

    def store_hw_state(self, values):
        """The reverse: every NT model's state into ``values`` (changed in place)."""
        for name, model in self.models.items():
            prefix = self.NODE_PREFIX.format(name)
            mine = self._node_values(values, name)
            model.store_hw_state(mine)
            for item, value in mine.items():
                values[prefix + item] = value

    def _node_values(self, values, name):
        prefix = self.NODE_PREFIX.format(name)
        mine = {k[len(prefix):]: v for k, v in values.items() if k.startswith(prefix)}
        if not mine:
            raise KeyError(f"the state map has no items of node {name!r} ({prefix}...)")
        return mine

    def deliver(self, frame, meta):
        """The egress: ``True`` if the packet leaves, else it is counted as dropped."""
        if meta["drop"]:
            self.stats["dropped"] += 1
            self.stats["dropped_bytes"] += len(frame)
            return False
        self.stats["delivered"] += 1
        return True


def retarget(frame: bytes, meta, dst_ip: int, dport: int) -> bytes:
    """Send an IPv4 TCP/UDP packet to ``dst_ip:dport``, with its checksums recomputed (the
    UDP checksum stays 0 if it was 0, RFC 768)."""
    out = bytearray(frame)
    l3, l4 = meta["l3_off"][0], meta["l4_off"][0]
    ihl = (out[l3] & 0x0F) * 4
    out[l3 + 16:l3 + 20] = dst_ip.to_bytes(4, "big")
    out[l4 + 2:l4 + 4] = dport.to_bytes(2, "big")
    out[l3 + 10:l3 + 12] = b"\0\0"
    out[l3 + 10:l3 + 12] = internet_checksum(bytes(out[l3:l3 + ihl])).to_bytes(2, "big")
    total = int.from_bytes(out[l3 + 2:l3 + 4], "big")
    seg_len = total - ihl
    proto = out[l3 + 9]
    at = l4 + (16 if proto == 6 else 6)
    if proto == 17 and out[at:at + 2] == b"\0\0":
        return bytes(out)
    out[at:at + 2] = b"\0\0"
    pseudo = bytes(out[l3 + 12:l3 + 20]) + bytes([0, proto]) + seg_len.to_bytes(2, "big")
    csum = internet_checksum(pseudo + bytes(out[l4:l4 + seg_len]))
    if proto == 17 and csum == 0:
        csum = 0xFFFF
    out[at:at + 2] = csum.to_bytes(2, "big")
    return bytes(out)


def chain_traffic(spec: ChainSpec, n, seed, malformed=0.1, size_dist="mixed",
                  header_bytes=256):
    """``n`` frames for ``spec``'s tests (see the module docstring); ``size_dist`` is one of
    :func:`~supernic.sim.traffic.random_packets`' or ``"light"``
    (:data:`~supernic.sim.nt.base.LIGHT_MIX`)."""
    t = spec.traffic
    rng = random.Random(seed ^ 0x7AFF1C)
    kw = {"flows": t.get("flows", 64)}
    if t.get("kinds"):
        kw["kinds"] = tuple(t["kinds"])
    if size_dist == "light":
        frames = light_frames(random.Random(seed), n, malformed, **kw)
    else:
        frames = [f for _, f in random_packets(n, seed, size_dist, malformed, **kw)]
    dsts = [int.from_bytes(bytes(int(x) for x in a.split(".")), "big") for a in t.get("dst", [])]
    ports = t.get("dport", [])
    if not dsts and not ports:
        return frames
    parser = ParserModel(header_bytes)
    share = t.get("share", 0.5)
    for i, frame in enumerate(frames):
        meta = parser.parse(frame)
        if (rng.random() >= share or meta["l3_kind"][0] != 1 or meta["l4_kind"][0] == 0
                or meta["vxlan"] or meta["flags"]["fragment"]
                or any(meta["flags"][f] for f in ("truncated", "malformed", "runt",
                                                   "length_error"))):
            continue
        dst = rng.choice(dsts) if dsts else meta["flow"]["dst_ip"]
        dport = rng.choice(ports) if ports else meta["flow"]["dport"]
        frames[i] = retarget(frame, meta, dst, dport)
    return frames
