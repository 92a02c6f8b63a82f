"""ChaCha20 payload encryption (RFC 8439 §2.4): the NT that reads and writes the whole payload.

What it does. Every packet that applies has the ChaCha20 keystream XORed over its payload,
from ``meta.payload_off`` (the end of the innermost header the parser walked: the TCP or UDP
header, or for VXLAN the tenant's inner TCP or UDP header) to the end of the frame. Headers,
and the metadata, leave unchanged. Encryption and decryption are the same operation, so a
second instance with the same key, prefix and packet sequence decrypts.

Which packets apply: the NT is enabled, the contract's skip rule does not skip the packet
(dropped, ``truncated``, ``malformed``, ``runt``), it is not an IPv4 ``fragment`` (a later
fragment has no L4 header, and the parts of one datagram could not be decrypted apart), the
walk did not stop early (``too_deep``: ``payload_off`` would point into unparsed headers),
and the innermost layer (layer 1 when ``meta.vxlan``, else 0) has a TCP or UDP header. So
IPv4 and IPv6 TCP/UDP (under VLAN tags or in VXLAN) apply; ARP, ICMP, GRE, IPv6 with
extension headers and non-IP frames pass through, counted in ``skipped``. Ethernet padding
after the IP datagram is part of the frame and is encrypted too.

Nonce scheme (RFC 8439 §2.3/§2.4): the ``s``-th packet the NT encrypts since reset (``s`` from
0, counted by the NT: the ``next_seq`` register) uses

* nonce = ``nonce_prefix`` (4 bytes, little-endian) || ``s`` (8 bytes, little-endian), i.e.
  state words 13, 14, 15 = ``nonce_prefix``, ``s`` low half, ``s`` high half;
* block counter 1, 2, ... over its payload (block 0 is left for a Poly1305 key, §2.4/§2.6).

So within a run no two packets share a (key, nonce, counter) triple: ``s`` grows by one per
encrypted packet and does not wrap in 2**64 packets. Limits, stated plainly: ``s`` restarts at
0 after a reset, so software must give each run a new ``nonce_prefix`` (e.g. a boot counter)
or a new key; and a receiver can only decrypt if it knows ``s``: here it must see the same
sequence of packets (e.g. a second instance of this NT that sees every packet, in order, and
decides applicability on the unchanged headers). A real protocol would carry ``s`` in the
packet, as ESP carries its IV beside ChaCha20 (RFC 7634 §2), and authenticate the packet
(Poly1305, RFC 8439 §2.8); this NT does neither: it is a stream cipher, not a secure channel.
The L4 checksum is left as it is, so it covers the plaintext: a receiver checks it after
decrypting, and middleboxes that verify checksums will see it fail.

Fail closed: ``enable`` is 0 after reset, and while it is 0 the packets that would be
encrypted are dropped (``meta.drop``, counted in ``dropped``) rather than sent in the clear.
:meth:`ChaCha20Config.register_writes` clears it, writes the key and prefix, then sets it, so
no packet is encrypted under half a new key. Whether a packet is encrypted is decided once,
at its first beat, and travels with the packet.

Registers (after the standard counters): ``enable``; ``key0``..``key3`` (key bytes
``8i..8i+7``, little-endian, so ``key0`` low word is state word 4); ``nonce_prefix``;
``next_seq`` (R); ``blocks`` (R, keystream blocks computed).

The gateware, and its measured throughput, is :mod:`supernic.hw.nt.chacha20`.
"""

from dataclasses import dataclass

from ..registers import R, RW, Register
from .base import ConfigError, Param, Scope, TaskConfig, TaskDescription

__all__ = ["ChaCha20TaskDescription", "ChaCha20Config", "BLOCK_BYTES", "ROUNDS",
           "ROUNDS_PER_CYCLE", "KEY_REGISTERS"]

#: A keystream block (RFC 8439 §2.3).
BLOCK_BYTES = 64
#: ChaCha20 has 20 rounds (RFC 8439 §2.3).
ROUNDS = 20
#: The choices for ``rounds_per_cycle``: the divisors of 20.
ROUNDS_PER_CYCLE = (1, 2, 4, 5, 10, 20)
#: The key's registers, 8 bytes each (see Registers above).
KEY_REGISTERS = ("key0", "key1", "key2", "key3")
_SETTINGS = ("enable", "key", "nonce_prefix")


