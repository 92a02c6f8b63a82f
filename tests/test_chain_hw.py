"""Chains and DAGs on Verilator (parser, chain, drop stage) against the chain model.

Every example tenant in chains/ at 64 bits, and the monitoring DAG and the ACL-only DAG in
tests/chains at 512: 1,000 random packets (the light size mix, 60 to 9,000 bytes) with 10%
malformed ones, random idle and backpressure; every delivered packet equal to the model's,
every dropped one counted where the model drops it, every NT's counters equal to its model's.
Each NT is also tested alone at both widths (tests/test_nt_contract.py) and every example chain
runs inside the multi-tenant NIC (tests/test_nic.py), so the other chains are not rebuilt at 512
bits here: CI's time goes to builds.
"""

from pathlib import Path

import pytest

from supernic.desc.config import DesignConfig
from supernic.sim.session import chain_simulator, run_bench
from supernic.tools.bench_nt import example_chains

CASES = [(path, 64) for path in example_chains()]
CASES += [(path, 512) for path in example_chains() if path.stem == "monitoring"]
CASES.append((Path(__file__).parent / "chains" / "acl_dag.toml", 512))
PACKETS = 1_000


@pytest.mark.parametrize("path,width", CASES, ids=lambda c: getattr(c, "stem", f"w{c}"))
def test_chain_matches_model(path, width, tmp_path):
    sim = chain_simulator(path, DesignConfig(data_width=width))
    result = run_bench(sim, "random_traffic", {
        "seed": width + len(path.stem), "packets": PACKETS, "idle": "random",
        "backpressure": "random", "malformed": 0.1,
    }, test_dir=tmp_path, module="supernic.sim.tb.chain_tb")
    assert result["mismatches"] == 0 and not result["problems"]
    assert result["delivered"] + result["dropped"] == PACKETS
    assert result["counters"]["chain"]["delivered"] == result["delivered"]
    assert result["counters"]["chain"]["dropped"] == result["dropped"]
    assert result["delivered"] > 0
    for node, counters in result["counters"]["nodes"].items():
        assert counters["packets"] == PACKETS, node
