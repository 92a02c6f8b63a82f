"""Rate limiter: token-bucket arithmetic, packet length, classes and ECN marking in the model
(marking checked against scapy), configuration errors, the scrubber's forced slot in Amaranth's
simulator and the seeds of the hardware test. The hardware against the model at 64 and 512 bits
(10,000 packets each, random idle and backpressure, timestamps that wrap mid-run) and saturation
at 64 and 1500 bytes are in tests/test_nt_contract.py."""

import asyncio
import random

import pytest
from amaranth.sim import Simulator
from scapy.all import ARP, IP, UDP, VXLAN, Dot1Q, Ether, IPv6, Raw

from supernic.desc.nt.rate_limiter import (
    RATE_FRACTION_BITS, Action, Bucket, ClassKind, RateLimiterConfig, TrafficClass)
from supernic.hw.nt.rate_limiter import RateLimiter
from supernic.hw.nt.task import ConfigError
from supernic.hw.parser.meta import meta_layout
from supernic.sim.layout_codec import decode, encode
from supernic.sim.nt.base import exact_size_frames
from supernic.sim.nt.rate_limiter import RateLimiterModel, mark_ce
from supernic.sim.parser_model import ParserModel

PARAMS = RateLimiter.check_params({})
ONE = 2 ** RATE_FRACTION_BITS      # a rate of one byte per cycle


def _pad(packet):
    frame = bytes(packet)
    return frame + bytes(max(0, 60 - len(frame)))


def _model(buckets, classes=(), unmatched=0, params=PARAMS):
    model = RateLimiterModel(params)
    model.configure(RateLimiterConfig(list(buckets), list(classes), unmatched))
    return model


def _meta(frame, ts=0):
    meta = ParserModel().parse(frame)
    meta["ts"] = ts
    return meta


# --- token bucket -------------------------------------------------------------------------------

def test_bucket_refills_caps_and_charges():
    model = _model([Bucket(ONE, 1000)])                # 1 byte a cycle, 1000-byte burst
    assert model.meter(0, 0, 1000)                     # starts full
    assert not model.meter(0, 10, 60)                  # 10 tokens
    assert model.tokens[0] == 10 * ONE                 # an exceeding packet takes nothing
    assert model.meter(0, 60, 60)                      # 10 + 50 >= 60
    assert model.tokens[0] == 0
    assert model.meter(0, 10_000, 1000)                # capped at the burst, not 9940
    assert not model.meter(0, 10_000, 1)
    assert model.counts[0] == {"conformed_packets": 3, "conformed_bytes": 2060,
                               "exceeded_packets": 2, "exceeded_bytes": 61}


def test_fractional_rate_far_below_one_byte_a_cycle():
    model = _model([Bucket(1, 60)])                    # 1/65536 byte a cycle
    assert model.meter(0, 5, 60)
    assert not model.meter(0, 5 + 60 * ONE - 1, 60)    # one cycle short of 60 bytes
    assert model.meter(0, 5 + 60 * ONE, 60)            # the refill counts from the last packet


