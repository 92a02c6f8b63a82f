"""ChaCha20 NT: the model against RFC 8439 and scapy, the block-function gateware against the
RFC's vectors in Amaranth's simulator (every rounds-per-cycle choice, iterative and pipelined),
the whole NT in Amaranth's simulator at the widths Verilator does not run (128, 256) and with
``enable`` off, and configuration errors. The hardware against the model on Verilator at 64
bits (iterative, 5 rounds a cycle) and 512 bits (pipelined, 2 rounds a cycle), 5,000 packets
each with random idle and backpressure, and saturation runs are in tests/test_nt_contract.py."""

import random

import pytest
from amaranth.sim import Simulator
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.layers.vxlan import VXLAN
from scapy.packet import Raw

from supernic.desc.nt.chacha20 import ROUNDS_PER_CYCLE, ChaCha20Config
from supernic.hw.nt.chacha20 import ChaCha20Task
from supernic.hw.nt.chacha20_core import ChaCha20Core
from supernic.hw.nt.task import ConfigError
from supernic.desc.meta import TAIL_FLAGS
from supernic.hw.stream import packet_layout
from supernic.sim.layout_codec import decode, encode
from supernic.sim.nt.chacha20 import (
    ChaCha20Model, chacha20_block, chacha20_encrypt, packet_nonce, quarter_round)
from supernic.sim.parser_model import ParserModel
from supernic.sim.traffic import random_packets

PARAMS = ChaCha20Task.check_params({})
KEY = bytes(range(32))  # RFC 8439 §2.3.2 and §2.4.2
SUNSCREEN = (b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for "
             b"the future, sunscreen would be it.")
# RFC 8439 §2.3.2: nonce 00:00:00:09:00:00:00:4a:00:00:00:00, block count 1.
BLOCK_NONCE = bytes.fromhex("000000090000004a00000000")
BLOCK_2_3_2 = bytes.fromhex(
    "10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
    "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e")
# RFC 8439 §2.4.2: nonce 00:00:00:00:00:00:00:4a:00:00:00:00, initial counter 1.
CIPHER_NONCE = bytes.fromhex("000000000000004a00000000")
CIPHERTEXT_2_4_2 = bytes.fromhex(
    "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0b"
    "f91b65c5524733ab8f593dabcd62b3571639d624e65152ab8f530c359f0861d8"
    "07ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736"
    "5af90bbf74a35be6b40b8eedf2785e42874d")


def _model(enable=True, width=512, prefix=0x01020304):
    model = ChaCha20Model(PARAMS, width)
    model.configure(ChaCha20Config(KEY, prefix, enable))
    return model


# --- the model against RFC 8439 ------------------------------------------------------------------

def test_quarter_round_rfc8439_2_1_1():
    state = [0x11111111, 0x01020304, 0x9B8D6F43, 0x01234567]
    quarter_round(state, 0, 1, 2, 3)
    assert state == [0xEA2A92F4, 0xCB1CF8CE, 0x4581472E, 0x5881C4BB]


def test_block_function_rfc8439_2_3_2():
    assert chacha20_block(KEY, 1, BLOCK_NONCE) == BLOCK_2_3_2


def test_encryption_rfc8439_2_4_2():
    assert chacha20_encrypt(KEY, 1, CIPHER_NONCE, SUNSCREEN) == CIPHERTEXT_2_4_2
    assert chacha20_encrypt(KEY, 1, CIPHER_NONCE, CIPHERTEXT_2_4_2) == SUNSCREEN


def test_block_function_argument_errors():
    with pytest.raises(ValueError, match="Key must be 32 bytes, not 31"):
        chacha20_block(KEY[:31], 1, BLOCK_NONCE)
    with pytest.raises(ValueError, match="Nonce must be 12 bytes, not 8"):
        chacha20_block(KEY, 1, bytes(8))
    with pytest.raises(ValueError, match="Counter must fit in 32 bits, not 4294967296"):
        chacha20_block(KEY, 2 ** 32, BLOCK_NONCE)


# --- the model on packets ------------------------------------------------------------------------

def test_encrypting_twice_gives_back_the_plaintext():
    """A receiver with the same key and prefix that sees the same packets decrypts: headers are
    untouched, so it applies to the same packets and counts the same sequence numbers."""
    parser = ParserModel()
    frames = [f for _, f in random_packets(400, 11, "mixed", 0.1)]
    sender, receiver = _model(), _model()
    changed = 0
    for frame in frames:
        meta = parser.parse(frame)
        sealed, sealed_meta = sender.process(frame, meta)
        assert sealed_meta == meta
        assert parser.parse(sealed) == meta  # the parser sees the same headers
        changed += sealed != frame
        opened, _ = receiver.process(sealed, parser.parse(sealed))
        assert opened == frame
    assert changed > 100
    assert sender.counters() == receiver.counters()


