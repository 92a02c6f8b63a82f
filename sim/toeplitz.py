"""Toeplitz hash (Microsoft RSS) in Python: the model of the parser's flow hash.

Byte-at-a-time tables: the hash is linear over GF(2), so each input byte at each position adds
a fixed 32-bit contribution; 36 positions x 256 values cover IPv6 addresses plus both ports.
"""

from functools import lru_cache

__all__ = ["toeplitz", "flow_hash_input"]


@lru_cache(maxsize=4)
def _tables(key: bytes, positions: int):
    k = int.from_bytes(key, "big")
    kbits = len(key) * 8
    if kbits < positions * 8 + 32:
        raise ValueError(f"Toeplitz key must have at least {positions * 8 + 32} bits, not {kbits}")
    tables = []
    for pos in range(positions):
        bit_windows = [(k >> (kbits - 32 - (pos * 8 + b))) & 0xFFFFFFFF for b in range(8)]
        table = [0] * 256
        for value in range(256):
            h = 0
            for b in range(8):
                if value & (0x80 >> b):
                    h ^= bit_windows[b]
            table[value] = h
        tables.append(table)
    return tables


def toeplitz(key: bytes, data: bytes) -> int:
    tables = _tables(key, 36)
    h = 0
    for pos, value in enumerate(data):
        h ^= tables[pos][value]
    return h


def flow_hash_input(flow: dict) -> bytes:
    """RSS input order: source address, destination address, source port, destination port."""
    if flow["ipv6"]:
        addr = flow["src_ip"].to_bytes(16, "big") + flow["dst_ip"].to_bytes(16, "big")
    else:
        addr = ((flow["src_ip"] & 0xFFFFFFFF).to_bytes(4, "big")
                + (flow["dst_ip"] & 0xFFFFFFFF).to_bytes(4, "big"))
    return addr + flow["sport"].to_bytes(2, "big") + flow["dport"].to_bytes(2, "big")
