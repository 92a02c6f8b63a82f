"""Reference model of the ChaCha20 NT: RFC 8439 §2.1-2.4 written out in plain Python.

Deliberately naive: the quarter round, the block function and the encryption are the RFC's
pseudo-code over Python integers, one 64-byte block at a time, with nothing shared with the
gateware. The model knows the NT's nonce scheme (see :mod:`supernic.desc.nt.chacha20`):

* the nonce of the ``s``-th packet the NT applies to (``s`` from 0, counted per NT since reset)
  is ``nonce_prefix`` (4 bytes, little-endian) followed by ``s`` (8 bytes, little-endian);
* its block counter starts at 1 (RFC 8439 §2.4: 0 is kept for a one-time Poly1305 key);
* the keystream is XORed from ``meta["payload_off"]`` to the end of the frame.

A packet applies when the NT is enabled, it is not skipped by the contract's rule (dropped,
truncated, malformed, runt), it is no fragment and its walk did not stop early (``too_deep``),
and its innermost layer (the VXLAN tenant's if ``meta["vxlan"]``) has a TCP or UDP header.

``counters()`` also gives ``next_seq`` and ``blocks``, the keystream blocks the hardware
computes: one for every ``64 // beat`` beats of a packet from the beat holding
``payload_off`` on, rounded up (whole beats count, so the last block may be partly unused).
"""

from ...desc.nt.chacha20 import ChaCha20Config
from .base import StateBridgeError, TaskModel
from ..traffic import build, random_spec

__all__ = ["quarter_round", "chacha20_block", "chacha20_encrypt", "packet_nonce", "applies",
           "ChaCha20Model", "TEST_SIZES"]

MASK32 = 0xFFFF_FFFF
#: RFC 8439 §2.3: "expand 32-byte k" as four little-endian words.
SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)

#: Frame sizes of the random-traffic test: (weight, low, high). Mostly small and medium, a few
#: jumbo frames; a 64-bit bench at the generator's default mix (about 700 bytes a frame) would
#: spend most of its time in cocotb on large frames.
TEST_SIZES = ((0.80, 60, 256), (0.18, 257, 1500), (0.02, 1501, 9000))


def _rotl32(x, n):
    return ((x << n) | (x >> (32 - n))) & MASK32


def quarter_round(state, a, b, c, d):
    """RFC 8439 §2.1/§2.2: the quarter round on words ``a, b, c, d`` of ``state``, in place."""
    state[a] = (state[a] + state[b]) & MASK32
    state[d] = _rotl32(state[d] ^ state[a], 16)
    state[c] = (state[c] + state[d]) & MASK32
    state[b] = _rotl32(state[b] ^ state[c], 12)
    state[a] = (state[a] + state[b]) & MASK32
    state[d] = _rotl32(state[d] ^ state[a], 8)
    state[c] = (state[c] + state[d]) & MASK32
    state[b] = _rotl32(state[b] ^ state[c], 7)


def chacha20_block(key: bytes, counter: int, nonce: bytes) -> bytes:
    """RFC 8439 §2.3: the 64-byte block for a 32-byte key, a 32-bit counter, a 12-byte nonce."""
    if len(key) != 32:
        raise ValueError(f"Key must be 32 bytes, not {len(key)!r}")
    if len(nonce) != 12:
        raise ValueError(f"Nonce must be 12 bytes, not {len(nonce)!r}")
    if not 0 <= counter <= MASK32:
        raise ValueError(f"Counter must fit in 32 bits, not {counter!r}")
    state = [*SIGMA,
             *(int.from_bytes(key[4 * i:4 * i + 4], "little") for i in range(8)),
             counter,
             *(int.from_bytes(nonce[4 * i:4 * i + 4], "little") for i in range(3))]
    working = list(state)
    for _ in range(10):  # 10 double rounds: a column round, then a diagonal round
        quarter_round(working, 0, 4, 8, 12)
        quarter_round(working, 1, 5, 9, 13)
        quarter_round(working, 2, 6, 10, 14)
        quarter_round(working, 3, 7, 11, 15)
        quarter_round(working, 0, 5, 10, 15)
        quarter_round(working, 1, 6, 11, 12)
        quarter_round(working, 2, 7, 8, 13)
        quarter_round(working, 3, 4, 9, 14)
    return b"".join(((w + s) & MASK32).to_bytes(4, "little") for w, s in zip(working, state))


