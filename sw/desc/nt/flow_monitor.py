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
sketch's bound uses. The protocol is there because the Toeplitz flow hash (RSS) leaves it out,
so a TCP and a UDP flow between the same sockets would otherwise share every counter; hashing
the 40-bit value and not the 297-bit key keeps the XORs small, and two distinct flows with equal
hashes and protocols (2**-32 a pair) would share every counter, far below the sketch's own
error. (The table's bucket is the flow hash alone, so those TCP/UDP twins collide there, and
are counted.)

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

The gateware is :mod:`supernic.hw.nt.flow_monitor`.
"""

import random
from dataclasses import dataclass

from ..registers import R, RW, W1P, Register
from .base import ConfigError, Param, Scope, TaskConfig, TaskDescription, csr_item

__all__ = ["FlowMonitorDescription", "FlowMonitorConfig", "sketch_matrix", "sketch_column",
           "sketch_input", "CONTROL_ENABLE", "CONTROL_SKETCH_BYTES", "SKETCH_INPUT_BITS"]

CONTROL_ENABLE = 1 << 0
CONTROL_SKETCH_BYTES = 1 << 1
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


# --- description ------------------------------------------------------------------------------

class FlowMonitorDescription(TaskDescription):
    kind = "flow_monitor"
    doc = "Flow monitor: per-flow counters in a hash table and a count-min sketch."
    scope = Scope.HEADER
    needs_frame = True  # it counts the frame's bytes, known from the keep bits of every beat
    modifies = False
    drops = False
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
    def shared_state(cls, params):
        rows = range(params["sketch_rows"])
        return {**super().shared_state(params), "collisions": csr_item("collisions"),
                "table": "table", "clearing": "clearing",
                "in_flight": ["e0_valid", "e1_valid"], "table_bypass": "bypass_valid",
                "sketch": [f"sketch{r}" for r in rows],
                "sketch_bypass": [f"sk{r}_bypass_valid" for r in rows]}

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
