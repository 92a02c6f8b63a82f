"""Traffic for a running device: flows per tenant at given rates and sizes, or a pcap replayed,
and what came out.

    flows = [parse_flow("tenant=0,rate=0.4,size=64"), parse_flow("tenant=1,size=imix,port=1")]
    schedule = make_schedule(flows, targets, data_width=64, ports=2, packets=1000, seed=1)
    run = await run_traffic(client, description, schedule, progress=...)
    write_pcap_out("out.pcap", run, clock_mhz=250)

A **flow** sends one tenant's packets on one ingress port. Its rate is a fraction of that
port's line rate (one beat a cycle): a packet of ``b`` beats is offered ``b / rate`` cycles after
the previous one of the flow, and flows sharing a port queue behind each other as on a real
link (so offered rates above 1 in total oversubscribe the port). A schedule of flows is made
by :func:`supernic.sim.flows.make_schedule` (its frames come from the chain models), a pcap's
by :func:`replay_schedule`.

What comes out is decoded from ``m_axis.tuser`` (the NIC tag, :mod:`supernic.desc.nic.shape`):
tenant, ingress port and sequence number, region, and the parser's ingress timestamp, so every
delivered packet has its latency in cycles without matching it to an input. Counters read
before and after (:func:`~supernic.driver.status.read_status`) say where the others went.
"""

from dataclasses import dataclass, field

import numpy as np

from ..desc.errors import SnicError
from ..desc.meta import field_offsets
from ..desc.nic.shape import NicShape

__all__ = ["Flow", "TrafficError", "parse_flow", "in_time_order", "replay_schedule",
           "Schedule", "run_traffic", "TrafficRun", "write_pcap_out", "delivered_tags", "IMIX"]

#: Simple IMIX: 7 : 4 : 1 packets of 64, 576 and 1,500 bytes (the classic Internet mix of
#: Agilent's and Spirent's test suites, after the NLANR packet-size studies).
IMIX = ((64, 7), (576, 4), (1500, 1))
SIZE_LIMITS = (14, 9600)


class TrafficError(SnicError):
    """A flow or replay that cannot be run (one line)."""


@dataclass(frozen=True)
class Flow:
    """One tenant's packets on one port: ``rate`` of the port's line rate, sizes ``size``
    (bytes, ``(lo, hi)`` uniform, ``"imix"`` or ``"mixed"``), ``flows`` distinct 5-tuples,
    ``packets`` of them (``None``: the schedule's default). ``key`` overrides the tenant key;
    ``port`` ``None`` is ``tenant mod ports``."""
    tenant: int
    rate: float = 1.0
    size: object = 64
    port: int | None = None
    packets: int | None = None
    flows: int = 16
    key: int | None = None
    malformed: float = 0.0

    def describe(self):
        size = f"{self.size[0]}-{self.size[1]}" if isinstance(self.size, tuple) else self.size
        return f"tenant {self.tenant}, {self.rate:g} of line rate, size {size}"


def _number(text, kind, what):
    try:
        return kind(text)
    except ValueError:
        raise TrafficError(f"{what} must be a number, not {text!r}") from None


def _size(text):
    if text in ("imix", "mixed"):
        return text
    if "-" in text:
        lo, hi = (_number(x, int, "size") for x in text.split("-", 1))
        size = (lo, hi)
    else:
        lo = hi = _number(text, int, "size")
        size = lo
    if not SIZE_LIMITS[0] <= lo <= hi <= SIZE_LIMITS[1]:
        raise TrafficError(f"size must be bytes from {SIZE_LIMITS[0]} to {SIZE_LIMITS[1]} (or "
                           f"LO-HI, imix, mixed), not {text!r}")
    return size


