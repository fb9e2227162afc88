"""What the store refuses before it writes, and storing while another client stores and forgets the same text
(found by the type checker: the store read a row that could be missing)."""

import pytest

from frobozz.memory import MemoryStore, MemoryStoreError

pytestmark = pytest.mark.anyio
NOTE = "The brass lantern is in the attic."

# Once the other client's copy is in, every INSERT into memories (even one that stored nothing) forgets it: as
# if that client forgot it just after this store's INSERT found it there, before this store read it back.
FORGET_AFTER_EACH_INSERT = f"""
CREATE FUNCTION forget_the_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories SET deleted_at = now() WHERE content = '{NOTE}' AND deleted_at IS NULL;
    RETURN NULL;
END $$;
CREATE TRIGGER forget_the_note AFTER INSERT ON memories FOR EACH STATEMENT EXECUTE FUNCTION forget_the_note();
"""


class OtherClientFirst:
    """Embeds as the store's own embedder does; the first time, another client stores the same text meanwhile."""

    def __init__(self, store: MemoryStore) -> None:
        self.inner, self.store = store.embedder, store
        self.model, self.dim = self.inner.model, self.inner.dim
        self.raced = False

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors = await self.inner.embed(texts)
        if self.raced:
            return vectors
        self.raced = True
        other = MemoryStore(
            self.store.pool, self.inner, default_namespace=self.store.default_namespace, max_chars=self.store.max_chars
        )
        await other.store(NOTE, namespace="chat")
        async with self.store.connection() as c:
            await c.execute(FORGET_AFTER_EACH_INSERT)
        return vectors


async def test_a_memory_stored_and_forgotten_by_another_client_meanwhile_is_a_clear_error(memory_service):
    store = await memory_service.store()
    store.embedder = OtherClientFirst(store)
    with pytest.raises(MemoryStoreError, match="stored and forgotten meanwhile; try again"):
        await store.store(NOTE, namespace="chat")
    assert await store.search("brass lantern", namespace="chat") == []  # nothing current was left behind


@pytest.mark.parametrize(
    "content, metadata, says",
    [
        ("ok", [1, 2], "metadata must be a JSON object"),
        ("ok", "a text", "metadata must be a JSON object"),
        ("ok", {"a": float("nan")}, "finite numbers only"),
        ("ok", {"a": float("-inf")}, "finite numbers only"),
        ("ok", {"a": "\udc80"}, "the metadata's JSON is not valid text: character 8 is a lone surrogate"),
        ("an unpaired \ud800 escape", None, "the memory is not valid text: character 13 is a lone surrogate"),
    ],
    ids=["a list", "a text", "NaN", "-Infinity", "a lone surrogate in the metadata", "a lone surrogate"],
)
async def test_what_postgres_cannot_hold_or_no_filter_would_match_is_refused_and_nothing_is_written(
    memory_service, content, metadata, says
):
    """A list or a text as metadata was stored, and then never listed (recent filters with `@>` an object)."""
    store = await memory_service.store()
    with pytest.raises(MemoryStoreError, match=says):
        await store.store(content, metadata, "chat")
    assert await store.recent(10, "chat") == []


async def test_metadata_over_64_kb_of_utf8_or_inside_itself_is_refused_with_what_is_wrong(memory_service):
    store = await memory_service.store()
    with pytest.raises(MemoryStoreError, match="at most 64 kB"):
        await store.store("ok", {"accents": "é" * 40_000}, "chat")  # 40,000 characters, 80,000 bytes
    looped: dict = {}
    looped["self"] = looped
    with pytest.raises(MemoryStoreError, match="metadata must be JSON: Circular reference"):
        await store.store("ok", looped, "chat")
    assert await store.recent(10, "chat") == []


async def test_metadata_kept_before_it_had_to_be_an_object_goes_on_as_it_is_kept_when_superseded_or_updated(
    memory_service,
):
    """Copied in the database, not through Python (where 1e400 would come back as Infinity, which jsonb refuses)."""
    store = await memory_service.store()
    old, _ = await store.store("The lamp is in the attic.", None, "chat")
    other, _ = await store.store("The sword is in the hall.", None, "chat")
    async with store.connection() as c:  # as an older Frobozz, or another client, kept them
        await c.execute("UPDATE memories SET metadata = '[1, 2]'::jsonb WHERE id = $1", old.id)
        await c.execute("""UPDATE memories SET metadata = '{"far": 1e400}'::jsonb WHERE id = $1""", other.id)
    new = await store.supersede(old.id, "The lamp is in the cellar.")
    assert new.metadata == [1, 2] and [m.content for m in await store.history(new.id)] == [
        "The lamp is in the attic.",
        "The lamp is in the cellar.",
    ]
    moved = await store.update(other.id, "The sword is in the cellar.", None)
    touched = await store.update(moved.id, None, None)
    async with store.connection() as c:
        kept = await c.fetchval("SELECT metadata::text FROM memories WHERE id = $1", touched.id)
    assert kept == '{"far": 1' + "0" * 400 + "}"


async def test_a_database_that_refuses_new_connections_is_a_database_error_and_a_statements_own_error_is_its_own(
    memory_service, cortex_settings, postgres
):
    """A database not accepting connections (taken down for upkeep, dropped) raised asyncpg's own error out of
    `connection()`: memory's callers, which leave memory out on a DatabaseError, let it end a chat."""
    import asyncpg

    from frobozz.memory import DatabaseError
    from tests.database import database_name, refusing_connections

    shared = await memory_service.store()
    async with shared.connection() as c:  # a statement's error is the statement's, not the database's going
        with pytest.raises(asyncpg.DivisionByZeroError):
            await c.fetchval("SELECT 1 / 0")
    pool = await asyncpg.create_pool(cortex_settings.database_url.get_secret_value(), min_size=0, max_size=1)
    store = MemoryStore(pool, shared.embedder, default_namespace="chat", max_chars=shared.max_chars)
    try:
        with refusing_connections(postgres, database_name(cortex_settings)):  # the pool's first connection: refused
            with pytest.raises(DatabaseError, match=r"refuses a new connection .*not currently accepting") as refused:
                await store.recent(5, "chat")
        assert isinstance(refused.value.__cause__, asyncpg.ObjectNotInPrerequisiteStateError)
        assert await store.recent(5, "chat") == []  # back, and as it was
    finally:
        await pool.close()
