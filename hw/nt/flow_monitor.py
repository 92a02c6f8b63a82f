"""Flow monitor: exact per-flow packet and byte counters in a hash table, plus a count-min
sketch for heavy hitters. It watches and never changes a packet.

What is counted. Every IP packet (the outer L3 header is IPv4 or IPv6) that the skip rule lets
through is one event for the flow the metadata names (the innermost 5-tuple), with its frame
length in bytes (the ``keep`` bits of all its beats, so known on the last beat). Non-IP packets
count in ``skipped`` with the usual skips (contract rule 3); nothing is dropped.

Flow table. ``entries`` buckets (a power of two); a packet's bucket is the low bits of
``meta.flow_hash``. Each bucket holds a valid bit, the whole flow key (297 bits, so collisions
are exact, never guessed, and software reads back which flow a bucket counts) and 64-bit packet
and byte counters. An empty bucket is claimed by the first flow that hashes to it; a packet of
another flow that lands on a claimed bucket is a collision: it counts in ``collisions`` and goes
to the sketch only.

Count-min sketch (Cormode and Muthukrishnan, "An improved data stream summary: the count-min
sketch and its applications", J. Algorithms 2005). ``sketch_rows`` rows of ``sketch_width``
64-bit counters; every counted packet adds its bytes (or 1, per ``control`` bit 1) to one
counter in each row, and a flow's estimate is the minimum over the rows of its counters, never
below the truth and, with probability ``1 - e**-d``, at most ``e/w`` of the total above it. Row
``r`` picks its counter with its own H3 hash (Carter and Wegman, J. Comput. Syst. Sci. 1979) of
the 40-bit value ``protocol << 32 | flow_hash``: ``column = Q_r . value`` over GF(2), with
``Q_r`` a ``log2(w) x 40`` bit matrix drawn from a PRNG seeded with the row number
(:func:`sketch_matrix`). For two different values a random ``Q_r`` collides with probability
exactly ``1/w``, and the rows' matrices are drawn independently: the pairwise independence the
sketch's bound uses. In hardware each column bit is a fixed XOR of at most 40 bits. The
protocol is there because the Toeplitz flow hash (RSS) leaves it out, so a TCP and a UDP flow
between the same sockets would otherwise share every counter; hashing the 40-bit value and not
the 297-bit key keeps the XORs small, and two distinct flows with equal hashes and protocols
(2**-32 a pair) would share every counter, far below the sketch's own error. (The table's
bucket is the flow hash alone, so those TCP/UDP twins collide there, and are counted.)

One packet a cycle. Events (one a packet, on its last beat) run through a two-stage
read-modify-write pipeline over the table and each sketch row: E0 issues the read, E1 merges
and writes. Back-to-back events on one bucket would read a stale value (the write of the event
ahead lands in the cycle the read is issued), so E1 takes the value from a bypass register
holding the previous cycle's write when the addresses match. At 512 bits a 64-byte packet is
one beat, so this is the full rate.

Registers. ``control``: bit 0 enable, bit 1 sketch counts bytes (0: packets). ``collisions``.
Table read-back: ``entry_index``, write 1 to ``entry_read``, then ``entry_flags`` (bit 9 valid,
bit 8 IPv6, bits 7:0 protocol), ``entry_src_upper``/``_lower`` and ``entry_dst_upper``/``_lower``
(address bits 127:64 and 63:0; IPv4 in the low 32), ``entry_ports`` (source << 16 | destination),
``entry_packets``, ``entry_bytes``. Sketch read-back: ``sketch_index`` (row << log2(w) |
column), write 1 to ``sketch_read``, then ``sketch_count``. Query: ``query_hash`` (a flow's
Toeplitz hash, as the driver's model computes it) and ``query_proto``, write 1 to ``query``,
then ``query_estimate``. Each read-back is ready one cycle after its strobe, sooner than the next
register read can arrive. ``clear`` (write 1) empties the table and the sketch and zeroes
``collisions``: the input stalls for ``max(entries, sketch_width)`` cycles, while ``clearing``
reads 1.
"""

import random
from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory

from ..csr.registers import R, RW, W1P, Register
from ..parser.meta import L3Kind, flow_layout
from .task import ConfigError, NetworkTask, Param, Scope, TaskConfig

__all__ = ["FlowMonitor", "FlowMonitorConfig", "sketch_matrix", "sketch_column", "sketch_input",
           "entry_layout", "CONTROL_ENABLE", "CONTROL_SKETCH_BYTES", "LENGTH_BITS",
           "SKETCH_INPUT_BITS"]

CONTROL_ENABLE = 1 << 0
CONTROL_SKETCH_BYTES = 1 << 1
#: Bits of a frame length: Ethernet frames, jumbo ones included, are far below 2**24 bytes.
LENGTH_BITS = 24
#: Bits the sketch rows hash: the 32-bit flow hash and the 8-bit IP protocol above it.
SKETCH_INPUT_BITS = 40
_SKETCH_SEED = 0xC0_0173_0000  # rows draw their H3 matrices from seed + row


def sketch_matrix(row, column_bits):
    """H3 matrix of sketch row ``row``: one ``column_bits``-bit vector per input bit."""
    rng = random.Random(_SKETCH_SEED + row)
    return [rng.getrandbits(column_bits) for _ in range(SKETCH_INPUT_BITS)]


