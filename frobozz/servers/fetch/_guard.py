"""The network guard: which addresses a fetch may reach. Checked after DNS resolution and again on
every redirect hop; the connection then goes to the very address that was checked."""

from __future__ import annotations

import ipaddress
import socket

import anyio
import httpx

from frobozz._ip import Address, is_public

from .exceptions import BlockedError, FetchError
from .settings import Settings


def _allowlisted(host: str, ip: Address, settings: Settings) -> bool:
    for entry in settings.fetch_allowlist:
        if entry.lower() == host.lower():
            return True
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def check_url(url: httpx.URL) -> None:
    if url.scheme not in ("http", "https"):
        raise BlockedError(f"only http and https URLs can be fetched, not {url.scheme or 'no scheme'}:")
    if not url.host:
        raise FetchError(f"the URL {str(url)[:200]} has no host")


def _pick(url: httpx.URL, infos: list, settings: Settings) -> Address:
    addresses = [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]
    for ip in addresses:
        if settings.fetch_allow_private or is_public(ip) or _allowlisted(url.host, ip, settings):
            return ip
    raise BlockedError(
        f"{url.host} resolves to {', '.join(sorted({str(a) for a in addresses}))}, a private, loopback, "
        "link-local or metadata address; set FROBOZZ_FETCH_ALLOW_PRIVATE=1 or FROBOZZ_FETCH_ALLOWLIST to allow it"
    )


def resolve_sync(url: httpx.URL, settings: Settings) -> Address:
    """`resolve` for code that runs in a thread (the YouTube client)."""
    check_url(url)
    try:
        infos = socket.getaddrinfo(
            url.host, url.port or (443 if url.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except OSError as e:
        raise FetchError(f"cannot resolve {url.host}: {e.strerror or e}") from e
    return _pick(url, infos, settings)


async def resolve(url: httpx.URL, settings: Settings) -> Address:
    """The address to connect to for `url`, or BlockedError if the guard forbids all of them."""
    check_url(url)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await anyio.getaddrinfo(url.host, port, type=socket.SOCK_STREAM)
    except OSError as e:
        raise FetchError(f"cannot resolve {url.host}: {e.strerror or e}") from e
    return _pick(url, infos, settings)