def chacha20_encrypt(key: bytes, counter: int, nonce: bytes, plaintext: bytes) -> bytes:
    """RFC 8439 §2.4: XOR with the blocks ``counter``, ``counter + 1``, ... (decryption is the
    same operation)."""
    out = bytearray()
    for j in range(0, len(plaintext), 64):
        block = chacha20_block(key, counter + j // 64, nonce)
        out += bytes(p ^ k for p, k in zip(plaintext[j:j + 64], block))
    return bytes(out)


def packet_nonce(prefix: int, seq: int) -> bytes:
    """The NT's 12-byte nonce: the 32-bit prefix then the 64-bit packet sequence number, each
    little-endian (so they are state words 13 and 14..15)."""
    return prefix.to_bytes(4, "little") + seq.to_bytes(8, "little")


def applies(meta):
    """The packet kinds the NT encrypts, once the contract's skip rule has passed the packet:
    no fragment, a complete walk, and TCP or UDP in the innermost layer."""
    flags = meta["flags"]
    if flags["fragment"] or flags["too_deep"]:
        return False
    return meta["l4_kind"][1 if meta["vxlan"] else 0] != 0


class ChaCha20Model(TaskModel):
    config_class = ChaCha20Config

    def __init__(self, params, data_width=512, header_bytes=256):
        super().__init__(params, data_width, header_bytes)
        self.seq = 0
        self.blocks = 0

    def blocks_for(self, length, payload_off):
        """Keystream blocks the hardware computes for an applied frame of ``length`` bytes."""
        beat = self.data_width // 8
        beats = max(1, -(-length // beat))
        words = max(0, beats - payload_off // beat)
        return -(-words // (64 // beat))

    def apply(self, frame, meta):
        if not applies(meta):
            return None
        if not self.config.enable:
            meta["drop"] = 1  # fail closed: never send in the clear what should be encrypted
            return frame, meta
        off = meta["payload_off"]
        nonce = packet_nonce(self.config.nonce_prefix, self.seq)
        self.seq = (self.seq + 1) % 2 ** 64
        self.blocks += self.blocks_for(len(frame), off)
        return frame[:off] + chacha20_encrypt(self.config.key, 1, nonce, frame[off:]), meta

    def counters(self):
        return {**self.stats, "next_seq": self.seq, "blocks": self.blocks}

    # --- moving state between the hardware and the model (hw/transform) -------------------------
    def load_hw_tables(self, values):
        """The packet sequence number (the next nonce) and the blocks counter. At a packet
        boundary nothing is in flight: keystream is only requested for beats that entered,
        and every block requested was used by a beat that left, so no block is outstanding."""
        busy = [name for name in self.hw("in_flight") if values[name]]
        if not values[self.hw("in_first")]:
            busy.append(self.hw("in_first"))
        if busy:
            raise StateBridgeError(f"chacha20: a packet or keystream is in flight "
                                   f"({', '.join(busy)}): stop it at a packet boundary")
        self.seq = values[self.hw("seq")]
        self.blocks = values[self.hw("blocks")]

    def store_hw_tables(self, values):
        values[self.hw("seq")] = self.seq
        values[self.hw("blocks")] = self.blocks % 2 ** 64    # the hardware's register wraps

    def test_case(self, rng, n, malformed):
        """Enabled, random key and prefix; every kind of packet (about half of them apply),
        sizes from :data:`TEST_SIZES`."""
        config = ChaCha20Config.random(rng, self.params)
        weights = [w for w, _, _ in TEST_SIZES]
        frames = []
        for _ in range(n):
            _, low, high = rng.choices(TEST_SIZES, weights)[0]
            spec = random_spec(rng, (low, high), malformed_fraction=malformed)
            frames.append(build(spec, rng))
        return config, frames
