"""Access control in the device server (sw/driver/access.py, sw/driver/server.py): a tenant's
connection reaches only its own blocks and its own counters, whatever it sends.

The server runs in this process on a socket, in front of a device that records every call
that reaches it, with the 64-bit test NIC's register map (tests/data/nic_test.toml: six
regions, four tenants). The expected rule is written here from the issue's words, not taken
from the code under test: a tenant reads and writes the blocks of its regions (``r<region>_``),
reads ``id`` and, in the scheduler, store and egress, the registers named for it or its
regions, sends frames only with its own keys, runs the device and pops its own packets, and
may otherwise only say hello, ask the cycle and its own access report.
"""

import asyncio
import os
import random
import socket
import stat
import struct

import pytest

from supernic.driver import access
from supernic.driver.access import AccessControl, token_file
from supernic.driver.client import DeviceClient, DeviceError
from supernic.driver.server import MAX_MESSAGE, DeviceServer, serving_in_thread
from supernic.driver.transport import Response
from supernic.desc.config import load_config
from supernic.hw.generate import top_component
from supernic.sim.parser_model import tenant_key_reader

NIC_TEST = "tests/data/nic_test.toml"
TENANT, REGIONS, KEY = 1, [1, 3], 101


class RecordingDevice:
    """Stands in for the virtual device: registers in a dictionary, every call recorded."""

    data_width, port_count = 64, 2

    def __init__(self, regmap_json, seed=0):
        rng = random.Random(seed)
        self.words = {r["address"] + 4 * w: rng.getrandbits(32)
                      for b in regmap_json["blocks"] for r in b["registers"]
                      for w in range(r.get("words", 1))}
        self.calls = []

    def access(self, write, address, value=0, strobe=0b1111):
        self.calls.append(("write" if write else "read", address))
        if write:
            self.words[address] = value
            return 0, Response.OKAY
        return self.words.get(address, 0), Response.OKAY

    def __getattr__(self, name):
        if name in ("push", "queued", "set_idle", "set_backpressure", "run", "run_until_drained",
                    "delivered_waiting", "ingress_cycles", "pop", "reset"):
            def call(*args, **kwargs):
                self.calls.append((name, args))
                return [] if name in ("pop", "ingress_cycles") else 0
            return call
        raise AttributeError(name)

    @property
    def cycle(self):
        return 0


@pytest.fixture(scope="module")
def description():
    config = load_config(NIC_TEST)
    return {"top": config.name, "config": {"tenants": config.tenants},
            "registers": top_component(config).regmap.to_json()}


def expected_rule(regmap_json, tenant, regions):
    """``(readable, writable)`` word addresses by the issue's rule."""
    readable, writable = set(), set()
    own = tuple(f"r{r}_" for r in regions)
    counters = (f"t{tenant}_", *own)
    for block in regmap_json["blocks"]:
        name = block["name"]
        words = range(block["base"], block["base"] + block["size"], 4)
        if name.startswith(own):
            readable.update(words)
            writable.update(words)
        elif name == "id":
            readable.update(words)
        elif name in ("scheduler", "store", "egress"):
            for r in block["registers"]:
                if r["name"].startswith(counters):
                    readable.update(r["address"] + 4 * w for w in range(r.get("words", 1)))
    return readable, writable


#: Allowed whatever the arguments; push and push_batch only with frames of the tenant's keys,
#: and the probe's frames carry none.
TENANT_OPS = {"hello", "auth", "access", "cycle", "run", "drain", "pop"}


