"""The forge server against real HTTP servers on 127.0.0.1 that speak each backend's protocol."""

import base64
import io
import json
import os
import sys
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from PIL import Image

from frobozz.servers.forge import Settings, create_server
from frobozz.servers.forge._store import ImageStore
from frobozz.servers.forge.exceptions import ForgeError
from frobozz.servers.forge.testing import FakeImageBackend

pytestmark = pytest.mark.anyio


def _settings(backend: FakeImageBackend, **extra) -> Settings:
    return Settings(
        forge_backend=backend.kind, forge_url=backend.url, forge_api_key="sk-test", forge_poll_interval=0.05, **extra
    )


def _image(result) -> Image.Image:
    block = next(b for b in result.content if b.type == "image")
    return Image.open(io.BytesIO(base64.b64decode(block.data)))


def _files(settings: Settings) -> list[str]:
    return sorted(p.name for p in settings.images_dir.glob("*")) if settings.images_dir.exists() else []


@pytest.mark.parametrize("kind, size", [("sdwebui", (768, 512)), ("comfyui", (512, 512)), ("openai", (1024, 1536))])
async def test_imagine_makes_a_real_png_with_a_preview_metadata_and_a_sidecar(frobozz_env, kind, size):
    with FakeImageBackend(kind, delay=0.3) as backend:
        settings = _settings(backend)
        progress = []
        async with Client(create_server(settings)) as client:
            result = await client.call_tool(
                "imagine",
                {"prompt": "a white house in a field", "width": size[0], "height": size[1], "seed": 42, "steps": 8},
                progress_callback=lambda p, t, m: progress.append((p, m)) or anyio.lowlevel.checkpoint(),
            )
    assert not result.is_error, result.content
    meta = result.structured_content
    assert (meta["width"], meta["height"], meta["backend"]) == (*size, kind)
    assert meta["seed"] == (None if kind == "openai" else 42) and meta["elapsed_s"] > 0
    preview = _image(result)
    assert max(preview.size) <= settings.forge_preview_px
    full = Image.open(meta["path"])
    assert full.size == size and full.text["prompt"] == "a white house in a field"
    assert json.loads(full.text["parameters"])["backend"] == kind
    sidecar = json.loads(open(meta["path"].replace(".png", ".json")).read())
    assert sidecar["id"] == meta["id"] and sidecar["prompt"] == "a white house in a field"
    assert progress, "progress notifications while waiting"


async def test_list_and_get_find_earlier_images(frobozz_env):
    with FakeImageBackend("sdwebui") as backend:
        async with Client(create_server(_settings(backend))) as client:
            for prompt in ("a troll with an axe", "a brass lantern", "a troll bridge"):
                await client.call_tool("imagine", {"prompt": prompt, "width": 256, "height": 256})
            trolls = (await client.call_tool("list_images", {"query": "TROLL"})).structured_content["images"]
            assert [i["prompt"] for i in trolls] == ["a troll bridge", "a troll with an axe"]
            got = await client.call_tool("get_image", {"id": trolls[0]["id"], "size": 64})
            assert _image(got).size == (64, 64) and got.structured_content["prompt"] == "a troll bridge"
            one = await client.call_tool("list_images", {"limit": 1})
            assert len(one.structured_content["images"]) == 1


async def _error(client, tool, args):
    result = await client.call_tool(tool, args)
    assert result.is_error, f"{tool}({args}) should fail"
    return result.content[0].text


async def test_bad_input_is_refused_before_the_backend_and_writes_nothing(frobozz_env):
    with FakeImageBackend("sdwebui") as backend:
        settings = _settings(backend)
        async with Client(create_server(settings)) as client:
            assert "prompt is empty" in await _error(client, "imagine", {"prompt": "   "})
            assert "at most 4000" in await _error(client, "imagine", {"prompt": "x" * 100_000})
            assert "NUL" in await _error(client, "imagine", {"prompt": "a\0b"})
            assert "multiple of 8" in await _error(client, "imagine", {"prompt": "p", "width": 1001})
            assert (await client.call_tool("imagine", {"prompt": "p", "width": 10_000})).is_error
            assert (await client.call_tool("imagine", {"prompt": "p", "steps": 0})).is_error
            assert (await client.call_tool("imagine", {"prompt": "p", "seed": -5})).is_error
            assert "not an image id" in await _error(client, "get_image", {"id": "../../etc/passwd"})
            assert "no image" in await _error(client, "get_image", {"id": "20260101-000000-abcdef"})
    assert backend.requests == [] and _files(settings) == []


async def test_the_openai_backend_takes_only_its_sizes_and_needs_a_key(frobozz_env):
    with FakeImageBackend("openai") as backend:
        async with Client(create_server(_settings(backend))) as client:
            assert "not a size this API makes" in await _error(
                client, "imagine", {"prompt": "p", "width": 640, "height": 480}
            )
        async with Client(create_server(_settings(backend).model_copy(update={"forge_api_key": None}))) as client:
            assert "needs FROBOZZ_FORGE_API_KEY" in await _error(client, "imagine", {"prompt": "p"})


