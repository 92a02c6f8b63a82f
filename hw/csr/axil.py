"""The AXI4-Lite interface, as an Amaranth signature.

The signature is written from the master's side (the master drives ``awaddr``, ``wdata``...), so
a slave declares its port as ``s_axil: In(AxiLiteSignature())``; in Verilog the ports are then
``s_axil__awaddr`` and so on. Members carry the AXI names so a bus functional model such as
cocotbext-axi finds them.

The rules a slave must keep (AMBA AXI4-Lite): a transfer happens on a cycle where valid and ready
are both high; once valid is high it and its payload hold until taken; a valid never waits for a
ready (no combinational path from ready to valid); AW and W are independent channels and may
arrive in either order.
"""

import enum

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiLiteSignature", "AxiResp"]


class AxiResp(enum.IntEnum):
    """``bresp``/``rresp`` codes."""
    OKAY = 0b00
    EXOKAY = 0b01
    SLVERR = 0b10
    DECERR = 0b11


def AxiLiteSignature(addr_width=16, data_width=32):
    """An AXI4-Lite signature seen from the master; use it flipped (``In(...)``) on a slave.

    ``wiring.Signature`` compares structurally, so two calls with equal arguments give equal
    signatures.
    """
    if not isinstance(addr_width, int) or isinstance(addr_width, bool) or not 2 <= addr_width <= 64:
        raise ValueError(
            f"AXI4-Lite address width must be an integer between 2 and 64, not {addr_width!r}")
    if data_width not in (32, 64) or isinstance(data_width, bool):
        raise ValueError(f"AXI4-Lite data width must be 32 or 64, not {data_width!r}")
    return wiring.Signature({
        "awaddr": Out(addr_width),
        "awprot": Out(3),
        "awvalid": Out(1),
        "awready": In(1),
        "wdata": Out(data_width),
        "wstrb": Out(data_width // 8),
        "wvalid": Out(1),
        "wready": In(1),
        "bresp": In(2),
        "bvalid": In(1),
        "bready": Out(1),
        "araddr": Out(addr_width),
        "arprot": Out(3),
        "arvalid": Out(1),
        "arready": In(1),
        "rdata": In(data_width),
        "rresp": In(2),
        "rvalid": In(1),
        "rready": Out(1),
    })
