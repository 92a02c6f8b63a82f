"""Gateware of the checksum NTs (``csum_verify``, ``csum_offload``: what they check, write,
count and skip is in :mod:`supernic.desc.nt.checksum`), and the beat-lane helpers that NTs
patching header words share (:func:`beat_word`, :func:`patch_beat`).

How. Beats enter a ring buffer (an ``amaranth.lib.fifo`` FIFO of twice
``max_frame_bytes``, so one packet can leave while the next arrives) and, at the same time, a
summing pipeline that never stalls: stage 1 sums each beat over six byte ranges (per layer: the
IPv4 header, the pseudo-header addresses, the L4 datagram; each the difference of two prefix
sums of the beat's words), stage 2 accumulates the six sums,
stages 3 and 4 fold them into checksums and verdicts, and the packet's descriptor (new words,
drop, metadata) enters a descriptor FIFO. The ring's reader pre-fetches a packet's first beat
and waits for its descriptor, then streams the packet at one beat a cycle and patches the words.
Throughput is one beat a cycle in steady state; latency is one packet plus six cycles (first
beat in to first beat out: 194 cycles for 1,500-byte frames at 64 bits, 30 at 512 bits).
A frame that fills ``max_frame_bytes`` without ending is declared oversize there: its
descriptor (pass unchanged) is issued at once and the rest of it streams through the ring, so
no frame length can hang the NT.

Sums are accumulated as plain binary numbers and folded to 16 bits at the end; both are exact
for the ones'-complement sum (RFC 1071 section 2(B)), and because every sum here includes a
non-zero word (the IPv4 version, the L4 protocol) the result is never the all-zero
representation, so a computed checksum equals the one a full recomputation (e.g. scapy's) gives.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo

from ...desc.meta import TAIL_FLAGS, L3Kind, L4Kind
from ...desc.nt.checksum import FILL_BITS, ChecksumOffloadDescription, ChecksumVerifyDescription
from .checksum_update import ones_add, ones_sum
from .task import NetworkTask

__all__ = [
    "ChecksumVerify", "ChecksumOffload", "beat_word", "patch_beat", "pick", "pow2_at_least",
]


def pow2_at_least(n):
    return 1 << max(0, (n - 1).bit_length())


def _log2(n):
    return n.bit_length() - 1


def beat_word(m, data, keep, beat, pos, nbytes, name):
    """``(hit, value)``: the big-endian 16-bit word at even byte position ``pos`` of a packet,
    taken from the beat with index ``beat`` (``data``, ``keep``) when it lies whole there."""
    lanes = nbytes // 2
    lb = _log2(lanes)
    wpos = Signal(len(pos) - 1, name=f"{name}_wpos")
    m.d.comb += wpos.eq(pos[1:])
    value = Signal(16, name=name)
    kept = Signal(name=f"{name}_kept")
    with m.Switch(wpos[:lb]):
        for k in range(lanes):
            with m.Case(k):
                # Byte 2k is the word's high byte: network order over AXI4-Stream lane order.
                m.d.comb += [value.eq(Cat(data[16 * k + 8:16 * k + 16], data[16 * k:16 * k + 8])),
                             kept.eq(keep[2 * k + 1])]
    hit = Signal(name=f"{name}_hit")
    m.d.comb += hit.eq(kept & (wpos[lb:] == beat))
    return hit, value


def patch_beat(m, data, beat, patches, nbytes, name):
    """``data`` (beat index ``beat``) with words replaced: ``patches`` is a list of ``(enable,
    word position in the packet, big-endian value)``; positions never coincide."""
    lanes = nbytes // 2
    lb = _log2(lanes)
    out = Signal(len(data), name=f"{name}_patched")
    chosen = []
    for i, (en, wpos, value) in enumerate(patches):
        here = Signal(name=f"{name}_p{i}_here")
        lane = Signal(lb, name=f"{name}_p{i}_lane")
        swapped = Signal(16, name=f"{name}_p{i}_value")
        m.d.comb += [here.eq(en & (wpos[lb:] == beat)), lane.eq(wpos[:lb]),
                     swapped.eq(Cat(value[8:16], value[:8]))]
        chosen.append((here, lane, swapped))
    for k in range(lanes):
        word = data[16 * k:16 * k + 16]
        for here, lane, swapped in chosen:
            word = Mux(here & (lane == k), swapped, word)
        m.d.comb += out[16 * k:16 * k + 16].eq(word)
    return out


def _prefix_sums(m, values, width, name):
    """``[0, v0, v0 + v1, ...]``: every prefix sum of ``values``, by Sklansky's parallel prefix
    (log2(n) adder levels, like the tree it replaces)."""
    def build(lo, hi):
        if hi - lo == 1:
            return [values[lo]]
        mid = (lo + hi) // 2
        left, right = build(lo, mid), build(mid, hi)
        out = []
        for k, r in enumerate(right):
            s = Signal(width, name=f"{name}_p{lo}_{mid + k}")
            m.d.comb += s.eq(left[-1] + r)
            out.append(s)
        return left + out
    return [Const(0, width)] + build(0, len(values))


def range_sums(m, data, beat, ranges, nbytes, name):
    """Binary sums of the big-endian 16-bit words of one beat, one per byte range of the
    packet: ``ranges`` is a list of ``(start, end, enable)`` (``start`` even), and a range counts
    the bytes whose packet position is in ``[start, end)``; a lone last byte is the high byte of
    a word padded with zero (RFC 1071).

    ``keep`` is not looked at: every byte of a range lies inside the frame of any packet whose
    sums are used. A range ends at most at the IP datagram's end, a packet whose frame is
    shorter than that is a ``length_error``, and one with a hole in its ``keep`` a
    ``keep_error``; both pass unchanged (:mod:`supernic.desc.nt.checksum`). Masking each byte with
    its ``keep`` bit cost Verilator 1 % of the default NIC's cycle per checksum unit.

    One prefix sum of the beat's words serves every range: a range's sum is the prefix at its
    end's word less the prefix at its start's word, plus a lone last byte. A mask per byte lane
    and an adder tree per range came to the same adders on the FPGA, but Verilator evaluated
    each range's 64 lane masks and byte multiplexers every cycle: 18 % of the default NIC's
    simulated cycle went to the six sums of its two checksum units."""
    lb = _log2(nbytes)
    nw = nbytes // 2
    words = []
    for k in range(nw):
        word = Signal(16, name=f"{name}_w{k}")
        # Byte 2k is the word's high byte: network order over AXI4-Stream lane order.
        m.d.comb += word.eq(Cat(data[16 * k + 8:16 * k + 16], data[16 * k:16 * k + 8]))
        words.append(word)
    width = 16 + lb
    prefix = _prefix_sums(m, words, width, name)
    high_bytes = [w & 0xFF00 for w in words]
    sums = []
    for i, (start, end, enable) in enumerate(ranges):
        n = f"{name}{i}"
        after, at_start, before, at_end = (Signal(name=f"{n}_{x}") for x in
                                           ("after", "at_start", "before", "at_end"))
        first = Signal(range(nw), name=f"{n}_first")    # a range starts inside the beat
        stop = Signal(range(nw + 1), name=f"{n}_stop")
        lone = Signal(name=f"{n}_lone")
        total = Signal(width, name=f"{n}_sum")
        m.d.comb += [
            after.eq(beat > start[lb:]), at_start.eq(beat == start[lb:]),
            before.eq(beat < end[lb:]), at_end.eq(beat == end[lb:]),
            # Whole words of the range in this beat: [first, stop).
            first.eq(Mux(after, 0, start[1:lb])),
            stop.eq(Mux(before, nw, end[1:lb])),
            # An odd end: the high byte of word `stop` counts too, if the range starts before.
            lone.eq(at_end & end[0] & (after | (start[1:lb] <= end[1:lb]))),
            total.eq(Mux(enable & (after | at_start) & (before | at_end),
                         Mux(stop > first, pick(m, prefix, stop, f"{n}_at_stop")
                             - pick(m, prefix[:nw], first, f"{n}_at_first"), 0)
                         + Mux(lone, pick(m, high_bytes, stop, f"{n}_lone_byte"), 0), 0)),
        ]
        sums.append(total)
    return sums


def pick(m, values, index, name):
    """``values[index]`` (the last one past the end), as a case with a default arm: without
    one, Verilator's lint calls the indices past the end a latch."""
    out = Signal(max(len(v) for v in values), name=name)
    with m.Switch(index):
        for k, v in enumerate(values[:-1]):
            with m.Case(k):
                m.d.comb += out.eq(v)
        with m.Default():
            m.d.comb += out.eq(values[-1])
    return out


