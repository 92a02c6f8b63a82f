"""Between the MAC's byte streams and the NIC's beats (:func:`~supernic.hw.stream.PacketSignature`):
bytes packed into beats on the way in, beats unpacked into bytes on the way out. Each moves one
byte a cycle, the MAC's rate; the NIC's side is ``data_width / 8`` times wider."""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..stream import PacketSignature
from .gmii import ByteSignature

__all__ = ["BytesToBeats", "BeatsToBytes"]


class BytesToBeats(wiring.Component):
    """``i`` bytes in, ``o`` beats of ``data_width`` bits out: full beats, and a frame's last
    beat holding what is left, ``keep`` a run of ones from byte 0 (unused bytes zero)."""

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({"i": In(ByteSignature()), "o": Out(PacketSignature(data_width))})

    def elaborate(self, platform):
        m = Module()
        n = self.data_width // 8
        acc = Signal(self.data_width)
        index = Signal(range(n))
        ends = Signal()     # this byte ends a beat
        m.d.comb += [ends.eq((index == n - 1) | self.i.p.last),
                     self.i.ready.eq(~ends | ~self.o.valid | self.o.ready)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            filled = Signal(self.data_width)
            m.d.comb += filled.eq(acc | (self.i.p.data << (index * 8)))
            with m.If(ends):
                m.d.sync += [self.o.valid.eq(1), self.o.p.data.eq(filled),
                             self.o.p.keep.eq((Const(2, n + 1) << index) - 1),
                             self.o.p.last.eq(self.i.p.last), acc.eq(0), index.eq(0)]
            with m.Else():
                m.d.sync += [acc.eq(filled), index.eq(index + 1)]
        return m


class BeatsToBytes(wiring.Component):
    """``i`` beats in, ``o`` bytes out. ``keep`` is taken as a run of ones from byte 0 (the
    stream contract, hw/stream.py): a beat gives its bytes up to its highest kept byte, and a
    beat that keeps none gives byte 0, so that a frame's end is never lost."""

    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({"i": In(PacketSignature(data_width)), "o": Out(ByteSignature())})

    def elaborate(self, platform):
        m = Module()
        n = self.data_width // 8
        data = Signal(self.data_width)
        top = Signal(range(n))          # the beat's highest kept byte
        last = Signal()
        index = Signal(range(n))
        ends = Signal()
        m.d.comb += [ends.eq(index == top),
                     self.o.p.data.eq(data.word_select(index, 8)),
                     self.o.p.last.eq(last & ends),
                     self.i.ready.eq(~self.o.valid | (self.o.ready & ends))]
        highest = Signal(range(n))
        for k in range(n):
            with m.If(self.i.p.keep[k]):
                m.d.comb += highest.eq(k)
        with m.If(self.o.valid & self.o.ready & ~ends):
            m.d.sync += index.eq(index + 1)
        with m.If(self.o.valid & self.o.ready & ends):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.valid.eq(1), data.eq(self.i.p.data), top.eq(highest),
                         last.eq(self.i.p.last), index.eq(0)]
        return m
