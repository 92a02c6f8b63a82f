"""The kinds of packet the traffic generator (:mod:`supernic.sim.traffic`) makes, by name: a
chain specification's ``traffic.kinds`` names them."""

__all__ = ["KINDS"]

KINDS = (
    "eth",  # Ethernet II, non-IP ethertype 0x88b5, random payload
    "arp",  # Ethernet II, ARP request/reply (RFC 826), zero padding to the size
    "ipv4_udp",
    "ipv4_tcp",
    "ipv4_other",  # ICMP (1), GRE (47) or 253
    "ipv4_frag",  # IPv4 fragment: first (MF, offset 0), middle or last
    "ipv6_udp",
    "ipv6_tcp",
    "ipv6_other",  # ICMPv6 (58), GRE (47), ESP (50) or 253
    "ipv6_ext",  # IPv6 with 1-3 extension headers (RFC 8200 order), then UDP, TCP or other
    "ipv6_frag",  # IPv6 fragment (RFC 8200 section 4.5): first, middle or last
    "vxlan",  # outer IPv4/IPv6 + UDP 4789 + VXLAN + inner Ethernet/[VLAN]/IP/UDP|TCP
)
