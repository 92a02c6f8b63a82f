"""ChaCha20 payload encryption gateware: the NT of :mod:`supernic.desc.nt.chacha20` (which
packets, the nonce scheme, the fail-closed ``enable``, the registers).

How (hardware). Beats enter a delay FIFO; as each beat goes in, the blocks its payload needs
are requested from the block function (:mod:`.chacha20_core`), whose results queue in a
keystream FIFO. At the FIFO's head, each beat takes the next ``beat``-byte word of keystream
(a 64-byte block is ``64 // beat`` words), rotated by ``payload_off % beat`` bytes so that
keystream byte 0 lands on byte ``payload_off``; the lanes before that point take the rest of
the previous word. A credit counter keeps the requested-but-unused blocks within the keystream
FIFO, so the block function never waits for room. Keystream for the next packet is computed
while the current one drains, since requests are made at the input. The delay FIFO covers the
block function's latency. Throughput is the block function's: one block per
``20 // rounds_per_cycle`` cycles (iterative) or per cycle (pipelined); a beat of ``w`` bytes
needs ``w / 64`` of a block, so a 64-bit datapath keeps line rate with 4+ rounds per cycle and
a 512-bit one only with a block a cycle (pipelined, or 20 rounds a cycle). Data widths up to
512 bits (a beat at most one block).

Measured under saturation (``saturation`` bench of :mod:`supernic.sim.tb.nt_tb`, Verilator;
output beats per cycle for 64- and 1500-byte TCP/UDP frames; latency in cycles, first beat in
to first beat out):

=====  ==========================  =======  ========  =======
width  build                        64 B     1500 B    latency
=====  ==========================  =======  ========  =======
64     iterative, 1 round/cycle    0.40     0.41      3
64     iterative, 2 rounds/cycle   0.80     0.81      3
64     iterative, 4 (default), 5   1.00     1.00      3
512    iterative, 4 (default)      0.20     0.21      8
512    iterative, 10               0.50     0.51      5
512    20 rounds/cycle (1 stage)   1.00     1.00      4
512    pipelined, 2 or 1 round(s)  1.00     1.00      13, 23
=====  ==========================  =======  ========  =======
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo

from ...desc.meta import L4Kind
from ...desc.nt.chacha20 import BLOCK_BYTES, KEY_REGISTERS, ROUNDS, ChaCha20TaskDescription
from ..stream import packet_layout
from .chacha20_core import ChaCha20Core
from .task import ConfigError, NetworkTask

__all__ = ["ChaCha20Task"]


def _count_word(word, words):
    """The next word of a keystream block, wrapping at ``words`` (none to count at one word)."""
    if words == 1:
        return []
    return [word.eq(Mux(word == words - 1, 0, word + 1))]


def _reset_word(word):
    return [] if isinstance(word, Const) else [word.eq(0)]


def _pow2_at_least(n):
    return 1 << max(0, n - 1).bit_length()


class ChaCha20Task(ChaCha20TaskDescription, NetworkTask):
    """ChaCha20 (RFC 8439) over each TCP/UDP payload; nonce = prefix || packet sequence."""

    def __init__(self, data_width, header_bytes=256, **params):
        if data_width > 8 * BLOCK_BYTES:
            raise ConfigError(f"nt {self.kind}: data width must be at most "
                              f"{8 * BLOCK_BYTES} bits, not {data_width!r}")
        super().__init__(data_width, header_bytes, **params)
        self.rounds_per_cycle = self.p["rounds_per_cycle"]
        self.pipelined = bool(self.p["pipelined"])
        passes = ROUNDS // self.rounds_per_cycle
        beat = data_width // 8
        self.words_per_block = BLOCK_BYTES // beat
        # Cycles from a request to its block at the keystream FIFO's head: the block function
        # (ChaCha20Core.latency), then the FIFO's write and its output register. The delay FIFO
        # must hold the beats that enter in that time; the credits (keystream FIFO entries)
        # must cover the blocks those beats need. An iterative core has one block in flight,
        # so four entries let it run three blocks ahead, across packets.
        latency = passes + 3
        self.delay_depth = _pow2_at_least(latency + 4)
        self.keystream_depth = (
            _pow2_at_least(-(-(latency + 4) // self.words_per_block) + 2)
            if self.pipelined or passes == 1 else 4)

    def _applies(self, m, meta):
        """The packet kinds the NT handles (see the description), from first-beat metadata."""
        f = meta.flags
        inner_l4 = Signal(2)
        m.d.comb += inner_l4.eq(Mux(meta.vxlan, meta.l4_kind[1], meta.l4_kind[0]))
        ok = Signal()
        m.d.comb += ok.eq(~meta.drop & ~f.truncated & ~f.malformed & ~f.runt & ~f.fragment
                          & ~f.too_deep & (inner_l4 != L4Kind.NONE))
        return ok

    def elaborate(self, platform):
        m = Module()
        W = self.data_width
        nbytes = W // 8
        shift = nbytes.bit_length() - 1          # log2 of the beat size in bytes
        R_ = self.words_per_block
        csr = self.csr
        m.submodules.core = core = ChaCha20Core(self.rounds_per_cycle, self.pipelined)
        m.d.comb += core.key.eq(Cat(*(getattr(csr, n) for n in KEY_REGISTERS)))

        entry = data.StructLayout({
            "beat": packet_layout(W, self.meta_layout), "encrypt": 1, "drop": 1})
        m.submodules.delay = delay = fifo.SyncFIFOBuffered(width=entry.size,
                                                           depth=self.delay_depth)
        m.submodules.keystream = keystream = fifo.SyncFIFOBuffered(
            width=8 * BLOCK_BYTES, depth=self.keystream_depth)
        m.d.comb += [
            keystream.w_en.eq(core.o.valid),
            keystream.w_data.eq(core.o.payload),
            core.o.ready.eq(keystream.w_rdy),
        ]

        # Beat counters saturate past the last beat that can still hold header bytes.
        max_header_beats = self.header_bytes // nbytes + 1
        beat_bits = max_header_beats.bit_length()

        # --- input: decide per packet, request keystream blocks, queue the beat --------------
        ip = self.i.p
        in_first = Signal(init=1)
        in_beat = Signal(beat_bits)
        # Which word of the current keystream block the next beat uses. At 512 bits a beat is a
        # whole block (R_ == 1): there is no word to count, and a `range(1)` signal would be
        # zero bits wide (Verilog `[-1:0]`), so the counter is the constant 0 instead.
        in_word = Signal(range(R_), name="in_word") if R_ > 1 else Const(0)
        in_counter = Signal(32, init=1)
        in_encrypt = Signal()
        in_drop = Signal()
        seq = Signal(64)
        blocks = Signal(64)
        outstanding = Signal(range(self.keystream_depth + 1))
        pops = Signal()  # a block leaves the keystream FIFO this cycle (driven below)

        handled = self._applies(m, ip.meta)
        encrypt = Signal()
        drop = Signal()
        m.d.comb += [
            encrypt.eq(Mux(in_first, handled & csr.enable, in_encrypt)),
            drop.eq(Mux(in_first, handled & ~csr.enable, in_drop)),
        ]
        q_in = Signal(beat_bits)
        index_in = Signal(beat_bits)
        uses_word_in = Signal()
        request = Signal()
        m.d.comb += [
            q_in.eq(ip.meta.payload_off >> shift),
            index_in.eq(Mux(in_first, 0, in_beat)),
            uses_word_in.eq(encrypt & (index_in >= q_in)),
            request.eq(uses_word_in & (in_word == 0)),
        ]
        credit = Signal()
        m.d.comb += [
            credit.eq(outstanding < self.keystream_depth),
            core.i.valid.eq(self.i.valid & request & delay.w_rdy & credit),
            core.i.payload.counter.eq(in_counter),
            core.i.payload.nonce.eq(Cat(csr.nonce_prefix, seq)),
            self.i.ready.eq(delay.w_rdy & (~request | (credit & core.i.ready))),
            delay.w_en.eq(self.i.valid & self.i.ready),
        ]
        w_entry = entry(delay.w_data)
        m.d.comb += [w_entry.beat.eq(ip), w_entry.encrypt.eq(encrypt), w_entry.drop.eq(drop)]

        issued = Signal()
        m.d.comb += issued.eq(core.i.valid & core.i.ready)
        m.d.sync += outstanding.eq(outstanding + issued - pops)
        with m.If(issued):
            m.d.sync += blocks.eq(blocks + 1)
        with m.If(delay.w_en):
            m.d.sync += [in_first.eq(ip.last), in_encrypt.eq(encrypt), in_drop.eq(drop)]
            with m.If(index_in < (1 << beat_bits) - 1):
                m.d.sync += in_beat.eq(index_in + 1)
            with m.If(uses_word_in):
                m.d.sync += _count_word(in_word, R_)
            with m.If(request):
                m.d.sync += in_counter.eq(in_counter + 1)
            with m.If(ip.last):
                m.d.sync += [*_reset_word(in_word), in_counter.eq(1)]
                with m.If(encrypt):
                    m.d.sync += seq.eq(seq + 1)

        # --- output: XOR the keystream over the payload lanes ---------------------------------
        head = entry(delay.r_data)
        hb = head.beat
        out_first = Signal(init=1)
        out_beat = Signal(beat_bits)
        out_word = Signal(range(R_), name="out_word") if R_ > 1 else Const(0)  # see in_word
        q_out = Signal(beat_bits)
        r_out = Signal(range(nbytes))
        index_out = Signal(beat_bits)
        uses_word = Signal()
        m.d.comb += [
            q_out.eq(hb.meta.payload_off >> shift),
            r_out.eq(hb.meta.payload_off[:shift] if shift else 0),
            index_out.eq(Mux(out_first, 0, out_beat)),
            uses_word.eq(head.encrypt & (index_out >= q_out)),
        ]

        # This beat's keystream word: word `out_word` of the block at the keystream FIFO head,
        # 0 while the FIFO is empty. A beat that uses a word only leaves with the FIFO
        # non-empty (`advance` below), so the gate changes no output; it says so where the
        # state-yielding transform can see it: the FIFO's read data is read only under its
        # `r_rdy`, so at a packet boundary (every block requested has been used) the read
        # port's 512-bit data register is not live state (hw/transform/liveness.py). The gate
        # is on the word, not the block: a beat's width of gates, not a block's.
        picked = Signal(W)
        if R_ == 1:
            m.d.comb += picked.eq(keystream.r_data)
        else:
            with m.Switch(out_word):
                for k in range(R_):
                    with m.Case(k):
                        m.d.comb += picked.eq(keystream.r_data[k * W:(k + 1) * W])
        word = Signal(W)
        m.d.comb += word.eq(Mux(keystream.r_rdy, picked, 0))

        # Rotate it up by r bytes (lane j takes word byte j - r, mod the beat): keystream byte
        # 0 then sits on the payload's first lane. One shift of the doubled word, a single
        # shifter cell (a barrel shifter in synthesis, a word loop in Verilator).
        r_bits = Signal(range(W), name="r_bits")
        doubled = Signal(2 * W, name="doubled")
        rotated = Signal(W, name="rotated")
        m.d.comb += [
            r_bits.eq(r_out << 3),
            doubled.eq(Cat(word, word) << r_bits),
            rotated.eq(doubled[W:]),
        ]
        previous = Signal(W)  # the previous word of this packet, rotated the same way

        # Lanes from r up take this word; lanes below r take the previous word's tail (beats
        # after the first payload beat) or are header (the first payload beat).
        upper = Signal(W)
        m.d.comb += upper.eq(Const((1 << W) - 1, W) << r_bits)
        # `started`: this packet has used a keystream word on an earlier beat, so `previous`
        # holds its tail (beats after the first payload beat: index > q for an encrypted
        # packet). Kept as a flag, set by a beat that uses a word and cleared by the last beat,
        # rather than compared from the beat index: `previous` is then read only under a bit
        # that is 0 between packets, which lets the state-yielding transform leave it out of
        # a boundary capture (hw/transform/liveness.py).
        started = Signal()
        stream_bytes = Signal(W)
        m.d.comb += stream_bytes.eq(Mux(uses_word, rotated & upper, 0)
                                    | Mux(started, previous & ~upper, 0))

        out_free = Signal()
        advance = Signal()
        m.d.comb += [
            out_free.eq(~self.o.valid | self.o.ready),
            advance.eq(delay.r_rdy & out_free & (~uses_word | keystream.r_rdy)),
            delay.r_en.eq(advance),
            pops.eq(advance & uses_word & ((out_word == R_ - 1) | hb.last)),
            keystream.r_en.eq(pops),
        ]

        out_encrypt = Signal()
        out_drop = Signal()
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(advance):
            m.d.sync += [
                self.o.valid.eq(1),
                self.o.p.data.eq(hb.data ^ stream_bytes),
                self.o.p.keep.eq(hb.keep),
                self.o.p.last.eq(hb.last),
                self.o.p.meta.eq(hb.meta),
                self.o.p.meta.drop.eq(hb.meta.drop | head.drop),
                out_encrypt.eq(head.encrypt),
                out_drop.eq(head.drop),
                out_first.eq(hb.last),
            ]
            with m.If(index_out < (1 << beat_bits) - 1):
                m.d.sync += out_beat.eq(index_out + 1)
            with m.If(uses_word):
                m.d.sync += [previous.eq(rotated), started.eq(1), *_count_word(out_word, R_)]
            with m.If(hb.last):
                m.d.sync += [*_reset_word(out_word), started.eq(0)]

        # --- counters, at the output handshake ------------------------------------------------
        end = self.o.valid & self.o.ready & self.o.p.last
        self.count_standard(m, packets=end, dropped=end & out_drop,
                            skipped=end & ~out_drop & ~out_encrypt)
        m.d.comb += [csr.next_seq.eq(seq), csr.blocks.eq(blocks)]
        return m
