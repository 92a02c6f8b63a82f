"""Tests of the control-register layer: description, model, driver, and the hardware in cocotb."""

import asyncio
import json
import os

import pytest
from amaranth.lib.wiring import In, Out

from supernic.driver.discovery import (
    MAX_BLOCKS, DiscoveryError, UnsupportedDesignError, check_supported, discover, read_register,
)
from supernic.driver.transport import MemoryBus, RegisterAccessError, Response
from supernic.hw.csr.axil import AxiLiteSignature
from supernic.hw.csr.regfile import RegisterFile
from supernic.desc.registers import (
    R, RW, W1P, Register, RegisterBlock, RegisterMap, words_from_json,
)
from supernic.sim.csr_model import RegisterFileModel
from supernic.sim.tb.csr_top import CsrTop

ID_TYPE, PARS_TYPE = 0x534E4943, 0x50415253


def run(coroutine):
    return asyncio.run(coroutine)


def small_map():
    return RegisterMap([
        RegisterBlock("id", ID_TYPE, 0x0001_0000, [Register("build")]),
        RegisterBlock("parser", PARS_TYPE, 0x0001_0003, [
            Register("packets", 64),
            Register("enable", 1, RW, reset=1),
            Register("clear", 4, W1P),
            Register("limit", 40, RW, reset=0x12_3456_789A),
        ]),
    ])


# -- description -----------------------------------------------------------------------------

class TestRegister:
    def test_defaults(self):
        reg = Register("packets")
        assert (reg.width, reg.access, reg.reset, reg.words) == (32, R, 0, 1)
        assert Register("wide", 33).word_names == ("wide_lo", "wide_hi")

    @pytest.mark.parametrize("kwargs, error, message", [
        (dict(name="x", width=65), ValueError,
         "Register width must be an integer between 1 and 64, not 65"),
        (dict(name="x", width=0), ValueError,
         "Register width must be an integer between 1 and 64, not 0"),
        (dict(name="x", width=True), ValueError,
         "Register width must be an integer between 1 and 64, not True"),
        (dict(name=3), TypeError, "Register name must be a string, not 3"),
        (dict(name="Bad"), ValueError,
         "Register name must be a lower-case identifier, not 'Bad'"),
        (dict(name="next"), ValueError,
         "Register name must not be a header word name ('type', 'version', 'next'), not 'next'"),
        (dict(name="x", access="RW"), TypeError,
         "Register access must be R, RW or W1P, not 'RW'"),
        (dict(name="x", width=8, access=RW, reset=256), ValueError,
         "Register reset must be an integer that fits in 8 bits, not 256"),
        (dict(name="x", reset=1), ValueError, "Register reset must be 0 for access R, not 1"),
        (dict(name="x", doc=None), TypeError, "Register doc must be a string, not None"),
    ])
    def test_errors(self, kwargs, error, message):
        with pytest.raises(error) as info:
            Register(**kwargs)
        assert str(info.value) == message


class TestRegisterBlock:
    def test_size_and_version(self):
        block = small_map().block("parser")
        assert block.size == 4 * (3 + 2 + 1 + 1 + 2)
        assert (block.major, block.minor) == (1, 3)

    @pytest.mark.parametrize("args, error, message", [
        (("b", 0, 0, []), ValueError,
         "Block type ID must be a nonzero 32-bit unsigned integer, not 0"),
        (("b", 2 ** 32, 0, []), ValueError,
         "Block type ID must be a nonzero 32-bit unsigned integer, not 4294967296"),
        (("b", 1, -1, []), ValueError, "Block version must be a 32-bit unsigned integer, not -1"),
        (("b", 1, 0, "regs"), TypeError,
         "Block registers must be a sequence of Register, not 'regs'"),
        (("b", 1, 0, [1]), TypeError, "Block register must be a Register, not 1"),
        (("b", 1, 0, [Register("a"), Register("a")]), ValueError,
         "Register name must be unique in block 'b', not 'a'"),
        (("b", 1, 0, [Register("a", 64), Register("a_hi")]), ValueError,
         "Register name must be unique in block 'b', not 'a_hi'"),
        (("B", 1, 0, []), ValueError, "Block name must be a lower-case identifier, not 'B'"),
    ])
    def test_errors(self, args, error, message):
        with pytest.raises(error) as info:
            RegisterBlock(*args)
        assert str(info.value) == message


