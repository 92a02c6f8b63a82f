"""``snic bench board``: a board's bitstream built, its utilisation and timing.

The board (``--board``, default ecpix5_85) is built twice in the same run: with the NIC of its
configuration (``--config``, default the board's own under chains/boards/) and with the MAC
loopback top, the baseline: what the Ethernet path, clocks and I/O cost without the NIC. Per
build: LUTs (nextpnr's TRELLIS_COMB: LUT4s and carry halves), flip-flops, block RAMs, DSPs,
each against the part; each clock's target and achieved frequency; the build seconds.

Without ``--quick`` it also synthesises the 512-bit default NIC (chains/default.toml) block by
block (``snic resources --config``, Yosys ``synth_ecp5``, out of context), to say what the
default design needs against the same part: its LUT4s plus two per carry cell (nextpnr packs a
CCU2C into two TRELLIS_COMB), which is what nextpnr would have to place.
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
    from ..hw.board.boards import board_config_path, board_named
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
    if not quick:
        result["default_nic"] = _default_nic(nic["utilization"]["lut"]["available"], console)
    result["seconds"] = round(time.monotonic() - t0, 1)
    return result


def _default_nic(part_luts, console):
    import os
    from ..desc.config import default_config_path, load_config
    from .design_resources import design_resources
    config = load_config(default_config_path())
    with console.status("the 512-bit default NIC, block by block (synth_ecp5)...") as status:
        res = design_resources(config, targets=("ecp5",), jobs=os.cpu_count() or 1,
                               progress=status.update)
    total = res["total"]["ecp5"]
    comb = total["lut"] + 2 * total["carry"]
    return {"config": config.name, "data_width": config.data_width, "lut": total["lut"],
            "carry": total["carry"], "ff": total["ff"], "bram18": total["bram18"],
            "comb_cells": comb, "part_comb_cells": part_luts,
            "share_of_part": round(comb / part_luts, 3), "fits": comb <= part_luts,
            "largest_blocks": sorted(((b["block"], b["ecp5"]["lut"]) for b in res["blocks"]
                                      if "ecp5" in b), key=lambda x: -x[1])[:6],
            "errors": res["errors"]}


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
    if "default_nic" in result:
        d = result["default_nic"]
        console.print(f"the {d['data_width']}-bit default NIC ({d['config']}): {d['lut']:,} LUT4s"
                      f" and {d['carry']:,} carry cells, {d['comb_cells']:,} logic cells, "
                      f"{d['share_of_part']:.0%} of the part: "
                      f"{'fits' if d['fits'] else 'does not fit'} (largest: "
                      + ", ".join(f"{b} {n:,}" for b, n in d["largest_blocks"]) + ")")
    console.print(f"NIC: {result['nic_lut_share_of_part']:.1%} of the part's LUTs, "
                  f"{result['nic_over_loopback_lut']}x the loopback's; goal "
                  f"{result['goal_fmax_mhz']} MHz: {'met' if result['meets_goal'] else 'missed'}")
