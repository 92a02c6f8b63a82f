"""Find the register blocks of a design by walking their linked list.

Every block starts with ``type``, ``version`` (``0xMMMMmmmm``) and ``next`` (byte address of the
next block, 0 on the last), so the driver learns the layout of whatever design was generated
instead of hard-coding addresses. A driver supports a block type for a set of major versions; a
minor version bump only adds registers, so an unknown minor of a known major is accepted.
"""

from dataclasses import dataclass

from ..desc.block_types import block_types
from ..desc.registers import Versioned
from ..desc.errors import SnicError

__all__ = [
    "MAX_BLOCKS", "DiscoveredBlock", "DiscoveryError", "UnsupportedDesignError",
    "discover", "check_supported", "read_register", "write_register", "known_blocks",
]

def known_blocks():
    """Block types this driver knows: type ID -> (name, supported major versions), every block
    the generator makes and every network task of the library
    (:func:`supernic.desc.block_types.block_types`)."""
    global _KNOWN
    if _KNOWN is None:
        _KNOWN = block_types()
    return _KNOWN


_KNOWN = None

#: A real design has a handful of blocks; a longer list means the bus returns garbage.
MAX_BLOCKS = 256


class DiscoveryError(SnicError):
    """The block list is malformed: a loop, too many blocks, or an invalid header."""


class UnsupportedDesignError(SnicError):
    """A known block type carries a major version this driver does not support (the message
    starts ``design not supported: ``)."""


@dataclass(frozen=True)
class DiscoveredBlock(Versioned):
    base: int
    type_id: int
    version: int
    next: int

    @property
    def known(self):
        return self.type_id in known_blocks()

    @property
    def name(self):
        """The driver's name for the type, or ``None`` for an unknown type."""
        entry = known_blocks().get(self.type_id)
        return entry[0] if entry else None


async def discover(bus, base=0):
    """Walk the block list from ``base`` over ``bus``; return a list of :class:`DiscoveredBlock`.

    A ``next`` pointer must point past the block that holds it: one that goes back or repeats an
    address would make the walk loop forever.
    """
    blocks = []
    address = base
    while True:
        if len(blocks) == MAX_BLOCKS:
            raise DiscoveryError(
                f"more than {MAX_BLOCKS} register blocks from {base:#010x}; "
                f"the block list is probably corrupt")
        type_id = await bus.read32(address)
        version = await bus.read32(address + 4)
        next_address = await bus.read32(address + 8)
        if type_id == 0:
            raise DiscoveryError(f"no register block at {address:#010x} (type 0)")
        block = DiscoveredBlock(address, type_id, version, next_address)
        blocks.append(block)
        if next_address == 0:
            return blocks
        if next_address <= address:
            raise DiscoveryError(
                f"block at {address:#010x} has next pointer {next_address:#010x}, which does not "
                f"point past it (the block list would loop)")
        if next_address % 4:
            raise DiscoveryError(
                f"block at {address:#010x} has next pointer {next_address:#010x}, which is not "
                f"word-aligned")
        address = next_address


def check_supported(blocks):
    """Raise :class:`UnsupportedDesignError` for a known type with an unsupported major version.

    Returns the blocks of unknown type, which a driver lists but leaves alone.
    """
    unknown = []
    for block in blocks:
        if not block.known:
            unknown.append(block)
            continue
        name, majors = known_blocks()[block.type_id]
        if block.major not in majors:
            supported = ", ".join(f"{major}.*" for major in majors)
            raise UnsupportedDesignError(
                f"design not supported: block {name} (type 0x{block.type_id:08X}) version "
                f"{block.major}.{block.minor} is not supported by this driver (supports "
                f"{supported})")
    return unknown


def _register(regmap_json, block, reg):
    for block_json in regmap_json["blocks"]:
        if block_json["name"] == block:
            break
    else:
        raise KeyError(f"No block named {block!r} in the register map")
    for reg_json in block_json["registers"]:
        if reg_json["name"] == reg:
            return reg_json
    raise KeyError(f"No register named {reg!r} in block {block!r}")


async def write_register(bus, regmap_json, block, reg, value):
    """Write register ``reg`` of ``block`` by name, lo word first for a two-word register."""
    reg_json = _register(regmap_json, block, reg)
    if not isinstance(value, int) or not 0 <= value < 2 ** reg_json["width"]:
        raise ValueError(f"Value for {block}.{reg} must fit in {reg_json['width']} bits, "
                         f"not {value!r}")
    for part in range(reg_json["words"]):
        await bus.write32(reg_json["address"] + 4 * part, (value >> (32 * part)) & 0xFFFF_FFFF)


async def read_register(bus, regmap_json, block, reg):
    """Read register ``reg`` of ``block`` by name, using the map description (the JSON of
    ``RegisterMap.to_json``). A two-word register is read lo first, then hi, which is the order
    the register file's latch needs for an atomic 64-bit value."""
    reg_json = _register(regmap_json, block, reg)
    value = 0
    for part in range(reg_json["words"]):
        value |= await bus.read32(reg_json["address"] + 4 * part) << (32 * part)
    return value & ((1 << reg_json["width"]) - 1)
