"""A memory's image through the rest of its life, on a real database: forgetting it removes its files and it is
never served again; a new version of the fact (supersede, update) keeps the image, sharing its files, which go
with the last version that names them; export carries it in the JSONL line and import restores it (thumbnail and
description too) after the same checks as store, keeping nothing of a bad one."""

import base64
import json
import os
import subprocess
import sys

import pytest
from mcp import Client
from PIL import Image

from frobozz.servers.cortex import create_server
from tests.servers.cortex.test_images import b64, kept_files, picture, thumbnail_of
from tests.servers.mcp import call, error

pytestmark = pytest.mark.anyio
PNG = {"data": b64(picture()), "media_type": "image/png"}


async def test_forgetting_a_memory_removes_its_image_and_it_is_never_served_again(cortex_settings):
    from frobozz.memory import MemoryService

    async with Client(create_server(cortex_settings)) as client:
        assert "no memory 1" in await error(client, "forget", id=1)  # nothing to forget first
        plain = await call(client, "store", content="The lamp is in the living room.")
        kept = await call(
            client, "store", content="The other garden.", image={**PNG, "data": b64(picture(colour="green"))}
        )
        stored = await call(client, "store", content="A sketch of the white house.", image=PNG)
        assert len(kept_files(cortex_settings)) == 4
        await call(client, "forget", id=plain["id"])
        assert len(kept_files(cortex_settings)) == 4  # a memory without an image touches no file
        await call(client, "forget", id=stored["id"])
        assert "no memory" in await error(client, "get", id=stored["id"])
        hits = (await call(client, "search", query="sketch of the white house"))["results"]
        got = await client.call_tool("get", {"id": kept["id"]})
    assert stored["id"] not in [h["id"] for h in hits]
    assert len(kept_files(cortex_settings)) == 2 and thumbnail_of(got).size == (768, 384)  # the other one's stay
    service = MemoryService(cortex_settings)
    try:
        assert await (await service.images()).image(stored["id"]) is None
    finally:
        await service.aclose()


async def test_a_new_version_keeps_the_image_sharing_its_files_until_the_last_version_is_forgotten(cortex_settings):
    async with Client(create_server(cortex_settings)) as client:
        old = await call(client, "store", content="The boat is at the dam.", image=PNG)
        new = await call(client, "supersede", old_id=old["id"], content="The boat is at the reservoir.")
        newer = await call(client, "update", id=new["id"], content="The boat is at the river bank.")
        got = await client.call_tool("get", {"id": newer["id"]})
        hits = (await call(client, "search", query="boat river bank"))["results"]
        assert len(kept_files(cortex_settings)) == 2  # shared, not copied
        assert thumbnail_of(got).size == (768, 384) and got.structured_content["image"]["width"] == 2000
        assert {h["id"]: h["has_image"] for h in hits}[newer["id"]] is True
        old_image = (await client.call_tool("get", {"id": old["id"]})).structured_content["image"]
        assert old_image == got.structured_content["image"]  # the history keeps it too
        await call(client, "forget", id=old["id"])
        await call(client, "forget", id=new["id"])
        assert len(kept_files(cortex_settings)) == 2  # the newest still names them
        assert thumbnail_of(await client.call_tool("get", {"id": newer["id"]})).format == "JPEG"
        await call(client, "forget", id=newer["id"])
    assert kept_files(cortex_settings) == []


def cortex(env, *args, check=True):
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "cortex", *args], capture_output=True, text=True, timeout=180, env=env
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


async def test_export_carries_the_image_and_import_restores_it_checked_as_store_checks_it(
    cortex_settings, postgres, tmp_path
):
    from tests.conftest import database_url

    env = {**os.environ, "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value()}
    assert cortex(env, "export").stdout == ""  # nothing to export first
    async with Client(create_server(cortex_settings)) as client:
        plain = await call(client, "store", content="The lamp is in the living room.")
        old = await call(client, "store", content="The boat is at the dam.", image=PNG)
        new = await call(client, "supersede", old_id=old["id"], content="The boat is at the reservoir.")
        thumbnail = thumbnail_of(await client.call_tool("get", {"id": new["id"]}))
    backup = tmp_path / "backup.jsonl"
    cortex(env, "export", "--output", str(backup))
    lines = [json.loads(line) for line in backup.read_text().splitlines()]
    assert [r["id"] for r in lines] == [plain["id"], old["id"], new["id"]] and "image" not in lines[0]
    assert base64.b64decode(lines[2]["image"]["data"]) == picture()
    assert lines[2]["image"]["media_type"] == "image/png" and lines[2]["image"]["description"] is None

    postgres.psql("CREATE DATABASE restored_images;")
    elsewhere = {
        **env,
        "FROBOZZ_DATABASE_URL": database_url(postgres, "restored_images"),
        "FROBOZZ_CORTEX_IMAGES_DIR": str(tmp_path / "elsewhere"),
    }
    bad = tmp_path / "bad.jsonl"
    for image, expected in [
        ({"data": b64(b"not a picture"), "media_type": "image/png"}, "is not a PNG"),
        ({"data": b64(picture(fmt="JPEG")), "media_type": "image/png"}, "claims to be image/png"),
        ({"data": "A" * 28_000_000, "media_type": "image/png"}, "over the limit"),
        ({"media_type": "image/png"}, "base64 'data'"),
    ]:
        bad.write_text(json.dumps(lines[0]) + "\n" + json.dumps({**lines[2], "image": image}) + "\n")
        done = cortex(elsewhere, "import", str(bad), check=False)
        assert done.returncode == 1 and "line 2" in done.stderr and expected in done.stderr, done.stderr
    assert cortex(elsewhere, "export").stdout == "" and not (tmp_path / "elsewhere").exists()

    assert "imported 3 memories" in cortex(elsewhere, "import", str(backup)).stdout
    assert "imported 0 memories (3 already there)" in cortex(elsewhere, "import", str(backup)).stdout
    assert len(os.listdir(tmp_path / "elsewhere")) == 4  # each version its own files: the duplicates left none
    again = [json.loads(line) for line in cortex(elsewhere, "export").stdout.splitlines()]
    assert [(r["content"], r.get("image")) for r in again] == [(r["content"], r.get("image")) for r in lines]
    restored = json.loads(cortex(elsewhere, "get", str(again[2]["id"])).stdout)["image"]
    assert restored["width"] == 2000 and restored["file"].startswith(str(tmp_path / "elsewhere"))
    assert Image.open(restored["thumbnail"]).size == thumbnail.size  # made again from the image, as store makes it
