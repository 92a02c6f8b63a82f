"""Flow monitor gateware; what it counts, its flow table, its count-min sketch and its registers
are in :mod:`supernic.desc.nt.flow_monitor`.

In hardware each sketch row's column bit is a fixed XOR of at most 40 bits (:func:`_h3`).

One packet a cycle. Events (one a packet, on its last beat) run through a two-stage
read-modify-write pipeline over the table and each sketch row: E0 issues the read, E1 merges
and writes. Back-to-back events on one bucket would read a stale value (the write of the event
ahead lands in the cycle the read is issued), so E1 takes the value from a bypass register
holding the previous cycle's write when the addresses match. At 512 bits a 64-byte packet is
one beat, so this is the full rate.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory

from ...desc.meta import L3Kind
from ...desc.nt.flow_monitor import SKETCH_INPUT_BITS, FlowMonitorDescription, sketch_matrix
from ..parser.meta import flow_layout
from .task import NetworkTask

__all__ = ["FlowMonitor", "entry_layout", "LENGTH_BITS"]

#: Bits of a frame length: Ethernet frames, jumbo ones included, are far below 2**24 bytes.
LENGTH_BITS = 24


def entry_layout():
    return data.StructLayout({"valid": 1, "key": flow_layout(), "packets": 64, "bytes": 64})


def _popcount(bits):
    """Number of set bits, as a balanced adder tree (a left-nested sum would be 64 deep)."""
    terms = [bits[k] for k in range(len(bits))]
    while len(terms) > 1:
        terms = [terms[k] + terms[k + 1] if k + 1 < len(terms) else terms[k]
                 for k in range(0, len(terms), 2)]
    return terms[0]


def _h3(m, value, matrix, column_bits, name):
    out = Signal(column_bits, name=name)
    for j in range(column_bits):
        taps = [value[i] for i in range(SKETCH_INPUT_BITS) if matrix[i] >> j & 1]
        m.d.comb += out[j].eq(Cat(*taps).xor() if taps else 0)
    return out


class FlowMonitor(FlowMonitorDescription, NetworkTask):
    """Flow monitor: per-flow counters in a hash table and a count-min sketch."""

    def elaborate(self, platform):
        m = Module()
        csr = self.csr
        entries = self.p["entries"]
        rows = self.p["sketch_rows"]
        width = self.p["sketch_width"]
        bucket_bits = (entries - 1).bit_length()
        column_bits = (width - 1).bit_length()
        layout = entry_layout()
        key_layout = flow_layout()
        matrices = [sketch_matrix(r, column_bits) for r in range(rows)]

        m.submodules.table = table = Memory(shape=layout, depth=entries, init=[])
        sketch = []
        for r in range(rows):
            mem = Memory(shape=64, depth=width, init=[])
            m.submodules[f"sketch{r}"] = mem
            sketch.append(mem)

        # --- clear: sweep every row of every memory, input stalled ----------------------------
        sweep = max(entries, width)
        clearing = Signal()
        clear_at = Signal(range(sweep + 1))

        # --- pass-through: one register stage -------------------------------------------------
        o_valid = Signal()
        o_beat = Signal(self.i.p.shape())
        o_counted = Signal()
        accept = Signal()
        m.d.comb += [
            self.i.ready.eq((~o_valid | self.o.ready) & ~clearing),
            accept.eq(self.i.valid & self.i.ready),
            self.o.valid.eq(o_valid), self.o.p.eq(o_beat),
        ]

        # --- the event of a packet: decided on its first beat, fired on its last --------------
        meta = self.i.p.meta
        in_first = Signal(init=1)
        counted_now = Signal()
        counted = Signal()
        bytes_mode_now = Signal()
        bytes_mode = Signal()
        m.d.comb += [
            counted_now.eq(Mux(in_first,
                               csr.control[0] & (meta.l3_kind[0] != L3Kind.NONE)
                               & ~(meta.drop | meta.flags.truncated | meta.flags.malformed
                                   | meta.flags.runt),
                               counted)),
            bytes_mode_now.eq(Mux(in_first, csr.control[1], bytes_mode)),
        ]
        so_far = Signal(LENGTH_BITS)
        length = Signal(LENGTH_BITS)
        m.d.comb += length.eq(Mux(in_first, 0, so_far) + _popcount(self.i.p.keep))
        with m.If(accept):
            m.d.sync += [in_first.eq(self.i.p.last), so_far.eq(length),
                         counted.eq(counted_now), bytes_mode.eq(bytes_mode_now),
                         o_valid.eq(1), o_beat.eq(self.i.p), o_counted.eq(counted_now)]
        with m.Elif(self.o.ready):
            m.d.sync += o_valid.eq(0)
        end = self.o.valid & self.o.ready & self.o.p.last
        self.count_standard(m, packets=end, skipped=end & ~o_counted)

        # E0: the event registered, with its bucket and sketch columns.
        e0_valid = Signal()
        e1_valid = Signal()
        e0_key = Signal(key_layout)
        e1_key = Signal(key_layout)
        e0_len = Signal(LENGTH_BITS)
        e1_len = Signal(LENGTH_BITS)
        e0_bytes = Signal()
        e1_bytes = Signal()
        e0_bucket = Signal(max(1, bucket_bits))
        e1_bucket = Signal(max(1, bucket_bits))
        e0_cols = [Signal(max(1, column_bits), name=f"e0_col{r}") for r in range(rows)]
        e1_cols = [Signal(max(1, column_bits), name=f"e1_col{r}") for r in range(rows)]
        m.d.sync += [
            e0_valid.eq(accept & self.i.p.last & counted_now),
            e1_valid.eq(e0_valid), e1_key.eq(e0_key), e1_len.eq(e0_len),
            e1_bytes.eq(e0_bytes), e1_bucket.eq(e0_bucket),
        ]
        # E0 loads only from a beat taken: between packets it holds (its bucket keeps
        # addressing the table), so nothing in it depends on an input nobody offered. That
        # lets the state transform analyse this NT as a part of a chain
        # (hw/transform/compose.py); a flip-flop's enable costs no LUT on an FPGA.
        with m.If(accept):
            m.d.sync += [e0_key.eq(meta.flow), e0_len.eq(length), e0_bytes.eq(bytes_mode_now),
                         e0_bucket.eq(meta.flow_hash[:bucket_bits])]
        for r in range(rows):
            col = _h3(m, Cat(meta.flow_hash, meta.flow.proto), matrices[r], column_bits,
                      f"col{r}")
            with m.If(accept):
                m.d.sync += e0_cols[r].eq(col)
            m.d.sync += e1_cols[r].eq(e0_cols[r])

        # E1: merge (memory or bypass), update, write.
        t_read = table.read_port()
        t_write = table.write_port()
        m.d.comb += t_read.addr.eq(e0_bucket)
        bypass_valid = Signal()
        bypass_addr = Signal.like(e1_bucket)
        bypass_data = Signal(layout)
        current = Signal(layout)
        m.d.comb += current.eq(Mux(bypass_valid & (bypass_addr == e1_bucket),
                                   bypass_data, t_read.data))
        same = Signal()
        m.d.comb += same.eq(current.key.as_value() == e1_key.as_value())
        updated = Signal(layout)
        write = Signal()
        m.d.comb += [
            write.eq(e1_valid & (~current.valid | same)),
            updated.valid.eq(1),
            updated.key.eq(e1_key),
            updated.packets.eq(Mux(current.valid, current.packets, 0) + 1),
            updated.bytes.eq(Mux(current.valid, current.bytes, 0) + e1_len),
        ]
        m.d.sync += [bypass_valid.eq(write), bypass_addr.eq(e1_bucket), bypass_data.eq(updated)]
        with m.If(e1_valid & current.valid & ~same):
            m.d.sync += csr.collisions.eq(csr.collisions + 1)
        # The sweep starts once the event pipeline is empty (no event write may follow it);
        # the input is stalled while clearing, so it empties in two cycles.
        sweeping = Signal()
        m.d.comb += sweeping.eq(clearing & ~e0_valid & ~e1_valid)
        with m.If(sweeping):
            m.d.comb += [t_write.addr.eq(clear_at), t_write.data.eq(0),
                         t_write.en.eq(clear_at < entries)]
        with m.Else():
            m.d.comb += [t_write.addr.eq(e1_bucket), t_write.data.eq(updated),
                         t_write.en.eq(write)]

        increment = Signal(LENGTH_BITS)
        m.d.comb += increment.eq(Mux(e1_bytes, e1_len, 1))
        for r, mem in enumerate(sketch):
            rd, wr = mem.read_port(), mem.write_port()
            m.d.comb += rd.addr.eq(e0_cols[r])
            b_valid, b_addr, b_data = (Signal(name=f"sk{r}_bypass_valid"),
                                       Signal(max(1, column_bits), name=f"sk{r}_bypass_addr"),
                                       Signal(64, name=f"sk{r}_bypass_data"))
            new = Signal(64, name=f"sk{r}_new")
            m.d.comb += new.eq(Mux(b_valid & (b_addr == e1_cols[r]), b_data, rd.data)
                               + increment)
            m.d.sync += [b_valid.eq(e1_valid), b_addr.eq(e1_cols[r]), b_data.eq(new)]
            with m.If(sweeping):
                m.d.comb += [wr.addr.eq(clear_at), wr.data.eq(0), wr.en.eq(clear_at < width)]
            with m.Else():
                m.d.comb += [wr.addr.eq(e1_cols[r]), wr.data.eq(new), wr.en.eq(e1_valid)]

        m.d.comb += csr.clearing.eq(clearing)
        with m.If(csr.clear & ~clearing):
            m.d.sync += [clearing.eq(1), clear_at.eq(0)]
        with m.Elif(sweeping):
            m.d.sync += clear_at.eq(clear_at + 1)
            with m.If(clear_at == sweep - 1):
                m.d.sync += [clearing.eq(0), csr.collisions.eq(0)]

        # --- read-back ports ------------------------------------------------------------------
        t_back = table.read_port()
        m.d.comb += [t_back.addr.eq(csr.entry_index), t_back.en.eq(csr.entry_read)]
        entry = t_back.data
        m.d.comb += [
            csr.entry_flags.eq(Cat(entry.key.proto, entry.key.ipv6, entry.valid)),
            csr.entry_src_upper.eq(entry.key.src_ip[64:]),
            csr.entry_src_lower.eq(entry.key.src_ip[:64]),
            csr.entry_dst_upper.eq(entry.key.dst_ip[64:]),
            csr.entry_dst_lower.eq(entry.key.dst_ip[:64]),
            csr.entry_ports.eq(Cat(entry.key.dport, entry.key.sport)),
            csr.entry_packets.eq(entry.packets),
            csr.entry_bytes.eq(entry.bytes),
        ]
        query_cols = [_h3(m, Cat(csr.query_hash, csr.query_proto), matrices[r], column_bits,
                          f"query_col{r}") for r in range(rows)]
        backs = []
        for r, mem in enumerate(sketch):
            port = mem.read_port()
            m.d.comb += [port.addr.eq(Mux(csr.query, query_cols[r],
                                          csr.sketch_index[:column_bits])),
                         port.en.eq(csr.query | csr.sketch_read)]
            backs.append(port.data)
        # Latched the cycle after the strobe: the ports serve both reads.
        did_read = Signal()
        did_query = Signal()
        m.d.sync += [did_read.eq(csr.sketch_read), did_query.eq(csr.query)]
        count = Signal(64)
        m.d.comb += count.eq(backs[0])
        if rows > 1:
            with m.Switch(csr.sketch_index[column_bits:]):
                for r in range(1, rows):
                    with m.Case(r):
                        m.d.comb += count.eq(backs[r])
        with m.If(did_read):
            m.d.sync += csr.sketch_count.eq(count)
        estimate = backs[0]
        for r in range(1, rows):
            lower = Signal(64, name=f"min{r}")
            m.d.comb += lower.eq(Mux(backs[r] < estimate, backs[r], estimate))
            estimate = lower
        with m.If(did_query):
            m.d.sync += csr.query_estimate.eq(estimate)
        return m
