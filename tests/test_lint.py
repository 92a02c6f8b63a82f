"""Every shipped design configuration generates Verilog that `verilator --lint-only -Wall` passes
with only the waivers of hw/lint.vlt, each of which is explained there. A new warning fails here,
so the README's `snic build --out out/ --lint` stays clean on the default design."""

import tomllib
from pathlib import Path

import pytest

from supernic.desc.config import load_config
from supernic.hw.lint import lint
from supernic.sim.build import generated_design

ROOT = Path(__file__).resolve().parents[1]


def shipped_configurations():
    """Design configurations (TOML with a [design] table) in chains/ and tests/data/; chain
    specifications beside them are not designs."""
    paths = (sorted((ROOT / "chains").glob("*.toml")) + sorted((ROOT / "chains/boards").glob("*.toml"))
             + sorted((ROOT / "tests/data").glob("*.toml")))
    return [p for p in paths if "design" in tomllib.loads(p.read_text())]


def test_the_default_design_is_among_them():
    names = [p.relative_to(ROOT).as_posix() for p in shipped_configurations()]
    assert "chains/default.toml" in names and "tests/data/nic_test.toml" in names
    assert "chains/boards/ecpix5_85.toml" in names


@pytest.mark.parametrize("path", shipped_configurations(),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shipped_configuration_is_lint_clean(path):
    paths = generated_design(load_config(path), progress=lambda message: None)
    ok, report = lint(paths["verilog"])
    assert ok, report
