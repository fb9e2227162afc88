"""Which addresses the service may call for a user (push endpoints, webhooks): a URL's host is resolved once,
every address it resolves to is checked (public only: never private, loopback, link-local, shared, metadata;
with `loopback` — tests, local development — this machine too), and the request then goes to the very address
that was checked (the name stays in the Host header and TLS's server name), so a name that resolves to
something else a moment later (DNS rebinding) reaches nothing new."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from frobozz._ip import Address, is_public

from .exceptions import InputError

Resolver = Callable[..., Awaitable[list[Any]]]  # anyio.getaddrinfo's shape


@dataclass(frozen=True)
class Pinned:
    """A checked URL and the address its host resolved to: where the request goes."""

    url: str
    address: Address

    def request(self) -> tuple[httpx.URL, dict[str, str], dict[str, Any]]:
        """The URL to call (the address in the host's place), the Host header, and the TLS server name."""
        named = httpx.URL(self.url)
        extensions = {"sni_hostname": named.host} if named.scheme == "https" else {}
        return named.copy_with(host=str(self.address)), {"Host": named.netloc.decode("ascii")}, extensions


async def pinned(url: Any, *, https_only: bool, loopback: bool, resolve: Resolver = anyio.getaddrinfo) -> Pinned:
    """`url` when it may be called, with the one address to call it at; else a clear InputError."""
    if not isinstance(url, str) or len(url) > 2000:
        raise InputError("the URL is a string of at most 2000 characters")
    try:
        parts = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as e:
        raise InputError(f"the URL is malformed: {url[:100]!r}") from e
    host = parts.host
    local_http = loopback and parts.scheme == "http" and host in ("127.0.0.1", "::1", "localhost")
    if parts.scheme not in (("https",) if https_only else ("https", "http")) and not local_http:
        raise InputError(f"the URL must be {'https' if https_only else 'http or https'}: {url[:100]!r}")
    if not host or parts.userinfo:
        raise InputError(f"the URL needs a host (and no user or password): {url[:100]!r}")
    try:
        infos = await resolve(host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM)
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    except (OSError, ValueError, IndexError, TypeError) as e:
        raise InputError(f"{host[:100]} does not resolve: {e}") from e
    if not addresses:
        raise InputError(f"{host[:100]} does not resolve")
    for ip in addresses:
        if not is_public(ip) and not (loopback and ip.is_loopback):
            raise InputError(f"{host[:100]} resolves to {ip}, a private address: refused")
    if parts.scheme == "http" and not all(ip.is_loopback for ip in addresses):
        raise InputError("plain http only to this machine (loopback); elsewhere https")
    return Pinned(url, addresses[0])


async def checked_url(url: Any, *, https_only: bool, loopback: bool, resolve: Resolver = anyio.getaddrinfo) -> str:
    """`url` when it may be called (see `pinned`); else a clear InputError."""
    return (await pinned(url, https_only=https_only, loopback=loopback, resolve=resolve)).url
