"""Line-rate header parser: packets in, the same packets out with parse metadata beside them.

How it keeps line rate at any data width: the first ``header_bytes`` of each packet are
captured into a window while every beat also enters a data FIFO. When the window is full or the
packet ends, the window is handed to a pipeline of walk steps (one header per step, one packet
per cycle), whose result enters a metadata FIFO. The output joins the two FIFOs, so the data
streams out at one beat per cycle once its metadata is ready; the FIFOs are sized to cover the
capture and walk latency. Short packets (one beat at 512 bits) need one walk result per cycle,
which the pipeline gives.

Nothing is dropped: every packet comes out, flagged when its headers are bad. A credit counter
holds the input while as many packets are in flight as the metadata FIFO can take.
"""

from amaranth.hdl import Cat, C, Module, Mux, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from ..csr.block import csr_signature
from ..stream import PacketSignature, check_data_width
from ...desc.blocks import parser_block
from ...desc.headers import DEFAULT_EXT_HEADERS, FIRST_HEADER, header_index
from ...desc.meta import RUNT_BYTES, TENANT_KEY_RULES, TOEPLITZ_KEY, ERROR_FLAGS
from .meta import meta_layout
from .toeplitz import toeplitz_hash
from .reach import walk_reach
from .walk import stage_windows, walk_state_layout, walk_step

__all__ = ["HeaderParser"]


def _popcount(value):
    return sum(value[i] for i in range(len(value)))


def _pow2_at_least(n):
    return 1 << (n - 1).bit_length()


