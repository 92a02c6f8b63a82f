"""The virtual device's cycle profile: Verilog lines to modules to blocks, and Verilator's
profiling function names to lines (sim/vdev/profile.py). No perf run here: a profiling build of
even a small design compiles for minutes; ``snic bench device`` runs it."""

import re
import subprocess

import pytest

from supernic.toolchain import ensure_verilator
from supernic.sim.vdev.profile import OUTSIDE, block_profile, read_structure

# Two instances of one leaf under two blocks, a block holding another module, and top-level
# logic of its own: the shapes Amaranth's Verilog has (escaped hierarchical module names).
VERILOG = r"""/* Generated */
module top(clk, a, y);
  input clk;
  input [7:0] a;
  output [7:0] y;
  wire [7:0] y0;
  wire [7:0] y1;
  reg [7:0] r = 8'd0;
  always @(posedge clk) r <= a ^ y1;
  \top.blk  blk (
    .clk(clk), .a(r), .y(y0)
  );
  leaf leaf0 (
    .clk(clk), .a(a), .y(y1)
  );
  assign y = y0 + y1;
endmodule

module \top.blk (clk, a, y);
  input clk;
  input [7:0] a;
  output [7:0] y;
  wire [7:0] t;
  leaf inner (
    .clk(clk), .a(a), .y(t)
  );
  assign y = t;
endmodule

module leaf(clk, a, y);
  input clk;
  input [7:0] a;
  output [7:0] y;
  reg [7:0] q = 8'd0;
  always @(posedge clk) q <= q + a;
  assign y = q;
endmodule
"""


@pytest.fixture
def design(tmp_path):
    path = tmp_path / "top.v"
    path.write_text(VERILOG)
    return path


def test_modules_instances_and_lines(design):
    s = read_structure(design)
    assert s.top == "top"
    assert s.instances["top"] == [("top.blk", "blk"), ("leaf", "leaf0")]
    assert s.instances["top.blk"] == [("leaf", "inner")]
    assert s.module_at(2) == "top" and s.module_at(20) == "top.blk" and s.module_at(33) == "leaf"
    assert s.module_at(18) is None          # between modules
    lines = s.block_lines()
    # The leaf (8 lines) is split between its two instances; every line is charged once.
    assert lines == {(): 16, ("blk",): 10 + 4, ("leaf0",): 4}
    assert sum(lines.values()) == len(VERILOG.splitlines()) - 3   # comment and blank lines
    assert s.block_lines(2)[("blk", "inner")] == 4


def test_samples_go_to_the_blocks_that_hold_their_lines(design):
    s = read_structure(design)
    symbols = {
        "Vdev___024root___nba_sequent__TOP__0__PROF__top__l9": 10,       # top's register
        "Vdev___024root___ico_sequent__TOP__1__PROF__top__l16": 10,      # top's input logic
        "Vdev___024root___nba_sequent__TOP__2__PROF__top__l35": 40,      # the leaf, twice
        "Vdev___024root___nba_sequent__TOP__3__PROF__top__l27": 20,      # blk's own assign
        "Vdev___024root___eval_nba__0": 15,
        "pthread_mutex_trylock": 5,
    }
    p = block_profile(s, symbols)
    rows = {r["block"]: r for r in p["blocks"]}
    assert p["samples"] == 100 and p["outside_share"] == 0.2
    assert rows["blk"]["share"] == pytest.approx(0.4)          # 20 own + 20 of the leaf
    assert rows["leaf0"]["share"] == pytest.approx(0.2)
    assert rows["top (top-level wiring)"]["share"] == pytest.approx(0.2)
    assert rows["top (top-level wiring)"]["ico_share"] == pytest.approx(0.1)
    assert rows[OUTSIDE]["share"] == pytest.approx(0.2)
    assert sum(r["share"] for r in p["blocks"]) == pytest.approx(1.0)
    assert [c["block"] for c in rows["blk"]["children"]] == ["blk (own logic)", "blk/inner"]
    assert p["phases"] == {"ico": 0.1, "nba": 0.7}


def test_verilators_profiling_names_point_at_the_right_lines(design, tmp_path):
    """Verilate with --prof-cfuncs (no compile) and feed the generated function names back:
    every one must land in the module whose line it names, and both modules with logic in
    their own lines (top's register and assign, the leaf's register) must be found."""
    ensure_verilator()
    obj = tmp_path / "obj"
    done = subprocess.run(["verilator", "--cc", "--prof-cfuncs", "-Wno-fatal", "-Wno-lint",
                           "-Wno-style", "--no-timing", "-Mdir", str(obj), str(design)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    names = set()
    for cpp in obj.glob("*.cpp"):
        names |= set(re.findall(r"\w+__PROF__\w+", cpp.read_text()))
    assert names
    s = read_structure(design)
    p = block_profile(s, dict.fromkeys(names, 1))
    assert p["outside_share"] == 0
    charged = {r["block"] for r in p["blocks"] if r["share"] > 0}
    assert {"top (top-level wiring)", "leaf0", "blk"} <= charged
