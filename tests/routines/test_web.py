"""A firing's run in `frobozz runs` and the web view, as any run known only to the database is."""

import httpx
import pytest

from frobozz._loopback import LoopbackServer
from frobozz.routines import routine
from frobozz.routines._fire import run_info
from frobozz.runner import TurnRecord
from frobozz.servers._auth import BearerToken
from frobozz.web import WebSettings, create_app

pytestmark = pytest.mark.anyio


async def test_a_firing_s_run_is_listed_and_shown_in_the_web_view(ledger, cortex_settings):
    spec = routine(name="brief", kind="cron", cron="@daily", prompt="Brief me.")
    info = run_info(spec, "20261124-073000-abcdef", "due 2026-11-24T07:30:00+00:00")
    await ledger.add(info, queued=False)
    info.status, info.reason, info.turns, info.cost_usd = "finished", "finished", 1, 0.0123
    await ledger.record(
        info,
        TurnRecord(
            turn=1,
            command=info.title,
            text="Three things today.",
            score=None,
            moves=None,
            location=None,
            done=True,
            won=False,
            reply="Three things today.",
        ),
        None,
    )
    (row,) = await ledger.runs(game="routine:brief")
    assert (row["mode"], row["status"], row["turns"]) == ("routine", "finished", 1)
    settings = WebSettings(database_url=cortex_settings.database_url, web_poll_seconds=0.1)
    with LoopbackServer(BearerToken(create_app(settings), "t" * 32), lifespan="on") as server:
        async with httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {'t' * 32}"}, timeout=60
        ) as client:
            listing = (await client.get("/")).text
            page = await client.get("/runs/20261124-073000-abcdef")
    assert "20261124-073000-abcdef" in listing and "routine:brief" in listing
    assert page.status_code == 200 and "Three things today." in page.text
