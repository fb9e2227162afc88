"""Many clients at once: two server processes writing into one namespace lose nothing, and the word
statistics search reads agree with a recount."""

import os
import sys

import anyio
import asyncpg
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.anyio
RECOUNT = """
SELECT (SELECT memories FROM memory_namespaces WHERE namespace = 'shared') AS memories,
       (SELECT count(*) FROM memories WHERE namespace = 'shared' AND deleted_at IS NULL) AS live,
       (SELECT coalesce(array_agg(lexeme || ':' || memories ORDER BY lexeme), '{}') FROM memory_words
        WHERE namespace = 'shared' AND memories > 0) AS kept,
       (SELECT coalesce(array_agg(lexeme || ':' || n ORDER BY lexeme), '{}') FROM (
           SELECT l AS lexeme, count(*) AS n FROM memories, unnest(tsvector_to_array(fts)) l
           WHERE namespace = 'shared' AND deleted_at IS NULL GROUP BY l) c) AS recounted"""


async def test_two_server_processes_storing_at_once_keep_every_acknowledged_memory(cortex_settings):
    url = cortex_settings.database_url.get_secret_value()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "frobozz", "serve", "cortex"],
        env={"FROBOZZ_DATA_DIR": os.environ["FROBOZZ_DATA_DIR"], "FROBOZZ_DATABASE_URL": url},
    )
    acknowledged: dict[int, str] = {}

    async def store(client, text):
        result = await client.call_tool("store", {"content": text, "namespace": "shared"})
        assert not result.is_error, result.content[0].text
        acknowledged[result.structured_content["id"]] = text

    with anyio.fail_after(300):
        async with Client(params, read_timeout_seconds=120) as one, Client(params, read_timeout_seconds=120) as two:
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    for name, client in (("one", one), ("two", two)):
                        tg.start_soon(
                            store,
                            client,
                            f"Process {name} stored note {i} about the lantern and "
                            f"the {['troll', 'garlic', 'river', 'sword'][i % 4]}.",
                        )
    connection = await asyncpg.connect(url)
    try:
        kept = dict(await connection.fetch("SELECT id, content FROM memories WHERE namespace = 'shared'"))
        counts = await connection.fetchrow(RECOUNT)
    finally:
        await connection.close()
    assert len(acknowledged) == 40 and kept == acknowledged
    assert counts["memories"] == counts["live"] == 40 and counts["kept"] == counts["recounted"]
