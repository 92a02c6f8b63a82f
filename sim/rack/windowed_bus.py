"""A register bus on a virtual device that keeps to the rack's lockstep windows.

In a rack every NIC advances one window at a time (:mod:`.rack`). A control-plane operation
(a deploy, a capture for a migration) runs on a NIC the way the device server runs it: the
device advances while each AXI4-Lite transaction completes and between two polls. Here those
cycles come out of the NIC's current window: when the window is spent, the operation waits for
the next one. So every NIC's clock stays the rack's clock (a token bucket captured on one NIC
meters on another's timestamps), and an operation takes as many cycles of rack time as it
would on a device: its packets keep flowing meanwhile.
"""

import asyncio

from ...driver.transport import RegisterBus

__all__ = ["WindowedBus", "ACCESS_MARGIN", "POLL_CYCLES"]

#: An AXI4-Lite access takes a few cycles (hw/csr/axil.py: address, data, response); one is
#: not started with fewer than this left in the window, so the device seldom runs past it.
ACCESS_MARGIN = 16
#: Cycles the device runs between two polls of a handshake (as ``snic``'s served device).
POLL_CYCLES = 256


class WindowedBus(RegisterBus):
    """Accesses ``device`` (a :class:`~supernic.sim.vdev.device.VirtualDevice`) within the
    window that ends at cycle :attr:`end`. Call :meth:`open_window` at each window's start."""

    def __init__(self, device):
        self.device = device
        self.end = 0
        self.blocked = 0            # operations waiting for the next window
        self._next = None

    def open_window(self, end):
        self.end = end
        if self._next is not None and not self._next.done():
            self._next.set_result(None)
        self._next = None

    async def _budget(self, cycles):
        """Wait until the window has ``cycles`` left; return how many it has."""
        while self.end - self.device.cycle < cycles:
            if self._next is None:
                self._next = asyncio.get_running_loop().create_future()
            self.blocked += 1
            try:
                await self._next
            finally:
                self.blocked -= 1
        return self.end - self.device.cycle

    async def read_word(self, address):
        await self._budget(ACCESS_MARGIN)
        return self.device.access(False, address)

    async def write_word(self, address, value, strobe=0b1111):
        await self._budget(ACCESS_MARGIN)
        return self.device.access(True, address, value, strobe)[1]

    async def wait(self):
        """Between two polls: the device runs up to :data:`POLL_CYCLES` of the window."""
        left = await self._budget(1)
        self.device.run(min(POLL_CYCLES, left))
