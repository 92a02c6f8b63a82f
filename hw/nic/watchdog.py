"""A stall watchdog: fires when something has waited too long without progress.

Contract of :class:`Watchdog` (``limit`` cycles, at least 1):

* It counts the consecutive cycles in which ``waiting`` is high, except cycles in which
  ``paused`` is high: those neither count nor end the wait (in the packet store, a region
  whose output waits for the NIC's own backpressure is not stalled, but not moving either).
* ``fire`` is high in the cycle that would be the ``limit``-th counted one: ``waiting`` and not
  ``paused`` after ``limit - 1`` counted cycles. The count then starts again from 0.
* A cycle with ``waiting`` low ends the wait: the count starts again from 0.

The packet store runs one for its shared input (a region that takes no beat) and one for its
shared output (a region that gives no beat half-way through a packet); see hw/nic/store.py.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["Watchdog"]


class Watchdog(wiring.Component):
    """Counts a wait up to ``limit`` cycles; see the module docstring for the contract."""

    def __init__(self, limit: int):
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"Watchdog limit must be a positive integer, not {limit!r}")
        self.limit = limit
        super().__init__({"waiting": In(1), "paused": In(1), "fire": Out(1)})

    def elaborate(self, platform):
        m = Module()
        count = Signal(range(self.limit))
        m.d.comb += self.fire.eq(self.waiting & ~self.paused & (count == self.limit - 1))
        with m.If(~self.waiting | self.fire):
            m.d.sync += count.eq(0)
        with m.Elif(~self.paused):
            m.d.sync += count.eq(count + 1)
        return m
