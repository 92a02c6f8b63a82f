"""VXLAN encapsulation and decapsulation (RFC 7348): the gateware (what the NTs do and how they
are configured: :mod:`supernic.desc.nt.vxlan`).

The outer lengths and the checksum depend on the frame length, which the parser's metadata does
not carry and which is only known at a packet's last beat, while those fields go out in the
first beats. So encap is store-and-forward: every packet is written whole into a FIFO of
``buffer_bytes`` and a per-packet record (first-beat metadata, byte length) is queued when its
last beat is in; the packet is read out once its record is there (hence ``Scope.PACKET``). A
packet that would not fit is recognised when it fills the FIFO: its record goes out marked
oversize and the packet streams through unchanged. With the FIFO holding two frames, the output
runs at one beat a cycle under saturation; latency is one whole packet.
"""

from amaranth.hdl import C, Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, wiring
from amaranth.utils import bits_for

from ...desc.headers import VXLAN_PORT
from ...desc.meta import RUNT_BYTES, TAIL_FLAGS, L3Kind, L4Kind, TenantKind
from ...desc.nt.vxlan import (ENCAP_BYTES, MAX_INNER_TAGS, SPORT_BASE, VxlanDecapDescription,
                              VxlanEncapDescription)
from .checksum_update import ones_sum
from .realign import HeadWindow, Realigner, skip_rule
from .task import NetworkTask, count_events
from .vlan import be_bytes, moved

__all__ = ["VxlanEncap", "VxlanDecap", "DECAP_WINDOW"]

OUTER_L3, OUTER_L4 = 14, 34  # where the outer IPv4 and UDP headers start
INFO_DEPTH = 8  # packet records in flight inside encap's store-and-forward FIFO
# Decap reads the inner frame's first bytes: tags at 12.., TCIs at 14 and 18, and the IPv4 total
# length (IP offset + 2) or IPv6 payload length (+ 4) behind up to three tags: bytes 0..31.
DECAP_WINDOW = 32