def parse_flow(text):
    """``tenant=T[,rate=R][,size=S][,port=P][,packets=N][,flows=F][,key=K][,malformed=M]``
    (``rate`` a fraction of line rate or a percentage, ``size`` bytes, ``LO-HI``, ``imix`` or
    ``mixed``)."""
    fields = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        name, eq, value = part.partition("=")
        if not eq:
            raise TrafficError(f"flow {text!r}: {part!r} is not NAME=VALUE")
        fields[name.strip()] = value.strip()
    known = ("tenant", "rate", "size", "port", "packets", "flows", "key", "malformed")
    for name in fields:
        if name not in known:
            raise TrafficError(f"flow {text!r}: unknown field {name!r} (known: "
                               f"{', '.join(known)})")
    if "tenant" not in fields:
        raise TrafficError(f"flow {text!r} needs tenant=T")
    kw = {"tenant": _number(fields["tenant"], int, "tenant")}
    if "rate" in fields:
        raw = fields["rate"]
        rate = (_number(raw[:-1], float, "rate") / 100 if raw.endswith("%")
                else _number(raw, float, "rate"))
        if not 0 < rate <= 1:
            raise TrafficError(f"rate must be a fraction of line rate in (0, 1] (or 1%-100%), "
                               f"not {raw!r}")
        kw["rate"] = rate
    if "size" in fields:
        kw["size"] = _size(fields["size"])
    for name in ("port", "packets", "flows", "key"):
        if name in fields:
            kw[name] = _number(fields[name], int, name)
    if kw.get("packets", 1) < 1 or kw.get("flows", 1) < 1 or kw.get("port", 0) < 0 \
            or kw.get("key", 0) < 0:
        raise TrafficError(f"flow {text!r}: packets and flows must be positive, port and key "
                           f"non-negative")
    if "malformed" in fields:
        kw["malformed"] = _number(fields["malformed"], float, "malformed")
        if not 0 <= kw["malformed"] <= 1:
            raise TrafficError(f"malformed must be a fraction in [0, 1], not "
                               f"{fields['malformed']!r}")
    return Flow(**kw)


@dataclass
class Schedule:
    """Packets to push: parallel lists of ingress port, frame, the cycle (from the start of the
    run) its first beat may go, and the tenant and flow index that sent it (-1 for a replay,
    whose tenant the classifier decides)."""
    ports: list = field(default_factory=list)
    frames: list = field(default_factory=list)
    at: list = field(default_factory=list)
    tenants: list = field(default_factory=list)
    flow_ids: list = field(default_factory=list)

    def __len__(self):
        return len(self.frames)


def in_time_order(schedule):
    """Each port's packets must be pushed in the order they are offered (a port's queue is
    FIFO); interleave the flows of a port by offer cycle, stable by flow."""
    order = sorted(range(len(schedule)), key=lambda i: (schedule.at[i], schedule.flow_ids[i]))
    for name in ("ports", "frames", "at", "tenants", "flow_ids"):
        values = getattr(schedule, name)
        setattr(schedule, name, [values[i] for i in order])
    return schedule


def replay_schedule(path, ports, port=None, clock_mhz=None):
    """A pcap's frames on ``port`` (``None``: alternate over the ports). With ``clock_mhz`` the
    file's timestamps pace them (relative to the first packet, at that clock); otherwise they
    go back to back."""
    from scapy.utils import RawPcapReader
    if port is not None and not 0 <= port < ports:
        raise TrafficError(f"port {port} does not exist (the device has {ports})")
    schedule = Schedule()
    try:
        with RawPcapReader(str(path)) as reader:
            first = None
            for i, (data, meta) in enumerate(reader):
                # A nanosecond pcap (magic a1b23c4d) keeps nanoseconds in the usec field.
                stamp = meta.sec + meta.usec / (1e9 if getattr(reader, "nano", False) else 1e6)
                first = stamp if first is None else first
                schedule.frames.append(bytes(data))
                schedule.ports.append(port if port is not None else i % ports)
                schedule.at.append(int((stamp - first) * clock_mhz * 1e6) if clock_mhz else 0)
                schedule.tenants.append(-1)
                schedule.flow_ids.append(-1)
    except (OSError, EOFError) as e:
        raise TrafficError(f"cannot read pcap {path}: {e}") from None
    except Exception as e:  # noqa: BLE001: scapy raises Scapy_Exception for a non-pcap file
        raise TrafficError(f"cannot read pcap {path}: {type(e).__name__}: {e}") from None
    if not schedule.frames:
        raise TrafficError(f"pcap {path} has no packets")
    return schedule


