"""The generated parser design on Verilator, against the model, at 64 and 512 bits.

10,500 packets per width (three runs of 3,500: no idle or backpressure, random, bursty), mixed
sizes from 60 to 9,000 bytes, 10% malformed of every kind plus broken ``keep``; the bench
(sim/tb/parser_tb.py) compares every packet and metadata word with the model and the register
counters with what came out.
"""

import pytest

from supernic.desc.config import DesignConfig
from supernic.sim.session import design_simulator, run_bench

PACKETS_PER_RUN = 3500
PATTERNS = [("none", "none"), ("random", "random"), ("bursty", "bursty")]


@pytest.fixture(scope="session", params=[64, 512], ids=lambda w: f"w{w}")
def simulator(request):
    return request.param, design_simulator(DesignConfig(data_width=request.param))


@pytest.mark.parametrize("idle,backpressure", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_random_traffic_matches_model(simulator, idle, backpressure, tmp_path):
    width, sim = simulator
    seed = 1000 * width + PATTERNS.index((idle, backpressure))
    result = run_bench(sim, "random_traffic", {
        "seed": seed, "packets": PACKETS_PER_RUN, "idle": idle,
        "backpressure": backpressure, "malformed": 0.1, "keep_errors": 0.005,
    }, test_dir=tmp_path)
    assert result["mismatches"] == 0
    assert result["packets_out"] == result["packets_in"] == PACKETS_PER_RUN
    assert result["counters"]["packets"] == PACKETS_PER_RUN
    assert result["counters"]["malformed"] == result["errors"] > 0
    assert result["blocks"] == ["id", "parser"]
    # The traffic must have exercised the flags it claims to cover.
    for flag in ("truncated", "malformed", "fragment", "runt", "length_error", "keep_error"):
        assert result["flags"][flag] > 0, flag


def test_saturation_is_line_rate(simulator, tmp_path):
    """Not a speed assertion (see `snic bench parser`): full-size frames must stream without
    bubbles once the pipeline is primed, or the parser has a structural stall."""
    width, sim = simulator
    result = run_bench(sim, "saturation", {"size": 1500, "packets": 100},
                       test_dir=tmp_path)
    assert result["beats_per_cycle"] > 0.99


@pytest.mark.parametrize("config,seed,packets,least", [
    (DesignConfig(name="parser_w64b", data_width=512, header_bytes=64), 77, 3000, 1),
    (DesignConfig(name="parser_ext1", data_width=512, ext_headers=1), 78, 2000, 21),
], ids=["small_window", "ext_headers_1"])
def test_too_deep_where_the_model_says(config, seed, packets, least, tmp_path):
    """Builds that stop the walk early, at 512 bits: a 64-byte window (deep header stacks run
    past it) and ``[parser] ext_headers = 1`` (IPv6 packets with a second extension header;
    the generator draws one to three). Such packets come out ``too_deep`` exactly where the
    model with the same parameters says, with everything else unchanged."""
    sim = design_simulator(config)
    result = run_bench(sim, "random_traffic", {
        "seed": seed, "packets": packets, "idle": "random",
        "backpressure": "random", "malformed": 0.1}, test_dir=tmp_path)
    assert result["mismatches"] == 0 and result["packets_out"] == packets
    assert result["flags"]["too_deep"] >= least
