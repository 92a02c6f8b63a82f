"""`snic build`, `snic lint` and configuration errors, from the user's side."""

import json
from pathlib import Path

import pytest

from supernic.driver.cli import main
from supernic.desc.config import ConfigError, DesignConfig, load_config
from supernic.hw.lint import lint
from supernic.sim.build import generated_design


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    cfg = out / "small.toml"
    cfg.write_text('[design]\nname = "nic64"\ndata_width = 64\n[parser]\nheader_bytes = 256\n')
    assert main(["build", "--config", str(cfg), "--out", str(out)]) == 0
    return out


def test_build_writes_verilog_and_register_map(built):
    verilog = (built / "nic64.v").read_text()
    assert "module nic64(" in verilog
    for port in ("s_axis__tdata", "m_axis__tuser", "s_axil__araddr"):
        assert port in verilog
    regmap = json.loads((built / "nic64.regmap.json").read_text())
    assert regmap["config"]["data_width"] == 64
    blocks = regmap["registers"]["blocks"]
    assert [b["name"] for b in blocks] == ["id", "parser"]
    assert blocks[0]["next"] == blocks[1]["base"] and blocks[1]["next"] == 0
    names = [r["name"] for r in blocks[1]["registers"]]
    assert names == ["packets", "bytes", "malformed"]


def test_generated_verilog_is_lint_clean(built):
    ok, report = lint(built / "nic64.v")
    assert ok, report


def test_lint_reports_real_problems(tmp_path):
    bad = tmp_path / "bad.v"
    bad.write_text("module bad(input a, output b); assign b = c; endmodule\n")
    ok, report = lint(bad)
    assert not ok and "lint failed" in report


@pytest.mark.parametrize("text,message", [
    ('[design]\ndata_width = 48\n', "design.data_width: Data width must be one of"),
    ('[design]\ndata_width = 32\n', "design.data_width must be at least 64, not 32"),
    ('[design]\nname = "1x"\n', "design.name must be a Verilog identifier, not '1x'"),
    ('[parser]\nheader_bytes = 100\n', "parser.header_bytes must be a multiple of 64"),
    ('[parser]\nwalk_steps = 0\n', "parser.walk_steps must be an integer from 1 to 32, not 0"),
    ('[parser]\next_headers = 16\n',
     "parser.ext_headers must be an integer from 0 to 15, not 16"),
    ('[parser]\ncolour = 1\n', "unknown key parser.colour"),
    ('[nic]\nregions = [["web"]]\nstall_cycles = -1\n',
     "nic.stall_cycles must be an integer from 0 to 16777216, not -1"),
    ('[design]\ndata_width = 64\n[nic]\nregions = [["web"]]\nregion_fifo_beats = 16\n',
     "nic.region_fifo_beats (16) must hold a header-only chain's 32 header beats"),
    ('[tenants]\n', "unknown section [tenants]"),
    ('[design\n', "not valid TOML"),
])
def test_config_errors(tmp_path, text, message):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert message in str(e.value)


