"""The register file: an AXI4-Lite slave built from a :class:`~.registers.RegisterMap`.

Ports. ``s_axil`` is the bus (32-bit data). ``fields`` holds one port a register, grouped by
block, so ``regfile.fields.<block>.<register>`` (or ``regfile.field(block, register)``) is:

* for ``R``: an input the parent drives, ``m.d.comb += regfile.field("parser", "packets").eq(n)``;
* for ``RW``: an output holding the stored value (reset value after reset);
* for ``W1P``: an output that is high for one cycle on each bit written with a 1;
* ``<register>_stb`` beside a register with an access strobe: an output high for one cycle
  after each read (``R``) or write (``RW``) of it.

Bus behaviour. One read and one write are handled at a time, each independently of the other.
AW and W are accepted in either order or together, and the write takes effect once both are in.
Byte strobes apply to ``RW`` and ``W1P`` words. Responses: OKAY for mapped words; DECERR (read
data 0) for addresses outside every block; SLVERR for writes to read-only words (block headers
and ``R`` registers), which change nothing. Every ready is a function of registered state only,
so there is no combinational path from a ready to a valid, and every valid holds until taken.
The two low address bits are ignored (a master may issue an unaligned address for a partial
write; the strobes say which bytes are written).

Reads take two cycles after the address handshake: the address is registered first so that the
read multiplexer does not sit on the bus input path.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from .axil import AxiLiteSignature, AxiResp
from ...desc.registers import R, RW, W1P, RegisterMap, words_from_json

__all__ = ["RegisterFile"]


def _fields_signature(regmap_json):
    blocks = {}
    for block in regmap_json["blocks"]:
        members = {}
        for reg in block["registers"]:
            if reg["access"] == R.value:
                members[reg["name"]] = In(reg["width"])
            else:
                members[reg["name"]] = Out(reg["width"], init=reg["reset"])
            if reg.get("strobe"):
                members[f"{reg['name']}_stb"] = Out(1)
        if members:
            blocks[block["name"]] = Out(wiring.Signature(members))
    return wiring.Signature(blocks)


class RegisterFile(wiring.Component):
    """AXI4-Lite register file for ``regmap``, decoding ``addr_width`` address bits."""

    def __init__(self, regmap, addr_width=16):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"Register map must be a RegisterMap, not {regmap!r}")
        if (not isinstance(addr_width, int) or isinstance(addr_width, bool)
                or not 3 <= addr_width <= 64):
            raise ValueError(
                f"Address width must be an integer between 3 and 64, not {addr_width!r}")
        if regmap.size > 2 ** addr_width:
            raise ValueError(
                f"Address width must cover the register map ({regmap.size:#x} bytes), "
                f"not {addr_width!r}")
        self.regmap = regmap
        self.regmap_json = regmap.to_json()
        self.addr_width = addr_width
        members = {"s_axil": In(AxiLiteSignature(addr_width))}
        fields = _fields_signature(self.regmap_json)
        if fields.members:
            members["fields"] = Out(fields)
        super().__init__(members)

    def field(self, block, reg):
        """The port of register ``reg`` in ``block`` (see the module docstring)."""
        try:
            return getattr(getattr(self.fields, block), reg)
        except AttributeError:
            raise KeyError(f"No register {reg!r} in block {block!r}") from None

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil
        words = words_from_json(self.regmap_json)
        word_bits = self.addr_width - 2

        # Write path: AW and W each have a one-entry holding register; the write happens once
        # both are full and the previous response has been taken.
        aw_full = Signal()
        aw_word = Signal(word_bits)
        w_full = Signal()
        w_data = Signal(32)
        w_strb = Signal(4)
        m.d.comb += [
            bus.awready.eq(~aw_full),
            bus.wready.eq(~w_full),
        ]
        with m.If(bus.awvalid & ~aw_full):
            m.d.sync += [aw_full.eq(1), aw_word.eq(bus.awaddr[2:])]
        with m.If(bus.wvalid & ~w_full):
            m.d.sync += [w_full.eq(1), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)

        for word in words.values():
            if word.access is W1P and word.part == 0:
                m.d.sync += self.field(word.block, word.register).eq(0)
            if word.strobe:
                m.d.sync += self.field(word.block, f"{word.register}_stb").eq(0)

        # Byte-lane write mask from the strobes, for W1P words.
        w_mask = Signal(32)
        m.d.comb += w_mask.eq(Cat(w_strb[lane].replicate(8) for lane in range(4)))

        # Each word decodes its own hit. One switch over every word assigning every field
        # would make the generated Verilog grow as fields x words (megabytes for a NIC with
        # a few thousand words): every field's process would repeat the whole case list.
        write = Signal()
        m.d.comb += write.eq(aw_full & w_full & ~bus.bvalid)
        with m.If(write):
            m.d.sync += [aw_full.eq(0), w_full.eq(0), bus.bvalid.eq(1)]
            with m.Switch(aw_word):
                for word in words.values():
                    with m.Case(word.address >> 2):
                        # Header words and R registers are read-only: refuse, change nothing.
                        m.d.sync += bus.bresp.eq(AxiResp.OKAY if word.access in (RW, W1P)
                                                 else AxiResp.SLVERR)
                with m.Default():
                    m.d.sync += bus.bresp.eq(AxiResp.DECERR)
        for word in words.values():
            if word.access in (RW, W1P):
                with m.If(write & (aw_word == word.address >> 2)):
                    self._write_word(m, word, w_data, w_strb, w_mask)
                    if word.strobe:
                        m.d.sync += self.field(word.block, f"{word.register}_stb").eq(1)

        # Read path.
        ar_full = Signal()
        ar_word = Signal(word_bits)
        m.d.comb += bus.arready.eq(~ar_full & ~bus.rvalid)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [ar_full.eq(1), ar_word.eq(bus.araddr[2:])]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)

        # The hi half of each wide R register, captured when its lo word is read.
        shadows = {}
        for word in words.values():
            if word.latch:
                port = self.field(word.block, word.register)
                shadows[(word.block, word.register)] = Signal(
                    len(port) - 32, name=f"{word.block}__{word.register}__shadow")

        with m.If(ar_full):
            m.d.sync += [ar_full.eq(0), bus.rvalid.eq(1)]
            with m.Switch(ar_word):
                for word in words.values():
                    with m.Case(word.address >> 2):
                        m.d.sync += [bus.rdata.eq(self._read_value(word, shadows)),
                                     bus.rresp.eq(AxiResp.OKAY)]
                with m.Default():
                    m.d.sync += [bus.rdata.eq(0), bus.rresp.eq(AxiResp.DECERR)]
        for word in words.values():
            if word.latch:
                port = self.field(word.block, word.register)
                with m.If(ar_full & (ar_word == word.address >> 2)):
                    m.d.sync += shadows[(word.block, word.register)].eq(port[32:])
            if word.strobe and word.access is R:
                with m.If(ar_full & (ar_word == word.address >> 2)):
                    m.d.sync += self.field(word.block, f"{word.register}_stb").eq(1)

        return m

    def _write_word(self, m, word, w_data, w_strb, w_mask):
        port = self.field(word.block, word.register)
        low = 32 * word.part
        if word.access is RW:
            for lane in range((word.width + 7) // 8):
                top = min(8 * lane + 8, word.width)
                with m.If(w_strb[lane]):
                    m.d.sync += port[low + 8 * lane:low + top].eq(w_data[8 * lane:top])
        else:
            m.d.sync += port[low:low + word.width].eq((w_data & w_mask)[:word.width])

    def _read_value(self, word, shadows):
        if word.access is None:
            return word.value
        if word.access is W1P:
            return 0
        port = self.field(word.block, word.register)
        if word.access is R and word.part == 1:
            return shadows[(word.block, word.register)]
        return port[32 * word.part:32 * word.part + word.width]