@pytest.mark.parametrize("kind", ["sdwebui", "comfyui", "openai"])
@pytest.mark.parametrize("fault, message", [(dict(fail=500), "HTTP 500"), (dict(not_image=True), "not an image")])
async def test_a_failing_backend_is_a_clear_error_and_leaves_no_file(frobozz_env, kind, fault, message):
    with FakeImageBackend(kind, **fault) as backend:
        settings = _settings(backend)
        async with Client(create_server(settings)) as client:
            assert message in await _error(client, "imagine", {"prompt": "p", "width": 256, "height": 256})
    assert _files(settings) == []


async def test_a_backend_that_is_down_or_too_slow_is_a_clear_error(frobozz_env):
    with FakeImageBackend("sdwebui") as backend:
        down = _settings(backend)
    async with Client(create_server(down)) as client:  # the server has stopped: nothing listens there
        assert "not reachable (is it running?)" in await _error(client, "imagine", {"prompt": "p"})
    with FakeImageBackend("sdwebui", delay=5) as backend:
        async with Client(create_server(_settings(backend, forge_timeout=0.5))) as client:
            assert "longer than 0.5 s" in await _error(client, "imagine", {"prompt": "p", "width": 256, "height": 256})
        assert backend.interrupted.wait(5), "the timed-out job was interrupted on the backend"


@pytest.mark.parametrize("kind", ["sdwebui", "comfyui"])
async def test_a_cancelled_call_interrupts_the_backend_and_other_calls_go_on(frobozz_env, kind):
    with FakeImageBackend(kind, delay=30) as backend:
        settings = _settings(backend)
        async with Client(create_server(settings)) as client:
            with anyio.move_on_after(1.0):
                await client.call_tool("imagine", {"prompt": "a slow one", "width": 256, "height": 256})
            listed = await client.call_tool("list_images", {})  # not blocked by the generation
            assert listed.structured_content == {"images": []}
            assert await anyio.to_thread.run_sync(backend.interrupted.wait, 10)
    assert _files(settings) == []


async def test_the_server_makes_an_image_over_real_stdio(frobozz_env):
    with FakeImageBackend("comfyui") as backend:
        env = {
            "FROBOZZ_DATA_DIR": os.environ["FROBOZZ_DATA_DIR"],
            "FROBOZZ_FORGE_BACKEND": "comfyui",
            "FROBOZZ_FORGE_URL": backend.url,
            "FROBOZZ_FORGE_POLL_INTERVAL": "0.05",
        }
        params = StdioServerParameters(command=sys.executable, args=["-m", "frobozz", "serve", "forge"], env=env)
        async with Client(params) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"imagine", "list_images", "get_image"}
            for tool in tools.values():
                a = tool.annotations
                assert (
                    a.title
                    and None not in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)
                    and tool.output_schema
                )
            result = await client.call_tool("imagine", {"prompt": "over stdio", "width": 320, "height": 240})
    assert not result.is_error and _image(result).size == (320, 240)
    workflow = next(body for method, path, body in backend.requests if path == "/prompt")["prompt"]
    assert workflow["6"]["inputs"]["text"] == "over stdio" and workflow["5"]["inputs"]["width"] == 320


@pytest.mark.parametrize("kind", ["sdwebui", "comfyui", "openai"])
async def test_a_cmyk_jpeg_from_the_backend_is_kept_as_an_rgb_png(frobozz_env, kind):
    with FakeImageBackend(kind, image_mode="CMYK", image_format="JPEG") as backend:
        settings = _settings(backend)
        async with Client(create_server(settings)) as client:
            result = await client.call_tool("imagine", {"prompt": "a cyan lamp", "width": 256, "height": 256})
    assert not result.is_error, result.content
    full = Image.open(result.structured_content["path"])
    assert (full.format, full.mode, full.size) == ("PNG", "RGB", (256, 256)) and _image(result).mode == "RGB"
    assert len(_files(settings)) == 2


@pytest.mark.parametrize(
    "fault, said",
    [
        (dict(answer={"images": 5}), "images: Input should be a valid list"),
        (dict(answer={"images": [5]}), "images.0: Input should be a valid string"),
        (dict(answer=[1, 2]), "the whole answer"),
        (dict(info="[1]"), "info: Input should be a valid dictionary"),
        (dict(info="{not json"), "info is not JSON"),
    ],
)
async def test_an_answer_outside_the_webui_protocol_is_a_clear_error_and_writes_nothing(frobozz_env, fault, said):
    with FakeImageBackend("sdwebui", **fault) as backend:
        settings = _settings(backend)
        async with Client(create_server(settings)) as client:
            message = await _error(client, "imagine", {"prompt": "p", "width": 256, "height": 256})
    assert "the WebUI's answer was not understood" in message and said in message, message
    assert _files(settings) == []


