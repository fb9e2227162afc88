"""Any OpenAI-compatible /v1/images/generations endpoint (b64_json or a URL to fetch)."""

from __future__ import annotations

import time

import anyio
import httpx

from ..._tasks import while_following
from ._backend import Generated, ImageRequest, Progress, decode_b64, http_errors
from .exceptions import BackendError, BadRequestError

SIZES = {(256, 256), (512, 512), (1024, 1024), (1024, 1536), (1536, 1024), (1792, 1024), (1024, 1792)}
DEFAULT_MODEL = "gpt-image-1"


class OpenAIImages:
    name = "openai"

    def __init__(
        self,
        client: httpx.AsyncClient,
        url: str,
        *,
        timeout: float,
        poll: float,
        api_key: str | None,
        model: str | None,
    ) -> None:
        self.client, self.url, self.timeout, self.poll = client, url.rstrip("/"), timeout, poll
        self.api_key, self.model = api_key, model or DEFAULT_MODEL

    def check(self, request: ImageRequest) -> None:
        if (request.width, request.height) not in SIZES:
            sizes = ", ".join(f"{w}x{h}" for w, h in sorted(SIZES))
            raise BadRequestError(f"{request.width}x{request.height} is not a size this API makes: use one of {sizes}")
        if not self.api_key:
            raise BadRequestError("the OpenAI-compatible backend needs FROBOZZ_FORGE_API_KEY")

    async def generate(self, request: ImageRequest, progress: Progress) -> Generated:
        model = request.model or self.model
        prompt = request.prompt + (f"\nAvoid: {request.negative_prompt}" if request.negative_prompt else "")
        payload = {
            "model": model,
            "prompt": prompt,
            "size": f"{request.width}x{request.height}",
            "n": 1,
            "response_format": "b64_json",
        }
        with http_errors(self.url, self.timeout):
            response = await while_following(
                lambda: self.client.post(
                    f"{self.url}/v1/images/generations",
                    json=payload,
                    headers={"Authorization": f"Bearer {self.api_key}"},
                ),
                lambda: self._heartbeat(progress),
            )
            response.raise_for_status()
            items = response.json().get("data") or []
            if not items or not isinstance(items[0], dict):
                raise BackendError("the images API answered without an image")
            if items[0].get("b64_json"):
                data = decode_b64(items[0]["b64_json"], "the images API")
            elif items[0].get("url"):
                fetched = await self.client.get(items[0]["url"])
                fetched.raise_for_status()
                data = fetched.content
            else:
                raise BackendError("the images API answered without b64_json or url")
        return Generated(data, None, model)

    async def _heartbeat(self, progress: Progress) -> None:
        """The API says nothing until it is done: tell the client it is still working."""
        started = time.monotonic()
        while True:
            await anyio.sleep(self.poll)
            elapsed = time.monotonic() - started
            await progress(min(0.95, elapsed / self.timeout), f"generating ({elapsed:.0f} s)")
