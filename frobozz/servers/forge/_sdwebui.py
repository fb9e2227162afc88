"""Stable Diffusion WebUI / Forge: POST /sdapi/v1/txt2img, progress from /sdapi/v1/progress."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import httpx
from pydantic import BaseModel

from ..._tasks import while_following
from ._backend import (
    Generated,
    ImageRequest,
    Progress,
    check_multiple_of,
    decode_b64,
    http_errors,
    seed_or_none,
    understood,
)
from .exceptions import BackendError

log = logging.getLogger("frobozz.forge")


class Txt2ImgAnswer(BaseModel):
    """What /sdapi/v1/txt2img answers: base64 images, and `info`, a JSON object in a string."""

    images: list[str] = []
    info: str | None = None


class Txt2ImgInfo(BaseModel):
    seed: Any = None  # reported as it was used; one that is not an integer is taken as no seed
    sd_model_name: Any = None


class SdWebUI:
    name = "sdwebui"

    def __init__(self, client: httpx.AsyncClient, url: str, *, timeout: float, poll: float) -> None:
        self.client, self.url, self.timeout, self.poll = client, url.rstrip("/"), timeout, poll

    def check(self, request: ImageRequest) -> None:
        check_multiple_of(request, 8)

    async def generate(self, request: ImageRequest, progress: Progress) -> Generated:
        payload = {
            "prompt": request.prompt,
            "negative_prompt": request.negative_prompt or "",
            "width": request.width,
            "height": request.height,
            "steps": request.steps or 20,
            "seed": request.seed if request.seed is not None else -1,
            "batch_size": 1,
            "n_iter": 1,
        }
        if request.model:
            payload["override_settings"] = {"sd_model_checkpoint": request.model}
        try:
            with http_errors(self.url, self.timeout):
                response = await while_following(
                    lambda: self.client.post(f"{self.url}/sdapi/v1/txt2img", json=payload),
                    lambda: self._follow(progress),
                )
                response.raise_for_status()
                body = response.json()
        except anyio.get_cancelled_exc_class():
            with anyio.move_on_after(5, shield=True):  # stop the work we no longer want
                try:
                    await self.client.post(f"{self.url}/sdapi/v1/interrupt")
                except httpx.HTTPError:
                    log.info("could not interrupt %s", self.url)
            raise
        answer = understood(Txt2ImgAnswer, body, "the WebUI")
        if not answer.images:
            raise BackendError("the WebUI answered without an image")
        try:
            parsed = json.loads(answer.info or "{}")
        except ValueError as e:
            raise BackendError(f"the WebUI's answer was not understood: info is not JSON ({e})") from None
        info = understood(Txt2ImgInfo, parsed, "the WebUI", "info")
        model = info.sd_model_name if isinstance(info.sd_model_name, str) and info.sd_model_name else None
        return Generated(
            decode_b64(answer.images[0], "the WebUI"),
            seed_or_none(info.seed) if info.seed is not None else request.seed,
            model or request.model,
        )

    async def _follow(self, progress: Progress) -> None:
        while True:
            await anyio.sleep(self.poll)
            try:
                state = (
                    await self.client.get(f"{self.url}/sdapi/v1/progress", params={"skip_current_image": "true"})
                ).json()
                steps = state.get("state") or {}
                await progress(
                    float(state.get("progress") or 0.0),
                    f"step {steps.get('sampling_step', '?')} of {steps.get('sampling_steps', '?')}",
                )
            except (httpx.HTTPError, ValueError, AttributeError):
                continue  # progress is a courtesy; the image is what matters
