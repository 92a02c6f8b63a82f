"""``snic build --vivado PART_OR_CARD --out DIR``: the Verilog of a design with the constraints
and a non-project Tcl script that a user with Vivado runs (``vivado -mode batch -source
build.tcl``) to synthesise, place and route it for an AMD UltraScale+ part.

The NIC is built out of context (``synth_design -mode out_of_context``): its ports are the
AXI4-Stream, AXI4-Lite, clock and reset of the generated top level, not a card's pins, because
the card's own shell (the 100G MAC behind its QSFP cages, PCIe DMA) is the vendor's IP and
differs per card. What the script answers is whether the NIC fits the part and closes timing at
the card's clock (250 MHz by default, the 512-bit datapath's 128 Gbit/s per port); it writes
the utilisation and timing reports and a checkpoint the card's shell can take in.

Here only the generation is tested; the resource estimate without Vivado is
``snic resources --config C --target xilinx`` (YoWASP Yosys ``synth_xilinx -family xcup``).
"""

from pathlib import Path

__all__ = ["CARDS", "write_vivado_project"]

#: Cards and their parts (AMD data sheets DS962 for Alveo, UG1182 for the ZCU102).
CARDS = {
    "u250": "xcu250-figd2104-2L-e",
    "u280": "xcu280-fsvh2892-2L-e",
    "u55c": "xcu55c-fsvh2892-2L-e",
    "zcu102": "xczu9eg-ffvb1156-2-e",
}


def write_vivado_project(config, out_dir, target="u250", clock_mhz=250.0, progress=print):
    """Write the design's Verilog, ``<name>.xdc`` and ``build.tcl`` into ``out_dir``; return
    their paths."""
    from ..hw.generate import write_design
    part = CARDS.get(target, target)
    if not part.startswith("xc"):
        raise ValueError(f"unknown card or part {target!r} (cards: {', '.join(CARDS)}; or an "
                         f"AMD part name such as xcu250-figd2104-2L-e)")
    out = Path(out_dir)
    paths = write_design(config, out, progress=progress)
    sources = [paths["verilog"]] + [c["verilog"] for c in paths["chains"].values()]
    period = 1000.0 / clock_mhz
    xdc = out / f"{config.name}.xdc"
    xdc.write_text(
        f"# {config.name} out of context at {clock_mhz:g} MHz (snic build --vivado)\n"
        f"create_clock -name clk -period {period:.3f} [get_ports clk]\n"
        "# The ports meet the card's shell in registers on both sides: half a period each.\n"
        f"set_input_delay -clock clk {period / 2:.3f} "
        "[get_ports -filter {DIRECTION == IN && NAME != clk}]\n"
        f"set_output_delay -clock clk {period / 2:.3f} [get_ports -filter {{DIRECTION == OUT}}]\n")
    tcl = out / "build.tcl"
    reads = "\n".join(f"read_verilog {{{Path(s).name}}}" for s in sources)
    tcl.write_text(f"""# Non-project Vivado flow for {config.name} on {part} (snic build --vivado).
#   cd {out} && vivado -mode batch -source build.tcl
# Writes reports/ (utilisation, timing) and {config.name}_routed.dcp.
set_part {part}
set here [file dirname [file normalize [info script]]]
cd $here
file mkdir reports
{reads}
read_xdc -mode out_of_context {{{xdc.name}}}
synth_design -top {config.name} -part {part} -mode out_of_context -flatten_hierarchy rebuilt
report_utilization -file reports/post_synth_utilization.rpt
opt_design
place_design
phys_opt_design
route_design
report_utilization -hierarchical -file reports/utilization.rpt
report_utilization -file reports/utilization_summary.rpt
report_timing_summary -max_paths 20 -file reports/timing_summary.rpt
write_checkpoint -force {config.name}_routed.dcp
set wns [get_property SLACK [get_timing_paths -max_paths 1 -nworst 1 -setup]]
puts "snic: {config.name} on {part}: worst setup slack $wns ns at {clock_mhz:g} MHz"
""")
    return {"verilog": paths["verilog"], "sources": sources, "xdc": xdc, "tcl": tcl,
            "part": part}
