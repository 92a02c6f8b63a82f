"""The transform bench's pure helpers (no Yosys, no nextpnr, no simulator): reading nextpnr's
report and log, and the overhead ratio.

The report below has the shape nextpnr-ecp5 0.11.1 writes with ``--report`` (an ``acl`` run,
cut to the fields the bench reads, and one critical path left out)."""

import json

from supernic.tools.bench_transform import (PNR_ARGS, overhead, parse_nextpnr_log,
                                            parse_nextpnr_report)

REPORT = {
    "critical_paths": [],
    "fmax": {"clk": {"achieved": 63.023887634277344, "constraint": 200}},
    "utilization": {
        "DP16KD": {"available": 208, "used": 0},
        "TRELLIS_COMB": {"available": 83640, "used": 10918},
        "TRELLIS_FF": {"available": 83640, "used": 11886},
        "TRELLIS_IO": {"available": 365, "used": 0},
    },
}

LOG = """Info: Max frequency for clock 'clk': 50.07 MHz (FAIL at 200.00 MHz)
Info: Routing complete.
Warning: Max frequency for clock 'clk': 63.02 MHz (FAIL at 200.00 MHz)
Info: Max frequency for clock 'other': 300.00 MHz (PASS at 200.00 MHz)
"""


def test_report():
    got = parse_nextpnr_report(json.dumps(REPORT))
    assert got == {"fmax_mhz": 63.02, "constraint_mhz": 200, "comb": 10918, "ff": 11886,
                   "bram": 0}


def test_report_without_the_clock():
    got = parse_nextpnr_report(json.dumps({**REPORT, "fmax": {}}))
    assert got["fmax_mhz"] is None and got["ff"] == 11886


def test_report_with_a_global_net_name():
    fmax = {"$glbnet$clk": {"achieved": 100.0, "constraint": 200}}
    assert parse_nextpnr_report(json.dumps({**REPORT, "fmax": fmax}))["fmax_mhz"] == 100.0


def test_log_gives_the_post_route_figure():
    assert parse_nextpnr_log(LOG) == 63.02
    assert parse_nextpnr_log(LOG, clock="other") == 300.0
    assert parse_nextpnr_log("Info: nothing timed\n") is None


def test_overhead():
    assert overhead(115, 100) == 1.15
    assert overhead(0, 0) == 1.0
    assert overhead(3, 0) is None


def test_out_of_context_with_a_clock_constraint():
    # Hundreds of ports do not fit the package's pins; the clock constraint is what fmax is
    # measured against.
    assert "--out-of-context" in PNR_ARGS and "--freq" in PNR_ARGS