def test_payload_and_nonce_scheme():
    """Bytes before payload_off stay; the payload is RFC 8439 encryption with counter 1 and
    the nonce prefix || sequence number; the sequence counts encrypted packets only."""
    parser = ParserModel()
    model = _model(prefix=0xA1B2C3D4)
    seq = 0
    for _, frame in random_packets(300, 12, (60, 400), 0.1):
        meta = parser.parse(frame)
        out, _ = model.process(frame, meta)
        if model.seq == seq:
            assert out == frame  # skipped
            continue
        off = meta["payload_off"]
        nonce = (0xA1B2C3D4).to_bytes(4, "little") + seq.to_bytes(8, "little")
        assert nonce == packet_nonce(0xA1B2C3D4, seq)
        assert out[:off] == frame[:off]
        assert out[off:] == chacha20_encrypt(KEY, 1, nonce, frame[off:])
        seq += 1
    assert model.counters()["next_seq"] == seq > 50


# Addresses given, so scapy resolves nothing.
def _eth(**kw):
    return Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02", **kw)


def _ip(**kw):
    return IP(src="10.0.0.1", dst="10.0.0.2", **kw)


def _ip6(**kw):
    return IPv6(src="fd00::1", dst="fd00::2", **kw)


@pytest.mark.parametrize("frame, payload", [
    (_eth() / _ip() / UDP(sport=1, dport=2) / Raw(bytes(range(100))), bytes(range(100))),
    (_eth() / Dot1Q(vlan=5) / _ip(options=b"\x01" * 8) / TCP(options=[("NOP", None)] * 8)
     / Raw(b"x" * 70), b"x" * 70),
    (_eth() / _ip6() / TCP() / Raw(b"y" * 300), b"y" * 300),
    # Inner ports away from 53: once any test has imported scapy's DNS layer, a UDP port 53
    # payload (here ciphertext) dissects as DNS and leaves scapy's Raw layer short.
    (_eth() / _ip() / UDP(dport=4789) / VXLAN(vni=7) / _eth() / _ip6()
     / UDP(sport=40000, dport=40001) / Raw(b"z" * 40), b"z" * 40),
], ids=["ipv4_udp", "vlan_ipv4opt_tcpopt", "ipv6_tcp", "vxlan_inner_ipv6_udp"])
def test_payload_matches_scapy(frame, payload):
    """The encrypted span is exactly what scapy calls the L4 payload (the innermost one)."""
    raw = bytes(frame)
    meta = ParserModel().parse(raw)
    out, _ = _model().process(raw, meta)
    got = Ether(out)
    assert bytes(got[Raw].load) == chacha20_encrypt(KEY, 1, packet_nonce(0x01020304, 0), payload)
    assert out[:-len(payload)] == raw[:-len(payload)]


@pytest.mark.parametrize("frame", [
    _eth() / _ip(flags="MF") / UDP() / Raw(b"a" * 64),        # first fragment
    _eth() / _ip() / Raw(b"a" * 64),                          # no L4 (protocol 0)
    _eth() / _ip6(nh=59) / Raw(b"a" * 64),                    # no next header
    _eth(type=0x88B5) / Raw(b"a" * 64),                       # not IP
    _eth() / _ip() / UDP(dport=4789) / VXLAN() / _eth(type=0x88B5) / Raw(b"a" * 40),
], ids=["fragment", "ipv4_no_l4", "ipv6_no_l4", "non_ip", "vxlan_inner_non_ip"])
def test_kinds_that_do_not_apply_pass_unchanged(frame):
    raw = bytes(frame)
    model = _model()
    assert model.process(raw, ParserModel().parse(raw)) == (raw, ParserModel().parse(raw))
    assert model.counters() == {"packets": 1, "dropped": 0, "skipped": 1, "next_seq": 0,
                                "blocks": 0}


def test_disabled_fails_closed():
    """enable = false: what would be encrypted is dropped, never sent in the clear."""
    raw = bytes(_eth() / _ip() / UDP() / Raw(b"secret" * 10))
    model = _model(enable=False)
    out, meta = model.process(raw, ParserModel().parse(raw))
    assert out == raw and meta["drop"] == 1
    assert model.counters()["dropped"] == 1 and model.counters()["next_seq"] == 0


def test_block_count_follows_beats():
    """One block per 64 // beat words from the beat holding payload_off on (whole beats)."""
    assert ChaCha20Model(PARAMS, 512).blocks_for(1500, 42) == 24    # 24 beats, all hold payload
    assert ChaCha20Model(PARAMS, 64).blocks_for(1500, 42) == 23     # beats 5..187: 183 words
    assert ChaCha20Model(PARAMS, 64).blocks_for(64, 64) == 0        # no payload beat
    assert ChaCha20Model(PARAMS, 64).blocks_for(60, 58) == 1


