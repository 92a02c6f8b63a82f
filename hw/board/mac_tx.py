"""The GMII transmitter: a frame's bytes out to the PHY as IEEE 802.3 wants them.

Per frame (clause 4.2.3 and 4.4.2): seven preamble bytes and the SFD; the frame, padded with
zeros to 60 bytes; its FCS, the complement of the CRC-32, low byte first; then twelve idle
byte clocks, the inter-frame gap. The bytes come from a store-and-forward FIFO, so a frame that
has started is all there. Should a byte be missing mid-frame anyway, the transmitter sends
``tx_er`` for that clock (clause 35.2.1.6: the receiver then drops the frame) and counts it in
``underruns``.
"""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .crc32 import CRC_INIT, crc32_byte
from .gmii import IFG_BYTES, MIN_FRAME, PREAMBLE_BYTE, SFD, ByteSignature

__all__ = ["GmiiTransmitter"]


class GmiiTransmitter(wiring.Component):
    """``i`` (a frame's bytes, without FCS) in; ``txd``, ``tx_en``, ``tx_er`` out, registered;
    ``frames`` and ``underruns`` counted."""

    def __init__(self):
        super().__init__({
            "i": In(ByteSignature()),
            "txd": Out(8), "tx_en": Out(1), "tx_er": Out(1),
            "frames": Out(32), "underruns": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        crc = Signal(32, init=CRC_INIT)
        count = Signal(range(max(MIN_FRAME, IFG_BYTES) + 1))   # bytes sent in this state
        gap = Signal(range(IFG_BYTES + 1))      # idle clocks since the last frame
        m.d.sync += [self.tx_en.eq(0), self.tx_er.eq(0), self.txd.eq(0)]

        def send(value, error=0):
            m.d.sync += [self.tx_en.eq(1), self.txd.eq(value), self.tx_er.eq(error)]

        with m.FSM():
            with m.State("idle"):
                with m.If(gap < IFG_BYTES):
                    m.d.sync += gap.eq(gap + 1)
                with m.Elif(self.i.valid):
                    send(PREAMBLE_BYTE)
                    m.d.sync += count.eq(1)
                    m.next = "preamble"
            with m.State("preamble"):
                with m.If(count < 7):
                    send(PREAMBLE_BYTE)
                    m.d.sync += count.eq(count + 1)
                with m.Else():
                    send(SFD)
                    m.d.sync += [count.eq(0), crc.eq(CRC_INIT)]
                    m.next = "frame"
            with m.State("frame"):
                m.d.comb += self.i.ready.eq(1)
                with m.If(self.i.valid):
                    send(self.i.p.data)
                    m.d.sync += crc.eq(crc32_byte(crc, self.i.p.data))
                    with m.If(self.i.p.last):
                        # count + 1 bytes sent: pad to 60, so that 64 go with the FCS.
                        with m.If(count + 1 < MIN_FRAME - 4):
                            m.d.sync += count.eq(count + 1)
                            m.next = "pad"
                        with m.Else():
                            m.d.sync += count.eq(0)
                            m.next = "fcs"
                    with m.Elif(count < MIN_FRAME - 4):   # past 60 the count no longer matters
                        m.d.sync += count.eq(count + 1)
                with m.Else():
                    send(0, error=1)
                    m.d.sync += self.underruns.eq(self.underruns + 1)
            with m.State("pad"):
                send(0)
                m.d.sync += [crc.eq(crc32_byte(crc, Const(0, 8))), count.eq(count + 1)]
                with m.If(count + 1 == MIN_FRAME - 4):
                    m.d.sync += count.eq(0)
                    m.next = "fcs"
            with m.State("fcs"):
                send(~crc[:8])
                m.d.sync += [crc.eq(crc >> 8), count.eq(count + 1)]
                with m.If(count == 3):
                    m.d.sync += [gap.eq(0), self.frames.eq(self.frames + 1)]
                    m.next = "idle"
        return m
