"""A board's bitstream from a clean checkout with the open toolchain from PyPI: the ECPIX-5's
Ethernet loopback top (clocks, RGMII, the MAC) through YoWASP Yosys, nextpnr-ecp5 and ecppack,
its clocks met. Also the PLL's settings, the board table, and the CLI's refusals."""

import subprocess
import sys
from pathlib import Path

import pytest

from supernic.hw.board.boards import BOARDS, board_named
from supernic.hw.board.clocks import pll_dividers
from supernic.desc.errors import SnicError
from supernic.tools.board_build import build_board, summary_rows


def test_pll_dividers():
    clki, clkfb, clkop = pll_dividers(100e6, 125e6)
    assert 100e6 / clki * clkfb == 125e6 and 400e6 <= 125e6 * clkop <= 800e6
    with pytest.raises(ValueError, match="no ECP5 PLL setting"):
        pll_dividers(100e6, 123.456789e6)


def test_board_table():
    assert board_named("ecpix5_85").device == "LFE5UM5G-85F"
    with pytest.raises(SnicError, match="no board 'nope'"):
        board_named("nope")
    # Every board has a shipped configuration that loads.
    from supernic.desc.config import load_config
    from supernic.hw.board.boards import board_config_path
    assert load_config(board_config_path("ecpix5_85")).ports == 1
    assert set(BOARDS) >= {"ecpix5_85", "ecpix5_45"}


def test_loopback_bitstream_meets_its_clocks(tmp_path):
    result = build_board(board_named("ecpix5_85"), None)
    bit = Path(result["bitstream"]).read_bytes()
    # An ECP5 bitstream: ecppack's comment block, then the sysCONFIG preamble (0xBDB3).
    assert bit[:2] == b"\xff\x00" and b"\xff\xff\xbd\xb3" in bit[:4096] and len(bit) > 100_000
    assert result["clocks"]["sync"]["target_mhz"] == 125.0
    assert result["clocks"]["rx"]["target_mhz"] == 125.0     # the PHY's receive clock
    assert result["timing_met"], result["clocks"]
    assert result["utilization"]["pll"]["used"] == 1
    rows = dict(summary_rows(result))
    assert "MHz achieved" in rows["clock sync"]


def test_cli_refusals(tmp_path):
    def snic(*args):
        return subprocess.run([sys.executable, "-m", "supernic.driver.cli", *args],
                              capture_output=True, text=True)
    bad = snic("build", "--board", "nope")
    assert bad.returncode != 0 and "no board 'nope'" in bad.stderr
    no_out = snic("build")
    assert no_out.returncode != 0 and "--out is required" in no_out.stderr


def test_board_bench_figures(monkeypatch):
    """snic bench board's JSON from two builds (the board's NIC and the loopback), here the
    loopback's real report twice over: every figure the issue asks for is named in it."""
    import io
    import json
    from rich.console import Console
    import supernic.tools.board_build as board_build
    from supernic.tools.bench_board import board_bench, board_show
    loopback = build_board(board_named("ecpix5_85"), None)
    monkeypatch.setattr(board_build, "build_board", lambda board, config, **kw: loopback)
    result = board_bench(None, Console(file=io.StringIO()), quick=True)
    json.dumps(result)
    for build in ("nic", "loopback"):
        figures = result[build]
        for key in ("lut", "lut_available", "ff", "bram", "dsp", "fmax_target_mhz", "fmax_mhz",
                    "build_seconds", "timing_met"):
            assert key in figures, key
    assert result["nic"]["fmax_target_mhz"] == 125.0 and result["goal_fmax_mhz"] == 125.0
    assert result["meets_goal"] == (result["nic"]["fmax_mhz"] >= 125)
    out = Console(record=True, file=io.StringIO(), width=150)
    board_show(result, out)
    assert "ecpix5_85" in out.export_text()
