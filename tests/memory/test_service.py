"""The service a long-running process keeps its store in: what it does when the database goes away under it."""

import os
import signal

import anyio
import psutil
import pytest
from pydantic import SecretStr

from frobozz._pgguard import postmaster_running
from frobozz.memory import MemoryService, MemorySettings, quietly
from frobozz.memory._database import stop_embedded
from tests.black_hole import BlackHole
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_the_embedded_postgres_killed_under_a_service_is_started_again_and_nothing_stored_is_lost(
    frobozz_env, caplog
):
    """A server or the plugin's daemon on the embedded Postgres: once it was killed (or stopped) under them, every
    call failed on its dead socket until the process itself was restarted. Now the next call starts it again, as
    any command would."""
    settings = MemorySettings()  # the embedded default, in this test's data folder
    service = MemoryService(settings)
    try:
        await (await service.store()).store("The lantern is in the cellar.", namespace="house")
        pid = int((settings.postgres_dir / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        with anyio.fail_after(60):
            await eventually(lambda: not psutil.pid_exists(pid))  # (reaped: pgserver takes a zombie for a server)
            # a part on the pool's dead connections is left out (the service's probe starts it again) ...
            await quietly(
                "recall", (await service.store()).search("lantern", namespace="house"), [], within=30, service=service
            )
            # ... and the next finds what was stored
            hits = await (await service.store()).search("lantern", namespace="house")
        assert [h.memory.content for h in hits] == ["The lantern is in the cellar."]
        assert postmaster_running(settings.postgres_dir)
        assert caplog.text.count("the embedded Postgres is not running (stopped or killed): starting it again") == 1
        assert service.answering
    finally:
        await service.aclose()
        stop_embedded(settings)


async def test_closing_with_a_connection_stuck_on_a_database_that_hangs_asks_a_probe_and_cuts_it_soon(
    cortex_settings, caplog
):
    """A connection still in use at the close, on a database that has stopped answering that no part had found
    out yet: the close waited out the pool's 10 s. A probe now says memory is off, and the close cuts it after
    the probe's 2 s. A close with nothing in use asks no probe."""
    with BlackHole(cortex_settings.database_url.get_secret_value()) as hole:
        settings = cortex_settings.model_copy(update={"database_url": SecretStr(hole.url)})
        quiet = MemoryService(settings)
        await (await quiet.store()).store("Nothing is in use when this closes.", namespace="house")
        await quiet.aclose()
        assert "memory is off" not in caplog.text
        service = MemoryService(settings)
        store = await service.store()
        async with anyio.create_task_group() as tg:
            hole.hang()
            tg.start_soon(store.search, "lantern")  # (it never gets its answer: cut by the close)
            with anyio.fail_after(60):
                await eventually(lambda: store.pool.get_idle_size() < store.pool.get_size())
                await service.aclose()
            tg.cancel_scope.cancel()
    assert not service.answering and "connections still in use at the close" in caplog.text
    assert "still had connections in use after 2 s: they are cut" in caplog.text
