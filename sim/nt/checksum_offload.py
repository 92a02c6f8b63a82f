"""Models of the checksum NTs (sw/desc/nt/checksum.py): ``csum_verify`` and ``csum_offload``.

Deliberately plain: each checksum is summed over the frame's bytes with
:func:`~.checksum.ones_sum`, in one go, by the rules in the description's docstring
(:mod:`supernic.desc.nt.checksum`). The hardware's binary sums folded at the end give the same
16-bit values (RFC 1071 section 2(B)), and scapy checks the offload's results in the tests.

:func:`corrupt_checksums` spoils checksum fields of test frames so that the verifier has bad
checksums to find and the offload has wrong ones to mend; :func:`scapy_recomputed` is the
independent reference the tests hold the NTs' checksums to.
"""

import random
import struct

from ...desc.nt.checksum import OffloadConfig, VerifyConfig
from ...desc.meta import L3Kind, L4Kind
from ..parser_model import ParserModel
from .base import TaskModel, exact_size_frames
from .checksum import ones_add, ones_sum, words16
from .nat import draw_frames

__all__ = ["ChecksumVerifyModel", "ChecksumOffloadModel", "checksum_fields",
           "corrupt_checksums", "layer_checksums", "scapy_recomputed", "scapy_round_trips"]

PROTO = {L4Kind.TCP: 6, L4Kind.UDP: 17}
KINDS = ("ipv4_udp", "ipv4_tcp", "ipv4_other", "ipv4_frag", "ipv6_udp", "ipv6_tcp",
         "ipv6_other", "vxlan", "eth")


def _word(frame, pos):
    return int.from_bytes(frame[pos:pos + 2], "big")


def layer_checksums(frame, meta, layer):
    """What one IP layer holds, or None: ``hdr`` (IPv4: header sum with the checksum, its
    position and value) and ``l4`` (a handled TCP/UDP checksum: the sum of segment and
    pseudo-header with the checksum, its position, value, kind and whether a 0 is allowed)."""
    kind = meta["l3_kind"][layer]
    if kind == L3Kind.NONE:
        return None
    v6 = kind == L3Kind.IPV6
    l3 = meta["l3_off"][layer]
    ip_end = l3 + (40 if v6 else 0) + _word(frame, l3 + (4 if v6 else 2))
    out = {"hdr": None, "l4": None}
    if not v6:
        ihl = frame[l3] & 0x0F
        out["hdr"] = {"sum": ones_sum(words16(frame[l3:l3 + 4 * ihl])), "at": l3 + 10,
                      "value": _word(frame, l3 + 10)}
    l4_kind = meta["l4_kind"][layer]
    if l4_kind != L4Kind.NONE:
        l4 = meta["l4_off"][layer]
        at = l4 + (16 if l4_kind == L4Kind.TCP else 6)
        if at + 2 <= ip_end:
            addrs = frame[l3 + 8:l3 + 40] if v6 else frame[l3 + 12:l3 + 20]
            # RFC 768 / RFC 9293 3.1 / RFC 8200 8.1: addresses, protocol, L4 byte count.
            total = ones_sum(words16(frame[l4:ip_end]) + words16(addrs)
                             + [(ip_end - l4) & 0xFFFF, PROTO[l4_kind]])
            value = _word(frame, at)
            udp = l4_kind == L4Kind.UDP
            zero_ok = udp and value == 0 and (not v6 or (layer == 0 and meta["vxlan"]))
            out["l4"] = {"sum": total, "at": at, "value": value, "udp": udp,
                         "zero": udp and value == 0, "zero_ok": zero_ok}
    return out


def checksum_fields(frame, meta):
    """Byte positions of the checksum fields the NTs handle (for test corruption)."""
    at = []
    for layer in (0, 1):
        info = layer_checksums(frame, meta, layer)
        if info:
            at += [info[k]["at"] for k in ("hdr", "l4") if info[k]]
    return at


def corrupt_checksums(rng, frames, share, header_bytes=256):
    """Frames with a random checksum field of about ``share`` of them set to 0, 0xFFFF or a
    random value; some frames also get Ethernet padding after the IP datagram."""
    parser = ParserModel(header_bytes)
    out = []
    for frame in frames:
        meta = parser.parse(frame)
        fields = checksum_fields(frame, meta)
        if fields and rng.random() < share:
            at = rng.choice(fields)
            value = rng.choice([0, 0xFFFF, rng.getrandbits(16), _word(frame, at) ^ 1])
            frame = frame[:at] + value.to_bytes(2, "big") + frame[at + 2:]
        if rng.random() < 0.05 and not any(meta["flags"].values()):
            frame += rng.randbytes(rng.randint(1, 40))    # trailer bytes, not in any sum
        out.append(frame)
    return out


