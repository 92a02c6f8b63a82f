"""Static IPv4 NAT gateware; what it translates, its tables, the checksums it keeps and how
slots are programmed are in :mod:`supernic.desc.nt.nat`.

Slots sit in flip-flops and compare in parallel, as in a TCAM, and the winner and its rewrite
come out of one stage (which is why a packet never sees half a slot write). The RFC 1624
updates are :mod:`.checksum_update`'s.

How it runs at line rate. The words the translation must read from the packet (the checksums,
the IPv4 total length and fragment offset) are picked out of the beats as they pass; the beats
wait in a data FIFO. When the beat holding the last of them has arrived (or the packet ended)
the packet's lookup and checksum arithmetic run in a four-stage pipeline, one packet a cycle,
whose result (a patch list: up to nine 16-bit words at byte positions, and the new metadata)
enters a descriptor FIFO. The output joins the two FIFOs and patches the words as their beats
leave. A credit counter holds the input while the descriptor FIFO could overflow, as in the
parser. Saturated with 64- and 1,500-byte frames it takes one beat a cycle; first beat in to
first beat out is 12 cycles at 64 bits and 6 at 512 bits (TCP/UDP over untagged IPv4).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo

from ...desc.meta import TAIL_FLAGS, L3Kind, L4Kind
from ...desc.nt.nat import ENTRY_FLAGS, NAT_TABLES, PROTO_TCP, PROTO_UDP, NatTranslatorDescription
from .checksum import beat_word, patch_beat, pow2_at_least
from .checksum_update import checksum_update, udp_checksum_update, words16
from .counter_bank import CounterBank
from .task import NetworkTask

__all__ = ["NatTranslator"]


def _entry_layout():
    return data.StructLayout({
        "addr": 32, "port": 16, "proto": 8, "new_addr": 32, "new_port": 16,
        "valid": 1, "match_proto": 1, "match_port": 1, "rewrite_port": 1,
    })


# Patch slots of a descriptor, in order: what each rewrites.
PATCHES = ("src_hi", "src_lo", "dst_hi", "dst_lo", "ip_csum", "sport", "dport", "l4_csum",
           "outer_csum")
# Words read from the packet as it passes (position rules in ``elaborate``).
PICKS = ("total_len", "frag", "ip_csum", "l4_csum", "outer_csum")


class NatTranslator(NatTranslatorDescription, NetworkTask):
    """Static IPv4 NAT: SNAT and DNAT tables with incremental checksum updates."""

    def elaborate(self, platform):
        m = Module()
        W, H = self.data_width, self.header_bytes
        nbytes = W // 8
        csr = self.csr
        meta_shape = self.meta_layout
        pos_bits = H.bit_length() + 2       # byte positions up to H + 18 (see data FIFO depth)

        # --- tables --------------------------------------------------------------------------
        elayout = _entry_layout()
        sizes = {t: self.p[f"{t}_entries"] for t in NAT_TABLES}
        tables = {t: [Signal(elayout, name=f"{t}{k}") for k in range(sizes[t])]
                  for t in NAT_TABLES}
        # Per-slot hit counters, both tables' in one counter bank (counter_bank.py: a memory
        # the transform reaches through its ports, not 64 scanned flip-flops a slot; one
        # bank, so one access path), SNAT's slots first.
        base = {t: sum(sizes[u] for u in NAT_TABLES[:n]) for n, t in enumerate(NAT_TABLES)}
        m.submodules.hits = hits = CounterBank(sum(sizes.values()), 64)
        staged = Signal(elayout)
        m.d.comb += [
            staged.addr.eq(csr.entry_addr), staged.port.eq(csr.entry_port),
            staged.proto.eq(csr.entry_proto), staged.new_addr.eq(csr.entry_new_addr),
            staged.new_port.eq(csr.entry_new_port),
        ]
        for name, bit in ENTRY_FLAGS.items():
            m.d.comb += getattr(staged, name).eq(csr.entry_flags[bit])

        # --- input: pick words, decide when the packet's lookup can start ------------------
        data_depth = pow2_at_least(-(-(H + 18) // nbytes) + 16)
        desc_depth = 16
        # Beat counters saturate past every patchable position (a jumbo frame never wraps
        # back onto a header beat).
        beat_bits = (-(-(H + 20) // nbytes) + 1).bit_length()
        beat_max = 2 ** beat_bits - 1
        data_fifo = m.submodules.data_fifo = fifo.SyncFIFOBuffered(
            width=W + nbytes + 1 + len(TAIL_FLAGS), depth=data_depth)

        in_flight = Signal(range(desc_depth + 1))
        handoff = Signal()
        desc_pop = Signal()
        m.d.comb += self.i.ready.eq(data_fifo.w_rdy & (in_flight < desc_depth))
        take = Signal()
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        tail = Cat(getattr(self.i.p.meta.flags, f) for f in TAIL_FLAGS)
        m.d.comb += [data_fifo.w_en.eq(take),
                     data_fifo.w_data.eq(Cat(self.i.p.data, self.i.p.keep, self.i.p.last, tail))]
        m.d.sync += in_flight.eq(in_flight + handoff - desc_pop)

        imeta = self.i.p.meta
        in_beat = Signal(beat_bits)
        handed = Signal()
        with m.If(take):
            m.d.sync += in_beat.eq(Mux(self.i.p.last, 0,
                                       Mux(in_beat == beat_max, in_beat, in_beat + 1)))
            m.d.sync += handed.eq(~self.i.p.last & (handed | handoff))

        inner = imeta.vxlan
        l3 = Signal(pos_bits)
        l4 = Signal(pos_bits)
        l4_parsed = Signal()
        m.d.comb += [
            l3.eq(Mux(inner, imeta.l3_off[1], imeta.l3_off[0])),
            l4_parsed.eq(Mux(inner, imeta.l4_kind[1], imeta.l4_kind[0]) != L4Kind.NONE),
            # A first fragment's L4 header starts where the walk stopped, after the IPv4 header.
            l4.eq(Mux(l4_parsed, Mux(inner, imeta.l4_off[1], imeta.l4_off[0]),
                      imeta.payload_off)),
        ]
        tcp = imeta.flow.proto == PROTO_TCP
        tcpudp = tcp | (imeta.flow.proto == PROTO_UDP)
        positions = {
            "total_len": l3 + 2, "frag": l3 + 6, "ip_csum": l3 + 10,
            "l4_csum": l4 + Mux(tcp, 16, 6), "outer_csum": imeta.l4_off[0] + 6,
        }
        pos = {}
        for name, value in positions.items():
            pos[name] = Signal(pos_bits, name=f"pos_{name}")
            m.d.comb += pos[name].eq(value)
        l4_wanted = tcpudp & (l4_parsed | imeta.flags.fragment)
        need_beat = Signal(beat_bits)
        m.d.comb += need_beat.eq(Mux(l4_wanted, pos["l4_csum"], pos["ip_csum"])
                                 >> (nbytes.bit_length() - 1))
        m.d.comb += handoff.eq(take & ~handed & (self.i.p.last | (in_beat == need_beat)))

        picked = {}   # this packet's word so far, merged with the current beat
        seen = {}
        for name in PICKS:
            hit, value = beat_word(m, self.i.p.data, self.i.p.keep, in_beat, pos[name], nbytes,
                                   name=f"pick_{name}")
            held, held_seen = Signal(16, name=f"held_{name}"), Signal(name=f"held_{name}_seen")
            picked[name] = Signal(16, name=f"picked_{name}")
            seen[name] = Signal(name=f"picked_{name}_seen")
            first = in_beat == 0
            m.d.comb += [picked[name].eq(Mux(hit, value, held)),
                         seen[name].eq(hit | (held_seen & ~first))]
            with m.If(take):
                m.d.sync += [held.eq(picked[name]), held_seen.eq(seen[name])]

        # --- stage 0: the handed-off packet ------------------------------------------------
        s0_valid = Signal()
        s0_meta = Signal(meta_shape)
        s0_pick = {n: Signal(16, name=f"s0_{n}") for n in PICKS}
        s0_seen = {n: Signal(name=f"s0_{n}_seen") for n in PICKS}
        s0_pos = {n: Signal(pos_bits, name=f"s0_pos_{n}") for n in ("l4_csum", "outer_csum")}
        s0_l3 = Signal(pos_bits)
        s0_l4 = Signal(pos_bits)
        s0_l4_parsed = Signal()
        m.d.sync += s0_valid.eq(handoff)
        with m.If(handoff):
            m.d.sync += [s0_meta.eq(imeta), s0_l3.eq(l3), s0_l4.eq(l4),
                         s0_l4_parsed.eq(l4_parsed)]
            for f in TAIL_FLAGS:
                m.d.sync += getattr(s0_meta.flags, f).eq(0)
            for n in PICKS:
                m.d.sync += [s0_pick[n].eq(picked[n]), s0_seen[n].eq(seen[n])]
            for n in s0_pos:
                m.d.sync += s0_pos[n].eq(pos[n])

        # --- stage 1: applicability and the two lookups ------------------------------------
        meta0 = s0_meta
        flow0 = meta0.flow
        vx0 = meta0.vxlan
        is_ipv4 = Mux(vx0, meta0.l3_kind[1], meta0.l3_kind[0]) == L3Kind.IPV4
        tcp0 = flow0.proto == PROTO_TCP
        tcpudp0 = tcp0 | (flow0.proto == PROTO_UDP)
        frag0 = meta0.flags.fragment
        skip = Signal()
        m.d.comb += skip.eq(meta0.drop | meta0.flags.truncated | meta0.flags.malformed
                            | meta0.flags.runt | ~is_ipv4 | (tcpudp0 & ~s0_l4_parsed & ~frag0))
        # The L4 checksum is there: parsed, or in a first fragment inside datagram and frame.
        first_frag = frag0 & ((s0_pick["frag"] & 0x1FFF) == 0) & s0_seen["frag"]
        l4_csum_here = Signal()
        m.d.comb += l4_csum_here.eq(tcpudp0 & s0_seen["l4_csum"] & (
            s0_l4_parsed | (first_frag & (s0_l4 > s0_l3) & s0_seen["total_len"]
                            & (s0_pos["l4_csum"] + 2 <= s0_l3 + s0_pick["total_len"]))))

        sel = {}
        for t in NAT_TABLES:
            side_src = t == "snat"
            addr = flow0.src_ip[:32] if side_src else flow0.dst_ip[:32]
            port = flow0.sport if side_src else flow0.dport
            n = sizes[t]
            match = Signal(n, name=f"{t}_match")
            for k, e in enumerate(tables[t]):
                m.d.comb += match[k].eq(
                    e.valid & (e.addr == addr) & (~e.match_proto | (e.proto == flow0.proto))
                    & (~(e.match_port | e.rewrite_port) | s0_l4_parsed)
                    & (~e.match_port | (e.port == port)))
            winner = Signal(n, name=f"{t}_winner")
            found = Const(0, 1)
            for k in range(n):
                m.d.comb += winner[k].eq(match[k] & ~found)
                found = found | match[k]
            index = Signal(6, name=f"{t}_index")
            new_addr = Signal(32, name=f"{t}_new_addr")
            new_port = Signal(16, name=f"{t}_new_port")
            rewrite = Signal(name=f"{t}_rewrite_port")
            for k, e in enumerate(tables[t]):
                with m.If(winner[k]):
                    m.d.comb += [index.eq(k), new_addr.eq(e.new_addr), new_port.eq(e.new_port),
                                 rewrite.eq(e.rewrite_port)]
            sel[t] = (match.any(), index, new_addr, new_port, rewrite)

        s1_valid = Signal()
        s1_meta = Signal(meta_shape)
        s1_skip = Signal()
        s1_l4 = Signal()
        s1_hit = {t: Signal(name=f"s1_{t}_hit") for t in NAT_TABLES}
        s1_index = {t: Signal(6, name=f"s1_{t}_index") for t in NAT_TABLES}
        s1_addr = {t: Signal(32, name=f"s1_{t}_addr") for t in NAT_TABLES}
        s1_port = {t: Signal(16, name=f"s1_{t}_port") for t in NAT_TABLES}
        s1_rewrite = {t: Signal(name=f"s1_{t}_rewrite") for t in NAT_TABLES}
        s1_pick = {n: Signal(16, name=f"s1_{n}") for n in PICKS}
        s1_outer = Signal()
        s1_l3 = Signal(pos_bits)
        s1_pos = {n: Signal(pos_bits, name=f"s1_pos_{n}") for n in s0_pos}
        s1_tcp = Signal()
        m.d.sync += s1_valid.eq(s0_valid)
        m.d.sync += [s1_meta.eq(s0_meta), s1_skip.eq(skip), s1_l4.eq(l4_csum_here),
                     s1_outer.eq(vx0 & s0_seen["outer_csum"] & (s0_pick["outer_csum"] != 0)),
                     s1_l3.eq(s0_l3), s1_tcp.eq(tcp0)]
        m.d.sync += [s1_pick[n].eq(s0_pick[n]) for n in PICKS]
        m.d.sync += [s1_pos[n].eq(s0_pos[n]) for n in s0_pos]
        for t in NAT_TABLES:
            hit, index, new_addr, new_port, rewrite = sel[t]
            m.d.sync += [s1_hit[t].eq(hit & ~skip), s1_index[t].eq(index),
                         s1_addr[t].eq(new_addr), s1_port[t].eq(new_port),
                         s1_rewrite[t].eq(rewrite)]

        # A hit counts in stage 1; a slot write clears its counter. The slot is chosen under
        # the stage's valid bit (not the other way round), so the transform's analysis sees
        # that s1_index, and so s0_meta, matter only while it is 1 (hw/transform/liveness.py:
        # a tainted Switch test taints everything under it).
        for t in NAT_TABLES:
            with m.If(s1_valid & s1_hit[t]):
                with m.Switch(s1_index[t]):
                    for k in range(sizes[t]):
                        with m.Case(k):
                            m.d.comb += hits.inc[base[t] + k].eq(1)
        with m.If(csr.entry_write):
            for ti, t in enumerate(NAT_TABLES):
                with m.If(csr.entry_table == ti):
                    with m.Switch(csr.entry_index):
                        for k in range(sizes[t]):
                            with m.Case(k):
                                m.d.sync += tables[t][k].eq(staged)
                                m.d.comb += hits.clear[base[t] + k].eq(1)
        for ti, t in enumerate(NAT_TABLES):
            with m.If(csr.entry_table == ti):
                with m.Switch(csr.entry_index):
                    for k in range(sizes[t]):
                        with m.Case(k):
                            e = tables[t][k]
                            m.d.comb += [
                                csr.sel_match.eq(Cat(e.addr, e.port, e.proto, e.valid,
                                                     e.match_proto, e.match_port,
                                                     e.rewrite_port)),
                                csr.sel_rewrite.eq(Cat(e.new_addr, e.new_port)),
                                hits.index.eq(base[t] + k),
                                csr.sel_hits.eq(hits.value),
                            ]

        # --- stage 2: new words and the IPv4 and L4 checksums ------------------------------
        flow1 = s1_meta.flow
        old = {"src": flow1.src_ip[:32], "dst": flow1.dst_ip[:32],
               "sport": flow1.sport, "dport": flow1.dport}
        new = {
            "src": Mux(s1_hit["snat"], s1_addr["snat"], old["src"]),
            "dst": Mux(s1_hit["dnat"], s1_addr["dnat"], old["dst"]),
            "sport": Mux(s1_hit["snat"] & s1_rewrite["snat"], s1_port["snat"], old["sport"]),
            "dport": Mux(s1_hit["dnat"] & s1_rewrite["dnat"], s1_port["dnat"], old["dport"]),
        }
        new_sig = {}
        for k, v in new.items():
            new_sig[k] = Signal(len(old[k]), name=f"new_{k}")
            m.d.comb += new_sig[k].eq(v)
        addr_old = words16(old["src"], 32) + words16(old["dst"], 32)
        addr_new = words16(new_sig["src"], 32) + words16(new_sig["dst"], 32)
        ip_csum = checksum_update(m, s1_pick["ip_csum"], addr_old, addr_new, name="ip_csum")
        l4_terms = (addr_old + [old["sport"], old["dport"]],
                    addr_new + [new_sig["sport"], new_sig["dport"]])
        tcp_csum = checksum_update(m, s1_pick["l4_csum"], *l4_terms, name="tcp_csum")
        udp_csum = udp_checksum_update(m, s1_pick["l4_csum"], *l4_terms, name="udp_csum")

        s2_valid = Signal()
        s2_meta = Signal(meta_shape)
        s2_skip = Signal()
        s2_l4 = Signal()
        s2_outer = Signal()
        s2_tcp = Signal()
        s2_hit = {t: Signal(name=f"s2_{t}_hit") for t in NAT_TABLES}
        s2_rewrite = {t: Signal(name=f"s2_{t}_rewrite") for t in NAT_TABLES}
        s2_old = {k: Signal(len(v), name=f"s2_old_{k}") for k, v in old.items()}
        s2_new = {k: Signal(len(v), name=f"s2_new_{k}") for k, v in old.items()}
        s2_ip_old = Signal(16)
        s2_ip_new = Signal(16)
        s2_l4_old = Signal(16)
        s2_l4_new = Signal(16)
        s2_outer_csum = Signal(16)
        s2_l3 = Signal(pos_bits)
        s2_pos = {n: Signal(pos_bits, name=f"s2_pos_{n}") for n in s0_pos}
        m.d.sync += [
            s2_valid.eq(s1_valid), s2_meta.eq(s1_meta), s2_skip.eq(s1_skip),
            s2_l4.eq(s1_l4), s2_outer.eq(s1_outer), s2_tcp.eq(s1_tcp), s2_l3.eq(s1_l3),
            s2_ip_old.eq(s1_pick["ip_csum"]), s2_ip_new.eq(ip_csum),
            s2_l4_old.eq(s1_pick["l4_csum"]),
            s2_l4_new.eq(Mux(s1_l4, Mux(s1_tcp, tcp_csum, udp_csum), s1_pick["l4_csum"])),
            s2_outer_csum.eq(s1_pick["outer_csum"]),
        ]
        m.d.sync += [s2_pos[n].eq(s1_pos[n]) for n in s0_pos]
        m.d.sync += [s2_hit[t].eq(s1_hit[t]) for t in NAT_TABLES]
        m.d.sync += [s2_rewrite[t].eq(s1_rewrite[t]) for t in NAT_TABLES]
        m.d.sync += [s2_old[k].eq(old[k]) for k in old]
        m.d.sync += [s2_new[k].eq(new_sig[k]) for k in old]

        # --- stage 3: the outer UDP checksum, the patch list and the new metadata ----------
        outer_old = (words16(s2_old["src"], 32) + words16(s2_old["dst"], 32)
                     + [s2_ip_old, s2_old["sport"], s2_old["dport"], s2_l4_old])
        outer_new = (words16(s2_new["src"], 32) + words16(s2_new["dst"], 32)
                     + [s2_ip_new, s2_new["sport"], s2_new["dport"], s2_l4_new])
        outer_csum = udp_checksum_update(m, s2_outer_csum, outer_old, outer_new,
                                         name="outer_csum")
        any_hit = s2_hit["snat"] | s2_hit["dnat"]
        plist = {
            "src_hi": (s2_hit["snat"], s2_l3 + 12, s2_new["src"][16:]),
            "src_lo": (s2_hit["snat"], s2_l3 + 14, s2_new["src"][:16]),
            "dst_hi": (s2_hit["dnat"], s2_l3 + 16, s2_new["dst"][16:]),
            "dst_lo": (s2_hit["dnat"], s2_l3 + 18, s2_new["dst"][:16]),
            "ip_csum": (any_hit, s2_l3 + 10, s2_ip_new),
            "sport": (s2_hit["snat"] & s2_rewrite["snat"], s2_pos["l4_csum"]
                      - Mux(s2_tcp, 16, 6), s2_new["sport"]),
            "dport": (s2_hit["dnat"] & s2_rewrite["dnat"], s2_pos["l4_csum"]
                      - Mux(s2_tcp, 14, 4), s2_new["dport"]),
            "l4_csum": (any_hit & s2_l4, s2_pos["l4_csum"], s2_l4_new),
            "outer_csum": (any_hit & s2_outer, s2_pos["outer_csum"], outer_csum),
        }
        word_bits = pos_bits - 1
        desc_layout = data.StructLayout({
            "meta": meta_shape,
            "patch_en": len(PATCHES),
            "patch_pos": data.ArrayLayout(word_bits, len(PATCHES)),
            "patch_val": data.ArrayLayout(16, len(PATCHES)),
            "skip": 1, "snat": 1, "dnat": 1, "miss": 1,
        })
        desc_in = Signal(desc_layout)
        m.d.comb += [desc_in.meta.eq(s2_meta), desc_in.skip.eq(s2_skip),
                     desc_in.snat.eq(s2_hit["snat"]), desc_in.dnat.eq(s2_hit["dnat"]),
                     desc_in.miss.eq(~s2_skip & ~any_hit)]
        for k, name in enumerate(PATCHES):
            en, at, value = plist[name]
            at_sig = Signal(pos_bits, name=f"patch_at_{name}")
            m.d.comb += [at_sig.eq(at), desc_in.patch_en[k].eq(en),
                         desc_in.patch_pos[k].eq(at_sig[1:]), desc_in.patch_val[k].eq(value)]
        with m.If(s2_hit["snat"]):
            m.d.comb += [desc_in.meta.flow.src_ip.eq(s2_new["src"]),
                         desc_in.meta.flow.sport.eq(s2_new["sport"])]
        with m.If(s2_hit["dnat"]):
            m.d.comb += [desc_in.meta.flow.dst_ip.eq(s2_new["dst"]),
                         desc_in.meta.flow.dport.eq(s2_new["dport"])]
        desc_fifo = m.submodules.desc_fifo = fifo.SyncFIFOBuffered(
            width=desc_layout.size, depth=desc_depth)
        s3_valid = Signal()
        s3_desc = Signal(desc_layout)
        m.d.sync += [s3_valid.eq(s2_valid), s3_desc.eq(desc_in)]
        m.d.comb += [desc_fifo.w_en.eq(s3_valid), desc_fifo.w_data.eq(s3_desc)]

        # --- output: join beats and descriptors, patch, count -------------------------------
        desc = desc_layout(desc_fifo.r_data)
        out_data = data_fifo.r_data[:W]
        out_keep = data_fifo.r_data[W:W + nbytes]
        out_last = data_fifo.r_data[W + nbytes]
        out_tail = data_fifo.r_data[W + nbytes + 1:]
        out_beat = Signal(beat_bits)
        patches = [(desc.patch_en[k], desc.patch_pos[k], desc.patch_val[k])
                   for k in range(len(PATCHES))]
        patched = patch_beat(m, out_data, out_beat, patches, nbytes, name="out")
        m.d.comb += [
            self.o.valid.eq(data_fifo.r_rdy & desc_fifo.r_rdy),
            self.o.p.data.eq(patched), self.o.p.keep.eq(out_keep), self.o.p.last.eq(out_last),
            self.o.p.meta.eq(desc.meta),
        ]
        with m.If(out_last):
            for k, f in enumerate(TAIL_FLAGS):
                m.d.comb += getattr(self.o.p.meta.flags, f).eq(out_tail[k])
        out_take = self.o.valid & self.o.ready
        m.d.comb += [data_fifo.r_en.eq(out_take), desc_pop.eq(out_take & out_last),
                     desc_fifo.r_en.eq(desc_pop)]
        with m.If(out_take):
            m.d.sync += out_beat.eq(Mux(out_last, 0,
                                        Mux(out_beat == beat_max, out_beat, out_beat + 1)))
        with m.If(desc_pop):
            m.d.sync += [
                csr.snat_hits.eq(csr.snat_hits + desc.snat),
                csr.dnat_hits.eq(csr.dnat_hits + desc.dnat),
                csr.misses.eq(csr.misses + desc.miss),
            ]
        self.count_standard(m, packets=desc_pop, skipped=desc_pop & desc.skip)
        return m
