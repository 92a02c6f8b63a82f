"""Baseline design for benchmarks: the AXI4-Stream shell around a small FIFO, nothing else.

Whatever limits this design's beats per cycle is the harness, not the gateware; measuring it in
the same run tells what part of a figure belongs to the design under test.
"""

from amaranth.hdl import Cat, Module
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from .axis import AxiStreamSignature

__all__ = ["StreamPassthrough"]


class StreamPassthrough(wiring.Component):
    def __init__(self, data_width):
        self.data_width = data_width
        super().__init__({
            "s_axis": In(AxiStreamSignature(data_width)),
            "m_axis": Out(AxiStreamSignature(data_width)),
        })

    def elaborate(self, platform):
        m = Module()
        w = self.data_width
        m.submodules.fifo = q = fifo.SyncFIFOBuffered(width=w + w // 8 + 1, depth=4)
        m.d.comb += [
            q.w_data.eq(Cat(self.s_axis.tdata, self.s_axis.tkeep, self.s_axis.tlast)),
            q.w_en.eq(self.s_axis.tvalid),
            self.s_axis.tready.eq(q.w_rdy),
            self.m_axis.tdata.eq(q.r_data[:w]),
            self.m_axis.tkeep.eq(q.r_data[w:w + w // 8]),
            self.m_axis.tlast.eq(q.r_data[-1]),
            self.m_axis.tvalid.eq(q.r_rdy),
            q.r_en.eq(self.m_axis.tready),
        ]
        return m