@pytest.mark.parametrize("start", [0, 2 ** 32 - 3000])
def test_timestamp_wrap_changes_nothing(start):
    rng = random.Random(4)
    steps = [(rng.randint(1, 400), rng.choice([60, 200, 1500])) for _ in range(200)]

    def decisions(t0):
        model, ts, out = _model([Bucket(ONE // 2, 3000)]), t0, []
        for gap, length in steps:
            ts = (ts + gap) % 2 ** 32
            out.append(model.meter(0, ts, length))
        return out, model.tokens[0]
    assert decisions(start) == decisions(12345)
    assert decisions(start)[0].count(False) > 20       # the rate binds


def test_conformed_bytes_never_exceed_burst_plus_rate_times_time():
    """The bound a token bucket enforces (the (rate, burst) arrival curve): from a full start,
    conformed bytes <= burst + rate * elapsed time; with a load above the rate the bound is
    nearly met."""
    rng = random.Random(9)
    rate, burst = int(0.3 * ONE), 4000
    model, ts, conformed, t0 = _model([Bucket(rate, burst)]), 0, 0, 0
    for k in range(5000):
        ts += rng.randint(1, 400)
        if k == 0:
            t0 = ts
        length = rng.choice([60, 100, 576, 1500])
        conformed += length * model.meter(0, ts, length)
    bound = burst + rate * (ts - t0) / ONE
    assert bound - 1500 <= conformed <= bound


def test_refill_composes_so_scrubbing_is_invisible():
    """min(B, min(B, T + r*a) + r*b) == min(B, T + r*(a + b)): advancing a bucket at any time
    between its packets (the hardware's scrubber) leaves the same tokens."""
    rng = random.Random(1)
    for _ in range(20_000):
        burst = rng.randrange(1, 2 ** 40)
        tokens, rate = rng.randrange(burst + 1), rng.randrange(2 ** 24)
        a, b = rng.randrange(2 ** 31), rng.randrange(2 ** 31)
        assert min(burst, min(burst, tokens + rate * a) + rate * b) == min(
            burst, tokens + rate * (a + b))


# --- packet length ------------------------------------------------------------------------------

@pytest.mark.parametrize("packet, trailing, length", [
    (Ether() / IP() / UDP() / Raw(b"x" * 4), 0, 60),                   # padded: the floor
    (Ether() / IP() / UDP() / Raw(b"x" * 958), 0, 1000),
    (Ether() / IP() / UDP() / Raw(b"x" * 958), 20, 1000),              # trailing bytes: IP length
    (Ether() / Dot1Q(vlan=5) / IP() / UDP() / Raw(b"x" * 958), 0, 1004),
    (Ether() / IPv6() / UDP() / Raw(b"x" * 300), 0, 362),
    (Ether() / IP() / UDP(dport=4789) / VXLAN(vni=9) / Ether() / IP() / UDP() / Raw(b"x" * 100),
     0, 192),
    (Ether() / ARP(), 0, 60),                                           # non-IP: the floor
])
def test_packet_length_is_ip_length_with_a_floor(packet, trailing, length):
    frame = _pad(packet) + bytes(trailing)
    model = _model([Bucket(0, 10_000)])
    out = model.process(frame, _meta(frame))
    assert out[0] == frame and out[1]["drop"] == 0
    assert model.counts[0]["conformed_bytes"] == length


# --- classes ------------------------------------------------------------------------------------

def test_classes_match_tenant_and_port_lowest_slot_first():
    frames = {
        "vxlan": _pad(Ether() / IP() / UDP(dport=4789) / VXLAN(vni=7) / Ether() / IP()
                      / UDP(dport=80)),
        "vlan": _pad(Ether() / Dot1Q(vlan=100) / IP() / UDP(dport=80)),
        "vlan_other_port": _pad(Ether() / Dot1Q(vlan=100) / IP() / UDP(dport=81)),
        "port": _pad(Ether() / IP() / UDP(dport=80)),
        "arp": _pad(Ether() / ARP()),
        "vlan_as_vni": _pad(Ether() / Dot1Q(vlan=7) / IP() / UDP(dport=82)),
    }
    classes = [TrafficClass(ClassKind.VNI, 7, 1), TrafficClass(ClassKind.DPORT, 80, 2),
               TrafficClass(ClassKind.VLAN, 100, 0)]
    model = _model([Bucket(0, 10_000)] * 3, classes, None)
    want = {"vxlan": 1, "vlan": 2, "vlan_other_port": 0, "port": 2, "arp": None,
            "vlan_as_vni": None}
    for name, frame in frames.items():
        assert model.classify(_meta(frame)) == want[name], name
    for frame in frames.values():
        model.process(frame, _meta(frame))
    assert model.stats == {"packets": 6, "dropped": 0, "skipped": 2}   # unmatched pass
    model = _model([Bucket(0, 10_000)] * 3, classes, 1)
    assert model.classify(_meta(frames["arp"])) == 1


def test_port_zero_never_matches():
    frame = _pad(Ether() / IP(proto=1) / Raw(b"x" * 30))                # ICMP: no ports
    meta = _meta(frame)
    assert meta["flow"]["dport"] == 0
    model = _model([Bucket(0, 0)], [TrafficClass(ClassKind.DPORT, 1, 0)], None)
    assert model.classify(meta) is None


def test_errors_and_dropped_packets_are_skipped():
    frame = _pad(Ether() / IP() / UDP())
    model = _model([Bucket(0, 0)])                                      # everything exceeds
    meta = _meta(frame)
    meta["flags"]["malformed"] = 1
    assert model.process(frame, meta)[1]["drop"] == 0
    meta = _meta(frame)
    meta["drop"] = 1
    model.process(frame, meta)
    assert model.stats == {"packets": 2, "dropped": 0, "skipped": 2}
    assert model.counts[0]["exceeded_packets"] == 0


# --- actions and ECN ----------------------------------------------------------------------------

def test_drop_action_drops_and_counts():
    frame = _pad(Ether() / IP(tos=2) / UDP())
    model = _model([Bucket(0, 0, Action.DROP)])
    out, meta = model.process(frame, _meta(frame))
    assert out == frame and meta["drop"] == 1 and meta["mark"] == 0
    assert model.stats == {"packets": 1, "dropped": 1, "skipped": 0}


@pytest.mark.parametrize("ecn, marked", [(0, False), (1, True), (2, True), (3, False)])
@pytest.mark.parametrize("vlans", [0, 2])
def test_mark_sets_ce_on_ect_ipv4_and_checksum_matches_scapy(ecn, marked, vlans):
    rng = random.Random(ecn * 10 + vlans)
    packet = Ether()
    for vid in range(vlans):
        packet = packet / Dot1Q(vlan=vid + 3)
    packet = packet / IP(tos=(rng.randrange(64) << 2) | ecn, id=rng.randrange(65536),
                         options=b"\x01" * 4 * rng.randrange(3)) / UDP() / Raw(b"y" * 30)
    frame = _pad(packet)
    model = _model([Bucket(0, 0, Action.MARK)])
    out, meta = model.process(frame, _meta(frame))
    assert meta["mark"] == 1 and meta["drop"] == 0
    assert model.stats["dropped"] == 0
    got = Ether(out)[IP]
    assert got.tos & 3 == (3 if marked else ecn)
    assert got.tos >> 2 == Ether(frame)[IP].tos >> 2                    # DSCP kept
    recomputed = IP(bytes(got))
    del recomputed.chksum
    assert got.chksum == IP(bytes(recomputed)).chksum                   # RFC 1624 = RFC 791
    assert (out != frame) == marked


@pytest.mark.parametrize("ecn, marked", [(0, False), (1, True), (2, True), (3, False)])
def test_mark_sets_ce_on_ect_ipv6(ecn, marked):
    frame = _pad(Ether() / IPv6(tc=(45 << 2) | ecn, fl=0xABCDE) / UDP() / Raw(b"z" * 20))
    out, _ = _model([Bucket(0, 0, Action.MARK)]).process(frame, _meta(frame))
    got = Ether(out)[IPv6]
    assert got.tc == (45 << 2) | (3 if marked else ecn) and got.fl == 0xABCDE
    assert out[:14] == frame[:14] and out[18:] == frame[18:]


def test_mark_changes_only_the_outer_header_of_vxlan():
    inner = Ether() / IP(tos=1) / UDP(dport=80) / Raw(b"i" * 40)
    frame = _pad(Ether() / IP(tos=2) / UDP(dport=4789) / VXLAN(vni=3) / inner)
    out, _ = _model([Bucket(0, 0, Action.MARK)]).process(frame, _meta(frame))
    outer = Ether(out)[IP]
    assert outer.tos == 3 and bytes(outer[VXLAN].payload) == bytes(inner)
    assert mark_ce(out, _meta(out)) == out                              # CE stays CE


def test_non_ip_is_only_meta_marked():
    frame = _pad(Ether() / ARP())
    out, meta = _model([Bucket(0, 0, Action.MARK)]).process(frame, _meta(frame))
    assert out == frame and meta["mark"] == 1


# --- configuration ------------------------------------------------------------------------------

_B = {"rate": 1, "burst": 100}


@pytest.mark.parametrize("raw, message", [
    ([], "config must be a table, not []"),
    ({"bucket": []}, "config has unknown key 'bucket' (known: buckets, classes, unmatched)"),
    ({"buckets": {}}, "buckets must be a list of tables, not {}"),
    ({"buckets": [_B] * 17}, "buckets must number at most 16 (build parameter buckets), not 17"),
    ({"buckets": [{"rate": 1}]}, "buckets[0] must give a burst, not {'rate': 1}"),
    ({"buckets": [{**_B, "size": 2}]},
     "buckets[0] has unknown key 'size' (known: action, burst, rate)"),
    ({"buckets": [{**_B, "rate": -1}]},
     "buckets[0].rate must be a number of bytes per cycle from 0 to 255.99998, not -1"),
    ({"buckets": [_B, {**_B, "rate": 256}]},
     "buckets[1].rate must be a number of bytes per cycle from 0 to 255.99998, not 256"),
    ({"buckets": [{**_B, "rate": True}]},
     "buckets[0].rate must be a number of bytes per cycle from 0 to 255.99998, not True"),
    ({"buckets": [{**_B, "rate": 1e-6}]},
     "buckets[0].rate must be 0 or at least 1/65536 byte per cycle, not 1e-06"),
    ({"buckets": [{**_B, "burst": 1.5}]},
     "buckets[0].burst must be a whole number of bytes from 0 to 16777215, not 1.5"),
    ({"buckets": [{**_B, "burst": 2 ** 24}]},
     "buckets[0].burst must be a whole number of bytes from 0 to 16777215, not 16777216"),
    ({"buckets": [{**_B, "action": "police"}]},
     "buckets[0].action must be 'drop' or 'mark', not 'police'"),
    ({"buckets": [_B], "classes": {}}, "classes must be a list of tables, not {}"),
    ({"buckets": [_B], "classes": [{"vlan": 1, "bucket": 0}] * 17},
     "classes must number at most 16 (build parameter classes), not 17"),
    ({"buckets": [_B], "classes": [{"vlan": 1, "dport": 80, "bucket": 0}]},
     "classes[0] must have exactly one key of dport, vlan, vni, not "
     "{'vlan': 1, 'dport': 80, 'bucket': 0}"),
    ({"buckets": [_B], "classes": [{"bucket": 0}]},
     "classes[0] must have exactly one key of dport, vlan, vni, not {'bucket': 0}"),
    ({"buckets": [_B], "classes": [{"vlan": 4096, "bucket": 0}]},
     "classes[0].vlan must be a VLAN ID from 0 to 4095, not 4096"),
    ({"buckets": [_B], "classes": [{"vni": 2 ** 24, "bucket": 0}]},
     "classes[0].vni must be a VNI from 0 to 16777215, not 16777216"),
    ({"buckets": [_B], "classes": [{"dport": 0, "bucket": 0}]},
     "classes[0].dport must be a port from 1 to 65535 (port 0 never matches), not 0"),
    ({"buckets": [_B], "classes": [{"dport": 80}]},
     "classes[0] must give a bucket, not {'dport': 80}"),
    ({"buckets": [_B, _B], "classes": [{"vlan": 1, "bucket": 2}]},
     "classes[0].bucket must be the index of a bucket in buckets (0 to 1), not 2"),
    ({"classes": [{"vlan": 1, "bucket": 0}]},
     "classes[0].bucket must be the index of a bucket in buckets (none configured), not 0"),
    ({"buckets": [_B, _B], "classes": [{"vni": 1, "bucket": 0}, {"vni": 1, "bucket": 1}]},
     "classes[1] must not repeat the key of classes[0], not {'vni': 1, 'bucket': 1}"),
    ({"buckets": [_B, _B], "classes": [{"vni": 1, "bucket": 0}, {"wlan": 1, "bucket": 1}]},
     "classes[1] has unknown key 'wlan' (known: bucket, dport, vlan, vni)"),
    ({"buckets": [_B, _B], "unmatched": 2},
     "unmatched must be 'pass' or the index of a bucket in buckets (0 to 1), not 2"),
    ({"buckets": [_B], "unmatched": "drop"},
     "unmatched must be 'pass' or the index of a bucket in buckets (0 to 0), not 'drop'"),
])
def test_config_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        RateLimiterConfig.from_dict("rate_limiter", PARAMS, raw)
    assert str(info.value) == "nt rate_limiter: " + message


def test_config_from_dict():
    config = RateLimiterConfig.from_dict("rate_limiter", PARAMS, {
        "buckets": [{"rate": 0.25, "burst": 3000, "action": "mark"}, {"rate": 0, "burst": 0}],
        "classes": [{"vlan": 100, "bucket": 0}, {"vni": 5000, "bucket": 1},
                    {"dport": 443, "bucket": 0}],
        "unmatched": 1})
    assert config.buckets == [Bucket(ONE // 4, 3000, Action.MARK), Bucket(0, 0, Action.DROP)]
    assert config.classes == [TrafficClass(ClassKind.VLAN, 100, 0),
                              TrafficClass(ClassKind.VNI, 5000, 1),
                              TrafficClass(ClassKind.DPORT, 443, 0)]
    assert config.unmatched == 1
    assert RateLimiterConfig.from_dict("rate_limiter", PARAMS, {}).unmatched is None


def test_param_and_width_errors():
    with pytest.raises(ConfigError, match="nt rate_limiter: parameter buckets must be a power "
                                          "of two, not 12"):
        RateLimiter.check_params({"buckets": 12})
    with pytest.raises(ConfigError, match="nt rate_limiter: parameter classes must be between "
                                          "1 and 64, not 0"):
        RateLimiter.check_params({"classes": 0})
    with pytest.raises(ConfigError, match=r"buckets \* scrub_interval must be at most 2\*\*31 "
                                          r"cycles .*not 1024 \* 4194304"):
        RateLimiter.check_params({"buckets": 1024, "scrub_interval": 2 ** 22})
    assert RateLimiter.check_params({"buckets": 1024, "scrub_interval": 2 ** 21})
    with pytest.raises(ValueError, match="Data width must be at least 16 for the rate limiter, "
                                         "not 8"):
        RateLimiter(8)


def test_register_writes_cover_every_slot():
    config = RateLimiterConfig.random(random.Random(3), PARAMS)
    writes = config.register_writes(PARAMS)
    names = {r.name for r in RateLimiter.registers(PARAMS)}
    assert {name for name, _ in writes} <= names
    assert writes.count(("bucket_write", 1)) == PARAMS["buckets"]
    assert writes.count(("class_write", 1)) == PARAMS["classes"]
    widths = {r.name: r.width for r in RateLimiter.registers(PARAMS)}
    assert all(0 <= value < 2 ** widths[name] for name, value in writes)


# --- hardware in Amaranth's simulator: the scrubber's forced slot -------------------------------

def test_forced_scrubs_under_saturation_keep_the_model_exact():
    """One-beat 64-byte packets back to back at 512 bits leave the scrubber no free slot: with
    ``scrub_interval=16`` it takes an input slot every 16 cycles. Verdicts, bytes and token
    state must still be the model's, with timestamps wrapping during the run."""
    params = RateLimiter.check_params({"buckets": 4, "classes": 2, "scrub_interval": 16})
    dut = RateLimiter(512, **params)
    layout = meta_layout(256)
    rng = random.Random(6)
    frames = exact_size_frames(rng, 240, 64, flows=3)
    parser = ParserModel()
    config = RateLimiterConfig([Bucket(20 * ONE, 400, Action.MARK),
                                Bucket(12 * ONE, 300, Action.DROP)],
                               [TrafficClass(ClassKind.DPORT, parser.parse(frames[0])["flow"]
                                             ["dport"], 1)], 0)
    model = RateLimiterModel(params, 512)
    model.configure(config)
    metas, expected = [], []
    ts = 2 ** 32 - 100
    for frame in frames:
        meta = parser.parse(frame)
        ts = (ts + 1) % 2 ** 32
        meta["ts"] = ts
        metas.append(meta)
        expected.append(model.process(frame, meta))
    got, stalls, problems = [], [0], []

    class Access:
        def __init__(self, ctx):
            self.ctx = ctx

        async def write(self, reg, value):
            port = getattr(dut.csr, reg)
            self.ctx.set(port, value)
            await self.ctx.tick()
            if reg.endswith("_write"):
                self.ctx.set(port, 0)                   # W1P: a one-cycle strobe

        async def read(self, reg):
            await self.ctx.tick()
            return self.ctx.get(getattr(dut.csr, reg))

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        access = Access(ctx)
        for reg, value in config.register_writes(params):
            await access.write(reg, value)
            while ctx.get(dut.csr.bucket_busy):
                await ctx.tick()
        sent = 0
        for _ in range(len(frames) * 2 + 50):
            if sent < len(frames):
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.p.data, int.from_bytes(frames[sent], "little"))
                ctx.set(dut.i.p.keep, 2 ** 64 - 1)
                ctx.set(dut.i.p.last, 1)
                ctx.set(dut.i.p.meta.as_value(), encode(layout, metas[sent]))
            else:
                ctx.set(dut.i.valid, 0)
            taken = ctx.get(dut.i.valid) and ctx.get(dut.i.ready)
            stalls[0] += ctx.get(dut.i.valid) and not ctx.get(dut.i.ready)
            if ctx.get(dut.o.valid):
                got.append((ctx.get(dut.o.p.data).to_bytes(64, "little"),
                            decode(layout, ctx.get(dut.o.p.meta.as_value()))))
            await ctx.tick()
            sent += bool(taken)
        problems.extend(await model.verify_hardware(access))
        for name, want in model.counters().items():
            if ctx.get(getattr(dut.csr, name)) != want:
                problems.append(f"{name}: hw {ctx.get(getattr(dut.csr, name))}, model {want}")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(got) == len(frames)
    assert [g[0] for g in got] == [e[0] for e in expected]
    assert [g[1] for g in got] == [e[1] for e in expected]
    assert not problems, problems
    assert len(frames) // 16 - 2 <= stalls[0] <= len(frames) // 16 + 2  # one slot in 16
    verdicts = [(e[1]["drop"], e[1]["mark"]) for e in expected]
    assert verdicts.count((1, 0)) and verdicts.count((0, 1)) and verdicts.count((0, 0))


# --- the hardware test's seeds (tests/test_nt_contract.py) ---------------------------------------

def test_seeds_wrap_the_timestamp():
    """The random traffic's first timestamp lies about 1.2 M cycles below 2**32, so the 32-bit
    ts wraps near packet 6,200 of 10,000."""
    from test_nt_contract import CONTRACTS

    for seed in CONTRACTS["rate_limiter"].seeds.values():
        assert 2 ** 32 - 1_500_000 < random.Random(seed).randrange(2 ** 32) < 2 ** 32 - 500_000


def test_verify_hardware_catches_a_wrong_token_state():
    """The read-back check must accept tokens advanced by the refill rule to a time up to the
    latest packet, and nothing else."""
    model = _model([Bucket(ONE, 1000)], params=RateLimiter.check_params({"buckets": 2}))
    model.meter(0, 100, 600)                         # 400 tokens at 100
    model.now = 200                                  # a later packet on another bucket

    class Access:
        def __init__(self, tokens, last):
            self.regs = [{**model.counts[0], "tokens": tokens, "last_ts": last},
                         {**model.counts[1], "tokens": 0, "last_ts": 0}]
            self.index = 0

        async def write(self, reg, value):
            self.index = value

        async def read(self, reg):
            return self.regs[self.index][reg]

    def check(tokens, last):
        return asyncio.run(model.verify_hardware(Access(tokens, last)))
    assert check(400 * ONE, 100) == [] and check(450 * ONE, 150) == []
    assert check(1000 * ONE, 200)[0].startswith("bucket 0: tokens 0x3e80000 at 0xc8")
    assert check(451 * ONE, 150)[0].startswith("bucket 0: tokens")
    assert "outside" in check(450 * ONE, 250)[0]
