"""A counter read in another clock domain: counted in binary where its events happen, sent
across as Gray code (one bit changes a step, so a sample taken mid-change is the old value or
the new one, never a mix), synchronised, and turned back into binary. The MAC's receive
counters live in the PHY's clock; software reads them in the NIC's."""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["CounterCrossing"]


class CounterCrossing(wiring.Component):
    """``count``, a counter of ``i_domain`` that steps by one, in; ``value`` out, in ``sync``,
    two or three cycles behind."""

    def __init__(self, width=32, i_domain="rx"):
        self.width, self.i_domain = width, i_domain
        #: What crosses: the count in Gray code, registered in ``i_domain``.
        self.gray = Signal(width)
        super().__init__({"count": In(width), "value": Out(width)})

    def elaborate(self, platform):
        m = Module()
        gray = self.gray
        m.d[self.i_domain] += gray.eq(self.count ^ (self.count >> 1))
        synced = Signal(self.width)
        m.submodules.sync = FFSynchronizer(gray, synced, o_domain="sync", stages=2)
        # Binary from Gray: each bit is the XOR of the Gray bits from it upwards.
        bits = [synced[self.width - 1]]
        for i in range(self.width - 2, -1, -1):
            bits.insert(0, bits[0] ^ synced[i])
        m.d.comb += self.value.eq(Cat(*bits))
        return m
