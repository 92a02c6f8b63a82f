"""Formal properties of the design's blocks, written with Amaranth's ``Assert``/``Assume`` and
proven by Yosys's SMT flow (tools/formal.py); imports supernic.desc and hw/."""
