"""The parser-only top level: AXI4-Stream in, parser, AXI4-Stream out, AXI4-Lite registers.

This is what a configuration without a ``[nic]`` section builds (the parser benchmark and
tests use it); the multi-tenant NIC is :mod:`supernic.hw.nic.top`.

Register blocks, in list order (each starts with type, version, next):

* ``id`` ('SNIC' v1.0): build identifier and the build parameters, so a driver can tell what
  it is talking to;
* ``parser`` ('PARS' v1.0): 64-bit counters of packets, bytes and malformed packets (any error
  flag) leaving the parser.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axis import AxiStreamSignature, AxiStreamToPacket, PacketToAxiStream
from ..desc.config import DesignConfig
from .csr.axil import AxiLiteSignature
from .csr.regfile import RegisterFile
from ..desc.blocks import CSR_ADDR_WIDTH, DESIGN_VERSION, parser_register_map
from .parser.meta import meta_layout
from .parser.parser import HeaderParser
from .shell import SHELL_MEMBERS, connect_port, registered_reset

__all__ = ["ParserTop", "drive_id", "drive_id_and_parser"]

def drive_id(m, csr, build_id, data_width, header_bytes):
    """Drive the ``id`` block of register file ``csr`` (every design and test shell has one)."""
    m.d.comb += [
        csr.field("id", "build_id").eq(build_id),
        csr.field("id", "design_version").eq(DESIGN_VERSION),
        csr.field("id", "data_width").eq(data_width),
        csr.field("id", "header_bytes").eq(header_bytes),
    ]


def drive_id_and_parser(m, csr, config, parser):
    drive_id(m, csr, config.build_id, config.data_width, config.header_bytes)
    wiring.connect(m, csr.fields.parser, parser.csr)


class ParserTop(wiring.Component):
    def __init__(self, config: DesignConfig):
        self.config = config
        self.meta_layout = meta_layout(config.header_bytes)
        self.regmap = parser_register_map()
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
        m.submodules.tx = tx = PacketToAxiStream(cfg.data_width, self.meta_layout)
        m.submodules.csr = csr = RegisterFile(self.regmap, CSR_ADDR_WIDTH)
        connect_port(m, self.s_axis, rx.s_axis, in_reset)
        wiring.connect(m, rx.o, parser.i)
        wiring.connect(m, parser.o, tx.i)
        connect_port(m, self.m_axis, tx.m_axis, in_reset)
        connect_port(m, self.s_axil, csr.s_axil, in_reset)
        drive_id_and_parser(m, csr, cfg, parser)
        return m
