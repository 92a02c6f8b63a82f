"""Model of the flow monitor (hw/nt/flow_monitor.py): a dict of buckets and a list of sketch
rows, updated packet by packet in order, as plainly as the rules read."""

from ...desc.meta import TOEPLITZ_KEY, L3Kind
from ...desc.nt.flow_monitor import FlowMonitorConfig, sketch_column, sketch_input, sketch_matrix
from ...hw.nt.flow_monitor import entry_layout
from ..layout_codec import decode, encode
from ..toeplitz import flow_hash_input, toeplitz
from ..traffic import random_packets
from .base import StateBridgeError, TaskModel, exact_size_frames, light_frames

__all__ = ["FlowMonitorModel", "flow_key", "query_hash"]

_MASK64 = (1 << 64) - 1
#: A table row (hw entry_layout): the valid bit, the flow key, the packet and byte counters.
_ENTRY = entry_layout()
_KEY_FIELDS = ("src_ip", "dst_ip", "sport", "dport", "proto", "ipv6")   # flow_key's order


def flow_key(flow):
    """The 5-tuple (plus the IPv6 bit) the table stores, as a hashable tuple."""
    return (flow["src_ip"], flow["dst_ip"], flow["sport"], flow["dport"], flow["proto"],
            flow["ipv6"])


def query_hash(flow):
    """What ``query_hash`` takes to estimate a flow given by its 5-tuple (``query_proto``
    takes its protocol): the parser's Toeplitz hash of it."""
    return toeplitz(TOEPLITZ_KEY, flow_hash_input(flow))