def _fold(m, value, name):
    """Ones'-complement 16-bit sum of a binary sum of 16-bit words (end-around carries)."""
    once = Signal(18, name=f"{name}_f1")
    out = Signal(16, name=name)
    m.d.comb += [once.eq(value[:16] + value[16:]), out.eq(once[:16] + once[16:])]
    return out


class _ChecksumTask(NetworkTask):
    """The store-and-forward checksum engine of both NTs; their descriptions set ``kind`` and
    ``verifies``."""

    def elaborate(self, platform):
        m = Module()
        W = self.data_width
        nbytes = W // 8
        csr = self.csr
        meta_shape = self.meta_layout
        max_beats = self.p["max_frame_bytes"] // nbytes
        ring_depth = pow2_at_least(2 * max_beats)
        desc_depth = 16
        beat_bits = max_beats.bit_length()
        beat_max = 2 ** beat_bits - 1
        pos_bits = 17                       # l3_off + 40 + a 16-bit IP length

        # --- input: ring write, oversize cut, words picked from the beats -------------------
        # The ring is a FIFO (amaranth.lib.fifo): one beat more than ``ring_depth`` with its
        # output register, the reader's pre-fetched beat. As a library FIFO its storage is
        # known to hold nothing a future read returns once it is empty, so the
        # state-yielding transform leaves the rows out of the state (inventory.py).
        ring = fifo.SyncFIFOBuffered(width=W + nbytes + 1 + len(TAIL_FLAGS),
                                     depth=ring_depth + 1)
        m.submodules.ring = ring
        in_flight = Signal(range(desc_depth + 1))
        desc_pop = Signal()
        handoff = Signal()
        m.d.comb += self.i.ready.eq(ring.w_rdy & (in_flight < desc_depth))
        take = Signal()
        m.d.comb += take.eq(self.i.valid & self.i.ready)
        ip = self.i.p
        imeta = ip.meta
        m.d.comb += [
            ring.w_en.eq(take),
            ring.w_data.eq(Cat(ip.data, ip.keep, ip.last,
                               *(getattr(imeta.flags, f) for f in TAIL_FLAGS))),
        ]
        m.d.sync += in_flight.eq(in_flight + handoff - desc_pop)

        in_beat = Signal(beat_bits)
        cut = Signal()              # the rest of an oversize frame: ring only, no summing
        trigger = Signal()
        m.d.comb += [
            trigger.eq(take & ~cut & ~ip.last & (in_beat == max_beats - 1)),
            handoff.eq(take & ~cut & (ip.last | trigger)),
        ]
        with m.If(take):
            m.d.sync += [in_beat.eq(Mux(ip.last, 0, Mux(in_beat == beat_max, in_beat,
                                                         in_beat + 1))),
                         cut.eq(~ip.last & (cut | trigger))]

        # The picked words hold a value found in an earlier beat of the same packet; at a
        # packet's first beat they start from 0 (``in_mid`` is 0), so none of them carries
        # anything across packets and the state-yielding transform need not capture them
        # (hw/transform/liveness.py: ``in_mid`` guards them).
        in_mid = Signal()           # the last beat taken did not end its packet
        with m.If(take):
            m.d.sync += in_mid.eq(~ip.last)
        picks = ("vihl", "len", "hcs", "l4cs")
        merged = [{}, {}]
        for layer in range(2):
            l3 = imeta.l3_off[layer]
            v6 = imeta.l3_kind[layer] == L3Kind.IPV6
            tcp = imeta.l4_kind[layer] == L4Kind.TCP
            where = {"vihl": l3, "len": l3 + Mux(v6, 4, 2), "hcs": l3 + 10,
                     "l4cs": imeta.l4_off[layer] + Mux(tcp, 16, 6)}
            for name in picks:
                pos = Signal(pos_bits, name=f"pos{layer}_{name}")
                m.d.comb += pos.eq(where[name])
                hit, value = beat_word(m, ip.data, ip.keep, in_beat, pos, nbytes,
                                       name=f"pick{layer}_{name}")
                held = Signal(16, name=f"held{layer}_{name}")
                merged[layer][name] = Signal(16, name=f"merged{layer}_{name}")
                m.d.comb += merged[layer][name].eq(Mux(hit, value, Mux(in_mid, held, 0)))
                with m.If(take):
                    m.d.sync += held.eq(merged[layer][name])

        # --- stage 1: sum each beat over six byte ranges -----------------------------------
        s1_valid = Signal()
        s1_end = Signal()
        s1_over = Signal()
        s1_data = Signal(W)
        s1_beat = Signal(beat_bits)
        s1_meta = Signal(meta_shape)
        s1_pick = [{n: Signal(16, name=f"s1_{k}_{n}") for n in picks} for k in range(2)]
        m.d.sync += s1_valid.eq(take & ~cut)
        with m.If(take):
            m.d.sync += [s1_end.eq(ip.last | trigger),
                         s1_over.eq(trigger), s1_data.eq(ip.data),
                         s1_beat.eq(in_beat), s1_meta.eq(imeta)]
            for layer in range(2):
                m.d.sync += [s1_pick[layer][n].eq(merged[layer][n]) for n in picks]

        regions = ("hdr", "addr", "l4")
        ranges = {}
        layer_info = []
        for layer in range(2):
            l3 = Signal(pos_bits, name=f"s1_l3_{layer}")
            l4 = Signal(pos_bits, name=f"s1_l4_{layer}")
            ip_end = Signal(pos_bits, name=f"s1_ip_end_{layer}")
            hdr_end = Signal(pos_bits, name=f"s1_hdr_end_{layer}")
            v4 = s1_meta.l3_kind[layer] == L3Kind.IPV4
            v6 = s1_meta.l3_kind[layer] == L3Kind.IPV6
            l4p = s1_meta.l4_kind[layer] != L4Kind.NONE
            pk = s1_pick[layer]
            m.d.comb += [
                l3.eq(s1_meta.l3_off[layer]), l4.eq(s1_meta.l4_off[layer]),
                ip_end.eq(l3 + Mux(v6, 40, 0) + pk["len"]),
                hdr_end.eq(l3 + Cat(Const(0, 2), pk["vihl"][8:12])),
            ]
            bounds = {
                "hdr": (l3, hdr_end, v4),
                "addr": (l3 + Mux(v6, 8, 12), l3 + Mux(v6, 40, 20), l4p),
                "l4": (l4, ip_end, l4p),
            }
            for r in regions:
                start, end, en = bounds[r]
                ss, es = Signal(pos_bits, name=f"s1_{r}{layer}_start"), \
                    Signal(pos_bits, name=f"s1_{r}{layer}_end")
                m.d.comb += [ss.eq(start), es.eq(end)]
                ranges[layer, r] = (ss, es, en)
            layer_info.append(ip_end)
        sums = dict(zip(ranges, range_sums(m, s1_data, s1_beat, list(ranges.values()),
                                           nbytes, name="sum")))

        s2_valid = Signal()
        s2_end = Signal()
        s2_over = Signal()
        s2_meta = Signal(meta_shape)
        s2_pick = [{n: Signal(16, name=f"s2_{k}_{n}") for n in picks} for k in range(2)]
        s2_ip_end = [Signal(pos_bits, name=f"s2_ip_end_{k}") for k in range(2)]
        s2_sum = {key: Signal(len(v), name=f"s2_sum{key[0]}_{key[1]}") for key, v in sums.items()}
        m.d.sync += [s2_valid.eq(s1_valid), s2_end.eq(s1_end),
                     s2_over.eq(s1_over), s2_meta.eq(s1_meta)]
        m.d.sync += [s2_sum[k].eq(sums[k]) for k in sums]
        for layer in range(2):
            m.d.sync += [s2_pick[layer][n].eq(s1_pick[layer][n]) for n in picks]
            m.d.sync += s2_ip_end[layer].eq(layer_info[layer])

        # --- stage 2: accumulate the packet's six sums ------------------------------------
        # ``acc_mid``: the accumulators hold a packet's partial sums (a beat that did not end
        # its summing passed), so a beat after an end starts a packet's sums: the summing
        # ends at the last beat or at the oversize cut, after which the frame's other beats
        # are not summed and the next frame starts afresh. (A first-beat flag from the beat
        # count said the same, but the state-yielding transform cannot see that it is 1
        # whenever a new packet begins; with ``acc_mid``, 0 between packets, it proves the
        # accumulators dead there.)
        acc = {k: Signal(32, name=f"acc{k[0]}_{k[1]}") for k in sums}
        total = {k: Signal(32, name=f"total{k[0]}_{k[1]}") for k in sums}
        acc_mid = Signal()
        with m.If(s2_valid):
            # (Constants on two paths, not ``~s2_end``: the transform picks as guards the
            # bits a drain can be seen to clear, liveness.py ``_draining``.)
            with m.If(s2_end):
                m.d.sync += acc_mid.eq(0)
            with m.Else():
                m.d.sync += acc_mid.eq(1)
        for k in sums:
            m.d.comb += total[k].eq(Mux(acc_mid, acc[k], 0) + s2_sum[k])
            with m.If(s2_valid):
                m.d.sync += acc[k].eq(total[k])
        s3_valid = Signal()
        s3_over = Signal()
        s3_meta = Signal(meta_shape)
        s3_pick = [{n: Signal(16, name=f"s3_{k}_{n}") for n in picks} for k in range(2)]
        s3_ip_end = [Signal(pos_bits, name=f"s3_ip_end_{k}") for k in range(2)]
        s3_total = {k: Signal(32, name=f"s3_total{k[0]}_{k[1]}") for k in sums}
        m.d.sync += s3_valid.eq(s2_valid & s2_end)
        with m.If(s2_valid & s2_end):
            m.d.sync += [s3_over.eq(s2_over), s3_meta.eq(s2_meta)]
            m.d.sync += [s3_total[k].eq(total[k]) for k in sums]
            for layer in range(2):
                m.d.sync += [s3_pick[layer][n].eq(s2_pick[layer][n]) for n in picks]
                m.d.sync += s3_ip_end[layer].eq(s2_ip_end[layer])

        # --- stage 3: fold, pseudo-headers, per-layer checksums -----------------------------
        meta3 = s3_meta
        flags3 = meta3.flags
        skip_flags = Signal()
        m.d.comb += skip_flags.eq(meta3.drop | flags3.truncated | flags3.malformed
                                  | flags3.runt | flags3.length_error | flags3.keep_error
                                  | s3_over)
        lay = []
        for layer in range(2):
            pk = s3_pick[layer]
            v4 = meta3.l3_kind[layer] == L3Kind.IPV4
            v6 = meta3.l3_kind[layer] == L3Kind.IPV6
            l4k = meta3.l4_kind[layer]
            tcp = l4k == L4Kind.TCP
            udp = l4k == L4Kind.UDP
            l4_off = meta3.l4_off[layer]
            csum_end = Signal(pos_bits, name=f"csum_end{layer}")
            m.d.comb += csum_end.eq(l4_off + Mux(tcp, 18, 8))
            l4_here = Signal(name=f"l4_here{layer}")
            m.d.comb += l4_here.eq((tcp | udp) & (csum_end <= s3_ip_end[layer]))
            # UDP checksum 0: none over IPv4 (RFC 768), and on a VXLAN outer header also over
            # IPv6 (RFC 7348 section 5, RFC 6935); elsewhere over IPv6 invalid (RFC 8200 8.1).
            tunnel = meta3.vxlan if layer == 0 else 0
            zero_ok = Signal(name=f"zero_ok{layer}")
            udp_zero = Signal(name=f"udp_zero{layer}")
            m.d.comb += [udp_zero.eq(l4_here & udp & (pk["l4cs"] == 0)),
                         zero_ok.eq(udp_zero & (~v6 | tunnel))]
            f_hdr = _fold(m, s3_total[layer, "hdr"], name=f"f_hdr{layer}")
            f_addr = _fold(m, s3_total[layer, "addr"], name=f"f_addr{layer}")
            f_l4 = _fold(m, s3_total[layer, "l4"], name=f"f_l4{layer}")
            l4_len = Signal(16, name=f"l4_len{layer}")
            m.d.comb += l4_len.eq(s3_ip_end[layer] - l4_off)
            proto = Mux(tcp, 6, 17)
            s_l4 = ones_sum(m, [f_l4, f_addr, l4_len, proto], name=f"s_l4{layer}")
            info = {"v4": v4, "tcp": tcp, "udp": udp, "l4_here": l4_here,
                    "zero_ok": zero_ok, "udp_zero": udp_zero}
            if self.verifies:
                info["hdr_ok"] = f_hdr == 0xFFFF
                info["l4_ok"] = (s_l4 == 0xFFFF) & ~udp_zero
            else:
                # Sum without the field: add its complement (x + ~x is a ones'-complement zero).
                hdr_new = Signal(16, name=f"hdr_new{layer}")
                m.d.comb += hdr_new.eq(~ones_add(m, f_hdr, ~pk["hcs"] & 0xFFFF,
                                                 name=f"hdr_wo{layer}"))
                info["hdr_new"] = hdr_new
                info["s_l4"] = s_l4
            lay.append(info)

        s4_valid = Signal()
        s4_skip_flags = Signal()
        s4_over = Signal()
        s4_meta = Signal(meta_shape)
        m.d.sync += [s4_valid.eq(s3_valid), s4_skip_flags.eq(skip_flags), s4_over.eq(s3_over),
                     s4_meta.eq(s3_meta)]
        s4 = []
        for layer in range(2):
            regs = {}
            for key, value in lay[layer].items():
                regs[key] = Signal(len(value), name=f"s4_{key}{layer}")
                m.d.sync += regs[key].eq(value)
            for name in ("hcs", "l4cs"):
                regs[name] = Signal(16, name=f"s4_{name}{layer}")
                m.d.sync += regs[name].eq(s3_pick[layer][name])
            regs["l3"] = Signal(pos_bits, name=f"s4_l3_{layer}")
            regs["l4"] = Signal(pos_bits, name=f"s4_l4_{layer}")
            m.d.sync += [regs["l3"].eq(s3_meta.l3_off[layer]),
                         regs["l4"].eq(s3_meta.l4_off[layer])]
            s4.append(regs)

        # --- stage 4: verdicts, or the outer L4 checksum over the patched inner words ------
        desc_fields = {"meta": meta_shape, "skip": 1, "drop": 1}
        word_bits = pos_bits - 1
        npatch = 0 if self.verifies else 4
        if npatch:
            desc_fields.update({"patch_en": npatch,
                                "patch_pos": data.ArrayLayout(word_bits, npatch),
                                "patch_val": data.ArrayLayout(16, npatch)})
        desc_layout = data.StructLayout(desc_fields)
        desc_in = Signal(desc_layout)
        m.d.comb += desc_in.meta.eq(s4_meta)
        for f in TAIL_FLAGS:
            m.d.comb += getattr(desc_in.meta.flags, f).eq(0)
        counts = {}
        if self.verifies:
            kinds = ("ipv4", "tcp", "udp")
            good = {k: [] for k in kinds}
            bad = {k: [] for k in kinds}
            unchecked = []
            for r in s4:
                checked_l4 = r["l4_here"] & ~r["zero_ok"]
                good["ipv4"].append(r["v4"] & r["hdr_ok"])
                bad["ipv4"].append(r["v4"] & ~r["hdr_ok"])
                for k in ("tcp", "udp"):
                    good[k].append(checked_l4 & r[k] & r["l4_ok"])
                    bad[k].append(checked_l4 & r[k] & ~r["l4_ok"])
                unchecked.append(r["zero_ok"])
            any_bad = Signal()
            checked = Signal()
            m.d.comb += [any_bad.eq(Cat(*(b for k in kinds for b in bad[k])).any()),
                         checked.eq(Cat(*(g for k in kinds for g in good[k])).any() | any_bad)]
            m.d.comb += [desc_in.skip.eq(s4_skip_flags | ~checked),
                         desc_in.drop.eq(~s4_skip_flags & any_bad & csr.drop_bad)]
            for k in kinds:
                counts[f"{k}_good"] = good[k]
                counts[f"{k}_bad"] = bad[k]
            counts["udp_unchecked"] = unchecked
        else:
            fill = csr.fill
            fills = {"ipv4": [], "tcp": [], "udp": []}
            values = []
            for layer, r in enumerate(s4):
                hdr_fill = r["v4"] & fill[FILL_BITS["ipv4"]]
                l4_fill = r["l4_here"] & ~r["zero_ok"] & Mux(r["tcp"], fill[FILL_BITS["tcp"]],
                                                             fill[FILL_BITS["udp"]])
                hf, lf = Signal(name=f"hdr_fill{layer}"), Signal(name=f"l4_fill{layer}")
                m.d.comb += [hf.eq(hdr_fill), lf.eq(l4_fill)]
                fills["ipv4"].append(hf)
                fills["tcp"].append(lf & r["tcp"])
                fills["udp"].append(lf & r["udp"])
                values.append((hf, lf))
            # Layer 0's L4 sum covers layer 1's headers (VXLAN): swap in the inner words as
            # they will leave. With no inner layer the extra terms cancel (x + ~x).
            inner = s4[1]
            hf1, lf1 = values[1]
            l4_new = []
            for layer, r in enumerate(s4):
                terms = [r["s_l4"], ~r["l4cs"] & 0xFFFF]
                if layer == 0:
                    inner_l4_new = Signal(16, name="inner_l4_new")
                    inner_hdr_out = Mux(hf1, inner["hdr_new"], inner["hcs"])
                    m.d.comb += inner_l4_new.eq(_l4_value(m, inner, name="inner_l4"))
                    inner_l4_out = Mux(lf1, inner_l4_new, inner["l4cs"])
                    terms += [~inner["hcs"] & 0xFFFF, inner_hdr_out,
                              ~inner["l4cs"] & 0xFFFF, inner_l4_out]
                    value = _l4_value(m, r, name="outer_l4", terms=terms)
                else:
                    value = inner_l4_new
                l4_new.append(value)
            patches = []
            for layer, r in enumerate(s4):
                hf, lf = values[layer]
                patches.append((hf, r["l3"] + 10, r["hdr_new"]))
                patches.append((lf, r["l4"] + Mux(r["tcp"], 16, 6), l4_new[layer]))
            anything = Signal()
            # `skip` is its own signal: the patch enables read it, and read back out of
            # desc_in (one vector in Verilog) it would make desc_in depend on itself, which
            # Verilator cannot order and evaluates again every cycle (UNOPTFLAT).
            skip = Signal()
            m.d.comb += anything.eq(Cat(*(v for pair in values for v in pair)).any())
            m.d.comb += [skip.eq(s4_skip_flags | ~anything), desc_in.skip.eq(skip)]
            for k, (en, at, value) in enumerate(patches):
                at_sig = Signal(pos_bits, name=f"patch_at{k}")
                m.d.comb += [at_sig.eq(at), desc_in.patch_en[k].eq(en & ~skip),
                             desc_in.patch_pos[k].eq(at_sig[1:]), desc_in.patch_val[k].eq(value)]
            for k in fills:
                counts[f"{k}_filled"] = fills[k]

        s5_valid = Signal()
        s5_desc = Signal(desc_layout)
        m.d.sync += [s5_valid.eq(s4_valid), s5_desc.eq(desc_in)]
        with m.If(s4_valid):
            live = ~s4_skip_flags
            for name, bits in counts.items():
                reg = getattr(csr, name)
                m.d.sync += reg.eq(reg + Mux(live, sum(b.as_unsigned() for b in bits), 0))
            m.d.sync += csr.oversize.eq(csr.oversize + s4_over)
        desc_fifo = m.submodules.desc_fifo = fifo.SyncFIFOBuffered(
            width=desc_layout.size, depth=desc_depth)
        m.d.comb += [desc_fifo.w_en.eq(s5_valid), desc_fifo.w_data.eq(s5_desc)]

        # --- output: read the ring ahead, wait for the descriptor, patch ----------------------
        desc = desc_layout(desc_fifo.r_data)
        out_data = ring.r_data[:W]
        out_keep = ring.r_data[W:W + nbytes]
        out_last = ring.r_data[W + nbytes]
        out_tail = ring.r_data[W + nbytes + 1:]
        m.d.comb += self.o.valid.eq(ring.r_rdy & desc_fifo.r_rdy)
        out_take = self.o.valid & self.o.ready
        m.d.comb += ring.r_en.eq(out_take)
        out_beat = Signal(beat_bits)
        with m.If(out_take):
            m.d.sync += out_beat.eq(Mux(out_last, 0, Mux(out_beat == beat_max, out_beat,
                                                         out_beat + 1)))
        if npatch:
            plist = [(desc.patch_en[k], desc.patch_pos[k], desc.patch_val[k])
                     for k in range(npatch)]
            out_data = patch_beat(m, out_data, out_beat, plist, nbytes, name="out")
        m.d.comb += [self.o.p.data.eq(out_data), self.o.p.keep.eq(out_keep),
                     self.o.p.last.eq(out_last), self.o.p.meta.eq(desc.meta)]
        with m.If(desc.drop):
            m.d.comb += self.o.p.meta.drop.eq(1)
        with m.If(out_last):
            for k, f in enumerate(TAIL_FLAGS):
                m.d.comb += getattr(self.o.p.meta.flags, f).eq(out_tail[k])
        m.d.comb += [desc_pop.eq(out_take & out_last), desc_fifo.r_en.eq(desc_pop)]
        # Skips and drops are counted as they are decided (stage 4), packets as they leave.
        self.count_standard(m, packets=desc_pop, dropped=s4_valid & desc_in.drop,
                            skipped=s4_valid & desc_in.skip)
        return m


def _l4_value(m, r, name, terms=None):
    """The L4 checksum to write: ones'-complement of the sum without the field; a UDP result
    of 0 is sent as 0xFFFF (RFC 768)."""
    if terms is None:
        terms = [r["s_l4"], ~r["l4cs"] & 0xFFFF]
    raw = Signal(16, name=f"{name}_raw")
    out = Signal(16, name=name)
    m.d.comb += [raw.eq(~ones_sum(m, terms, name=f"{name}_sum")),
                 out.eq(Mux(r["udp"] & (raw == 0), 0xFFFF, raw))]
    return out


class ChecksumVerify(ChecksumVerifyDescription, _ChecksumTask):
    """Checksum verifier: IPv4 header, TCP and UDP checksums counted, bad ones optionally
    dropped."""


class ChecksumOffload(ChecksumOffloadDescription, _ChecksumTask):
    """Checksum offload: IPv4 header, TCP and UDP checksums computed and written."""
