"""Toeplitz flow hash in gateware (Microsoft RSS), one cycle, no state.

The hash is linear over GF(2): output bit j is the XOR of the input bits i for which key bit
i+j is set. With a constant key each output bit is a fixed XOR tree, so there is no multiplier
and no iteration. It is written the other way round, input bit by input bit: each set input bit
i XORs in the 32-bit key window that starts at key bit i. Synthesis builds the same XOR trees
from it; but masking the input with a constant per output bit reached Verilator as 32
concatenations of scattered single bits, 3 % of the default NIC's simulated cycle.

The input is the RSS order (source address, destination address, source port, destination
port) as one big-endian vector of 36 bytes; IPv4 uses the first 12 and leaves the rest zero,
which does not change a Toeplitz hash.
"""

from amaranth.hdl import Cat, C, Mux, Signal

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


def toeplitz_hash(m, flow, key: bytes, name="toeplitz"):
    """A 32-bit Value: the Toeplitz hash of the flow struct view ``flow`` under ``key``. The
    input vector is a signal of ``m``: every term reads one of its bits, and a slice of an
    expression would be lowered again for each of the 288 terms (a minute of conversion)."""
    total = HASH_INPUT_BYTES * 8
    kbits = len(key) * 8
    if kbits < total + 32:
        raise ValueError(f"Toeplitz key must have at least {total + 32} bits, not {kbits}")
    k = int.from_bytes(key, "big")
    vec = Signal(total, name=f"{name}_input")
    m.d.comb += vec.eq(_input_vector(flow))
    terms = [Mux(vec[total - 1 - i], C((k >> (kbits - 32 - i)) & 0xFFFF_FFFF, 32), C(0, 32))
             for i in range(total)]   # wire bit i of the input; the window's bit 31 is key bit i
    while len(terms) > 1:   # a balanced XOR tree keeps Amaranth's expression depth small
        terms = [terms[j] ^ terms[j + 1] if j + 1 < len(terms) else terms[j]
                 for j in range(0, len(terms), 2)]
    return terms[0]