class FlowMonitorModel(TaskModel):
    config_class = FlowMonitorConfig

    def __init__(self, params, data_width=512, header_bytes=256):
        super().__init__(params, data_width, header_bytes)
        bits = (self.params["sketch_width"] - 1).bit_length()
        self.matrices = [sketch_matrix(r, bits) for r in range(self.params["sketch_rows"])]
        self.clear()

    def clear(self):
        """What the ``clear`` register does: empty table and sketch, collisions 0."""
        self.table = {}      # bucket -> [key, packets, bytes]
        self.sketch = [[0] * self.params["sketch_width"] for _ in self.matrices]
        self.collisions = 0
        self.queries = set()  # (flow hash, protocol) seen, for sketch queries

    def columns(self, flow_hash, proto):
        return [sketch_column(q, sketch_input(flow_hash, proto)) for q in self.matrices]

    def estimate(self, flow_hash, proto):
        """Count-min estimate of a flow: the least of its counters over the rows."""
        return min(row[c] for row, c in zip(self.sketch, self.columns(flow_hash, proto)))

    def apply(self, frame, meta):
        if not self.config.enabled or meta["l3_kind"][0] == L3Kind.NONE:
            return None
        key = flow_key(meta["flow"])
        bucket = meta["flow_hash"] % self.params["entries"]
        entry = self.table.get(bucket)
        if entry is None:
            self.table[bucket] = [key, 1, len(frame)]
        elif entry[0] == key:
            entry[1] = (entry[1] + 1) & _MASK64
            entry[2] = (entry[2] + len(frame)) & _MASK64
        else:
            self.collisions += 1
        query = meta["flow_hash"], meta["flow"]["proto"]
        self.queries.add(query)
        add = len(frame) if self.config.sketch == "bytes" else 1
        for row, column in zip(self.sketch, self.columns(*query)):
            row[column] = (row[column] + add) & _MASK64
        return frame, meta

    def counters(self):
        return {**self.stats, "collisions": self.collisions}

    # --- moving state between the hardware and the model (hw/transform) -------------------------
    def load_hw_tables(self, values):
        """The table memory (one row a bucket), the sketch memories (one a row) and
        ``collisions``. At a packet boundary no event is in the E0/E1 pipeline: an event enters
        E0 with its packet's last beat into the output register, and the stop waits for that
        beat to leave, by when the event has been written (both stages are checked). The bypass registers only repeat a write already in the memories. A clear
        under way is completed here: its sweep ends with everything zero."""
        busy = [name for name in self.hw("in_flight") if values[name]]
        if busy:
            raise StateBridgeError(f"flow_monitor: a flow event is in flight "
                                   f"({', '.join(busy)}): stop it at a packet boundary")
        self.clear()
        if values[self.hw("clearing")]:
            return
        self.collisions = values[self.hw("collisions")]
        for bucket, row in enumerate(values[self.hw("table")]):
            entry = decode(_ENTRY, row)
            if entry["valid"]:
                flow = entry["key"]
                self.table[bucket] = [tuple(flow[f] for f in _KEY_FIELDS), entry["packets"],
                                      entry["bytes"]]
                # The flows verify_hardware queries: the hardware keeps no list of the flows
                # it saw, so those the table holds (their flow hash is the parser's, recomputed).
                self.queries.add((query_hash(flow), flow["proto"]))
        for row, item in zip(self.sketch, self.hw("sketch")):
            row[:] = values[item]

    def store_hw_tables(self, values):
        """The reverse; a clear the load completed is cancelled, and so are the bypass
        registers, which would stand for the memories' old contents."""
        values[self.hw("clearing")] = 0
        values[self.hw("collisions")] = self.collisions
        rows = []
        for bucket in range(self.params["entries"]):
            entry = self.table.get(bucket)
            if entry is None:
                rows.append(0)
                continue
            key, packets, nbytes = entry
            rows.append(encode(_ENTRY, {"valid": 1, "packets": packets, "bytes": nbytes,
                                        "key": dict(zip(_KEY_FIELDS, key))}))
        values[self.hw("table")] = rows
        values[self.hw("table_bypass")] = 0
        for row, item, bypass in zip(self.sketch, self.hw("sketch"), self.hw("sketch_bypass")):
            values[item] = list(row)
            values[bypass] = 0

    def test_case(self, rng, n, malformed):
        # 64 flow identities over every packet kind give a few hundred distinct 5-tuples:
        # counters accumulate, and buckets and sketch counters are shared.
        frames = light_frames(rng, n, malformed, flows=64, vxlan_checksum=None)
        # Runs of one minimum-size frame: at 512 bits a run is events on consecutive cycles
        # for one bucket and one counter a row, the read-modify-write hazard the bypass
        # registers cover (a packet of two beats or more already leaves the memory time).
        small = [f for _, f in random_packets(n // 50, rng.randrange(2 ** 32), (60, 64), 0.0,
                                              flows=64)]
        out = []
        for frame in frames:
            out.append(frame)
            if small and rng.random() < 0.05:
                out += [small.pop()] * rng.randint(2, 6)
        return FlowMonitorConfig.random(rng, self.params), out[:n]

    def saturation_case(self, rng, n, size):
        frames = exact_size_frames(rng, n, size, flows=16)
        return FlowMonitorConfig.random(rng, self.params), frames

    async def verify_hardware(self, access):
        """Read back every bucket and every sketch counter, ask the sketch for some flows'
        estimates, then clear and check that the state is empty."""
        problems = []
        for bucket in range(self.params["entries"]):
            problems += await self._check_bucket(access, bucket, self.table.get(bucket))
        for r, row in enumerate(self.sketch):
            for column, want in enumerate(row):
                got = await self._sketch(access, r, column)
                if got != want:
                    problems.append(f"sketch row {r} column {column}: {got}, model {want}")
        for flow_hash, proto in sorted(self.queries)[:16]:
            await access.write("query_hash", flow_hash)
            await access.write("query_proto", proto)
            await access.write("query", 1)
            got, want = await access.read("query_estimate"), self.estimate(flow_hash, proto)
            if got != want:
                problems.append(f"query {flow_hash:#010x}/{proto}: estimate {got}, "
                                f"model {want}")
        await access.write("clear", 1)
        for _ in range(self.params["entries"] + self.params["sketch_width"]):
            if not await access.read("clearing"):
                break
        else:
            problems.append("clear never finished")
        leftovers = await access.read("collisions")
        if leftovers:
            problems.append(f"collisions after clear: {leftovers}")
        for bucket in list(self.table)[:8]:
            problems += await self._check_bucket(access, bucket, None, "after clear: ")
        for r, row in enumerate(self.sketch):
            nonzero = [c for c, v in enumerate(row) if v][:4]
            for column in nonzero:
                if await self._sketch(access, r, column):
                    problems.append(f"after clear: sketch row {r} column {column} not 0")
        return problems

    async def _sketch(self, access, row, column):
        bits = (self.params["sketch_width"] - 1).bit_length()
        await access.write("sketch_index", row << bits | column)
        await access.write("sketch_read", 1)
        return await access.read("sketch_count")

    async def _check_bucket(self, access, bucket, want, prefix=""):
        await access.write("entry_index", bucket)
        await access.write("entry_read", 1)
        flags = await access.read("entry_flags")
        if want is None:
            return [f"{prefix}bucket {bucket}: valid in hardware, empty in the model"] \
                if flags >> 9 & 1 else []
        key, packets, nbytes = want
        src, dst, sport, dport, proto, ipv6 = key
        got = {
            "flags": flags,
            "src": (await access.read("entry_src_upper")) << 64
            | await access.read("entry_src_lower"),
            "dst": (await access.read("entry_dst_upper")) << 64
            | await access.read("entry_dst_lower"),
            "ports": await access.read("entry_ports"),
            "packets": await access.read("entry_packets"),
            "bytes": await access.read("entry_bytes"),
        }
        expect = {"flags": 1 << 9 | ipv6 << 8 | proto, "src": src, "dst": dst,
                  "ports": sport << 16 | dport, "packets": packets, "bytes": nbytes}
        return [f"{prefix}bucket {bucket} {name}: {got[name]:#x}, model {expect[name]:#x}"
                for name in expect if got[name] != expect[name]]
