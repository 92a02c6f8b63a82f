"""Register blocks every design has: ``id`` (what the design is) and a parser's counters. Every
block starts with type, version and next (:mod:`supernic.desc.registers`), so a driver
discovers what a design holds."""

from .registers import R, Register, RegisterBlock, RegisterMap

__all__ = ["id_block", "parser_block", "parser_register_map", "ID_TYPE", "PARSER_TYPE",
           "DESIGN_VERSION", "CSR_ADDR_WIDTH", "CHAIN_TYPE", "chain_block",
           "chain_register_map"]

ID_TYPE = 0x534E4943      # 'SNIC'
PARSER_TYPE = 0x50415253  # 'PARS'
DESIGN_VERSION = 0x0001_0000
CSR_ADDR_WIDTH = 16


def id_block():
    return RegisterBlock("id", ID_TYPE, 0x0001_0000, [
        Register("build_id", 32, R, doc="Hash of the build configuration"),
        Register("design_version", 32, R, doc="Version of the generated design (major.minor)"),
        Register("data_width", 32, R, doc="Bits per stream beat"),
        Register("header_bytes", 32, R, doc="Parser capture window in bytes"),
    ], doc="Identifies the design and its build parameters")


def parser_block(port=None):
    """A parser's counters: the parser-only design's ``parser``, or port ``port``'s of a NIC."""
    name, of = ("parser", "") if port is None else (f"parser{port}", f", port {port}")
    return RegisterBlock(name, PARSER_TYPE, 0x0001_0000, [
        Register("packets", 64, R, doc="Packets that left the parser"),
        Register("bytes", 64, R, doc="Bytes that left the parser"),
        Register("malformed", 64, R, doc="Packets with any error flag set"),
    ], doc=f"Header parser counters{of}")


def parser_register_map():
    """The register map of the parser-only design (:mod:`supernic.hw.top`)."""
    return RegisterMap([id_block(), parser_block()])


CHAIN_TYPE = 0x4348414E  # 'CHAN'


def chain_block():
    return RegisterBlock("chain", CHAIN_TYPE, 0x0001_0000, [
        Register("delivered", 64, R, doc="Packets that left the chain"),
        Register("dropped", 64, R, doc="Packets an NT dropped, discarded at the egress"),
        Register("dropped_bytes", 64, R, doc="Bytes of the dropped packets"),
    ], doc="Chain egress counters")


def chain_register_map(spec):
    """The register map of a single-tenant chain design (:mod:`supernic.hw.chain.top`) of the
    chain ``spec`` (:class:`~supernic.desc.chain.ChainSpec`)."""
    blocks = [id_block(), parser_block(), chain_block()]
    blocks += [n.task.register_block(n.name, n.params) for n in spec.node_list()]
    return RegisterMap(blocks)