class TestRegisterMap:
    def test_layout_and_next_pointers(self):
        regmap = small_map()
        assert regmap.bases == {"id": 0x000, "parser": 0x100}
        assert regmap.next_of("id") == 0x100 and regmap.next_of("parser") == 0
        assert regmap.address_of("parser", "packets") == 0x10C
        assert regmap.address_of("parser", "packets_hi") == 0x110
        assert regmap.address_of("parser", "enable") == 0x114
        assert regmap.address_of("parser", "limit") == 0x11C
        assert regmap.address_of("parser", "version") == 0x104
        assert regmap.size == 0x124

    def test_large_block_pushes_the_next_one(self):
        big = RegisterBlock("big", 1, 0, [Register(f"r{i}") for i in range(70)])
        regmap = RegisterMap([big, RegisterBlock("a", 2, 0, []), RegisterBlock("b", 3, 0, [])])
        assert big.size == 292
        assert regmap.bases == {"big": 0x000, "a": 0x200, "b": 0x300}
        assert [b["next"] for b in regmap.to_json()["blocks"]] == [0x200, 0x300, 0]

    def test_json(self):
        regmap = small_map()
        data = regmap.to_json()
        assert json.loads(json.dumps(data)) == data
        parser = data["blocks"][1]
        assert {k: parser[k] for k in ("name", "type", "version", "base", "next")} == {
            "name": "parser", "type": PARS_TYPE, "version": 0x0001_0003, "base": 0x100,
            "next": 0}
        assert parser["registers"][0] == {
            "name": "packets", "offset": 0xC, "address": 0x10C, "width": 64, "access": "R",
            "reset": 0, "words": 2, "doc": ""}
        assert [r["access"] for r in parser["registers"]] == ["R", "RW", "W1P", "RW"]

    def test_words(self):
        words = words_from_json(small_map().to_json())
        assert len(words) == 3 + 1 + 3 + 6
        assert words[0x10C].latch and not words[0x110].latch
        assert words[0x120].value == 0x12 and words[0x120].width == 8
        assert words[0x008].value == 0x100 and words[0x008].access is None

    def test_lookup_errors(self):
        with pytest.raises(KeyError, match="No block named 'nope'"):
            small_map().address_of("nope", "x")
        with pytest.raises(KeyError, match="No register named 'x' in block 'id'"):
            small_map().address_of("id", "x")

    @pytest.mark.parametrize("args, error, message", [
        (([],), ValueError, "Register map blocks must be a non-empty sequence, not ()"),
        (([1],), TypeError, "Register map block must be a RegisterBlock, not 1"),
        (([RegisterBlock("a", 1, 0, [])], 24), ValueError,
         "Block alignment must be a power of two of at least 16, not 24"),
        (([RegisterBlock("a", 1, 0, []), RegisterBlock("a", 2, 0, [])],), ValueError,
         "Block name must be unique, not 'a'"),
    ])
    def test_errors(self, args, error, message):
        with pytest.raises(error) as info:
            RegisterMap(*args)
        assert str(info.value) == message

    def test_instances_share_a_type(self):
        regmap = RegisterMap([RegisterBlock("a", 1, 0, []), RegisterBlock("b", 1, 0, [])])
        assert [b["type"] for b in regmap.to_json()["blocks"]] == [1, 1]


# -- hardware construction -------------------------------------------------------------------

class TestHardware:
    def test_axil_signature(self):
        sig = AxiLiteSignature(12)
        assert sig == AxiLiteSignature(12) and sig != AxiLiteSignature(13)
        assert sig.members["awaddr"].flow is Out and sig.members["rdata"].flow is In
        # Seen from a slave (`In(...)`), the master's outputs are inputs.
        assert sig.flip().members["awaddr"].flow is In
        with pytest.raises(ValueError, match=r"^AXI4-Lite data width must be 32 or 64, not 16$"):
            AxiLiteSignature(data_width=16)

    def test_register_file_ports(self):
        regfile = RegisterFile(small_map())
        assert len(regfile.field("parser", "packets")) == 64
        assert regfile.signature.members["fields"].signature.members["parser"].signature \
            .members["packets"].flow is In
        assert regfile.field("parser", "enable").init == 1
        with pytest.raises(KeyError):
            regfile.field("parser", "nope")

    def test_register_file_errors(self):
        with pytest.raises(ValueError) as info:
            RegisterFile(small_map(), addr_width=8)
        assert str(info.value) == \
            "Address width must cover the register map (0x124 bytes), not 8"
        with pytest.raises(TypeError, match=r"^Register map must be a RegisterMap, not 1$"):
            RegisterFile(1)


# -- reference model -------------------------------------------------------------------------