def test_cli_config_error_exit_code(tmp_path, capsys):
    path = tmp_path / "c.toml"
    path.write_text('[design]\ndata_width = 7\n')
    assert main(["build", "--config", str(path), "--out", str(tmp_path)]) == 2
    assert "data_width" in capsys.readouterr().err
    assert main(["build", "--config", str(tmp_path / "missing.toml"), "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    # A directory or a binary file: one line each, no traceback.
    binary = tmp_path / "c.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    for bad, message in ((tmp_path, "cannot be read"), (binary, "not a text file")):
        assert main(["build", "--config", str(bad), "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_traffic_and_stats_say_what_is_missing(tmp_path, capsys):
    """``snic traffic`` with neither flows nor a pcap asks for one (it used to say "not both");
    ``snic stats`` on a missing record says it does not exist, in one line, exit 2."""
    assert main(["traffic"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("(--replay FILE)") and "not both" not in err, err
    assert main(["traffic", "--flow", "tenant=1", "--replay", str(tmp_path / "x.pcap")]) == 2
    assert capsys.readouterr().err.strip().endswith("not both")
    assert main(["stats", str(tmp_path / "none.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.json does not exist" in err[0], err


def test_bench_lists_and_rejects(capsys):
    assert main(["bench"]) == 0
    assert "parser" in capsys.readouterr().out
    assert main(["bench", "nosuch"]) == 2


def test_build_bench_times_a_first_build_in_an_empty_cache(capsys, tmp_path, monkeypatch):
    # The user's cache already holds this design: the bench must not use it (a first build is
    # measured in an empty one) nor add to it.
    cache = tmp_path / "cache"
    monkeypatch.setenv("SNIC_CACHE", str(cache))
    config = tmp_path / "parser64.toml"
    config.write_text("[design]\nname = \"bench_build\"\ndata_width = 64\n")
    generated_design(load_config(config), progress=lambda message: None)
    before = sorted(p.relative_to(cache) for p in (cache / "gen").rglob("*"))
    assert main(["bench", "build", "--json", "--config", str(config)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["benchmark"] == "build"
    first, warm = result["first"], result["warm"]
    # A parser has no transformed NT: no analyses; everything else is built, then found.
    assert first["analyses_s"] == 0 and first["convert_s"] > 0
    assert first["simulator_s"] > 1 and first["device_library_s"] > 1
    assert result["demo_first_build_s"] == pytest.approx(
        first["generate_s"] + first["simulator_s"], abs=0.11)
    assert result["demo_first_build_s"] > 10 * result["demo_warm_build_s"]
    assert result["device_serve_first_build_s"] > 10 * result["device_serve_warm_build_s"]
    assert warm["analyses_s"] == 0 and warm["simulator_s"] < first["simulator_s"] / 10
    assert sorted(p.relative_to(cache) for p in (cache / "gen").rglob("*")) == before
    assert not (cache / "sim").exists() and not (cache / "vdev").exists()


def test_build_id_tracks_configuration():
    a, b = DesignConfig(), DesignConfig(data_width=64)
    assert a.build_id != b.build_id and a.build_id == DesignConfig().build_id


@pytest.mark.parametrize("name", ["harness", "parser", "device"])
def test_bench_prints_one_json_object(name, capsys, tmp_path):
    args = ["bench", name, "--json", "--quick"]
    if name == "device":
        # A design that is not a NIC: the chain part only (the NIC parts build the 512-bit
        # default NIC twice, minutes each; `snic bench device` runs them).
        parser_only = tmp_path / "parser64.toml"
        parser_only.write_text("[design]\ndata_width = 64\n")
        args += ["--config", str(parser_only)]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["benchmark"] == name
    if name == "harness":
        assert result["lean_cycles"] == result["stock_cycles"] > 0
    elif name == "device":
        # Both rates measured in the run, and the ratio is theirs.
        chain = result["chain"]
        assert chain["device_cycles_per_s"] > 0 and chain["cocotb_cycles_per_s"] > 0
        assert chain["speedup"] == pytest.approx(
            chain["device_cycles_per_s"] / chain["cocotb_cycles_per_s"], rel=0.01)
        assert chain["delivered"] > 0 and "nic" not in result
    else:
        for width in ("64", "512"):
            for size in ("64B", "1500B"):
                row = result["widths"][width][size]
                assert row["baseline_beats_per_cycle"] > 0.99
                assert row["ratio_to_baseline"] == pytest.approx(
                    row["beats_per_cycle"] / row["baseline_beats_per_cycle"], abs=1e-3)


def test_nt_bench_reports_one_nt_and_one_chain(capsys):
    # monitoring: the chain tests build it at both widths already (CI's time goes to builds);
    # vlan_pop: the smallest NT (the NT tests' 64-bit builds are transformed, this one is not).
    assert main(["bench", "nt", "--json", "--quick", "--only", "vlan_pop,monitoring"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result["nts"]) == ["vlan_pop"] and list(result["chains"]) == ["monitoring"]
    for width in ("64", "512"):
        for size in ("64B", "1500B"):
            row = result["nts"]["vlan_pop"][width][size]
            assert row["out_beats_per_cycle"] > 0.99 and row["latency_cycles"] > 0
            chain = result["chains"]["monitoring"][width][size]
            assert chain["in_beats_per_cycle"] > 0 and chain["delivered"] > 0
    assert main(["bench", "nt", "--only", "vlan_pop,nosuch"]) == 2
    assert "unknown NT or chain 'nosuch'" in capsys.readouterr().err


def test_build_emits_named_chains(tmp_path, capsys):
    chain = tmp_path / "dag.toml"
    chain.write_text((Path(__file__).parent / "chains" / "acl_dag.toml").read_text())
    config = tmp_path / "nic.toml"
    config.write_text('[design]\nname = "nic"\ndata_width = 64\n[chains]\nspecs = ["dag.toml"]\n')
    assert main(["build", "--config", str(config), "--out", str(tmp_path / "out")]) == 0
    verilog = (tmp_path / "out" / "nic_acl_dag.v").read_text()
    assert "module nic_acl_dag(" in verilog
    regmap = json.loads((tmp_path / "out" / "nic_acl_dag.regmap.json").read_text())
    names = [b["name"] for b in regmap["registers"]["blocks"]]
    assert names == ["id", "parser", "chain", "edge", "ports", "hosts", "audit"]
    assert [n["nt"] for n in regmap["tenant"]["nodes"]] == ["acl"] * 4


def test_build_rejects_a_bad_chain(tmp_path, capsys):
    (tmp_path / "bad.toml").write_text(
        '[tenant]\nname = "bad"\n[[nodes]]\nname = "a"\nnt = "firewall"\n')
    config = tmp_path / "nic.toml"
    config.write_text('[chains]\nspecs = ["bad.toml"]\n')
    assert main(["build", "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"snic: error: {tmp_path / 'bad.toml'}: node 'a': unknown NT "
                          f"'firewall' (known: ")
    assert not (tmp_path / "out").exists()
    config.write_text('[chains]\nspecs = ["missing"]\n')
    assert main(["build", "--config", str(config), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.startswith(
        "snic: error: chain 'missing' is neither a file nor a shipped chain (shipped: ")


NIC_TEST = Path(__file__).parent / "data" / "nic_test.toml"


def test_build_writes_the_nic_and_its_personalities(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["build", "--config", str(NIC_TEST), "--out", str(out)]) == 0
    verilog = (out / "nic_test.v").read_text()
    for port in ("s_axis0__tdata", "s_axis1__tdata", "m_axis__tuser", "s_axil__araddr"):
        assert port in verilog
    design = json.loads((out / "nic_test.regmap.json").read_text())
    names = [b["name"] for b in design["registers"]["blocks"]]
    assert names[:8] == ["id", "nic", "parser0", "classifier0", "parser1", "classifier1",
                         "scheduler", "store"]
    assert "region4" in names and "r1_secure_cipher" in names
    assert [[p["name"] for p in r] for r in design["regions"]] == [
        ["web"], ["web", "secure"], ["secure"], ["metered"], ["monitoring"], ["metered"]]
    # One stand-alone module per personality, behind the region interface (i, o, and each
    # NT's register port), for a vendor partial-reconfiguration flow.
    for chain in ("web", "secure", "metered", "monitoring"):
        text = (out / f"nic_test_personality_{chain}.v").read_text()
        assert f"module nic_test_personality_{chain}(" in text and "i__payload" in text
    # The metered regions are under the state-yielding transform (nic.yieldable = [3, 5]):
    # the personality has the state port, and a map of its words named as in that Verilog.
    text = (out / "nic_test_personality_metered.v").read_text()
    assert "yld__stop" in text and "yld__rdata" in text
    smap = json.loads((out / "nic_test_personality_metered.statemap.json").read_text())
    assert smap["words"] > 0 and all(item["rtl"] for item in smap["items"])
    assert list(design["state_maps"]) == ["region3", "region5"]
    for region in ("region3", "region5"):
        assert design["state_maps"][region]["metered"]["words"] == smap["words"]
    assert "yld__stop" not in (out / "nic_test_personality_web.v").read_text()
    printed = capsys.readouterr().out
    assert "region personality" in printed and "state map of" in printed


def test_demo_runs_the_nic_and_checks_the_model(capsys):
    assert main(["demo", "--config", str(NIC_TEST), "--packets", "400"]) == 0
    out = capsys.readouterr().out
    assert "mismatches with the model: 0" in out and "OK" in out
    for chain in ("web", "secure", "metered", "monitoring"):
        assert chain in out


@pytest.mark.parametrize("text,message", [
    ('[tenant]\nname = "bad"\n[[nodes]]\nname = "a"\nnt = "firewall"\n', "unknown NT 'firewall'"),
    ('[tenant\n', "not valid TOML"),
    (None, "does not exist"),
])
def test_deploy_reads_the_spec_before_it_asks_for_a_device(tmp_path, capsys, text, message):
    """A broken chain file is the error, even with no device running (exit 2, one line)."""
    spec = tmp_path / "chain.toml"
    if text is not None:
        spec.write_text(text)
    nowhere = ["--socket", str(tmp_path / "no-device.sock"), "--state", str(tmp_path / "s.json")]
    assert main(["deploy", str(spec), "--tenant", "0", *nowhere]) == 2
    err = capsys.readouterr().err
    assert err.startswith("snic: error: ") and str(spec) in err and message in err
    assert err.count("\n") == 1
    # The same call with a good spec gets as far as the device, and says that it is missing.
    good = Path(__file__).parents[1] / "chains" / "web.toml"
    assert main(["deploy", str(good), "--tenant", "0", *nowhere]) == 2
    err = capsys.readouterr().err
    assert str(spec) not in err and "device" in err


# Every error the CLI reports is a SnicError carrying its exit code, caught once, in main():
# 2 refused before anything changed (bad usage, configuration or request, no device), 1 failed
# on the device. (module, class, constructor arguments, the exit code it must give)
SNIC_ERRORS = [
    ("supernic.desc.config", "ConfigError", ("bad configuration",), 2),
    ("supernic.driver.client", "DeviceUnavailable", ("no device is serving on x",), 2),
    ("supernic.driver.client", "DeviceError", ("the device failed",), 1),
    ("supernic.driver.transport", "RegisterAccessError", (0x40, 0b10), 1),
    ("supernic.driver.discovery", "UnsupportedDesignError", ("design not supported: v9",), 2),
    ("supernic.driver.control", "DeployRefused", ("tenant 3 is not deployed",), 2),
    ("supernic.driver.control", "DeployFailed", ("rolled back",), 1),
    ("supernic.driver.control", "ControlTimeout", ("timed out",), 1),
    ("supernic.driver.state", "StateError", ("region 3 is running",), 2),
    ("supernic.sim.nt.base", "StateBridgeError", ("no mapping",), 2),
]


def _error_class(module, name):
    import importlib
    from supernic.desc.errors import SnicError
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, SnicError)
    return cls


@pytest.mark.parametrize("command", [["status"], ["undeploy", "--tenant", "1"]])
@pytest.mark.parametrize("module,name,arguments,code", SNIC_ERRORS,
                         ids=[e[1] for e in SNIC_ERRORS])
def test_one_catch_gives_each_error_its_exit_code(monkeypatch, capsys, tmp_path, command,
                                                  module, name, arguments, code):
    """An error raised deep inside a command (here: connecting to the device) reaches main(),
    which prints it as one line and returns the class's exit code: no command maps it."""
    from supernic.driver.client import DeviceClient
    cls = _error_class(module, name)
    error = cls(*arguments)

    async def connect(*args, **kwargs):
        raise error
    monkeypatch.setattr(DeviceClient, "connect", connect)
    assert main([*command, "--socket", str(tmp_path / "dev.sock")]) == cls.exit_code == code
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [f"snic: error: {error}"]
    assert captured.out == ""


@pytest.mark.parametrize("module,name,arguments,code", SNIC_ERRORS,
                         ids=[e[1] for e in SNIC_ERRORS])
def test_main_catches_what_a_command_raises(monkeypatch, capsys, module, name, arguments, code):
    import supernic.driver.cli as cli
    cls = _error_class(module, name)

    def status(args):
        raise cls(*arguments)
    monkeypatch.setattr(cli, "cmd_status", status)
    assert main(["status"]) == code
    err = capsys.readouterr().err
    assert err.count("snic: error:") == 1 and err.count("\n") == 1


def test_a_bug_is_not_swallowed(monkeypatch, capsys):
    """Only SnicErrors become a message: any other exception is a bug and keeps its traceback."""
    import supernic.driver.cli as cli

    def status(args):
        raise RuntimeError("a bug")
    monkeypatch.setattr(cli, "cmd_status", status)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["status"])
    assert "snic: error:" not in capsys.readouterr().err
