"""Toeplitz flow hash in gateware (Microsoft RSS), one cycle, no state.

The hash is linear over GF(2): output bit j is the XOR of the input bits i for which key bit
i+j is set. With a constant key each output bit is a fixed XOR tree, so there is no multiplier
and no iteration. The input is the RSS order (source address, destination address, source
port, destination port) as one big-endian vector of 36 bytes; IPv4 uses the first 12 and leaves
the rest zero, which does not change a Toeplitz hash.
"""

from amaranth.hdl import Cat, C, Mux

__all__ = ["toeplitz_hash", "HASH_INPUT_BYTES"]

HASH_INPUT_BYTES = 36


def _network_bits(value, width):
    """The bits of ``value`` in wire order (most significant first)."""
    return [value[width - 1 - i] for i in range(width)]


def _input_vector(flow):
    v6 = (_network_bits(flow.src_ip, 128) + _network_bits(flow.dst_ip, 128)
          + _network_bits(flow.sport, 16) + _network_bits(flow.dport, 16))
    v4 = (_network_bits(flow.src_ip[:32], 32) + _network_bits(flow.dst_ip[:32], 32)
          + _network_bits(flow.sport, 16) + _network_bits(flow.dport, 16))
    total = HASH_INPUT_BYTES * 8
    v4 += [C(0, 1)] * (total - len(v4))
    # Cat takes the least significant bit first; wire bit 0 is the most significant.
    return Mux(flow.ipv6, Cat(*reversed(v6)), Cat(*reversed(v4)))


def toeplitz_hash(flow, key: bytes):
    """A 32-bit Value: the Toeplitz hash of the flow struct view ``flow`` under ``key``."""
    total = HASH_INPUT_BYTES * 8
    kbits = len(key) * 8
    if kbits < total + 32:
        raise ValueError(f"Toeplitz key must have at least {total + 32} bits, not {kbits}")
    k = int.from_bytes(key, "big")
    key_bit = [(k >> (kbits - 1 - i)) & 1 for i in range(kbits)]
    vec = _input_vector(flow)
    out = []
    for j in range(32):  # j = 0 is the most significant hash bit
        mask = 0
        for i in range(total):
            if key_bit[i + j]:
                mask |= 1 << (total - 1 - i)
        out.append((vec & C(mask, total)).xor())
    return Cat(*reversed(out))
