"""The GMII receiver: frames from the PHY's bytes, their FCS checked and stripped.

A frame starts at the start frame delimiter after any number of preamble bytes and ends when
``rx_dv`` falls. Its last four bytes are the FCS, which is known only at the end, so bytes leave
five behind the wire: the byte before the FCS can then carry ``last``. The verdict comes with
that byte (``bad``), and whoever stores the frame drops it on a bad verdict (the receiver
cannot hold the PHY back, so a frame is never waited for).

A frame is bad, and counted under the first reason that applies:

* ``errors``: ``rx_er`` during the frame, or a byte other than preamble or SFD before the SFD
  (clause 35.2.2.5: a receive error); a burst of preamble alone counts here too;
* ``runts``: shorter than 64 bytes with its FCS (clause 4.2.4.2.2: a fragment);
* ``too_long``: longer than ``max_frame`` bytes with its FCS (only the first ``max_frame - 4``
  bytes are passed on, so a store sized for ``max_frame`` never overflows on one);
* ``bad_fcs``: the CRC over the frame and its FCS is not the residue 0xDEBB20E3.

Good frames are counted in ``frames``. A frame of fewer than five bytes passes no byte on.
"""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .crc32 import CRC_INIT, CRC_RESIDUE, crc32_byte
from .gmii import MIN_FRAME, PREAMBLE_BYTE, SFD, RxByteSignature

__all__ = ["GmiiReceiver", "RX_COUNTERS"]

RX_COUNTERS = ("frames", "errors", "runts", "too_long", "bad_fcs")
_DELAY = 5      # the FCS's four bytes, and the byte that carries ``last``


class GmiiReceiver(wiring.Component):
    """``rxd``, ``rx_dv``, ``rx_er`` in (registered here first); ``o`` out, one byte a cycle at
    most, never waiting for ``o.ready``; a 32-bit counter per reason of :data:`RX_COUNTERS`."""

    def __init__(self, max_frame=1522):
        if not isinstance(max_frame, int) or not MIN_FRAME <= max_frame <= 65535:
            raise ValueError(f"max_frame must be an integer from {MIN_FRAME} to 65535, "
                             f"not {max_frame!r}")
        self.max_frame = max_frame
        super().__init__({
            "rxd": In(8), "rx_dv": In(1), "rx_er": In(1),
            "o": Out(RxByteSignature()),
            **{name: Out(32) for name in RX_COUNTERS},
        })

    def elaborate(self, platform):
        m = Module()
        # The PHY's signals are registered once: GMII's setup time is short (clause 35.5.2.3).
        dv, er, d = Signal(), Signal(), Signal(8)
        m.d.sync += [dv.eq(self.rx_dv), er.eq(self.rx_er), d.eq(self.rxd)]

        crc = Signal(32, init=CRC_INIT)
        length = Signal(range(self.max_frame + 2))     # saturates past max_frame
        failed = Signal()                              # rx_er seen in this frame
        delay = [Signal(8, name=f"delay{i}") for i in range(_DELAY)]   # delay[0]: newest

        m.d.sync += self.o.valid.eq(0)

        def count(name):
            counter = getattr(self, name)
            m.d.sync += counter.eq(counter + 1)

        def start():
            m.d.sync += [crc.eq(CRC_INIT), length.eq(0), failed.eq(0)]

        with m.FSM():
            with m.State("idle"):
                with m.If(dv):
                    with m.If(er):
                        count("errors")
                        m.next = "discard"
                    with m.Elif(d == SFD):
                        start()
                        m.next = "frame"
                    with m.Elif(d == PREAMBLE_BYTE):
                        m.next = "preamble"
                    with m.Else():
                        count("errors")
                        m.next = "discard"
            with m.State("preamble"):
                with m.If(~dv):
                    count("errors")
                    m.next = "idle"
                with m.Elif(er | ((d != SFD) & (d != PREAMBLE_BYTE))):
                    count("errors")
                    m.next = "discard"
                with m.Elif(d == SFD):
                    start()
                    m.next = "frame"
            with m.State("frame"):
                with m.If(dv):
                    m.d.sync += [crc.eq(crc32_byte(crc, d)), failed.eq(failed | er)]
                    with m.If(length <= self.max_frame):
                        m.d.sync += length.eq(length + 1)
                    m.d.sync += [delay[0].eq(d)] + [delay[i].eq(delay[i - 1])
                                                    for i in range(1, _DELAY)]
                    # The byte five behind leaves, while the frame is within max_frame.
                    with m.If((length >= _DELAY) & (length <= self.max_frame)):
                        m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(delay[-1]),
                                     self.o.p.last.eq(0), self.o.p.bad.eq(0)]
                with m.Else():
                    runt = length < MIN_FRAME
                    long = length > self.max_frame
                    bad_fcs = crc != Const(CRC_RESIDUE, 32)
                    with m.If(length >= _DELAY):
                        m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(delay[-1]),
                                     self.o.p.last.eq(1),
                                     self.o.p.bad.eq(failed | runt | long | bad_fcs)]
                    with m.If(failed):
                        count("errors")
                    with m.Elif(runt):
                        count("runts")
                    with m.Elif(long):
                        count("too_long")
                    with m.Elif(bad_fcs):
                        count("bad_fcs")
                    with m.Else():
                        count("frames")
                    m.next = "idle"
            with m.State("discard"):
                with m.If(~dv):
                    m.next = "idle"
        return m