async def probe(sock, device, description, requests=3000, seed=1):
    """Random requests from a tenant's connection over every op and every word of the register
    space (and past it), then every register word read and written; returns what went wrong:
    a request answered against the rule, or one refused yet seen by the device."""
    regmap = description["registers"]
    readable, writable = expected_rule(regmap, TENANT, REGIONS)
    rng = random.Random(seed)
    ops = DeviceServer.ops() + ["bogus"]
    top = regmap["size"] + 0x1000
    wrong = []
    async with await DeviceClient.connect(sock) as operator:
        token = (await operator.request("grant", tenant=TENANT, regions=REGIONS,
                                        keys=[KEY]))["token"]
    async with await DeviceClient.connect(sock, token=token) as tenant:
        assert tenant.role == {"role": "tenant", "tenant": TENANT}
        every = [("read32", a) for a in sorted(device.words)] + \
                [("write32", a) for a in sorted(device.words)]
        randoms = [(rng.choice(ops), rng.randrange(0, top, 4)) for _ in range(requests)]
        for op, address in every + randoms:
            args = {"address": address, "value": rng.getrandbits(32), "port": 0, "cycles": 1,
                    "frame": "00" * 60, "ports": [0], "frames_b64": ["AAAA"], "tenant": 0,
                    "regions": [0], "token": token, "prob": 0.5}
            before = len(device.calls)
            try:
                await tenant.request(op, **args)
                refused = None
            except DeviceError as e:
                refused = str(e)
            allowed = (op in TENANT_OPS or (op == "read32" and address in readable)
                       or (op == "write32" and address in writable))
            if allowed and refused is not None:
                wrong.append(f"{op} {address:#x} refused: {refused}")
            if not allowed and (refused is None or not refused.startswith("denied: ")):
                wrong.append(f"{op} {address:#x} not denied ({refused})")
            if refused is not None and len(device.calls) != before:
                wrong.append(f"{op} {address:#x} refused but reached the device")
        report = await tenant.request("access")
    assert report["role"] == "tenant" and report["regions"] == REGIONS
    return wrong


def run_probe(tmp_path, description):
    device = RecordingDevice(description["registers"])
    before = dict(device.words)
    server = DeviceServer(device, description)
    sock = tmp_path / "device.sock"
    with serving_in_thread(server, sock):
        wrong = asyncio.run(probe(sock, device, description))
    _, writable = expected_rule(description["registers"], TENANT, REGIONS)
    changed = {a for a in device.words if device.words[a] != before.get(a)}
    wrong += [f"{a:#x} changed outside the tenant's blocks" for a in changed - writable]
    return wrong, server


def test_a_tenant_reaches_only_its_own(tmp_path, description):
    wrong, server = run_probe(tmp_path, description)
    assert wrong == []
    assert server.access.denials["tenant"] > 1000


def test_the_property_bites(tmp_path, description, monkeypatch):
    """With the check taken off region 2's blocks (the scope grants them too), the probe finds
    the tenant reading and writing them, and nothing else."""
    prefixes = access.region_prefixes
    monkeypatch.setattr(access, "region_prefixes", lambda regions: prefixes([*regions, 2]))
    wrong, _ = run_probe(tmp_path, description)
    spans = [(b["base"], b["base"] + b["size"], b["name"])
             for b in description["registers"]["blocks"]]
    hit = {name for w in wrong for base, end, name in spans
           if base <= int(w.split()[0 if "changed" in w else 1], 16) < end}
    assert any(w.startswith("read32") for w in wrong)
    assert any(w.startswith("write32") for w in wrong)
    assert any("changed outside" in w for w in wrong)
    assert hit == {name for _, _, name in spans if name.startswith("r2_")}


