"""Routines as `frobozz worker` processes fire them: one database, the real claude CLI answered by the
scripted model in this process, a real IMAP server. A worker killed with -9 mid-firing; two workers on
one schedule."""

import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta
from itertools import pairwise

import anyio
import pytest

from frobozz.engine.testing import Reply, ScriptedModel, Text
from frobozz.routines import routine
from tests.orphans import descendants, still_running
from tests.waiting import eventually

pytestmark = pytest.mark.anyio
SIDE = ("Write up to", "Here is the last exchange", "Summarise this conversation")


def message(request):
    """The firing's own words: the last text block (memory's orientation and recall come before it)."""
    texts = [b.get("text", "") for b in request.last_user_blocks() if b.get("type") == "text"]
    return texts[-1] if texts else ""


def firing_texts(model, prompt, also=""):
    """What the firings' primaries were sent (a message begins with its routine's prompt; the sidecars'
    questions, which quote it, begin with their own)."""
    return [message(r) for r in model.requests if message(r).startswith(prompt) and also in message(r)]


@pytest.fixture
def worker_env(routine_settings, tmp_path, cortex_settings):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(
        FROBOZZ_DATABASE_URL=cortex_settings.database_url.get_secret_value(),
        FROBOZZ_WORKER_HEARTBEAT="2",
        CLAUDE_CODE_MAX_RETRIES="0",
        FROBOZZ_ROUTINE_TICK="0.5",
    )
    return env


def start_worker(env):
    return subprocess.Popen(
        [sys.executable, "-m", "frobozz", "worker"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )


def stop(worker):
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=120)
    assert worker.returncode == 0, err.decode()[-3000:]
    return err.decode()


def mail(subject):
    return (
        f"From: ana@example.org\r\nTo: robin@example.org\r\nSubject: {subject}\r\n\r\nAbout {subject}.\r\n"
    ).encode()


async def wait_for(check, timeout=300):  # noqa: ASYNC109 - every wait of the tests has a limit
    found = []

    async def ready() -> object:
        found[:] = [await check()]
        return found[0]

    with anyio.fail_after(timeout):
        await eventually(ready, interval=0.2)
    return found[0]


async def test_three_mails_fire_three_sessions_in_order_and_a_worker_killed_mid_mail_loses_and_repeats_nothing(
    store, ledger, imap_server, worker_env
):
    user, password = imap_server.add_user()
    killed = anyio.Event()

    def answer(request):
        if request.last_user_text().startswith(SIDE):
            return "NONE"
        if "subject: beta" in message(request) and not killed.is_set():
            return Reply((Text("thinking about beta"),), delay=600)  # the worker dies during this turn
        return "Filed."

    await store.add(routine(name="mail", kind="inbox", url=imap_server.url(user), poll=1, prompt="Triage this mail."))
    await anyio.to_thread.run_sync(imap_server.append, user, password, mail("alpha"), mail("beta"), mail("gamma"))
    async with ScriptedModel(answer) as model:
        env = {**worker_env, **model.env(), "FROBOZZ_IMAP_PASSWORD": password}
        first = start_worker(env)
        try:
            await wait_for(lambda: anyio.to_thread.run_sync(firing_texts, model, "Triage this mail.", "subject: beta"))
            children = descendants(first.pid)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            killed.set()
            assert still_running(children, within=30) == []  # its claudes died with it
            assert (await store.firing("mail", (await store.firings("mail"))[0]["key"]))["state"] == "running"
            second = start_worker(env)
            try:

                async def three_done():
                    rows = await store.firings("mail")
                    return len(rows) == 3 and all(r["state"] == "done" for r in rows) and rows

                rows = await wait_for(three_done, timeout=400)
                assert await store.open_firings("mail") == 0
            finally:
                stop(second)
        finally:
            if first.poll() is None:
                first.kill()
        asked = [
            next(s for s in ("alpha", "beta", "gamma") if f"subject: {s}" in t)
            for t in firing_texts(model, "Triage this mail.")
        ]
    assert asked == ["alpha", "beta", "beta", "gamma"]  # in order; the killed turn again, nothing else twice
    by_title = {r["title"]: r for r in rows}
    assert [by_title[s]["attempts"] for s in ("alpha", "beta", "gamma")] == [1, 2, 1]
    runs = await ledger.runs(game="routine:mail")
    assert sorted(r["run_id"] for r in runs) == sorted(r["run_id"] for r in rows)  # the retry kept its run
    assert all(r["status"] == "finished" for r in runs)


