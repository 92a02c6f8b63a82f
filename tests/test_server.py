"""The device server, its client and transports, and `snic status`.

`snic device serve` runs in a subprocess on the 64-bit parser-only design that test_vdev
builds (same configuration, so the same cached library: no new Verilator build): two clients at
once push packets and read registers, what comes out matches the parser model, counters read
through `SocketBus` and discovery, `snic status --json` reads them too, a second server on the
socket is refused, and shutdown removes the socket. MmapBus runs against a plain file standing
in for a BAR; status of a NIC design runs against an in-memory register image; an unknown
major version is refused with a clear message.
"""

import asyncio
import copy
import json
import signal
import socket
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest
from rich.console import Console

from supernic.driver.cli import main as snic
from supernic.driver.client import DeviceClient, DeviceError, DeviceUnavailable, SocketBus
from supernic.driver.discovery import (UnsupportedDesignError, check_supported, discover,
                                       read_register)
from supernic.driver.server import check_endpoint_free
from supernic.driver.status import StatusError, read_status, render_status
from supernic.driver.transport import MemoryBus, MmapBus, RegisterAccessError, Response
from supernic.desc.config import DesignConfig, load_config
from supernic.hw.generate import design_description
from supernic.desc.meta import TAIL_FLAGS
from supernic.hw.parser.meta import meta_layout
from supernic.sim.build import generated_design
from supernic.sim.layout_codec import decode, diff
from supernic.sim.parser_model import ParserModel, is_error
from supernic.sim.traffic import random_packets

PARSER_64 = DesignConfig(data_width=64)   # the configuration test_vdev builds
HEADER_BYTES = 256


