"""The Ethernet MAC (hw/board/mac.py) on Verilator against its model, with cocotbext-eth's GMII
source and sink as the PHY: good and bad bursts of every kind in, random frames out, under idle
and backpressure on the NIC side and with the NIC's clock faster and slower than the PHY's.
The model's own framing is checked against scapy."""

import zlib

import pytest

from supernic.sim.board.mac_model import PREAMBLE, MacRxModel, fcs, receive, wire_frame
from supernic.sim.session import run_bench
from supernic.sim.tb.mac_tb import mac_simulator

MODULE = "supernic.sim.tb.mac_tb"


def test_model_framing_matches_scapy():
    from scapy.layers.l2 import Ether
    frame = bytes(Ether(dst="02:00:00:00:00:01", src="02:00:00:00:00:02", type=0x88B5)
                  / b"abc")
    wire = wire_frame(frame)
    assert wire[:8] == PREAMBLE and len(wire) == 8 + 64
    # scapy pads to 60 too; the FCS is zlib's CRC-32 of the padded frame, low byte first.
    padded = bytes(Ether(frame)) + bytes(60 - len(frame))
    assert wire[8:-4] == padded and wire[-4:] == zlib.crc32(padded).to_bytes(4, "little")
    assert receive(wire) == ("frames", padded)


def test_model_verdicts():
    body = bytes(range(100))
    good = PREAMBLE + body + fcs(body)
    assert receive(good) == ("frames", body)
    assert receive(good[3:]) == ("frames", body)                 # a shorter preamble
    assert receive(good, [0] * 20 + [1])[0] == "errors"
    assert receive(b"\x55\x55\x12" + good[3:])[0] == "errors"
    assert receive(b"\x55" * 7)[0] == "errors"
    assert receive(PREAMBLE + body[:40] + fcs(body[:40]))[0] == "runts"
    assert receive(good, max_frame=100)[0] == "too_long"
    assert receive(good[:-1] + bytes([good[-1] ^ 0x80]))[0] == "bad_fcs"
    model = MacRxModel()
    for burst in (good, good[:-1], good):
        model.receive(burst)
    assert model.counts["frames"] == 2 and model.counts["bad_fcs"] == 1


@pytest.fixture(scope="module")
def simulator():
    # FIFOs of one largest frame: the receive FIFO overflows under heavy backpressure, which
    # the bench accounts for (and test_mac_overflow_is_counted makes sure of).
    return mac_simulator(64, max_frame=2048, rx_fifo_bytes=2048, tx_fifo_bytes=2048)


@pytest.mark.parametrize("seed,pause,clk_ns", [(1, 0.3, 7), (2, 0.0, 8.8), (3, 0.6, 6)])
def test_mac_against_model(simulator, seed, pause, clk_ns):
    result = run_bench(simulator, "random_traffic",
                       {"seed": seed, "frames": 150, "pause": pause, "clk_ns": clk_ns},
                       module=MODULE)
    assert not result["problems"]
    # The run reached every kind of burst and the NIC side took frames both ways.
    assert {"good", "runt", "long", "fcs", "er", "preamble", "no_sfd", "tiny",
            "jumbo"} <= set(result["kinds"])
    assert result["received"] > 50 and result["transmitted"] == 75
    assert result["min_gap_clocks"] == 12      # back-to-back frames from the NIC: the gap only


def test_mac_overflow_is_counted(simulator):
    """A receive FIFO of one largest frame and a NIC that takes a beat one cycle in ten: good
    frames are lost, and every one of them is counted as an overflow (checked in the bench),
    the rest delivered in order."""
    result = run_bench(simulator, "random_traffic",
                       {"seed": 4, "frames": 120, "pause": 0.97, "clk_ns": 8},
                       module=MODULE)
    assert not result["problems"]
    assert result["counters"]["rx_overflows"] > 2
    assert result["received"] + result["counters"]["rx_overflows"] == result["good"]
