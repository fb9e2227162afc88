"""What counts as the public internet for a request made for a user (the fetch server, the agent's webhooks)."""

import ipaddress

import pytest

from frobozz._ip import is_public


@pytest.mark.parametrize(
    "address",
    [
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "127.0.0.1",
        "::1",
        "169.254.169.254",  # a cloud's metadata service
        "100.100.100.200",
        "fd00:ec2::254",
        "100.64.0.1",  # carrier-grade NAT
        "fe80::1",
        "224.0.0.1",
        "0.0.0.0",
        "::",
        "240.0.0.1",
        "::ffff:127.0.0.1",  # loopback, mapped into IPv6
        "::ffff:10.0.0.1",
    ],
)
def test_private_loopback_link_local_metadata_and_shared_addresses_are_not_public(address):
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.216.34"])
def test_addresses_on_the_internet_are_public(address):
    assert is_public(ipaddress.ip_address(address))
