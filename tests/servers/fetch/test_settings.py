"""The fetch server's settings as a user writes them in the environment."""

import pytest
from pydantic import ValidationError

from frobozz.servers.fetch import Settings


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "10.0.0/8x", "localhost/8", "fd00::/129"])
def test_an_allowlist_entry_that_looks_like_a_network_but_is_not_one_is_refused_naming_it(monkeypatch, entry):
    """`10.0.0.0/33` was taken for a host name, and allowed nothing."""
    monkeypatch.setenv("FROBOZZ_FETCH_ALLOWLIST", f"127.0.0.1, {entry}")
    with pytest.raises(ValidationError) as refused:
        Settings()
    assert "fetch_allowlist" in str(refused.value) and f"{entry!r} is not a network" in str(refused.value)


def test_an_allowlist_of_hosts_addresses_and_networks_is_read_as_written(monkeypatch):
    monkeypatch.setenv("FROBOZZ_FETCH_ALLOWLIST", "localhost, 127.0.0.1, 10.0.0.0/8, fd00::/8, 192.168.1.7/24")
    assert Settings().fetch_allowlist == ["localhost", "127.0.0.1", "10.0.0.0/8", "fd00::/8", "192.168.1.7/24"]