def scapy_recomputed(frame):
    """``frame`` with every IPv4, TCP and UDP checksum recomputed by scapy (checksum field
    deleted, packet rebuilt). UDP checksums of 0 that mean "none" stay 0, and the L4 checksum
    of a fragment (which covers bytes the frame lacks) is left alone."""
    from scapy.all import IP, TCP, UDP, Ether, IPv6
    from scapy.layers.vxlan import VXLAN

    pkt = Ether(frame)
    layer, v6, fragment_ = pkt, False, False
    while layer:
        if isinstance(layer, IP):
            del layer.chksum
            v6, fragment_ = False, bool(layer.flags.MF or layer.frag)
        elif isinstance(layer, IPv6):
            v6, fragment_ = True, False
        elif isinstance(layer, (TCP, UDP)) and not fragment_:
            vxlan_outer = isinstance(layer, UDP) and isinstance(layer.payload, VXLAN)
            if not (isinstance(layer, UDP) and layer.chksum == 0 and (not v6 or vxlan_outer)):
                del layer.chksum
        layer = layer.payload
    return bytes(pkt)


def scapy_round_trips(frame):
    """Whether scapy rebuilds ``frame`` exactly: it re-encodes (or fails on) some random IPv4
    and TCP option bytes, and such frames cannot serve as a reference."""
    try:
        return scapy_recomputed(frame) == frame
    except (TypeError, ValueError, struct.error):  # scapy's own failures on odd options
        return False


class _ChecksumModel(TaskModel):
    # No state beyond the counters: each packet's checksums depend on that packet alone.
    extra_counters = ()

    def __init__(self, params, data_width=512, header_bytes=256):
        super().__init__(params, data_width, header_bytes)
        self.stats.update({name: 0 for name in self.extra_counters})

    def process(self, frame, meta):
        # Oversize is counted whatever else the packet is (the hardware cuts before knowing).
        if len(frame) > self.params["max_frame_bytes"]:
            self.stats["oversize"] += 1
        return super().process(frame, meta)

    def applies(self, frame, meta):
        flags = meta["flags"]
        return not (flags["length_error"] or flags["keep_error"]
                    or len(frame) > self.params["max_frame_bytes"])

    def test_case(self, rng, n, malformed):
        frames = draw_frames(rng, n, malformed, kinds=KINDS, vxlan_checksum=None)
        frames = corrupt_checksums(rng, frames, 0.3, self.header_bytes)
        return self.config_class.random(rng, self.params), frames

    def saturation_case(self, rng, n, size):
        frames = exact_size_frames(rng, n, size)
        return self.config_class.random(random.Random(size), self.params), frames

    def counters(self):
        return dict(self.stats)


class ChecksumVerifyModel(_ChecksumModel):
    config_class = VerifyConfig
    extra_counters = ("ipv4_good", "ipv4_bad", "tcp_good", "tcp_bad", "udp_good", "udp_bad",
                      "udp_unchecked", "oversize")

    def apply(self, frame, meta):
        if not self.applies(frame, meta):
            return None
        results = []
        for layer in (0, 1):
            info = layer_checksums(frame, meta, layer)
            if not info:
                continue
            if info["hdr"]:
                results.append(("ipv4", info["hdr"]["sum"] == 0xFFFF))
            l4 = info["l4"]
            if l4:
                if l4["zero_ok"]:
                    self.stats["udp_unchecked"] += 1
                else:
                    # A UDP 0 over IPv6 is bad whatever the sum says (RFC 8200 8.1).
                    results.append(("udp" if l4["udp"] else "tcp",
                                    l4["sum"] == 0xFFFF and not l4["zero"]))
        for kind, good in results:
            self.stats[f"{kind}_{'good' if good else 'bad'}"] += 1
        if not results:
            return None
        meta["drop"] = int(self.config.drop_bad and not all(g for _, g in results))
        return frame, meta


class ChecksumOffloadModel(_ChecksumModel):
    config_class = OffloadConfig
    extra_counters = ("ipv4_filled", "tcp_filled", "udp_filled", "oversize")

    def apply(self, frame, meta):
        if not self.applies(frame, meta):
            return None
        cfg = self.config
        out = bytearray(frame)
        layers = [layer_checksums(frame, meta, layer) for layer in (0, 1)]
        # Inner layer first: the outer UDP checksum covers the inner words as they leave.
        correction = []
        filled = False
        for layer in (1, 0):
            info = layers[layer]
            if not info:
                continue
            hdr, l4 = info["hdr"], info["l4"]
            if hdr and cfg.ipv4:
                new = ~ones_add(hdr["sum"], ~hdr["value"] & 0xFFFF) & 0xFFFF
                out[hdr["at"]:hdr["at"] + 2] = new.to_bytes(2, "big")
                self.stats["ipv4_filled"] += 1
                filled = True
                if layer == 1:
                    correction += [~hdr["value"] & 0xFFFF, new]
            if l4 and not l4["zero_ok"] and (cfg.udp if l4["udp"] else cfg.tcp):
                terms = [l4["sum"], ~l4["value"] & 0xFFFF] + (correction if layer == 0 else [])
                new = ~ones_sum(terms) & 0xFFFF
                if l4["udp"] and new == 0:
                    new = 0xFFFF        # RFC 768: a computed 0 is sent as all ones
                out[l4["at"]:l4["at"] + 2] = new.to_bytes(2, "big")
                self.stats["udp_filled" if l4["udp"] else "tcp_filled"] += 1
                filled = True
                if layer == 1:
                    correction += [~l4["value"] & 0xFFFF, new]
        if not filled:
            return None
        return bytes(out), meta
