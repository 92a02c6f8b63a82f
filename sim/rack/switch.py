"""The top-of-rack switch of a simulated rack: a model, not gateware.

Every port of the switch has an output queue in front of a link (its rate in bytes a cycle and
its latency in cycles). A packet that reaches the switch at cycle ``t`` leaves its input after
the switch's port-to-port latency, waits behind what the output already holds, is serialised
at the link's rate and arrives at the far end ``latency`` cycles later. An output holds at most
``buffer_bytes``: a packet that does not fit is dropped and counted on that port, which is how
a ToR switch's shared buffer drops under incast (the model gives each port its share).

Inputs are taken in order of arrival at the switch; the caller (:mod:`.rack`) guarantees it, so
each output is a FIFO and per-flow order holds through the switch. Endpoints' uplinks use the
same :class:`Link` with no buffer limit: an endpoint's own queue is not the switch's.
"""

import collections
import math

__all__ = ["Link", "Switch"]


class Link:
    """A serialiser and its queue: ``rate`` bytes a cycle, ``latency`` cycles of wire,
    ``buffer_bytes`` (``None``: unbounded) of queue."""

    def __init__(self, name, rate, latency, buffer_bytes=None):
        if rate <= 0:
            raise ValueError(f"link {name}: rate must be positive, not {rate!r}")
        self.name, self.rate, self.latency = name, float(rate), int(latency)
        self.buffer_bytes = buffer_bytes
        self.free = 0.0             # when the last queued byte has been serialised
        self._queued = collections.deque()      # (cycle its last byte leaves, bytes)
        self._held = 0
        self.counters = {"packets": 0, "bytes": 0, "dropped": 0, "dropped_bytes": 0,
                         "max_queue_bytes": 0, "queue_cycles": 0}

    def queued_bytes(self, t):
        while self._queued and self._queued[0][0] <= t:
            self._held -= self._queued.popleft()[1]
        return self._held

    def send(self, t, size):
        """A packet of ``size`` bytes handed to the link at cycle ``t``: ``(first, last)``, the
        cycles its first and last byte arrive at the far end, or ``None`` if it was dropped."""
        c = self.counters
        held = self.queued_bytes(t)
        if self.buffer_bytes is not None and held + size > self.buffer_bytes:
            c["dropped"] += 1
            c["dropped_bytes"] += size
            return None
        start = max(float(t), self.free)
        self.free = start + size / self.rate
        self._queued.append((self.free, size))
        self._held += size
        c["packets"] += 1
        c["bytes"] += size
        c["max_queue_bytes"] = max(c["max_queue_bytes"], self._held)
        c["queue_cycles"] += int(start - t)
        return (math.ceil(start) + self.latency, math.ceil(self.free) + self.latency)


class Switch:
    """The ToR switch: one output :class:`Link` a port, named after what it leads to."""

    def __init__(self, latency, buffer_bytes):
        self.latency = int(latency)
        self.buffer_bytes = int(buffer_bytes)
        self.ports = {}

    def add_port(self, name, rate, latency):
        self.ports[name] = Link(name, rate, latency, self.buffer_bytes)

    def forward(self, t, port, size):
        """A packet that reached the switch at ``t`` leaves on ``port``: as :meth:`Link.send`
        (``None``: dropped, counted on the port)."""
        return self.ports[port].send(t + self.latency, size)

    def counters(self):
        return {name: dict(link.counters) for name, link in self.ports.items()}

    def dropped(self):
        return sum(link.counters["dropped"] for link in self.ports.values())
