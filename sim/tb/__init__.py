"""cocotb benches: each scenario of a block or a design, driven from pytest or a benchmark;
imports supernic.desc, hw/, sim/ and the driver."""

#: The multi-tenant NIC bench module (its scenarios: the NIC benchmarks, the vdev comparison).
NIC_BENCH_MODULE = "supernic.sim.tb.nic_bench_tb"