# --- configuration -------------------------------------------------------------------------------

@pytest.mark.parametrize("raw, message", [
    ({}, "nt chacha20: key must be 64 hex digits (32 bytes), not None"),
    ({"key": "00" * 31}, "nt chacha20: key must be 64 hex digits (32 bytes), not '" + "00" * 31
     + "'"),
    ({"key": "zz" * 32}, "nt chacha20: key must be 64 hex digits (32 bytes), not '" + "zz" * 32
     + "'"),
    ({"key": "00" * 32, "nonce_prefix": 2 ** 32},
     "nt chacha20: nonce_prefix must be an integer from 0 to 0xffffffff, not 4294967296"),
    ({"key": "00" * 32, "nonce_prefix": True},
     "nt chacha20: nonce_prefix must be an integer from 0 to 0xffffffff, not True"),
    ({"key": "00" * 32, "enable": 1}, "nt chacha20: enable must be true or false, not 1"),
    ({"key": "00" * 32, "nonce": 1},
     "nt chacha20: unknown setting 'nonce' (known: enable, key, nonce_prefix)"),
    ([], "nt chacha20: configuration must be a table, not []"),
])
def test_config_errors(raw, message):
    with pytest.raises(ConfigError) as info:
        ChaCha20Config.from_dict("chacha20", PARAMS, raw)
    assert str(info.value) == message


def test_param_errors():
    with pytest.raises(ConfigError) as info:
        ChaCha20Task.check_params({"rounds_per_cycle": 3})
    assert str(info.value) == ("nt chacha20: parameter rounds_per_cycle must be one of "
                               "[1, 2, 4, 5, 10, 20], not 3")
    with pytest.raises(ConfigError) as info:
        ChaCha20Task(1024)
    assert str(info.value) == "nt chacha20: data width must be at most 512 bits, not 1024"
    with pytest.raises(ValueError, match=r"Rounds per cycle must be one of \[1, 2, 4, 5, 10, "
                                         r"20\], not 3"):
        ChaCha20Core(3)


def test_config_register_writes():
    config = ChaCha20Config.from_dict("chacha20", PARAMS, {
        "key": KEY.hex(), "nonce_prefix": 0x11223344})
    writes = config.register_writes(PARAMS)
    # Disabled while the key changes, enabled last.
    assert writes[0] == ("enable", 0) and writes[-1] == ("enable", 1)
    assert ("key0", 0x0706050403020100) in writes and ("key3", 0x1F1E1D1C1B1A1918) in writes
    assert ("nonce_prefix", 0x11223344) in writes
    names = {r.name for r in ChaCha20Task.registers(PARAMS)}
    assert {name for name, _ in writes} <= names
    assert ChaCha20Config.random(random.Random(1), PARAMS).enable


# --- the block function in Amaranth's simulator --------------------------------------------------

def _run_core(core, requests, rng):
    """Drive requests with random gaps, take blocks with random backpressure; return the
    blocks and the cycles each request spent from taken to its block valid."""
    blocks = []

    async def bench(ctx):
        ctx.set(core.key, int.from_bytes(KEY, "little"))
        pending = list(requests)
        while len(blocks) < len(requests):
            offer = bool(pending) and rng.random() < 0.8
            if offer:
                ctx.set(core.i.payload.counter, pending[0][0])
                ctx.set(core.i.payload.nonce, int.from_bytes(pending[0][1], "little"))
            ctx.set(core.i.valid, offer)
            ctx.set(core.o.ready, rng.random() < 0.7)
            _, _, taken_in, valid, ready, payload = await ctx.tick().sample(
                core.i.valid & core.i.ready, core.o.valid, core.o.ready, core.o.payload)
            if taken_in:
                pending.pop(0)
            if valid and ready:
                blocks.append(payload.to_bytes(64, "little"))

    sim = Simulator(core)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return blocks


async def _latency(ctx, core):
    ctx.set(core.o.ready, 1)
    ctx.set(core.i.valid, 1)
    await ctx.tick().until(core.i.ready)
    ctx.set(core.i.valid, 0)
    cycles = 1  # the cycle the request was taken in
    while not ctx.get(core.o.valid):
        await ctx.tick()
        cycles += 1
    return cycles


