"""Chains and DAGs on Verilator (parser, chain, drop stage) against the chain model.

Every example tenant in chains/ and the ACL-only DAG in tests/chains, at 64 and 512 bits:
10,000 random packets with malformed ones, random idle and backpressure; every delivered packet
equal to the model's, every dropped one counted where the model drops it.
"""

from pathlib import Path

import pytest

from supernic.hw.config import DesignConfig
from supernic.sim.session import chain_simulator, run_bench
from supernic.tools.bench_nt import example_chains

CHAINS = [*example_chains(), Path(__file__).parent / "chains" / "acl_dag.toml"]
PACKETS = 10_000


@pytest.mark.parametrize("width", [64, 512], ids=lambda w: f"w{w}")
@pytest.mark.parametrize("path", CHAINS, ids=lambda p: p.stem)
def test_chain_matches_model(path, width, tmp_path):
    sim = chain_simulator(path, DesignConfig(data_width=width))
    result = run_bench(sim, "random_traffic", {
        "SNIC_SEED": width + len(path.stem), "SNIC_PACKETS": PACKETS, "SNIC_IDLE": "random",
        "SNIC_BACKPRESSURE": "random", "SNIC_MALFORMED": 0.1,
    }, test_dir=tmp_path, module="supernic.sim.tb.chain_tb")
    assert result["mismatches"] == 0 and not result["problems"]
    assert result["delivered"] + result["dropped"] == PACKETS
    assert result["counters"]["chain"]["delivered"] == result["delivered"]
    assert result["counters"]["chain"]["dropped"] == result["dropped"]
    assert result["delivered"] > 0
    for node, counters in result["counters"]["nodes"].items():
        assert counters["packets"] == PACKETS, node
