"""Model of the whole multi-tenant NIC, layered like the hardware: the parser and classifier of
each port, then the chain model of the region a packet ran in, then the egress.

Which packets the scheduler lets through, in which order, and to which instance depends on
timing (queues, backpressure, reconfigurations), so the model does not guess it: a test tells
it, per region, the order the hardware dispatched packets in (the scheduler's output is
observable), and the model runs each region's chain model over exactly that sequence. What a
packet becomes is then fully determined: the bytes and metadata that leave, or the drop, and
every counter. Isolation and fairness are checked on top of this by the tests and benchmarks.

The tenant assignment and the classifier configuration are the deployment
(:class:`Deployment`): which chain each tenant runs and in which regions.
"""

import collections
import copy
from dataclasses import dataclass, field

from ..chain_model import ChainModel
from ..parser_model import ParserModel
from .classifier import ClassifierModel

__all__ = ["Deployment", "NicModel", "tag_frame"]


@dataclass
class Deployment:
    """Tenants on a NIC: ``chains[t]`` is tenant t's chain, ``regions[t]`` the regions running
    it, ``keys[t]`` the tenant keys (VLAN IDs, VNIs) the classifier maps to it. ``links[a] =
    b``: region ``a`` runs its chain split with region ``b`` (hw/nic/link.py); the pair
    computes what the whole chain computes, so the model runs the whole chain for ``a``."""
    chains: dict
    regions: dict
    keys: dict
    weights: dict = field(default_factory=dict)
    links: dict = field(default_factory=dict)



def tag_frame(frame: bytes, meta, key: int) -> bytes:
    """``frame`` carrying tenant key ``key``: the VXLAN VNI if it is VXLAN (RFC 7348 §5), else
    its outer VLAN ID, else a new 802.1Q tag with ``key`` as VLAN ID (IEEE 802.1Q-2018 §9.6)
    inserted after the MAC addresses. Frames too short for either are returned unchanged."""
    if meta["vxlan"] and meta["l4_off"][0]:
        at = meta["l4_off"][0] + 8 + 4          # UDP header, then VXLAN flags and reserved
        if len(frame) >= at + 3:
            return frame[:at] + key.to_bytes(3, "big") + frame[at + 3:]
        return frame
    if len(frame) < 14 or key >= 4096:
        return frame
    if meta["vlan_count"]:
        tci = int.from_bytes(frame[14:16], "big")
        return frame[:14] + ((tci & 0xF000) | key).to_bytes(2, "big") + frame[16:]
    return frame[:12] + b"\x81\x00" + key.to_bytes(2, "big") + frame[12:]


class NicModel:
    def __init__(self, deployment: Deployment, classifier_config, ports, data_width,
                 header_bytes=256, parser=None):
        self.deployment = deployment
        self.parser = parser or ParserModel(header_bytes)
        self.classifiers = [ClassifierModel(classifier_config, p) for p in range(ports)]
        self.data_width, self.header_bytes = data_width, header_bytes
        # One chain instance per (region, chain): a region reconfigured to another chain and
        # back keeps each personality's state, as the hardware does.
        self.region_models = {}
        # Regions time-shared by context switches: one instance per tenant there.
        self.time_shared = set()
        self.classifier_stats = [collections.Counter() for _ in range(ports)]
        self.egress = collections.defaultdict(collections.Counter)

    def classify(self, port, frame):
        """``(meta, tenant)``; tenant is None when the classifier drops the packet."""
        meta = self.parser.parse(frame)
        tenant = self.classifiers[port].classify(meta)
        stats = self.classifier_stats[port]
        stats["packets"] += 1
        if tenant is None:
            stats["dropped"] += 1
        return meta, tenant

    def instance(self, region, tenant):
        """The chain model of ``tenant``'s chain in ``region``."""
        spec = self.deployment.chains[tenant]
        key = (region, spec.name, tenant) if region in self.time_shared else (region, spec.name)
        if key not in self.region_models:
            self.region_models[key] = ChainModel(spec, self.data_width, self.header_bytes)
        return self.region_models[key]

    def migrate(self, source, target, spec):
        """The hardware moved ``spec``'s chain state from region ``source`` into ``target``
        (sw/driver/migration.py): the target's instance goes on from the source's state, and
        the source keeps its own copy, as its hardware does."""
        key = (source, spec.name)
        if key not in self.region_models:
            self.region_models[key] = ChainModel(spec, self.data_width, self.header_bytes)
        self.region_models[(target, spec.name)] = copy.deepcopy(self.region_models[key])

    def run(self, region, tenant, frame, meta):
        """What leaves the NIC for ``tenant``'s packet dispatched to ``region``: ``(frame,
        meta, delivered)``; the tenant's egress counters are updated."""
        out, out_meta = self.instance(region, tenant).process(frame, copy.deepcopy(meta))
        counters = self.egress[tenant]
        if out_meta["drop"]:
            counters["dropped"] += 1
            counters["dropped_bytes"] += len(out)
            return out, out_meta, False
        counters["delivered"] += 1
        counters["delivered_bytes"] += len(out)
        return out, out_meta, True

    def instances(self):
        """``{(region, chain name): {node name: NT model}}`` of every instance that ran
        (``(region, chain name, tenant)`` in a time-shared region)."""
        return {key: model.models for key, model in self.region_models.items()}
