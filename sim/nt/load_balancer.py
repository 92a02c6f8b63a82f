"""Model of the L4 load balancer (hw/nt/load_balancer.py): Maglev table lookup and a destination
rewrite with RFC 1624 incremental checksum updates, on bytes.

:func:`rewrite_destination` is the rewrite itself; the tests check it against scapy's own
checksum computation, and :meth:`LoadBalancerModel.test_case` uses it to aim random traffic at
the VIP with valid checksums.
"""

import random

from ...desc.meta import L3Kind, L4Kind
from ...desc.nt.load_balancer import LoadBalancerConfig
from ..parser_model import ParserModel
from .base import StateBridgeError, TaskModel, exact_size_frames, light_frames, skips
from .checksum import checksum_update, udp_checksum_update

__all__ = ["LoadBalancerModel", "rewrite_destination", "strip_udp_checksum", "balanced_layer",
           "light_frames"]


def balanced_layer(meta):
    """The layer (0 outer, 1 inside VXLAN) of the flow the metadata names, or ``None`` if it is
    not IPv4 TCP or UDP (the only packets the LB rewrites)."""
    layer = 1 if meta["l3_kind"][1] != L3Kind.NONE else 0
    if meta["l3_kind"][layer] != L3Kind.IPV4 or meta["l4_kind"][layer] == L4Kind.NONE:
        return None
    return layer


def _get(buf, off):
    return int.from_bytes(buf[off:off + 2], "big")


def _put(buf, off, value):
    buf[off:off + 2] = value.to_bytes(2, "big")


def rewrite_destination(frame, meta, new_ip, new_port):
    """``frame`` with the flow's destination address and port replaced and every checksum
    covering them updated incrementally (RFC 1624 eqn. 3): the IPv4 header checksum, the TCP
    or UDP checksum (pseudo-header address and port; UDP 0 stays 0) and, for a flow inside
    VXLAN, the outer UDP checksum (when not 0) by the inner L4 segment's net change.
    ``meta`` is the parser's metadata of ``frame``; the flow must be IPv4 TCP or UDP."""
    layer = balanced_layer(meta)
    if layer is None:
        raise ValueError("Rewritten flow must be IPv4 TCP or UDP")
    buf = bytearray(frame)
    l3, l4 = meta["l3_off"][layer], meta["l4_off"][layer]
    tcp = meta["l4_kind"][layer] == L4Kind.TCP
    old_ip, old_port = meta["flow"]["dst_ip"] & 0xFFFFFFFF, meta["flow"]["dport"]
    old_words, new_words = [old_ip >> 16, old_ip & 0xFFFF], [new_ip >> 16, new_ip & 0xFFFF]
    # IPv4 header (RFC 791): checksum at 10, destination at 16.
    _put(buf, l3 + 10, checksum_update(_get(buf, l3 + 10), old_words, new_words))
    _put(buf, l3 + 16, new_words[0])
    _put(buf, l3 + 18, new_words[1])
    # TCP checksum at 16 (RFC 9293), UDP at 6 (RFC 768); both cover the pseudo-header address.
    _put(buf, l4 + 2, new_port)
    at = l4 + (16 if tcp else 6)
    l4_csum = _get(buf, at)
    update = checksum_update if tcp else udp_checksum_update
    _put(buf, at, update(l4_csum, old_words + [old_port], new_words + [new_port]))
    if meta["vxlan"] and layer == 1:
        # The inner IPv4 header's sum is unchanged; the inner segment changed by
        # old address - new address (its checksum absorbed the pseudo-header change) or, for
        # UDP without a checksum, by the port change alone.
        outer = meta["l4_off"][0] + 6
        if not tcp and l4_csum == 0:
            new_outer = udp_checksum_update(_get(buf, outer), [old_port], [new_port])
        else:
            new_outer = udp_checksum_update(_get(buf, outer), new_words, old_words)
        _put(buf, outer, new_outer)
    return bytes(buf)


def strip_udp_checksum(frame, meta):
    """``frame`` with the flow's UDP checksum set to 0 ("none", RFC 768), the outer VXLAN UDP
    checksum (if not 0) updated to match; for traffic that exercises the zero-checksum rules."""
    layer = balanced_layer(meta)
    if layer is None or meta["l4_kind"][layer] != L4Kind.UDP:
        raise ValueError("Stripped flow must be IPv4 UDP")
    buf = bytearray(frame)
    at = meta["l4_off"][layer] + 6
    old = _get(buf, at)
    _put(buf, at, 0)
    if meta["vxlan"] and layer == 1:
        outer = meta["l4_off"][0] + 6
        _put(buf, outer, udp_checksum_update(_get(buf, outer), [old], [0]))
    return bytes(buf)


