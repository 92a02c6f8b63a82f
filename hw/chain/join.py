"""Join: the packets of the primary branch leave, with every branch's verdict merged.

Every branch of a fork carries every packet, in order (NTs drop by marking, see
:mod:`supernic.hw.nt.task`), so the join pairs packets by position. Secondary branches hold
only NTs that do not change bytes; the join takes their beats as they come, keeps the drop and
mark verdicts of their first beats in a small FIFO each, and discards the rest. A primary
packet leaves once every secondary has given its verdict for it, with ``drop`` and ``mark``
OR-ed: deterministic, and order within a flow (indeed all order) is kept.

The primary passes through a FIFO first, so that secondaries with a longer latency than the
primary do not stall the fork (both see each beat at the same time; the primary's beats wait
here, not in the fork). ``primary_depth`` must cover the largest latency difference in beats.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from ..stream import PacketSignature, packet_layout

__all__ = ["PacketJoin"]

VERDICT_DEPTH = 4


class PacketJoin(wiring.Component):
    def __init__(self, data_width, meta_layout, n, primary=0, primary_depth=16):
        if not isinstance(n, int) or n < 2:
            raise ValueError(f"Join inputs must be an integer of at least 2, not {n!r}")
        if primary not in range(n):
            raise ValueError(f"Primary must be an input index below {n}, not {primary!r}")
        self.n, self.primary, self.primary_depth = n, primary, primary_depth
        self.layout = packet_layout(data_width, meta_layout)
        sig = PacketSignature(data_width, meta_layout)
        super().__init__({**{f"i{k}": In(sig) for k in range(n)}, "o": Out(sig)})

    def inputs(self):
        return [getattr(self, f"i{k}") for k in range(self.n)]

    def elaborate(self, platform):
        m = Module()
        ins = self.inputs()
        width = self.layout.size
        m.submodules.primary = pq = fifo.SyncFIFOBuffered(width=width, depth=self.primary_depth)
        prim = ins[self.primary]
        m.d.comb += [pq.w_data.eq(prim.p.as_value()), pq.w_en.eq(prim.valid),
                     prim.ready.eq(pq.w_rdy)]

        verdicts = []
        for k, s in enumerate(ins):
            if k == self.primary:
                continue
            vq = fifo.SyncFIFOBuffered(width=2, depth=VERDICT_DEPTH)
            m.submodules[f"verdict{k}"] = vq
            first = Signal(init=1, name=f"first{k}")
            m.d.comb += [
                s.ready.eq(~first | vq.w_rdy),
                vq.w_en.eq(s.valid & first),
                vq.w_data.eq(Cat(s.p.meta.drop, s.p.meta.mark)),
            ]
            with m.If(s.valid & s.ready):
                m.d.sync += first.eq(s.p.last)
            verdicts.append(vq)

        beat = self.layout(pq.r_data)
        all_in = Cat(vq.r_rdy for vq in verdicts).all()
        drop = Cat(vq.r_data[0] for vq in verdicts).any()
        mark = Cat(vq.r_data[1] for vq in verdicts).any()
        m.d.comb += [
            self.o.valid.eq(pq.r_rdy & all_in),
            self.o.p.eq(beat),
            self.o.p.meta.drop.eq(beat.meta.drop | drop),
            self.o.p.meta.mark.eq(beat.meta.mark | mark),
        ]
        take = self.o.valid & self.o.ready
        m.d.comb += pq.r_en.eq(take)
        for vq in verdicts:
            m.d.comb += vq.r_en.eq(take & beat.last)
        return m
