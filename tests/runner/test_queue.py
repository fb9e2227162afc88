"""The run queue in-process: the runs' tables on nothing, and a worker whose database goes away mid-run
(real Postgres, the real claude CLI with the walkthrough player)."""

import json

import anyio
import asyncpg
import pytest

from frobozz.runner import RunConfig, RunLedger, RunNotFoundError, Worker, enqueue

pytestmark = pytest.mark.anyio


@pytest.fixture
async def ledger(cortex_settings, monkeypatch):
    monkeypatch.setenv("FROBOZZ_DATABASE_URL", cortex_settings.database_url.get_secret_value())
    opened = await RunLedger.open(cortex_settings, size=8)
    try:
        yield opened
    finally:
        await opened.aclose()


async def test_the_runs_tables_on_nothing_have_no_runs_no_turns_and_no_leaderboard(ledger):
    assert await ledger.runs() == [] and await ledger.runs(game="zork1", model="x", status="finished") == []
    assert await ledger.leaderboard() == [] and await ledger.leaderboard(game="zork1") == []
    assert await ledger.turns("20261122-013000-a1b2c3") == []
    with pytest.raises(RunNotFoundError, match="no run"):
        await ledger.get("20261122-013000-a1b2c3")


async def test_a_run_whose_database_goes_away_stops_where_it_was_and_is_played_to_its_end_once_it_is_back(
        ledger, runner_settings, postgres, cortex_settings, monkeypatch):
    monkeypatch.setenv("FROBOZZ_WORKER_HEARTBEAT", "2")
    settings = type(runner_settings)()
    name = cortex_settings.database_url.get_secret_value().partition("?")[0].rsplit("/", 1)[1]
    (run_id,) = await enqueue(ledger, RunConfig(game="zork1", player="walkthrough", max_turns=60), settings, 1)
    worker = Worker(ledger, settings)
    admin = await asyncpg.connect(postgres.get_uri())
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            with anyio.fail_after(120):
                while (await ledger.get(run_id))["turns"] < 10:
                    await anyio.sleep(0.05)
            await admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
            await admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
            local = settings.runs_dir / run_id / "run.json"
            with anyio.fail_after(60):
                while "database went away" not in (json.loads(local.read_text()).get("reason") or ""):
                    await anyio.sleep(0.05)
            kept = len((settings.runs_dir / run_id / "turns.jsonl").read_text().splitlines())
            await admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
            with anyio.fail_after(180):
                while (await ledger.get(run_id))["status"] != "finished":
                    await anyio.sleep(0.1)
            worker.stop()
    finally:
        await admin.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
        await admin.close()
    assert kept >= 10 and worker.played == [run_id]
    assert [t.turn for t in await ledger.turns(run_id)] == list(range(1, 61))  # none lost, none twice
    assert (await ledger.get(run_id))["reason"] == "max turns"

