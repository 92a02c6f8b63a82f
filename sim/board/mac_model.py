"""The Ethernet MAC's reference model (hw/board/mac.py): what the transmitter puts on GMII for
a frame, and what the receiver makes of the bytes of one burst of ``rx_dv``.

Framing after IEEE 802.3: preamble and SFD (clause 4.2.5), padding to 60 bytes and the FCS,
CRC-32 sent low byte first (clause 3.2.9); zlib's ``crc32`` is that CRC.
"""

import zlib
from collections import Counter

__all__ = ["PREAMBLE", "fcs", "wire_frame", "receive", "MacRxModel", "RX_VERDICTS"]

PREAMBLE = b"\x55" * 7 + b"\xd5"
MIN_FRAME = 64
#: What the receiver decides about a burst, in the order it checks: the counter it counts in.
RX_VERDICTS = ("errors", "runts", "too_long", "bad_fcs", "frames")


def fcs(frame: bytes) -> bytes:
    return zlib.crc32(frame).to_bytes(4, "little")


def wire_frame(frame: bytes) -> bytes:
    """The transmitter's bytes for ``frame`` (no FCS): preamble, SFD, the frame padded with
    zeros to 60 bytes, its FCS."""
    padded = bytes(frame) + bytes(max(0, MIN_FRAME - 4 - len(frame)))
    return PREAMBLE + padded + fcs(padded)


def receive(burst: bytes, errors=None, max_frame=1522):
    """``(verdict, frame)`` for one ``rx_dv`` burst of bytes (``errors``: the ``rx_er`` of
    each byte): the verdict one of :data:`RX_VERDICTS`; ``frame`` (FCS stripped) only when it
    is ``"frames"``."""
    errors = list(errors or [])
    if any(errors):
        return "errors", None
    start = 0
    while start < len(burst) and burst[start] == 0x55:
        start += 1
    if start == len(burst) or burst[start] != 0xD5:
        return "errors", None           # preamble alone, or another byte before the SFD
    body = bytes(burst[start + 1:])
    if len(body) < MIN_FRAME:
        return "runts", None
    if len(body) > max_frame:
        return "too_long", None
    if zlib.crc32(body) & 0xFFFF_FFFF != 0x2144DF1C:
        # The CRC of a frame followed by its own FCS is this constant (the residue
        # 0xDEBB20E3 before the final complement).
        return "bad_fcs", None
    return "frames", body[:-4]


class MacRxModel:
    """Counts every burst's verdict and keeps the good frames in order."""

    def __init__(self, max_frame=1522):
        self.max_frame = max_frame
        self.counts = Counter({v: 0 for v in RX_VERDICTS})
        self.frames = []

    def receive(self, burst, errors=None):
        verdict, frame = receive(burst, errors, self.max_frame)
        self.counts[verdict] += 1
        if frame is not None:
            self.frames.append(frame)
        return verdict
