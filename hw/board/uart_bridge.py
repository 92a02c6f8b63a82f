"""The NIC's register bus over the board's UART: requests from the driver's ``SerialBus``
become AXI4-Lite transfers, their results go back as replies (protocol:
:mod:`supernic.desc.uart_bridge`).

One request at a time: the bridge gathers a request's bytes, drives the AXI4-Lite channels
(AW and W together, then B; or AR, then R), and sends the reply. A first byte that is no command
is answered ``?``; a request whose bytes stop for ``TIMEOUT_BYTES`` byte times is dropped, so
the host can always find the start of a request again. Bytes that arrive while a transfer or its
reply is under way are part of no request and are dropped (and counted): the host waits for
each reply.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...desc.uart_bridge import (BOARD_BASE, DEFAULT_BAUD, READ, READ_DATA, REQUEST_BYTES,
                                 TIMEOUT_BYTES, UNKNOWN, WRITE, WRITE_ACK)
from ..csr.axil import AxiResp
from ..csr.axil import AxiLiteSignature
from .uart import UartRx, UartTx

__all__ = ["UartAxiLiteBridge"]


class UartAxiLiteBridge(wiring.Component):
    """``rx``/``tx``: the UART's lines (idle high); ``m_axil``: the AXI4-Lite master;
    ``board``: ``board_words`` read-only words answered at ``BOARD_BASE`` and up."""

    def __init__(self, clk_hz, baud=DEFAULT_BAUD, addr_width=16, board_words=0):
        divisor = round(clk_hz / baud)
        if abs(clk_hz / divisor - baud) / baud > 0.02:
            raise ValueError(f"{baud} baud is {abs(clk_hz / divisor - baud) / baud:.1%} off "
                             f"from a {clk_hz / 1e6:g} MHz clock (at most 2 %)")
        self.divisor = divisor
        self.addr_width = addr_width
        self.board_words = board_words
        super().__init__({
            **({"board": In(32).array(board_words)} if board_words else {}),
            "rx": In(1, init=1), "tx": Out(1, init=1),
            "m_axil": Out(AxiLiteSignature(addr_width)),
            "framing_errors": Out(16), "dropped_bytes": Out(16), "timeouts": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.urx = urx = UartRx(self.divisor)
        m.submodules.utx = utx = UartTx(self.divisor)
        m.d.comb += [urx.rx.eq(self.rx), self.tx.eq(utx.tx),
                     self.framing_errors.eq(urx.framing_errors)]
        axil = self.m_axil

        command = Signal(8)
        request = Array(Signal(8, name=f"req{i}") for i in range(9))   # after the command byte
        count = Signal(range(10))
        idle = Signal(range(self.divisor * 10 * TIMEOUT_BYTES + 1))
        address = Cat(*(request[i] for i in range(4)))
        value = Cat(*(request[i] for i in range(4, 8)))
        reply = Array(Signal(8, name=f"rep{i}") for i in range(6))
        reply_len = Signal(range(7))
        sent = Signal(range(7))
        aw_done, w_done = Signal(), Signal()

        def drop_byte():
            with m.If(urx.o.valid):
                m.d.sync += self.dropped_bytes.eq(self.dropped_bytes + 1)

        with m.FSM():
            with m.State("command"):
                with m.If(urx.o.valid):
                    m.d.sync += [command.eq(urx.o.payload), count.eq(0), idle.eq(0)]
                    with m.If((urx.o.payload == WRITE) | (urx.o.payload == READ)):
                        m.next = "request"
                    with m.Else():
                        m.d.sync += [reply[0].eq(UNKNOWN), reply_len.eq(1), sent.eq(0)]
                        m.next = "reply"
            with m.State("request"):
                needed = Mux(command == WRITE, REQUEST_BYTES[WRITE] - 1, REQUEST_BYTES[READ] - 1)
                with m.If(urx.o.valid):
                    m.d.sync += [request[count].eq(urx.o.payload), count.eq(count + 1),
                                 idle.eq(0)]
                    with m.If(count + 1 == needed):
                        m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                        # The last address byte is this one for a read, request[3] for a write.
                        high = Mux(command == WRITE, request[3], urx.o.payload)
                        with m.If((request[2] != 0) | (high != 0)):
                            m.next = "board"
                        with m.Elif(command == WRITE):
                            m.next = "write"
                        with m.Else():
                            m.next = "read"
                with m.Elif(idle == self.divisor * 10 * TIMEOUT_BYTES):
                    m.d.sync += self.timeouts.eq(self.timeouts + 1)
                    m.next = "command"
                with m.Else():
                    m.d.sync += idle.eq(idle + 1)
            with m.State("write"):
                drop_byte()
                m.d.comb += [axil.awaddr.eq(address), axil.awvalid.eq(~aw_done),
                             axil.wdata.eq(value), axil.wstrb.eq(request[8]),
                             axil.wvalid.eq(~w_done), axil.bready.eq(aw_done & w_done)]
                with m.If(axil.awvalid & axil.awready):
                    m.d.sync += aw_done.eq(1)
                with m.If(axil.wvalid & axil.wready):
                    m.d.sync += w_done.eq(1)
                with m.If(axil.bready & axil.bvalid):
                    m.d.sync += [reply[0].eq(WRITE_ACK), reply[1].eq(axil.bresp),
                                 reply_len.eq(2), sent.eq(0)]
                    m.next = "reply"
            with m.State("read"):
                drop_byte()
                m.d.comb += [axil.araddr.eq(address), axil.arvalid.eq(~aw_done),
                             axil.rready.eq(aw_done)]
                with m.If(axil.arvalid & axil.arready):
                    m.d.sync += aw_done.eq(1)
                with m.If(axil.rready & axil.rvalid):
                    m.d.sync += [reply[0].eq(READ_DATA)] + [
                        reply[1 + i].eq(axil.rdata[8 * i:8 * i + 8]) for i in range(4)] + [
                        reply[5].eq(axil.rresp), reply_len.eq(6), sent.eq(0)]
                    m.next = "reply"
            with m.State("board"):
                # The bridge's own words (BOARD_BASE and up): read-only, no bus transfer.
                drop_byte()
                index = (address - BOARD_BASE)[2:]
                known = (address >= BOARD_BASE) & (index < self.board_words)
                word = Signal(32)
                for k in range(self.board_words):
                    with m.If(index == k):
                        m.d.comb += word.eq(self.board[k])
                ok = known & (command == READ)
                resp = Mux(ok, AxiResp.OKAY, AxiResp.SLVERR)
                with m.If(command == WRITE):
                    m.d.sync += [reply[0].eq(WRITE_ACK), reply[1].eq(resp), reply_len.eq(2)]
                with m.Else():
                    m.d.sync += [reply[0].eq(READ_DATA), reply[5].eq(resp), reply_len.eq(6)] + [
                        reply[1 + i].eq(Mux(ok, word[8 * i:8 * i + 8], 0)) for i in range(4)]
                m.d.sync += sent.eq(0)
                m.next = "reply"
            with m.State("reply"):
                drop_byte()
                m.d.comb += [utx.i.valid.eq(1), utx.i.payload.eq(reply[sent])]
                with m.If(utx.i.ready):
                    m.d.sync += sent.eq(sent + 1)
                    with m.If(sent + 1 == reply_len):
                        m.next = "command"
        return m
