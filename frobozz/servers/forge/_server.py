"""The `forge` MCP server: make images on a real image backend (imagine), list and fetch them."""

from __future__ import annotations

import base64
import logging
import secrets
import time
from typing import Annotated

import anyio
import httpx
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ImageContent, TextContent
from pydantic import BaseModel, Field, ValidationError

from frobozz._tls import tls_context

from .._complete import offer_completion
from .._logs import offer_logging
from .._tools import closing, hints, tool_errors
from ._backend import Backend, ImageRequest
from ._comfyui import ComfyUI
from ._openai import OpenAIImages
from ._sdwebui import SdWebUI
from ._store import ImageStore, StoredImage, open_image, preview_png
from .exceptions import BackendError, BadRequestError, ForgeError
from .settings import Settings

log = logging.getLogger("frobozz.forge")


class ImageResult(BaseModel):
    id: str
    path: str
    width: int
    height: int
    seed: int | None
    backend: str
    model: str | None
    elapsed_s: float


class ImageList(BaseModel):
    images: list[StoredImage]


def make_backend(settings: Settings, client: httpx.AsyncClient) -> Backend:
    common = dict(timeout=settings.forge_timeout, poll=settings.forge_poll_interval)
    if settings.forge_backend == "sdwebui":
        return SdWebUI(client, settings.forge_url, **common)
    if settings.forge_backend == "comfyui":
        return ComfyUI(client, settings.forge_url, model=settings.forge_model, **common)
    key = settings.forge_api_key.get_secret_value() if settings.forge_api_key else None
    return OpenAIImages(client, settings.forge_url, api_key=key, model=settings.forge_model, **common)


def _picture(png: bytes) -> ImageContent:
    return ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png")