class HeaderParser(wiring.Component):
    """Parse Ethernet / 802.1Q / IPv4 / IPv6 / UDP / TCP / VXLAN headers at line rate.

    Parameters
    ----------
    data_width : int
        Bits per beat (64 to 1024).
    header_bytes : int
        Size of the capture window; headers beyond it are not parsed (flag ``too_deep``).
    walk_steps : int
        Headers walked per packet; the pipeline has one register stage per step.
    ext_headers : int
        IP extension headers (RFC 8200 section 4, and the Authentication Header) walked per
        encapsulation layer; one more is ``too_deep``.
    header_checksum : bool
        Check the IPv4 header checksum (RFC 791 section 3.1): a bad one is ``malformed``
        (headers.py rule 3a). Off by default; it widens the steps that can meet IPv4.

    Members
    -------
    i : In(PacketSignature(data_width))
    o : Out(PacketSignature(data_width, meta_layout(header_bytes)))
    csr : Out(csr_signature(parser_block().registers))
        Counters of packets leaving the parser: ``packets``, ``bytes``, ``malformed`` (any
        error flag set).
    """

    def __init__(self, data_width=512, header_bytes=256, walk_steps=11,
                 ext_headers=DEFAULT_EXT_HEADERS, header_checksum=False):
        check_data_width(data_width)
        if data_width < 64:
            raise ValueError(f"Parser data width must be at least 64, not {data_width!r}")
        if (not isinstance(header_bytes, int) or header_bytes < 64
                or header_bytes % (data_width // 8)):
            raise ValueError(f"Header window must be a multiple of {data_width // 8} bytes and "
                             f"at least 64, not {header_bytes!r}")
        if not isinstance(walk_steps, int) or walk_steps < 1:
            raise ValueError(f"Walk steps must be a positive integer, not {walk_steps!r}")
        if not isinstance(ext_headers, int) or not 0 <= ext_headers <= 15:
            raise ValueError(f"Extension headers must be an integer from 0 to 15, "
                             f"not {ext_headers!r}")
        if not isinstance(header_checksum, bool):
            raise ValueError(f"Header checksum must be True or False, not {header_checksum!r}")
        self.ext_headers = ext_headers
        self.header_checksum = header_checksum
        self.data_width = data_width
        self.header_bytes = header_bytes
        self.walk_steps = walk_steps
        self.meta_layout = meta_layout(header_bytes)
        self.capture_beats = header_bytes // (data_width // 8)
        self.pipeline_depth = walk_steps + 2  # capture register, walk steps, finish
        self.fifo_depth = _pow2_at_least(self.capture_beats + self.pipeline_depth + 8)
        super().__init__({
            "i": In(PacketSignature(data_width)),
            "o": Out(PacketSignature(data_width, self.meta_layout)),
            # Its register block (desc parser_block): the counters, read by name.
            "csr": Out(csr_signature(parser_block().registers)),
        })

    def elaborate(self, platform):
        m = Module()
        W, H = self.data_width, self.header_bytes
        nbytes = W // 8

        data_fifo = m.submodules.data_fifo = fifo.SyncFIFOBuffered(
            width=W + nbytes + 1, depth=self.fifo_depth)
        meta_fifo = m.submodules.meta_fifo = fifo.SyncFIFOBuffered(
            width=self.meta_layout.size, depth=self.fifo_depth)

        # --- input: credit check, capture window ---------------------------------------
        in_flight = Signal(range(self.fifo_depth + 1))
        handoff = Signal()
        meta_pop = Signal()
        m.d.comb += self.i.ready.eq(data_fifo.w_rdy & (in_flight < self.fifo_depth))
        take = self.i.valid & self.i.ready
        m.d.comb += [
            data_fifo.w_en.eq(take),
            data_fifo.w_data.eq(Cat(self.i.p.data, self.i.p.keep, self.i.p.last)),
        ]
        m.d.sync += in_flight.eq(in_flight + handoff - meta_pop)

        beat = Signal(range(self.capture_beats + 1))
        avail = Signal(range(H + 1))
        window = Signal(H * 8)
        merged = Signal(H * 8)
        m.d.comb += merged.eq(window)
        with m.Switch(beat):
            for k in range(self.capture_beats):
                with m.Case(k):
                    m.d.comb += merged[k * W:(k + 1) * W].eq(self.i.p.data)
        capturing = beat < self.capture_beats
        # Ingress timestamp: the cycle the first beat was accepted (see meta.py, ``ts``).
        now = Signal(32)
        first_ts = Signal(32)
        m.d.sync += now.eq(now + 1)
        with m.If(take & (beat == 0)):
            m.d.sync += first_ts.eq(now)
        stamp = Mux(beat == 0, now, first_ts)
        avail_now = avail + _popcount(self.i.p.keep)
        m.d.comb += handoff.eq(take & capturing & (self.i.p.last | (beat == self.capture_beats - 1)))

        reach = walk_reach(H, self.walk_steps, self.ext_headers)
        windows = stage_windows(H, reach, self.header_checksum)
        stages = [Signal(walk_state_layout(H, windows[k], self.ext_headers), name=f"walk{k}")
                  for k in range(self.walk_steps + 1)]
        valid = [Signal(name=f"walk{k}_valid") for k in range(self.walk_steps + 1)]
        s0 = stages[0]
        with m.If(take):
            m.d.sync += window.eq(merged)
            with m.If(capturing):
                m.d.sync += avail.eq(avail_now)
            with m.If(self.i.p.last):
                m.d.sync += [beat.eq(0), avail.eq(0)]
            with m.Elif(capturing):
                m.d.sync += beat.eq(beat + 1)
        m.d.sync += valid[0].eq(handoff)
        with m.If(handoff):
            ended = self.i.p.last
            m.d.sync += [
                s0.eq(0),
                s0.hdr.eq(merged[windows[0][0] * 8:windows[0][1] * 8]),
                s0.avail.eq(avail_now),
                s0.ended.eq(ended),
                s0.kind.eq(header_index(FIRST_HEADER)),
                s0.meta.flags.runt.eq(ended & (avail_now < RUNT_BYTES)),
                s0.meta.ts.eq(stamp),
            ]

        # --- the walk: one registered step per header -----------------------------------
        for k in range(self.walk_steps):
            m.d.sync += walk_step(m, stages[k], stages[k + 1], H, reach[k], windows[k:k + 2],
                                  name=f"walk{k}", ext_headers=self.ext_headers,
                                  header_checksum=self.header_checksum)
            m.d.sync += valid[k + 1].eq(valid[k])

        # --- finish: tenant key, flow hash, depth check -> metadata FIFO ----------------
        last_state = stages[-1]
        done = Signal(self.meta_layout)
        m.d.comb += done.eq(last_state.meta)
        with m.If(last_state.kind != 0):
            m.d.comb += done.flags.too_deep.eq(1)
        for cond, key, kind in reversed(TENANT_KEY_RULES):  # first rule wins: apply it last
            with m.If(getattr(last_state.meta, cond) != 0):
                m.d.comb += [done.tenant_kind.eq(int(kind)),
                             done.tenant_key.eq(getattr(last_state.meta, key))]
        m.d.comb += done.flow_hash.eq(toeplitz_hash(m, last_state.meta.flow, TOEPLITZ_KEY))
        finished = Signal(self.meta_layout)
        finished_valid = Signal()
        m.d.sync += [finished.eq(done), finished_valid.eq(valid[-1])]
        m.d.comb += [meta_fifo.w_en.eq(finished_valid), meta_fifo.w_data.eq(finished)]

        # --- output: join data and metadata, tail flags, counters -----------------------
        out_data = data_fifo.r_data[:W]
        out_keep = data_fifo.r_data[W:W + nbytes]
        out_last = data_fifo.r_data[W + nbytes]
        head = self.meta_layout(meta_fifo.r_data)
        m.d.comb += [
            self.o.valid.eq(data_fifo.r_rdy & meta_fifo.r_rdy),
            self.o.p.data.eq(out_data),
            self.o.p.keep.eq(out_keep),
            self.o.p.last.eq(out_last),
            self.o.p.meta.eq(head),
        ]
        sent = Signal(17)          # bytes of this packet already sent (saturating is not needed:
        bad_keep = Signal()        # 17 bits cover any frame a 16-bit IP length can describe)
        total = Signal(range((1 << 17) + nbytes))
        m.d.comb += total.eq(sent + _popcount(out_keep))
        full_keep = C((1 << nbytes) - 1, nbytes)
        contiguous = (out_keep != 0) & ((out_keep & (out_keep + 1)) == 0)
        beat_bad = Signal()
        m.d.comb += beat_bad.eq(Mux(out_last, ~contiguous, out_keep != full_keep))
        with m.If(out_last):
            m.d.comb += [
                self.o.p.meta.flags.length_error.eq(total < head.min_len),
                self.o.p.meta.flags.keep_error.eq(bad_keep | beat_bad),
            ]
        out_take = self.o.valid & self.o.ready
        m.d.comb += [
            data_fifo.r_en.eq(out_take),
            meta_pop.eq(out_take & out_last),
            meta_fifo.r_en.eq(meta_pop),
        ]
        with m.If(out_take):
            with m.If(out_last):
                error = Cat(*[getattr(self.o.p.meta.flags, f) for f in ERROR_FLAGS]).any()
                m.d.sync += [
                    sent.eq(0), bad_keep.eq(0),
                    self.csr.packets.eq(self.csr.packets + 1),
                    self.csr.bytes.eq(self.csr.bytes + total),
                    self.csr.malformed.eq(self.csr.malformed + error),
                ]
            with m.Else():
                m.d.sync += [sent.eq(total), bad_keep.eq(bad_keep | beat_bad)]
        return m
