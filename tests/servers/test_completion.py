"""Completion on the servers other than game (tests/servers/game/test_protocol.py has the game's): each
prompt argument that names something completes with the real ones, nothing first, and only what the caller's
token may read."""

import hashlib

import pytest
from mcp import Client

from frobozz.servers import cortex, fetch, forge, handoff
from frobozz.servers._grants import Grant, granted
from frobozz.servers.forge.testing import FakeImageBackend
from tests.servers.fetch.site import Site
from tests.servers.mcp import call, complete

pytestmark = pytest.mark.anyio


async def test_cortex_and_handoff_complete_the_namespaces_in_use_and_only_those_a_token_may_read(cortex_settings):
    url = cortex_settings.database_url.get_secret_value()
    async with Client(cortex.create_server(cortex_settings)) as client:
        assert await complete(client, "recall", "namespace") == []  # nothing stored yet
        for namespace in ("zork", "zorkmid", "chat"):
            await call(client, "store", content=f"A memory of {namespace}.", namespace=namespace)
        assert await complete(client, "recall", "namespace", "zo") == ["zork", "zorkmid"]
        assert await complete(client, "recall", "about", "zo") == []  # free text: nothing to suggest
        prompt = await client.get_prompt("recall", {"about": "the troll", "namespace": "zork"})
        assert "'zork'" in prompt.messages[0].content.text
    async with Client(handoff.create_server(handoff.Settings(database_url=url, session_id="s"))) as client:
        assert set(await complete(client, "pick_up", "namespace")) >= {"chat", "zork", "zorkmid"}
    grant = Grant(name="reader", sha256=hashlib.sha256(b"x").hexdigest(), servers=["cortex"], read=["zork"])
    with granted(grant):
        async with Client(cortex.create_server(cortex_settings)) as client:
            assert await complete(client, "recall", "namespace") == ["zork"]


async def test_fetch_completes_the_urls_it_has_fetched_the_latest_first(frobozz_env):
    settings = fetch.Settings(fetch_allow_private=True, fetch_github_url="", fetch_github_raw_url="")
    with Site() as site:
        async with Client(fetch.create_server(settings)) as client:
            assert await complete(client, "read_page", "url", "http") == []  # nothing fetched yet
            for path in ("/page.html", "/feed.xml"):
                assert not (await client.call_tool("fetch", {"url": f"{site.url}{path}"})).is_error
            assert await complete(client, "read_page", "url", site.url) == [
                f"{site.url}/feed.xml",
                f"{site.url}/page.html",
            ]
            assert await complete(client, "read_page", "url", f"{site.url}/p") == [f"{site.url}/page.html"]
    async with Client(fetch.create_server(fetch.Settings(fetch_cache=False))) as client:
        assert await complete(client, "read_page", "url") == []  # no cache: nothing kept to suggest


async def test_forge_completes_the_ids_of_the_images_it_made(frobozz_env):
    with FakeImageBackend("sdwebui") as backend:
        settings = forge.Settings(forge_backend="sdwebui", forge_url=backend.url, forge_poll_interval=0.05)
        async with Client(forge.create_server(settings)) as client:
            assert await complete(client, "vary_image", "image") == []
            made = await client.call_tool("imagine", {"prompt": "a white house", "width": 64, "height": 64})
            image_id = made.structured_content["id"]
            assert await complete(client, "vary_image", "image", image_id[:8]) == [image_id]
            assert await complete(client, "vary_image", "image", "\x00" * 10) == []
