"""RGMII and the MAC in the board's loopback (hw/board/rgmii.py, mac.py) on Verilator, with
cocotbext-eth's RGMII source and sink as the PHY (sim/tb/rgmii_tb.py): good frames come back
as the model's wire bytes, bad ones are counted and do not."""

from supernic.sim.session import run_bench
from supernic.sim.tb.rgmii_tb import rgmii_simulator


def test_rgmii_loopback():
    result = run_bench(rgmii_simulator(), "loopback", {"seed": 3, "frames": 60},
                       module="supernic.sim.tb.rgmii_tb")
    assert not result["problems"]
    assert result["back"] == result["good"] > 20
    assert {"good", "runt", "fcs", "er"} <= set(result["kinds"])
