"""`snic rack serve` and the commands that drive a served rack (sim/rack/serve.py,
sw/driver/rack_client.py): the test rack (tests/data/rack_test.toml, three sNICs) served on a
Unix socket, its sNICs in the server's process (--local: the Ray path is test_rack.py's).

The claims tried here: nothing runs before a deploy (a traffic request is refused in one
line); a bad request (an unknown sNIC or tenant, a bad flow) is one line, exit 2, and leaves the
rack as it was; a tenant's traffic is served where it was deployed and, after `snic rack
migrate`, where it moved, with the rack-wide account balanced each time; `status` counts every
packet of every traffic request; a tenant's token (written by the deploy) sends its own flows
and reads its own status only; a connection without a token may only say hello; `stop` ends the
server and removes its socket and the tokens.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from supernic.driver import rack_client
from supernic.driver.cli import main

RACK = Path(__file__).parent / "data" / "rack_test.toml"


@pytest.fixture
def served(tmp_path):
    sock = tmp_path / "rack.sock"
    server = subprocess.Popen(
        [sys.executable, "-m", "supernic.driver.cli", "rack", "serve", str(RACK), "--local",
         "--socket", str(sock)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = server.stdout.readline()     # the first build of the test sNIC takes minutes
    assert line.startswith("serving rack rack_test on unix:"), (line, server.stderr.read())
    try:
        yield sock, server
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=60)


def _snic(capsys, *args):
    code = main(["rack", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_error(capsys, message, *args):
    code, out, err = _snic(capsys, *args)
    assert code == 2 and message in err, (code, out, err)
    assert len(err.strip().splitlines()) == 1, err


def test_a_served_rack_deploys_runs_and_moves_tenants(served, capsys, monkeypatch):
    sock, server = served
    where = ["--socket", sock]
    # Nothing deployed: a status lists the tenants as such; traffic is refused.
    code, out, _ = _snic(capsys, "status", *where, "--json")
    status = json.loads(out)
    assert code == 0 and set(status["tenants"]) == {"alice", "bob", "carol"}
    assert all(not t["instances"] for t in status["tenants"].values())
    assert status["account"]["sent"] == 0 and status["account"]["balanced"]
    _one_line_error(capsys, "runs no tenant yet", "traffic", *where)
    _one_line_error(capsys, "has no NIC 'nic9'", "deploy", "alice", "--nic", "nic9", *where)
    _one_line_error(capsys, "give a tenant or --all", "deploy", *where)

    code, out, _ = _snic(capsys, "deploy", "--all", *where)
    assert code == 0 and "deployed alice on nic0" in out and "deployed bob on nic1" in out
    tokens = {name: sock.with_name(f"{sock.name}.{name}.token") for name in ("alice", "carol")}
    assert all(path.exists() and path.stat().st_mode & 0o777 == 0o600
               for path in tokens.values())
    _one_line_error(capsys, "already runs on nic0", "deploy", "alice", "--nic", "nic0", *where)
    _one_line_error(capsys, "no tenant 'zed'", "traffic", "--flow", "zed:rate=0.5", *where)
    _one_line_error(capsys, "give TENANT:SPEC", "traffic", "--flow", "rate=0.5", *where)

    flows = ["--flow", "alice:rate=0.8,size=128-1500", "--flow", "carol:rate=0.3,size=128-1500"]
    code, out, err = _snic(capsys, "traffic", *flows, "--cycles", 5000, "--json", *where)
    assert out, (code, err)
    first = json.loads(out)
    assert code == 0 and first["account"]["balanced"], first["account"]
    assert set(first["tenants"]) == {"alice", "carol"}
    assert first["tenants"]["alice"]["delivered"] > 0
    assert set(first["tenants"]["alice"]["served_by"]) == {"nic0"}
    assert set(first["tenants"]["carol"]["served_by"]) == {"nic2"}

    code, out, _ = _snic(capsys, "migrate", "alice", "--to", "nic1", *where)
    assert code == 0 and out.startswith("moved alice from nic0 to nic1"), out
    _one_line_error(capsys, "already runs on nic1", "migrate", "alice", "--to", "nic1", *where)

    code, out, _ = _snic(capsys, "traffic", "--flow", "alice:rate=0.8,size=128-1500",
                         "--cycles", 4000, "--json", *where)
    second = json.loads(out)
    assert code == 0 and second["account"]["balanced"], second["account"]
    assert set(second["tenants"]["alice"]["served_by"]) == {"nic1"}
    assert [i["nic"] for i in second["tenants"]["alice"]["instances"]] == ["nic1"]

    # The status counts both requests' packets; alice's region is now on nic1.
    code, out, _ = _snic(capsys, "status", *where, "--json")
    status = json.loads(out)
    sent = sum(r["tenants"][t]["sent"] for r in (first, second) for t in r["tenants"])
    assert status["account"]["sent"] == sent and status["account"]["balanced"]
    assert status["tenants"]["alice"]["sent"] == (first["tenants"]["alice"]["sent"]
                                                 + second["tenants"]["alice"]["sent"])
    assert any(r["tenant"] == "alice" for r in status["nics"]["nic1"]["regions"])
    assert not any(r["tenant"] == "alice" for r in status["nics"]["nic0"]["regions"])
    code, out, _ = _snic(capsys, "status", *where)
    assert code == 0 and "balanced" in out and "alice" in out

    # A tenant's token: its own flows and its own part of the status, nothing else.
    monkeypatch.setenv("SNIC_TOKEN_FILE", str(tokens["carol"]))
    code, out, _ = _snic(capsys, "status", *where, "--json")
    mine = json.loads(out)
    assert code == 0 and set(mine["tenants"]) == {"carol"} and mine["nics"] == {}
    assert mine["tenants"]["carol"]["sent"] == status["tenants"]["carol"]["sent"]
    code, out, _ = _snic(capsys, "traffic", "--flow", "carol:rate=0.3,size=128-1500",
                         "--cycles", 2000, "--json", *where)
    assert code == 0 and set(json.loads(out)["tenants"]) == {"carol"}
    _one_line_error(capsys, "tenant carol may send its own flows only", "traffic", "--flow",
                    "alice:rate=0.3", *where)
    _one_line_error(capsys, "'migrate' is the operator's", "migrate", "carol", "--to", "nic0",
                    *where)
    _one_line_error(capsys, "'shutdown' is the operator's", "stop", *where)
    monkeypatch.delenv("SNIC_TOKEN_FILE")

    # Without a token only hello is answered.
    monkeypatch.setattr(rack_client, "read_token", lambda path: None)
    with rack_client.rack_connection(sock) as rack:
        assert rack.request("hello")["rack"] == "rack_test"
        with pytest.raises(rack_client.RackError, match="denied: 'status' needs a token"):
            rack.request("status")
        with pytest.raises(rack_client.RackError, match="denied: not a token of this rack"):
            rack.request("auth", token="0" * 64)
    monkeypatch.undo()

    code, out, _ = _snic(capsys, "stop", *where)
    assert code == 0 and server.wait(timeout=60) == 0
    deadline = time.monotonic() + 10
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not sock.exists() and not sock.with_name(sock.name + ".token").exists()
    assert not any(path.exists() for path in tokens.values())
    _one_line_error(capsys, "no rack is serving", "status", *where)
