"""L4 load balancer gateware; what it rewrites, how the backend is chosen and its registers are
in :mod:`supernic.desc.nt.load_balancer`.

``flow_hash mod M`` is exact, computed without a divider (:func:`flow_index`): the hash's eight
nibbles each select a constant ``(v * 16**k) mod M`` from a 16-entry ROM (one LUT per bit), the
eight residues sum to less than ``8M``, and three conditional subtractions of ``4M``, ``2M`` and
``M`` finish it.

The outer UDP checksum of a VXLAN packet (see the description's "Tunnels"): which case applies
is in the inner UDP checksum, which arrives after the outer one, so beats wait in a FIFO of
``header_bytes / beat + 4`` entries: a stage before the FIFO notes whether the inner UDP
checksum is 0 and the output stage holds the beat carrying the outer checksum until that note is
in. Other packets never wait.

Pipeline: ``s1`` (beat registered with the residue sum of its flow hash), ``s2`` (lookup table
read), ``s3`` (backend table read; notes the inner UDP checksum), the FIFO, then the output
register, where the checksums are updated: every rewritten field is a 16-bit word at an even
offset, so a field never straddles two beats, and every new word depends only on its own old
value and on per-packet values carried with the beat (old address and port from the metadata,
new ones from the backend). One beat a cycle at every packet size.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.memory import Memory

from ...desc.meta import L3Kind, L4Kind
from ...desc.nt.load_balancer import TABLE_SLOT_SHIFT, L4LoadBalancerDescription
from .checksum_update import checksum_update, udp_checksum_update
from .task import NetworkTask

__all__ = ["L4LoadBalancer", "flow_index"]


def flow_index(m, value, size, name="idx"):
    """``value mod size`` for a constant ``size``, as two halves (see the module docstring):
    returns ``(residue_sum, reduce)`` where ``residue_sum`` is a Signal (sum of the nibble
    residues, less than ``8 * size``) and ``reduce(s)`` gives ``s mod size`` for such a sum, so
    a pipeline register can sit between the two."""
    nibbles = (len(value) + 3) // 4
    if nibbles > 8:
        raise ValueError(f"Flow index input must be at most 32 bits, not {len(value)}")
    terms = []
    for k in range(nibbles):
        term = Signal(range(size), name=f"{name}_r{k}")
        with m.Switch(value[4 * k:4 * k + 4]):
            for v in range(16):
                with m.Case(v):
                    m.d.comb += term.eq((v << (4 * k)) % size)
        terms.append(term)
    total = Signal(range(8 * size), name=f"{name}_sum")
    m.d.comb += total.eq(sum(terms))

    def reduce(s):
        for q in (4, 2, 1):
            nxt = Signal(range(8 * size), name=f"{name}_mod{q}")
            m.d.comb += nxt.eq(Mux(s >= q * size, s - q * size, s))
            s = nxt
        out = Signal(range(size), name=name)
        m.d.comb += out.eq(s)
        return out
    return total, reduce


def _get_word(m, beat_data, slot, words, name):
    """The network-order 16-bit word at byte offset ``2 * slot`` of a beat."""
    out = Signal(16, name=name)
    with m.Switch(slot):
        for s in range(words):
            with m.Case(s):
                m.d.comb += out.eq(Cat(beat_data[16 * s + 8:16 * s + 16],
                                       beat_data[16 * s:16 * s + 8]))
    return out


class L4LoadBalancer(L4LoadBalancerDescription, NetworkTask):
    """L4 load balancer: Maglev consistent hashing of a virtual IP's flows onto backends."""

    @classmethod
    def backend_bits(cls, params):
        return max(1, (params["backends"] - 1).bit_length())

    def elaborate(self, platform):
        m = Module()
        csr = self.csr
        size = self.p["table_size"]
        nback = self.p["backends"]
        bbits = self.backend_bits(self.p)
        width = self.data_width
        words = width // 16                 # 16-bit words a beat
        word_bits = (words - 1).bit_length()
        # Beats the packet counters must tell apart: every rewritten word lies below
        # header_bytes + 18 (an L4 checksum at l4_off + 16 with l4_off inside the window).
        beat_limit = (self.header_bytes + 18) // (width // 8) + 1
        depth = self.header_bytes // (width // 8) + 4

        # --- tables and their register ports --------------------------------------------------
        m.submodules.table = table = Memory(shape=bbits, depth=size, init=[])
        m.submodules.backends = backends = Memory(shape=48, depth=nback, init=[])
        slot = csr.table_entry[TABLE_SLOT_SHIFT:]
        table_w = table.write_port()
        m.d.comb += [table_w.addr.eq(slot), table_w.data.eq(csr.table_entry[:bbits]),
                     table_w.en.eq(csr.table_write & (slot < size))]
        table_r = table.read_port()
        m.d.comb += [table_r.addr.eq(slot), table_r.en.eq(csr.table_read),
                     csr.table_data.eq(table_r.data)]
        back_w = backends.write_port()
        m.d.comb += [back_w.addr.eq(csr.backend_index), back_w.data.eq(csr.backend_addr),
                     back_w.en.eq(csr.backend_write & (csr.backend_index < nback))]
        back_r = backends.read_port()
        m.d.comb += [back_r.addr.eq(csr.backend_index), back_r.en.eq(csr.backend_read),
                     csr.backend_data.eq(back_r.data)]

        # --- s1: beat and residue sum of its flow hash ----------------------------------------
        beat_layout = self.i.p.shape()
        entry_layout = data.StructLayout({"beat": beat_layout, "apply": 1, "new_dst": 32,
                                          "new_dport": 16})
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=entry_layout.size, depth=depth)
        # One entry a VXLAN packet balanced on its inner UDP flow: 1 if the inner checksum is 0.
        m.submodules.zero_fifo = zero_fifo = SyncFIFO(width=1, depth=depth)

        s1_valid = Signal()
        s2_valid = Signal()
        s3_valid = Signal()
        s1_beat, s2_beat, s3_beat = (Signal(beat_layout, name=f"s{k}_beat") for k in (1, 2, 3))
        s1_first = Signal()
        s2_first = Signal()
        in_first = Signal(init=1)
        advance = Signal()
        m.d.comb += [advance.eq(~s3_valid | fifo.w_rdy), self.i.ready.eq(advance)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += in_first.eq(self.i.p.last)

        residue_sum, reduce = flow_index(m, self.i.p.meta.flow_hash, size)
        s1_sum = Signal.like(residue_sum)

        # The decision, from s1's first beat (contract rule 2), held for the whole packet.
        meta = s1_beat.meta
        flow = meta.flow
        inner = Signal()
        l3k = Signal(2)
        l4k = Signal(2)
        decide = Signal()
        control = Signal(3)
        m.d.comb += [
            control.eq(csr.control),
            inner.eq(meta.l3_kind[1] != L3Kind.NONE),
            l3k.eq(Mux(inner, meta.l3_kind[1], meta.l3_kind[0])),
            l4k.eq(Mux(inner, meta.l4_kind[1], meta.l4_kind[0])),
            decide.eq(control[0]
                      & ~(meta.drop | meta.flags.truncated | meta.flags.malformed
                          | meta.flags.runt)
                      & (l3k == L3Kind.IPV4) & (l4k != L4Kind.NONE)
                      & (flow.dst_ip[:32] == csr.vip)
                      & (~control[1] | (flow.dport == csr.vip_port))
                      & (~control[2] | (flow.proto == csr.vip_proto))),
        ]
        s2_apply = Signal()
        s3_apply = Signal()

        with m.If(advance):
            m.d.sync += [
                s1_valid.eq(self.i.valid), s1_beat.eq(self.i.p), s1_first.eq(in_first),
                s1_sum.eq(residue_sum),
                s2_valid.eq(s1_valid), s2_beat.eq(s1_beat), s2_first.eq(s1_first),
                s3_valid.eq(s2_valid), s3_beat.eq(s2_beat),
                s3_apply.eq(s2_apply),
            ]
            with m.If(s1_valid & s1_first):
                m.d.sync += s2_apply.eq(decide)

        # --- s2: lookup table entry flow_hash mod M; s3: the backend --------------------------
        # Each read port is enabled only for a first beat, so its data holds for the packet.
        # `s3_held` says so for the backend port in one flip-flop: set by the read at a
        # packet's first beat, cleared as its last beat leaves s3, so it is 1 whenever s3
        # holds a beat. The FIFO entry takes the backend under it, which lets the
        # state-yielding transform's liveness analysis (hw/transform/liveness.py) leave the
        # port's 48-bit data register out of the state: read only under a flag that is 0 at
        # a packet boundary.
        s3_held = Signal()
        lookup = table.read_port()
        m.d.comb += [lookup.addr.eq(reduce(s1_sum)),
                     lookup.en.eq(advance & s1_valid & s1_first)]
        backend = backends.read_port()
        m.d.comb += [backend.addr.eq(lookup.data),
                     backend.en.eq(advance & s2_valid & s2_first)]
        with m.If(advance & s3_valid & s3_beat.last):
            m.d.sync += s3_held.eq(0)
        with m.If(backend.en):
            m.d.sync += s3_held.eq(1)
        held_backend = Signal.like(backend.data, name="held_backend")
        m.d.comb += held_backend.eq(Mux(s3_held, backend.data, 0))

        # --- s3: the inner UDP checksum of a VXLAN packet, for the outer checksum -------------
        s3_meta = s3_beat.meta
        s3_count = Signal(range(beat_limit + 1))
        with m.If(advance & s3_valid):
            m.d.sync += s3_count.eq(Mux(s3_beat.last, 0,
                                        Mux(s3_count == beat_limit, beat_limit, s3_count + 1)))
        needs_note = Signal()
        m.d.comb += needs_note.eq(s3_apply & s3_meta.vxlan & (s3_meta.l3_kind[1] != L3Kind.NONE)
                                  & (s3_meta.l4_kind[1] == L4Kind.UDP))
        note_pos = Signal(range(2 * beat_limit * words))
        m.d.comb += note_pos.eq((s3_meta.l4_off[1] + 6) >> 1)
        note_word = _get_word(m, s3_beat.data, note_pos[:word_bits], words, "note_word")
        m.d.comb += [
            zero_fifo.w_data.eq(note_word == 0),
            zero_fifo.w_en.eq(advance & s3_valid & needs_note
                              & (s3_count == (note_pos >> word_bits))),
        ]

        entry_in = Signal(entry_layout)
        old_dport = s3_meta.flow.dport
        m.d.comb += [
            entry_in.beat.eq(s3_beat),
            entry_in.apply.eq(s3_apply),
            entry_in.new_dst.eq(held_backend[16:48]),
            entry_in.new_dport.eq(Mux(held_backend[:16] != 0, held_backend[:16], old_dport)),
            fifo.w_data.eq(entry_in),
            fifo.w_en.eq(advance & s3_valid),
        ]

        # --- output: rewrite the head beat into the output register ---------------------------
        head = Signal(entry_layout)
        m.d.comb += head.eq(fifo.r_data)
        h_meta = head.beat.meta
        h_count = Signal(range(beat_limit + 1))
        o_valid = Signal()
        o_beat = Signal(beat_layout)
        o_apply = Signal()

        h_inner = Signal()
        l3_off, l4_off = Signal.like(h_meta.l3_off[0]), Signal.like(h_meta.l4_off[0])
        tcp = Signal()
        m.d.comb += [
            h_inner.eq(h_meta.l3_kind[1] != L3Kind.NONE),
            l3_off.eq(Mux(h_inner, h_meta.l3_off[1], h_meta.l3_off[0])),
            l4_off.eq(Mux(h_inner, h_meta.l4_off[1], h_meta.l4_off[0])),
            tcp.eq(Mux(h_inner, h_meta.l4_kind[1], h_meta.l4_kind[0]) == L4Kind.TCP),
        ]
        old_ip = h_meta.flow.dst_ip[:32]
        new_ip = head.new_dst
        old_words = [old_ip[16:32], old_ip[:16]]
        new_words = [new_ip[16:32], new_ip[:16]]
        o_port, n_port = h_meta.flow.dport, head.new_dport
        tunnelled = Signal()
        m.d.comb += tunnelled.eq(h_meta.vxlan & h_inner)
        inner_zero = Signal()
        m.d.comb += inner_zero.eq(~tcp & zero_fifo.r_data)

        # (name, byte offset, enable, function old word -> new word)
        targets = [
            ("dst_hi", l3_off + 16, 1, lambda old: new_words[0]),
            ("dst_lo", l3_off + 18, 1, lambda old: new_words[1]),
            ("ip_csum", l3_off + 10, 1,
             lambda old: checksum_update(m, old, old_words, new_words, name="ip_csum")),
            ("dport", l4_off + 2, 1, lambda old: n_port),
            ("l4_csum", l4_off + Mux(tcp, 16, 6), 1,
             lambda old: Mux(tcp,
                             checksum_update(m, old, old_words + [o_port],
                                             new_words + [n_port], name="tcp_csum"),
                             udp_checksum_update(m, old, old_words + [o_port],
                                                 new_words + [n_port], name="udp_csum"))),
            # RFC 1624 applied to the outer UDP checksum with the inner segment's net change.
            ("outer_csum", h_meta.l4_off[0] + 6, tunnelled,
             lambda old: Mux(inner_zero,
                             udp_checksum_update(m, old, [o_port], [n_port], name="outer_p"),
                             udp_checksum_update(m, old, new_words, old_words,
                                                 name="outer_a"))),
        ]
        out_data = Signal(width)
        m.d.comb += out_data.eq(head.beat.data)
        gate = Signal()
        for name, offset, enable, update in targets:
            pos = Signal(range(2 * beat_limit * words), name=f"{name}_pos")
            here = Signal(name=f"{name}_here")
            m.d.comb += [pos.eq(offset >> 1),
                         here.eq(head.apply & enable & (h_count == (pos >> word_bits)))]
            old = _get_word(m, head.beat.data, pos[:word_bits], words, f"{name}_old")
            new = Signal(16, name=f"{name}_new")
            m.d.comb += new.eq(update(old))
            if name == "outer_csum":
                # Only a UDP inner flow has a note to wait for (see the module docstring).
                m.d.comb += gate.eq(here & ~tcp)
            with m.If(here):
                with m.Switch(pos[:word_bits]):
                    for s in range(words):
                        with m.Case(s):
                            m.d.comb += out_data[16 * s:16 * s + 16].eq(Cat(new[8:], new[:8]))

        take = Signal()
        m.d.comb += [
            take.eq(fifo.r_rdy & (~gate | zero_fifo.r_rdy) & (~o_valid | self.o.ready)),
            fifo.r_en.eq(take),
            zero_fifo.r_en.eq(take & gate),
        ]
        with m.If(take):
            m.d.sync += [o_valid.eq(1), o_beat.eq(head.beat), o_beat.data.eq(out_data),
                         o_apply.eq(head.apply),
                         h_count.eq(Mux(head.beat.last, 0,
                                        Mux(h_count == beat_limit, beat_limit, h_count + 1)))]
            with m.If(head.apply):
                m.d.sync += [o_beat.meta.flow.dst_ip.eq(new_ip),
                             o_beat.meta.flow.dport.eq(n_port)]
        with m.Elif(self.o.ready):
            m.d.sync += o_valid.eq(0)
        m.d.comb += [self.o.valid.eq(o_valid), self.o.p.eq(o_beat)]

        end = self.o.valid & self.o.ready & self.o.p.last
        self.count_standard(m, packets=end, skipped=end & ~o_apply)
        return m
