"""scapy's dissection as the tests' oracle, helped past the one header it does not look
through: scapy leaves what follows an Authentication Header (RFC 4302) as Raw bytes, so
:func:`dissect` dissects them by the header's next-header field. Nothing here reads the
project's header declarations."""

import scapy.layers.inet  # noqa: F401  (registers the IP/UDP/TCP bindings)
import scapy.layers.inet6  # noqa: F401
from scapy.layers.inet import TCP, UDP
from scapy.layers.inet6 import (ICMPv6EchoRequest, IPv6ExtHdrDestOpt, IPv6ExtHdrFragment,
                                IPv6ExtHdrHopByHop, IPv6ExtHdrRouting)
from scapy.layers.ipsec import AH
from scapy.layers.l2 import GRE, Ether
from scapy.packet import NoPayload, Raw

__all__ = ["dissect", "EXTENSION_HEADERS"]

# IPv6 extension headers (RFC 8200 section 4) and AH, as scapy classes.
EXTENSION_HEADERS = (IPv6ExtHdrHopByHop, IPv6ExtHdrDestOpt, IPv6ExtHdrRouting,
                     IPv6ExtHdrFragment, AH)
# What follows an Authentication Header, by its next header (IANA protocol numbers).
_AFTER_AH = {6: TCP, 17: UDP, 43: IPv6ExtHdrRouting, 44: IPv6ExtHdrFragment, 47: GRE, 51: AH,
             58: ICMPv6EchoRequest, 60: IPv6ExtHdrDestOpt}


def dissect(frame: bytes):
    """``Ether(frame)``, with what follows each Authentication Header dissected too."""
    pkt = Ether(frame)
    layer = pkt
    while not isinstance(layer, NoPayload):
        if isinstance(layer, AH) and isinstance(layer.payload, Raw) and layer.nh in _AFTER_AH:
            rest = bytes(layer.payload)
            layer.remove_payload()
            layer.add_payload(_AFTER_AH[layer.nh](rest))
        layer = layer.payload
    return pkt