@dataclass
class TrafficRun:
    """What a run pushed and what came out: ``delivered`` holds parallel numpy arrays
    (``tenant``, ``port``, ``seq``, ``region``, ``size``, ``ingress``, ``first``, ``last``: cycles
    since the device's reset) and ``frames`` the delivered bytes in delivery order;
    ``counters`` the per-tenant and per-port counter changes over the run."""
    start_cycle: int
    end_cycle: int
    sent: dict
    delivered: dict
    frames: list
    counters: dict
    design: dict
    data_width: int

    def to_json(self, clock_mhz=None, weights=None):
        return {"version": 1, "design": self.design, "data_width": self.data_width,
                "clock_mhz": clock_mhz, "weights": weights or {},
                "start_cycle": self.start_cycle, "end_cycle": self.end_cycle,
                "sent": {k: [int(x) for x in v] for k, v in self.sent.items()},
                "delivered": {k: [int(x) for x in v] for k, v in self.delivered.items()},
                "counters": self.counters}


def delivered_tags(packets, description):
    """Columns (numpy arrays) of the NIC tag and cycles of delivered packets (``Delivered``)
    from a NIC described by ``description``: ``tenant``, ``port``, ``seq``, ``region``,
    ``size``, ``ingress`` (the cycle its first beat entered), ``first`` and ``last`` (the
    cycles its first and last beat left)."""
    # Only five fields of the wide ``tuser`` are needed, so they are cut out by offset rather
    # than decoding the whole metadata struct of every packet.
    offsets = field_offsets(NicShape.from_description(description).nic_fields())
    where = {name: offsets[f"tag.{name}"] for name in ("tenant", "port", "seq", "region")}
    where["ts"] = offsets["hdr.ts"]
    ts_width = where["ts"][1]

    def bits(value, name):
        offset, width = where[name]
        return (value >> offset) & ((1 << width) - 1)
    cols = {k: [] for k in ("tenant", "port", "seq", "region", "size", "ingress", "first",
                            "last")}
    for p in packets:
        user = p.first_user
        for name in ("tenant", "port", "seq", "region"):
            cols[name].append(bits(user, name))
        ts = bits(user, "ts")
        # The timestamp is the accept cycle modulo 2**ts_width: rebuild the full cycle.
        cols["ingress"].append(p.first_cycle - ((p.first_cycle - ts) % (1 << ts_width)))
        cols["size"].append(len(p.data))
        cols["first"].append(p.first_cycle)
        cols["last"].append(p.last_cycle)
    return {k: np.array(v, dtype=np.int64) for k, v in cols.items()}


def _counter_delta(before, after):
    """Per tenant and per port counter changes between two :func:`read_status` results."""
    tenants = {}
    for b, a in zip(before.get("tenants") or [], after.get("tenants") or []):
        tenants[str(a["tenant"])] = {k: (a[k] - b[k]) for k in a
                                     if isinstance(a[k], int) and not isinstance(a[k], bool)
                                     and k != "tenant" and k != "backlog_beats"
                                     and k != "in_flight" and b.get(k) is not None}
    ports = {}
    for b, a in zip(before["ports"], after["ports"]):
        row = {}
        for part in ("parser", "classifier"):
            if a.get(part) and b.get(part):
                row.update({f"{part}.{k}": a[part][k] - b[part][k] for k in a[part]
                            if a[part][k] is not None and b[part][k] is not None})
        ports[str(a["port"])] = row
    store = None
    if before.get("store") and after.get("store"):
        store = {k: after["store"][k] - before["store"][k] for k in after["store"]
                 if k in before["store"]}
    return {"tenants": tenants, "ports": ports, "store": store}


