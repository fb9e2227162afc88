"""The agent service as several real `frobozz serve agent` processes on one Postgres and one workspaces root
(the real claude CLI, a scripted model): any instance serves any session, in the same order with the same
numbers, and when one is killed with -9 mid-turn another takes its sessions over."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import asyncpg
import httpx
import pytest

from frobozz.engine.testing import ScriptedModel
from tests.agent.conftest import model_reply
from tests.agent.test_http import sse
from tests.agent.test_notify import Receiver
from tests.conftest import other_accounts_can_run_claude
from tests.orphans import claudes_below
from tests.ports import free_port
from tests.waiting import eventually

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        os.geteuid() == 0 and not other_accounts_can_run_claude(),
        reason="run as root, the service runs claude as the workspace's owner, who cannot reach this checkout's claude",
    ),
]
TOKEN = "instances-token-0123456789"


class Instance:
    """One `frobozz serve agent` process, and a client of it."""

    def __init__(self, env: dict[str, str], root: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "frobozz", "serve", "agent", "--workspaces", str(root), "--port", str(self.port)],
            env=env,
            stderr=subprocess.DEVNULL,
        )
        self.client = httpx.AsyncClient(base_url=self.url, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"})

    async def ready(self) -> None:
        with anyio.fail_after(90):
            while True:
                try:
                    if (await self.client.get("/sessions")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                assert self.process.poll() is None, "the instance exited"
                await anyio.sleep(0.1)

    async def stop(self, kill: bool = False) -> None:
        (self.process.kill if kill else self.process.terminate)()
        await anyio.to_thread.run_sync(self.process.wait)
        await self.client.aclose()


@pytest.fixture
async def cluster(cortex_settings, claude_home, open_dir):
    """Start instances (`await cluster(n, lease_ttl=…)`) sharing the test's database, one scripted model and one
    workspaces root; all stopped after the test."""
    started: list[Instance] = []
    async with ScriptedModel(model_reply) as model:

        async def start(n: int, **settings: object) -> list[Instance]:
            env = {
                **os.environ,
                **model.env(),
                "HOME": str(claude_home),
                "CLAUDE_CODE_MAX_RETRIES": "0",
                "FROBOZZ_HUB_TOKEN": TOKEN,
                "FROBOZZ_DATABASE_URL": cortex_settings.database_url.get_secret_value(),
                **{f"FROBOZZ_AGENT_{k.upper()}": str(v) for k, v in settings.items()},
            }
            new = [Instance(env, open_dir / "ws") for _ in range(n)]
            started.extend(new)
            for instance in new:
                await instance.ready()
            return new

        try:
            yield start
        finally:
            for instance in started:
                if instance.process.poll() is None:
                    await instance.stop(kill=True)


async def wait_for(client: httpx.AsyncClient, path: str, predicate, timeout: float = 60) -> None:  # noqa: ASYNC109 - every wait of the tests has a limit
    with anyio.fail_after(timeout):

        async def ready() -> object:
            return predicate((await client.get(path)).json())

        await eventually(ready)


async def test_a_session_made_on_one_instance_is_served_by_another_with_the_same_events_in_the_same_order(cluster):
    a, b = await cluster(2)
    assert (await a.client.get("/sessions")).json() == {"sessions": []}  # the empty case, on both
    assert (await b.client.get("/sessions")).json() == {"sessions": []}
    session = (await a.client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
    assert [s["session_id"] for s in (await b.client.get("/sessions")).json()["sessions"]] == [session]
    on_a, on_b = [], []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: sse(a.client, f"/sessions/{session}/events", into=on_a, count=2))
        tg.start_soon(lambda: sse(b.client, f"/sessions/{session}/events", into=on_b, count=2))
        assert (await b.client.post(f"/sessions/{session}/messages", json={"text": "ask me"})).status_code == 202
        with anyio.fail_after(60):
            await eventually(lambda: any(e["event"] == "question" for e in on_a), interval=0.02)
        question = next(e for e in on_a if e["event"] == "question")["data"]["question_id"]
        answered = await b.client.post(
            f"/sessions/{session}/answers",
            json={"question_id": question, "answers": {"Which colour for the lamp?": "Blue"}},
        )
        again = await a.client.post(
            f"/sessions/{session}/answers",
            json={"question_id": question, "answers": {"Which colour for the lamp?": "Red"}},
        )
        assert answered.status_code == 200 and again.status_code == 409  # the first, wherever it came
        with anyio.fail_after(60):
            await eventually(lambda: any(e["event"] == "done" for e in on_b), interval=0.02)
        await a.client.post(f"/sessions/{session}/messages", json={"text": "one"})  # queued on A, then B's
        await b.client.post(f"/sessions/{session}/messages", json={"text": "two"})
    more = await sse(b.client, f"/sessions/{session}/events", headers={"Last-Event-ID": on_b[-1]["id"]})
    on_a += await sse(a.client, f"/sessions/{session}/events", headers={"Last-Event-ID": on_a[-1]["id"]})
    on_b += more
    assert on_a == on_b  # the same events, the same numbers, the same order, on both
    assert [int(e["id"]) for e in on_a] == list(range(1, len(on_a) + 1))
    dones = [e["data"]["result"] for e in on_a if e["event"] == "done"]
    assert "Blue" in dones[0] and dones[1].startswith("You said: one") and dones[2].startswith("You said: two")
    replayed = await sse(a.client, f"/sessions/{session}/events", headers={"Last-Event-ID": "3"}, count=3)
    assert replayed == on_a[3:]
    for instance in (a, b):
        described = (await instance.client.get(f"/sessions/{session}")).json()
        assert described["status"] == "idle" and described["cost_usd"] > 0
        messages = (await instance.client.get(f"/sessions/{session}/agentapi/messages")).json()["messages"]
        assert [m["role"] for m in messages] == ["user", "agent"] * 3
        assert (await instance.client.get(f"/sessions/{session}/changes")).json() == {"changes": []}  # no git


async def a_then_b(cluster, workspace: str, text: str, lease_ttl: float):
    """Instance A alone runs a first turn (so A holds the session, its claude kept idle); then B starts."""
    [a] = await cluster(1, lease_ttl=lease_ttl)
    session = (await a.client.post("/sessions", json={"workspace": workspace})).json()["session_id"]
    await a.client.post(f"/sessions/{session}/messages", json={"text": text})
    first = await sse(a.client, f"/sessions/{session}/events")
    [b] = await cluster(1, lease_ttl=lease_ttl)
    return a, b, session, first


@asynccontextmanager
async def slow_turn_on_a_followed_on_b(a, b, session: str, after: str, into: list, *, text: str = "slowly"):
    """A slow turn posted to A and followed on B (into `into`, to its done): the block runs once it streams."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: sse(b.client, f"/sessions/{session}/events", into=into, headers={"Last-Event-ID": after}))
        await a.client.post(f"/sessions/{session}/messages", json={"text": text})
        with anyio.fail_after(60):
            await eventually(lambda: any(e["event"] == "text_delta" for e in into), interval=0.02)
        yield