class LoadBalancerModel(TaskModel):
    config_class = LoadBalancerConfig

    def configure(self, config):
        super().configure(config)
        self.table = config.table(self.params)

    def matches(self, meta):
        """Whether the LB rewrites this packet (the skip rule already passed)."""
        c = self.config
        flow = meta["flow"]
        return (c.enabled and balanced_layer(meta) is not None
                and flow["dst_ip"] == c.vip
                and (c.port is None or flow["dport"] == c.port)
                and (c.proto is None or flow["proto"] == c.proto))

    def backend_of(self, meta):
        """(address, port) of the backend: entry ``flow_hash mod M`` of the lookup table."""
        backend = self.config.backends[self.table[meta["flow_hash"] % len(self.table)]]
        return backend.ip, backend.port or meta["flow"]["dport"]

    def apply(self, frame, meta):
        if not self.matches(meta):
            return None
        ip, port = self.backend_of(meta)
        frame = rewrite_destination(frame, meta, ip, port)
        meta["flow"]["dst_ip"] = ip
        meta["flow"]["dport"] = port
        return frame, meta

    def aim(self, rng, frames, share):
        """Send ``share`` of the IPv4 TCP/UDP frames to the VIP (and its port, mostly), so
        that random traffic exercises the LB; checksums stay valid."""
        parser = ParserModel(self.header_bytes)
        c = self.config
        out = []
        for frame in frames:
            meta = parser.parse(frame)
            layer = balanced_layer(meta)
            if rng.random() < share and not skips(meta) and layer is not None:
                port = c.port if c.port is not None and rng.random() < 0.9 else \
                    meta["flow"]["dport"]
                frame = rewrite_destination(frame, meta, c.vip, port)
                # Generated UDP always carries a checksum; a quarter go without (RFC 768).
                if meta["l4_kind"][layer] == L4Kind.UDP and rng.random() < 0.25:
                    frame = strip_udp_checksum(frame, parser.parse(frame))
            out.append(frame)
        return out

    def test_case(self, rng, n, malformed):
        config = LoadBalancerConfig.random(rng, self.params)
        self.configure(config)
        # Repeated flows (so each flow's packets must agree on a backend), VXLAN packets with
        # and without an outer UDP checksum.
        frames = light_frames(rng, n, malformed, flows=64, vxlan_checksum=None)
        return config, self.aim(rng, frames, 0.6)

    def saturation_case(self, rng, n, size):
        config = LoadBalancerConfig.random(rng, self.params)
        self.configure(config)
        # VXLAN (from 92 bytes on) with outer checksums: inner UDP flows make the output wait
        # for their note, which the FIFO must absorb without a bubble at the input.
        frames = exact_size_frames(rng, n, size, kinds=("ipv4_udp", "ipv4_tcp", "vxlan"),
                                   vxlan_checksum=True)
        return config, self.aim(random.Random(size), frames, 1.0)

    # --- moving state between the hardware and the model ---------------------------------

    def load_hw_tables(self, values):
        """Beyond the counters the LB keeps only configuration: the lookup ``table`` and the
        ``backends`` memories, which the model has from ``configure`` (as acl.py its rules);
        they are checked to be that configuration. At a packet boundary the pipeline is
        empty: no packet holds a backend it read before the stop."""
        # (A boundary map leaves both out: they are configuration, restored by its registers.)
        for slot, (got, want) in enumerate(zip(values.get(self.hw("table"), self.table),
                                               self.table)):
            if got != want:
                raise StateBridgeError(
                    f"LB table slot {slot} holds backend {got} in the hardware but {want} in "
                    f"the model's configuration: configure the model as the hardware")
        for index, b in enumerate(self.config.backends):
            if self.hw("backends") not in values:
                break
            got = values[self.hw("backends")][index]
            if got != b.ip << 16 | b.port:
                raise StateBridgeError(
                    f"LB backend {index} is {got:#014x} in the hardware but "
                    f"{b.ip << 16 | b.port:#014x} in the model's configuration: configure the "
                    f"model as the hardware")

    async def verify_hardware(self, access):
        """The backend slots and the whole lookup table, read back."""
        problems = []
        for index, b in enumerate(self.config.backends):
            await access.write("backend_index", index)
            await access.write("backend_read", 1)
            got = await access.read("backend_data")
            if got != b.ip << 16 | b.port:
                problems.append(f"backend {index}: {got:#014x}, model {b.ip << 16 | b.port:#014x}")
        for slot, want in enumerate(self.table):
            await access.write("table_entry", slot << 8)
            await access.write("table_read", 1)
            got = await access.read("table_data")
            if got != want:
                problems.append(f"table slot {slot}: backend {got}, model {want}")
        return problems
