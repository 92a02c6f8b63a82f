"""The stream contract as formal properties: assumed where the environment drives a stream,
asserted where the block under proof drives one.

The contract (hw/stream.py, after ``amaranth.lib.stream``): once ``valid`` is high it stays
high, and the payload keeps its value, until the beat is taken (``valid & ready``). A harness
holds the sync domain out of reset (flip-flops start at their initial values, which is the
state a reset leaves) and, in the first cycle, makes no claim about the cycle before it.
"""

from amaranth.hdl import Assert, Assume, Elaboratable, Module, ResetSignal, Signal

__all__ = ["ContractHarness", "holds_until_taken"]


def holds_until_taken(m, stream, started, name):
    """The contract of ``stream`` as a condition (True when it holds in this cycle)."""
    payload = stream.p.as_value() if hasattr(stream.p, "as_value") else stream.p
    waited = Signal(name=f"{name}_waited")
    before = Signal(len(payload), name=f"{name}_before")
    m.d.sync += [waited.eq(stream.valid & ~stream.ready), before.eq(payload)]
    return ~started | ~waited | (stream.valid & (payload == before))


class ContractHarness(Elaboratable):
    """``dut`` with the contract assumed on ``sources`` (streams into it) and asserted on
    ``sinks`` (streams out of it). ``extra(m, started)`` adds the block's own assumptions
    and assertions. Every other input of ``dut`` is free: the proof covers all its values."""

    def __init__(self, dut, sources, sinks, extra=None):
        self.dut, self.sources, self.sinks, self.extra = dut, sources, sinks, extra

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        started = Signal()
        m.d.sync += started.eq(1)
        m.d.comb += Assume(~ResetSignal())
        for i, stream in enumerate(self.sources):
            m.d.comb += Assume(holds_until_taken(m, stream, started, f"source{i}"))
        for i, stream in enumerate(self.sinks):
            m.d.comb += Assert(holds_until_taken(m, stream, started, f"sink{i}"))
        if self.extra is not None:
            self.extra(m, started)
        return m
