"""Model of the static IPv4 NAT (hw/nt/nat.py): the rules of its description's docstring
(sw/desc/nt/nat.py), written plainly.

The checksum arithmetic is the hardware's, term for term (RFC 1624 eqn. 3 over the same word
pairs, :mod:`.checksum`), so the two agree bit for bit, including the 0x0000/0xFFFF choice; the
tests check the results against scapy's full recomputation.
"""

import random

from ...desc.meta import L3Kind, L4Kind
from ...desc.nt.nat import NAT_TABLES, PROTO_TCP, PROTO_UDP, NatConfig, NatEntry
from ...hw.nt.nat import _entry_layout
from ..counter_bank import bank_counts, store_bank_counts
from ..layout_codec import decode
from ..parser_model import ParserModel
from ..traffic import random_packets
from .base import StateBridgeError, TaskModel, exact_size_frames
from .checksum import checksum_update, udp_checksum_update

__all__ = ["NatModel", "TEST_SIZES", "draw_frames"]

#: Frame sizes of the random-traffic test: mostly small and medium, some up to 9,000 bytes
#: (random_packets' "mixed" at 64 bits costs too many cycles for the test budget).
TEST_SIZES = ((0.80, (60, 256)), (0.16, (257, 1500)), (0.03, (1501, 4000)), (0.01, (4001, 9000)))


def _split(value):
    return [value >> 16, value & 0xFFFF]


def draw_frames(rng, n, malformed, sizes=TEST_SIZES, **kw):
    """``n`` frames from random_packets, sizes drawn from ``sizes`` ((share, (lo, hi)), ...)."""
    frames = []
    for i, (share, size) in enumerate(sizes):
        count = round(n * share) if i < len(sizes) - 1 else n - len(frames)
        frames += [f for _, f in random_packets(count, rng.randrange(2 ** 32), size,
                                                malformed, **kw)]
    rng.shuffle(frames)
    return frames


def _slot_entry(slot):
    """The :class:`NatEntry` a hardware slot (its fields) matches and rewrites as, or ``None``
    for an invalid one; fields its flags leave unused are ignored (hw/nt/nat.py stage 1)."""
    if not slot["valid"]:
        return None
    return NatEntry(slot["addr"], slot["new_addr"],
                    slot["proto"] if slot["match_proto"] else None,
                    slot["port"] if slot["match_port"] else None,
                    slot["new_port"] if slot["rewrite_port"] else None)


