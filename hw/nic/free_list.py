"""The packet store's free list: slot numbers handed out and given back, none set aside.

Contract of :class:`FreeList` (``depth`` slots, a power of two):

* At reset every slot ``0 .. depth - 1`` is free, in that order, and ``count`` is ``depth``.
* ``head`` is the slot a ``take`` in this cycle gets; it is meaningful while ``count > 0``
  (the user checks ``count``: a take from an empty list is not refused, it is a user error).
* ``give`` returns ``slot`` to the list's tail. Slots come back in the order given, so the
  list hands them out first-in first-out.
* ``take`` and ``give`` may both be high in one cycle, and a slot given into an empty list may
  be taken the very next cycle: the head is read one cycle ahead (at the read pointer plus
  this cycle's take) through a read port transparent to the gives.
* ``count`` is the number of free slots, updated a cycle after each take and give.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory, MemoryData
from amaranth.lib.wiring import In, Out
from amaranth.utils import exact_log2

__all__ = ["FreeList"]


class FreeList(wiring.Component):
    """A circular buffer of free slot numbers; see the module docstring for the contract."""

    def __init__(self, depth: int):
        self.depth = depth
        bits = exact_log2(depth)
        self.data = MemoryData(shape=bits, depth=depth, init=range(depth))
        super().__init__({
            "take": In(1),
            "give": In(1),
            "slot": In(bits),
            "head": Out(bits),
            "count": Out(range(depth + 1), init=depth),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(data=self.data)
        write = mem.write_port()
        read = mem.read_port(transparent_for=(write,))
        bits = len(self.slot)
        rd = Signal(bits)   # the head's position
        wr = Signal(bits)   # where the next given slot goes
        m.d.comb += [
            read.addr.eq(rd + self.take),
            self.head.eq(read.data),
            write.addr.eq(wr),
            write.data.eq(self.slot),
            write.en.eq(self.give),
        ]
        m.d.sync += [
            rd.eq(rd + self.take),
            wr.eq(wr + self.give),
            self.count.eq(self.count - self.take + self.give),
        ]
        return m
