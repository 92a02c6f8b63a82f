"""The resource table tool: parsing Yosys `stat -json`, real synthesis, skipping broken NTs.

The files in tests/data are real Yosys 0.70 (YoWASP) output, not edited:

* ``yosys_stat_probe_<target>.json``: :class:`ResourceProbe` below, converted with
  ``verilog.convert(ResourceProbe(), name="mix")`` and synthesised with the script of
  ``TARGETS[target]``, then ``stat -json``;
* ``yosys_stat_passthrough_xilinx_hier.json``: ``StreamPassthrough(64)`` named ``pt`` through
  ``synth_xilinx -family xcup -top pt`` without ``-flatten``, so the FIFO stays a submodule.
"""

import json
from pathlib import Path

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from supernic.desc.config import ConfigError
from supernic.tools import resources
from supernic.tools.resources import parse_stat, resource_table, summarise, synthesize

DATA = Path(__file__).parent / "data"


class ResourceProbe(wiring.Component):
    """One of each resource: a counter (carry), a registered 18x18 product (DSP), a
    1024x32 memory (block RAM) and a 16x8 memory read asynchronously (distributed RAM).
    Flip-flops: 36 product bits and 32 counter bits, 68 in all."""
    a: In(18)
    b: In(18)
    addr: In(10)
    wdata: In(32)
    we: In(1)
    p: Out(36)
    count: Out(32)
    rdata: Out(32)
    small_rdata: Out(8)

    def __init__(self, data_width=None, header_bytes=None):
        # resource_table builds every subject as cls(width, header_bytes=...); the probe has
        # no width, so it takes and ignores both.
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        m.d.sync += [self.p.eq(self.a * self.b), self.count.eq(self.count + 1)]
        m.submodules.big = big = Memory(shape=32, depth=1024, init=[])
        w = big.write_port()
        r = big.read_port()
        m.submodules.small = small = Memory(shape=8, depth=16, init=[])
        sw = small.write_port()
        sr = small.read_port(domain="comb")
        m.d.comb += [w.addr.eq(self.addr), w.data.eq(self.wdata), w.en.eq(self.we),
                     r.addr.eq(self.addr), self.rdata.eq(r.data),
                     sw.addr.eq(self.addr[:4]), sw.data.eq(self.wdata[:8]), sw.en.eq(self.we),
                     sr.addr.eq(self.addr[4:8]), self.small_rdata.eq(sr.data)]
        return m


def _sample(name):
    return (DATA / f"yosys_stat_{name}.json").read_text()


def test_parse_stat_ecp5_sample():
    cells = parse_stat(_sample("probe_ecp5"))
    assert cells == {"CCU2C": 16, "DP16KD": 2, "LUT4": 1, "MULT18X18D": 1,
                     "TRELLIS_DPR16X4": 2, "TRELLIS_FF": 68}
    assert summarise("ecp5", cells) == {"lut": 1, "ff": 68, "carry": 16, "bram18": 2,
                                        "lutram": 2, "dsp": 1}


def test_parse_stat_xilinx_sample():
    cells = parse_stat(_sample("probe_xilinx"))
    assert cells == {"CARRY4": 13, "DSP48E2": 2, "FDRE": 68, "INV": 1, "LUT2": 19,
                     "RAM32M16": 1, "RAMB36E2": 1}
    # One RAMB36E2 is two 18 kbit blocks, as the two DP16KD of the same memory on ECP5.
    assert summarise("xilinx", cells) == {"lut": 20, "ff": 68, "carry": 13, "bram18": 2,
                                          "lutram": 1, "dsp": 2}


def test_parse_stat_counts_submodules_once():
    # Unflattened: the top instantiates `pt.fifo` once; the design total already holds the
    # FIFO's cells, so the instance itself is not a cell to count.
    cells = parse_stat(_sample("passthrough_xilinx_hier"))
    assert "pt.fifo" not in cells
    assert cells["FDRE"] == 80 and cells["RAM32M16"] == 6 and cells["IBUF"] == 77
    assert summarise("xilinx", cells)["lut"] == 1 + 1 + 2 + 4 + 2


def test_summarise_rejects_unknown_target():
    with pytest.raises(ValueError, match=r"^Target must be one of "
                                         r"\['ecp5', 'ecp5_lut4', 'xilinx'\], not 'ice40'$"):
        summarise("ice40", {})


def test_resource_table_rejects_bad_arguments():
    with pytest.raises(ValueError, match=r"^Data width must be one of .*, not 100$"):
        resource_table(["parser"], width=100)
    with pytest.raises(ConfigError, match=r"^Targets must be a non-empty selection of "
                                          r"\['ecp5', 'ecp5_lut4', 'xilinx'\], not \['gowin'\]$"):
        resource_table(["parser"], targets=["gowin"])
    with pytest.raises(ConfigError, match=r"^Jobs must be a positive integer, not 0$"):
        resource_table(["parser"], jobs=0)


def test_unknown_kind_is_an_error(monkeypatch):
    monkeypatch.setattr(resources, "_discover", lambda: ({}, {}))
    with pytest.raises(ConfigError,
                       match=r"^unknown NT 'acll' \(known: parser, parser_checksum\)$"):
        resource_table(["acll"])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SNIC_CACHE", str(tmp_path))
    return tmp_path