class TestModel:
    def test_reset_and_headers(self):
        model = RegisterFileModel(small_map())
        assert model.read(0x000) == (ID_TYPE, Response.OKAY)
        assert model.read(0x008) == (0x100, Response.OKAY)
        assert model.read(0x108) == (0, Response.OKAY)
        assert model.read(0x114) == (1, Response.OKAY)
        assert model.read(0x11C) == (0x3456_789A, Response.OKAY)

    def test_wide_read_latches_hi(self):
        model = RegisterFileModel(small_map())
        model.set_input("parser", "packets", 0x1111_2222_3333_4444)
        assert model.read(0x110) == (0, Response.OKAY)     # no lo read yet: shadow is 0
        assert model.read(0x10C) == (0x3333_4444, Response.OKAY)
        model.set_input("parser", "packets", 0x5555_6666_7777_8888)
        assert model.read(0x110) == (0x1111_2222, Response.OKAY)
        assert model.read(0x110) == (0x1111_2222, Response.OKAY)
        assert model.read(0x10C) == (0x7777_8888, Response.OKAY)
        assert model.read(0x110) == (0x5555_6666, Response.OKAY)

    def test_rw_strobes_and_widths(self):
        model = RegisterFileModel(small_map())
        assert model.write(0x11C, 0xAABB_CCDD, 0b0110) == Response.OKAY
        assert model.get("parser", "limit") == 0x12_34BB_CC9A
        assert model.write(0x120, 0xFFFF_FFFF) == Response.OKAY
        assert model.get("parser", "limit") == 0xFF_34BB_CC9A
        assert model.read(0x120) == (0xFF, Response.OKAY)
        assert model.write(0x114, 0xFFFF_FFFE) == Response.OKAY
        assert model.get("parser", "enable") == 0
        assert model.write(0x117, 0x1, 0b0001) == Response.OKAY   # low address bits ignored
        assert model.get("parser", "enable") == 1

    def test_w1p(self):
        model = RegisterFileModel(small_map())
        assert model.write(0x118, 0xFF, 0b0001) == Response.OKAY
        assert model.write(0x118, 0x0F, 0b0010) == Response.OKAY   # strobe masks it out
        assert model.read(0x118) == (0, Response.OKAY)
        assert model.pulses == [("parser", "clear", 0xF)]

    def test_errors_change_nothing(self):
        model = RegisterFileModel(small_map())
        model.set_input("parser", "packets", 5)
        assert model.write(0x10C, 0) == Response.SLVERR
        assert model.write(0x000, 0) == Response.SLVERR
        assert model.write(0x200, 0) == Response.DECERR
        assert model.read(0x124) == (0, Response.DECERR)
        assert model.read(0x0FC) == (0, Response.DECERR)
        assert model.read(0x10C) == (5, Response.OKAY)
        assert model.read(0x000) == (ID_TYPE, Response.OKAY)

    def test_contract(self):
        # Whatever the values: every mapped word answers OKAY, every other word DECERR.
        regmap = small_map()
        model = RegisterFileModel(regmap)
        mapped = set(regmap.words())
        for address in range(0, 0x300, 4):
            _, response = model.read(address)
            assert (response == Response.OKAY) == (address in mapped)

    def test_set_input_errors(self):
        model = RegisterFileModel(small_map())
        with pytest.raises(ValueError) as info:
            model.set_input("parser", "enable", 1)
        assert str(info.value) == "Register access must be R to set an input, not 'RW'"
        with pytest.raises(ValueError) as info:
            model.set_input("parser", "packets", 2 ** 64)
        assert str(info.value) == \
            "Input value must be an integer that fits in 64 bits, not 18446744073709551616"


# -- driver ----------------------------------------------------------------------------------

def chain(*blocks):
    """A dict memory holding block headers: each block is (base, type, version, next)."""
    memory = {}
    for base, type_id, version, next_address in blocks:
        memory.update({base: type_id, base + 4: version, base + 8: next_address})
    return memory


class TestTransport:
    def test_dict_bus(self):
        bus = MemoryBus({0x10: 0x1122_3344})
        run(bus.write32(0x10, 0xAABB_CCDD, strobe=0b0101))
        assert run(bus.read32(0x10)) == 0x11BB_33DD

    def test_errors(self):
        bus = MemoryBus({})
        with pytest.raises(RegisterAccessError) as info:
            run(bus.read32(0x40))
        assert str(info.value) == "read at 0x00000040 failed with DECERR (0b11)"
        assert (info.value.address, info.value.response) == (0x40, Response.DECERR)
        with pytest.raises(ValueError) as info:
            run(bus.read32(0x41))
        assert str(info.value) == "Register address must be a non-negative multiple of 4, not 65"
        with pytest.raises(ValueError) as info:
            run(bus.write32(0x40, -1))
        assert str(info.value) == "Register value must be a 32-bit unsigned integer, not -1"

    def test_model_bus(self):
        bus = MemoryBus(RegisterFileModel(small_map()))
        with pytest.raises(RegisterAccessError) as info:
            run(bus.write32(0x10C, 1))
        assert str(info.value) == "write at 0x0000010c failed with SLVERR (0b10)"
        run(bus.write32(0x114, 0))
        assert run(bus.read32(0x114)) == 0


