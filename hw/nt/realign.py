"""Streaming byte realignment for the NTs that move headers (VLAN push/pop, VXLAN encap/decap).

:class:`Realigner` contract. For each packet, the output is ``head[:P] + frame[D:]`` padded with
zero bytes to at least ``pad`` bytes, where ``head`` (up to ``max_head`` bytes), ``P``, ``D``
(up to ``max_drop``), ``pad`` (up to ``max_pad``) and the packet's new metadata come from the
``ctl`` port, which is sampled together with the packet's first beat on ``i`` (``first`` tells
the NT which beat that is, so it can compute ``ctl`` from it). A packet that ends before its
``D``-th byte gives ``head[:P]`` (padded); if that is empty too, one beat with ``keep == 0`` and
``last`` set, so every packet still gives exactly one packet out. ``P = D = pad = 0`` passes a
packet through unchanged (the skip rule). Output metadata is ``ctl.meta`` on every beat, except
the tail flags (``length_error``, ``keep_error``), which are taken from the input's last beat
and put on the output's last beat. Bytes of a beat that ``keep`` does not mark read zero.

How it streams. With ``t = P - D``, output byte ``j >= P`` is input byte ``j - t``, so output beat
``k`` is the top ``s = t mod W`` bytes of input beat ``k - a - 1`` followed by the low ``W - s``
bytes of input beat ``k - a`` (``a = floor(t / W)``), with the head laid over the bytes below
``P``. ``s`` and ``a`` are fixed per packet, so one log shifter of two beats (the previous input
beat and the current one) serves the whole packet:

* growing (``a >= 0``): ``a`` pure-head beats come out before the first input beat is taken, so
  a head shorter than a beat is merged into the first input beat and costs nothing; a packet
  whose last beat spills past the beat boundary costs one extra *flush* beat. The output runs at
  one beat a cycle; the input stalls only for those extra beats.
* shrinking (``a < 0``): the first ``-a`` input beats are taken without output (they prime the
  previous-beat register). A packet's output beats after its last input beat (the flush beat of
  spilled bytes, then padding or a head longer than the packet) need no input, so they go out
  while the next packet's dropped beats are taken: the flush beat from the core, in the cycle
  the next packet's first beat is taken, and the rest from the *fill unit*, which holds the
  head and padding still due and owns the output register until they are out, leaving the core
  free to drop. The input runs at one beat a cycle as long as those beats are no more than the
  next packet's dropped beats. Back-to-back 64-byte VXLAN frames decapsulated at 64 bits
  (``D = 50``, padded to 60 bytes) are 7 beats dropped, 1 streamed and 7 flushed: 8 beats in
  and 8 out every 8 cycles. Where they are more, the input waits while the output goes on at
  one beat a cycle.

Head, padding and the window are merged with masks made by shifting a constant (head bytes and
padding cover a prefix of the beat), not per byte lane; the input register zeroes the bytes
outside ``keep``, so the window needs no mask of its own.

Stages: an input register holding the beat and its precomputed control (so the NT's control
logic ends in a register), the realignment core beside the fill unit, and an output register.
``i.ready`` follows ``o.ready`` combinationally; ``o.valid`` comes from a register.

:class:`HeadWindow` gives an NT the first ``window_bytes`` of a packet beside its first beat
when a beat is narrower than that (the MAC addresses span two beats at 64 bits): a short shift
register that releases a beat once the next ``G - 1`` beats (or the packet's end) are behind it.
It passes one beat a cycle and adds ``G - 1`` cycles of latency (none when ``G == 1``).

:func:`skip_rule` is the contract's skip test (rule 3) in gateware.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import bits_for, exact_log2

from ...desc.meta import TAIL_FLAGS
from ..stream import PacketSignature, check_data_width

__all__ = ["Realigner", "HeadWindow", "control_layout", "skip_rule", "byte_mask"]

#: Parse errors known on the first beat: with ``drop`` they make an NT pass a packet unchanged
#: (hw/nt/task.py rule 3; the model side is ``sim/nt/base.py:SKIP_FLAGS``).
_SKIP_FLAGS = ("truncated", "malformed", "runt")


def skip_rule(meta):
    """1 if the contract says the packet passes unchanged (dropped or a first-beat error)."""
    return meta.drop | Cat(*[meta.flags[f] for f in _SKIP_FLAGS]).any()


def byte_mask(lanes):
    """Expand a per-byte mask to a per-bit mask (8 bits a lane)."""
    return Cat(*[lanes[b].replicate(8) for b in range(len(lanes))])


def control_layout(meta_layout, max_head, max_drop, max_pad=0):
    """The ``ctl`` struct: head bytes (byte ``j`` at bits ``8j..8j+7``), ``p``, ``d``, ``pad``,
    and the packet's new metadata."""
    return data.StructLayout({
        "head": 8 * max(max_head, 1),
        "p": bits_for(max_head),
        "d": bits_for(max_drop),
        "pad": bits_for(max_pad),
        "meta": meta_layout,
    })


