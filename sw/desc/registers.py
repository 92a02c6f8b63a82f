"""Self-describing control registers: the description, with no hardware in it.

A design is a list of register blocks. Every block starts with three read-only words:

* word 0, ``type``: a 32-bit type ID naming what the block is (often four ASCII letters);
* word 1, ``version``: ``0xMMMMmmmm``, major and minor; a driver accepts the majors it knows;
* word 2, ``next``: the byte address of the next block, 0 on the last one.

The block's registers follow from word 3 on, in the order given. A register is 1 to 64 bits wide;
one wider than 32 bits takes two words, ``<name>_lo`` then ``<name>_hi``. A driver walks the list
from address 0 and needs no hard-coded addresses, since every generated design differs.

Access kinds:

* :data:`R`: read-only, the value is driven by hardware. For a two-word ``R`` register a read of
  the lo word latches the hi word into a shadow that the hi word then returns, so a running
  64-bit counter reads atomically when software reads lo first, then hi.
* :data:`RW`: stored in the register file with a reset value, read back as written.
* :data:`W1P`: write-1 pulse; each written 1 bit gives a one-cycle strobe on that bit; reads 0.

A register of at most 32 bits may also have an access *strobe* (``strobe=True``): a one-cycle
pulse on ``<name>_stb`` in the cycle after each read of an ``R`` register (the value read was
the one before the pulse) or each write of an ``RW`` register (the register already holds the
written value). A port that streams words through one register uses it, such as the state port
of a region (one bus transaction a word, the address moving on by itself).

:meth:`RegisterMap.to_json` is the single source the bus decoder, the reference model, the driver
and documentation are derived from; :func:`words_from_json` expands it into one entry a word.
"""

import enum
import re
from typing import NamedTuple

__all__ = [
    "Access", "R", "RW", "W1P", "Register", "RegisterBlock", "RegisterMap", "Word",
    "words_from_json", "HEADER_WORDS", "Versioned",
]

#: The three header words every block starts with, in address order.
HEADER_WORDS = ("type", "version", "next")

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class Access(enum.Enum):
    R = "R"
    RW = "RW"
    W1P = "W1P"


R = Access.R
RW = Access.RW
W1P = Access.W1P


def _is_int(value):
    # bool is an int subclass; True as a width or address is always a mistake.
    return isinstance(value, int) and not isinstance(value, bool)


def _check_name(thing, name):
    if not isinstance(name, str):
        raise TypeError(f"{thing} name must be a string, not {name!r}")
    # Lower-case identifiers give valid Amaranth member names, C macros and JSON keys alike.
    if not _NAME_RE.match(name) or name == "signature":
        raise ValueError(f"{thing} name must be a lower-case identifier, not {name!r}")
    return name


class Register:
    """One register: ``name``, ``width`` bits (1..64), ``access`` kind and ``reset`` value.

    A nonzero ``reset`` only makes sense for :data:`RW`: an ``R`` value comes from hardware and a
    ``W1P`` register holds nothing.
    """

    def __init__(self, name, width=32, access=R, reset=0, doc="", strobe=False):
        _check_name("Register", name)
        if name in HEADER_WORDS:
            raise ValueError(
                f"Register name must not be a header word name {HEADER_WORDS}, not {name!r}")
        if not _is_int(width) or not 1 <= width <= 64:
            raise ValueError(f"Register width must be an integer between 1 and 64, not {width!r}")
        if not isinstance(access, Access):
            raise TypeError(f"Register access must be R, RW or W1P, not {access!r}")
        if not _is_int(reset) or not 0 <= reset < 2 ** width:
            raise ValueError(
                f"Register reset must be an integer that fits in {width} bits, not {reset!r}")
        if reset != 0 and access is not RW:
            raise ValueError(f"Register reset must be 0 for access {access.value}, not {reset!r}")
        if not isinstance(doc, str):
            raise TypeError(f"Register doc must be a string, not {doc!r}")
        if not isinstance(strobe, bool):
            raise TypeError(f"Register strobe must be a bool, not {strobe!r}")
        if strobe and (access is W1P or width > 32):
            raise ValueError(f"Register strobe must be on an R or RW register of at most 32 "
                             f"bits, not {access.value} of {width} bits")
        self.name = name
        self.width = width
        self.access = access
        self.reset = reset
        self.doc = doc
        self.strobe = strobe

    @property
    def strobe_name(self):
        """The name of the access strobe's port (``None`` without a strobe)."""
        return f"{self.name}_stb" if self.strobe else None

    @property
    def words(self):
        return 1 if self.width <= 32 else 2

    @property
    def word_names(self):
        if self.words == 1:
            return (self.name,)
        return (f"{self.name}_lo", f"{self.name}_hi")

    def __repr__(self):
        return (f"Register({self.name!r}, width={self.width}, access={self.access.value}, "
                f"reset={self.reset:#x}{', strobe=True' if self.strobe else ''})")