async def test_a_seed_or_model_the_webui_reports_oddly_is_taken_as_unknown_and_the_image_is_kept(frobozz_env):
    with FakeImageBackend("sdwebui", info=json.dumps({"seed": "abc", "sd_model_name": 5})) as backend:
        settings = _settings(backend)
        async with Client(create_server(settings)) as client:
            result = await client.call_tool("imagine", {"prompt": "an odd seed", "width": 256, "height": 256})
            listed = (await client.call_tool("list_images", {})).structured_content["images"]
    assert not result.is_error, result.content
    meta = result.structured_content
    assert (meta["seed"], meta["model"]) == (None, None)
    assert [i["id"] for i in listed] == [meta["id"]] and listed[0]["parameters"]["seed"] is None
    assert _files(settings) == [f"{meta['id']}.json", f"{meta['id']}.png"]


def test_a_sidecar_that_cannot_be_written_takes_its_png_back_with_it(tmp_path):
    store = ImageStore(tmp_path / "images")
    image_id = store.new_id()
    (store.root / f"{image_id}.json").mkdir(parents=True)  # a folder where the sidecar goes
    with pytest.raises(ForgeError, match=f"cannot be saved in {store.root}"):
        store.save(image_id, Image.new("RGB", (8, 8)), "p", {})
    assert sorted(p.name for p in store.root.iterdir()) == [f"{image_id}.json"]


async def test_a_file_where_the_images_folder_goes_is_a_clear_error_naming_it(frobozz_env):
    with FakeImageBackend("sdwebui") as backend:
        settings = _settings(backend)
        settings.images_dir.parent.mkdir(parents=True)
        settings.images_dir.write_text("not a folder")
        async with Client(create_server(settings)) as client:
            message = await _error(client, "imagine", {"prompt": "p", "width": 256, "height": 256})
    assert f"cannot be saved in {settings.images_dir}: it is a file, not a folder" in message, message
    assert settings.images_dir.read_text() == "not a folder"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
async def test_a_read_only_images_folder_is_a_clear_error_naming_it(frobozz_env):
    with FakeImageBackend("sdwebui") as backend:
        settings = _settings(backend)
        settings.images_dir.mkdir(parents=True)
        settings.images_dir.chmod(0o555)
        try:
            async with Client(create_server(settings)) as client:
                message = await _error(client, "imagine", {"prompt": "p", "width": 256, "height": 256})
        finally:
            settings.images_dir.chmod(0o755)
    assert f"cannot be saved in {settings.images_dir}: Permission denied" in message, message
    assert _files(settings) == []


@pytest.mark.parametrize(
    "damage",
    [
        {"prompt": 12345},
        {"width": "wide"},
        {"created": None},
        {"parameters": []},
        "not json at all {",
        "[1, 2]",
    ],
)
async def test_a_damaged_sidecar_is_skipped_with_a_log_line_and_the_rest_are_listed(frobozz_env, caplog, damage):
    with FakeImageBackend("sdwebui") as backend:
        settings = _settings(backend)
        async with Client(create_server(settings)) as client:
            good = await client.call_tool("imagine", {"prompt": "a good one", "width": 64, "height": 64})
            damaged = settings.images_dir / "20200101-000000-aaaaaa.json"
            fields = {"id": damaged.stem, "path": "/x.png", "width": 1, "height": 1, "created": "2020", "prompt": "p"}
            text = damage if isinstance(damage, str) else json.dumps({**fields, "parameters": {}, **damage})
            damaged.write_text(text)
            listed = await client.call_tool("list_images", {"query": "o"})
            got = await _error(client, "get_image", {"id": damaged.stem})
    assert not listed.is_error, listed.content
    assert [i["id"] for i in listed.structured_content["images"]] == [good.structured_content["id"]]
    assert f"skipping the damaged sidecar {damaged}" in caplog.text
    assert f"image {damaged.stem} cannot be read" in got


async def test_a_sidecar_is_read_for_its_own_picture_only_whatever_path_it_names(frobozz_env, tmp_path):
    """A sidecar planted with another file's path had get_image read that file (only the image check stopped
    it); one that names another image is damaged."""
    elsewhere = tmp_path / "elsewhere.png"
    with FakeImageBackend("sdwebui") as backend:
        settings = _settings(backend)
        async with Client(create_server(settings)) as client:
            good = (await client.call_tool("imagine", {"prompt": "mine", "width": 64, "height": 64})).structured_content
            elsewhere.write_bytes(Path(good["path"]).read_bytes())
            sidecar = settings.images_dir / f"{good['id']}.json"
            sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "path": str(elsewhere)}))
            Path(good["path"]).unlink()  # its own picture gone: only the planted path would answer
            planted = await _error(client, "get_image", {"id": good["id"]})
            other = settings.images_dir / "20200101-000000-bbbbbb.json"
            other.write_text(sidecar.read_text())  # names good's id, in another image's file
            named = await _error(client, "get_image", {"id": other.stem})
    assert str(elsewhere) not in planted, planted
    assert f"image {other.stem} cannot be read: it says it is image {good['id']!r}" in named, named
