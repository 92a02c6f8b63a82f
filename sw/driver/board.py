"""A board's register window, served by the device server like a virtual device.

On hardware the registers are a memory-mapped BAR (:class:`~supernic.driver.transport.MmapBus`)
that only the operator (root) may open, or a board's UART bridge
(:class:`~supernic.driver.serial_bus.SerialBus`, ``--serial``). ``snic device serve --mmap BAR --regmap DESIGN.json``
puts a :class:`MappedDevice` behind the device server, so tenants reach the board the way they
reach a virtual device, through the server's per-request checks (:mod:`supernic.driver.access`):
the same rules on a board. A page-per-tenant mapping is not possible on these designs: their
blocks sit 256 bytes apart in a 64 KiB window, so one 4 KiB page holds the blocks of several
tenants.

Only registers go through it: a board's packets come and go on its Ethernet ports, so the
server's traffic ops answer that they are not available here.
"""

from .serial_bus import SerialBus
from .transport import MmapBus

__all__ = ["MappedDevice"]


class MappedDevice:
    """The register side of a device over ``bus`` (an open :class:`MmapBus`), as the device
    server calls it (``access``, ``cycle``, ``data_width``, ``port_count``)."""

    port_count = 0
    cycle = 0

    def __init__(self, bus, description):
        if not isinstance(bus, (MmapBus, SerialBus)):
            raise TypeError(f"A board device needs an MmapBus or a SerialBus, not {bus!r}")
        self.bus = bus
        self.data_width = description.get("config", {}).get("data_width")

    def access(self, write, address, value=0, strobe=0b1111):
        if write:
            return 0, self.bus.write_now(address, value, strobe)
        return self.bus.read_now(address)

    def _no_traffic(self, *args, **kwargs):
        raise ValueError("a board's packets go through its Ethernet ports, not the device "
                         "server (registers only)")

    push = queued = set_idle = set_backpressure = run = run_until_drained = _no_traffic
    delivered_waiting = ingress_cycles = pop = reset = _no_traffic
