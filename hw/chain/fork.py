"""Fork: every beat of the input goes to each of ``n`` outputs.

An eager fork: each output takes the beat when it is ready, and the input beat retires once
every output has taken it, so a slow branch never makes a fast one see a beat twice. ``valid``
of an output depends only on the input's ``valid`` and registered state (stream contract).
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..stream import PacketSignature

__all__ = ["PacketFork"]


class PacketFork(wiring.Component):
    def __init__(self, data_width, meta_layout, n):
        if not isinstance(n, int) or n < 2:
            raise ValueError(f"Fork outputs must be an integer of at least 2, not {n!r}")
        self.n = n
        sig = PacketSignature(data_width, meta_layout)
        super().__init__({"i": In(sig), **{f"o{k}": Out(sig) for k in range(n)}})

    def outputs(self):
        return [getattr(self, f"o{k}") for k in range(self.n)]

    def elaborate(self, platform):
        m = Module()
        outs = self.outputs()
        done = Signal(self.n)        # outputs that already took the current beat
        taking = Signal(self.n)
        for k, o in enumerate(outs):
            m.d.comb += [o.p.eq(self.i.p), o.valid.eq(self.i.valid & ~done[k]),
                         taking[k].eq(o.valid & o.ready)]
        finished = (done | taking).all()
        m.d.comb += self.i.ready.eq(finished)
        with m.If(self.i.valid):
            m.d.sync += done.eq(Cat(done | taking) & ~finished.replicate(self.n))
        return m
