"""Chains and DAGs of network tasks in gateware: fork/join, the graph, the single-tenant design;
imports supernic.desc and hw/."""
