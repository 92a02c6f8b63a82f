"""Model of the rack port and the redirect action (hw/nic/redirect.py, rack_egress.py,
rack_ingress.py; the frame format is :mod:`supernic.desc.nic.rack`)."""

from ...desc.nic.rack import (BUCKETS, HEADER_BYTES, RACK_ETHERTYPE, RACK_VERSION,
                              header_beats, nic_mac, rack_header)

__all__ = ["RackPortModel", "encapsulate", "decapsulate"]


def encapsulate(frame, data_width, peer, own, port):
    """The rack frame the rack egress sends for ``frame`` (from ingress ``port``)."""
    return rack_header(data_width, peer, own, port) + bytes(frame)


def decapsulate(frame, data_width, nic_id):
    """The inner frame of rack frame ``frame`` on NIC ``nic_id``'s rack port, or ``None`` if
    the rack ingress drops it (not for this NIC, not a rack frame, no longer than its
    header)."""
    size = header_beats(data_width) * (data_width // 8)
    if len(frame) <= size or len(frame) < HEADER_BYTES:
        return None
    if frame[0:6] != nic_mac(nic_id) or int.from_bytes(frame[12:14], "big") != RACK_ETHERTYPE \
            or frame[14] != RACK_VERSION:
        return None
    return bytes(frame[size:])


class RackPortModel:
    """The ``rack`` block's behaviour: who is redirected where, and its counters."""

    def __init__(self, data_width, tenants, nic_id=0):
        self.data_width, self.nic_id = data_width, nic_id
        self.enable = 0
        self.peers = [0] * tenants
        self.peers2 = [0] * tenants
        self.buckets = [(1 << BUCKETS) - 1] * tenants
        self.peer2_buckets = [0] * tenants
        self.redirected = [0] * tenants
        self.rx = self.rx_bad = 0

    def redirects(self, tenant, flow_hash):
        bucket = flow_hash % BUCKETS
        return bool(self.enable >> tenant & 1 and self.buckets[tenant] >> bucket & 1)

    def peer(self, tenant, flow_hash):
        second = self.peer2_buckets[tenant] >> (flow_hash % BUCKETS) & 1
        return self.peers2[tenant] if second else self.peers[tenant]

    def send(self, tenant, frame, port, flow_hash):
        """A classified packet of ``tenant`` (its parser's ``flow_hash``) from endpoint
        ``port``: its rack frame if it is redirected, else ``None`` (it goes to the tenant's
        queue)."""
        if not self.redirects(tenant, flow_hash):
            return None
        self.redirected[tenant] += 1
        return encapsulate(frame, self.data_width, self.peer(tenant, flow_hash), self.nic_id,
                           port)

    def receive(self, frame):
        inner = decapsulate(frame, self.data_width, self.nic_id)
        if inner is None:
            self.rx_bad += 1
        else:
            self.rx += 1
        return inner

    def counters(self):
        out = {"rx": self.rx, "rx_bad": self.rx_bad}
        out.update({f"t{t}_redirected": n for t, n in enumerate(self.redirected)})
        return out
