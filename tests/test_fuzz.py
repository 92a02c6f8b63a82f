"""The fuzz campaign (``snic fuzz``, ``snic bench fuzz``): a short run in CI, and proof that it
bites.

20,000 random and mutated frames through the 64-bit parser on the virtual device and the
model: no mismatch, no hang, the parser's counters balance, and the run reaches every
mutation, every flag and every walk state the reach analysis allows. A model that is wrong in
one corner (the extension-header limit off by one) is caught, saved as a pcap and replayed by
the printed command; a sink that never drains is reported as a hang, not waited on. Through
the test NIC with four tenants, mutated traffic is delivered or counted, frame for frame.
"""

import json
from pathlib import Path


from supernic.driver.cli import main as snic
from supernic.desc.config import DesignConfig, load_config
from supernic.sim.fuzz import MUTATIONS, fuzz_frame, fuzz_frames
from supernic.sim.parser_model import ParserModel
from supernic.tools import fuzz
from supernic.tools.fuzz import run_campaign
from supernic.tools.fuzz_nic import nic_campaign

PARSER_64 = DesignConfig(data_width=64)   # the configuration test_vdev builds
NIC_TEST = Path(__file__).resolve().parent / "data" / "nic_test.toml"


def test_campaign_agrees_and_covers(tmp_path):
    result = run_campaign(PARSER_64, 20_000, seed=3, out_dir=tmp_path)
    assert result["problems"] == []
    assert result["mismatches"] == result["hangs"] == result["lost"] == 0
    assert result["delivered"] == result["frames"] == 20_000
    assert result["balanced"] and result["counted"]["malformed"] == result["model_errors"] > 0
    cover = result["coverage"]
    assert set(cover["mutations"]) == set(MUTATIONS)
    assert cover["flags_never_set"] == []
    assert cover["walk_states_hit"] == cover["walk_states_reachable"], \
        cover["walk_states_missed"]
    assert cover["unreachable_states_hit"] == []


def test_campaign_with_header_checksums(tmp_path):
    """``[parser] header_checksum = true``: the gateware's IPv4 checksum (a 30-word adder,
    options included) agrees with the model on mutated traffic, and the campaign reaches it:
    many frames are malformed only because of their checksum."""
    config = DesignConfig(data_width=64, header_checksum=True)
    result = run_campaign(config, 4000, seed=4, out_dir=tmp_path)
    assert result["problems"] == []
    assert result["mismatches"] == result["hangs"] == result["lost"] == 0
    assert result["balanced"] and result["counted"]["malformed"] == result["model_errors"]
    on, off = ParserModel.of(config), ParserModel()
    only = [f for _, f in fuzz_frames(4, 0, 4000, on)
            if on.parse(f)["flags"]["malformed"] and not off.parse(f)["flags"]["malformed"]]
    # with options too: a header longer than 20 bytes among them
    assert len(only) > 100 and any(len(f) > 34 and f[12:14] == b"\x08\x00" and f[14] & 15 > 5
                                   for f in only)


class OffByOneModel(ParserModel):
    """Walks one IPv6 extension header more than the gateware before ``too_deep``."""

    def __init__(self, header_bytes, walk_steps, ext_headers, *rest):
        super().__init__(header_bytes, walk_steps, ext_headers + 1, *rest)


def test_a_wrong_model_is_caught_and_replayed(tmp_path, capsys):
    result = run_campaign(PARSER_64, 4000, seed=5, workers=0, out_dir=tmp_path,
                          model_class=OffByOneModel)
    assert result["mismatches"] > 0 and result["hangs"] == 0
    # Only frames with a long extension chain differ (too_deep, or a walk one header deeper).
    assert {s["mutation"] for s in result["saved"]} == {"ext_chain"}, result["problems"][:3]
    assert sum("too_deep" in line for line in result["problems"]) > result["mismatches"] / 2
    saved = result["saved"][0]
    assert saved["what"] == "mismatch" and Path(saved["pcap"]).is_file()
    assert saved["replay"] == f"snic fuzz --pcap {saved['pcap']}"
    # The saved frame alone reproduces the mismatch with the wrong model; the right model
    # agrees with the gateware on it (the command the campaign prints exits 0).
    again = run_campaign(PARSER_64, 0, pcap=saved["pcap"], workers=0,
                         out_dir=tmp_path / "again", model_class=OffByOneModel)
    assert again["frames"] == 1 and again["mismatches"] == 1
    assert snic(saved["replay"].split()[1:] + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mismatches"] == 0


def test_a_sink_that_never_drains_is_a_hang(tmp_path, monkeypatch):
    monkeypatch.setattr(fuzz, "PATTERNS", ((0.0, 0.99),))
    monkeypatch.setattr(fuzz, "CYCLES_PER_BEAT_CAP", 1)
    result = run_campaign(PARSER_64, 500, seed=1, workers=0, out_dir=tmp_path)
    assert result["hangs"] == 1 and not result["balanced"]
    assert result["delivered"] < 500
    assert result["saved"][0]["what"] == "hang"
    assert result["saved"][0]["frame"] == result["delivered"]


def test_a_frame_is_the_same_drawn_alone():
    model = ParserModel()
    batch = fuzz_frames(9, 100, 50, model)
    assert [fuzz_frame(9, 100 + i, model) for i in range(50)] == batch
    assert fuzz_frames(10, 100, 50, model) != batch


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert snic(["fuzz", "--pcap", str(tmp_path / "missing.pcap")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"snic: error: no such pcap: {tmp_path / 'missing.pcap'}"]
    assert snic(["fuzz", "--frames", "0"]) == 2


def test_nic_campaign_delivers_or_counts_every_frame():
    result = nic_campaign(load_config(NIC_TEST), 3000, seed=2, progress=lambda *a: None)
    assert result["hangs"] == 0 and result["tenants"] == 4
    assert result["frames"] == result["parser_packets"] == 3000
    assert result["balanced"], result
    counted = result["counted"]
    assert result["delivered"] + sum(counted.values()) == 3000
    # Mutated keys miss the classifier, and broken headers reach the parser's count.
    assert counted["unmatched"] > 0 and result["parser_malformed"] > 0
    assert result["delivered"] > 1000