async def test_two_workers_fire_every_due_time_of_a_two_second_routine_once_and_name_the_skipped_ones(
    store, ledger, worker_env
):
    def answer(request):
        return "NONE" if request.last_user_text().startswith(SIDE) else "Tick noted."

    async with ScriptedModel(answer) as model:
        env = {**worker_env, **model.env()}
        workers = [start_worker(env), start_worker(env)]
        try:
            await store.add(routine(name="tick", kind="every", every=2, prompt="The clock ticked."))
            started = datetime.now().astimezone()
            await anyio.sleep(14)  # the window watched: seven due times (a span to watch, not a wait for something)
            await store.set_paused("tick", True)
            await wait_for(lambda: _none_open(store), timeout=400)
        finally:
            errors = [stop(w) for w in workers]
        primaries = firing_texts(model, "The clock ticked.")
    rows = sorted(await store.firings("tick", limit=1000), key=lambda r: r["due"])
    dues = [r["due"] for r in rows]
    assert len(dues) >= 5 and dues[0] <= started + timedelta(seconds=5)
    assert all(b - a == timedelta(seconds=2) for a, b in pairwise(dues))  # none lost, none twice
    done = [r for r in rows if r["state"] == "done"]
    skipped = [r for r in rows if r["state"] == "skipped"]
    assert done and len(done) + len(skipped) == len(rows), [(r["state"], r["reason"]) for r in rows]
    assert all(r["reason"].startswith(("overlap", "the routine was paused", "missed")) for r in skipped)
    assert all(r["attempts"] == 1 for r in done)
    assert len(primaries) == len(done)  # each fired once: one model turn each
    runs = await ledger.runs(game="routine:tick", limit=1000)
    assert len(runs) == len(done) and all(r["status"] == "finished" for r in runs)
    assert sum("firing" in e for e in errors) == 2


async def _none_open(store):
    return await store.open_firings("tick") == 0


async def test_a_worker_on_a_machine_with_no_game_fires_routines_and_refuses_only_game_work_saying_why(
    store, ledger, worker_env, tmp_path
):
    from frobozz.routines import enqueue
    from frobozz.runner import RunConfig, RunnerSettings
    from frobozz.runner import enqueue as queue_run

    def answer(request):
        return "NONE" if request.last_user_text().startswith(SIDE) else "Briefed."

    (tmp_path / "no-games").mkdir()
    await store.add(routine(name="brief", kind="cron", cron="@yearly", prompt="Write the briefing."))
    await store.add(routine(name="solitude", kind="cron", cron="@yearly", game="zork1", prompt="Play a little."))
    (queued,) = await queue_run(ledger, RunConfig(game="zork1", player="claude"), RunnerSettings(), 1)
    async with ScriptedModel(answer) as model:
        env = {
            **worker_env,
            **model.env(),
            "FROBOZZ_GAMES_DIR": str(tmp_path / "no-games"),
            "FROBOZZ_DATA_DIR": str(tmp_path / "bare"),
        }
        worker = start_worker(env)
        try:
            for name in ("brief", "solitude"):
                assert await enqueue(store, ledger, name, "run:1", "by hand")

            async def both_ended():
                rows = [await store.firing(n, "run:1") for n in ("brief", "solitude")]
                return all(r["state"] not in ("queued", "running") for r in rows) and rows

            brief, solitude = await wait_for(both_ended)
            assert worker.poll() is None  # alive
        finally:
            said = stop(worker)
    assert brief["state"] == "done", brief
    assert solitude["state"] == "failed" and "cannot play zork1" in solitude["reason"], solitude
    assert "no game" in solitude["reason"]
    assert (await ledger.get(queued))["status"] == "queued"  # left to a worker that has zork1
    assert "no games" in said and "firing routines" in said
    assert firing_texts(model, "Write the briefing.")


