"""``SerialBus``: the register bus over a board's UART bridge (protocol:
:mod:`supernic.desc.uart_bridge`), through pyserial, so ``/dev/ttyUSB1``, ``COM3`` and
pyserial's URLs (``socket://host:port``, ``loop://``) all work.

    bus = SerialBus("/dev/ttyUSB1")          # 1 Mbaud, 8N1
    value = await bus.read32(0x0000)

A reply that does not come within ``timeout`` seconds, or comes garbled, makes the bus
resynchronise (a byte that is no command, answered ``?``; see the protocol) and try the request
once more; a second failure raises :class:`~supernic.driver.transport.TransportLost`.
"""

import asyncio

from ..desc.uart_bridge import (DEFAULT_BAUD, READ_DATA, UNKNOWN, WRITE_ACK, encode_read,
                                encode_write)
from .transport import RegisterBus, Response, TransportLost

__all__ = ["SerialBus", "decode_read_reply", "decode_write_reply"]

_SYNC = b"\x00"     # no command: the bridge answers "?"


def decode_write_reply(reply: bytes):
    """The :class:`Response` of a write's reply; ValueError if it is not one."""
    if len(reply) != 2 or reply[0] != WRITE_ACK or reply[1] > 3:
        raise ValueError(f"not a write reply: {reply.hex() or 'nothing'}")
    return Response(reply[1])


def decode_read_reply(reply: bytes):
    """``(value, Response)`` of a read's reply; ValueError if it is not one."""
    if len(reply) != 6 or reply[0] != READ_DATA or reply[5] > 3:
        raise ValueError(f"not a read reply: {reply.hex() or 'nothing'}")
    return int.from_bytes(reply[1:5], "little"), Response(reply[5])


class SerialBus(RegisterBus):
    def __init__(self, port, baud=DEFAULT_BAUD, timeout=0.5):
        import serial
        try:
            self.port = serial.serial_for_url(port, baudrate=baud, timeout=timeout)
        except (serial.SerialException, ValueError) as e:
            raise TransportLost(f"cannot open {port}: {e}") from None
        self.name = port

    def close(self):
        self.port.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _resync(self):
        self.port.reset_input_buffer()
        self.port.write(_SYNC)
        self.port.flush()
        got = self.port.read(1)
        self.port.reset_input_buffer()
        return got == bytes([UNKNOWN])

    def _transfer(self, request, length, decode):
        for attempt in range(2):
            self.port.write(request)
            self.port.flush()
            reply = self.port.read(length)
            try:
                return decode(reply)
            except ValueError as e:
                error = e
                if attempt == 0:
                    self._resync()
        raise TransportLost(f"register bus on {self.name}: {error} (is the board's bitstream "
                            f"loaded, and the baud rate right?)")

    def read_now(self, address):
        return self._transfer(encode_read(address), 6, decode_read_reply)

    def write_now(self, address, value, strobe=0b1111):
        return self._transfer(encode_write(address, value, strobe), 2, decode_write_reply)

    async def read_word(self, address):
        return await asyncio.to_thread(self.read_now, address)

    async def write_word(self, address, value, strobe=0b1111):
        return await asyncio.to_thread(self.write_now, address, value, strobe)