@dataclass(frozen=True)
class ChaCha20Config(TaskConfig):
    """``key``: 32 bytes; ``nonce_prefix``: 32-bit; ``enable``: encrypt (else drop, see the
    module docstring). In a chain specification: ``key = "<64 hex digits>"``,
    ``nonce_prefix = <int>``, ``enable = true``."""
    key: bytes
    nonce_prefix: int = 0
    enable: bool = True

    @classmethod
    def from_dict(cls, kind, params, raw):
        if not isinstance(raw, dict):
            raise ConfigError(f"nt {kind}: configuration must be a table, not {raw!r}")
        for name in raw:
            if name not in _SETTINGS:
                raise ConfigError(f"nt {kind}: unknown setting {name!r} "
                                  f"(known: {', '.join(_SETTINGS)})")
        key = raw.get("key")
        try:
            key_bytes = bytes.fromhex(key) if isinstance(key, str) else None
        except ValueError:
            key_bytes = None
        if key_bytes is None or len(key_bytes) != 32:
            raise ConfigError(f"nt {kind}: key must be 64 hex digits (32 bytes), not {key!r}")
        prefix = raw.get("nonce_prefix", 0)
        if (not isinstance(prefix, int) or isinstance(prefix, bool)
                or not 0 <= prefix < 2 ** 32):
            raise ConfigError(f"nt {kind}: nonce_prefix must be an integer from 0 to "
                              f"0xffffffff, not {prefix!r}")
        enable = raw.get("enable", True)
        if not isinstance(enable, bool):
            raise ConfigError(f"nt {kind}: enable must be true or false, not {enable!r}")
        return cls(key_bytes, prefix, enable)

    def register_writes(self, params):
        # Disable first: while the key is half written, packets are dropped, not encrypted.
        writes = [("enable", 0)]
        for i, name in enumerate(KEY_REGISTERS):
            writes.append((name, int.from_bytes(self.key[8 * i:8 * i + 8], "little")))
        writes.append(("nonce_prefix", self.nonce_prefix))
        writes.append(("enable", int(self.enable)))
        return writes

    @classmethod
    def random(cls, rng, params):
        return cls(rng.randbytes(32), rng.getrandbits(32), True)


class ChaCha20TaskDescription(TaskDescription):
    kind = "chacha20"
    doc = "ChaCha20 (RFC 8439) over each TCP/UDP payload; nonce = prefix || packet sequence."
    scope = Scope.PACKET
    modifies = True
    # It rewrites the payload without interpreting it (a receiver-side instance that decrypts
    # may follow an encrypting one), and checksums sealed before it would go stale.
    writes_payload = True
    type_id = int.from_bytes(b"CHAC", "big")
    params = (
        Param("rounds_per_cycle", 4, choices=ROUNDS_PER_CYCLE,
              doc="ChaCha rounds computed per cycle (a divisor of 20)"),
        Param("pipelined", False, choices=(False, True),
              doc="One stage per 20/rounds_per_cycle rounds, a block a cycle (else iterative)"),
    )
    config = ChaCha20Config
    model = "chacha20:ChaCha20Model"

    @classmethod
    def shared_state(cls, params):
        # The standard counters; the next nonce and the block counter; the in-flight guards
        # a boundary capture must find idle.
        return {**super().shared_state(params), "seq": "seq", "blocks": "blocks", "in_first": "in_first",
                "in_flight": ["outstanding", "delay.inner_level", "delay.r_rdy", "o__valid"]}

    @classmethod
    def task_registers(cls, params):
        return [
            Register("enable", 1, RW,
                     doc="1: encrypt applicable packets; 0 (reset): drop them (fail closed)"),
            *(Register(name, 64, RW, doc=f"Key bytes {8 * i}..{8 * i + 7}, little-endian")
              for i, name in enumerate(KEY_REGISTERS)),
            Register("nonce_prefix", 32, RW, doc="Nonce bytes 0..3 (little-endian)"),
            Register("next_seq", 64, R,
                     doc="Sequence number (nonce bytes 4..11) of the next encrypted packet"),
            Register("blocks", 64, R, doc="Keystream blocks computed"),
        ]

    @classmethod
    def cycles_per_beat(cls, data_width, params):
        # An iterative core yields a 64-byte block every 20 / rounds_per_cycle cycles; a beat
        # of data_width bits needs data_width / 512 of a block (measured: 0.20 beats a cycle at
        # 512 bits with the default 4 rounds a cycle, 1.00 at 64 bits).
        p = cls.check_params(params)
        if p["pipelined"]:
            return 1.0
        interval = ROUNDS // p["rounds_per_cycle"]
        return max(1.0, interval * data_width / (8 * BLOCK_BYTES))