def _snic(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "supernic.driver.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def _start_server(*args):
    """Start `snic device serve` and wait for the line saying where it listens."""
    proc = subprocess.Popen([sys.executable, "-m", "supernic.driver.cli", "device", "serve",
                             *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()   # the build is cached: this comes within seconds
    if not line.startswith("serving "):
        proc.kill()
        raise AssertionError(f"server did not start: {line!r} {proc.stderr.read()}")
    return proc, line.strip()


@pytest.fixture
def parser_toml(tmp_path):
    path = tmp_path / "parser64.toml"
    path.write_text("[design]\ndata_width = 64\n")
    config = load_config(path)
    # Same fields, so generated_design's cache key and the device library are test_vdev's.
    assert {k: v for k, v in asdict(config).items() if k != "config_dir"} == \
        {k: v for k, v in asdict(PARSER_64).items() if k != "config_dir"}
    return path


def _first_beat(meta):
    first = copy.deepcopy(meta)
    for flag in TAIL_FLAGS:
        first["flags"][flag] = 0
    return first


def test_serve_two_clients_status_and_shutdown(parser_toml, tmp_path):
    sock = tmp_path / "device.sock"
    proc, line = _start_server("--config", parser_toml, "--socket", sock)
    try:
        assert line.endswith(f"on unix:{sock}") and sock.exists()
        frames = [f for _, f in random_packets(400, seed=21, malformed_fraction=0.15)]

        async def session():
            pusher = await DeviceClient.connect(sock)
            reader = await DeviceClient.connect(sock)
            hello = await reader.hello()
            assert hello["design"] == "supernic" and hello["data_width"] == 64
            assert hello["build_id"] == PARSER_64.build_id
            regmap = hello["regmap"]["registers"]
            bus = SocketBus(reader)
            await pusher.reset()

            async def push_all():
                for frame in frames:
                    await pusher.push(0, frame)
                    await pusher.run(20)

            async def read_meanwhile():
                seen = []
                for _ in range(20):
                    seen.append(await read_register(bus, regmap, "parser", "packets"))
                return seen
            # Both clients at once: the server interleaves their requests on the device.
            _, seen = await asyncio.gather(push_all(), read_meanwhile())
            assert seen == sorted(seen)
            await pusher.drain(quiet=100)
            out, accepted = await reader.pop(), await reader.ingress_cycles(0)
            blocks = await discover(bus)
            assert check_supported(blocks) == []
            assert [b.name for b in blocks] == ["id", "parser"]
            counters = {k: await read_register(bus, regmap, "parser", k)
                        for k in ("packets", "bytes", "malformed")}
            # A bus error comes back as a response, and raises only in read32/write32.
            unmapped = blocks[-1].base + 0xF0
            assert await bus.read_word(unmapped) == (0, Response.DECERR)
            with pytest.raises(RegisterAccessError, match="DECERR"):
                await bus.read32(unmapped)
            with pytest.raises(RegisterAccessError, match="write at 0x00000000 failed with "
                                                          "SLVERR"):
                await bus.write32(0, 1)
            with pytest.raises(DeviceError, match="unknown op 'bogus'"):
                await reader.request("bogus")
            with pytest.raises(DeviceError, match="port must be an integer from 0 to 0"):
                await pusher.request("push", port=3, frame="00")
            assert await reader.cycle() > 0     # the connection survives refused requests
            # A batch is all or nothing: one bad entry and none of it is queued.
            with pytest.raises(DeviceError, match="frames_b64 entries must be base64"):
                await pusher.request("push_batch", ports=[0, 0], frames_b64=["AAAA", "!!"],
                                     at=[0, 0])
            with pytest.raises(DeviceError, match="lists ports, frames_b64"):
                await pusher.request("push_batch", ports=[0], frames_b64=["AAAA", "AAAA"])
            assert (await pusher.run_status(1))["queued"] == [0]
            # Paced: each packet's first beat goes no earlier than its cycle.
            now = await pusher.cycle()
            due = [now + 100, now + 100, now + 900]
            queued = await pusher.push_batch([(0, bytes(64), c) for c in due])
            assert queued == [3]
            state = await pusher.run_status(50)
            assert state["queued"] == [3] and state["delivered"] == 0
            await pusher.drain(quiet=50)
            paced = await pusher.pop()
            starts = (await reader.ingress_cycles(0))[-3:]
            assert starts[0] == due[0] and starts[1] == due[0] + 8 and starts[2] == due[2]
            assert [len(d.data) for d in paced] == [64] * 3
            await pusher.close()
            await reader.close()
            return out, accepted, counters
        out, accepted, counters = asyncio.run(session())

        model, layout = ParserModel(HEADER_BYTES), meta_layout(HEADER_BYTES)
        assert len(out) == len(frames) == len(accepted)
        bad = []
        for index, (frame, got) in enumerate(zip(frames, out)):
            meta = model.parse(frame)
            meta["ts"] = accepted[index] % 2 ** 32
            problems = diff(meta, decode(layout, got.last_user))
            if got.beats > 1:
                problems += diff(_first_beat(meta), decode(layout, got.first_user))
            if got.data != frame:
                problems.append("data differs")
            if problems:
                bad.append(f"packet {index}: {problems[:4]}")
        assert not bad, "\n".join(bad[:5])
        assert counters == {"packets": len(frames), "bytes": sum(map(len, frames)),
                            "malformed": sum(is_error(model.parse(f)) for f in frames)}

        status = _snic("status", "--socket", sock, "--json")
        assert status.returncode == 0, status.stderr
        report = json.loads(status.stdout)
        paced = {"packets": 3, "bytes": 3 * 64, "malformed": 3 * is_error(model.parse(bytes(64)))}
        assert report["ports"] == [{"port": 0, "parser": {k: v + paced[k]
                                                          for k, v in counters.items()},
                                    "classifier": None}]
        assert report["design"]["build_id_matches"] and report["design"]["data_width"] == 64
        assert report["tenants"] is None and report["regions"] is None
        assert set(report["absent"]) == {"tenants", "regions"}
        table = _snic("status", "--socket", sock)
        assert table.returncode == 0 and "tenants: absent" in table.stdout

        second = _snic("device", "serve", "--config", parser_toml, "--socket", sock)
        assert second.returncode == 2
        assert second.stderr.strip().splitlines() == [
            f"snic: error: another device is serving on {sock}"]

        async def stop():
            client = await DeviceClient.connect(sock)
            await client.shutdown()
        asyncio.run(stop())
        assert proc.wait(timeout=10) == 0
        assert not sock.exists()
        gone = _snic("status", "--socket", sock)
        assert gone.returncode == 2 and "no device is serving on" in gone.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_tcp_and_sigterm(parser_toml):
    proc, line = _start_server("--config", parser_toml, "--port", 0)
    try:
        port = int(line.rsplit(":", 1)[1])

        async def attach():
            async with await DeviceClient.connect(port=port) as client:
                return await client.hello(regmap=False)
        hello = asyncio.run(attach())
        assert "regmap" not in hello and hello["regmap_path"].endswith("supernic.regmap.json")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        with pytest.raises(DeviceUnavailable, match=f"no device is serving on 127.0.0.1:{port}"):
            asyncio.run(attach())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_bad_configurations(tmp_path, capsys):
    assert snic(["device", "serve", "--config", str(tmp_path / "missing.toml"),
                 "--socket", str(tmp_path / "s")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"snic: error: configuration file {tmp_path / 'missing.toml'} does not exist"]
    broken = tmp_path / "broken.toml"
    broken.write_text('[design]\ndata_width = 64\n[nic]\nregions = [["no_such_chain"]]\n')
    assert snic(["device", "serve", "--config", str(broken),
                 "--socket", str(tmp_path / "s")]) == 2
    # Progress lines come first on stderr; the error is the one last line.
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if line.startswith("snic: error:")] == err[-1:]
    assert "failed to build" in err[-1] and "no_such_chain" in err[-1]
    assert not (tmp_path / "s").exists()
    # A socket file left by a killed server is stale: it is removed, not reported as in use.
    stale = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))
    check_endpoint_free(stale)
    assert not stale.exists()


def _image(description, values=()):
    """A register space as MemoryBus backing: block headers and every register word, with
    ``values`` ({(block, register): value}) filled in."""
    memory = {}
    for block in description["registers"]["blocks"]:
        base = block["base"]
        memory.update({base: block["type"], base + 4: block["version"],
                       base + 8: block["next"]})
        for reg in block["registers"]:
            value = dict(values).get((block["name"], reg["name"]), 0)
            for part in range(reg["words"]):
                memory[reg["address"] + 4 * part] = value >> (32 * part) & 0xFFFF_FFFF
    return memory


def _write_file(path, memory):
    size = max(memory) + 4
    data = bytearray(size + (-size) % 4096)
    for address, value in memory.items():
        data[address:address + 4] = value.to_bytes(4, "little")
    path.write_bytes(bytes(data))


def test_mmap_bus_on_a_file(tmp_path, capsys):
    # Quiet: a cold cache's progress lines would reach capsys ahead of the JSON read below.
    paths = generated_design(PARSER_64, progress=lambda message: None)
    description = json.loads(Path(paths["regmap"]).read_text())
    parser = next(b for b in description["registers"]["blocks"] if b["name"] == "parser")
    values = {("id", "build_id"): description["build_id"], ("id", "data_width"): 64,
              ("parser", "packets"): 5 << 32 | 7, ("parser", "bytes"): 1234,
              ("parser", "malformed"): 2}
    bar = tmp_path / "resource0"
    _write_file(bar, _image(description, values))

    async def exercise():
        with MmapBus(bar) as bus:
            status = await read_status(bus, description)
            assert await bus.read32(parser["base"]) == parser["type"]
            assert (await bus.read_word(bar.stat().st_size))[1] == Response.DECERR
            await bus.write32(0x20, 0x11223344)
            await bus.write32(0x20, 0xAABBCCDD, strobe=0b0101)
            assert await bus.read32(0x20) == 0x11BB33DD
        with MmapBus(bar, offset=4096 if bar.stat().st_size > 4096 else 0, size=4,
                     writable=False) as window:
            assert (await window.write_word(0, 1)) == Response.SLVERR
            assert (await window.read_word(4))[1] == Response.DECERR
        return status
    status = asyncio.run(exercise())
    assert (bar.read_bytes()[0x20:0x24]) == (0x11BB33DD).to_bytes(4, "little")
    assert status["ports"][0]["parser"] == {"packets": 5 << 32 | 7, "bytes": 1234,
                                            "malformed": 2}
    assert status["design"]["build_id_matches"]
    with pytest.raises(ValueError, match="Map offset must be a non-negative multiple of 4, "
                                         "not 3"):
        MmapBus(bar, offset=3)
    with pytest.raises(ValueError, match="give the map size"):
        MmapBus(bar, offset=bar.stat().st_size)

    regmap = tmp_path / "design.json"
    regmap.write_text(json.dumps(description))
    assert snic(["status", "--mmap", str(bar), "--regmap", str(regmap), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ports"][0]["parser"]["bytes"] == 1234

    # A parser block of a major version this driver does not know: refused, clearly.
    data = bytearray(bar.read_bytes())
    data[parser["base"] + 4:parser["base"] + 8] = (0x0002_0001).to_bytes(4, "little")
    bar.write_bytes(bytes(data))
    with pytest.raises(UnsupportedDesignError, match=r"block parser .* version 2\.1 is not "
                                                     r"supported by this driver"):
        asyncio.run(read_status(MemoryBus(_image(description) | {parser["base"] + 4:
                                                                  0x0002_0001}), description))
    assert snic(["status", "--mmap", str(bar), "--regmap", str(regmap)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("snic: error: design not supported: block "
                                               "parser (type 0x50415253) version 2.1")


NIC_64 = DesignConfig(data_width=64, tenants=2, ports=2, regions=(("web", "secure"),
                                                                    ("metered",)))


def test_nic_status_from_a_register_image():
    description = design_description(NIC_64)
    values = {("nic", "tenants"): 2, ("nic", "ports"): 2, ("nic", "regions"): 2,
              ("id", "build_id"): NIC_64.build_id,
              ("parser1", "packets"): 40, ("classifier1", "unmatched"): 3,
              ("scheduler", "tenant_enable"): 0b10, ("scheduler", "t1_backlog_beats"): 17,
              ("scheduler", "t1_dispatched"): 30, ("scheduler", "t1_in_flight"): 2,
              ("scheduler", "t0_disabled_drops"): 9, ("egress", "t1_delivered"): 25,
              ("egress", "t1_dropped"): 3, ("region0", "active"): 1, ("region0", "online"): 1,
              ("region0", "packets_in"): 28, ("region1", "packets_out"): 6,
              ("store", "r0_in_flight"): 2}
    status = asyncio.run(read_status(MemoryBus(_image(description, values)), description))
    assert status["absent"] == {} and status["design"]["build_id_matches"]
    assert [p["parser"]["packets"] for p in status["ports"]] == [0, 40]
    assert status["ports"][1]["classifier"] == {"packets": 0, "unmatched": 3, "dropped": 0}
    t0, t1 = status["tenants"]
    assert not t0["enabled"] and t0["disabled_drops"] == 9
    assert t1 == {"tenant": 1, "enabled": True, "backlog_beats": 17, "enqueued": 0,
                  "dispatched": 30, "in_flight": 2, "queue_drops": 0, "disabled_drops": 0,
                  "delivered": 25, "dropped": 3}
    r0, r1 = status["regions"]
    assert (r0["personality"], r0["online"], r0["packets_in"], r0["in_flight"]) == \
        ("secure", True, 28, 2)
    assert (r1["personality"], r1["online"], r1["packets_out"]) == ("metered", False, 6)
    console = Console(record=True, width=160)
    render_status(status, console)
    text = console.export_text()
    assert "secure" in text and "metered" in text and "unmatched" in text

    # The description of another design does not match what the bus holds.
    other = design_description(PARSER_64)
    with pytest.raises(StatusError, match="description does not match the device"):
        asyncio.run(read_status(MemoryBus(_image(description)), other))


def _full_listener(path):
    """A Unix socket listening with a queue of one, and the connections that fill it."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.listen(1)
    filling = []
    while True:
        s = socket.socket(socket.AF_UNIX)
        s.setblocking(False)
        try:
            s.connect(str(path))
        except BlockingIOError:
            s.close()
            return listener, filling
        filling.append(s)


def test_a_full_listen_queue_is_waited_out_not_lost(tmp_path):
    """A busy server whose listen queue is full: the client waits until the server accepts, or
    says in one line that the device accepts no connection. It never gets a connection that
    was not made and is lost at its first write, which is what asyncio's own Unix connect
    gives here (CI saw it after a flood of connections, tests/test_access.py)."""
    import threading
    import time

    from supernic.driver.client import open_unix

    path = tmp_path / "busy.sock"
    listener, filling = _full_listener(path)
    assert filling
    with pytest.raises(DeviceUnavailable, match="accepts no connection: its queue stayed full"):
        asyncio.run(open_unix(path, patience=0.2))

    def accept_late():
        time.sleep(0.3)
        for _ in filling:
            listener.accept()[0].close()
        conn = listener.accept()[0]     # the client's, once the queue had room
        assert conn.recv(5) == b"hello"
        conn.sendall(b"hi")
        conn.close()
    server = threading.Thread(target=accept_late)
    server.start()

    async def talk():
        reader, writer = await open_unix(path, patience=10)
        writer.write(b"hello")
        await writer.drain()
        reply = await reader.readexactly(2)
        writer.close()
        return reply
    try:
        assert asyncio.run(talk()) == b"hi"
    finally:
        server.join(timeout=10)
        listener.close()
        for s in filling:
            s.close()
