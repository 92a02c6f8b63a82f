"""A cocotb backend of :class:`supernic.driver.transport.RegisterBus` over AXI4-Lite.

It drives cocotbext-axi's ``AxiLiteMaster``. Amaranth names the ports of a ``s_axil`` member
``s_axil__awaddr`` (signature paths joined with ``__``), while cocotbext-axi's buses join prefix
and name with ``_`` by default; cocotb-bus takes a ``bus_separator``, which we pass through.
"""

import logging
from cocotbext.axi import AxiLiteBus, AxiLiteMaster

from supernic.driver.transport import RegisterBus, Response

__all__ = ["AxiLiteRegisterBus"]


def _strobe_span(strobe):
    """First byte lane and byte count of a contiguous strobe (cocotbext-axi writes a run of
    bytes from an address, so it can only produce contiguous strobes)."""
    lanes = [lane for lane in range(4) if strobe >> lane & 1]
    if lanes != list(range(lanes[0], lanes[-1] + 1)):
        raise ValueError(f"Write strobe must be a contiguous run of byte lanes, not {strobe:#06b}")
    return lanes[0], len(lanes)


class AxiLiteRegisterBus(RegisterBus):
    """``RegisterBus`` over an ``AxiLiteMaster``; ``master`` stays reachable so a testbench can
    set pause generators on its channels (``master.write_if.b_channel`` and so on)."""

    def __init__(self, master):
        self.master = master

    @classmethod
    def from_prefix(cls, dut, prefix="s_axil", clock=None, reset=None, reset_active_level=True):
        """Find ``<prefix>__awaddr`` and the other ports on ``dut``; clock defaults to
        ``dut.clk``."""
        bus = AxiLiteBus.from_prefix(dut, prefix, bus_separator="__")
        clock = dut.clk if clock is None else clock
        master = AxiLiteMaster(bus, clock, reset, reset_active_level)
        # cocotbext-axi logs every transaction at INFO; programming a table is thousands.
        master.write_if.log.setLevel(logging.WARNING)
        master.read_if.log.setLevel(logging.WARNING)
        return cls(master)

    def set_pause_generators(self, aw=None, w=None, b=None, ar=None, r=None):
        """Set (or, with ``None``, clear) a pause generator per channel. On AW, W and AR a pause
        holds valid low; on B and R it holds ready low (backpressure)."""
        write, read = self.master.write_if, self.master.read_if
        for channel, generator in ((write.aw_channel, aw), (write.w_channel, w),
                                   (write.b_channel, b), (read.ar_channel, ar),
                                   (read.r_channel, r)):
            channel.set_pause_generator(generator)
            if generator is None:
                # Killing a generator leaves the channel in whatever state it last set.
                channel.pause = False

    async def read_word(self, address):
        result = await self.master.read(address, 4)
        return int.from_bytes(result.data, "little"), Response(int(result.resp))

    async def write_word(self, address, value, strobe=0b1111):
        if strobe == 0:
            # A write with no strobes is legal AXI but cocotbext-axi cannot issue it.
            raise ValueError("Write strobe must select at least one byte lane, not 0b0000")
        first, count = _strobe_span(strobe)
        data = value.to_bytes(4, "little")[first:first + count]
        result = await self.master.write(address + first, data)
        return Response(int(result.resp))
