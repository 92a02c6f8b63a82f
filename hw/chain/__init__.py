"""Chains and DAGs of network tasks: specifications, fork/join, the chain component."""