async def test_an_instance_killed_mid_turn_is_taken_over_and_its_message_answered_once(cluster):
    a, b, session, first = await a_then_b(cluster, "bob/work", "the password is plugh", lease_ttl=3)
    on_b: list[dict] = []
    async with slow_turn_on_a_followed_on_b(a, b, session, first[-1]["id"], on_b):
        killed = anyio.current_time()
        await a.stop(kill=True)
    took = anyio.current_time() - killed
    assert took < 30
    events = first + on_b
    assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))  # no gap, no number twice
    after_kill = on_b[next(i for i, e in enumerate(on_b) if e["event"] == "error") :]
    assert "took the session over" in after_kill[0]["data"]["message"]
    dones = [e for e in on_b if e["event"] == "done"]
    assert len(dones) == 1 and dones[0]["data"]["result"].startswith("one two three")  # answered once
    messages = (await b.client.get(f"/sessions/{session}/agentapi/messages")).json()["messages"]
    assert [(m["role"], m["content"][:6]) for m in messages] == [
        ("user", "the pa"),
        ("agent", "You sa"),
        ("user", "slowly"),
        ("agent", "one tw"),
    ]
    await b.client.post(f"/sessions/{session}/messages", json={"text": "what came before?"})
    resumed = await sse(b.client, f"/sessions/{session}/events", headers={"Last-Event-ID": events[-1]["id"]})
    assert "the password is plugh" in resumed[-1]["data"]["result"]  # B resumed A's claude from the store


