"""The register bus over a UART: the byte protocol between the driver's ``SerialBus``
(sw/driver/serial_bus.py) and the board's bridge (hw/board/uart_bridge.py).

Each request is answered by one reply; numbers are little-endian:

==========  =========================================  ===================================
request     bytes                                      reply
==========  =========================================  ===================================
write       ``W``, address (4), value (4), strobe (1)  ``K``, response (1)
read        ``R``, address (4)                         ``D``, value (4), response (1)
other byte  (anything else, first)                     ``?`` (nothing done)
==========  =========================================  ===================================

The response is the AXI4-Lite ``bresp``/``rresp`` code. Addresses from :data:`BOARD_BASE` up are
the bridge's own: read-only words the board top gives it (the MAC's and the bridge's counters,
named in the design JSON's ``board`` section), answered without a bus transfer; a write there,
or a read past the last word, is answered SLVERR. A request whose bytes stop coming for
:data:`TIMEOUT_BYTES` byte times is dropped without a reply, so a host that lost its place sends
a byte that is no command (``?`` comes back), then its request again.
"""

__all__ = ["WRITE", "READ", "WRITE_ACK", "READ_DATA", "UNKNOWN", "TIMEOUT_BYTES",
           "DEFAULT_BAUD", "BOARD_BASE", "encode_read", "encode_write", "REQUEST_BYTES", "REPLY_BYTES"]

WRITE, READ = 0x57, 0x52                          # "W", "R"
WRITE_ACK, READ_DATA, UNKNOWN = 0x4B, 0x44, 0x3F  # "K", "D", "?"
REQUEST_BYTES = {WRITE: 10, READ: 5}
REPLY_BYTES = {WRITE: 2, READ: 6}
TIMEOUT_BYTES = 16
#: 1 Mbaud: exact from 125 MHz (125 clocks a bit) and from an FTDI's 3 MHz base clock.
DEFAULT_BAUD = 1_000_000
#: Where the board's own registers start (the NIC's register space is 16 bits wide).
BOARD_BASE = 0x1_0000


def encode_write(address, value, strobe=0b1111):
    return bytes([WRITE]) + address.to_bytes(4, "little") + value.to_bytes(4, "little") \
        + bytes([strobe])


def encode_read(address):
    return bytes([READ]) + address.to_bytes(4, "little")
