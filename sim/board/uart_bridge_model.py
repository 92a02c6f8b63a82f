"""The UART register bridge's model (hw/board/uart_bridge.py): bytes in, reply bytes out, over a
word memory. It is the oracle of the bridge's bench and the device behind ``SerialBus``'s
tests (served on a TCP socket, which pyserial reaches as ``socket://``)."""

from supernic.desc.uart_bridge import (BOARD_BASE, READ, READ_DATA, REQUEST_BYTES, UNKNOWN,
                                       WRITE, WRITE_ACK)

__all__ = ["UartBridgeModel"]


class UartBridgeModel:
    def __init__(self, addr_width=16, memory=None, board=()):
        self.mask = (1 << addr_width) - 1
        self.memory = {} if memory is None else memory     # word address -> value
        self.board = list(board)        # the bridge's own read-only words at BOARD_BASE
        self.pending = b""

    def timeout(self):
        """The bridge's inter-byte timeout: a partial request is forgotten."""
        self.pending = b""

    def feed(self, data: bytes) -> bytes:
        """The reply bytes to ``data`` (a request, several, or a part of one)."""
        out = b""
        for byte in data:
            if not self.pending:
                if byte not in REQUEST_BYTES:
                    out += bytes([UNKNOWN])
                    continue
            self.pending += bytes([byte])
            if len(self.pending) == REQUEST_BYTES[self.pending[0]]:
                out += self._execute(self.pending)
                self.pending = b""
        return out

    def _execute(self, request):
        address = int.from_bytes(request[1:5], "little")
        if address >= BOARD_BASE:
            index = (address - BOARD_BASE) >> 2
            if request[0] == WRITE or index >= len(self.board):
                return bytes([WRITE_ACK, 2]) if request[0] == WRITE else \
                    bytes([READ_DATA, 0, 0, 0, 0, 2])           # SLVERR
            return bytes([READ_DATA]) + self.board[index].to_bytes(4, "little") + b"\x00"
        address &= self.mask & ~3
        if request[0] == WRITE:
            value = int.from_bytes(request[5:9], "little")
            strobe = request[9]
            old = self.memory.get(address, 0)
            mask = sum(0xFF << (8 * i) for i in range(4) if strobe >> i & 1)
            self.memory[address] = (old & ~mask) | (value & mask)
            return bytes([WRITE_ACK, 0])
        assert request[0] == READ
        return bytes([READ_DATA]) + self.memory.get(address, 0).to_bytes(4, "little") + b"\x00"
