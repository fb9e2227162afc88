"""Game sessions shared through the data directory or Postgres: two server processes behind a load
balancer (here two servers in one test, each with its own interpreters) answer for the same game."""

import anyio
import asyncpg
import pytest
from mcp import Client

from frobozz.games import GameError
from frobozz.servers.game import Settings, _shares, create_server
from tests.servers.mcp import call, error
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["files", "database"])
def shared(request, frobozz_env, monkeypatch):
    """Settings for shared sessions, in the data directory or (with a database configured) in Postgres."""
    if request.param == "database":
        settings = request.getfixturevalue("cortex_settings")
        monkeypatch.setenv("FROBOZZ_DATABASE_URL", settings.database_url.get_secret_value())
    return Settings(game_shared_sessions=True)


async def test_either_server_plays_on_where_the_other_stopped(shared):
    settings = shared
    async with Client(create_server(settings)) as one, Client(create_server(settings)) as two:
        game = await call(one, "new_game", game="zork1")
        sid = game["session_id"]
        assert (await call(two, "act", session_id=sid, command="open mailbox"))["moves"] == 1
        took = await call(one, "act", session_id=sid, command="take leaflet")  # one's copy was stale: picked up
        assert took["moves"] == 2 and "Taken" in took["text"]
        assert "leaflet" in (await call(two, "inventory", session_id=sid))["text"]
        assert (await call(two, "undo", session_id=sid))["moves"] == 1
        assert "leaflet" not in (await call(one, "inventory", session_id=sid))["text"].lower()
        history = await call(one, "history", session_id=sid)
        assert [t["command"] for t in history["turns"]] == [None, "open mailbox"]
        await call(two, "end_game", session_id=sid)
        assert "no game session" in await error(one, "look", session_id=sid)


async def test_unshared_sessions_stay_in_their_process(frobozz_env):
    async with Client(create_server(Settings())) as one, Client(create_server(Settings())) as two:
        sid = (await call(one, "new_game", game="zork1"))["session_id"]
        assert "no game session" in await error(two, "look", session_id=sid)
    assert not list((frobozz_env / "sessions").glob("*.live.json"))


async def test_a_corrupt_shared_state_is_a_clear_error(frobozz_env):
    settings = Settings(game_shared_sessions=True)
    async with Client(create_server(settings)) as one, Client(create_server(settings)) as two:
        sid = (await call(one, "new_game", game="zork1"))["session_id"]
        (settings.sessions_dir / f"{sid}.live.json").write_text("{not json")
        assert "could not be picked up" in await error(two, "look", session_id=sid)


async def twelve_waits_each_seeing_the_last(one: Client, two: Client, sid: str) -> None:
    """Twelve `wait`s at once on one shared game, through two servers in turn: each act saw the one before it (a
    wait takes 3 moves in Zork), none lost, none twice, and the history says so."""
    answers = []

    async def wait(client):
        answers.append((await call(client, "act", session_id=sid, command="wait"))["moves"])

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(wait, one if i % 2 else two)
    assert sorted(answers) == [3 * n for n in range(1, 13)]
    history = await call(two, "history", session_id=sid, last=100)
    assert [t["moves"] for t in history["turns"]] == [3 * n for n in range(0, 13)]


async def test_in_the_database_no_file_is_shared_and_concurrent_acts_from_two_servers_are_serialised(
    frobozz_env, cortex_settings, monkeypatch
):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    settings = Settings(game_shared_sessions=True)
    async with Client(create_server(settings)) as one, Client(create_server(settings)) as two:
        sid = (await call(one, "new_game", game="zork1"))["session_id"]
        await twelve_waits_each_seeing_the_last(one, two, sid)
        assert not list(settings.sessions_dir.glob("*.live.json"))
        await call(one, "end_game", session_id=sid)
        assert "no game session" in await error(two, "act", session_id=sid, command="wait")


async def test_more_concurrent_acts_on_one_session_than_the_servers_pool_has_connections_all_get_answers(
    frobozz_env, cortex_settings, monkeypatch
):
    """Each act waiting for the session's lock holds one of the pool's 8 connections: the one holding it must
    not need a ninth (before, this waited for ever)."""
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    async with Client(create_server(Settings(game_shared_sessions=True))) as one:
        sid = (await call(one, "new_game", game="zork1"))["session_id"]
        answers = []

        async def wait():
            answers.append((await call(one, "act", session_id=sid, command="wait"))["moves"])

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tg:
                for _ in range(12):
                    tg.start_soon(wait)
        assert sorted(answers) == [3 * n for n in range(1, 13)]


