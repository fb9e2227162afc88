"""The sessions one server holds: when it is full, a new game (or a shared session picked up again) makes room
by closing the least recently used shared session no call is using; that one is picked up from its share at
its next call, as after a restart."""

import anyio
import pytest

from frobozz.servers.game import Settings
from frobozz.servers.game._sessions import SessionLimitError, Sessions

pytestmark = pytest.mark.anyio


@pytest.fixture
async def shared(frobozz_env):
    sessions = Sessions(Settings(game_shared_sessions=True, max_sessions=2))
    try:
        yield sessions
    finally:
        await sessions.aclose()


async def act(sessions: Sessions, session_id: str, command: str):
    async with sessions.hold(session_id) as session:
        turn = await session.act(command)
        await sessions.changed(session)
        return turn


async def test_when_full_a_new_game_closes_the_least_recently_used_idle_session(shared):
    a = (await shared.open("zork1")).id
    b = (await shared.open("zork1")).id
    await act(shared, a, "open mailbox")  # a used last: b is the least recently used
    c = (await shared.open("zork1")).id
    assert b not in shared._sessions and set(shared._sessions) == {a, c}


async def test_a_closed_shared_session_goes_on_at_its_next_call_where_it_was(shared):
    a = (await shared.open("zork1")).id
    assert (await act(shared, a, "open mailbox")).moves == 1
    b = (await shared.open("zork1")).id
    await shared.open("zork1")  # closes a
    assert a not in shared._sessions
    took = await act(shared, a, "take leaflet")  # picked up again (closing b, now the least recently used)
    assert took.moves == 2 and "Taken" in took.text
    assert b not in shared._sessions and len(shared._sessions) == 2
    async with shared.hold(a) as session:
        assert [t.command for t in session.history(10)] == [None, "open mailbox", "take leaflet"]


async def test_a_session_in_a_call_is_never_closed_to_make_room(shared):
    a = (await shared.open("zork1")).id
    b = (await shared.open("zork1")).id
    holding, done = anyio.Event(), anyio.Event()

    async def call_on_a():
        async with shared.hold(a) as session:
            holding.set()
            await done.wait()
            await session.act("open mailbox")
            await shared.changed(session)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(call_on_a)
            await holding.wait()
            await act(shared, b, "wait")  # b used last: a, in its call, is the least recently used
            c = (await shared.open("zork1")).id
            assert set(shared._sessions) == {a, c}
            done.set()
    assert (await act(shared, a, "take leaflet")).moves == 2


async def test_when_every_session_is_in_a_call_a_new_game_is_refused_as_busy_and_nothing_is_closed(shared):
    a = (await shared.open("zork1")).id
    b = (await shared.open("zork1")).id
    holding, done = [anyio.Event(), anyio.Event()], anyio.Event()

    async def call_on(sid, held):
        async with shared.hold(sid):
            held.set()
            await done.wait()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            for sid, held in zip((a, b), holding, strict=True):
                tg.start_soon(call_on, sid, held)
            for held in holding:
                await held.wait()
            with pytest.raises(SessionLimitError, match="2 games are open here and every one is in a call"):
                await shared.open("zork1")
            done.set()
    assert set(shared._sessions) == {a, b}
    await shared.open("zork1")  # once a call has ended, its session makes room


async def test_sessions_that_are_not_shared_are_never_closed_and_a_full_server_says_so(frobozz_env):
    sessions = Sessions(Settings(max_sessions=1))
    try:
        a = (await sessions.open("zork1")).id
        with pytest.raises(SessionLimitError, match=r"1 games are open here.*end one of yours with end_game"):
            await sessions.open("zork1")
        assert set(sessions._sessions) == {a}
    finally:
        await sessions.aclose()
