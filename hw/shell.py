"""The top level's clock and registered reset, and its boundary handshakes.

A top level built with this shell has explicit ``clk`` and ``rst`` ports (the same names
Amaranth gives an implicit ``sync`` domain) and defines ``sync`` itself: clocked by ``clk``,
reset by ``rst`` delayed by one flip-flop.

Why the reset is registered: Amaranth lowers a flip-flop's synchronous reset into the
combinational process that computes its next value (``if (rst) next = init``). With ``rst`` a
top-level input, Verilator 5 counts all that logic as input-combinational (its ``ico``
region) and evaluates it on every ``eval()`` (twice a simulated cycle: settle with the clock
low, then the edge), besides once in the ``nba`` region after the edge. The profile of the
default NIC (``snic bench device``) put 47 % of a cycle in ``ico``. Registered, the reset is
a flip-flop and every next-state process depends on flip-flops only. On an FPGA a reset
that leaves a flip-flop is what a reset synchroniser gives anyway: the reset net is then timed
as a register-to-register path like any other.

The design leaves reset on the first edge after ``rst`` falls plus one. So that no transfer is
lost in that edge, every handshake at the boundary is closed while the registered reset is
high: ready and valid outputs low, valid and ready inputs ignored (:func:`connect_port`).
"""

from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.lib.wiring import In

__all__ = ["SHELL_MEMBERS", "registered_reset", "connect_port"]

#: Members a top level adds to its signature for the shell: its clock and reset ports.
SHELL_MEMBERS = {"clk": In(1), "rst": In(1)}


def registered_reset(m: Module, top) -> Signal:
    """Define the ``sync`` domain in ``m`` from ``top.clk`` and ``top.rst`` (registered);
    return the registered reset, high while the design is in reset."""
    m.domains.sync = sync = ClockDomain("sync")
    # Holds the design in reset from time zero until the first edge samples ``rst``.
    in_reset = Signal(init=1, reset_less=True)
    m.d.comb += [sync.clk.eq(top.clk), sync.rst.eq(in_reset)]
    m.d.sync += in_reset.eq(top.rst)
    return in_reset


def _handshake(path):
    return path[-1].endswith(("valid", "ready"))


def connect_port(m: Module, outer, inner, in_reset):
    """Connect ``outer``, an interface of the top level, to ``inner``, a submodule's
    interface of the same signature (both seen from their components: ``In`` members are
    inputs of both), with every ``*valid``/``*ready`` held low while ``in_reset``."""
    if outer.signature != inner.signature:
        raise TypeError(f"Interfaces must have the same signature, not {outer.signature!r} "
                        f"and {inner.signature!r}")
    inner_values = {path: value for path, _, value in inner.signature.flatten(inner)}
    for path, member, value in outer.signature.flatten(outer):
        source, sink = (value, inner_values[path]) if member.flow == In else (
            inner_values[path], value)
        m.d.comb += sink.eq(source & ~in_reset if _handshake(path) else source)

