"""A store-and-forward frame FIFO: a frame leaves only once all of it is in, and a frame marked
``bad`` on its last byte, or one that does not fit, is taken back as if never written.

Both MAC directions need one. The receiver cannot wait and checks the FCS only at a frame's end,
so its frames wait here until they are known good. The transmitter must not run dry mid-frame
(GMII has no pause inside a frame), so a frame starts on the wire only once it is all here.

Three pointers over one memory of ``depth`` bytes (and a ``last`` bit each): ``wp`` where the
next byte goes, ``cp`` the end of the last whole frame, ``rp`` the next byte out. Bytes between
``cp`` and ``wp`` belong to the frame coming in; a bad verdict moves ``wp`` back to ``cp``.

A byte that cannot be written makes its frame an overflow: the rest of it is thrown away, the
frame is taken back at its end and, unless it was bad anyway, counted in ``overflows``. Which
byte cannot be written depends on the sender:

* one that cannot wait (``sender_waits=False``: the receiver) loses a byte that arrives when
  the memory is full; ``i.ready`` is always high;
* one that waits (the transmit side) is held by ``i.ready`` while a full memory holds a whole
  frame the reader will free, and loses a frame only when the frame alone fills the memory.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .gmii import ByteSignature, RxByteSignature

__all__ = ["FrameFifo"]


class FrameFifo(wiring.Component):
    """``i`` (bytes with ``bad``) in, whole good frames out on ``o``; counts ``overflows``
    (the receiver counts the frames themselves)."""

    def __init__(self, depth=4096, sender_waits=False):
        if not isinstance(depth, int) or depth < 16 or depth & (depth - 1):
            raise ValueError(f"FrameFifo depth must be a power of two of at least 16, "
                             f"not {depth!r}")
        self.depth = depth
        self.sender_waits = sender_waits
        super().__init__({
            "i": In(RxByteSignature()),
            "o": Out(ByteSignature()),
            "overflows": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        bits = self.depth.bit_length() - 1
        m.submodules.mem = mem = Memory(shape=9, depth=self.depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=())

        wp, cp, rp = (Signal(bits + 1, name=n) for n in ("wp", "cp", "rp"))
        full = Signal()
        dropping = Signal()     # the frame coming in overflowed: the rest is thrown away
        m.d.comb += full.eq((wp - rp)[:bits + 1] == self.depth)
        if self.sender_waits:
            m.d.comb += self.i.ready.eq(~full | dropping | (rp == cp))
        else:
            m.d.comb += self.i.ready.eq(1)

        with m.If(self.i.valid & self.i.ready):
            with m.If(dropping | full):
                # Overflowed (now or earlier): nothing more of this frame is written.
                with m.If(self.i.p.last):
                    m.d.sync += [wp.eq(cp), dropping.eq(0)]
                    with m.If(~self.i.p.bad):
                        m.d.sync += self.overflows.eq(self.overflows + 1)
                with m.Else():
                    m.d.sync += dropping.eq(1)
            with m.Else():
                m.d.comb += [wr.addr.eq(wp[:bits]), wr.data.eq(self.i.p.data | (self.i.p.last << 8)),
                             wr.en.eq(1)]
                with m.If(self.i.p.last & self.i.p.bad):
                    m.d.sync += wp.eq(cp)
                with m.Elif(self.i.p.last):
                    m.d.sync += [wp.eq(wp + 1), cp.eq(wp + 1)]
                with m.Else():
                    m.d.sync += wp.eq(wp + 1)

        # Read side: a byte is fetched when there is a whole frame's byte to fetch and the
        # output register is free or being taken; the read port holds its data otherwise.
        fetch = Signal()
        m.d.comb += [fetch.eq((rp != cp) & (~self.o.valid | self.o.ready)),
                     rd.addr.eq(rp[:bits]), rd.en.eq(fetch),
                     self.o.p.data.eq(rd.data[:8]), self.o.p.last.eq(rd.data[8])]
        with m.If(fetch):
            m.d.sync += [rp.eq(rp + 1), self.o.valid.eq(1)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m
