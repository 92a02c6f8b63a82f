"""A single-tenant design: AXI4-Stream in, parser, one tenant's chain or DAG, drop stage,
AXI4-Stream out, and the register file.

This is what ``snic build`` emits for each chain a configuration names, and what the chain
tests run. Register blocks, in order: ``id``, ``parser``, ``chain`` ('CHAN': packets delivered,
dropped and the dropped bytes at the egress), then one block per NT named after its node.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from ...desc.config import DesignConfig
from ..csr.axil import AxiLiteSignature
from ..csr.regfile import RegisterFile
from ..parser.meta import meta_layout
from ..parser.parser import HeaderParser
from ..shell import SHELL_MEMBERS, connect_port, registered_reset
from ..top import drive_id_and_parser
from ...desc.blocks import CSR_ADDR_WIDTH, chain_register_map
from .discard import DropStage
from .graph import TaskGraph
from ...desc.chain import ChainSpec

__all__ = ["ChainTop"]

class ChainTop(wiring.Component):
    def __init__(self, config: DesignConfig, spec: ChainSpec):
        self.config = config
        self.spec = spec
        self.meta_layout = meta_layout(config.header_bytes)
        self.regmap = chain_register_map(spec)
        super().__init__({
            **SHELL_MEMBERS,
            "s_axis": In(AxiStreamSignature(config.data_width)),
            "m_axis": Out(AxiStreamSignature(config.data_width, self.meta_layout.size)),
            "s_axil": In(AxiLiteSignature(CSR_ADDR_WIDTH)),
        })

    def elaborate(self, platform):
        cfg = self.config
        m = Module()
        in_reset = registered_reset(m, self)
        m.submodules.rx = rx = AxiStreamToPacket(cfg.data_width)
        m.submodules.parser = parser = HeaderParser(*cfg.parser_args())
        m.submodules.graph = graph = TaskGraph(self.spec, cfg.data_width, cfg.header_bytes)
        m.submodules.egress = egress = DropStage(cfg.data_width, self.meta_layout)
        m.submodules.tx = tx = PacketToAxiStream(cfg.data_width, self.meta_layout)
        m.submodules.csr = csr = RegisterFile(self.regmap, CSR_ADDR_WIDTH)
        connect_port(m, self.s_axis, rx.s_axis, in_reset)
        wiring.connect(m, rx.o, parser.i)
        wiring.connect(m, parser.o, graph.i)
        wiring.connect(m, graph.o, egress.i)
        wiring.connect(m, egress.o, tx.i)
        connect_port(m, self.m_axis, tx.m_axis, in_reset)
        connect_port(m, self.s_axil, csr.s_axil, in_reset)
        for name, task in graph.tasks.items():
            wiring.connect(m, getattr(csr.fields, name), task.csr)
        drive_id_and_parser(m, csr, cfg, parser)
        wiring.connect(m, csr.fields.chain, egress.csr)
        return m
