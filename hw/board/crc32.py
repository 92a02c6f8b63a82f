"""The Ethernet frame check sequence: CRC-32, one byte a cycle (IEEE 802.3 clause 3.2.9).

The CRC register is updated with a byte by a linear map over GF(2), so each next-state bit is
the XOR of a fixed set of register and data bits. The sets are worked out here in Python by
pushing unit vectors through the bitwise, LSB-first algorithm (polynomial 0x04C11DB7,
reflected 0xEDB88320); the hardware is then 32 XOR trees, no loop.

The register starts at all ones. The transmitter sends its complement, low byte first; a
receiver that runs the whole frame, FCS included, through the register ends at the residue
``0xDEBB20E3`` exactly when the FCS is right.
"""

import functools

from amaranth.hdl import Cat

__all__ = ["CRC_INIT", "CRC_RESIDUE", "crc32_byte", "crc32_byte_model"]

CRC_INIT = 0xFFFF_FFFF
CRC_RESIDUE = 0xDEBB_20E3
_REFLECTED = 0xEDB8_8320


def crc32_byte_model(crc, byte):
    """The register after ``byte`` (bit 0 first on the wire), bit by bit."""
    for i in range(8):
        crc ^= (byte >> i) & 1
        crc = (crc >> 1) ^ _REFLECTED if crc & 1 else crc >> 1
    return crc


@functools.cache
def _taps():
    """For each next-state bit, the register bits and the data bits it is the XOR of."""
    taps = [([], []) for _ in range(32)]
    for i in range(32):
        out = crc32_byte_model(1 << i, 0)
        for j in range(32):
            if out >> j & 1:
                taps[j][0].append(i)
    for i in range(8):
        out = crc32_byte_model(0, 1 << i)
        for j in range(32):
            if out >> j & 1:
                taps[j][1].append(i)
    return taps


def crc32_byte(crc, byte):
    """The next register value (an Amaranth value) after ``byte`` (8 bits), from register
    ``crc``."""
    return Cat(*(Cat(*(crc[i] for i in regs), *(byte[i] for i in data)).xor()
                 for regs, data in _taps()))