def _send(sock_path, payload):
    """Raw bytes on a fresh connection; the server's reply (or None)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(str(sock_path))
        s.sendall(payload)
        try:
            header = s.recv(4)
        except OSError:
            return None
        if len(header) < 4:
            return None
        (length,) = struct.unpack(">I", header)
        body = b""
        while len(body) < length:
            body += s.recv(length - len(body))
        return body.decode()


def test_protocol_faults_and_tokens(tmp_path, description):
    device = RecordingDevice(description["registers"])
    server = DeviceServer(device, description)
    sock = tmp_path / "device.sock"

    async def scenario():
        # No token: hello only.
        reader, writer = await asyncio.open_unix_connection(str(sock))
        bare = DeviceClient(reader, writer, str(sock))
        assert (await bare.hello(regmap=False))["protocol"] == 1
        with pytest.raises(DeviceError, match="^denied: 'read32' needs a token"):
            await bare.read_word(0)
        with pytest.raises(DeviceError, match="^denied: unknown or revoked token"):
            await bare.request("auth", token="0" * 64)
        await bare.close()
        # A tenant's token, revoked while its connection is open, and used again.
        async with await DeviceClient.connect(sock) as operator:
            assert operator.role == {"role": "operator"}
            token = (await operator.request("grant", tenant=2, regions=[2]))["token"]
            tenant = await DeviceClient.connect(sock, token=token)
            own = description_address("r2_", description)
            assert (await tenant.request("read32", address=own))["response"] == 0
            with pytest.raises(DeviceError, match="^denied: tenant 2 may not 'shutdown'"):
                await tenant.request("shutdown")
            with pytest.raises(DeviceError, match="^denied: tenant 2 may not 'grant'"):
                await tenant.request("grant", tenant=2, regions=[0, 1, 2, 3])
            assert (await operator.request("revoke", tenant=2)) == {"revoked": True}
            with pytest.raises(DeviceError, match="^denied: the token of tenant 2 was revoked"):
                await tenant.request("read32", address=own)
            await tenant.close()
            with pytest.raises(DeviceError, match="refused the token from the caller"):
                await DeviceClient.connect(sock, token=token)
            with pytest.raises(DeviceError, match="tenant must be an integer from 0 below 4"):
                await operator.request("grant", tenant=9, regions=[0])
            with pytest.raises(DeviceError, match="unknown op 'bogus'"):
                await operator.request("bogus")
            report = await operator.request("access")
            # Anonymous: the bare read, the unknown token, the revoked one on a new connection.
            assert report["denials"] == {"anonymous": 3, "tenant": 3}
            return report

    with serving_in_thread(server, sock):
        # Owner-only socket and token file; the operator's token is the one in the file.
        assert stat.S_IMODE(sock.stat().st_mode) & 0o077 == 0
        path = token_file(f"unix:{sock}")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.read_text().strip() == server.access.operator.token
        asyncio.run(scenario())
        # Malformed and oversized messages: an error reply, the connection closed.
        assert "not JSON" in _send(sock, struct.pack(">I", 3) + b"{x}")
        assert "must be a JSON object" in _send(sock, struct.pack(">I", 2) + b"[]")
        assert "longer than" in _send(sock, struct.pack(">I", MAX_MESSAGE + 1))
        # Many connections opened and dropped, some half-way through a message.
        fds = len(os.listdir("/proc/self/fd"))
        for k in range(200):
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(str(sock))
                if k % 2:
                    s.sendall(struct.pack(">I", 100) + b"{")
        async def still_serving():
            async with await DeviceClient.connect(sock) as operator:
                for _ in range(400):    # up to 20 s on a loaded machine
                    if len(server._connections) <= 1:
                        break
                    await asyncio.sleep(0.05)
                return await operator.cycle(), len(server._connections)
        cycle, open_connections = asyncio.run(still_serving())
        assert cycle == 0 and open_connections == 1
        assert len(os.listdir("/proc/self/fd")) <= fds + 2
    assert not path.exists() and not sock.exists()
    assert device.calls == [("read", description_address("r2_", description))]


def description_address(prefix, description):
    return next(b["base"] for b in description["registers"]["blocks"]
                if b["name"].startswith(prefix))


def test_tokens_are_compared_against_every_grant(description):
    control = AccessControl(description, operator_token="a" * 64)
    granted = control.grant(3, [4, 5])
    assert control.authenticate("a" * 64) is control.operator
    assert control.authenticate(granted.token) is granted
    assert control.authenticate("a" * 63) is None and control.authenticate(None) is None
    again = control.grant(3, [4])
    assert granted.revoked and control.authenticate(granted.token) is None
    assert again.scope.blocks == tuple(b["name"] for b in description["registers"]["blocks"]
                                       if b["name"].startswith("r4_"))


def test_a_tenant_sends_only_its_own_keys(tmp_path, description):
    """Frames tagged with the tenant's key reach the device; one with another key, or none,
    refuses the whole request (a batch too), and nothing of it is pushed."""
    from supernic.sim.nic.nic_model import tag_frame
    from supernic.sim.parser_model import ParserModel
    from supernic.sim.traffic import random_packets
    parser = ParserModel(256)
    frames = [f for _, f in random_packets(60, seed=3, malformed_fraction=0)
              if not parser.parse(f)["tenant_kind"]][:6]
    mine = [tag_frame(f, parser.parse(f), KEY) for f in frames[:3]]
    theirs = tag_frame(frames[3], parser.parse(frames[3]), KEY + 1)
    device = RecordingDevice(description["registers"])
    server = DeviceServer(device, description, read_key=tenant_key_reader(description["config"]))
    sock = tmp_path / "device.sock"

    async def scenario():
        async with await DeviceClient.connect(sock) as operator:
            token = (await operator.request("grant", tenant=TENANT, regions=REGIONS,
                                            keys=[KEY]))["token"]
        async with await DeviceClient.connect(sock, token=token) as tenant:
            await tenant.request("push", port=0, frame=mine[0].hex())
            await tenant.push_batch([(1, f, 0) for f in mine[1:]])
            for bad in ([mine[0], theirs], [frames[4]]):
                with pytest.raises(DeviceError, match=f"^denied: tenant {TENANT} may send only "
                                                      f"frames with its own keys \\({KEY}\\)"):
                    await tenant.push_batch([(0, f, 0) for f in bad])
            return (await tenant.request("access"))["denials"]

    with serving_in_thread(server, sock):
        denials = asyncio.run(scenario())
    assert denials == 2
    assert [c for c in device.calls if c[0] == "push"] == \
        [("push", (0, mine[0], 0))] + [("push", (1, f, 0)) for f in mine[1:]]


def test_the_same_rules_on_a_board(tmp_path, description):
    """A board's BAR (a plain file standing in) served by `snic device serve --mmap`: the
    operator reads and writes anything, a tenant its own blocks only, and the file changes
    only where it was allowed to; traffic ops say the board has none."""
    import json
    import subprocess
    import sys
    from test_server import _image, _write_file
    bar, regmap = tmp_path / "resource0", tmp_path / "design.json"
    _write_file(bar, _image(description))
    regmap.write_text(json.dumps(description))
    sock = tmp_path / "board.sock"
    proc = subprocess.Popen([sys.executable, "-m", "supernic.driver.cli", "device", "serve",
                             "--mmap", bar, "--regmap", regmap, "--socket", sock],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving nic_test") and token_file(f"unix:{sock}").exists()
        blocks = {b["name"]: b for b in description["registers"]["blocks"]}
        mine, theirs = blocks["r1_web_firewall"], blocks["r0_web_firewall"]
        before = bar.read_bytes()

        async def scenario():
            async with await DeviceClient.connect(sock) as operator:
                assert (await operator.hello())["ports"] == 0
                token = (await operator.request("grant", tenant=TENANT, regions=[1]))["token"]
                with pytest.raises(DeviceError, match="Ethernet ports"):
                    await operator.request("run", cycles=10)
            async with await DeviceClient.connect(sock, token=token) as tenant:
                assert (await tenant.request("read32", address=mine["base"]))["value"] == \
                    mine["type"]
                await tenant.request("write32", address=mine["base"] + 0x20, value=0xA5A5)
                for op in ("read32", "write32"):
                    with pytest.raises(DeviceError, match="^denied: Tenant 1 may not"):
                        await tenant.request(op, address=theirs["base"] + 0x20, value=1)
            async with await DeviceClient.connect(sock) as operator:
                await operator.request("shutdown")

        asyncio.run(scenario())
        assert proc.wait(30) == 0
    finally:
        proc.kill()
    after = bar.read_bytes()
    changed = [a for a in range(0, len(after), 4) if after[a:a + 4] != before[a:a + 4]]
    assert changed == [mine["base"] + 0x20]
