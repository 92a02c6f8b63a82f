"""The streaming realigner (hw/nt/realign.py) in Amaranth's simulator against a trivial model.

Model: ``head[:P] + frame[D:]``, zero-padded to ``pad`` bytes; nothing left gives one beat with
``keep == 0``. Random ``P``/``D``/``pad`` per packet (``D`` and ``P`` larger than a beat at 64
bits, frames shorter than ``D``), random idle and backpressure, at 64, 128 and 512 bits; the new
metadata must be on every beat and the input's tail flags on the last beat only. Then the rates
the docstring promises, measured with the source never idle and the sink always ready: one
output beat a cycle for a growing packet, one input beat a cycle for a shrinking one, both for
back-to-back minimum frames padded to 60 bytes. And the Verilog at each user's sizes lints clean.
"""

import random

import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from supernic.hw.nt.realign import HeadWindow, Realigner

TEST_META = data.StructLayout({
    "flags": data.StructLayout({"length_error": 1, "keep_error": 1}),
    "tag": 16,
})
MAX_HEAD, MAX_DROP, MAX_PAD = 50, 100, 60


def model(frame, head, p, d, pad):
    out = head[:p] + frame[d:]
    return out + bytes(max(0, pad - len(out)))


def beats_of(frame, width):
    nbytes = width // 8
    n = max(1, -(-len(frame) // nbytes))
    return [(int.from_bytes(frame[k * nbytes:(k + 1) * nbytes], "little"),
             (1 << len(frame[k * nbytes:(k + 1) * nbytes])) - 1, k == n - 1) for k in range(n)]


def run(width, packets, idle=0.0, stall=0.0, seed=0, max_cycles=200_000):
    """Simulate; return (outputs, cycle stats). ``packets``: (frame, head, p, d, pad, tail)."""
    dut = Realigner(width, TEST_META, MAX_HEAD, MAX_DROP, MAX_PAD)
    rng = random.Random(seed)
    nbytes = width // 8
    outputs, stats = [], {"in": [], "out": []}

    async def bench(ctx):
        queue = []
        for n, (frame, head, p, d, pad, tail) in enumerate(packets):
            for k, (value, keep, last) in enumerate(beats_of(frame, width)):
                queue.append((n, k == 0, value, keep, last, tail if last else 0))
        pos, cur, beats, cycle = 0, None, [], 0
        while len(outputs) < len(packets):
            cycle += 1
            assert cycle < max_cycles, f"stalled: {len(outputs)}/{len(packets)} packets out"
            if cur is None and pos < len(queue) and rng.random() >= idle:
                cur = queue[pos]
            if cur is not None:
                n, first, value, keep, last, tail = cur
                frame, head, p, d, pad, _ = packets[n]
                ctx.set(dut.i.valid, 1)
                ctx.set(dut.i.p.data, value)
                ctx.set(dut.i.p.keep, keep)
                ctx.set(dut.i.p.last, last)
                ctx.set(dut.i.p.meta.flags.length_error, tail & 1)
                ctx.set(dut.i.p.meta.flags.keep_error, tail >> 1)
                ctx.set(dut.ctl.head, int.from_bytes(head, "little"))
                ctx.set(dut.ctl.p, p)
                ctx.set(dut.ctl.d, d)
                ctx.set(dut.ctl.pad, pad)
                ctx.set(dut.ctl.meta.tag, 0xA000 + n)
                ctx.set(dut.ctl.meta.flags.length_error, 1)  # must be overridden by the input's
            else:
                ctx.set(dut.i.valid, 0)
            ready = rng.random() >= stall
            ctx.set(dut.o.ready, ready)
            if cur is not None and ctx.get(dut.i.ready):
                assert ctx.get(dut.first) == cur[1]
                stats["in"].append(cycle)
                pos += 1
                cur = None
            if ready and ctx.get(dut.o.valid):
                stats["out"].append(cycle)
                keep = ctx.get(dut.o.p.keep)
                raw = ctx.get(dut.o.p.data).to_bytes(nbytes, "little")
                beats.append((raw, keep, ctx.get(dut.o.p.meta.tag),
                              ctx.get(dut.o.p.meta.flags.length_error)
                              | ctx.get(dut.o.p.meta.flags.keep_error) << 1,
                              ctx.get(dut.o.p.last)))
                if beats[-1][4]:
                    outputs.append(beats)
                    beats = []
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return outputs, stats


def check(packets, outputs, width):
    for n, ((frame, head, p, d, pad, tail), beats) in enumerate(zip(packets, outputs)):
        want = model(frame, head, p, d, pad)
        got = b""
        for k, (raw, keep, tag, otail, last) in enumerate(beats):
            assert tag == 0xA000 + n, f"packet {n} beat {k}: metadata of another packet"
            assert otail == (tail if last else 0), f"packet {n} beat {k}: tail flags"
            assert keep & (keep + 1) == 0, f"packet {n} beat {k}: keep {keep:#x} not contiguous"
            assert k == len(beats) - 1 or keep == (1 << (width // 8)) - 1
            nb = keep.bit_length()
            got += raw[:nb]
            assert raw[nb:] == bytes(len(raw) - nb), "bytes outside keep must read zero"
        assert got == want, (f"packet {n} (P={p} D={d} pad={pad}, {len(frame)} bytes): "
                             f"got {got.hex()} want {want.hex()}")
        if not want:
            assert len(beats) == 1 and beats[0][1] == 0


def random_packets(rng, n):
    packets = []
    for _ in range(n):
        p = rng.choice((0, 0, rng.randint(0, MAX_HEAD), 4, 12, 16, 50))
        d = rng.choice((0, 0, rng.randint(0, MAX_DROP), 12, 16, 50, MAX_DROP))
        pad = rng.choice((0, 0, 60, rng.randint(0, MAX_PAD)))
        size = rng.choice((rng.randint(1, 40), rng.randint(1, 300), max(1, d + rng.randint(-3, 3))))
        packets.append((rng.randbytes(size), rng.randbytes(MAX_HEAD), p, d, pad,
                        rng.randrange(4)))
    return packets


@pytest.mark.parametrize("width", [64, 128, 512])
def test_matches_model_random_flow_control(width):
    rng = random.Random(width)
    packets = random_packets(rng, 250)
    outputs, _ = run(width, packets, idle=0.3, stall=0.3, seed=width)
    check(packets, outputs, width)


@pytest.mark.parametrize("width", [64, 512])
def test_matches_model_full_rate(width):
    rng = random.Random(width + 1)
    packets = random_packets(rng, 150)
    outputs, _ = run(width, packets, seed=width)
    check(packets, outputs, width)


def _rates(stats):
    ins, outs = stats["in"], stats["out"]
    return (len(ins) / (ins[-1] - ins[0] + 1), len(outs) / (outs[-1] - outs[0] + 1))


@pytest.mark.parametrize("width", [64, 512])
@pytest.mark.parametrize("p,d", [(16, 12), (50, 0)], ids=["push", "encap"])
def test_growing_packets_keep_output_busy(width, p, d):
    rng = random.Random(3)
    packets = [(rng.randbytes(size), rng.randbytes(MAX_HEAD), p, d, 0, 0)
               for size in [64] * 30 + [1500] * 2 + [rng.randint(60, 200) for _ in range(30)]]
    outputs, stats = run(width, packets)
    check(packets, outputs, width)
    assert _rates(stats)[1] == 1.0


@pytest.mark.parametrize("width", [64, 512])
@pytest.mark.parametrize("p,d,pad", [(12, 16, 60), (0, 50, 60), (0, 100, 0)],
                         ids=["pop", "decap", "drop100"])
def test_shrinking_packets_keep_input_busy(width, p, d, pad):
    """Outputs of at least ``pad`` bytes: padding a shorter one must stall the input."""
    rng = random.Random(4)
    packets = [(rng.randbytes(size), rng.randbytes(MAX_HEAD), p, d, pad, 0)
               for size in [d + 60] * 30 + [1500] * 2
               + [rng.randint(d + 60, 300) for _ in range(30)]]
    outputs, stats = run(width, packets)
    check(packets, outputs, width)
    assert _rates(stats)[0] == 1.0


@pytest.mark.parametrize("width", [64, 128, 512])
@pytest.mark.parametrize("p,d,size", [(0, 50, 64), (12, 16, 60)], ids=["decap", "pop"])
def test_padded_minimum_frames_keep_both_sides_busy(width, p, d, size):
    """Back-to-back minimum frames, padded to 60 bytes after the realignment: as many beats
    leave as arrive, one a cycle on both sides. At 64 bits a decapsulated 64-byte frame is 7
    beats taken without output, 1 streamed and 7 flushed (6 of them padding): the flushed beats
    go out while the next packet's dropped beats are taken."""
    rng = random.Random(6)
    packets = [(rng.randbytes(size), rng.randbytes(MAX_HEAD), p, d, 60, rng.randrange(4))
               for _ in range(40)]
    outputs, stats = run(width, packets)
    check(packets, outputs, width)
    assert len(stats["in"]) == len(stats["out"])
    assert _rates(stats) == (1.0, 1.0)


def test_head_window_shows_first_bytes():
    """At 64 bits a 24-byte window needs three beats; every packet still comes out whole and in
    order, and the window on each first beat starts with the packet's first 24 bytes, with 0
    past the packet's last beat (not the previous packet's bytes)."""
    dut = HeadWindow(64, TEST_META, 24)
    assert dut.depth == 3
    rng = random.Random(5)
    frames = [rng.randbytes(rng.choice((rng.randint(1, 30), rng.randint(1, 100))))
              for _ in range(150)]
    queue = [(n, k == 0, *b) for n, f in enumerate(frames) for k, b in enumerate(beats_of(f, 64))]
    got, windows = [b"" for _ in frames], []

    async def bench(ctx):
        pos, out_packet, first = 0, 0, True
        while out_packet < len(frames):
            valid = pos < len(queue) and rng.random() < 0.7
            if valid:
                n, _, value, keep, last = queue[pos]
                ctx.set(dut.i.p.data, value)
                ctx.set(dut.i.p.keep, keep)
                ctx.set(dut.i.p.last, last)
            ctx.set(dut.i.valid, valid)
            ready = rng.random() < 0.7
            ctx.set(dut.o.ready, ready)
            if valid and ctx.get(dut.i.ready):
                pos += 1
            if ready and ctx.get(dut.o.valid):
                keep = ctx.get(dut.o.p.keep)
                if first:
                    windows.append(ctx.get(dut.window).to_bytes(24, "little"))
                got[out_packet] += ctx.get(dut.o.p.data).to_bytes(8, "little")[:keep.bit_length()]
                first = bool(ctx.get(dut.o.p.last))
                out_packet += first
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == frames
    for f, w in zip(frames, windows):
        assert w[:min(24, len(f))] == f[:24]
        past_last_beat = -(-len(f) // 8) * 8
        assert not any(w[past_last_beat:])
    assert sum(len(f) <= 16 for f in frames) > 20      # short packets, after longer ones


# (max_head, max_drop, max_pad) of the realigner's users: vxlan_decap (no head), vxlan_encap (no
# drop, a head shorter than a 512-bit beat), vlan_push and vlan_pop.
USERS = {"decap": (0, 256, 60), "encap": (50, 0, 0), "push": (16, 12, 0), "pop": (12, 16, 60)}


@pytest.mark.parametrize("width", [64, 512])
@pytest.mark.parametrize("user", USERS)
def test_verilog_is_lint_clean(width, user, tmp_path, monkeypatch):
    """A part of the state a build's sizes keep at 0 must not become a zero-width vector
    (``[-1:0]``, Verilator's ASCRANGE)."""
    from amaranth.back import verilog
    from supernic.hw.lint import lint
    monkeypatch.setenv("AMARANTH_USE_YOSYS", "builtin")
    text = verilog.convert(Realigner(width, TEST_META, *USERS[user]), name="realign",
                           emit_src=False)
    path = tmp_path / "realign.v"
    path.write_text(text)
    ok, report = lint(path)
    assert ok, report


@pytest.mark.parametrize("kwargs,message", [
    ({"max_head": -1}, "Realigner max_head must be an integer from 0 to 4096, not -1"),
    ({"max_drop": 1.5}, "Realigner max_drop must be an integer from 0 to 4096, not 1.5"),
    ({"max_pad": True}, "Realigner max_pad must be an integer from 0 to 4096, not True"),
])
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # __init__ raised
def test_rejects_bad_sizes(kwargs, message):
    args = {"max_head": 16, "max_drop": 16, **kwargs}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Realigner(64, TEST_META, **args)