def _check_count(thing, value, high):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
        raise ValueError(f"{thing} must be an integer from 0 to {high}, not {value!r}")
    return value


def _shift_lanes_up(m, value, amount, lane_bits, name):
    """``value << (amount * lane_bits)`` truncated to ``len(value)``, one 2:1 stage per bit of
    ``amount``, each stage a named signal (a wide variable shift converts badly)."""
    cur = value
    for i in range(len(amount)):
        nxt = Signal(len(value), name=f"{name}_{i}")
        m.d.comb += nxt.eq(Mux(amount[i], cur << ((1 << i) * lane_bits), cur))
        cur = nxt
    return cur


class Phase(enum.Enum, shape=3):
    IDLE = 0    # between packets: the input register holds nothing or a packet's first beat
    DROP = 1    # shrinking: input beats taken without output, priming the previous beat
    PRE = 2     # growing: pure-head beats before the first input beat is taken
    STREAM = 3  # one input beat in, one output beat out
    FLUSH = 4   # after the last input beat: the spilled bytes, head or padding still due


class Realigner(wiring.Component):
    """Replace the first ``D`` bytes of each packet with ``P`` new ones, streaming.

    Parameters
    ----------
    data_width : int
        Bits a beat, 64 to 1024.
    meta_layout : Layout
        The metadata beside every beat (it must have the tail flags).
    max_head, max_drop, max_pad : int
        Largest ``P``, ``D`` and ``pad`` (bytes); they size the registers and the counters.

    Members
    -------
    i : In(PacketSignature)
    ctl : In(control_layout(...))
        Sampled with the first beat of each packet on ``i``.
    first : Out(1)
        The beat on ``i`` is the first of its packet.
    o : Out(PacketSignature)
    """

    def __init__(self, data_width, meta_layout, max_head, max_drop, max_pad=0):
        check_data_width(data_width)
        if data_width < 64:
            raise ValueError(f"Realigner data width must be at least 64, not {data_width!r}")
        self.max_head = _check_count("Realigner max_head", max_head, 4096)
        self.max_drop = _check_count("Realigner max_drop", max_drop, 4096)
        self.max_pad = _check_count("Realigner max_pad", max_pad, 4096)
        self.data_width = data_width
        self.meta_layout = meta_layout
        self.ctl_layout = control_layout(meta_layout, max_head, max_drop, max_pad)
        super().__init__({
            "i": In(PacketSignature(data_width, meta_layout)),
            "ctl": In(self.ctl_layout),
            "first": Out(1),
            "o": Out(PacketSignature(data_width, meta_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.data_width // 8
        lw = exact_log2(W)
        head_bytes = W * -(-max(self.max_head, 1) // W)  # shifts out one beat of head a beat
        max_fill = max(self.max_head, self.max_pad)
        max_pre = self.max_head // W
        max_dropped = -(-self.max_drop // W)
        meta_bits = self.meta_layout.size
        # The fill unit (see the docstring) pays only where a packet can start with dropped
        # beats and its head or padding can outlast the beat that ends its window bytes.
        fill_unit = self.max_drop > 0 and max_fill > W
        i, o, ctl = self.i, self.o, self.ctl

        def tail_of(meta):
            return Cat(*[meta.flags[f] for f in TAIL_FLAGS])

        def lanes(count):  # byte lanes of a beat that ``count`` bytes still due cover
            return Mux(count > W, W, count)

        def less_a_beat(count):
            return Mux(count > W, count - W, 0)

        def prefix_mask(nlanes, lane_bits):  # the low ``nlanes`` lanes set, by a shift
            return ~(Const(2 ** (W * lane_bits) - 1, W * lane_bits) << (nlanes * lane_bits))

        # ---- input register: the beat and its precomputed control -------------------------
        in_mid = Signal()  # the last accepted beat did not end its packet
        x_valid = Signal()
        x_data = Signal(8 * W)  # bytes outside keep are zeroed here, so padding reads zero
        x_keep = Signal(W)
        x_last = Signal()
        x_tail = Signal(len(TAIL_FLAGS))
        x_drop = Signal(range(max_dropped + 2))
        x_take = Signal()

        shift = Signal(signed(max(len(ctl.p), len(ctl.d)) + 2))
        shift_beats = Signal(signed(len(shift)))
        m.d.comb += [
            self.first.eq(~in_mid),
            shift.eq(ctl.p - ctl.d),
            shift_beats.eq(shift >> lw),  # arithmetic: floor((P - D) / W)
        ]

        # The packet's own state, fixed with its first beat: ``s``; ``pre``, the pure-head beats
        # still due; ``head`` and ``hrem``, the head bytes still due; ``frem``, the head or
        # padding bytes still due; the new metadata (a plain vector: a signal with a struct
        # shape gets a named wire per field in the Verilog, which Verilator, with every signal
        # public for cocotb, turns into a lot of code for nothing). A build whose sizes keep a
        # part at 0 (no head; no head longer than a beat; nothing to fill) has no register for
        # it: Verilog has no zero-width vector.
        shapes = {"s": lw, "meta": meta_bits}
        first_value = {"s": shift[:lw], "meta": ctl.meta}
        if max_pre:
            shapes["pre"] = range(max_pre + 1)
            first_value["pre"] = Mux(shift_beats > 0, shift_beats, 0)
        if self.max_head:
            shapes["head"] = 8 * head_bytes
            first_value["head"] = ctl.head
            shapes["hrem"] = range(self.max_head + 1)
            first_value["hrem"] = ctl.p
        if max_fill:
            shapes["frem"] = range(max_fill + 1)
            first_value["frem"] = Mux(ctl.p > ctl.pad, ctl.p, ctl.pad)
        x = {f: Signal(shape, name=f"x_{f}") for f, shape in shapes.items()}

        m.d.comb += i.ready.eq(~x_valid | x_take)
        with m.If(i.valid & i.ready):
            m.d.sync += [
                x_valid.eq(1),
                x_data.eq(i.p.data & byte_mask(i.p.keep)),
                x_keep.eq(i.p.keep),
                x_last.eq(i.p.last),
                x_tail.eq(tail_of(i.p.meta)),
                in_mid.eq(~i.p.last),
            ]
            with m.If(~in_mid):
                m.d.sync += x_drop.eq(Mux(shift_beats < 0, -shift_beats, 0))
                m.d.sync += [x[f].eq(first_value[f]) for f in shapes]
        with m.Elif(x_take):
            m.d.sync += x_valid.eq(0)

        # ---- core state -------------------------------------------------------------------
        phase = Signal(Phase)
        c = {f: Signal(shape, name=f"c_{f}") for f, shape in shapes.items()}
        c_drop = Signal.like(x_drop)
        c_prev_data = Signal(8 * W)
        c_prev_keep = Signal(W)
        c_tail = Signal(len(TAIL_FLAGS))

        o_valid = Signal()
        o_data = Signal(8 * W)
        o_keep = Signal(W)
        o_last = Signal()
        o_meta = Signal(meta_bits)
        m.d.comb += [
            o.valid.eq(o_valid), o.p.data.eq(o_data), o.p.keep.eq(o_keep),
            o.p.last.eq(o_last), o.p.meta.eq(o_meta),
        ]
        can_load = Signal()
        m.d.comb += can_load.eq(~o_valid | o.ready)
        core_load = Signal()  # the output register can take a beat from the core
        if fill_unit:
            f_valid = Signal()  # the fill unit owns the output register until its last beat
            do_fill = Signal()  # the fill unit sends a beat
            m.d.comb += core_load.eq(can_load & ~f_valid)
        else:
            m.d.comb += core_load.eq(can_load)

        # The view: between packets the packet's state comes straight from the input register,
        # so a packet starts on the cycle after the previous one ends, with no bubble.
        idle = Signal()
        m.d.comb += idle.eq(phase == Phase.IDLE)
        v = {f: Signal(shape, name=f"v_{f}") for f, shape in shapes.items()}
        v_prev_keep = Signal(W)
        m.d.comb += [v[f].eq(Mux(idle, x[f], c[f])) for f in shapes]
        m.d.comb += v_prev_keep.eq(Mux(idle, 0, c_prev_keep))
        ep_stream = Signal()
        ep_flush = Signal()
        starts_streaming = x_valid & (x_drop == 0)
        if max_pre:
            ep_pre = Signal()
            m.d.comb += ep_pre.eq(Mux(idle, starts_streaming & (x["pre"] != 0),
                                      phase == Phase.PRE))
            starts_streaming &= x["pre"] == 0
        m.d.comb += [
            ep_stream.eq(Mux(idle, starts_streaming, phase == Phase.STREAM)),
            ep_flush.eq(phase == Phase.FLUSH),
        ]
        # The input register's beat is this cycle's streamed beat. Every read of the input
        # register below is under it (or under ``x_valid`` itself): with the register empty
        # nothing it holds can reach an output, which is what lets a transform leave it out
        # at a packet boundary (hw/transform/liveness.py: guarded by ``x_valid``).
        streamed = Signal()
        m.d.comb += streamed.eq(ep_stream & x_valid)

        # ---- the window: previous beat's top s bytes, then the current beat's low bytes ------
        # Only a streamed beat and a live previous beat contribute (their bytes outside keep
        # are zero): a flush beat's padding must read zero.
        lo_data = Signal(8 * W)
        hi_data = Signal(8 * W)
        hi_keep = Signal(W)
        m.d.comb += [
            lo_data.eq(Mux(v_prev_keep.any(), c_prev_data, 0)),
            hi_data.eq(Mux(streamed, x_data, 0)),
            hi_keep.eq(Mux(streamed, x_keep, 0)),
        ]
        both_data = _shift_lanes_up(m, Cat(lo_data, hi_data), v["s"], 8, "rot_data")
        both_keep = _shift_lanes_up(m, Cat(v_prev_keep, hi_keep), v["s"], 1, "rot_keep")
        spill_keep = _shift_lanes_up(m, Cat(hi_keep, Const(0, W)), v["s"], 1, "spill_keep")
        w_data = Signal(8 * W)
        w_keep = Signal(W)
        m.d.comb += [
            w_data.eq(both_data[8 * W:]),
            w_keep.eq(both_keep[W:]),
        ]
        spill = Signal()  # the current beat's top bytes belong to the next output beat
        m.d.comb += spill.eq(spill_keep[W:].any())

        # Head and padding cover the first bytes of the beat: masks from a shift, not per lane.
        out_data = Signal(8 * W)
        out_keep = Signal(W)
        out_last = Signal()
        more_fill = Signal()  # head or padding continues past this output beat
        if self.max_head:
            head_mask = Signal(8 * W)
            m.d.comb += [
                head_mask.eq(prefix_mask(lanes(v["hrem"]), 8)),
                out_data.eq((v["head"][:8 * W] & head_mask) | (w_data & ~head_mask)),
            ]
        else:
            m.d.comb += out_data.eq(w_data)
        if max_fill:
            fill_keep = Signal(W)
            m.d.comb += [
                fill_keep.eq(prefix_mask(lanes(v["frem"]), 1)),
                more_fill.eq(v["frem"] > W),
                out_keep.eq(w_keep | fill_keep),
            ]
        else:
            m.d.comb += [more_fill.eq(0), out_keep.eq(w_keep)]

        do_stream, do_flush, do_drop, start_drop = (Signal(name=n) for n in (
            "do_stream", "do_flush", "do_drop", "start_drop"))
        flush_last = Signal()
        flush_done = do_flush if fill_unit else do_flush & flush_last  # the core's last beat
        core_beat = Signal()
        m.d.comb += [
            do_stream.eq(streamed & core_load),
            do_flush.eq(ep_flush & core_load),
            do_drop.eq((phase == Phase.DROP) & x_valid),
            flush_last.eq(~more_fill),
            # A shrinking packet starts by taking a beat without output, so it can start while
            # the previous packet sends its (with the fill unit: first) flush beat.
            start_drop.eq(x_valid & (x_drop != 0) & (idle | flush_done)),
            x_take.eq(do_stream | do_drop | start_drop),
            out_last.eq(Mux(streamed, x_last & ~spill & ~more_fill, ep_flush & flush_last)),
        ]
        if max_pre:
            do_pre = Signal()
            m.d.comb += [
                do_pre.eq(ep_pre & core_load),
                core_beat.eq(do_pre | do_stream | do_flush),
            ]
        else:
            m.d.comb += core_beat.eq(do_stream | do_flush)

        out_meta = Signal(meta_bits)
        tail = Signal(len(TAIL_FLAGS))
        m.d.comb += [
            out_meta.eq(v["meta"]),
            tail.eq(Mux(out_last, Mux(streamed, x_tail, c_tail), 0)),
        ]
        out_view = data.View(self.meta_layout, out_meta)
        for n, f in enumerate(TAIL_FLAGS):
            m.d.comb += out_view.flags[f].eq(tail[n])

        # What is still due after this output beat.
        after = {f: v[f] for f in ("s", "meta")}
        if self.max_head:
            after["head"] = v["head"] >> (8 * W)
            after["hrem"] = less_a_beat(v["hrem"])
        if max_fill:
            after["frem"] = less_a_beat(v["frem"])

        with m.If(can_load):
            m.d.sync += o_valid.eq(core_beat | do_fill if fill_unit else core_beat)
        with m.If(core_beat):
            m.d.sync += [
                o_data.eq(out_data), o_keep.eq(out_keep), o_last.eq(out_last),
                o_meta.eq(out_meta), c_prev_keep.eq(v_prev_keep),
            ]
            m.d.sync += [c[f].eq(after[f]) for f in after]
        if max_pre:
            with m.If(do_pre):
                m.d.sync += c["pre"].eq(v["pre"] - 1)
                with m.If(idle):
                    # Nothing reads it in the pure-head beats (the previous beat's keep is 0
                    # there), but loading it as the packet leaves the idle phase makes it a
                    # function of this packet alone, so a transform can leave it out at a
                    # packet boundary (hw/transform/liveness.py: guarded by ``phase``).
                    m.d.sync += c_prev_data.eq(x_data)
                with m.If(v["pre"] == 1):
                    m.d.sync += phase.eq(Phase.STREAM)
                with m.Else():
                    m.d.sync += phase.eq(Phase.PRE)
        with m.If(do_stream):
            m.d.sync += [c_prev_data.eq(x_data), c_prev_keep.eq(x_keep)]
            if max_pre:
                m.d.sync += c["pre"].eq(0)
            with m.If(x_last):
                m.d.sync += c_tail.eq(x_tail)
                # With the fill unit, a flush beat is due only for spilled bytes.
                with m.If(spill if fill_unit else spill | more_fill):
                    m.d.sync += phase.eq(Phase.FLUSH)
                with m.Else():
                    m.d.sync += phase.eq(Phase.IDLE)
            with m.Else():
                m.d.sync += phase.eq(Phase.STREAM)
        with m.If(do_flush):
            m.d.sync += c_prev_keep.eq(0)  # the spilled bytes go out once
            with m.If(flush_done):
                m.d.sync += phase.eq(Phase.IDLE)
        with m.If(do_drop):
            m.d.sync += [c_prev_data.eq(x_data), c_prev_keep.eq(x_keep), c_drop.eq(c_drop - 1)]
            with m.If(x_last):
                # Ended inside the dropped beats: only the beat just before the first output
                # beat can carry bytes past D into it.
                m.d.sync += [c_tail.eq(x_tail), phase.eq(Phase.FLUSH)]
                with m.If(c_drop != 1):
                    m.d.sync += c_prev_keep.eq(0)
            with m.Elif(c_drop == 1):
                m.d.sync += phase.eq(Phase.STREAM)
        with m.If(start_drop):  # after the flush assignments: a later assignment wins
            # (x_pre is 0 here: a packet with dropped beats has no pure-head beats.)
            m.d.sync += [c[f].eq(x[f]) for f in shapes]
            m.d.sync += [c_drop.eq(x_drop - 1), c_prev_data.eq(x_data), c_prev_keep.eq(x_keep)]
            with m.If(x_last):
                m.d.sync += [c_tail.eq(x_tail), phase.eq(Phase.FLUSH)]
                with m.If(x_drop != 1):
                    m.d.sync += c_prev_keep.eq(0)
            with m.Elif(x_drop == 1):
                m.d.sync += phase.eq(Phase.STREAM)
            with m.Else():
                m.d.sync += phase.eq(Phase.DROP)

        if not fill_unit:
            return m

        # ---- the fill unit: head and padding past a packet's last window bytes --------------
        # It takes over from the core beat that sends the packet's last window bytes, so the
        # core is free to take the next packet's dropped beats while the fill goes out. Its
        # beats carry the metadata already in the output register, with the tail flags added
        # on the last one.
        to_fill = Signal()
        m.d.comb += to_fill.eq(more_fill & (do_flush | (do_stream & x_last & ~spill)))
        f_frem = Signal(range(max_fill - W + 1))
        f_tail = Signal(len(TAIL_FLAGS))
        f_last = Signal()
        f_keep = Signal(W)
        m.d.comb += [
            do_fill.eq(f_valid & can_load),
            f_last.eq(f_frem <= W),
            f_keep.eq(prefix_mask(lanes(f_frem), 1)),
        ]
        fill_data = Const(0, 8 * W)
        if self.max_head > W:  # a head longer than a beat can outlast a runt's window bytes
            f_head = Signal(8 * (head_bytes - W))
            f_hrem = Signal(range(self.max_head - W + 1))
            fill_data = Signal(8 * W)
            m.d.comb += fill_data.eq(f_head[:8 * W] & prefix_mask(lanes(f_hrem), 8))
            with m.If(to_fill):
                m.d.sync += [f_head.eq(after["head"]), f_hrem.eq(after["hrem"])]
            with m.Elif(do_fill):
                m.d.sync += [f_head.eq(f_head >> (8 * W)), f_hrem.eq(less_a_beat(f_hrem))]
        o_view = data.View(self.meta_layout, o_meta)
        with m.If(to_fill):
            m.d.sync += [
                f_valid.eq(1), f_frem.eq(after["frem"]),
                f_tail.eq(Mux(streamed, x_tail, c_tail)),
            ]
        with m.Elif(do_fill):
            m.d.sync += [
                o_data.eq(fill_data), o_keep.eq(f_keep), o_last.eq(f_last),
                f_valid.eq(~f_last), f_frem.eq(less_a_beat(f_frem)),
            ]
            with m.If(f_last):
                m.d.sync += [o_view.flags[f].eq(f_tail[n]) for n, f in enumerate(TAIL_FLAGS)]
        return m


class HeadWindow(wiring.Component):
    """Pass packets through; beside each beat, ``window`` holds it and the ``G - 1`` beats
    behind it (``G = ceil(window_bytes / beat bytes)``), so on a packet's first beat it holds the
    packet's first ``window_bytes``. Beats past the packet's last beat read 0 (bytes of the last
    beat outside ``keep`` are as the input carried them).

    Why 0 and not whatever an entry last held: an entry is then read only while its valid bit
    is 1, so at a packet boundary, where every valid bit is 0, the entries hold nothing the
    future depends on, and the state-yielding transform's liveness analysis
    (hw/transform/liveness.py) leaves them out of the state (599 bits an entry at 64 bits)."""

    def __init__(self, data_width, meta_layout, window_bytes):
        check_data_width(data_width)
        _check_count("Head window bytes", window_bytes, 4096)
        self.data_width = data_width
        self.meta_layout = meta_layout
        self.depth = max(1, -(-window_bytes // (data_width // 8)))
        super().__init__({
            "i": In(PacketSignature(data_width, meta_layout)),
            "o": Out(PacketSignature(data_width, meta_layout)),
            "window": Out(self.depth * data_width),
        })

    def elaborate(self, platform):
        m = Module()
        i, o, G = self.i, self.o, self.depth
        if G == 1:
            m.d.comb += [
                o.valid.eq(i.valid), o.p.eq(i.p), i.ready.eq(o.ready),
                self.window.eq(i.p.data),
            ]
            return m
        layout = i.p.shape()
        valid = [Signal(name=f"e{j}_valid") for j in range(G)]
        entry = [Signal(layout, name=f"e{j}") for j in range(G)]
        ends = Cat(*[valid[j] & entry[j].last for j in range(G - 1)]).any()
        # same[j]: entry j holds a beat of entry 0's packet.
        same = [Signal(name=f"e{j}_same") for j in range(G)]
        m.d.comb += same[0].eq(valid[0])
        for j in range(1, G):
            m.d.comb += same[j].eq(same[j - 1] & ~entry[j - 1].last & valid[j])
        take = Signal()
        m.d.comb += [
            o.valid.eq(valid[0] & (valid[G - 1] | ends)),
            o.p.eq(entry[0]),
            self.window.eq(Cat(entry[0].data,
                               *[Mux(same[j], entry[j].data, 0) for j in range(1, G)])),
            take.eq(o.valid & o.ready),
            i.ready.eq(~valid[G - 1] | take),
        ]
        # Entries fill from 0 up; on a take every entry moves down one place, and a new beat
        # lands in the first free place after that move.
        after = [Signal(name=f"after{j}_valid") for j in range(G)]
        for j in range(G):
            above = valid[j + 1] if j + 1 < G else Const(0)
            m.d.comb += after[j].eq(Mux(take, above, valid[j]))
            lands = i.valid & i.ready & ~after[j] & (after[j - 1] if j else Const(1))
            with m.If(lands):
                m.d.sync += [valid[j].eq(1), entry[j].eq(i.p)]
            with m.Else():
                m.d.sync += valid[j].eq(after[j])
                if j + 1 < G:
                    with m.If(take):
                        m.d.sync += entry[j].eq(entry[j + 1])
        return m
