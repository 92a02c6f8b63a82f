"""A deliberately plain Python model of :class:`supernic.hw.csr.regfile.RegisterFile`.

It keeps the same state as the hardware (RW storage, the R inputs, the hi-word shadows of wide R
registers) and answers every access with ``(value, response)``, so a testbench can compare each
bus transfer with it. It reads the map through :func:`words_from_json`, like the hardware.
"""

from supernic.driver.transport import Response
from supernic.desc.registers import R, RW, W1P, RegisterMap, words_from_json

__all__ = ["RegisterFileModel"]


def _strobe_mask(strobe):
    return sum(0xFF << (8 * lane) for lane in range(4) if strobe >> lane & 1)


class RegisterFileModel:
    """Reference model for a :class:`~supernic.desc.registers.RegisterMap` (or its JSON).

    ``pulses`` lists every W1P strobe as ``(block, register, bits)``, with ``bits`` at their
    position in the register, and every access strobe as ``(block, "<register>_stb", value)``
    with the register's value after the access, in the order the accesses happened.
    """

    def __init__(self, regmap):
        if isinstance(regmap, RegisterMap):
            regmap = regmap.to_json()
        if not isinstance(regmap, dict) or "blocks" not in regmap:
            raise TypeError(f"Register map must be a RegisterMap or its JSON, not {regmap!r}")
        self.regmap_json = regmap
        self.words = words_from_json(regmap)
        self._registers = {(block["name"], reg["name"]): reg
                           for block in regmap["blocks"] for reg in block["registers"]}
        self.reset()

    def reset(self):
        self.values = {key: reg["reset"] for key, reg in self._registers.items()
                       if reg["access"] != W1P.value}
        self.shadows = {key: 0 for key, reg in self._registers.items()
                        if reg["access"] == R.value and reg["words"] == 2}
        self.pulses = []

    def _register(self, block, reg):
        try:
            return self._registers[(block, reg)]
        except KeyError:
            raise KeyError(f"No register {reg!r} in block {block!r}") from None

    def set_input(self, block, reg, value):
        """Set the value hardware drives into R register ``reg``."""
        info = self._register(block, reg)
        if info["access"] != R.value:
            raise ValueError(f"Register access must be R to set an input, not {info['access']!r}")
        if not isinstance(value, int) or not 0 <= value < 2 ** info["width"]:
            raise ValueError(
                f"Input value must be an integer that fits in {info['width']} bits, "
                f"not {value!r}")
        self.values[(block, reg)] = value

    def get(self, block, reg):
        """The value of an R or RW register (for RW, what its output port holds)."""
        info = self._register(block, reg)
        if info["access"] == W1P.value:
            raise ValueError("Register access must be R or RW to get a value, not 'W1P'")
        return self.values[(block, reg)]

    def read(self, address):
        """One read transfer; returns ``(value, response)``. The two low address bits are
        ignored, as in the hardware."""
        word = self.words.get(address & ~3)
        if word is None:
            return 0, Response.DECERR
        if word.access is None:
            return word.value, Response.OKAY
        if word.access is W1P:
            return 0, Response.OKAY
        key = (word.block, word.register)
        if word.access is R and word.part == 1:
            return self.shadows[key], Response.OKAY
        value = self.values[key]
        if word.latch:
            self.shadows[key] = value >> 32
        if word.strobe and word.access is R:
            self.pulses.append((word.block, f"{word.register}_stb", value))
        return (value >> (32 * word.part)) & ((1 << word.width) - 1), Response.OKAY

    def write(self, address, value, strobe=0b1111):
        """One write transfer; returns the response."""
        word = self.words.get(address & ~3)
        if word is None:
            return Response.DECERR
        if word.access not in (RW, W1P):
            return Response.SLVERR
        key = (word.block, word.register)
        shift = 32 * word.part
        mask = _strobe_mask(strobe) & ((1 << word.width) - 1)
        if word.access is RW:
            self.values[key] = (self.values[key] & ~(mask << shift)) | ((value & mask) << shift)
            if word.strobe:
                self.pulses.append((word.block, f"{word.register}_stb", self.values[key]))
        elif value & mask:
            self.pulses.append((word.block, word.register, (value & mask) << shift))
        return Response.OKAY