class VxlanEncap(VxlanEncapDescription, NetworkTask):
    """Encapsulate packets in outer Ethernet/IPv4/UDP/VXLAN (RFC 7348)"""

    def elaborate(self, platform):
        m = Module()
        W = self.data_width // 8
        depth = self.p["buffer_bytes"] // W
        csr, i = self.csr, self.i
        beat_layout = data.StructLayout({
            "data": 8 * W, "keep": W, "last": 1, "tail": len(TAIL_FLAGS)})
        info_layout = data.StructLayout({
            "meta": self.meta_layout, "length": bits_for(self.p["buffer_bytes"]),
            "oversize": 1})
        m.submodules.beats = beats = fifo.SyncFIFOBuffered(width=beat_layout.size, depth=depth)
        m.submodules.infos = infos = fifo.SyncFIFOBuffered(width=info_layout.size,
                                                           depth=INFO_DEPTH)
        m.submodules.realign = ra = Realigner(self.data_width, self.meta_layout,
                                              max_head=ENCAP_BYTES, max_drop=0)
        wiring.connect(m, ra.o, wiring.flipped(self.o))

        # ---- write side: every beat into the FIFO, a record per packet ------------------------
        w_mid = Signal()
        w_beats = Signal(range(depth + 1))
        w_length = Signal(bits_for(self.p["buffer_bytes"]) + 1)
        w_meta = Signal(self.meta_layout)
        w_oversize = Signal()
        beats_now = Signal.like(w_beats)
        length_now = Signal.like(w_length)
        in_tail = Cat(*[i.p.meta.flags[f] for f in TAIL_FLAGS])
        push_info = Signal()
        record = Signal(info_layout)
        accept = Signal()
        m.d.comb += [
            beats_now.eq(Mux(w_mid, w_beats + 1, 1)),
            length_now.eq(Mux(w_mid, w_length, 0) + sum(i.p.keep[b] for b in range(W))),
            # A packet that fills the FIFO without ending can never be whole in it: its record
            # goes out now, marked oversize, so it streams out while the rest comes in.
            push_info.eq(~w_oversize & (i.p.last | (beats_now == depth))),
            record.meta.eq(Mux(w_mid, w_meta.as_value(), i.p.meta.as_value())),
            record.length.eq(length_now),
            record.oversize.eq(~i.p.last),
            i.ready.eq(beats.w_rdy & infos.w_rdy),
            accept.eq(i.valid & i.ready),
            beats.w_en.eq(accept),
            beats.w_data.eq(Cat(i.p.data, i.p.keep, i.p.last, in_tail)),
            infos.w_en.eq(accept & push_info),
            infos.w_data.eq(record),
        ]
        for n, f in enumerate(TAIL_FLAGS):
            m.d.comb += record.meta.flags[f].eq(in_tail[n] & i.p.last)
        with m.If(accept):
            m.d.sync += [w_mid.eq(~i.p.last), w_beats.eq(beats_now), w_length.eq(length_now)]
            with m.If(~w_mid):
                m.d.sync += w_meta.eq(i.p.meta)
            with m.If(i.p.last):
                m.d.sync += w_oversize.eq(0)
            with m.Elif(push_info):
                m.d.sync += w_oversize.eq(1)

        # ---- read side: a packet leaves once its record is in ---------------------------------
        cur_valid = Signal()
        cur = Signal(info_layout)
        beat = data.View(beat_layout, beats.r_data)
        done = Signal()
        m.d.comb += [
            ra.i.valid.eq(cur_valid & beats.r_rdy),
            ra.i.p.data.eq(beat.data),
            ra.i.p.keep.eq(beat.keep),
            ra.i.p.last.eq(beat.last),
            beats.r_en.eq(ra.i.valid & ra.i.ready),
            done.eq(ra.i.valid & ra.i.ready & beat.last),
            infos.r_en.eq(infos.r_rdy & (~cur_valid | done)),
        ]
        for n, f in enumerate(TAIL_FLAGS):
            m.d.comb += ra.i.p.meta.flags[f].eq(beat.tail[n])
        with m.If(infos.r_en):
            m.d.sync += [cur_valid.eq(1), cur.eq(infos.r_data)]
        with m.Elif(done):
            m.d.sync += cur_valid.eq(0)

        meta = cur.meta
        length = cur.length
        applies = Signal()
        m.d.comb += applies.eq(~cur.oversize & ~skip_rule(meta) & ~meta.vxlan
                               & ~meta.flags.keep_error
                               & (meta.payload_off + ENCAP_BYTES <= self.header_bytes))

        # ---- the outer headers ---------------------------------------------------------------
        ident = Signal(16)  # RFC 791 identification, one per encapsulated packet
        total_length = Signal(16)
        udp_length = Signal(16)
        sport = Signal(16)
        flags_fragment = Signal(16)
        m.d.comb += [
            total_length.eq(length + ENCAP_BYTES - OUTER_L3),
            udp_length.eq(length + ENCAP_BYTES - OUTER_L4),
            sport.eq(SPORT_BASE | meta.flow_hash[:14]),
            flags_fragment.eq(csr.df << 14),  # RFC 791: flags 0 DF MF, fragment offset 0
        ]
        header_sum = ones_sum(m, [
            C(0x4500, 16), total_length, ident, flags_fragment, Cat(C(17, 8), csr.ttl),
            csr.src_ip[16:], csr.src_ip[:16], csr.dst_ip[16:], csr.dst_ip[:16]],
            name="ipv4_sum")
        checksum = Signal(16)
        m.d.comb += checksum.eq(~header_sum)
        head = Cat(
            be_bytes(csr.dst_mac, 6), be_bytes(csr.src_mac, 6), be_bytes(C(0x0800, 16), 2),
            C(0x45, 8), C(0, 8), be_bytes(total_length, 2), be_bytes(ident, 2),
            be_bytes(flags_fragment, 2), csr.ttl, C(17, 8), be_bytes(checksum, 2),
            be_bytes(csr.src_ip, 4), be_bytes(csr.dst_ip, 4),
            be_bytes(sport, 2), be_bytes(C(VXLAN_PORT, 16), 2), be_bytes(udp_length, 2),
            C(0, 16),
            C(0x08, 8), C(0, 24), be_bytes(csr.vni, 3), C(0, 8),
        )
        assert len(head) == 8 * ENCAP_BYTES

        # Rewrites sit under m.If (see hw/nt/vlan.py: constant part-assignments otherwise
        # become `always @*` blocks that simulators never run).
        new = Signal(self.meta_layout)
        m.d.comb += new.eq(meta)
        with m.If(applies):
            m.d.comb += [
                new.l3_kind[0].eq(L3Kind.IPV4), new.l3_kind[1].eq(meta.l3_kind[0]),
                new.l4_kind[0].eq(L4Kind.UDP), new.l4_kind[1].eq(meta.l4_kind[0]),
                new.l3_off[0].eq(OUTER_L3), new.l3_off[1].eq(moved(meta.l3_off[0], ENCAP_BYTES)),
                new.l4_off[0].eq(OUTER_L4), new.l4_off[1].eq(moved(meta.l4_off[0], ENCAP_BYTES)),
                new.inner_l2_off.eq(ENCAP_BYTES),
                new.payload_off.eq(meta.payload_off + ENCAP_BYTES),
                new.vlan_count.eq(0), new.vid.eq(0), new.vid2.eq(0),
                new.vxlan.eq(1), new.vni.eq(csr.vni),
                new.tenant_kind.eq(TenantKind.VNI), new.tenant_key.eq(csr.vni),
                new.min_len.eq(Mux(length > meta.min_len, length, meta.min_len) + ENCAP_BYTES),
            ]
            with m.If(meta.l3_kind[0] == L3Kind.NONE):
                # No IP in the old frame: the outer IPv4 and UDP headers are the last walked.
                m.d.comb += [
                    new.flow.src_ip.eq(csr.src_ip), new.flow.dst_ip.eq(csr.dst_ip),
                    new.flow.sport.eq(sport), new.flow.dport.eq(VXLAN_PORT),
                    new.flow.proto.eq(17), new.flow.ipv6.eq(0),
                ]
        m.d.comb += [
            ra.ctl.head.eq(head),
            ra.ctl.p.eq(Mux(applies, ENCAP_BYTES, 0)),
            ra.ctl.d.eq(0),
            ra.ctl.meta.eq(new),
        ]
        decided = ra.i.valid & ra.i.ready & ra.first
        with m.If(decided & applies):
            m.d.sync += ident.eq(ident + 1)
        self.count_standard(m, packets=self.o.valid & self.o.ready & self.o.p.last,
                            skipped=decided & ~applies)
        return m


