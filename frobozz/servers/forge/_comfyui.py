"""ComfyUI: queue a txt2img workflow on POST /prompt, follow it by polling /queue and /history,
fetch the output from /view; cancel with /interrupt and a queue delete."""

from __future__ import annotations

import logging
import secrets
from typing import Any

import anyio
import httpx

from ._backend import Generated, ImageRequest, Progress, check_multiple_of, http_errors
from .exceptions import BackendError

log = logging.getLogger("frobozz.forge")
DEFAULT_CHECKPOINT = "v1-5-pruned-emaonly.safetensors"


def workflow(request: ImageRequest, checkpoint: str) -> dict[str, Any]:
    """ComfyUI's standard text-to-image graph, in its API format."""
    return {
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": checkpoint}},
        "5": {
            "class_type": "EmptyLatentImage",
            "inputs": {"width": request.width, "height": request.height, "batch_size": 1},
        },
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": request.prompt, "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": request.negative_prompt or "", "clip": ["4", 1]}},
        "3": {
            "class_type": "KSampler",
            "inputs": {
                "seed": request.seed,
                "steps": request.steps or 20,
                "cfg": 7.0,
                "sampler_name": "euler",
                "scheduler": "normal",
                "denoise": 1.0,
                "model": ["4", 0],
                "positive": ["6", 0],
                "negative": ["7", 0],
                "latent_image": ["5", 0],
            },
        },
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "frobozz", "images": ["8", 0]}},
    }


class ComfyUI:
    name = "comfyui"

    def __init__(self, client: httpx.AsyncClient, url: str, *, timeout: float, poll: float, model: str | None) -> None:
        self.client, self.url, self.timeout, self.poll = client, url.rstrip("/"), timeout, poll
        self.model = model or DEFAULT_CHECKPOINT

    def check(self, request: ImageRequest) -> None:
        check_multiple_of(request, 8)

    async def generate(self, request: ImageRequest, progress: Progress) -> Generated:
        checkpoint = request.model or self.model
        prompt_id = None
        try:
            with http_errors(self.url, self.timeout):
                queued = await self.client.post(
                    f"{self.url}/prompt",
                    json={"prompt": workflow(request, checkpoint), "client_id": secrets.token_hex(8)},
                )
                queued.raise_for_status()
                prompt_id = queued.json().get("prompt_id")
                if not prompt_id:
                    raise BackendError("ComfyUI did not queue the workflow (no prompt_id)")
                image = await self._wait(prompt_id, progress)
                response = await self.client.get(
                    f"{self.url}/view",
                    params={
                        "filename": image["filename"],
                        "subfolder": image.get("subfolder", ""),
                        "type": image.get("type", "output"),
                    },
                )
                response.raise_for_status()
        except anyio.get_cancelled_exc_class():
            with anyio.move_on_after(5, shield=True):
                try:
                    await self.client.post(f"{self.url}/interrupt")
                    if prompt_id:
                        await self.client.post(f"{self.url}/queue", json={"delete": [prompt_id]})
                except httpx.HTTPError:
                    log.info("could not cancel the ComfyUI job at %s", self.url)
            raise
        return Generated(response.content, request.seed, checkpoint)

    async def _wait(self, prompt_id: str, progress: Progress) -> dict[str, Any]:
        while True:
            history = (await self.client.get(f"{self.url}/history/{prompt_id}")).json()
            entry = history.get(prompt_id) if isinstance(history, dict) else None
            if entry:
                status = entry.get("status") or {}
                if status.get("status_str") == "error":
                    raise BackendError(f"ComfyUI failed to run the workflow: {status.get('messages', '')}"[:400])
                for output in (entry.get("outputs") or {}).values():
                    for image in output.get("images") or ():
                        return image
                raise BackendError("ComfyUI finished the workflow without an output image")
            queue = (await self.client.get(f"{self.url}/queue")).json()
            running = any(prompt_id in item for item in queue.get("queue_running", []))
            await progress(0.5 if running else 0.0, "running" if running else "queued")
            await anyio.sleep(self.poll)
