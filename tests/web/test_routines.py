"""The routines page over real loopback HTTP on the test's database: nothing first, then routines of each kind
with their trigger, next firing and last firings (their outcome, their run linked), hostile text kept as text,
and a database that cannot be reached."""

from datetime import UTC, datetime, timedelta

import anyio
import httpx

from frobozz._loopback import LoopbackServer
from frobozz.routines import RoutineStore, routine
from frobozz.servers._auth import BearerToken
from frobozz.web import WebSettings, create_app
from tests.web.conftest import TOKEN


def test_with_no_routine_the_page_says_how_to_add_one(client):
    page = client.get("/routines")
    assert page.status_code == 200
    assert "No routines yet" in page.text and "frobozz routine add" in page.text and "frobozz worker" in page.text
    assert '/routines">Routines</a>' in client.get("/").text  # in the menu of every page


def test_routines_show_their_trigger_next_firing_and_last_firings_with_their_outcome(client, web_settings):
    soon = datetime.now(UTC) + timedelta(days=1)

    async def add() -> None:
        store = await RoutineStore.open(web_settings)
        try:
            await store.add(
                routine(
                    name="brief",
                    kind="cron",
                    cron="30 7 * * *",
                    tz="Europe/Lisbon",
                    prompt="Write the morning briefing.",
                )
            )
            await store.add(routine(name="tick", kind="every", every=60, prompt="Tick."))
            await store.set_paused("tick", True)
            await store.add(
                routine(
                    name="mail",
                    kind="inbox",
                    url="imaps://me@mail.example.org/INBOX",
                    poll=120,
                    prompt="Triage this mail.",
                )
            )
            await store.claim("brief", "run:1", "run by hand")
            await store.start("brief", "run:1", "20261124-073000-abcdef")
            await store.finish("brief", "run:1", "done", "finished", cost_usd=0.0123)
            await store.claim(
                "mail",
                "7:1",
                "<script>alert(1)</script>",
                state="skipped",
                reason="the mail is 20 MB, over the 10 MB limit",
            )
            await store.claim("mail", "7:2", "Lunch?")
            await store.finish("mail", "7:2", "failed", "max turns: the firing used its --max-turns and was stopped")
        finally:
            await store.aclose()

    anyio.run(add)
    page = client.get("/routines").text
    brief = page.split('id="routine-brief"')[1].split("</section>")[0]
    assert "cron 30 7 * * * (Europe/Lisbon)" in brief and ">active<" in brief
    assert f"{soon:%Y}-" in brief.split('class="next">')[1]  # a time to come, not "due now"
    assert "1 done" in brief and ">finished<" in brief and "$0.0123" in brief
    assert '/runs/20261124-073000-abcdef">' in brief
    tick = page.split('id="routine-tick"')[1].split("</section>")[0]
    assert "every 60 s" in tick and ">paused<" in tick and "none while paused" in tick and "none yet" in tick
    mail = page.split('id="routine-mail"')[1].split("</section>")[0]
    assert "on new mail (looks at least every 120 s)" in mail
    assert "20 MB" in mail and "max turns" in mail and "1 failed, 1 skipped" in mail
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in mail
    assert page.index('id="routine-brief"') < page.index('id="routine-mail"') < page.index('id="routine-tick"')


def test_with_the_database_unreachable_the_page_says_why(frobozz_env):
    settings = WebSettings(database_url="postgresql://nobody@127.0.0.1:1/nothing", web_poll_seconds=0.1)
    with LoopbackServer(BearerToken(create_app(settings), TOKEN), lifespan="on") as server:
        page = httpx.get(f"{server.url}/routines", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    assert page.status_code == 200
    assert "not reachable" in page.text and "without their database" in page.text