class TestDiscovery:
    def test_walks_the_model(self):
        regmap = small_map()
        model = RegisterFileModel(regmap)
        blocks = run(discover(MemoryBus(model)))
        assert [(b.base, b.type_id, b.version, b.next) for b in blocks] == [
            (0x000, ID_TYPE, 0x0001_0000, 0x100), (0x100, PARS_TYPE, 0x0001_0003, 0)]
        assert [b.name for b in blocks] == ["id", "parser"]
        assert check_supported(blocks) == []

    def test_unknown_types_are_listed(self):
        blocks = run(discover(MemoryBus(chain((0, ID_TYPE, 0x0001_0000, 0x40),
                                              (0x40, 0x1234_5678, 0x0009_0000, 0)))))
        unknown = check_supported(blocks)
        assert [b.base for b in unknown] == [0x40] and unknown[0].name is None

    def test_unsupported_major(self):
        blocks = run(discover(MemoryBus(chain((0, ID_TYPE, 0x0002_0001, 0)))))
        with pytest.raises(UnsupportedDesignError) as info:
            check_supported(blocks)
        assert str(info.value) == ("design not supported: block id (type 0x534E4943) version "
                                   "2.1 is not supported by this driver (supports 1.*)")
        newer_minor = run(discover(MemoryBus(chain((0, PARS_TYPE, 0x0001_0007, 0)))))
        assert check_supported(newer_minor) == []

    @pytest.mark.parametrize("memory, message", [
        (chain((0, 1, 0, 0x40), (0x40, 2, 0, 0)), None),
        (chain((0, 1, 0, 0x40), (0x40, 2, 0, 0x20)),
         "block at 0x00000040 has next pointer 0x00000020, which does not point past it "
         "(the block list would loop)"),
        (chain((0, 1, 0, 0x40), (0x40, 2, 0, 0x40)),
         "block at 0x00000040 has next pointer 0x00000040, which does not point past it "
         "(the block list would loop)"),
        (chain((0, 1, 0, 0x42)),
         "block at 0x00000000 has next pointer 0x00000042, which is not word-aligned"),
        (chain((0, 0, 0, 0)), "no register block at 0x00000000 (type 0)"),
    ])
    def test_malformed_lists(self, memory, message):
        if message is None:
            assert len(run(discover(MemoryBus(memory)))) == 2
            return
        with pytest.raises(DiscoveryError) as info:
            run(discover(MemoryBus(memory)))
        assert str(info.value) == message

    def test_too_many_blocks(self):
        memory = chain(*((16 * i, i + 1, 0, 16 * (i + 1)) for i in range(MAX_BLOCKS + 1)))
        with pytest.raises(DiscoveryError) as info:
            run(discover(MemoryBus(memory)))
        assert str(info.value) == ("more than 256 register blocks from 0x00000000; "
                                   "the block list is probably corrupt")

    def test_read_register(self):
        regmap = small_map()
        model = RegisterFileModel(regmap)
        model.set_input("parser", "packets", 0x0123_4567_89AB_CDEF)
        bus = MemoryBus(model)
        regmap_json = regmap.to_json()
        assert run(read_register(bus, regmap_json, "parser", "packets")) == 0x0123_4567_89AB_CDEF
        assert run(read_register(bus, regmap_json, "parser", "limit")) == 0x12_3456_789A
        with pytest.raises(KeyError):
            run(read_register(bus, regmap_json, "parser", "nope"))


# -- hardware in cocotb on Verilator ---------------------------------------------------------

def test_regfile_cocotb(tmp_path):
    from amaranth.back import verilog

    from supernic.sim.build import build_simulator
    from supernic.cache import cache_root
    from supernic.toolchain import amaranth_env

    amaranth_env()
    source_dir = cache_root() / "gen" / "csr_top"
    source_dir.mkdir(parents=True, exist_ok=True)
    source = source_dir / "csr_top.v"
    text = verilog.convert(CsrTop(), name="csr_top")
    # Rewrite only on change so that the cached model stays valid.
    if not source.exists() or source.read_text() != text:
        source.write_text(text)
    sim = build_simulator(source, "csr_top")
    seed = os.environ.get("CSR_SEED")
    sim.runner.test(test_module="supernic.sim.tb.csr_tb", hdl_toplevel="csr_top",
                    build_dir=sim.build_dir, test_dir=tmp_path, seed=int(seed) if seed else None)