@pytest.mark.parametrize("pipelined", [False, True], ids=["iterative", "pipelined"])
@pytest.mark.parametrize("rounds", ROUNDS_PER_CYCLE)
def test_core_rfc8439_vectors(rounds, pipelined):
    core = ChaCha20Core(rounds, pipelined)
    rng = random.Random(rounds * 2 + pipelined)
    requests = [(1, BLOCK_NONCE), (1, CIPHER_NONCE), (2, CIPHER_NONCE)]
    requests += [(rng.getrandbits(32), rng.randbytes(12)) for _ in range(5)]
    blocks = _run_core(core, requests, rng)
    assert blocks[0] == BLOCK_2_3_2                                          # §2.3.2
    stream = blocks[1] + blocks[2]
    assert bytes(p ^ k for p, k in zip(SUNSCREEN, stream)) == CIPHERTEXT_2_4_2  # §2.4.2
    for block, (counter, nonce) in zip(blocks[3:], requests[3:]):
        assert block == chacha20_block(KEY, counter, nonce)


@pytest.mark.parametrize("rounds, pipelined", [(1, False), (4, False), (5, True), (20, False)])
def test_core_latency_and_interval(rounds, pipelined):
    """``latency`` cycles from a request taken to its block; ``interval`` between requests."""
    core = ChaCha20Core(rounds, pipelined)
    result = {}

    async def bench(ctx):
        ctx.set(core.key, int.from_bytes(KEY, "little"))
        result["latency"] = await _latency(ctx, core)
        # Saturation: requests always offered, blocks always taken.
        ctx.set(core.i.valid, 1)
        taken = []
        for cycle in range(4 * core.passes + 8):
            _, _, took = await ctx.tick().sample(core.i.valid & core.i.ready)
            if took:
                taken.append(cycle)
        result["interval"] = taken[-1] - taken[-2]

    sim = Simulator(core)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert result == {"latency": core.latency, "interval": core.interval}
    assert core.interval == (1 if pipelined else 20 // rounds)


# --- the whole NT in Amaranth's simulator --------------------------------------------------------

def _run_task(width, params, config, frames, seed):
    """Frames through the NT with random idle and backpressure (5% of them already dropped);
    returns what came out, the counters and the metadata that went in."""
    task = ChaCha20Task(width, **params)
    layout = packet_layout(width, task.meta_layout)
    parser = ParserModel()
    nbytes = width // 8
    beats, metas, rng = [], [], random.Random(seed)
    for frame in frames:
        meta = parser.parse(frame)
        meta["drop"] = int(rng.random() < 0.05)
        metas.append(meta)
        head = {**meta, "flags": {**meta["flags"], **{f: 0 for f in TAIL_FLAGS}}}
        n = -(-len(frame) // nbytes)
        for i in range(n):
            chunk = frame[i * nbytes:(i + 1) * nbytes]
            beats.append(encode(layout, {
                "data": int.from_bytes(chunk, "little"), "keep": (1 << len(chunk)) - 1,
                "last": int(i == n - 1), "meta": meta if i == n - 1 else head}))
    out, current = [], bytearray()
    counters = {}

    async def bench(ctx):
        for name, value in config.register_writes(task.p):
            ctx.set(getattr(task.csr, name), value)
        i = 0
        while len(out) < len(frames):
            offer = i < len(beats) and rng.random() < 0.7
            if offer:
                ctx.set(task.i.payload.as_value(), beats[i])
            ctx.set(task.i.valid, offer)
            ctx.set(task.o.ready, rng.random() < 0.7)
            _, _, took, valid, ready, payload = await ctx.tick().sample(
                task.i.valid & task.i.ready, task.o.valid, task.o.ready,
                task.o.payload.as_value())
            i += took
            if valid and ready:
                beat = decode(layout, payload)
                current.extend(beat["data"].to_bytes(nbytes, "little")[
                    :beat["keep"].bit_length()])
                if beat["last"]:
                    out.append((bytes(current), beat["meta"]))
                    current.clear()
        await ctx.tick()
        for name in ("packets", "dropped", "skipped", "next_seq", "blocks"):
            counters[name] = ctx.get(getattr(task.csr, name))

    sim = Simulator(task)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out, counters, metas


@pytest.mark.parametrize("width, params, enable", [
    (128, {"rounds_per_cycle": 10}, True),
    (256, {"rounds_per_cycle": 4, "pipelined": True}, True),
    (64, {"rounds_per_cycle": 20}, False),
], ids=["w128_iterative", "w256_pipelined", "w64_disabled"])
def test_task_in_amaranth_simulator(width, params, enable):
    config = ChaCha20Config(random.Random(width).randbytes(32), 0xCAFE, enable)
    frames = [f for _, f in random_packets(60, width, (60, 600), 0.1)]
    out, counters, metas = _run_task(width, params, config, frames, seed=width)
    model = ChaCha20Model(ChaCha20Task.check_params(params), width)
    model.configure(config)
    for frame, meta, (got, got_meta) in zip(frames, metas, out):
        want, want_meta = model.process(frame, meta)
        assert got == want
        assert got_meta == want_meta
    assert counters == model.counters()
    if enable:
        assert counters["next_seq"] > 10
    else:
        assert counters["dropped"] > 10 and counters["next_seq"] == 0
