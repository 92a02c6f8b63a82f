"""The shape of a multi-tenant NIC and the tag every packet carries inside it.

Inside the NIC a packet's beats carry the parser's metadata (``hdr``) and a NIC ``tag``:

* ``tenant``: set by the classifier, never changed after (isolation: nothing downstream
  chooses a tenant);
* ``port``: the ingress port it arrived on;
* ``seq``: the ingress port's packet counter (16 bits, wrapping), so outputs can be matched to
  inputs and per-flow order checked;
* ``beats``: the packet's length in beats, known once the whole packet is in its tenant queue
  (store-and-forward), set by the scheduler at dispatch;
* ``region``: the region the scheduler dispatched it to;
* ``redirect`` (a NIC with a rack port only): it leaves encapsulated toward a peer sNIC
  (:mod:`supernic.desc.nic.rack`), not toward an endpoint.

Regions run the NT library's chains, which carry the parser's metadata only; the packet store
keeps each packet's tag beside the region in dispatch order and puts it back at the region's
output (a chain is in order: NT contract rule 1).
"""

from dataclasses import dataclass

from ..config import check_data_width
from ..meta import meta_fields

__all__ = ["NicShape", "BEATS_BITS", "SEQ_BITS", "MAX_TENANTS", "MAX_PORTS", "MAX_REGIONS"]

#: Bits of a packet length in beats: a 9,600-byte jumbo frame at 64 bits is 1,200 beats.
BEATS_BITS = 14
SEQ_BITS = 16
MAX_TENANTS = 16
MAX_PORTS = 4
MAX_REGIONS = 16


def _bits(n):
    return max(1, (n - 1).bit_length())


@dataclass(frozen=True)
class NicShape:
    """Build-time sizes shared by every NIC block."""
    data_width: int = 512
    header_bytes: int = 256
    tenants: int = 4
    ports: int = 2
    regions: int = 4
    rack: bool = False      # the last ingress port is the rack port (sw/desc/nic/rack.py)

    def __post_init__(self):
        check_data_width(self.data_width)
        for name, high in (("tenants", MAX_TENANTS), ("ports", MAX_PORTS),
                           ("regions", MAX_REGIONS)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
                raise ValueError(f"nic.{name} must be an integer from 1 to {high}, "
                                 f"not {value!r}")

    @classmethod
    def from_description(cls, description):
        """The shape of the NIC a design JSON (``hw.generate.design_description``) describes."""
        cfg = description["config"]
        rack = bool(cfg.get("rack", False))
        return cls(cfg["data_width"], cfg["header_bytes"], cfg["tenants"], cfg["ports"] + rack,
                   len(description["regions"]), rack)

    @property
    def endpoint_ports(self):
        """Ingress ports of endpoints: every port but the rack port."""
        return self.ports - self.rack

    @property
    def rack_port(self):
        return self.ports - 1 if self.rack else None

    @property
    def beat_bytes(self):
        return self.data_width // 8

    @property
    def header_beats(self):
        """Beats a header-only chain receives: the parser's capture window."""
        return self.header_bytes // self.beat_bytes

    @property
    def tenant_bits(self):
        return _bits(self.tenants)

    @property
    def port_bits(self):
        return _bits(self.ports)

    @property
    def region_bits(self):
        return _bits(self.regions)

    def tag_fields(self):
        """The NIC tag as a layout description (:mod:`supernic.desc.meta`)."""
        fields = {"tenant": self.tenant_bits, "port": self.port_bits, "seq": SEQ_BITS,
                  "beats": BEATS_BITS, "region": self.region_bits}
        if self.rack:
            fields["redirect"] = 1
        return fields

    def nic_fields(self):
        """What travels beside every beat inside the NIC: the parser's metadata and the tag."""
        return {"hdr": meta_fields(self.header_bytes), "tag": self.tag_fields()}
