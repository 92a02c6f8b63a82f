"""A test and benchmark shell around one network task: AXI4-Stream in with the metadata on
``tuser``, the NT, AXI4-Stream out with the metadata on ``tuser``, and an AXI4-Lite register file
with the ``id`` block and the NT's block.

The bench supplies the metadata the parser would have produced (the model computes it), so an
NT is tested and measured alone, without a parser in front of it.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from ..csr.axil import AxiLiteSignature
from ..csr.regfile import RegisterFile
from ...desc.registers import RegisterMap
from ..parser.meta import meta_layout
from ..top import drive_id
from ...desc.blocks import CSR_ADDR_WIDTH, id_block

__all__ = ["TaskShell", "shell_register_map"]


def shell_register_map(task_cls, params, block="nt"):
    """The full design's identification block, then the NT's."""
    return RegisterMap([id_block(), task_cls.register_block(block, params)])


class TaskShell(wiring.Component):
    """With ``yieldable=True`` (the boundary state port, or a mode: ``"boundary"``, ``"full"``)
    the NT is wrapped in the state-yielding transform
    (:class:`~supernic.hw.transform.Yieldable`) and its ``yld`` port is a top-level port
    (``yld__stop``, ``yld__addr``, ...); ``self.task`` is then the transformed NT."""

    def __init__(self, task_cls, data_width, header_bytes=256, params=None, build_id=0,
                 yieldable=False):
        self.task_cls = task_cls
        self.params = task_cls.check_params(params or {})
        self.data_width = data_width
        self.header_bytes = header_bytes
        self.build_id = build_id
        self.meta_layout = meta_layout(header_bytes)
        self.regmap = shell_register_map(task_cls, self.params)
        members = {
            "s_axis": In(AxiStreamSignature(data_width, self.meta_layout.size)),
            "m_axis": Out(AxiStreamSignature(data_width, self.meta_layout.size)),
            "s_axil": In(AxiLiteSignature(CSR_ADDR_WIDTH)),
        }
        self.task = None
        if yieldable:
            from ..transform import Yieldable
            state = yieldable if isinstance(yieldable, str) else "boundary"
            self.task = Yieldable(task_cls(data_width, header_bytes, **self.params),
                                  state=state)
            members["yld"] = self.task.signature.members["yld"]
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.rx = rx = AxiStreamToPacket(self.data_width, self.meta_layout)
        if self.task is not None:
            m.submodules.task = task = self.task
            wiring.connect(m, wiring.flipped(self.yld), task.yld)
        else:
            m.submodules.task = task = self.task_cls(self.data_width, self.header_bytes,
                                                     **self.params)
        m.submodules.tx = tx = PacketToAxiStream(self.data_width, self.meta_layout)
        m.submodules.csr = csr = RegisterFile(self.regmap, CSR_ADDR_WIDTH)
        wiring.connect(m, wiring.flipped(self.s_axis), rx.s_axis)
        wiring.connect(m, rx.o, task.i)
        wiring.connect(m, task.o, tx.i)
        wiring.connect(m, tx.m_axis, wiring.flipped(self.m_axis))
        wiring.connect(m, wiring.flipped(self.s_axil), csr.s_axil)
        wiring.connect(m, csr.fields.nt, task.csr)
        drive_id(m, csr, self.build_id, self.data_width, self.header_bytes)
        return m