async def run_traffic(client, description, schedule, progress=None, chunk=20_000,
                      quiet=500, stall_cycles=2_000_000, backpressure=0.0, seed=1, events=(),
                      drain_cycles=10_000_000):
    """Push ``schedule`` (offer cycles relative to now), run the device until it has drained
    and pop what it delivered. ``progress(delivered, total, cycle)`` is called as it goes.
    ``backpressure``: the probability the output is not ready in a cycle, for this run.
    ``events``: ``(cycle, coroutine function)`` pairs, each awaited once the run has reached
    that cycle of the schedule (for example a region suspended mid-run).
    Raises :class:`TrafficError` if nothing moves for ``stall_cycles`` with packets queued, and
    :class:`~supernic.driver.client.DeviceError` if the device has not drained
    ``drain_cycles`` after the last packet went in."""
    from .client import SocketBus
    from .status import read_status

    bus = SocketBus(client)
    before = await read_status(bus, description)
    await client.set_backpressure(backpressure, seed)
    try:
        return await _run_traffic(client, bus, description, schedule, before, progress, chunk,
                                  quiet, stall_cycles, sorted(events, key=lambda e: e[0]),
                                  drain_cycles)
    finally:
        if backpressure:
            await client.set_backpressure(0.0)


async def _run_traffic(client, bus, description, schedule, before, progress, chunk, quiet,
                       stall_cycles, events, drain_cycles):
    from .status import read_status
    start = await client.cycle()
    # The first offer goes a few cycles from now, so the pushes (which take no cycles) are
    # all queued before any is due.
    base = start + 16
    await client.push_batch([(p, f, base + a) for p, f, a in
                             zip(schedule.ports, schedule.frames, schedule.at)], chunk)
    out = []
    last_cycle, last_done, idle = start, 0, 0
    horizon = base + (max(schedule.at) if schedule.at else 0)
    step = 4096
    events = [(base + at, fn) for at, fn in events]
    cycle = start
    while True:
        if events:   # stop at the next event's cycle
            step = max(1, min(step, events[0][0] - cycle))
        state = await client.run_status(step)
        if state["delivered"]:
            out += await client.pop()
        cycle = state["cycle"]
        if progress:
            progress(len(out), len(schedule), cycle - start)
        while events and cycle >= events[0][0]:
            await events.pop(0)[1]()
            cycle = await client.cycle()
        if not any(state["queued"]) and not events:
            break
        done = len(schedule) - sum(state["queued"])
        if done == last_done and cycle > horizon:
            idle += cycle - last_cycle
            if idle >= stall_cycles:
                raise TrafficError(f"the device took no packet for {idle} cycles with "
                                   f"{sum(state['queued'])} still queued")
        else:
            idle = 0
        last_done, last_cycle = done, cycle
        # Long steps while packets are still being offered; short ones once they all have
        # been, so the run stops soon after the last packet went in.
        step = max(4096, min(262_144, horizon - cycle)) if cycle < horizon else 4096
    await client.drain(quiet=quiet, max_cycles=drain_cycles)
    out += await client.pop()
    end = await client.cycle()
    if progress:
        progress(len(out), len(schedule), end - start)
    after = await read_status(bus, description)
    delivered = delivered_tags(out, description)
    sent = {"port": np.array(schedule.ports, dtype=np.int64),
            "tenant": np.array(schedule.tenants, dtype=np.int64),
            "flow": np.array(schedule.flow_ids, dtype=np.int64),
            "size": np.array([len(f) for f in schedule.frames], dtype=np.int64),
            "at": np.array(schedule.at, dtype=np.int64) + base}
    return TrafficRun(start, end, sent, delivered, [p.data for p in out],
                      _counter_delta(before, after),
                      {"name": description.get("top"), "build_id": description.get("build_id")},
                      description["config"]["data_width"])


def write_pcap_out(path, run, clock_mhz):
    """The delivered frames as an Ethernet pcap with nanosecond timestamps: the cycle each
    packet's first beat left, at ``clock_mhz``."""
    from scapy.utils import PcapWriter
    first = run.delivered["first"]
    with PcapWriter(str(path), linktype=1, nano=True, sync=False) as w:  # LINKTYPE_ETHERNET
        for frame, cycle in zip(run.frames, first):
            ns = int(int(cycle) * 1000 / clock_mhz)
            if not w.header_present:
                w.write_header(frame)
            w.write_packet(frame, sec=ns // 10**9, usec=ns % 10**9)

