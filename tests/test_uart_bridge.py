"""The register bus over a UART: the bridge (hw/board/uart_bridge.py) on Verilator against its
model, and the driver's SerialBus against the same model served on a socket (pyserial's
``socket://``), its resynchronisation after a lost reply included."""

import asyncio
import socket
import threading

import pytest

from supernic.driver.serial_bus import SerialBus, decode_read_reply, decode_write_reply
from supernic.driver.transport import RegisterAccessError, Response, TransportLost
from supernic.sim.board.uart_bridge_model import UartBridgeModel
from supernic.sim.session import run_bench
from supernic.sim.tb.uart_bridge_tb import bridge_simulator


def test_bridge_against_model():
    result = run_bench(bridge_simulator(), "random_requests", {"seed": 5, "requests": 120},
                       module="supernic.sim.tb.uart_bridge_tb")
    assert not result["problems"]
    assert {"write", "read", "junk", "cut", "break"} <= set(result["kinds"])
    assert result["words"] > 5


def _serve(model, drop_first_reply=False):
    """The model behind a TCP socket, a thread answering one connection; returns the port."""
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def run():
        conn, _ = server.accept()
        dropped = not drop_first_reply
        with conn:
            while data := conn.recv(64):
                reply = model.feed(data)
                if not dropped and reply:
                    dropped = True          # a reply lost on the line
                    continue
                conn.sendall(reply)
        server.close()
    threading.Thread(target=run, daemon=True).start()
    return port


def test_serial_bus_reads_and_writes():
    model = UartBridgeModel(16)
    bus = SerialBus(f"socket://127.0.0.1:{_serve(model)}", timeout=0.5)

    async def go():
        await bus.write32(0x100, 0xDEADBEEF)
        await bus.write32(0x100, 0x00AA0000, strobe=0b0100)
        return await bus.read32(0x100), await bus.read32(0x104)
    assert asyncio.run(go()) == (0xDEAAbeef, 0)
    bus.close()


def test_serial_bus_retries_after_a_lost_reply():
    model = UartBridgeModel(16)
    bus = SerialBus(f"socket://127.0.0.1:{_serve(model, drop_first_reply=True)}", timeout=0.3)
    assert asyncio.run(bus.read32(0x10)) == 0      # the lost reply: a "?" exchange, then the request again
    bus.close()


def test_serial_bus_errors():
    with pytest.raises(TransportLost, match="cannot open"):
        SerialBus("/dev/no-such-tty")
    assert decode_write_reply(b"K\x02") == Response.SLVERR
    assert decode_read_reply(b"D\x01\x00\x00\x00\x00") == (1, Response.OKAY)
    for bad in (b"", b"K", b"D\x00", b"?\x00", b"K\x07"):
        with pytest.raises(ValueError):
            (decode_write_reply if bad[:1] != b"D" else decode_read_reply)(bad)
    assert RegisterAccessError       # a non-OKAY response raises (transport.RegisterBus)


def test_status_of_a_board_over_its_uart(tmp_path, capsys):
    """snic status --serial: the register image of a NIC behind the bridge's model, read
    through SerialBus as it would be from a board."""
    import json
    from test_server import NIC_64, _image          # a sibling module: CI has no tests package
    from supernic.driver.cli import main
    from supernic.hw.generate import design_description
    description = design_description(NIC_64)
    description["board"] = {"name": "ecpix5_85", "base": 0x1_0000,
                            "registers": ["rx_frames", "rx_bad_fcs"]}
    regmap = tmp_path / "nic.regmap.json"
    regmap.write_text(json.dumps(description))
    memory = _image(description, {("nic", "tenants"): 2, ("nic", "ports"): 2,
                                  ("nic", "regions"): 2, ("id", "build_id"): NIC_64.build_id,
                                  ("parser1", "packets"): 40})
    port = _serve(UartBridgeModel(16, memory, board=[1234, 5]))
    assert main(["status", "--serial", f"socket://127.0.0.1:{port}", "--regmap", str(regmap),
                 "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["endpoint"] == f"serial:socket://127.0.0.1:{port}"
    assert [p["parser"]["packets"] for p in status["ports"]] == [0, 40]
    assert status["board"] == {"rx_frames": 1234, "rx_bad_fcs": 5}     # the MAC's counters
