"""The rack port of a SuperNIC and its redirect action (SuperNIC, arXiv 2109.07744,
"Distributed SuperNIC": an overloaded sNIC "sets a rule in its parser/classifier to forward"
a tenant's packets to a peer sNIC that runs its chain).

A NIC built with ``nic.rack = true`` has one more ingress port, the **rack port** (the last
``s_axis``), and its output carries, besides packets for endpoints, **rack frames** for peers:

* **Redirect.** With its bit set in ``redirect_enable``, a tenant's packets from the endpoint
  ports leave right after their classifier, past the queues and regions, encapsulated toward
  a peer and counted in ``t<t>_redirected``. Their NIC tag has ``redirect`` set, so what is
  behind ``m_axis`` knows they go to the rack. A packet's **bucket** is the low four bits of
  its flow hash (as the scheduler's flow table: one flow, one bucket, so per-flow order
  holds): only the buckets set in ``t<t>_buckets`` are redirected (all at reset), and those
  set in ``t<t>_peer2_buckets`` go to ``t<t>_peer2`` instead of ``t<t>_peer``: one tenant's
  flows can be spread over two peers.
* **Rack frame.** The original frame behind a header of whole beats (no byte shifting, so the
  header costs no shifter in gateware): a 14-byte Ethernet header whose destination MAC names
  the peer and whose source names this NIC (``02:53:4e:49:43:<id>``, locally administered,
  IEEE 802-2014 §8.4), EtherType :data:`RACK_ETHERTYPE`, then a version byte and the ingress
  port it came in on, zero padding to the end of the last header beat. A ToR switch forwards it
  as any Ethernet frame.
* **Rack port.** A rack frame in must be for this NIC (destination MAC with ``nic_id``), of
  this EtherType and version, and longer than its header; the header beats are stripped and
  the inner frame goes through the port's own parser and classifier, so the peer classifies it
  to the tenant that owns its key there, which runs the same chain. Anything else is dropped
  whole and counted in ``rx_bad``; good frames count in ``rx``. The rack port never redirects
  (no packet goes round the rack twice).
"""

from ..registers import R, RW, Register, RegisterBlock
from .shape import NicShape

__all__ = ["BUCKETS", "BUCKET_BITS", "RACK_TYPE", "RACK_ETHERTYPE", "RACK_VERSION", "MAC_PREFIX", "rack_block",
           "header_beats", "rack_header", "nic_mac"]

RACK_TYPE = 0x5241434B    # 'RACK'
#: IEEE Std 802 "Local Experimental EtherType 1" (IEEE 802-2014 §9.2.4): for protocols
#: inside one administered network, as the rack's is.
RACK_ETHERTYPE = 0x88B5
RACK_VERSION = 1
#: Locally administered unicast (the U/L bit set, IEEE 802-2014 §8.2), then "SNIC".
MAC_PREFIX = bytes([0x02, 0x53, 0x4E, 0x49, 0x43])
#: Bytes of the header that mean something: Ethernet (14), version, port.
HEADER_BYTES = 16
#: Flow buckets of the redirect: the low bits of the parser's flow hash.
BUCKETS = 16
BUCKET_BITS = 4


def header_beats(data_width):
    """Whole beats of the rack header at ``data_width`` bits."""
    beat = data_width // 8
    return -(-HEADER_BYTES // beat)


def nic_mac(nic_id):
    return MAC_PREFIX + bytes([nic_id & 0xFF])


def rack_header(data_width, peer, own, port):
    """The header beats' bytes of a rack frame from NIC ``own`` to NIC ``peer`` of a packet
    that came in on ``port``."""
    head = (nic_mac(peer) + nic_mac(own) + RACK_ETHERTYPE.to_bytes(2, "big")
            + bytes([RACK_VERSION, port]))
    return head + bytes(header_beats(data_width) * (data_width // 8) - len(head))


def rack_block(shape: NicShape):
    regs = [
        Register("nic_id", 8, RW, doc="This NIC's number in the rack: the last byte of its "
                                      "MAC address in rack frames"),
        Register("redirect_enable", shape.tenants, RW,
                 doc="Per tenant: its packets from the endpoint ports go to its peer"),
        Register("rx", 64, R, doc="Rack frames taken in on the rack port"),
        Register("rx_bad", 64, R, doc="Rack frames dropped on the rack port: not for this "
                                      "NIC, not a rack frame, or no longer than its header"),
    ]
    for t in range(shape.tenants):
        regs += [Register(f"t{t}_peer", 8, RW, doc=f"Tenant {t}: the NIC it is redirected to"),
                 Register(f"t{t}_redirected", 64, R,
                          doc=f"Tenant {t}: packets sent to its peers"),
                 Register(f"t{t}_buckets", BUCKETS, RW, reset=(1 << BUCKETS) - 1,
                          doc=f"Tenant {t}: the flow buckets redirected"),
                 Register(f"t{t}_peer2", 8, RW,
                          doc=f"Tenant {t}: the second peer, for its buckets below"),
                 Register(f"t{t}_peer2_buckets", BUCKETS, RW,
                          doc=f"Tenant {t}: the flow buckets redirected to t{t}_peer2")]
    return RegisterBlock("rack", RACK_TYPE, 0x0001_0000, regs,
                         doc="The rack port and the redirect action")
