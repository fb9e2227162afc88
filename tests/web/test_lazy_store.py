"""The web view's lazily opened store: a store that fails under several pages at once is closed once; only a
database that is away counts as gone, not one query it refuses."""

import anyio
import anyio.lowlevel
import asyncpg
import pytest
from asyncpg.exceptions import _base as asyncpg_client

import frobozz.web._lazy_store
from frobozz.web._lazy_store import LazyStore

pytestmark = pytest.mark.anyio


class _Store:
    def __init__(self) -> None:
        self.closes = 0

    async def aclose(self) -> None:
        self.closes += 1
        await anyio.lowlevel.checkpoint()  # a real pool's close awaits: a second close could start meanwhile


@pytest.fixture
def opened() -> list[_Store]:
    """The stores `lazy` has opened, in order."""
    return []


@pytest.fixture
def lazy(opened: list[_Store]) -> LazyStore:
    async def open_store() -> _Store:
        opened.append(_Store())
        return opened[-1]

    return LazyStore(open_store, what="the database", without="shown without it")


async def test_with_no_page_shown_nothing_is_opened_and_closing_does_nothing(lazy, opened):
    await lazy.aclose()
    assert opened == [] and lazy.database_error is None


async def test_a_store_that_goes_away_under_two_pages_at_once_is_closed_once_and_reopened_later(
    lazy, opened, monkeypatch
):
    both_in = anyio.Event()
    entered = 0

    async def fails(store: _Store) -> str:
        nonlocal entered
        entered += 1
        if entered == 2:
            both_in.set()
        await both_in.wait()
        raise ConnectionResetError("the server closed the connection")

    results: list[str | None] = []

    async def page() -> None:
        results.append(await lazy.use(fails))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(page)
            tg.start_soon(page)
    assert results == [None, None] and len(opened) == 1
    assert opened[0].closes == 1  # the page that took it out closes it; the other leaves it be
    assert lazy.database_error is not None and "went away" in lazy.database_error

    async def works(store: _Store) -> str:
        return "a page"

    monkeypatch.setattr(frobozz.web._lazy_store, "RETRY_SECONDS", 0.0)  # the next look tries again
    assert await lazy.use(works) == "a page" and len(opened) == 2
    await lazy.aclose()
    assert [store.closes for store in opened] == [1, 1]


async def test_a_store_closed_at_shutdown_while_a_page_fails_on_it_is_closed_once(lazy, opened):
    closing, release = anyio.Event(), anyio.Event()

    async def close_slowly() -> None:
        store.closes += 1
        if store.closes == 1:  # the shutdown's close takes its time; a second one would not
            closing.set()
            await release.wait()

    in_work, fail_now, page_done = anyio.Event(), anyio.Event(), anyio.Event()

    async def fails(_: _Store) -> str:
        in_work.set()
        await fail_now.wait()
        raise ConnectionResetError("the server closed the connection")

    async def page() -> None:
        assert await lazy.use(fails) is None
        page_done.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(page)
            await in_work.wait()
            (store,) = opened
            store.aclose = close_slowly
            tg.start_soon(lazy.aclose)  # the service shuts down with the page still on the store
            await closing.wait()
            fail_now.set()  # the page fails while the close is under way
            await page_done.wait()
            release.set()
    assert store.closes == 1


@pytest.mark.parametrize(
    "refusal",
    [
        asyncpg.CharacterNotInRepertoireError('invalid byte sequence for encoding "UTF8": 0x00'),
        asyncpg.UndefinedColumnError('column "nothing" does not exist'),
        asyncpg.UniqueViolationError("duplicate key value violates unique constraint"),
        # asyncpg's client-side InterfaceErrors for what was sent, not for a connection
        asyncpg_client.DataError("invalid input for query argument $2: 99999999999 (value out of int32 range)"),
        asyncpg.ClientConfigurationError("invalid connection parameter"),
        asyncpg.QueryCanceledError("canceling statement due to statement timeout"),
        asyncpg.OutOfMemoryError("out of memory"),
    ],
    ids=type,
)
async def test_a_query_the_database_refuses_fails_alone_and_the_store_stays_open(lazy, opened, refusal):
    async def refused(_: _Store) -> str:
        raise refusal

    async def works(_: _Store) -> str:
        return "a page"

    with pytest.raises(type(refusal)):
        await lazy.use(refused)
    assert lazy.database_error is None and opened[0].closes == 0
    assert await lazy.use(works) == "a page" and len(opened) == 1


@pytest.mark.parametrize(
    "away",
    [
        ConnectionRefusedError("connection refused"),
        TimeoutError(),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.CannotConnectNowError("the database system is shutting down"),
        asyncpg.InterfaceError("pool is closed"),
        asyncpg.ObjectNotInPrerequisiteStateError('database "t" is not currently accepting connections'),
        asyncpg.InvalidPasswordError('password authentication failed for user "frobozz"'),
        asyncpg.TooManyConnectionsError("sorry, too many clients already"),
    ],
    ids=type,
)
async def test_a_database_that_is_away_counts_as_gone_until_the_retry(lazy, opened, away):
    async def fails(_: _Store) -> str:
        raise away

    assert await lazy.use(fails) is None
    assert opened[0].closes == 1 and lazy.database_error is not None and "went away" in lazy.database_error


async def _refusal(database_url: str, query: str, *args: object) -> BaseException:
    """What the test database raises for `query`: a real error, from a real connection."""
    connection = await asyncpg.connect(database_url)
    try:
        await (connection.fetch(query, *args) if args else connection.execute(query))
    except Exception as e:  # noqa: BLE001 - the error is what the test wants
        return e
    finally:
        await connection.close()
    raise AssertionError(f"{query} was not refused")


@pytest.mark.parametrize(
    ("query", "error"),
    [
        pytest.param(("SELECT $1::int4", 2**40), asyncpg.DataError, id="an int4 argument out of range"),
        pytest.param(("SELECT $1::int4", "one"), asyncpg.DataError, id="a text for an int4 argument"),
        pytest.param(
            ("SET statement_timeout = 50; SELECT pg_sleep(5)",), asyncpg.QueryCanceledError, id="a statement timeout"
        ),
    ],
)
async def test_a_query_refused_for_its_own_arguments_or_time_fails_alone_and_the_store_stays_open(
    lazy, opened, cortex_settings, query, error
):
    """An argument asyncpg cannot encode (a turn number past int4's, from a URL), and a statement timeout, which
    is in class 57 with the server's shutdown (it took the store out for every page)."""
    refusal = await _refusal(cortex_settings.database_url.get_secret_value(), *query)
    assert type(refusal) is error, repr(refusal)

    async def refused(_: _Store) -> str:
        raise refusal

    with pytest.raises(type(refusal)):
        await lazy.use(refused)
    assert lazy.database_error is None and opened[0].closes == 0