def test_table_measures_the_probe_and_skips_what_fails(cache, monkeypatch):
    # One real synthesis, ECP5 only: synth_xilinx takes about five times as long even on a
    # design this small, and the captured sample above covers how its output is read. The
    # workers find subjects by module name; spawned ones inherit sys.path, which holds this
    # test module's folder.
    probe = resources._Subject("probe", __name__, "ResourceProbe", False)
    broken = resources._Subject("broken", "supernic.hw.passthrough", "StreamPassthrough", False)
    monkeypatch.setattr(resources, "_REFERENCES", {"probe": probe, "broken": broken})
    monkeypatch.setattr(resources, "_discover",
                        lambda: ({}, {"half_written": "SyntaxError: invalid syntax (x.py:3)"}))
    messages = []
    result = resource_table(width=64, targets=["ecp5"], jobs=2, progress=messages.append)
    assert list(result["kinds"]) == ["probe"]
    got = result["kinds"]["probe"]["ecp5"]
    assert not got["cached"] and got["seconds"] > 0
    # Counts the design fixes whatever the mapper does.
    assert got["ff"] == 68 and got["bram18"] == 2
    assert got["dsp"] >= 1 and got["carry"] >= 1 and got["lutram"] >= 1
    assert 0 < got["lut"] < 200
    assert json.loads(json.dumps(result)) == result
    errors = {e["kind"]: e for e in result["errors"]}
    assert errors["half_written"]["message"] == (
        "module half_written.py failed to import: SyntaxError: invalid syntax (x.py:3)")
    assert errors["broken"]["stage"] == "generate"
    assert errors["broken"]["message"].startswith(
        "elaboration failed: TypeError: StreamPassthrough.__init__() got an unexpected keyword "
        "argument 'header_bytes' (tools/resources.py:")
    assert messages[-1].startswith("[3/3]")
    # A rerun of the same Verilog comes from the cache.
    [verilog] = (cache / "gen").glob("probe-*/probe.v")
    again = synthesize(verilog, "probe", "ecp5")
    assert again["cached"] and again["cells"] == got["cells"]


class WideMux(wiring.Component):
    """A 32-to-1 byte multiplexer: LUT5-LUT7 territory for an ECP5 mapper."""
    sel: In(5)
    data: In(8 * 32)
    out: Out(8)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.out.eq(self.data.word_select(self.sel, 8))
        return m


def test_ecp5_lut4_maps_without_wide_luts(cache):
    """``ecp5_lut4`` (the row the transform's overhead is read on) is ``synth_ecp5`` with
    LUT4s alone: the default mapping builds this multiplexer with PFU muxes, it does not."""
    from amaranth.back import verilog
    path = cache / "widemux.v"
    path.write_text(verilog.convert(WideMux(), name="widemux"))
    wide, narrow = (synthesize(path, "widemux", t) for t in ("ecp5", "ecp5_lut4"))
    assert wide["cells"].get("PFUMX", 0) + wide["cells"].get("L6MUX21", 0) > 0
    assert not {"PFUMX", "L6MUX21"} & set(narrow["cells"])
    assert narrow["lut"] > 0 and narrow["ff"] == wide["ff"] == 0


def test_design_blocks_usage_errors_are_one_line(tmp_path, capsys):
    """`snic resources --config C`: NT kinds beside it, or a design file that is not there,
    are a usage error (exit 2, one line), before anything is generated or synthesised."""
    assert resources.main(["acl", "--config", str(tmp_path / "x.toml")], prog="snic resources") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("snic resources: error: ") and "NT kinds" in err and "\n" not in err
    assert resources.main(["--config", str(tmp_path / "missing.toml")],
                          prog="snic resources") == 2
    err = capsys.readouterr().err.strip()
    assert "missing.toml" in err and "does not exist" in err and "\n" not in err


def _two_block_design(name, sibling_width):
    return rf"""module {name}(clk, a, y);
  input clk;
  input [7:0] a;
  output [7:0] y;
  \{name}.blk  blk (
    .clk(clk), .a(a), .y(y)
  );
  \{name}.other  other (
    .clk(clk)
  );
endmodule

module \{name}.blk (clk, a, y);
  input clk;
  input [7:0] a;
  output [7:0] y;
  {name}__leaf inner (
    .clk(clk), .a(a), .y(y)
  );
endmodule

module \{name}.other (clk);
  input clk;
  reg [{sibling_width - 1}:0] r = 0;
  always @(posedge clk) r <= r + 1;
endmodule

module {name}__leaf(clk, a, y);
  input clk;
  input [7:0] a;
  output [7:0] y;
  reg [7:0] q = 8'd0;
  always @(posedge clk) q <= q + a;
  assign y = q;
endmodule
"""


def test_a_block_shared_by_two_designs_is_one_synthesis_file(tmp_path):
    """A block is synthesised from its own module and the modules under it (not its
    siblings, not the top), with the design's name taken out of the module names: the same
    block in two designs (a parser with and without transformed regions) is one file, so
    one synthesis in the cache; a block that differs is another file."""
    from supernic.sim.vdev.profile import read_structure
    from supernic.tools.design_resources import block_verilog
    out = {}
    for name, width in (("nic_a", 4), ("nic_b", 6)):
        path = tmp_path / f"{name}.v"
        path.write_text(_two_block_design(name, width))
        structure = read_structure(path)
        lines = path.read_text().splitlines(keepends=True)
        out[name] = {m.split(".")[-1]: block_verilog(lines, structure, m, name, tmp_path / "b")
                     for m in (f"{name}.blk", f"{name}.other")}
    assert out["nic_a"]["blk"] == out["nic_b"]["blk"]
    assert out["nic_a"]["other"][0] != out["nic_b"]["other"][0]
    path, top = out["nic_a"]["blk"]
    text = path.read_text()
    assert top == "design.blk"
    assert "module \\design.blk " in text and "module design__leaf(" in text
    assert "nic_a" not in text and "other" not in text and "module design.blk(" not in text
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == sorted(
        {p.name for p, _top in [*out["nic_a"].values(), *out["nic_b"].values()]})