def create_server(settings: Settings | None = None) -> MCPServer:
    settings = settings or Settings()
    store = ImageStore(settings.images_dir)
    client = httpx.AsyncClient(timeout=httpx.Timeout(settings.forge_timeout, connect=10.0), verify=tls_context())
    backend = make_backend(settings, client)
    server = MCPServer(
        "frobozz-forge",
        title="Frobozz forge",
        lifespan=closing(client.aclose),
        instructions="Make images with imagine; list_images and get_image show earlier ones.",
    )

    def check(prompt: str, negative: str | None, model: str | None) -> None:
        if not prompt.strip():
            raise BadRequestError("the prompt is empty: describe the image to make")
        for name, text in (("prompt", prompt), ("negative_prompt", negative or "")):
            if len(text) > settings.forge_max_prompt_chars:
                raise BadRequestError(
                    f"the {name} is {len(text)} characters; at most {settings.forge_max_prompt_chars} are accepted"
                )
            if "\0" in text:
                raise BadRequestError(f"the {name} contains a NUL character")
        if model is not None and (not model.strip() or len(model) > 200):
            raise BadRequestError("the model name must be 1-200 characters")

    @server.tool(annotations=hints("Imagine an image", read_only=False, open_world=True))
    async def imagine(
        prompt: Annotated[str, Field(description="What the image shows.")],
        ctx: Context,
        negative_prompt: Annotated[str | None, Field(description="What it must not show.")] = None,
        width: Annotated[int, Field(ge=64, le=2048)] = 1024,
        height: Annotated[int, Field(ge=64, le=2048)] = 1024,
        steps: Annotated[int | None, Field(ge=1, le=150)] = None,
        seed: Annotated[int | None, Field(ge=0, le=2**32 - 1)] = None,
        model: Annotated[str | None, Field(description="The backend's model or checkpoint.")] = None,
    ) -> Annotated[CallToolResult, ImageResult]:
        """Make an image from a prompt. Returns a preview to look at, and where the full PNG is kept."""
        with tool_errors(ForgeError):
            check(prompt, negative_prompt, model)
            request = ImageRequest(
                prompt=prompt.strip(),
                negative_prompt=negative_prompt,
                width=width,
                height=height,
                steps=steps,
                seed=seed if seed is not None or backend.name == "openai" else secrets.randbelow(2**32),
                model=model,
            )
            backend.check(request)
            started = time.monotonic()

            async def progress(done: float, message: str) -> None:
                await ctx.report_progress(round(done * 100, 1), 100, message)

            try:
                with anyio.fail_after(settings.forge_timeout):
                    made = await backend.generate(request, progress)
            except TimeoutError:
                raise BackendError(
                    f"the image took longer than {settings.forge_timeout:g} s; try fewer steps or a smaller size"
                ) from None
            image = await anyio.to_thread.run_sync(open_image, made.data)
            preview = await anyio.to_thread.run_sync(preview_png, image, settings.forge_preview_px)
            image_id = store.new_id()
            try:  # all of the answer is checked before anything is written
                result = ImageResult(
                    id=image_id,
                    path=str(store.png_path(image_id)),
                    width=image.width,
                    height=image.height,
                    seed=made.seed,
                    backend=backend.name,
                    model=made.model,
                    elapsed_s=round(time.monotonic() - started, 3),
                )
            except ValidationError as e:
                first = e.errors()[0]
                raise BackendError(
                    f"the {backend.name} backend's answer was not understood: "
                    f"{'.'.join(map(str, first['loc']))}: {first['msg']}"
                ) from None
            parameters = {
                "negative_prompt": negative_prompt,
                "width": image.width,
                "height": image.height,
                "steps": steps,
                "seed": result.seed,
                "backend": backend.name,
                "model": result.model,
            }
            text = TextContent(
                type="text",
                text=f"Image {image_id}: {image.width}x{image.height}, saved at "
                f"{result.path} (the preview is at most {settings.forge_preview_px} px).",
            )
            answer = CallToolResult(content=[_picture(preview), text], structured_content=result.model_dump())
            try:
                await anyio.to_thread.run_sync(store.save, image_id, image, request.prompt, parameters)
            except BaseException:  # cancelled as it saved, say: the caller never learns the id, so keep nothing
                store.remove(image_id)
                raise
            return answer

    @server.tool(annotations=hints("List images", read_only=True, idempotent=True))
    def list_images(
        limit: Annotated[int, Field(ge=1, le=500)] = 20, query: Annotated[str | None, Field(max_length=1000)] = None
    ) -> ImageList:
        """Images made so far, newest first; `query` keeps those whose prompt contains it."""
        with tool_errors(ForgeError, OSError):
            return ImageList(images=store.list(limit, query))

    @server.tool(annotations=hints("Get an image", read_only=True, idempotent=True))
    async def get_image(
        id: Annotated[str, Field(max_length=100)], size: Annotated[int, Field(ge=64, le=2048)] = 512
    ) -> Annotated[CallToolResult, StoredImage]:
        """An image made earlier, at most `size` pixels on its longest side, with its prompt and parameters."""
        with tool_errors(ForgeError):
            stored = store.get(id)
            try:
                data = await anyio.Path(stored.path).read_bytes()
            except OSError as e:
                raise ForgeError(f"image {stored.id}'s file is missing: {e.strerror}") from e
            image = await anyio.to_thread.run_sync(open_image, data)
            preview = await anyio.to_thread.run_sync(preview_png, image, size)
            return CallToolResult(content=[_picture(preview)], structured_content=stored.model_dump())

    @server.prompt(title="Vary an image")
    def vary_image(
        image: Annotated[str, Field(description="An image's id (it completes from the images made).", max_length=100)],
        change: Annotated[str, Field(description="What to change.", max_length=2000)] = "",
    ) -> str:
        """Make a new image from an earlier one's prompt (the id completes from the images made)."""
        how = f", changed so: {change}" if change else ", with a new seed"
        return (
            f"Look at image {image} with get_image, then make a variation of it with imagine: its prompt and "
            f"parameters{how}. Show both and say what differs."
        )

    async def image_ids(typed: str, _: object) -> list[str]:
        return [stored.id for stored in await anyio.to_thread.run_sync(store.list, 10_000, None)]

    offer_completion(server, {("vary_image", "image"): image_ids}, expected=(ForgeError, OSError))
    offer_logging(server)
    return server
