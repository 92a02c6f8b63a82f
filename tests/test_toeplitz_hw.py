"""The parser's gateware Toeplitz hash (hw/parser/toeplitz.py) equals the model's (RSS, the
model checked against Microsoft's vectors in test_parser_model.py) on random IPv4 and IPv6
flows and on the all-ones and single-bit inputs that show a misplaced key window."""

import random

from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from supernic.desc.meta import TOEPLITZ_KEY

from supernic.hw.parser.meta import flow_layout
from supernic.hw.parser.toeplitz import toeplitz_hash
from supernic.sim.toeplitz import flow_hash_input, toeplitz


def _flows():
    rng = random.Random(7)
    for ipv6 in (0, 1):
        bits = 128 if ipv6 else 32
        yield {"src_ip": (1 << bits) - 1, "dst_ip": (1 << bits) - 1, "sport": 0xFFFF,
               "dport": 0xFFFF, "ipv6": ipv6}
        for b in range(2 * bits + 32):      # every single input bit on its own
            v = 1 << b
            yield {"src_ip": v & ((1 << bits) - 1), "dst_ip": (v >> bits) & ((1 << bits) - 1),
                   "sport": (v >> 2 * bits) & 0xFFFF, "dport": (v >> (2 * bits + 16)) & 0xFFFF,
                   "ipv6": ipv6}
        for _ in range(200):
            yield {"src_ip": rng.getrandbits(bits), "dst_ip": rng.getrandbits(bits),
                   "sport": rng.getrandbits(16), "dport": rng.getrandbits(16), "ipv6": ipv6}


def test_gateware_hash_equals_the_model():
    layout = flow_layout()
    flow = Signal(layout)
    out = Signal(32)
    m = Module()
    m.d.comb += out.eq(toeplitz_hash(m, flow, TOEPLITZ_KEY))
    flows = list(_flows())
    got = []

    async def bench(ctx):
        for f in flows:
            for name, value in f.items():
                ctx.set(getattr(flow, name), value)
            got.append(ctx.get(out))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    want = [toeplitz(TOEPLITZ_KEY, flow_hash_input(f)) for f in flows]
    assert got == want
