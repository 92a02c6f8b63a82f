"""Checksum verification (``csum_verify``) and checksum offload (``csum_offload``) NTs.

Which checksums. Every IP header the parser found, outer (layer 0) and, for VXLAN, inner
(layer 1): the IPv4 header checksum (RFC 791), and the TCP or UDP checksum when the parser
parsed that header, with the pseudo-header of RFC 768 / RFC 9293 section 3.1 (IPv4) or RFC 8200
section 8.1 (IPv6). The L4 checksum covers the bytes from the L4 header to the end of the IP
datagram (total length, or 40 + payload length), not Ethernet padding after it; the pseudo-
header length is that byte count. An L4 checksum whose field lies past the datagram's end is
not handled. Fragments carry no parsed L4 header (a first fragment's checksum covers the whole
datagram, which no single frame holds): only their IPv4 header checksum is handled.

UDP checksum 0. Over IPv4 it means "no checksum" (RFC 768): not checked, and left 0 by the
offload. Over IPv6 it is invalid (RFC 8200 section 8.1), except on a VXLAN packet's outer UDP
header, which RFC 7348 section 5 says should be sent as 0 and RFC 6935 allows over IPv6 for
tunnels: not checked and left 0 there too.

``csum_verify`` counts good and bad checksums of each kind (per checksum: a VXLAN packet can
add two IPv4 and two L4 results) and, with ``drop_bad`` set, drops a packet with any bad one.
The verdict is known only after the last byte, and a drop must be marked on every beat from the
first (contract rule 2), so the NT stores and forwards each packet. The alternative, counting
without a drop option, would stream with no buffer; but a verifier that cannot drop what it
finds bad leaves the host to filter again, and the store-and-forward path is the one
``csum_offload`` needs anyway, so both share it.

``csum_offload`` computes and writes the IPv4 header checksum and the TCP and UDP checksums
(each kind enabled by a bit of ``fill``), so packets leave with correct checksums whatever they
arrived with. For VXLAN the inner checksums are written first and the outer UDP checksum (when
not left 0) covers the inner frame as it leaves.

Outcomes that are not checksums: packets with a parse error flag or already dropped (contract
rule 3), with ``length_error`` (the IP length claims bytes the frame lacks, so the sum cannot
be formed) or ``keep_error``, frames longer than ``max_frame_bytes`` (counted in ``oversize``),
and packets with nothing to check or fill all pass unchanged and count as skipped.

The gateware, its timing and its sums are :mod:`supernic.hw.nt.checksum`.
"""

from dataclasses import dataclass

from ..registers import R, RW, Register
from .base import ConfigError, Param, Scope, TaskConfig, TaskDescription, csr_item

__all__ = [
    "ChecksumVerifyDescription", "ChecksumOffloadDescription", "VerifyConfig", "OffloadConfig",
    "FRAME_CHOICES", "FILL_BITS",
]

FRAME_CHOICES = (1536, 2048, 4096, 9216, 16384)   # multiples of 128: whole beats at any width
FILL_BITS = {"ipv4": 0, "tcp": 1, "udp": 2}


def _check_table(kind, raw, known):
    if not isinstance(raw, dict):
        raise ConfigError(f"nt {kind}: config must be a table, not {raw!r}")
    unknown = set(raw) - set(known)
    if unknown:
        raise ConfigError(f"nt {kind}: unknown config key {sorted(unknown)[0]!r} "
                          f"(known: {', '.join(sorted(known))})")


def _flag(kind, raw, key, default):
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"nt {kind}: {key} must be true or false, not {value!r}")
    return value


@dataclass
class VerifyConfig(TaskConfig):
    drop_bad: bool = False

    @classmethod
    def from_dict(cls, kind, params, raw):
        _check_table(kind, raw, ("drop_bad",))
        return cls(_flag(kind, raw, "drop_bad", False))

    def register_writes(self, params):
        return [("drop_bad", int(self.drop_bad))]

    @classmethod
    def random(cls, rng, params):
        return cls(rng.random() < 0.5)


@dataclass
class OffloadConfig(TaskConfig):
    ipv4: bool = True
    tcp: bool = True
    udp: bool = True

    @classmethod
    def from_dict(cls, kind, params, raw):
        _check_table(kind, raw, FILL_BITS)
        return cls(**{k: _flag(kind, raw, k, True) for k in FILL_BITS})

    @property
    def fill(self):
        return sum(int(getattr(self, k)) << bit for k, bit in FILL_BITS.items())

    def register_writes(self, params):
        return [("fill", self.fill)]

    @classmethod
    def random(cls, rng, params):
        # Mostly everything on; sometimes one kind off, so the enables are exercised.
        off = rng.choice([None, None, None, "ipv4", "tcp", "udp"])
        return cls(**{k: k != off for k in FILL_BITS})


class _ChecksumDescription(TaskDescription):
    """What the two checksum NTs share: one store-and-forward engine, which ``verifies`` sets
    to verify (``True``) or fill (``False``)."""
    scope = Scope.PACKET
    verifies = None
    params = (Param("max_frame_bytes", 9216, choices=FRAME_CHOICES,
                    doc="Longest frame stored whole; longer ones pass unchanged (oversize)"),)

    @classmethod
    def shared_state(cls, params):
        # Every counter is its register, incremented in place; nothing else crosses packets
        # (each packet's checksums depend on that packet alone).
        return {**super().shared_state(params),
                **{r.name: csr_item(r.name) for r in cls.task_registers(params)
                   if r.access is R}}


class ChecksumVerifyDescription(_ChecksumDescription):
    kind = "csum_verify"
    doc = "Checksum verifier: IPv4 header, TCP and UDP checksums counted, bad ones optionally"
    modifies = False
    reads_payload = True   # the L4 sum covers the payload: a cipher before it breaks the check
    verifies = True
    type_id = 0x43534D56  # 'CSMV'
    config = VerifyConfig
    model = "checksum_offload:ChecksumVerifyModel"

    @classmethod
    def task_registers(cls, params):
        regs = [Register("drop_bad", 1, RW, doc="1: drop packets with a bad checksum")]
        for kind, what in (("ipv4", "IPv4 header"), ("tcp", "TCP"), ("udp", "UDP")):
            regs += [Register(f"{kind}_good", 64, R, doc=f"{what} checksums that verified"),
                     Register(f"{kind}_bad", 64, R, doc=f"{what} checksums that failed")]
        regs += [
            Register("udp_unchecked", 64, R, doc="UDP checksums of 0 that mean none"),
            Register("oversize", 64, R, doc="Frames longer than max_frame_bytes, passed"),
        ]
        return regs


class ChecksumOffloadDescription(_ChecksumDescription):
    kind = "csum_offload"
    doc = "Checksum offload: IPv4 header, TCP and UDP checksums computed and written."
    modifies = True
    seals_payload = True   # rewriting the payload after it would leave its checksums stale
    verifies = False
    type_id = 0x43534D4F  # 'CSMO'
    config = OffloadConfig
    model = "checksum_offload:ChecksumOffloadModel"

    @classmethod
    def task_registers(cls, params):
        return [
            Register("fill", 3, RW, reset=0b111,
                     doc="Checksums to write: bit 0 IPv4 header, 1 TCP, 2 UDP"),
            Register("ipv4_filled", 64, R, doc="IPv4 header checksums written"),
            Register("tcp_filled", 64, R, doc="TCP checksums written"),
            Register("udp_filled", 64, R, doc="UDP checksums written"),
            Register("oversize", 64, R, doc="Frames longer than max_frame_bytes, passed"),
        ]