async def test_a_stopped_instance_hands_its_session_over_at_once_not_when_the_lease_lapses(cluster):
    a, b, session, first = await a_then_b(cluster, "carol/notes", "hello", lease_ttl=600)
    cut: list[dict] = []  # first an interrupt sent to B reaches the turn A runs
    async with slow_turn_on_a_followed_on_b(a, b, session, first[-1]["id"], cut):
        assert (await b.client.post(f"/sessions/{session}/interrupt")).status_code == 200
    said = "".join(e["data"]["text"] for e in cut if e["event"] == "text_delta")
    assert len(said) < len("one two three four five six seven eight nine ten " * 6)  # cut short
    first += cut
    await wait_for(b.client, f"/sessions/{session}", lambda d: d["status"] == "idle")
    first += await sse(
        b.client, f"/sessions/{session}/events", headers={"Last-Event-ID": first[-1]["id"]}, until="status"
    )  # the idle after the done
    on_b: list[dict] = []
    on_a: list[dict] = []  # and a client of A's, following the turn there when A stops
    following_a = httpx.AsyncClient(base_url=a.url, timeout=60, headers={"Authorization": f"Bearer {TOKEN}"})
    with anyio.fail_after(300):  # well inside the lease: only a handover lets B answer in time
        async with following_a, anyio.create_task_group() as tg:
            after = {"Last-Event-ID": first[-1]["id"]}
            tg.start_soon(lambda: sse(following_a, f"/sessions/{session}/events", into=on_a, headers=after))
            # (very slowly: a turn of under a second could end before both clients saw it stream and A stopped)
            async with slow_turn_on_a_followed_on_b(a, b, session, first[-1]["id"], on_b, text="very slowly"):
                await eventually(lambda: any(e["event"] == "text_delta" for e in on_a), interval=0.02)
                await a.stop()  # SIGTERM: the service closes as it should
    events = first + on_b
    assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
    assert [e["event"] for e in on_b].count("done") == 1 and any(e["event"] == "error" for e in on_b)
    assert on_a == on_b[: len(on_a)]  # A's stream ended as a whole response (a body cut off: `sse` raised)


def claudes(instance: Instance) -> int:
    """claude processes the instance runs now."""
    return len(claudes_below(instance.process.pid))


async def test_max_live_holds_on_each_instance_and_a_full_one_leaves_new_turns_to_another(cluster):
    a, b = await cluster(2, max_live=1)
    first, second = [
        (await a.client.post("/sessions", json={"workspace": f"dave/s{n}"})).json()["session_id"] for n in range(2)
    ]
    most = {"a": 0, "b": 0}

    async def watch() -> None:
        while True:
            counts = await anyio.to_thread.run_sync(lambda: (claudes(a), claudes(b)))
            most["a"], most["b"] = max(most["a"], counts[0]), max(most["b"], counts[1])
            await anyio.sleep(0.1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        await a.client.post(f"/sessions/{first}/messages", json={"text": "slowly"})
        await wait_for(a.client, f"/sessions/{first}", lambda d: d["status"] == "streaming")
        await a.client.post(f"/sessions/{second}/messages", json={"text": "slowly"})  # A is full: B runs it
        for session in (first, second):
            await wait_for(a.client, f"/sessions/{session}/agentapi/messages", lambda d: len(d["messages"]) == 2)
        tg.cancel_scope.cancel()
    assert most == {"a": 1, "b": 1}


async def test_a_webhook_delivery_its_instance_died_making_is_made_by_another_from_the_outbox(cluster, cortex_settings):
    """The receiver holds A's first try; A is killed -9; B, started after, finds the row in the outbox once A's
    claim lapses and delivers it, signed, once."""

    receiver, tries = Receiver(), []
    receiver.hold = True  # the first try hangs, as if the network were slow when its instance died
    settings = {"loopback_receivers": True, "webhook_claim": 3, "webhook_poll": 0.5, "webhook_backoff": 0.2}
    with receiver.server:
        [a] = await cluster(1, **settings)
        made = await a.client.post("/webhooks", json={"user": "alice", "url": f"{receiver.server.url}/hook/crash"})
        receiver.secrets["crash"] = made.json()["secret"]
        session = (await a.client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
        await a.client.post(f"/sessions/{session}/messages", json={"text": "hello"})
        with anyio.fail_after(120):
            await eventually(lambda: receiver.held)
        connection = await asyncpg.connect(cortex_settings.database_url.get_secret_value())
        try:
            tries.append(await connection.fetch("SELECT delivery, attempts, claimed_by FROM agent_webhook_outbox"))
            await a.stop(kill=True)
            receiver.hold = False  # up again: the next try is answered
            [b] = await cluster(1, **settings)
            with anyio.fail_after(120):
                await eventually(lambda: receiver.received.get("crash"))

                async def ready() -> object:
                    return not await connection.fetchval("SELECT count(*) FROM agent_webhook_outbox")

                await eventually(ready)
            hooks = (await b.client.get("/webhooks")).json()["webhooks"]
        finally:
            await connection.close()
    [[held]] = tries
    assert held["delivery"] == f"{session}:{held['delivery'].split(':')[1]}" and held["attempts"] == 1
    [delivered] = receiver.received["crash"]  # made once, by B, with the same delivery id (signature checked)
    assert delivered["type"] == "done" and delivered["id"] == held["delivery"] and delivered["user"] == "alice"
    assert hooks[0]["failures"] == 0 and hooks[0]["paused_at"] is None