async def test_a_game_firing_whose_worker_is_killed_goes_on_with_its_run_after_restart_as_a_queued_run_does(
    store, ledger, worker_env
):
    from frobozz.routines import enqueue

    killed = anyio.Event()
    primaries = []

    def answer(request):
        text = request.last_user_text()
        if text.startswith((*SIDE, "Write up to", "Here is the last exchange")):
            return "NONE"
        primaries.append(text)
        if len(primaries) > 1 and not killed.is_set():
            return Reply((Text("<command>look</command>"),), delay=600)  # the worker dies during the 2nd turn
        return "<command>look</command>"

    await store.add(
        routine(
            name="solitude",
            kind="cron",
            cron="@yearly",
            game="zork1",
            max_turns=3,
            prompt="A quiet hour: play a little Zork.",
        )
    )
    async with ScriptedModel(answer) as model:
        env = {**worker_env, **model.env()}
        first = start_worker(env)
        try:
            assert await enqueue(store, ledger, "solitude", "run:1", "by hand")

            async def one_turn_in():
                firing = await store.firing("solitude", "run:1")
                runs = await ledger.runs(game="zork1")
                return firing["run_id"] and runs and runs[0]["turns"] >= 1 and len(primaries) > 1 and runs

            (killed_run,) = await wait_for(one_turn_in)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            killed.set()
            assert (await ledger.get(killed_run["run_id"]))["status"] == "running"
            second = start_worker(env)
            try:

                async def ended():
                    firing = await store.firing("solitude", "run:1")
                    return firing["state"] not in ("queued", "running") and firing

                firing = await wait_for(ended, timeout=400)
            finally:
                stop(second)
        finally:
            if first.poll() is None:
                first.kill()
    runs = await ledger.runs(game="zork1")
    assert [r["run_id"] for r in runs] == [killed_run["run_id"]] == [firing["run_id"]]  # no second run
    assert (runs[0]["status"], runs[0]["turns"]) == ("finished", 3), runs[0]
    assert firing["state"] == "done" and firing["attempts"] == 2, firing


async def test_a_killed_worker_s_firing_that_a_later_due_time_s_firing_took_the_routine_from_ends_failed_with_its_run(
    store, ledger, worker_env
):
    """Taken up again after its worker was killed, while the routine's next due time was firing, the firing was
    skipped as an overlap, and its run stayed 'running' for ever."""
    import json
    import threading

    from frobozz.engine.producers import Schedule
    from frobozz.routines import enqueue

    prompt = "Note the hour."
    primaries, later_asked, later_go = [], threading.Event(), threading.Event()

    def answer(request):
        if request.last_user_text().startswith(SIDE) or not message(request).startswith(prompt):
            return "NONE"
        primaries.append(message(request))
        if len(primaries) == 1:
            return Reply((Text("noting the hour"),), delay=600)  # the worker dies during this turn
        later_asked.set()
        later_go.wait(300)  # the later firing holds the routine while the killed one is taken up again
        return "Noted."

    await store.add(routine(name="hours", kind="cron", cron="@yearly", prompt=prompt))
    now = datetime.now().astimezone()
    killed_due, later_due = now - timedelta(minutes=2), now - timedelta(minutes=1)  # two due times, keyed as such
    killed_key, later_key = Schedule.key(killed_due), Schedule.key(later_due)
    async with ScriptedModel(answer) as model:
        env = {**worker_env, **model.env()}
        first = start_worker(env)
        try:
            assert await enqueue(store, ledger, "hours", killed_key, f"due {killed_key}", due=killed_due)
            killed = await wait_for(lambda: _in_turn(store, "hours", killed_key, primaries))
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(timeout=30)
            assert (await ledger.get(killed["run_id"]))["status"] == "running"
            assert await enqueue(store, ledger, "hours", later_key, f"due {later_key}", due=later_due)
            # the dead worker's job is given up on 25 s after its last heartbeat: the later due time fires first
            # (the second worker has that long to start and take it, on a machine busy with other tests)
            second = start_worker({**env, "FROBOZZ_WORKER_HEARTBEAT": "25"})
            try:
                killed = await wait_for(lambda: _ended(store, "hours", killed_key), timeout=400)
                assert later_asked.is_set()  # (the later firing held the routine then)
                later_go.set()
                later = await wait_for(lambda: _ended(store, "hours", later_key), timeout=400)
            finally:
                later_go.set()
                said = stop(second)
        finally:
            if first.poll() is None:
                first.kill()
        shown = await anyio.run_process(
            [sys.executable, "-m", "frobozz", "routine", "show", "hours", "--json"], env={**env, "COLUMNS": "500"}
        )
    abandoned = (
        "abandoned: its worker died mid-firing, and a later firing took the routine before it was taken up again"
    )
    run = await ledger.get(killed["run_id"])
    assert (run["status"], run["reason"]) == ("failed", abandoned) and run["ended_at"], run
    assert (killed["state"], killed["reason"], killed["attempts"]) == ("failed", abandoned, 1), killed
    assert (later["state"], later["attempts"]) == ("done", 1), later
    assert (await ledger.get(later["run_id"]))["status"] == "finished"
    assert len(primaries) == 2  # the killed firing was not fired again
    listed = {f["key"]: f["state"] for f in json.loads(shown.stdout)["firings_list"]}
    assert listed == {killed_key: "failed", later_key: "done"}  # `routine show`: none running
    assert "abandoned" in said  # (its worker's log says so too)


