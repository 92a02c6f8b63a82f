"""snic build --vivado: the Verilog, constraints and non-project Tcl for an AMD card, checked
for what Vivado would need (no Vivado here): every source the script reads exists, the top it
synthesises is a module of that Verilog, the clock it constrains is one of its ports, the part
is the card's."""

import re
import subprocess
import sys

from supernic.desc.config import DesignConfig


def test_vivado_project(tmp_path):
    from supernic.tools.vivado import CARDS, write_vivado_project
    config = DesignConfig(name="parser64", data_width=64)
    paths = write_vivado_project(config, tmp_path, "u280", 300.0, progress=lambda s: None)
    tcl = paths["tcl"].read_text()
    assert f"-part {CARDS['u280']}" in tcl
    for name in re.findall(r"read_verilog \{(.+?)\}", tcl):
        assert (tmp_path / name).exists()
    verilog = paths["verilog"].read_text()
    top = re.search(r"synth_design -top (\S+)", tcl).group(1)
    assert re.search(rf"^module {top}\(", verilog, re.M)
    xdc = paths["xdc"].read_text()
    assert "create_clock -name clk -period 3.333 [get_ports clk]" in xdc
    assert re.search(r"^\s*input clk;", verilog, re.M)


def test_vivado_refuses_unknown_cards(tmp_path):
    run = subprocess.run([sys.executable, "-m", "supernic.driver.cli", "build", "--vivado",
                          "vcu9000", "--out", str(tmp_path)], capture_output=True, text=True)
    assert run.returncode != 0 and "unknown card or part 'vcu9000'" in run.stderr
