"""Models of ``vlan_push`` and ``vlan_pop`` (sw/desc/nt/vlan.py states the behaviour).

Plain byte operations on the frame and the metadata dict; the shared pieces (offsets moved by a
header that comes or goes, the traffic mix) serve the VXLAN models too.
"""

import struct

from ...desc.meta import RUNT_BYTES, TenantKind
from ...desc.nt.vlan import MAC_BYTES, TAG_BYTES, VlanPopConfig, VlanPushConfig
from ..traffic import random_packets
from .base import TaskModel, exact_size_frames

__all__ = ["VlanPushModel", "VlanPopModel", "move_offsets", "pad_frame", "light_mix",
           "vid_of"]


def move_offsets(meta, delta):
    """Every offset the parser set (non-zero), ``payload_off`` and ``min_len`` moved by
    ``delta``."""
    for key in ("l3_off", "l4_off"):
        meta[key] = [v + delta if v else 0 for v in meta[key]]
    for key in ("inner_l2_off", "payload_off", "min_len"):
        meta[key] = meta[key] + delta if meta[key] else 0


def pad_frame(frame):
    """Zero-padded to the IEEE 802.3 minimum without FCS."""
    return frame + bytes(max(0, RUNT_BYTES - len(frame)))


def vid_of(frame, tci_offset):
    """The 12-bit VID of the IEEE 802.1Q TCI at ``tci_offset``."""
    return int.from_bytes(frame[tci_offset:tci_offset + 2], "big") & 0x0FFF


def light_mix(rng, n, malformed, **kw):
    """``n`` random frames (``malformed`` of them broken): 85% of 60-300 bytes, 14% up to
    1,600, 1% jumbo frames up to 9,000, in random order. Lighter than the generator's "mixed"
    sizes so that 10,000 packets run in seconds at 64 bits, while still crossing every beat
    boundary and the large-frame paths."""
    counts = [(n * 85 // 100, (60, 300)), (n * 14 // 100, (301, 1600))]
    counts.append((n - sum(c for c, _ in counts), (1601, 9000)))
    frames = []
    for count, sizes in counts:
        frames += [f for _, f in random_packets(count, rng.randrange(2 ** 32), sizes, malformed,
                                                **kw)]
    rng.shuffle(frames)
    return frames


class VlanPushModel(TaskModel):
    config_class = VlanPushConfig

    def apply(self, frame, meta):
        if meta["vlan_count"] >= 2 or meta["payload_off"] + TAG_BYTES > self.header_bytes:
            return None
        c = self.config
        out = frame[:MAC_BYTES] + struct.pack("!HH", c.tpid, c.tci) + frame[MAC_BYTES:]
        move_offsets(meta, TAG_BYTES)
        meta["vlan_count"] += 1
        meta["vid2"] = meta["vid"]
        meta["vid"] = c.vid
        if not meta["vxlan"]:  # a VNI outranks a VID as the tenant key
            meta["tenant_kind"], meta["tenant_key"] = int(TenantKind.VLAN), c.vid
        return out, meta

    def test_case(self, rng, n, malformed):
        config = self.config_class.random(rng, self.params)
        return config, light_mix(rng, n, malformed, vlan_counts=(0, 0, 1, 1, 2, 3))

    def saturation_case(self, rng, n, size):
        return (self.config_class.random(rng, self.params),
                exact_size_frames(rng, n, size, vlan_counts=(0, 1)))


class VlanPopModel(TaskModel):
    config_class = VlanPopConfig

    def apply(self, frame, meta):
        count = meta["vlan_count"]
        if count == 0:
            return None
        out = pad_frame(frame[:MAC_BYTES] + frame[MAC_BYTES + TAG_BYTES:])
        # Tags end where IP starts, or where the walk ended when no IP follows them.
        tags_end = meta["l3_off"][0] if meta["l3_kind"][0] else meta["payload_off"]
        move_offsets(meta, -TAG_BYTES)
        if count == 3:
            meta["vlan_count"] = 3 if (tags_end - 14) >> 2 >= 4 else 2
            meta["vid"], meta["vid2"] = meta["vid2"], vid_of(frame, 22)
        else:
            meta["vlan_count"] = count - 1
            meta["vid"], meta["vid2"] = (meta["vid2"] if count == 2 else 0), 0
        if not meta["vxlan"]:
            tagged = meta["vlan_count"] != 0
            meta["tenant_kind"] = int(TenantKind.VLAN if tagged else TenantKind.NONE)
            meta["tenant_key"] = meta["vid"] if tagged else 0
        return out, meta

    def test_case(self, rng, n, malformed):
        return VlanPopConfig(), light_mix(rng, n, malformed, vlan_counts=(0, 1, 1, 2, 2, 3, 4))

    def saturation_case(self, rng, n, size):
        return VlanPopConfig(), exact_size_frames(rng, n, size, vlan_counts=(1, 2))

