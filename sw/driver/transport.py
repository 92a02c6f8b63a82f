"""The register bus a driver talks to, independent of what carries it.

The same driver code runs on a simulation (:mod:`supernic.sim.axil_bus`), on hardware (a PCIe BAR
or a UART bridge) and on the Python stand-ins here. A backend implements two primitives that
report the bus response instead of raising; :meth:`RegisterBus.read32` and
:meth:`RegisterBus.write32` add argument checks and turn a non-OKAY response into
:class:`RegisterAccessError`.
"""

import enum
from collections.abc import MutableMapping

__all__ = ["Response", "RegisterAccessError", "RegisterBus", "MemoryBus"]


class Response(enum.IntEnum):
    """Bus response codes (the AXI ``bresp``/``rresp`` encoding)."""
    OKAY = 0b00
    EXOKAY = 0b01
    SLVERR = 0b10
    DECERR = 0b11


class RegisterAccessError(Exception):
    """A transfer ended with a response other than OKAY."""

    def __init__(self, address, response, operation="read"):
        self.address = address
        self.response = Response(response)
        self.operation = operation
        super().__init__(f"{operation} at {address:#010x} failed with "
                         f"{self.response.name} ({int(self.response):#04b})")


def _check_address(address):
    if not isinstance(address, int) or isinstance(address, bool) or address < 0 or address % 4:
        raise ValueError(f"Register address must be a non-negative multiple of 4, not {address!r}")


class RegisterBus:
    """Abstract async 32-bit register bus.

    Backends override :meth:`read_word` and :meth:`write_word`; both return the bus response
    rather than raise, so tests can check error responses and their read data.
    """

    async def read_word(self, address):
        """Read the word at ``address``; return ``(value, Response)``."""
        raise NotImplementedError

    async def write_word(self, address, value, strobe=0b1111):
        """Write the bytes of ``value`` selected by ``strobe`` at ``address``; return the
        :class:`Response`."""
        raise NotImplementedError

    async def read32(self, address) -> int:
        _check_address(address)
        value, response = await self.read_word(address)
        if response != Response.OKAY:
            raise RegisterAccessError(address, response, "read")
        return value

    async def write32(self, address, value, strobe=0b1111) -> None:
        _check_address(address)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2 ** 32:
            raise ValueError(f"Register value must be a 32-bit unsigned integer, not {value!r}")
        if not isinstance(strobe, int) or not 0 <= strobe <= 0b1111:
            raise ValueError(f"Write strobe must be a 4-bit unsigned integer, not {strobe!r}")
        response = await self.write_word(address, value, strobe)
        if response != Response.OKAY:
            raise RegisterAccessError(address, response, "write")


class MemoryBus(RegisterBus):
    """A register bus without a simulator, for unit tests.

    ``backing`` is either a mutable mapping of word address -> value (plain memory: every
    present address reads and writes, every absent one answers DECERR), or any object with the
    reference model's interface, ``read(address) -> (value, response)`` and
    ``write(address, value, strobe) -> response`` (such as
    :class:`supernic.sim.csr_model.RegisterFileModel`).
    """

    def __init__(self, backing=None):
        if backing is None:
            backing = {}
        if not isinstance(backing, MutableMapping) and not (
                hasattr(backing, "read") and hasattr(backing, "write")):
            raise TypeError(
                f"Memory bus backing must be a mutable mapping or a register model, "
                f"not {backing!r}")
        self.backing = backing

    async def read_word(self, address):
        if isinstance(self.backing, MutableMapping):
            if address not in self.backing:
                return 0, Response.DECERR
            return self.backing[address], Response.OKAY
        value, response = self.backing.read(address)
        return value, Response(response)

    async def write_word(self, address, value, strobe=0b1111):
        if isinstance(self.backing, MutableMapping):
            if address not in self.backing:
                return Response.DECERR
            mask = sum(0xFF << (8 * lane) for lane in range(4) if strobe >> lane & 1)
            self.backing[address] = (self.backing[address] & ~mask) | (value & mask)
            return Response.OKAY
        return Response(self.backing.write(address, value, strobe))
