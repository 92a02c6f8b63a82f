"""A UART, 8 data bits, no parity, one stop bit, ``divisor`` clocks a bit.

The receiver synchronises its input, finds a start bit's falling edge, samples each bit in its
middle, and passes a byte on only if the stop bit is 1 (a framing error, a line held low
included, is counted in ``framing_errors`` and the byte dropped)."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UartRx", "UartTx"]


def _check(divisor):
    if not isinstance(divisor, int) or divisor < 4:
        raise ValueError(f"UART divisor must be an integer of at least 4 clocks a bit, "
                         f"not {divisor!r}")


class UartRx(wiring.Component):
    def __init__(self, divisor):
        _check(divisor)
        self.divisor = divisor
        super().__init__({"rx": In(1, init=1), "o": Out(stream.Signature(8, always_ready=True)),
                          "framing_errors": Out(16)})

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(self.divisor * 3 // 2 + 1))
        bit = Signal(range(10))
        shift = Signal(8)
        m.d.sync += self.o.valid.eq(0)
        with m.FSM():
            with m.State("idle"):
                with m.If(~line):
                    # To the middle of the first data bit: one and a half bits.
                    m.d.sync += [timer.eq(self.divisor * 3 // 2 - 1), bit.eq(0)]
                    m.next = "bits"
            with m.State("bits"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Elif(bit < 8):
                    m.d.sync += [shift.eq(Cat(shift[1:], line)), bit.eq(bit + 1),
                                 timer.eq(self.divisor - 1)]
                with m.Else():
                    with m.If(line):
                        m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(shift)]
                        m.next = "idle"
                    with m.Else():
                        m.d.sync += self.framing_errors.eq(self.framing_errors + 1)
                        m.next = "break"
            with m.State("break"):      # wait for the line to go idle again
                with m.If(line):
                    m.next = "idle"
        return m


class UartTx(wiring.Component):
    def __init__(self, divisor):
        _check(divisor)
        self.divisor = divisor
        super().__init__({"i": In(stream.Signature(8)), "tx": Out(1, init=1)})

    def elaborate(self, platform):
        m = Module()
        timer = Signal(range(self.divisor))
        bits = Signal(9)                # the data bits and the stop bit still to send
        left = Signal(range(11))        # bits not yet finished, the one on the line included
        m.d.comb += self.i.ready.eq(left == 0)
        with m.If(left == 0):
            with m.If(self.i.valid):
                m.d.sync += [self.tx.eq(0), bits.eq(Cat(self.i.payload, 1)), left.eq(10),
                             timer.eq(self.divisor - 1)]
        with m.Elif(timer != 0):
            m.d.sync += timer.eq(timer - 1)
        with m.Else():
            m.d.sync += left.eq(left - 1)
            with m.If(left > 1):
                m.d.sync += [self.tx.eq(bits[0]), bits.eq(bits >> 1), timer.eq(self.divisor - 1)]
        return m