class NatModel(TaskModel):
    config_class = NatConfig

    def __init__(self, params, data_width=512, header_bytes=256):
        super().__init__(params, data_width, header_bytes)
        self.stats.update({"snat_hits": 0, "dnat_hits": 0, "misses": 0})

    def configure(self, config):
        super().configure(config)
        self.hits = {t: [0] * self.params[f"{t}_entries"] for t in NAT_TABLES}

    def _lookup(self, table, addr, proto, port, has_l4):
        for index, entry in enumerate(getattr(self.config, table)):
            if entry.matches(addr, proto, port, has_l4):
                self.hits[table][index] += 1
                return entry
        return None

    def apply(self, frame, meta):
        layer = 1 if meta["vxlan"] else 0
        if meta["l3_kind"][layer] != L3Kind.IPV4:
            return None
        flow = meta["flow"]
        proto = flow["proto"]
        tcpudp = proto in (PROTO_TCP, PROTO_UDP)
        has_l4 = meta["l4_kind"][layer] != L4Kind.NONE
        fragment = meta["flags"]["fragment"]
        if tcpudp and not has_l4 and not fragment:
            return None     # TCP/UDP header past the parser's window: checksum unreachable

        def word(pos):
            return int.from_bytes(frame[pos:pos + 2], "big") if pos + 2 <= len(frame) else None

        l3 = meta["l3_off"][layer]
        l4 = meta["l4_off"][layer] if has_l4 else meta["payload_off"]
        l4_csum_at = l4 + (16 if proto == PROTO_TCP else 6)
        l4_csum = word(l4_csum_at)
        if has_l4:
            l4_here = tcpudp and l4_csum is not None
        else:
            frag, total_len = word(l3 + 6), word(l3 + 2)
            l4_here = (tcpudp and fragment and frag is not None and frag & 0x1FFF == 0
                       and l4 > l3 and l4_csum is not None and total_len is not None
                       and l4_csum_at + 2 <= l3 + total_len)

        src, dst, sport, dport = flow["src_ip"], flow["dst_ip"], flow["sport"], flow["dport"]
        snat = self._lookup("snat", src, proto, sport, has_l4)
        dnat = self._lookup("dnat", dst, proto, dport, has_l4)
        if snat is None and dnat is None:
            self.stats["misses"] += 1
            return frame, meta
        self.stats["snat_hits"] += snat is not None
        self.stats["dnat_hits"] += dnat is not None
        new_src = snat.to if snat else src
        new_dst = dnat.to if dnat else dst
        new_sport = snat.to_port if snat and snat.to_port is not None else sport
        new_dport = dnat.to_port if dnat and dnat.to_port is not None else dport

        addr_old, addr_new = _split(src) + _split(dst), _split(new_src) + _split(new_dst)
        ip_csum_old = word(l3 + 10)
        ip_csum = checksum_update(ip_csum_old, addr_old, addr_new)
        l4_old_words, l4_new_words = addr_old + [sport, dport], addr_new + [new_sport, new_dport]
        l4_csum_new = l4_csum or 0
        if l4_here:
            update = checksum_update if proto == PROTO_TCP else udp_checksum_update
            l4_csum_new = update(l4_csum, l4_old_words, l4_new_words)

        out = bytearray(frame)

        def put(pos, value):
            out[pos:pos + 2] = value.to_bytes(2, "big")

        put(l3 + 10, ip_csum)
        if snat:
            out[l3 + 12:l3 + 16] = new_src.to_bytes(4, "big")
            if snat.to_port is not None:
                put(l4, new_sport)
        if dnat:
            out[l3 + 16:l3 + 20] = new_dst.to_bytes(4, "big")
            if dnat.to_port is not None:
                put(l4 + 2, new_dport)
        if l4_here:
            put(l4_csum_at, l4_csum_new)
        if layer == 1:
            outer_at = meta["l4_off"][0] + 6
            outer = word(outer_at)
            if outer:
                # Every inner word that changed is in the outer UDP payload (RFC 1624 eqn. 3).
                old_l4 = l4_csum or 0
                put(outer_at, udp_checksum_update(
                    outer, addr_old + [ip_csum_old, sport, dport, old_l4],
                    addr_new + [ip_csum, new_sport, new_dport, l4_csum_new if l4_here
                                else old_l4]))
        if snat:
            flow["src_ip"], flow["sport"] = new_src, new_sport
        if dnat:
            flow["dst_ip"], flow["dport"] = new_dst, new_dport
        return bytes(out), meta

    # --- traffic that exercises the tables -----------------------------------------------

    def _flows(self, frames):
        parser = ParserModel(self.header_bytes)
        flows = []
        for frame in frames:
            meta = parser.parse(frame)
            layer = 1 if meta["vxlan"] else 0
            if meta["l3_kind"][layer] == L3Kind.IPV4:
                flows.append(meta["flow"])
        return flows

    def test_case(self, rng, n, malformed):
        # Repeating flows (so slots hit many packets), IPv4-heavy kinds, and VXLAN packets
        # with and without an outer UDP checksum.
        kinds = ("ipv4_udp", "ipv4_tcp", "ipv4_other", "ipv4_frag", "vxlan", "ipv6_udp", "arp")
        frames = draw_frames(rng, n, malformed, kinds=kinds, flows=24, vxlan_checksum=None)
        config = NatConfig.random(rng, self.params, self._flows(frames[:400]))
        return config, frames

    def saturation_case(self, rng, n, size):
        frames = exact_size_frames(rng, n, size, kinds=("ipv4_udp", "ipv4_tcp"), flows=16)
        return NatConfig.random(random.Random(size), self.params, self._flows(frames[:64])), \
            frames

    def counters(self):
        return dict(self.stats)

    # --- moving state between the hardware and the model ---------------------------------

    def load_hw_tables(self, values):
        """The per-slot hit counters (the ``hits`` counter bank, SNAT's slots then DNAT's). They count
        in stage 1 and the packet counters at the output, but at a packet boundary the
        pipeline is empty, so the two agree. The slots themselves (``snat{k}``/``dnat{k}``)
        are configuration, which the model takes from ``configure`` (as acl.py does its
        rules); they are checked to be that configuration."""
        for t in NAT_TABLES:
            entries = getattr(self.config, t)
            for k, item in enumerate(self.hw(t)):
                if item not in values:          # configuration, left out of a boundary map
                    continue
                slot = decode(_entry_layout(), values[item])
                entry = entries[k] if k < len(entries) else None
                if _slot_entry(slot) != entry:
                    raise StateBridgeError(
                        f"NAT {t}[{k}] holds {_slot_entry(slot)} in the hardware but {entry} "
                        f"in the model's configuration: configure the model as the hardware")
        sizes = [self.params[f"{t}_entries"] for t in NAT_TABLES]
        counts = bank_counts(values, self.hw("hits"), sum(sizes))     # SNAT's slots first
        self.hits = {t: counts[sum(sizes[:n]):sum(sizes[:n + 1])]
                     for n, t in enumerate(NAT_TABLES)}

    def store_hw_tables(self, values):
        store_bank_counts(values, self.hw("hits"),
                          [c for t in NAT_TABLES for c in self.hits[t]])

    async def verify_hardware(self, access):
        problems = []
        for t, table in enumerate(NAT_TABLES):
            entries = getattr(self.config, table)
            for index, hits in enumerate(self.hits[table]):
                await access.write("entry_table", t)
                await access.write("entry_index", index)
                got = {name: await access.read(name)
                       for name in ("sel_match", "sel_rewrite", "sel_hits")}
                entry = entries[index] if index < len(entries) else None
                want = {"sel_match": entry.match_word() if entry else 0,
                        "sel_rewrite": entry.rewrite_word() if entry else 0, "sel_hits": hits}
                if entry is None:
                    got["sel_match"] &= 1 << 56         # an empty slot: only "valid" matters
                    got["sel_rewrite"] = 0
                if got != want:
                    problems.append(f"{table}[{index}]: hardware {got}, model {want}")
        return problems
