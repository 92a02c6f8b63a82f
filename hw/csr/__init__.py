"""The register file and its AXI4-Lite port in gateware (the blocks are described in
supernic.desc.registers); imports supernic.desc and hw/."""
