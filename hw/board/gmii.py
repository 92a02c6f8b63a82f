"""GMII, the gigabit media-independent interface (IEEE 802.3 clause 35), and the byte streams
the MAC's parts pass frames on.

GMII moves one byte a clock at 125 MHz: ``rxd``/``rx_dv``/``rx_er`` from the PHY,
``txd``/``tx_en``/``tx_er`` to it. A frame on the wire is the preamble (seven 0x55 bytes), the
start frame delimiter (0xD5), the frame, its FCS, then at least the inter-frame gap
(clause 4.4.2: 96 bit times, 12 byte clocks)."""

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["GmiiSignature", "ByteSignature", "RxByteSignature", "PREAMBLE_BYTE", "SFD",
           "MIN_FRAME", "IFG_BYTES"]

PREAMBLE_BYTE = 0x55
SFD = 0xD5
#: The shortest frame, FCS included (clause 4.4.2, minFrameSize 512 bits).
MIN_FRAME = 64
IFG_BYTES = 12


def GmiiSignature():
    """Seen from the MAC: the transmit side ``Out``, the receive side ``In``."""
    return wiring.Signature({
        "txd": Out(8), "tx_en": Out(1), "tx_er": Out(1),
        "rxd": In(8), "rx_dv": In(1), "rx_er": In(1),
    })


def ByteSignature():
    """A frame's bytes, one a transfer; ``last`` on its final byte."""
    return stream.Signature(data.StructLayout({"data": 8, "last": 1}))


def RxByteSignature():
    """A received frame's bytes; ``bad`` with ``last`` says the frame must be dropped. The
    receiver cannot wait (GMII has no flow control): ``ready`` low loses the byte."""
    return stream.Signature(data.StructLayout({"data": 8, "last": 1, "bad": 1}))
