"""Which IP addresses are the public internet: what a server-side request made for a user (a fetch, a webhook)
may reach. Not private, loopback, link-local, multicast, reserved, unspecified, carrier-grade NAT, nor a cloud's
metadata service; an IPv4 address mapped into IPv6 is judged as itself."""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_METADATA = {
    ipaddress.ip_address("169.254.169.254"),
    ipaddress.ip_address("100.100.100.200"),
    ipaddress.ip_address("fd00:ec2::254"),
}
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # carrier-grade NAT: not the internet either


def is_public(ip: Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or ip in _METADATA
        or ip in _SHARED
    )
