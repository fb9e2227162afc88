"""Stand-ins for the image backends, for tests and offline demos: real HTTP servers on 127.0.0.1
that speak each backend's protocol and return real PNGs (made with Pillow). They can be slow,
fail with a status, answer with something that is not an image, send another image format or mode
(a CMYK JPEG), answer the WebUI's txt2img with a body or an `info` of their own, and they record
interrupts."""

from __future__ import annotations

import base64
import io
import json
import secrets
import threading
import time
from typing import Literal

import anyio
from PIL import Image
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from frobozz._loopback import LoopbackServer

Kind = Literal["sdwebui", "comfyui", "openai"]


def png(width: int, height: int, seed: int = 0, *, mode: str = "RGB", format: str = "PNG") -> bytes:
    image = Image.new("RGB", (width, height))
    image.putdata([((x + seed) % 256, (y * 2) % 256, (x + y) % 256) for y in range(height) for x in range(width)])
    out = io.BytesIO()
    image.convert(mode).save(out, format=format)
    return out.getvalue()


class FakeImageBackend:
    def __init__(
        self,
        kind: Kind,
        *,
        delay: float = 0.0,
        fail: int | None = None,
        not_image: bool = False,
        api_key: str = "sk-test",
        image_mode: str = "RGB",
        image_format: str = "PNG",
        answer: object = None,
        info: str | None = None,
    ) -> None:
        self.kind, self.delay, self.fail, self.not_image, self.api_key = kind, delay, fail, not_image, api_key
        self.image_mode, self.image_format = image_mode, image_format
        self.answer, self.info = answer, info  # the WebUI's txt2img body, or its `info`, instead of the real one
        self.requests: list[tuple[str, str, dict]] = []
        self.interrupted = threading.Event()
        self._jobs: dict[str, tuple[float, dict]] = {}
        self._started = 0.0
        self._server: LoopbackServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _image(self, width: int, height: int, seed: int) -> bytes:
        if self.not_image:
            return b"this is not an image at all"
        return png(width, height, seed, mode=self.image_mode, format=self.image_format)

    async def _record(self, request: Request) -> dict:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        self.requests.append((request.method, request.url.path, body))
        return body

    def _failure(self) -> Response | None:
        if self.fail:
            return JSONResponse(
                {"error": "scripted failure", "detail": "the fake backend was told to fail"}, status_code=self.fail
            )
        return None

    async def _work(self) -> bool:
        """Take `delay` seconds, unless interrupted first; True when the work finished."""
        self._started = time.monotonic()
        end = self._started + self.delay
        while time.monotonic() < end:
            if self.interrupted.is_set():
                return False
            await anyio.sleep(0.02)
        return True

    # -- SD WebUI -------------------------------------------------------------------------------
    async def txt2img(self, request: Request) -> Response:
        body = await self._record(request)
        if (failed := self._failure()) is not None:
            return failed
        if not await self._work():
            return JSONResponse({"images": [], "info": "{}"})
        if self.answer is not None:
            return JSONResponse(self.answer)
        seed = body.get("seed", -1)
        seed = seed if seed >= 0 else 1234
        data = self._image(body.get("width", 512), body.get("height", 512), seed)
        info = json.dumps({"seed": seed, "sd_model_name": "fake-sd-model"}) if self.info is None else self.info
        return JSONResponse({"images": [base64.b64encode(data).decode()], "info": info})

    async def progress(self, request: Request) -> Response:
        done = min(1.0, (time.monotonic() - self._started) / self.delay) if self.delay and self._started else 0.0
        return JSONResponse({"progress": done, "state": {"sampling_step": int(done * 20), "sampling_steps": 20}})

    async def interrupt(self, request: Request) -> Response:
        await self._record(request)
        self.interrupted.set()
        return JSONResponse({})

    # -- ComfyUI --------------------------------------------------------------------------------
    async def prompt(self, request: Request) -> Response:
        body = await self._record(request)
        if (failed := self._failure()) is not None:
            return failed
        prompt_id = secrets.token_hex(8)
        self._jobs[prompt_id] = (time.monotonic(), body.get("prompt") or {})
        self._started = time.monotonic()
        return JSONResponse({"prompt_id": prompt_id, "number": len(self._jobs)})

    async def queue(self, request: Request) -> Response:
        if request.method == "POST":
            await self._record(request)
            return JSONResponse({})
        running = [
            [0, pid, {}, {}, []] for pid, (start, _) in self._jobs.items() if time.monotonic() - start < self.delay
        ]
        return JSONResponse({"queue_running": running, "queue_pending": []})

    async def history(self, request: Request) -> Response:
        prompt_id = request.path_params["prompt_id"]
        job = self._jobs.get(prompt_id)
        if job is None or time.monotonic() - job[0] < self.delay or self.interrupted.is_set():
            return JSONResponse({})
        return JSONResponse(
            {
                prompt_id: {
                    "status": {"status_str": "success", "completed": True},
                    "outputs": {"9": {"images": [{"filename": f"{prompt_id}.png", "subfolder": "", "type": "output"}]}},
                }
            }
        )

    async def view(self, request: Request) -> Response:
        prompt_id = request.query_params.get("filename", "").removesuffix(".png")
        graph = self._jobs.get(prompt_id, (0, {}))[1]
        latent = (graph.get("5") or {}).get("inputs", {})
        seed = (graph.get("3") or {}).get("inputs", {}).get("seed", 0) or 0
        return Response(self._image(latent.get("width", 512), latent.get("height", 512), seed), media_type="image/png")

    # -- OpenAI-compatible ----------------------------------------------------------------------
    async def generations(self, request: Request) -> Response:
        body = await self._record(request)
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": {"message": "invalid api key"}}, status_code=401)
        if (failed := self._failure()) is not None:
            return failed
        if not await self._work():
            return JSONResponse({"data": []})
        width, height = (int(v) for v in body.get("size", "256x256").split("x"))
        return JSONResponse(
            {
                "created": int(time.time()),
                "data": [{"b64_json": base64.b64encode(self._image(width, height, 7)).decode()}],
            }
        )

    def _app(self) -> Starlette:
        routes = {
            "sdwebui": [
                Route("/sdapi/v1/txt2img", self.txt2img, methods=["POST"]),
                Route("/sdapi/v1/progress", self.progress),
                Route("/sdapi/v1/interrupt", self.interrupt, methods=["POST"]),
            ],
            "comfyui": [
                Route("/prompt", self.prompt, methods=["POST"]),
                Route("/queue", self.queue, methods=["GET", "POST"]),
                Route("/history/{prompt_id}", self.history),
                Route("/view", self.view),
                Route("/interrupt", self.interrupt, methods=["POST"]),
            ],
            "openai": [Route("/v1/images/generations", self.generations, methods=["POST"])],
        }[self.kind]
        return Starlette(routes=routes)

    def __enter__(self) -> FakeImageBackend:
        self._server = LoopbackServer(self._app())
        self._server.start()
        self.port = self._server.port
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.stop()