def sketch_input(flow_hash, proto):
    """What the rows hash: ``proto << 32 | flow_hash``."""
    return proto << 32 | flow_hash


def sketch_column(matrix, value):
    """The counter of a row for ``value``: XOR of the matrix vectors of its set bits."""
    column = 0
    for bit, vector in enumerate(matrix):
        if value >> bit & 1:
            column ^= vector
    return column


def entry_layout():
    return data.StructLayout({"valid": 1, "key": flow_layout(), "packets": 64, "bytes": 64})


# --- configuration ----------------------------------------------------------------------------

@dataclass
class FlowMonitorConfig(TaskConfig):
    enabled: bool = True
    sketch: str = "bytes"   # what the sketch counts: "bytes" or "packets"

    @classmethod
    def from_dict(cls, kind, params, raw):
        if not isinstance(raw, dict):
            raise ConfigError(f"nt {kind}: config must be a table, not {raw!r}")
        unknown = set(raw) - {"enabled", "sketch"}
        if unknown:
            raise ConfigError(f"nt {kind}: unknown config key {sorted(unknown)[0]!r} "
                              f"(known: enabled, sketch)")
        enabled = raw.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"nt {kind}: enabled must be true or false, not {enabled!r}")
        sketch = raw.get("sketch", "bytes")
        if sketch not in ("bytes", "packets"):
            raise ConfigError(f"nt {kind}: sketch must be 'bytes' or 'packets', not {sketch!r}")
        return cls(enabled, sketch)

    @property
    def control(self):
        return ((CONTROL_ENABLE if self.enabled else 0)
                | (CONTROL_SKETCH_BYTES if self.sketch == "bytes" else 0))

    def register_writes(self, params):
        return [("control", self.control)]

    @classmethod
    def random(cls, rng, params):
        return cls(True, rng.choice(["bytes", "packets"]))


# --- gateware ---------------------------------------------------------------------------------

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


class FlowMonitor(NetworkTask):
    """Flow monitor: per-flow counters in a hash table and a count-min sketch."""
    kind = "flow_monitor"
    scope = Scope.HEADER
    needs_frame = True  # it counts the frame's bytes, known from the keep bits of every beat
    modifies = False
    type_id = 0x464C_4F57  # 'FLOW'
    params = (
        Param("entries", 1024, low=2, high=65536, power_of_two=True, doc="Flow table buckets"),
        Param("sketch_rows", 4, low=1, high=8, doc="Count-min sketch rows d"),
        Param("sketch_width", 1024, low=2, high=65536, power_of_two=True,
              doc="Counters a sketch row w"),
    )
    config = FlowMonitorConfig
    model = "flow_monitor:FlowMonitorModel"

    @classmethod
    def task_registers(cls, params):
        index_bits = (params["entries"] - 1).bit_length()
        sketch_bits = ((params["sketch_rows"] - 1).bit_length()
                       + (params["sketch_width"] - 1).bit_length())
        return [
            Register("control", 2, RW, doc="Bit 0 enable, bit 1 sketch counts bytes "
                                           "(0: packets)"),
            Register("collisions", 64, R, doc="Packets whose bucket held another flow"),
            Register("clear", 1, W1P, doc="Write 1: empty the table and the sketch"),
            Register("clearing", 1, R, doc="1 while a clear is under way"),
            Register("entry_index", max(1, index_bits), RW, doc="Bucket entry_read reads"),
            Register("entry_read", 1, W1P, doc="Write 1: bucket entry_index -> entry_*"),
            Register("entry_flags", 10, R, doc="Bit 9 valid, bit 8 IPv6, bits 7:0 protocol"),
            Register("entry_src_upper", 64, R, doc="Source address bits 127:64"),
            Register("entry_src_lower", 64, R, doc="Source address bits 63:0"),
            Register("entry_dst_upper", 64, R, doc="Destination address bits 127:64"),
            Register("entry_dst_lower", 64, R, doc="Destination address bits 63:0"),
            Register("entry_ports", 32, R, doc="Source port << 16 | destination port"),
            Register("entry_packets", 64, R, doc="Packets of the bucket's flow"),
            Register("entry_bytes", 64, R, doc="Bytes of the bucket's flow"),
            Register("sketch_index", max(1, sketch_bits), RW,
                     doc="Row << log2(sketch_width) | column that sketch_read reads"),
            Register("sketch_read", 1, W1P, doc="Write 1: counter sketch_index -> sketch_count"),
            Register("sketch_count", 64, R, doc="Sketch counter read by sketch_read"),
            Register("query_hash", 32, RW, doc="Flow hash of the flow query estimates"),
            Register("query_proto", 8, RW, doc="IP protocol of the flow query estimates"),
            Register("query", 1, W1P, doc="Write 1: estimate the flow -> query_estimate"),
            Register("query_estimate", 64, R, doc="Count-min estimate: minimum over the rows"),
        ]

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
        with m.If(self.o.valid & self.o.ready & self.o.p.last):
            m.d.sync += [csr.packets.eq(csr.packets + 1),
                         csr.skipped.eq(csr.skipped + ~o_counted)]
        m.d.comb += csr.dropped.eq(0)

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
