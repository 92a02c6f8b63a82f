"""AXI4-Stream shell: the only place where the design speaks AXI4-Stream names.

Inside, packets travel on :func:`~supernic.hw.stream.PacketSignature` streams. At the top-level
boundary, ``s_axis``/``m_axis`` carry ``tdata``, ``tkeep``, ``tlast``, ``tvalid``, ``tready``
and, on the way out, ``tuser`` with the packet metadata (ARM IHI 0051B, AXI4-Stream).
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .stream import PacketSignature, check_data_width

__all__ = ["AxiStreamSignature", "AxiStreamToPacket", "PacketToAxiStream"]


def AxiStreamSignature(data_width, user_width=0):
    """Seen from the source: ``Out`` members are driven by the transmitter."""
    check_data_width(data_width)
    members = {
        "tdata": Out(data_width),
        "tkeep": Out(data_width // 8),
        "tlast": Out(1),
        "tvalid": Out(1),
        "tready": In(1),
    }
    if user_width:
        members["tuser"] = Out(user_width)
    return wiring.Signature(members)


class AxiStreamToPacket(wiring.Component):
    """``s_axis`` in, packet stream out (no register: names only). With ``meta_layout`` the
    metadata comes in on ``tuser`` (a test shell feeding a network task directly)."""

    def __init__(self, data_width, meta_layout=None):
        self.meta_layout = meta_layout
        user = meta_layout.size if meta_layout is not None else 0
        super().__init__({
            "s_axis": In(AxiStreamSignature(data_width, user)),
            "o": Out(PacketSignature(data_width, meta_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        if self.meta_layout is not None:
            m.d.comb += self.o.p.meta.eq(self.s_axis.tuser)
        m.d.comb += [
            self.o.valid.eq(self.s_axis.tvalid),
            self.o.p.data.eq(self.s_axis.tdata),
            self.o.p.keep.eq(self.s_axis.tkeep),
            self.o.p.last.eq(self.s_axis.tlast),
            self.s_axis.tready.eq(self.o.ready),
        ]
        return m


class PacketToAxiStream(wiring.Component):
    """Packet stream with metadata in, ``m_axis`` out with the metadata on ``tuser``."""

    def __init__(self, data_width, meta_layout):
        self.meta_layout = meta_layout
        super().__init__({
            "i": In(PacketSignature(data_width, meta_layout)),
            "m_axis": Out(AxiStreamSignature(data_width, meta_layout.size)),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.m_axis.tvalid.eq(self.i.valid),
            self.m_axis.tdata.eq(self.i.p.data),
            self.m_axis.tkeep.eq(self.i.p.keep),
            self.m_axis.tlast.eq(self.i.p.last),
            self.m_axis.tuser.eq(self.i.p.meta.as_value()),
            self.i.ready.eq(self.m_axis.tready),
        ]
        return m