async def _in_turn(store, name, key, primaries):
    firing = await store.firing(name, key)
    return firing and firing["state"] == "running" and firing["run_id"] and primaries and firing


async def _ended(store, name, key):
    firing = await store.firing(name, key)
    return firing and firing["state"] not in ("queued", "running") and firing


async def test_a_routine_run_by_hand_killed_mid_firing_is_ended_abandoned_with_its_run_by_a_worker_s_look(
    store, ledger, worker_env
):
    """`frobozz routine run NAME` killed with -9 stayed `running` for ever: in `routine show`, in `routine list`'s
    counts, in `frobozz runs --status running` with no end, however long a worker ran. Not seen alive for the
    heartbeat (as the queue gives up a dead worker's job), it ends failed, abandoned, and its run with it."""
    import json

    from frobozz.routines import BY_HAND

    prompt = "Tidy the notes."
    primaries = []

    def answer(request):
        if request.last_user_text().startswith(SIDE) or not message(request).startswith(prompt):
            return "NONE"
        primaries.append(message(request))
        return Reply((Text("tidying"),), delay=600)  # the `routine run` dies during this turn

    async def by_hand():
        found = [f for f in await store.firings("notes") if f["key"].startswith(BY_HAND)]
        return found and found[0]["state"] == "running" and found[0]["run_id"] and primaries and found[0]

    async def frobozz(*args):
        done = await anyio.run_process([sys.executable, "-m", "frobozz", *args], env={**env, "COLUMNS": "500"})
        return json.loads(done.stdout)

    await store.add(routine(name="notes", kind="cron", cron="@yearly", prompt=prompt))
    async with ScriptedModel(answer) as model:
        env = {**worker_env, **model.env()}
        hand = subprocess.Popen(
            [sys.executable, "-m", "frobozz", "routine", "run", "notes"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        try:
            firing = await wait_for(by_hand)
            os.killpg(hand.pid, signal.SIGKILL)
            hand.wait(timeout=30)
        finally:
            if hand.poll() is None:
                hand.kill()
        assert (await ledger.get(firing["run_id"]))["status"] == "running"
        worker = start_worker(env)
        try:
            ended = await wait_for(lambda: _ended(store, "notes", firing["key"]))
        finally:
            said = stop(worker)
        shown = await frobozz("routine", "show", "notes", "--json")
        listed = await frobozz("routine", "list", "--json")
        running = await frobozz("runs", "--status", "running", "--json")
        run = await frobozz("runs", "show", firing["run_id"], "--json")
    assert (ended["state"], ended["attempts"]) == ("failed", 1) and ended["reason"].startswith("abandoned"), ended
    assert [(f["key"], f["state"]) for f in shown["firings_list"]] == [(firing["key"], "failed")]
    assert listed[0]["firings"] == {"failed": 1}  # none running
    assert firing["run_id"] not in [r["run_id"] for r in running]
    assert run["status"] == "failed" and run["ended_at"] and "abandoned" in run["reason"], run
    assert len(primaries) == 1  # (not fired again: a firing by hand is nobody's to take up)
    assert "abandoned" in said  # the worker's log says so
