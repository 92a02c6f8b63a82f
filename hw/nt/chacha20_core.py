"""The ChaCha20 block function (RFC 8439 §2.3) in gateware, iterative or pipelined.

Contract of :class:`ChaCha20Core`:

* ``key`` (256 bits, in): the key as the little-endian integer of its 32 bytes, so that state
  word ``4 + i`` (RFC 8439 §2.3: ``k[i]``, each read little-endian) is ``key[32*i:32*i+32]``.
  It must hold still while blocks are in flight: it enters the first round and, again, the
  final feed-forward addition.
* ``i`` (stream in): a request ``{counter, nonce}``; ``nonce`` is the little-endian integer of
  the 12 nonce bytes (state words 13..15 are ``nonce[0:32]``, ``nonce[32:64]``,
  ``nonce[64:96]``) and ``counter`` is state word 12.
* ``o`` (stream out): the 64-byte keystream block for each request, in request order. It is
  already serialised: RFC 8439 §2.3 writes the 16 words out little-endian, so byte ``n`` of the
  block is ``o.payload[8*n:8*n+8]``, which is the AXI4-Stream byte order of
  :mod:`supernic.hw.stream`.

The 20 rounds (10 double rounds, RFC 8439 §2.3: column rounds on even round numbers, diagonal
rounds on odd) are built ``rounds_per_cycle`` at a time, combinationally, and that many rounds
form one stage:

* ``pipelined=False``: one stage, used ``20 // rounds_per_cycle`` times per block. A request is
  taken only when the stage is free: one block every ``interval == 20 // rounds_per_cycle``
  cycles, ``latency`` cycles from request to block.
* ``pipelined=True``: ``20 // rounds_per_cycle`` stages in a row, one block a cycle; when the
  output is not taken the whole pipeline holds (``i.ready`` is then low).

``rounds_per_cycle`` divides 20. An odd count in iterative mode makes the stage begin with a
column round on one pass and a diagonal round on the next, so each round of the stage chooses
its word grouping with a multiplexer; an even count needs none.

A round costs four 32-bit additions in series (the quarter round, RFC 8439 §2.1), so the clock
period grows with ``rounds_per_cycle``; throughput per cycle grows with it too.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ...desc.nt.chacha20 import ROUNDS, ROUNDS_PER_CYCLE

__all__ = ["ChaCha20Core", "request_layout", "CONSTANTS"]

#: State words 0..3: "expand 32-byte k" read as four little-endian words (RFC 8439 §2.3).
CONSTANTS = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)

# The quarter rounds of a column round and of a diagonal round: indices into the state
# (RFC 8439 §2.3, "inner_block").
_COLUMN = ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15))
_DIAGONAL = ((0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14))


def request_layout():
    return data.StructLayout({"counter": 32, "nonce": 96})


def _quarter_round(m, a, b, c, d, name):
    """RFC 8439 §2.1. Every step is a named signal: each is read twice, and Amaranth would
    copy an unnamed expression into both readers (tried: the Verilog of a pipelined core grew
    fivefold and its C++ build took five times as long)."""
    def add(x, y, tag):
        s = Signal(32, name=f"{name}_{tag}")
        m.d.comb += s.eq(x + y)
        return s

    def xor_rotate(x, y, n, tag):
        s = Signal(32, name=f"{name}_{tag}")
        m.d.comb += s.eq((x ^ y).rotate_left(n))
        return s

    a = add(a, b, "a1")
    d = xor_rotate(d, a, 16, "d1")
    c = add(c, d, "c1")
    b = xor_rotate(b, c, 12, "b1")
    a = add(a, b, "a2")
    d = xor_rotate(d, a, 8, "d2")
    c = add(c, d, "c2")
    b = xor_rotate(b, c, 7, "b2")
    return a, b, c, d


def _round(m, words, diagonal, name):
    """One round over 16 words. ``diagonal`` is a Python bool (a fixed round) or a 1-bit value
    choosing the grouping at run time."""
    out = [None] * 16
    if isinstance(diagonal, bool):
        for q, group in enumerate(_DIAGONAL if diagonal else _COLUMN):
            result = _quarter_round(m, *(words[i] for i in group), name=f"{name}_q{q}")
            for i, value in zip(group, result):
                out[i] = value
        return out
    # Run-time choice: quarter round q takes its inputs from the column or the diagonal group
    # and its results go back to the same places.
    back = {}
    for q in range(4):
        inputs = []
        for p in range(4):
            s = Signal(32, name=f"{name}_q{q}_in{p}")
            m.d.comb += s.eq(Mux(diagonal, words[_DIAGONAL[q][p]], words[_COLUMN[q][p]]))
            inputs.append(s)
        result = _quarter_round(m, *inputs, name=f"{name}_q{q}")
        for p in range(4):
            back[("c", _COLUMN[q][p])] = result[p]
            back[("d", _DIAGONAL[q][p])] = result[p]
    for i in range(16):
        s = Signal(32, name=f"{name}_w{i}")
        m.d.comb += s.eq(Mux(diagonal, back[("d", i)], back[("c", i)]))
        out[i] = s
    return out


def _words(value):
    return [value[32 * i:32 * i + 32] for i in range(len(value) // 32)]


class ChaCha20Core(wiring.Component):
    def __init__(self, rounds_per_cycle=2, pipelined=False):
        if rounds_per_cycle not in ROUNDS_PER_CYCLE:
            raise ValueError(f"Rounds per cycle must be one of {list(ROUNDS_PER_CYCLE)}, "
                             f"not {rounds_per_cycle!r}")
        if not isinstance(pipelined, bool):
            raise TypeError(f"Pipelined must be a bool, not {pipelined!r}")
        self.rounds_per_cycle = rounds_per_cycle
        self.pipelined = pipelined
        self.passes = ROUNDS // rounds_per_cycle
        super().__init__({
            "key": In(256),
            "i": In(stream.Signature(request_layout())),
            "o": Out(stream.Signature(512)),
        })

    @property
    def latency(self):
        """Cycles from a request taken to its block valid, with the output always ready."""
        return self.passes

    @property
    def interval(self):
        """Cycles between requests taken under saturation."""
        return 1 if self.pipelined else self.passes

    def _initial(self, request):
        """The 16-word input state of RFC 8439 §2.3 for a request ``{counter, nonce}``."""
        return ([Const(c, 32) for c in CONSTANTS] + _words(self.key)
                + [request.counter] + _words(request.nonce))

    def _stage(self, m, words, first_round, name):
        """``rounds_per_cycle`` rounds; ``first_round`` is an int or, for an iterative core
        with an odd count, a 1-bit value that is 1 when the stage starts on a diagonal."""
        for r in range(self.rounds_per_cycle):
            if isinstance(first_round, int):
                diagonal = bool((first_round + r) % 2)
            else:
                diagonal = first_round ^ (r % 2)
            words = _round(m, words, diagonal, f"{name}_r{r}")
        return words

    def _feed_forward(self, m, words, request, name):
        """RFC 8439 §2.3: add the input state to the result of the rounds, word by word."""
        out = []
        for i, (w, x) in enumerate(zip(words, self._initial(request))):
            s = Signal(32, name=f"{name}_ff{i}")
            m.d.comb += s.eq(w + x)
            out.append(s)
        return Cat(*out)

    def elaborate(self, platform):
        m = Module()
        if self.pipelined or self.passes == 1:
            self._elaborate_pipelined(m)
        else:
            self._elaborate_iterative(m)
        return m

    def _elaborate_pipelined(self, m):
        n, k = self.passes, self.rounds_per_cycle
        # The whole pipeline moves together, or holds while its last block waits.
        advance = Signal()
        m.d.comb += [advance.eq(~self.o.valid | self.o.ready), self.i.ready.eq(advance)]
        words, request, valid = self._initial(self.i.payload), self.i.payload, self.i.valid
        for s in range(n - 1):
            rounded = self._stage(m, words, s * k, f"s{s}")
            regs = [Signal(32, name=f"s{s}_w{i}") for i in range(16)]
            req = Signal(request_layout(), name=f"s{s}_req")
            v = Signal(name=f"s{s}_valid")
            with m.If(advance):
                m.d.sync += [r.eq(x) for r, x in zip(regs, rounded)]
                m.d.sync += [req.eq(request), v.eq(valid)]
            words, request, valid = regs, req, v
        last = self._stage(m, words, (n - 1) * k, f"s{n - 1}")
        block = self._feed_forward(m, last, request, "out")
        with m.If(advance):
            m.d.sync += [self.o.payload.eq(block), self.o.valid.eq(valid)]

    def _elaborate_iterative(self, m):
        n, k = self.passes, self.rounds_per_cycle
        busy = Signal()
        pass_ = Signal(range(n))
        state = [Signal(32, name=f"state_w{i}") for i in range(16)]
        saved = Signal(request_layout())
        # Idle: the stage works on the new request's input state, so the taking cycle already
        # does the first rounds and no cycle is spent loading.
        initial = self._initial(self.i.payload)
        source = []
        for i in range(16):
            s = Signal(32, name=f"source_w{i}")
            m.d.comb += s.eq(Mux(busy, state[i], initial[i]))
            source.append(s)
        # Pass p begins at round p * k: with an even k always a column round, with an odd k a
        # diagonal round on odd passes.
        first_round = 0 if k % 2 == 0 else pass_[0]
        rounded = self._stage(m, source, first_round, "stage")
        block = self._feed_forward(m, rounded, saved, "out")
        out_free = Signal()
        m.d.comb += [
            out_free.eq(~self.o.valid | self.o.ready),
            self.i.ready.eq(~busy & out_free),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [r.eq(x) for r, x in zip(state, rounded)]
            m.d.sync += [saved.eq(self.i.payload), busy.eq(1), pass_.eq(1)]
        with m.Elif(busy):
            with m.If(pass_ == n - 1):
                # The last pass writes the block only when the output register is free.
                with m.If(out_free):
                    m.d.sync += [self.o.payload.eq(block), self.o.valid.eq(1),
                                 busy.eq(0), pass_.eq(0)]
            with m.Else():
                m.d.sync += [r.eq(x) for r, x in zip(state, rounded)]
                m.d.sync += pass_.eq(pass_ + 1)
