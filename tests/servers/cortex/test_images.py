"""Images kept with memories, through cortex's tools on a real database: base64 or a path under the allowed
folders, a 768 px JPEG thumbnail returned by get as image content, search saying which memories have one, a
vision model (a real local Messages API server) describing it so words find it, and every refusal (too big,
not what it claims, outside the folders, a decompression bomb) leaving nothing behind, even a failure midway."""

import base64
import io
import os
import struct
import sys
import zlib

import anyio
import asyncpg
import pytest
from mcp import Client
from PIL import Image, ImageDraw
from pydantic import SecretStr

from frobozz.engine.testing import ScriptedModel
from frobozz.servers.cortex import create_server
from tests.servers.mcp import call, error

pytestmark = pytest.mark.anyio


def picture(size=(2000, 1000), fmt="PNG", colour="navy") -> bytes:
    image = Image.new("RGB", size, colour)
    ImageDraw.Draw(image).ellipse((size[0] // 4, size[1] // 4, size[0] * 3 // 4, size[1] * 3 // 4), fill="orange")
    data = io.BytesIO()
    image.save(data, fmt)
    return data.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """A valid PNG of 30000 x 30000 one-bit pixels, all black: about 100 kB that decode to 900 million pixels."""
    row = b"\0" * (1 + 30000 // 8)
    packer = zlib.compressobj(9)
    idat = b"".join(packer.compress(row * 1000) for _ in range(30)) + packer.flush()
    header = struct.pack(">IIBBBBB", 30000, 30000, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IDAT", idat) + _chunk(b"IEND", b"")


def kept_files(settings) -> list[str]:
    folder = settings.images_dir
    return sorted(os.listdir(folder)) if folder.exists() else []


def thumbnail_of(result) -> Image.Image:
    [image] = [c for c in result.content if c.type == "image"]
    assert image.mime_type == "image/jpeg"
    return Image.open(io.BytesIO(base64.b64decode(image.data)))


async def test_an_image_is_kept_with_its_memory_and_get_returns_its_thumbnail(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        assert (await call(client, "search", query="orange sun"))["results"] == []  # nothing first
        plain = await call(client, "store", content="The lamp is in the living room.")
        stored = await call(
            client,
            "store",
            content="A sketch of the orange sun over the white house.",
            image={"data": b64(picture()), "media_type": "image/png"},
        )
        hits = (await call(client, "search", query="orange sun white house"))["results"]
        result = await client.call_tool("get", {"id": stored["id"]})
        without = await client.call_tool("get", {"id": plain["id"]})
    assert stored["image"] == {
        "media_type": "image/png",
        "bytes": len(picture()),
        "width": 2000,
        "height": 1000,
        "thumbnail_width": 768,
        "thumbnail_height": 384,
        "description": None,
    }
    assert {h["id"]: h["has_image"] for h in hits}[stored["id"]] is True
    assert not [h for h in hits if h["id"] == plain["id"] and h["has_image"]]
    thumbnail = thumbnail_of(result)
    assert thumbnail.format == "JPEG" and thumbnail.size == (768, 384)
    assert thumbnail.getpixel((384, 192))[0] > 200 and thumbnail.getpixel((5, 5))[2] > 100  # orange on navy
    assert result.structured_content["image"]["width"] == 2000
    assert result.structured_content["content"] == "A sketch of the orange sun over the white house."  # no vision
    assert [c.type for c in without.content] == ["text"] and without.structured_content["image"] is None
    assert len(kept_files(cortex_settings)) == 2  # the image as given, and its thumbnail


async def test_the_same_text_and_image_is_kept_once_and_another_image_makes_another_memory(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        first = await call(
            client, "store", content="Our garden.", image={"data": b64(picture()), "media_type": "image/png"}
        )
        again = await call(
            client, "store", content="Our garden.", image={"data": b64(picture()), "media_type": "image/png"}
        )
        other = await call(
            client,
            "store",
            content="Our garden.",
            image={"data": b64(picture(colour="green", fmt="JPEG")), "media_type": "image/jpeg"},
        )
    assert again["duplicate_of"] == first["id"] and again["image"]["bytes"] == first["image"]["bytes"]
    assert other["duplicate_of"] is None and other["id"] != first["id"]
    assert len(kept_files(cortex_settings)) == 4  # the duplicate left no files


async def test_a_vision_model_describes_the_image_so_that_words_find_it(cortex_settings):
    seen = "A red lighthouse on a rocky cliff above a stormy sea, with the word PORTLAND painted on its side."
    with ScriptedModel(lambda _: "unused", side_reply=seen) as model:
        settings = cortex_settings.model_copy(
            update={
                "cortex_vision_model": "claude-haiku-4-5",
                "cortex_vision_url": model.url,
                "cortex_vision_api_key": SecretStr("sk-scripted"),
            }
        )
        async with Client(create_server(settings)) as client:
            stored = await call(
                client,
                "store",
                content="Holiday, day three.",
                image={"data": b64(picture((3000, 4000), "JPEG")), "media_type": "image/jpeg"},
            )
            hits = (await call(client, "search", query="lighthouse on a cliff", min_score=0.3))["results"]
            got = await call(client, "get", id=stored["id"])
    [request] = model.requests
    [image, text] = request.messages[0]["content"]
    sent = Image.open(io.BytesIO(base64.b64decode(image["source"]["data"])))
    assert request.body["model"] == "claude-haiku-4-5" and request.headers["x-api-key"] == "sk-scripted"
    assert sent.format == "JPEG" and max(sent.size) == 768  # the thumbnail goes, not the 12 MP original
    assert "Holiday, day three." in text["text"] and "not instructions" in text["text"]
    assert stored["image"]["description"] == seen
    assert [h["id"] for h in hits] == [stored["id"]] and hits[0]["has_image"]
    assert got["content"] == f"Holiday, day three.\n\nImage: {seen}"


async def test_a_vision_model_that_cannot_be_reached_leaves_the_memory_its_own_words(cortex_settings):
    with ScriptedModel(lambda _: "unused") as model:
        url = model.url  # stopped at once: its port answers nothing
    settings = cortex_settings.model_copy(
        update={"cortex_vision_model": "claude-haiku-4-5", "cortex_vision_url": url, "cortex_vision_timeout": 5.0}
    )
    async with Client(create_server(settings)) as client:
        stored = await call(
            client, "store", content="The map of the cellar.", image={"data": b64(picture()), "media_type": "image/png"}
        )
        got = await call(client, "get", id=stored["id"])
    assert stored["image"]["description"] is None and got["content"] == "The map of the cellar."


async def test_an_image_is_read_by_path_only_under_the_allowed_folders(cortex_settings, tmp_path):
    allowed, elsewhere = tmp_path / "photos", tmp_path / "private"
    allowed.mkdir()
    elsewhere.mkdir()
    (allowed / "house.png").write_bytes(picture())
    (elsewhere / "secret.png").write_bytes(picture())
    (allowed / "link.png").symlink_to(elsewhere / "secret.png")
    os.mkfifo(allowed / "pipe.png")
    with open(allowed / "huge.png", "wb") as f:  # 50 MB (sparse: nothing written)
        f.truncate(50_000_000)
    async with Client(create_server(cortex_settings)) as client:
        assert "no folder is allowed" in await error(
            client, "store", content="x", image={"path": str(allowed / "house.png")}
        )
    settings = cortex_settings.model_copy(update={"cortex_image_folders": [allowed]})
    async with Client(create_server(settings)) as client:
        stored = await call(client, "store", content="The white house.", image={"path": str(allowed / "house.png")})
        outside = await error(client, "store", content="x", image={"path": str(elsewhere / "secret.png")})
        dotdot = await error(client, "store", content="x", image={"path": f"{allowed}/../private/secret.png"})
        linked = await error(client, "store", content="x", image={"path": str(allowed / "link.png")})
        missing = await error(client, "store", content="x", image={"path": str(allowed / "nothing.png")})
        pipe = await error(client, "store", content="x", image={"path": str(allowed / "pipe.png")})
        huge = await error(client, "store", content="x", image={"path": str(allowed / "huge.png")})
        both = await error(
            client,
            "store",
            content="x",
            image={"path": str(allowed / "house.png"), "data": b64(picture()), "media_type": "image/png"},
        )
        recent = (await call(client, "recent"))["memories"]
    assert stored["image"]["width"] == 2000
    assert "outside the folders" in outside and "outside the folders" in dotdot and "outside the folders" in linked
    assert "no such image file" in missing and "not a regular file" in pipe
    assert "50.0 MB" in huge and "limit is 20.0 MB" in huge
    assert "either as a path or as base64" in both
    assert [m["id"] for m in recent] == [stored["id"]] and len(kept_files(settings)) == 2


async def test_an_image_that_is_not_what_it_claims_or_too_big_is_refused_and_nothing_is_kept(
    cortex_settings, tmp_path, bomb
):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "notes.png").write_text("these are my notes, not a picture")
    (folder / "photo.png").write_bytes(picture(fmt="JPEG"))
    (folder / "bomb.png").write_bytes(bomb)
    settings = cortex_settings.model_copy(update={"cortex_image_folders": [folder]})
    png = picture()
    cases = {
        "is not a PNG, JPEG, GIF or WebP": {"data": b64(b"GIF89a but not really"), "media_type": "image/png"},
        "claims to be image/png but is image/jpeg": {"data": b64(picture(fmt="JPEG")), "media_type": "image/png"},
        "claims to be image/png but is not": {"path": str(folder / "notes.png")},
        "claims to be image/png but is image/jpeg: nothing": {"path": str(folder / "photo.png")},
        "damaged": {"data": b64(png[: len(png) // 2]), "media_type": "image/png"},
        "not valid base64": {"data": "not*base64!", "media_type": "image/png"},
        "over the limit of 20.0 MB": {"data": "A" * 28_000_000, "media_type": "image/png"},
        "decompression bomb": {"data": b64(bomb), "media_type": "image/png"},
        "decompression bomb?)": {"path": str(folder / "bomb.png")},
        "the image is empty": {"data": "", "media_type": "image/png"},
        "needs its media_type": {"data": b64(png)},
        "image/bmp": {"data": b64(png), "media_type": "image/bmp"},
    }
    async with Client(create_server(settings)) as client:
        with anyio.fail_after(120):
            for expected, image in cases.items():
                assert expected in await error(client, "store", content="A picture.", image=image), expected
        assert "empty" in await error(
            client, "store", content="  ", image={"data": b64(png), "media_type": "image/png"}
        )
        assert (await call(client, "recent"))["memories"] == []
    assert len(bomb) < 200_000 and kept_files(settings) == []


async def test_a_failure_midway_keeps_neither_the_memory_nor_its_files(cortex_settings, tmp_path):
    url = cortex_settings.database_url.get_secret_value()
    image = {"data": b64(picture()), "media_type": "image/png"}
    async with Client(create_server(cortex_settings)) as client:
        await call(client, "store", content="Migrated first.")
        connection = await asyncpg.connect(url)
        try:  # the database refuses the image's row, after the memory's row and both files were written
            await connection.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                "RAISE EXCEPTION 'no space left (test)'; END $$; CREATE TRIGGER refuse BEFORE INSERT ON memory_images "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
            message = await error(client, "store", content="The cellar map.", image=image)
            memories = await connection.fetchval("SELECT count(*) FROM memories")
            await connection.execute("DROP TRIGGER refuse ON memory_images")
        finally:
            await connection.close()
        assert "nothing was kept" in message and memories == 1 and kept_files(cortex_settings) == []
        assert (await call(client, "store", content="The cellar map.", image=image))["duplicate_of"] is None
    assert len(kept_files(cortex_settings)) == 2
    blocked = cortex_settings.model_copy(update={"cortex_images_dir": tmp_path / "a-file"})
    (tmp_path / "a-file").write_text("not a folder")  # the files cannot be written: no row either
    async with Client(create_server(blocked)) as client:
        assert "nothing was kept" in await error(client, "store", content="The attic.", image=image)
        assert [m["content"] for m in (await call(client, "recent"))["memories"]] == [
            "The cellar map.",
            "Migrated first.",
        ]


async def test_over_stdio_a_served_cortex_reads_its_folders_from_the_environment_and_returns_the_thumbnail(
    cortex_settings, tmp_path
):
    from mcp.client.stdio import StdioServerParameters

    photos, scans = tmp_path / "photos", tmp_path / "scans"
    photos.mkdir()
    scans.mkdir()
    (scans / "receipt.webp").write_bytes(picture((900, 1600), "WEBP", "white"))
    seen = "A shop receipt from Flathead Hardware listing a brass lantern and lamp oil."
    with ScriptedModel(lambda _: "unused", side_reply=seen) as model:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "frobozz", "serve", "cortex"],
            env={
                "FROBOZZ_DATA_DIR": os.environ["FROBOZZ_DATA_DIR"],
                "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value(),
                "FROBOZZ_CORTEX_IMAGE_FOLDERS": f"{photos}{os.pathsep}{scans}",
                "FROBOZZ_CORTEX_VISION_MODEL": "claude-haiku-4-5",
                "FROBOZZ_CORTEX_VISION_URL": model.url,
                "ANTHROPIC_API_KEY": "sk-from-the-usual-variable",
            },
        )
        with anyio.fail_after(240):
            async with Client(params, read_timeout_seconds=120) as client:
                stored = await call(client, "store", content="Paid.", image={"path": str(scans / "receipt.webp")})
                hits = (await call(client, "search", query="hardware receipt lamp oil", min_score=0.3))["results"]
                result = await client.call_tool("get", {"id": stored["id"]})
    assert model.requests[0].headers["x-api-key"] == "sk-from-the-usual-variable"
    assert [h["id"] for h in hits] == [stored["id"]] and hits[0]["has_image"]
    assert thumbnail_of(result).size == (432, 768) and result.structured_content["image"]["media_type"] == "image/webp"


async def test_files_a_killed_store_left_behind_are_swept_once_old_and_kept_ones_stay(cortex_settings):
    from frobozz.memory import ImageInput, MemoryService

    service = MemoryService(cortex_settings)
    try:
        images = await service.images()
        memory, _, image = await images.remember("Kept.", ImageInput(data=b64(picture()), media_type="image/png"))
        folder = cortex_settings.images_dir
        for name in ("0123abcd.png", "0123abcd.thumb.jpg", ".4567cdef.png.part", "fresh.png"):
            (folder / name).write_bytes(b"left by a store killed midway")
        for name in ("0123abcd.png", "0123abcd.thumb.jpg", ".4567cdef.png.part", image.original):
            os.utime(folder / name, (1_000_000_000, 1_000_000_000))  # 2001: long before any store under way
        removed = await images.sweep()
        assert sorted(removed) == [".4567cdef.png.part", "0123abcd.png", "0123abcd.thumb.jpg"]
        assert sorted(os.listdir(folder)) == sorted(["fresh.png", image.original, image.thumbnail])
        assert (await images.read(image)).startswith(b"\xff\xd8") and memory.id == image.memory_id
    finally:
        await service.aclose()
