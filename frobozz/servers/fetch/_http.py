"""Guarded HTTP: manual redirects (each hop through the guard), a byte cap on the decoded body,
our own gzip/deflate decoding (bounded, so a compression bomb cannot expand past the cap), an
overall deadline against slow drips, and robots.txt for model-initiated fetches."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import anyio
import httpx
from protego import Protego

from frobozz._tls import tls_context

from ._guard import resolve
from .exceptions import BlockedError, FetchError
from .settings import Settings

_REDIRECTS = {301, 302, 303, 307, 308}


@dataclass
class Fetched:
    url: str
    final_url: str
    status: int
    headers: dict[str, str]
    body: bytes
    capped: bool = False
    from_cache: bool = field(default=False)

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def charset(self) -> str | None:
        for part in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = part.strip().partition("=")
            if key.lower() == "charset" and value:
                return value.strip("\"' ")
        return None


class _Decoder:
    """gzip/deflate, never producing more than `limit` bytes in all."""

    def __init__(self, encoding: str, limit: int) -> None:
        self.limit = limit
        self.produced = 0
        if encoding in ("", "identity"):
            self._z = None
        elif encoding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(wbits=47)
        elif encoding == "deflate":
            self._z = zlib.decompressobj(wbits=15 + 32)
        else:
            raise FetchError(f"the server sent an encoding this fetcher does not read: {encoding}")

    def feed(self, data: bytes) -> bytes:
        room = self.limit - self.produced + 1  # one byte more tells us the cap was passed
        try:
            out = data[:room] if self._z is None else self._z.decompress(data, room)
        except zlib.error as e:
            raise FetchError(f"the response body is corrupt ({e})") from e
        self.produced += len(out)
        return out


class Http:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.client = httpx.AsyncClient(
            follow_redirects=False,
            timeout=httpx.Timeout(settings.fetch_read_timeout, connect=settings.fetch_connect_timeout),
            verify=tls_context(),
        )
        self._robots: dict[str, Protego | None] = {}

    async def aclose(self) -> None:
        await self.client.aclose()

    async def get(
        self, url: str, *, accept: str = "*/*", headers: dict[str, str] | None = None, robots: bool = True
    ) -> Fetched:
        s = self.settings
        try:
            with anyio.fail_after(s.fetch_total_timeout):
                if robots and s.fetch_respect_robots:
                    await self._check_robots(url)
                return await self._get(url, accept, headers or {})
        except TimeoutError:
            raise FetchError(f"fetching {url[:200]} took longer than {s.fetch_total_timeout:g} s; gave up") from None

    async def _get(self, url: str, accept: str, extra: dict[str, str]) -> Fetched:
        current = httpx.URL(url)
        for _ in range(self.settings.fetch_max_redirects + 1):
            response = await self._send(current, accept, extra)
            location = response.headers.get("location")
            if response.status_code in _REDIRECTS and location:
                await response.aclose()
                try:
                    current = current.join(location)
                except httpx.InvalidURL as e:
                    raise FetchError(f"{current.host} redirected to an unreadable URL {location[:200]!r} ({e})") from e
                if current.scheme not in ("http", "https"):
                    raise BlockedError(
                        f"{url[:200]} redirected to {location[:200]!r}, not an http(s) URL; the redirect was refused"
                    )
                continue
            try:
                body, capped = await self._read(response)
            finally:
                await response.aclose()
            headers = {k.lower(): v for k, v in response.headers.items()}
            return Fetched(
                url=url, final_url=str(current), status=response.status_code, headers=headers, body=body, capped=capped
            )
        raise FetchError(f"more than {self.settings.fetch_max_redirects} redirects from {url[:200]}")

    async def _send(self, url: httpx.URL, accept: str, extra: dict[str, str]) -> httpx.Response:
        ip = await resolve(url, self.settings)
        host = f"[{ip}]" if ip.version == 6 else str(ip)
        pinned = url.copy_with(host=host)
        headers = {
            "Host": url.netloc.decode(),
            "User-Agent": self.settings.fetch_user_agent,
            "Accept": accept,
            "Accept-Encoding": "gzip, deflate",
            **extra,
        }
        extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
        try:
            return await self.client.send(
                self.client.build_request("GET", pinned, headers=headers, extensions=extensions), stream=True
            )
        except httpx.ConnectTimeout as e:
            raise FetchError(f"connecting to {url.host} timed out") from e
        except httpx.ConnectError as e:
            raise FetchError(f"cannot connect to {url.host}: {e}") from e
        except httpx.TimeoutException as e:
            raise FetchError(f"{url.host} did not answer in time") from e
        except httpx.HTTPError as e:
            raise FetchError(f"fetching from {url.host} failed: {e}") from e
        except httpx.InvalidURL as e:  # httpx reads a redirect's Location even when not following it
            raise BlockedError(
                f"{url.host} redirected to a URL that is not an http(s) URL or cannot be read ({e}); "
                "only http and https URLs are fetched, so the redirect was refused"
            ) from e

    async def _read(self, response: httpx.Response) -> tuple[bytes, bool]:
        cap = self.settings.fetch_max_bytes
        decoder = _Decoder(response.headers.get("content-encoding", "").strip().lower(), cap)
        chunks: list[bytes] = []
        try:
            async for raw in response.aiter_raw():
                chunks.append(decoder.feed(raw))
                if decoder.produced > cap:
                    body = b"".join(chunks)[:cap]
                    return body, True
        except httpx.TimeoutException as e:
            raise FetchError("the server stopped sending the body (read timed out)") from e
        except httpx.HTTPError as e:
            raise FetchError(f"reading the body failed: {e}") from e
        return b"".join(chunks), False

    async def _check_robots(self, url: str) -> None:
        parsed = httpx.URL(url)
        origin = f"{parsed.scheme}://{parsed.netloc.decode()}"
        if origin not in self._robots:
            try:
                got = await self._get(f"{origin}/robots.txt", "text/plain", {})
                self._robots[origin] = Protego.parse(got.body.decode("utf-8", "replace")) if got.status == 200 else None
            except FetchError:
                self._robots[origin] = None  # no readable robots.txt: nothing is disallowed
        rules = self._robots[origin]
        if rules is not None and not rules.can_fetch(url, self.settings.fetch_user_agent):
            raise BlockedError(
                f"{origin}/robots.txt disallows fetching {url[:200]} for this user agent "
                "(set FROBOZZ_FETCH_RESPECT_ROBOTS=0 to fetch it anyway)"
            )