class VxlanDecap(VxlanDecapDescription, NetworkTask):
    """Strip the outer headers of VXLAN packets (RFC 7348)"""

    def elaborate(self, platform):
        m = Module()
        csr, i = self.csr, self.i
        m.submodules.realign = ra = Realigner(self.data_width, self.meta_layout, max_head=0,
                                              max_drop=self.header_bytes, max_pad=RUNT_BYTES)
        m.submodules.window = win = HeadWindow(self.data_width, self.meta_layout, DECAP_WINDOW)
        # One bit a packet in flight, from the decision to the metadata patch behind the
        # realigner: only decapsulated packets take their tags and lengths from the new frame.
        m.submodules.decisions = decisions = fifo.SyncFIFO(width=1, depth=8)
        wiring.connect(m, ra.o, win.i)

        meta = i.p.meta
        inner = Signal.like(meta.inner_l2_off)
        tags_end = Signal.like(meta.payload_off)
        inner_tags = Signal.like(meta.payload_off)
        vxlan = Signal()
        mismatch = Signal()
        applies = Signal()
        m.d.comb += [
            inner.eq(meta.inner_l2_off),
            tags_end.eq(Mux(meta.l3_kind[1] != 0, meta.l3_off[1], meta.payload_off)),
            inner_tags.eq((tags_end - inner - 14) >> 2),
            vxlan.eq(~skip_rule(meta) & meta.vxlan & (inner != 0)),
            mismatch.eq(vxlan & csr.match_vni & (meta.vni != csr.vni)),
            applies.eq(vxlan & ~mismatch
                       & ~((meta.l3_kind[1] != 0) & (inner_tags > MAX_INNER_TAGS))),
        ]
        admit = Signal()
        m.d.comb += [
            admit.eq(~ra.first | decisions.w_rdy),
            ra.i.valid.eq(i.valid & admit),
            ra.i.p.eq(i.p),
            i.ready.eq(ra.i.ready & admit),
            decisions.w_en.eq(i.valid & i.ready & ra.first),
            decisions.w_data.eq(applies),
        ]

        new = Signal(self.meta_layout)
        m.d.comb += new.eq(meta)
        with m.If(applies):
            m.d.comb += [
                new.l3_kind[0].eq(meta.l3_kind[1]), new.l3_kind[1].eq(L3Kind.NONE),
                new.l4_kind[0].eq(meta.l4_kind[1]), new.l4_kind[1].eq(L4Kind.NONE),
                new.l3_off[0].eq(moved(meta.l3_off[1], -inner)), new.l3_off[1].eq(0),
                new.l4_off[0].eq(moved(meta.l4_off[1], -inner)), new.l4_off[1].eq(0),
                new.inner_l2_off.eq(0),
                new.payload_off.eq(meta.payload_off - inner),
                new.vxlan.eq(0), new.vni.eq(0),
                new.vlan_count.eq(Mux(inner_tags >= 3, 3, inner_tags)),
                # Read from the new frame behind the realigner: VIDs, tenant key, min_len.
                new.vid.eq(0), new.vid2.eq(0), new.tenant_kind.eq(TenantKind.NONE),
                new.tenant_key.eq(0), new.min_len.eq(0),
            ]
            with m.If(meta.l3_kind[1] == L3Kind.NONE):
                m.d.comb += new.flow.eq(0)
        m.d.comb += [
            ra.ctl.d.eq(Mux(applies, inner, 0)),
            ra.ctl.p.eq(0),
            ra.ctl.pad.eq(Mux(applies, RUNT_BYTES, 0)),
            ra.ctl.meta.eq(new),
        ]

        # ---- metadata patch from the inner frame's first bytes ---------------------------------
        src, window = win.o, win.window
        p_mid = Signal()
        o_valid = Signal()
        o_last = Signal()
        o_data, o_keep = Signal.like(src.p.data), Signal.like(src.p.keep)
        o_meta = Signal(self.meta_layout)
        held = Signal(self.meta_layout)
        can_load = Signal()
        take = Signal()
        first = Signal()
        m.d.comb += [
            first.eq(~p_mid),
            can_load.eq(~o_valid | self.o.ready),
            src.ready.eq(can_load & (~first | decisions.r_rdy)),
            take.eq(src.valid & src.ready),
            decisions.r_en.eq(take & first),
            self.o.valid.eq(o_valid), self.o.p.data.eq(o_data), self.o.p.keep.eq(o_keep),
            self.o.p.last.eq(o_last), self.o.p.meta.eq(o_meta),
        ]

        def wire16(offset):  # a big-endian 16-bit field of the new frame
            return Cat(window[8 * (offset + 1):8 * (offset + 2)], window[8 * offset:8 * offset + 8])

        def vid_at(offset):  # IEEE 802.1Q TCI at offset: the VID is its low 12 bits
            return wire16(offset)[:12]

        smeta = src.p.meta
        tags = smeta.vlan_count
        ip_length = Signal(16)
        with m.Switch(tags):
            for k in range(MAX_INNER_TAGS + 1):
                with m.Case(k):  # RFC 791 total length at IP + 2, RFC 8200 payload length at + 4
                    m.d.comb += ip_length.eq(Mux(smeta.l3_kind[0] == L3Kind.IPV6,
                                                 wire16(14 + 4 * k + 4), wire16(14 + 4 * k + 2)))
        patched = Signal(self.meta_layout)
        m.d.comb += patched.eq(smeta)
        with m.If(decisions.r_data):
            m.d.comb += [
                patched.vid.eq(Mux(tags >= 1, vid_at(14), 0)),
                patched.vid2.eq(Mux(tags >= 2, vid_at(18), 0)),
                patched.tenant_kind.eq(Mux(tags != 0, TenantKind.VLAN, TenantKind.NONE)),
                patched.tenant_key.eq(Mux(tags != 0, vid_at(14), 0)),
            ]
            with m.Switch(smeta.l3_kind[0]):
                with m.Case(L3Kind.IPV4):
                    m.d.comb += patched.min_len.eq(smeta.l3_off[0] + ip_length)
                with m.Case(L3Kind.IPV6):
                    m.d.comb += patched.min_len.eq(smeta.l3_off[0] + 40 + ip_length)
        out_meta = Signal(self.meta_layout)
        m.d.comb += out_meta.eq(Mux(first, patched.as_value(), held.as_value()))
        for f in TAIL_FLAGS:
            m.d.comb += out_meta.flags[f].eq(smeta.flags[f])
        with m.If(can_load):
            m.d.sync += o_valid.eq(take)
        with m.If(take):
            m.d.sync += [
                p_mid.eq(~src.p.last), o_data.eq(src.p.data), o_keep.eq(src.p.keep),
                o_last.eq(src.p.last), o_meta.eq(out_meta),
            ]
            with m.If(first):
                m.d.sync += held.eq(patched)

        decided = i.valid & i.ready & ra.first
        self.count_standard(m, packets=self.o.valid & self.o.ready & self.o.p.last,
                            skipped=decided & ~applies)
        count_events(m, csr, vni_mismatch=decided & mismatch)
        return m
