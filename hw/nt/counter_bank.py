"""A bank of wide event counters held in a memory, read one at a time by index.

Why a memory. An NT's per-rule or per-slot hit counters are 64 bits each (they must not wrap in
a device's lifetime), and as flip-flops they are most of the state that crosses packets: 1,024
of the ACL's 1,238 live bits, 1,024 of the NAT's 1,483. The state-yielding transform
(hw/transform/yieldable.py) pays about one LUT for every live flip-flop bit (its scan
multiplexer), but reaches a memory through the memory's own ports for a fixed cost. Counters
in a memory are also smaller without the transform: one adder for the bank instead of one
incrementer a counter, and distributed RAM instead of flip-flops.

How it counts at full rate. Every counter may count in every cycle, but the memory has one
write port, so each counter keeps a small *delta* in flip-flops, and a walker folds one row's
delta into the memory each cycle, visiting every row once in ``count`` cycles. A delta
therefore never holds more than ``count`` events (one a cycle between two visits), so
``count.bit_length()`` bits suffice. A clear cannot wait for the walker either: it zeroes the
delta and sets the row's ``cleared`` flag, which makes the row read 0 until the walker
rewrites it. The value of counter ``k`` is, at every cycle,

    value(k) = (0 if cleared[k] else mem[k]) + delta[k]      (modulo 2**width)

which is what plain counters would hold: an event adds 1, a clear in the same cycle as an
event wins (it is the later statement in the NTs this replaces). ``value`` shows the counter
``index`` selects, combinationally, as a flip-flop counter's register would.

:func:`supernic.sim.counter_bank.bank_counts` reads the counts back out of a state capture
with the same formula.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .checksum import pick

__all__ = ["CounterBank"]


class CounterBank(wiring.Component):
    """``count`` counters of ``width`` bits; ``inc[k]`` adds 1 to counter ``k`` and
    ``clear[k]`` zeroes it (a clear wins), at the clock edge; ``value`` is counter ``index``
    (0 for an index out of range). A bank built with ``clears=False`` has no ``clear`` port
    and no ``cleared`` flags (an ACL never clears its counters)."""

    def __init__(self, count, width=64, clears=True):
        if count < 1:
            raise ValueError(f"a counter bank needs at least one counter, not {count}")
        self.count = count
        self.width = width
        self.index_bits = max(1, (count - 1).bit_length())
        self.delta_bits = count.bit_length()
        self.clears = clears
        super().__init__({
            "inc": In(count),
            **({"clear": In(count)} if clears else {}),
            "index": In(self.index_bits),
            "value": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.count
        m.submodules.mem = mem = Memory(shape=self.width, depth=n, init=[])
        write = mem.write_port()
        walk_read = mem.read_port(domain="comb")
        user_read = mem.read_port(domain="comb")
        deltas = [Signal(self.delta_bits, name=f"delta{k}") for k in range(n)]
        cleared = Signal(n, name="cleared") if self.clears else None
        walk = Signal(self.index_bits)

        # The walker: fold row `walk`'s delta into the memory, start its delta afresh.
        walk_delta = pick(m, deltas, walk, "walk_delta")
        m.d.comb += [
            walk_read.addr.eq(walk),
            write.addr.eq(walk),
            write.data.eq(self._unless_cleared(cleared, walk, walk_read.data) + walk_delta),
            write.en.eq(1),
        ]
        m.d.sync += walk.eq(Mux(walk == n - 1, 0, walk + 1))
        for k in range(n):
            with m.If(walk == k):
                m.d.sync += deltas[k].eq(self.inc[k])
                if self.clears:
                    m.d.sync += cleared[k].eq(0)
            with m.Else():
                m.d.sync += deltas[k].eq(deltas[k] + self.inc[k])
            if self.clears:
                with m.If(self.clear[k]):
                    m.d.sync += [deltas[k].eq(0), cleared[k].eq(1)]

        # The selected counter.
        user_delta = pick(m, deltas, self.index, "user_delta")
        m.d.comb += user_read.addr.eq(self.index)
        with m.If(self.index < n):
            m.d.comb += self.value.eq(
                self._unless_cleared(cleared, self.index, user_read.data) + user_delta)
        return m

    @staticmethod
    def _unless_cleared(cleared, index, row):
        return row if cleared is None else Mux(cleared.bit_select(index, 1), 0, row)