class Versioned:
    """A block's ``version`` word, ``0xMMMMmmmm``: a minor bump only adds registers."""

    @property
    def major(self):
        return self.version >> 16

    @property
    def minor(self):
        return self.version & 0xFFFF


class RegisterBlock(Versioned):
    """A block: header (type, version, next) then ``registers`` from word 3 on."""

    def __init__(self, name, type_id, version, registers, doc=""):
        _check_name("Block", name)
        if not _is_int(type_id) or not 0 < type_id < 2 ** 32:
            raise ValueError(
                f"Block type ID must be a nonzero 32-bit unsigned integer, not {type_id!r}")
        if not _is_int(version) or not 0 <= version < 2 ** 32:
            raise ValueError(f"Block version must be a 32-bit unsigned integer, not {version!r}")
        if isinstance(registers, (str, bytes)) or not hasattr(registers, "__iter__"):
            raise TypeError(f"Block registers must be a sequence of Register, not {registers!r}")
        registers = tuple(registers)
        word_names = set()
        for register in registers:
            if not isinstance(register, Register):
                raise TypeError(f"Block register must be a Register, not {register!r}")
            # A 64-bit `x` takes words `x_lo`, `x_hi`; a register named `x_lo` would clash.
            names = {register.name, *register.word_names}
            if register.strobe:
                names.add(register.strobe_name)
            for word_name in names:
                if word_name in word_names:
                    raise ValueError(
                        f"Register name must be unique in block {name!r}, not {register.name!r}")
            word_names.update(names)
        if not isinstance(doc, str):
            raise TypeError(f"Block doc must be a string, not {doc!r}")
        self.name = name
        self.type_id = type_id
        self.version = version
        self.registers = registers
        self.doc = doc

    @property
    def size(self):
        """Size in bytes: the header and every register word."""
        return 4 * (len(HEADER_WORDS) + sum(r.words for r in self.registers))

    def __repr__(self):
        return (f"RegisterBlock({self.name!r}, type_id={self.type_id:#010x}, "
                f"version={self.version:#010x})")


