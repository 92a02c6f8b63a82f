"""``snic bench board``: a board's bitstream built, its utilisation and timing.

The board (``--board``, default ecpix5_85) is built twice in the same run: with the NIC of its
configuration (``--config``, default the board's own under chains/boards/) and with the MAC
loopback top, the baseline: what the Ethernet path, clocks and I/O cost without the NIC. Per
build: LUTs (nextpnr's TRELLIS_COMB: LUT4s and carry halves), flip-flops, block RAMs, DSPs,
each against the part; each clock's target and achieved frequency; the build seconds.
"""

import time

__all__ = ["board_bench", "board_show"]


def _figures(result):
    used = result["utilization"]
    return {
        **{f"{name}": entry["used"] for name, entry in used.items()},
        **{f"{name}_available": entry["available"] for name, entry in used.items()},
        "fmax_target_mhz": result["clocks"].get("sync", {}).get("target_mhz"),
        "fmax_mhz": result["clocks"].get("sync", {}).get("achieved_mhz"),
        "rx_clock_mhz": result["clocks"].get("rx", {}).get("achieved_mhz"),
        "timing_met": result["timing_met"], "build_seconds": result["build_seconds"],
        "steps_seconds": result["seconds"], "cached": result.get("cached", False),
        "bitstream": result["bitstream"],
    }


def board_bench(config, console, quick, board_name="ecpix5_85"):
    from ..desc.config import load_config
    from ..driver.cli import board_config_path
    from ..hw.board.boards import board_named
    from .board_build import build_board
    board = board_named(board_name)
    if config is None:
        config = load_config(board_config_path(board.name))
    t0 = time.monotonic()
    result = {"benchmark": "board", "board": board.name, "device": board.device,
              "config": config.name, "data_width": config.data_width}
    with console.status(f"{board.name}: the loopback baseline...") as status:
        def progress(line):
            status.update(f"{board.name}: {line}")
        loopback = build_board(board, None, progress=progress, status=progress)
        nic = build_board(board, config, progress=progress, status=progress)
    result["loopback"] = _figures(loopback)
    result["nic"] = _figures(nic)
    result["nic_lut_share_of_part"] = round(nic["utilization"]["lut"]["used"]
                                            / nic["utilization"]["lut"]["available"], 4)
    result["nic_over_loopback_lut"] = round(nic["utilization"]["lut"]["used"]
                                            / loopback["utilization"]["lut"]["used"], 2)
    result["goal_fmax_mhz"] = 125.0
    result["meets_goal"] = bool(result["nic"]["fmax_mhz"]
                                and result["nic"]["fmax_mhz"] >= result["goal_fmax_mhz"])
    result["seconds"] = round(time.monotonic() - t0, 1)
    return result


def board_show(result, console):
    from rich.table import Table
    table = Table(title=f"{result['config']} ({result['data_width']}-bit) on {result['board']} "
                        f"({result['device']})")
    for column in ("build", "LUTs", "FFs", "BRAM", "DSP", "fmax (MHz)", "target", "met",
                   "seconds"):
        table.add_column(column)
    for name in ("nic", "loopback"):
        f = result[name]
        table.add_row(name, f"{f['lut']:,} / {f['lut_available']:,}", f"{f['ff']:,}",
                      str(f.get("bram", 0)), str(f.get("dsp", 0)), f"{f['fmax_mhz']}",
                      f"{f['fmax_target_mhz']}", "yes" if f["timing_met"] else "NO",
                      f"{f['build_seconds']:.0f}" + (" (cached)" if f["cached"] else ""))
    console.print(table)
    console.print(f"NIC: {result['nic_lut_share_of_part']:.1%} of the part's LUTs, "
                  f"{result['nic_over_loopback_lut']}x the loopback's; goal "
                  f"{result['goal_fmax_mhz']} MHz: {'met' if result['meets_goal'] else 'missed'}")