async def test_a_call_on_a_session_another_holds_too_long_is_a_clear_error_and_the_next_goes_on(
    frobozz_env, cortex_settings, monkeypatch
):
    """A holder that hangs (here: this test, holding the session's lock on a connection of its own) must not
    hang every call after it."""
    url = cortex_settings.database_url.get_secret_value()
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", url)
    monkeypatch.setattr(_shares, "LOCK_WAIT", 1.0)
    async with Client(create_server(Settings(game_shared_sessions=True))) as one:
        sid = (await call(one, "new_game", game="zork1"))["session_id"]
        holder = await asyncpg.connect(url)
        try:
            await holder.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", f"frobozz-game:{sid}")
            with anyio.fail_after(30):
                refused = await error(one, "act", session_id=sid, command="open mailbox")
            assert f"game session {sid} is busy" in refused and "1 s" in refused
            await holder.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"frobozz-game:{sid}")
            assert (await call(one, "act", session_id=sid, command="open mailbox"))["moves"] == 1  # nothing lost
        finally:
            await holder.close()


async def waiting(connection) -> int:
    """How many connections wait for an advisory lock."""
    return await connection.fetchval("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")


async def test_calls_waiting_on_a_session_held_elsewhere_do_not_hold_up_calls_on_other_sessions(
    frobozz_env, cortex_settings, monkeypatch
):
    """Ten acts wait for session A (held by this test); an act on B is answered meanwhile. Before, each waiter
    held one of the server's 8 connections while it waited, and B's act waited for one with them."""
    url = cortex_settings.database_url.get_secret_value()
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", url)
    async with Client(create_server(Settings(game_shared_sessions=True))) as one:
        a = (await call(one, "new_game", game="zork1"))["session_id"]
        b = (await call(one, "new_game", game="zork1"))["session_id"]
        holder = await asyncpg.connect(url)
        answers = []

        async def wait():
            answers.append((await call(one, "act", session_id=a, command="wait"))["moves"])

        try:
            await holder.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", f"frobozz-game:{a}")
            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(wait)
                with anyio.fail_after(30):
                    await eventually(lambda: waiting(holder))
                    await anyio.wait_all_tasks_blocked()  # every act on A has gone as far as it can
                    assert (await call(one, "act", session_id=b, command="open mailbox"))["moves"] == 1
                assert answers == [] and await waiting(holder) == 1  # A's acts wait, one of them in Postgres
                await holder.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", f"frobozz-game:{a}")
        finally:
            await holder.close()
        assert sorted(answers) == [3 * n for n in range(1, 11)]


async def test_a_database_that_cannot_be_reached_is_a_clear_error(frobozz_env, monkeypatch):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    async with Client(create_server(Settings(game_shared_sessions=True))) as one:
        assert "database: cannot reach the database" in await error(one, "new_game", game="zork1")


async def test_in_the_data_directory_concurrent_acts_from_two_servers_are_serialised_and_none_is_lost(frobozz_env):
    """Two servers on one data directory, as two hub processes would be (each its own share, so nothing but the
    lock file stands between them). Before, each process only took turns with itself: moves were lost."""
    settings = Settings(game_shared_sessions=True)
    async with Client(create_server(settings)) as one, Client(create_server(settings)) as two:
        sid = (await call(one, "new_game", game="zork1"))["session_id"]
        with anyio.fail_after(120):
            await twelve_waits_each_seeing_the_last(one, two, sid)


@pytest.mark.parametrize("waiter", ["the same share", "another share on the folder"])
async def test_in_the_data_directory_a_session_a_share_holds_is_busy_for_a_call_waiting_too_long(
    tmp_path, monkeypatch, waiter
):
    """The bound holds in one process (calls on a session take turns there) and across them: the lock is the
    folder's, not the share object's (another process's share, here another object with its own open file). A
    holder that hangs must not hang the next call, other sessions are not held up, and once it lets go the session
    is free again and nothing of the wait is left behind."""
    monkeypatch.setattr(_shares, "LOCK_WAIT", 1.0)
    one = _shares.FileShare(tmp_path)
    two = one if waiter == "the same share" else _shares.FileShare(tmp_path)
    held, done = anyio.Event(), anyio.Event()

    async def holder():
        async with one.lock("s-1"):
            held.set()
            await done.wait()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await held.wait()
            with pytest.raises(GameError, match="game session s-1 is busy"):
                async with two.lock("s-1"):
                    pass
            async with two.lock("s-2"):  # another session is not held up
                pass
            done.set()
        async with two.lock("s-1"):
            pass
    assert one._locks == {} and two._locks == {}