class RegisterMap:
    """Places blocks in address order and links them with their next pointers.

    Block ``i`` goes at ``i * block_align``, or at the next multiple of ``block_align`` past the
    end of block ``i - 1`` if that block is too large for its slot.
    """

    def __init__(self, blocks, block_align=0x100):
        if isinstance(blocks, (str, bytes)) or not hasattr(blocks, "__iter__"):
            raise TypeError(
                f"Register map blocks must be a sequence of RegisterBlock, not {blocks!r}")
        blocks = tuple(blocks)
        if not blocks:
            raise ValueError(f"Register map blocks must be a non-empty sequence, not {blocks!r}")
        if (not _is_int(block_align) or block_align < 16
                or block_align & (block_align - 1) != 0):
            raise ValueError(
                f"Block alignment must be a power of two of at least 16, not {block_align!r}")
        names = {}
        for block in blocks:
            if not isinstance(block, RegisterBlock):
                raise TypeError(f"Register map block must be a RegisterBlock, not {block!r}")
            if block.name in names:
                raise ValueError(f"Block name must be unique, not {block.name!r}")
            # Several blocks may share a type: two instances of one NT are told apart by name
            # and address, as in Corundum's register-block lists.
            names[block.name] = block
        self.blocks = blocks
        self.block_align = block_align
        self._by_name = names
        self.bases = {}
        end = 0
        for index, block in enumerate(blocks):
            base = max(index * block_align, -(-end // block_align) * block_align)
            self.bases[block.name] = base
            end = base + block.size

    @property
    def size(self):
        """One past the last mapped byte."""
        last = self.blocks[-1]
        return self.bases[last.name] + last.size

    def block(self, name):
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"No block named {name!r} in the register map") from None

    def next_of(self, block_name):
        index = self.blocks.index(self.block(block_name))
        if index + 1 == len(self.blocks):
            return 0
        return self.bases[self.blocks[index + 1].name]

    def address_of(self, block_name, reg_name):
        """Byte address of a register (its lo word if it is wide), or of one word by its name
        (``x_lo``, ``x_hi``, or a header word ``type``, ``version``, ``next``)."""
        block = self.block(block_name)
        address = self.bases[block_name]
        if reg_name in HEADER_WORDS:
            return address + 4 * HEADER_WORDS.index(reg_name)
        address += 4 * len(HEADER_WORDS)
        for register in block.registers:
            if reg_name == register.name:
                return address
            if reg_name in register.word_names:
                return address + 4 * register.word_names.index(reg_name)
            address += 4 * register.words
        raise KeyError(f"No register named {reg_name!r} in block {block_name!r}")

    def to_json(self):
        """The map as plain data (JSON-serialisable): blocks, their headers and registers."""
        blocks = []
        for block in self.blocks:
            base = self.bases[block.name]
            registers = []
            for register in block.registers:
                address = self.address_of(block.name, register.name)
                registers.append({
                    "name": register.name,
                    "offset": address - base,
                    "address": address,
                    "width": register.width,
                    "access": register.access.value,
                    "reset": register.reset,
                    "words": register.words,
                    "doc": register.doc,
                    **({"strobe": True} if register.strobe else {}),
                })
            blocks.append({
                "name": block.name,
                "type": block.type_id,
                "version": block.version,
                "base": base,
                "next": self.next_of(block.name),
                "size": block.size,
                "doc": block.doc,
                "registers": registers,
            })
        return {"block_align": self.block_align, "size": self.size, "blocks": blocks}

    def words(self):
        return words_from_json(self.to_json())


class Word(NamedTuple):
    """One 32-bit word of the map, as the decoder and the model see it.

    ``access`` is ``None`` for a header word (a read-only constant, ``value``). For a register word
    ``value`` is the reset value of this word, ``width`` the number of register bits it holds and
    ``part`` 0 (lo) or 1 (hi). ``latch`` marks the lo word of a wide ``R`` register; ``strobe``
    a register with an access strobe.
    """
    address: int
    block: str
    name: str
    register: str | None
    access: Access | None
    part: int
    width: int
    value: int
    latch: bool
    strobe: bool = False


def words_from_json(regmap_json):
    """Expand :meth:`RegisterMap.to_json` into a dict of byte address -> :class:`Word`."""
    words = {}
    for block in regmap_json["blocks"]:
        for index, name in enumerate(HEADER_WORDS):
            address = block["base"] + 4 * index
            words[address] = Word(address, block["name"], name, None, None, 0, 32, block[name],
                                  False)
        for reg in block["registers"]:
            access = Access(reg["access"])
            names = (reg["name"],) if reg["words"] == 1 else (f"{reg['name']}_lo",
                                                             f"{reg['name']}_hi")
            for part, name in enumerate(names):
                address = reg["address"] + 4 * part
                width = min(32, reg["width"] - 32 * part)
                value = (reg["reset"] >> (32 * part)) & ((1 << width) - 1)
                latch = access is R and reg["words"] == 2 and part == 0
                words[address] = Word(address, block["name"], name, reg["name"], access, part,
                                      width, value, latch, bool(reg.get("strobe")))
    return words
