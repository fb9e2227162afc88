"""The agent service over real HTTP on 127.0.0.1 (behind the hub's token), the real claude CLI, a scripted
model that calls tools, and the real Postgres: two SSE clients on one session, questions, queued messages,
replay of what a client missed, agentapi's routes, the token, and a restart of the service."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import asyncpg
import httpx
import pytest
from starlette.applications import Starlette

from frobozz._loopback import LoopbackServer
from frobozz.agent import create_app
from frobozz.agent._leases import Leases
from frobozz.engine import _spare
from frobozz.servers import hub_app
from frobozz.servers._auth import BearerToken
from tests.database import admin, database_name
from tests.ports import free_port
from tests.waiting import eventually

pytestmark = pytest.mark.anyio
TOKEN = "agent-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class Service:
    """The agent's HTTP app on a loopback port, and a client that carries the token."""

    def __init__(self, agent) -> None:
        self.server = LoopbackServer(BearerToken(create_app(agent), TOKEN), lifespan="on")

    def __enter__(self) -> httpx.AsyncClient:
        self.server.start()
        self.client = httpx.AsyncClient(base_url=self.server.url, headers=AUTH, timeout=60)
        return self.client

    def __exit__(self, *exc) -> None:
        self.server.stop()


async def sse(
    client: httpx.AsyncClient,
    path: str,
    *,
    until: str = "done",
    headers: dict | None = None,
    into: list | None = None,
    count: int = 1,
) -> list[dict]:
    """Server-sent events from `path` (id, event, data parsed), up to the `count`-th `until` event."""
    events = [] if into is None else into
    seen = 0
    async with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        event: dict = {}
        async for line in response.aiter_lines():
            if line.startswith(":"):
                continue
            if line == "":
                if event:
                    event["data"] = json.loads(event["data"])
                    events.append(event)
                    if event.get("event") == until:
                        seen += 1
                        if seen == count:
                            return events
                event = {}
                continue
            key, _, value = line.partition(":")
            event[key] = value[1:] if value.startswith(" ") else value
    return events


async def test_without_the_token_nothing_is_served_and_with_it_an_empty_service_lists_nothing(make_agent):
    with Service(make_agent()) as client:
        for method, path in (("GET", "/sessions"), ("POST", "/sessions"), ("GET", "/sessions/abc/events")):
            refused = await client.request(method, path, headers={"Authorization": "Bearer wrong-token-xxxxxxxx"})
            assert refused.status_code == 401
        assert (await client.get("/sessions")).json() == {"sessions": []}
        assert (await client.get("/sessions/" + "a" * 32)).status_code == 404
        for body in (
            b"not json",
            b"[1]",
            json.dumps({"workspace": "../x"}).encode(),
            json.dumps({"workspace": "/etc"}).encode(),
            json.dumps({}).encode(),
            # options claude cannot take: the session was made, and every message of it then failed
            json.dumps({"workspace": "alice/notes", "max_turns": "x"}).encode(),
            json.dumps({"workspace": "alice/notes", "max_turns": -1}).encode(),
            json.dumps({"workspace": "alice/notes", "max_turns": True}).encode(),
            json.dumps({"workspace": "alice/notes", "max_budget_usd": "1"}).encode(),
            json.dumps({"workspace": "alice/notes", "model": "a model"}).encode(),
            # one string: "NotebookEdit" let Edit through (a substring)
            json.dumps({"workspace": "alice/notes", "allowed_tools": "NotebookEdit"}).encode(),
            json.dumps({"workspace": "alice/notes", "allowed_tools": ["Read", ""]}).encode(),
            json.dumps({"workspace": "alice/notes", "history": [{"role": "user", "text": "a\u0000b"}]}).encode(),
        ):
            bad = await client.post("/sessions", content=body)
            assert bad.status_code == 400 and bad.json()["error"], body
        assert (await client.get("/sessions")).json() == {"sessions": []}  # none was made
        huge = b'{"workspace": "' + b"a" * (17 * 1024 * 1024) + b'"}'

        async def chunked():  # its length not said up front
            yield huge[:1024]
            yield huge[1024:]

        for sent in (huge, chunked()):
            too_large = await client.post("/sessions", content=sent)
            assert too_large.status_code == 413 and "larger than" in too_large.json()["error"]
        good = {"workspace": "alice/notes", "max_turns": 3, "max_budget_usd": 2, "allowed_tools": ["Read"]}
        made = await client.post("/sessions", json=good)
        assert made.status_code == 201, made.text
        nul = await client.post(f"/sessions/{made.json()['session_id']}/messages", json={"text": "a\u0000b"})
        assert nul.status_code == 400 and "NUL" in nul.json()["error"]  # (a 503: "the database failed")
        lone = await client.post(f"/sessions/{made.json()['session_id']}/messages", content=b'{"text": "a\\ud800b"}')
        assert lone.status_code == 400 and "\\ud800" in lone.json()["error"]  # (an unpaired escape: the same 503)


async def test_two_clients_see_the_same_question_one_answers_and_both_follow_it_to_done(make_agent, scripted):
    with Service(make_agent()) as client:
        created = await client.post(
            "/sessions",
            json={
                "workspace": "alice/notes",
                "history": [{"role": "user", "content": "My lamp is brass."}],
                "attached": [{"name": "map.txt", "content": "the cellar is below the kitchen"}],
            },
        )
        assert created.status_code == 201
        session = created.json()["session_id"]
        assert created.json()["workspace"].endswith("/alice/notes")
        first, second = [], []
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: sse(client, f"/sessions/{session}/events", into=first))
            tg.start_soon(lambda: sse(client, f"/sessions/{session}/events", into=second))
            assert (await client.post(f"/sessions/{session}/messages", json={"text": "ask me"})).status_code == 202
            with anyio.fail_after(60):
                await eventually(lambda: any(e["event"] == "question" for e in second), interval=0.02)
            question = next(e for e in second if e["event"] == "question")["data"]
            answered = await client.post(
                f"/sessions/{session}/answers",
                json={"question_id": question["question_id"], "answers": {"Which colour for the lamp?": "Blue"}},
            )
            again = await client.post(
                f"/sessions/{session}/answers",
                json={"question_id": question["question_id"], "answers": {"Which colour for the lamp?": "Red"}},
            )
        assert answered.status_code == 200 and again.status_code == 409
        assert first == second and first[-1]["event"] == "done"  # the same events, in the same order
        assert [int(e["id"]) for e in first] == list(range(1, len(first) + 1))
        states = [e["data"]["state"] for e in first if e["event"] == "status"]
        assert states == ["idle", "streaming", "waiting", "streaming", "idle"] or states[:4] == [
            "idle",
            "streaming",
            "waiting",
            "streaming",
        ]
        asked = scripted.requests[0].last_user_text()
        assert "My lamp is brass." in asked and "the cellar is below the kitchen" in asked
        assert '"Which colour for the lamp?"="Blue"' in str(scripted.requests[-1].tool_results()[0].get("content"))
        described = (await client.get(f"/sessions/{session}")).json()
        assert described["status"] == "idle" and described["cost_usd"] > 0 and described["usage"]
        late = await sse(client, f"/sessions/{session}/events", headers={"Last-Event-ID": first[-3]["id"]})
        assert late == first[-2:]  # a reconnecting client gets only what it missed
        only = await sse(client, f"/sessions/{session}/events?after=0&types=question,done")
        assert [e["event"] for e in only] == ["question", "done"]
        assert (await client.get(f"/sessions/{session}/events?types=nonsense")).status_code == 400


async def test_an_answer_claude_cannot_use_is_a_400_that_names_it_and_the_question_still_waits(make_agent, scripted):
    """claude takes each asked question's text to the label chosen (a string; for a multi-select question, a list
    of them): anything else it refused as failing its schema, or took for no answer, and the question was gone."""
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
        assert (await client.post(f"/sessions/{session}/messages", json={"text": "ask me"})).status_code == 202
        with anyio.fail_after(60):
            asked = await sse(client, f"/sessions/{session}/events", until="question")
        question_id = asked[-1]["data"]["question_id"]
        for answers, named in (
            ({"Which colour for the lamp?": 5}, "Which colour for the lamp?"),
            ({"Which colour for the lamp?": {"label": "Red"}}, "Which colour for the lamp?"),
            ({"Which colour for the lamp?": ["Red", "Blue"]}, "not a multi-select"),
            ({"Which colour for the lamp?": "Red\x00"}, "NUL"),
            ({"What is this?": "Red"}, "What is this?"),
            ({"Which colour for the lamp?": "Red", "What is this?": "Red"}, "What is this?"),
        ):
            refused = await client.post(
                f"/sessions/{session}/answers", json={"question_id": question_id, "answers": answers}
            )
            assert refused.status_code == 400 and named in refused.json()["error"], (answers, refused.text)
        answered = await client.post(
            f"/sessions/{session}/answers",
            json={"question_id": question_id, "answers": {"Which colour for the lamp?": "Blue"}},
        )
        assert answered.status_code == 200, answered.text
        with anyio.fail_after(60):
            await sse(client, f"/sessions/{session}/events?after={asked[-1]['id']}")
    assert '"Which colour for the lamp?"="Blue"' in str(scripted.requests[-1].tool_results()[0].get("content"))


async def test_an_interrupted_turn_keeps_what_was_streamed_of_its_reply_marked_interrupted(make_agent):
    """claude's result for a turn it was interrupted in is none: the conversation kept an empty reply, though the
    user had read what streamed of it."""
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
        assert (await client.post(f"/sessions/{session}/messages", json={"text": "very slowly"})).status_code == 202
        seen: list[dict] = []
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: sse(client, f"/sessions/{session}/events", into=seen))
                await eventually(lambda: sum(e["event"] == "text_delta" for e in seen) >= 3, interval=0.02)
                assert (await client.post(f"/sessions/{session}/interrupt")).status_code == 200
        streamed = "".join(e["data"]["text"] for e in seen if e["event"] == "text_delta")
        assert streamed.startswith("one two") and len(streamed) < len(
            "one two three four five six seven eight nine ten " * 60
        )
        assert seen[-1]["data"]["result"] is None  # claude's own: nothing
        for path in ("messages", "agentapi/messages"):
            *_, (user, agent) = [
                (m["role"], m) for m in (await client.get(f"/sessions/{session}/{path}")).json()["messages"]
            ]
            assert user == "agent" and agent["content"] == streamed and agent["interrupted"] is True, path
        assert (await client.post(f"/sessions/{session}/messages", json={"text": "hello"})).status_code == 202
        with anyio.fail_after(60):
            await sse(client, f"/sessions/{session}/events?after={seen[-1]['id']}")
        last = (await client.get(f"/sessions/{session}/messages")).json()["messages"][-1]
        assert last["content"].startswith("You said: hello") and last["interrupted"] is False


async def test_empty_items_and_spaces_in_an_event_types_filter_are_ignored_and_an_unknown_type_named(make_agent):
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
        for types in ("status,", ",status", "status,,done", " status , done ", "status,%20"):
            with anyio.fail_after(30):
                only = await sse(client, f"/sessions/{session}/events?after=0&types={types}", until="status")
            assert [e["event"] for e in only] == ["status"], types
        refused = await client.get(f"/sessions/{session}/events?types=status,nonsense,")
        assert refused.status_code == 400 and "unknown event types: nonsense;" in refused.json()["error"]


async def test_an_event_number_past_the_sessions_last_is_a_400_and_one_only_the_database_has_yet_is_waited_for(
    make_agent, cortex_settings
):
    """A client passes the number of the last event it saw: one past the session's last is no such client, and
    was streamed nothing, forever. The database is asked, not this instance's copy: another instance may have
    written the event the client saw there, and this one not have read it back yet."""
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
        events = f"/sessions/{session}/events"
        for query, headers in (
            ("?after=99999999999999999999999", None),
            ("?after=2", None),  # its last is 1, the status it was made with
            ("?after=\u00b2", None),  # a digit to str.isdigit, and not to int(): a 500
            ("?after=-1", None),
            ("", {"Last-Event-ID": "9223372036854775808"}),
            ("?after=1", {"Last-Event-ID": "2"}),  # (the header, a browser's on reconnecting, comes first)
        ):
            async with client.stream("GET", events + query, headers=headers) as refused:
                assert refused.status_code == 400, query
                assert "event" in json.loads(await refused.aread())["error"]
        connection = await asyncpg.connect(cortex_settings.database_url.get_secret_value())
        try:  # written by another instance, say, and not yet read back here (no notice of it)
            await connection.execute(
                "INSERT INTO agent_events (session_id, seq, kind, data) VALUES ($1, 2, 'status', $2)",
                session,
                json.dumps({"state": "idle", "message_id": None}),
            )
        finally:
            await connection.close()
        async with client.stream("GET", events + "?after=2") as waiting:
            assert waiting.status_code == 200
        async with client.stream("GET", events + "?after=3") as refused:
            assert refused.status_code == 400 and "go up to 2" in json.loads(await refused.aread())["error"]


async def test_the_apis_routes_answer_errors_as_error_and_agentapis_routes_as_problem_json(make_agent):
    """`GET /sessions/ID/messages` is the API's (the conversation), so its errors are too; a path no route has (a
    session id made of `..%2F..`, say) or a method none takes is said in the same shape, not in plain text."""
    with Service(make_agent()) as client:
        missing = "a" * 32
        for path in (
            f"/sessions/{missing}/messages",
            f"/sessions/{missing}/events",
            f"/sessions/{missing}",
            "/sessions/..%2F..%2Fetc/messages",
            "/sessions/..%2F..",
            "/nothing-here",
        ):
            answer = await client.get(path)
            assert answer.status_code == 404 and answer.headers["content-type"] == "application/json", path
            assert set(answer.json()) == {"error"} and answer.json()["error"], path
        wrong = await client.put("/sessions")
        assert wrong.status_code == 405 and set(wrong.json()) == {"error"}
        assert {"GET", "POST"} <= set(wrong.headers["allow"].split(", ")), "every method the path takes"
        wrong = await client.put(f"/sessions/{missing}/messages")
        assert {"GET", "POST"} <= set(wrong.headers["allow"].split(", ")) and "GET" in wrong.json()["error"]
        for path in (
            f"/sessions/{missing}/agentapi/messages",
            f"/sessions/{missing}/agentapi/status",
            f"/sessions/{missing}/status",  # (agentapi's, at the session's URL too)
            f"/sessions/{missing}/agentapi/nothing-here",
        ):
            answer = await client.get(path)
            assert answer.status_code == 404 and answer.headers["content-type"] == "application/problem+json", path
            assert answer.json()["status"] == 404 and answer.json()["detail"], path


async def test_an_event_stream_ends_as_a_complete_response_when_the_server_stops(make_agent, monkeypatch):
    """Told the server is stopping (SIGTERM: here by sse_starlette's own flag, which uvicorn's handler sets), each
    stream, the API's and agentapi's, ends as a response that is whole (uvicorn said "ASGI callable returned
    without completing response", and the client read a body cut off), so a client reconnects to go on."""
    from sse_starlette.sse import AppStatus

    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
        ours: list[dict] = []
        theirs: list[dict] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: sse(client, f"/sessions/{session}/events", into=ours))
            tg.start_soon(lambda: sse(client, f"/sessions/{session}/agentapi/events", into=theirs))
            with anyio.fail_after(60):
                await eventually(lambda: ours and theirs, interval=0.02)
            monkeypatch.setattr(AppStatus, "should_exit", True)
        assert [e["event"] for e in ours] == ["status"] and [e["event"] for e in theirs] == ["status_change"]


async def test_agentapi_messages_sent_at_once_to_an_idle_session_are_one_taken_and_the_others_refused(make_agent):
    """agentapi's rule (a message only while the agent is stable) holds for requests that arrive together: each
    found the session idle, so it is checked again as the message is kept."""
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
        answers = []

        async def send(text: str) -> None:
            message = {"content": text, "type": "user"}
            answers.append(await client.post(f"/sessions/{session}/agentapi/message", json=message))

        async with anyio.create_task_group() as tg:
            for text in ("first", "second", "third"):
                tg.start_soon(send, text)
        assert sorted(a.status_code for a in answers) == [200, 409, 409]
        assert all(a.headers["content-type"] == "application/problem+json" for a in answers if a.status_code == 409)
        await sse(client, f"/sessions/{session}/events")
        messages = (await client.get(f"/sessions/{session}/agentapi/messages")).json()["messages"]
        assert [m["role"] for m in messages] == ["user", "agent"]  # the refused ones were not kept


async def test_a_message_sent_while_one_streams_is_queued_and_the_tool_log_and_agentapi_see_the_turns(
    make_agent, open_dir
):
    with Service(make_agent()) as client:
        session = (
            await client.post("/sessions", json={"workspace": "alice/notes", "allowed_tools": ["Write"]})
        ).json()["session_id"]
        ids = [
            (await client.post(f"/sessions/{session}/messages", json={"text": t})).json()["message_id"]
            for t in ("slowly", f"write {open_dir / 'drop' / 'out.md'}: nope", "write todo.md: lamp oil")
        ]
        assert len(set(ids)) == 3
        busy = await client.post(f"/sessions/{session}/agentapi/message", json={"content": "hi", "type": "user"})
        assert busy.status_code == 409 and busy.headers["content-type"] == "application/problem+json"
        events = await sse(client, f"/sessions/{session}/events", count=3)
        dones = [e["data"]["result"] for e in events if e["event"] == "done"]
        assert dones[0].startswith("one two three") and "only change files inside" in dones[1]
        tools = (await client.get(f"/sessions/{session}/tools")).json()["tools"]
        assert [(t["name"], t["outcome"]) for t in tools] == [("Write", "denied"), ("Write", "ok")]
        assert not (open_dir / "drop" / "out.md").exists()
        assert (await client.get(f"/sessions/{session}/agentapi/status")).json() == {
            "agent_type": "claude",
            "status": "stable",
        }
        messages = (await client.get(f"/sessions/{session}/agentapi/messages")).json()["messages"]
        assert [m["role"] for m in messages] == ["user", "agent"] * 3 and messages[0]["content"] == "slowly"
        updates: list = []
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:  # an agentapi client listening, then a message
                tg.start_soon(
                    lambda: sse(
                        client, f"/sessions/{session}/agentapi/events", until="status_change", count=3, into=updates
                    )
                )
                await eventually(lambda: any(u["event"] == "status_change" for u in updates), interval=0.02)
                sent = await client.post(f"/sessions/{session}/message", json={"content": "hello", "type": "user"})
                assert sent.json() == {"ok": True}
        statuses = [u["data"]["status"] for u in updates if u["event"] == "status_change"]
        assert (
            statuses == ["stable", "running", "stable"]
            and len([u for u in updates if u["event"] == "message_update"]) >= 8
        )
        assert updates[0]["event"] == "message_update" and updates[0]["data"]["role"] == "user"
        assert updates[-1]["data"] == {"agent_type": "claude", "status": "stable"}  # the turn ended, and so:
        assert updates[-2]["event"] == "message_update" and updates[-2]["data"]["role"] == "agent"
        assert updates[-2]["data"]["message"].startswith("You said: hello")
        assert (
            await client.post(f"/sessions/{session}/message", json={"content": "x", "type": "raw"})
        ).status_code == 400


async def test_after_the_service_restarts_a_message_resumes_the_session_with_its_history(
    make_agent, scripted, tmp_path
):
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "bob/work"})).json()["session_id"]
        await client.post(f"/sessions/{session}/messages", json={"text": "the password is xyzzy"})
        before = await sse(client, f"/sessions/{session}/events")
    elsewhere = tmp_path / "new-machine"
    elsewhere.mkdir()
    with Service(make_agent(home=elsewhere)) as client:
        assert [s["session_id"] for s in (await client.get("/sessions")).json()["sessions"]] == [session]
        replayed = await sse(client, f"/sessions/{session}/events")
        assert replayed == before
        await client.post(f"/sessions/{session}/messages", json={"text": "what came before?"})
        after = await sse(client, f"/sessions/{session}/events", headers={"Last-Event-ID": before[-1]["id"]})
        assert (await client.delete(f"/sessions/{session}")).status_code == 204
        assert (await client.get(f"/sessions/{session}")).status_code == 404
    assert "the password is xyzzy" in after[-1]["data"]["result"]


def test_serve_agent_without_a_root_or_with_a_bad_one_is_a_clear_error(tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    for args, expected in (
        ([], "needs --workspaces"),
        (["--workspaces", str(tmp_path), "--platform-dir", str(tmp_path / "none")], "is not a folder"),
        (["--workspaces", str(tmp_path / "a-file")], "a-file is not a folder"),
        (["--workspaces", str(tmp_path / "a-file" / "ws")], "a-file is not a folder"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "frobozz", "serve", "agent", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "COLUMNS": "250"},
        )
        assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="only a service run as root runs claude as other accounts")
def test_a_root_service_refuses_workspaces_its_accounts_cannot_reach_and_makes_nothing(tmp_path):
    """pytest's folders are root's alone: claude, run as a workspace's owner under one, could not read its HOME
    (no settings, no sign-in) and retried for seconds before each session's first request."""
    served = ["serve", "agent", "--workspaces", str(tmp_path / "ws"), "--model", "scripted"]
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", *served],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "1000"},  # (the error box is as wide: its one line whole)
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    said = re.search(r"(\S+) lets no other account through \(chmod o\+x (\S+),", done.stderr)
    assert said and said[1] == said[2], done.stderr
    closed = Path(said[1])  # (pytest's folder, or the one it is in)
    assert closed in (tmp_path, *tmp_path.parents) and not closed.stat().st_mode & 0o001
    assert not (tmp_path / "ws").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only a service run as root runs claude as other accounts")
async def test_a_root_service_makes_its_workspaces_root_passable_whatever_the_umask(open_dir, cortex_settings):
    """Made under a umask of 077, the root was root's alone: start-up passed (nothing was there to check yet), and
    every session's claude then had no HOME it could reach."""
    code = "import os; os.umask(0o077)\nfrom frobozz.cli import main\nmain()\n"
    process, url = _serve_agent(open_dir, cortex_settings, "--model", "scripted", code=code)
    try:
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as client:
            await _until_up(client, process)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=60)
    assert stat.S_IMODE((open_dir / "ws").stat().st_mode) == 0o711


async def test_a_scoped_token_uses_only_the_workspaces_of_the_users_its_grant_names(make_agent):
    from frobozz.servers._auth import ScopedTokens
    from frobozz.servers._grants import Grant, hashed

    grants = [
        Grant(name="alice", sha256=hashed("alice-token-0123456789"), servers=["agent"], users=["alice"]),
        Grant(name="admin", sha256=hashed("admin-token-0123456789"), servers=["agent"], users=["*"]),
        Grant(name="reader", sha256=hashed("reader-token-012345678"), servers=["cortex"], users=["*"]),
    ]
    server = LoopbackServer(ScopedTokens(create_app(make_agent()), grants, frozenset(), only="agent"), lifespan="on")
    with server:

        def as_(token):
            return httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)

        async with (
            as_("alice-token-0123456789") as alice,
            as_("admin-token-0123456789") as admin,
            as_("reader-token-012345678") as reader,
        ):
            mine = (await alice.post("/sessions", json={"workspace": "alice/notes"})).json()["session_id"]
            theirs = (await admin.post("/sessions", json={"workspace": "bob/notes"})).json()["session_id"]
            assert (await alice.post("/sessions", json={"workspace": "bob/notes"})).status_code == 403
            assert [s["session_id"] for s in (await alice.get("/sessions")).json()["sessions"]] == [mine]
            assert (await alice.get(f"/sessions/{theirs}")).status_code == 404  # not even told it exists
            assert (await alice.post(f"/sessions/{theirs}/messages", json={"text": "hi"})).status_code == 404
            assert len((await admin.get("/sessions")).json()["sessions"]) == 2
            refused = await reader.get("/sessions")
            assert refused.status_code == 403 and "may not use the agent service" in refused.json()["error"]


async def test_a_database_that_goes_away_is_a_503_that_says_so_and_once_back_the_service_recovers_with_nothing_lost(
    make_agent, postgres, cortex_settings
):

    name = database_name(cortex_settings)
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "bob/work"})).json()["session_id"]
        await admin(postgres, f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
        try:
            await admin(
                postgres,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()",
            )
            for gone in (await client.get("/sessions"), await client.post("/sessions", json={"workspace": "bob/x"})):
                assert gone.status_code == 503, gone.text
                assert "the agent service's database failed" in gone.json()["error"]
        finally:
            await admin(postgres, f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS true")
        with anyio.fail_after(30):

            async def ready() -> object:
                return (await client.get("/sessions")).status_code == 200

            await eventually(ready, interval=0.2)
        back = await client.get("/sessions")
        assert [s["session_id"] for s in back.json()["sessions"]] == [session]
        made = await client.post("/sessions", json={"workspace": "bob/other"})
        assert made.status_code == 201
        assert len((await client.get("/sessions")).json()["sessions"]) == 2


async def test_a_turn_moves_the_sessions_last_activity_on(make_agent):
    with Service(make_agent()) as client:
        session = (await client.post("/sessions", json={"workspace": "bob/work"})).json()["session_id"]
        before = (await client.get(f"/sessions/{session}")).json()["last_activity"]
        await client.post(f"/sessions/{session}/messages", json={"text": "hello"})
        await sse(client, f"/sessions/{session}/events")
        after = (await client.get(f"/sessions/{session}")).json()["last_activity"]
        listed = (await client.get("/sessions")).json()["sessions"][0]["last_activity"]
    assert before is not None and after > before and listed >= after  # (saved a moment later: the database's now)


def _serve_agent(folder, cortex_settings, *args, code: str | None = None, hub: bool = False):
    """`frobozz serve agent ARGS` in a process of its own, its workspaces and HOME in `folder` (one other accounts
    can reach: run as root, the service runs claude as each workspace's owner); `hub`: `serve all --http`, the
    agent mounted in the hub; `code`: Python run instead of `-m frobozz`, which calls the CLI itself."""
    home = folder / "home"  # a fresh HOME: claude is not logged in there
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))}
    env.update(
        HOME=str(home),
        FROBOZZ_HUB_TOKEN=TOKEN,
        COLUMNS="250",
        FROBOZZ_DATABASE_URL=cortex_settings.database_url.get_secret_value(),
    )
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            *(["-c", code] if code else ["-m", "frobozz"]),
            *(["serve", "all", "--http"] if hub else ["serve", "agent"]),
            "--workspaces",
            str(folder / "ws"),
            "--port",
            str(port),
            *args,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return process, f"http://127.0.0.1:{port}"


async def _until_up(client: httpx.AsyncClient, process: subprocess.Popen) -> None:
    """Until the service in `process` answers (failing if the process ends first)."""
    with anyio.fail_after(120):
        while True:
            try:
                if (await client.get("/sessions")).status_code == 200:
                    return
            except httpx.ConnectError:
                assert process.poll() is None, process.communicate()
                await anyio.sleep(0.2)


async def test_serve_agent_warns_when_claude_is_not_logged_in_and_runs_offline_with_the_scripted_model(
    open_dir, cortex_settings
):

    process, _ = _serve_agent(open_dir, cortex_settings)
    try:
        with anyio.fail_after(120):
            line = await anyio.to_thread.run_sync(process.stderr.readline)
            while "not logged in" not in line and line:
                line = await anyio.to_thread.run_sync(process.stderr.readline)
        assert "warning" in line and "--model scripted" in line
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=60)
    process, url = _serve_agent(open_dir, cortex_settings, "--model", "scripted")
    try:
        async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=60) as client:
            await _until_up(client, process)
            session = (await client.post("/sessions", json={"workspace": "bob/work"})).json()["session_id"]
            sent = await client.post(f"/sessions/{session}/messages", json={"text": "hello there"})
            assert sent.status_code == 202
            done = await sse(client, f"/sessions/{session}/events")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    assert "(scripted) You said: hello there" in done[-1]["data"]["result"], err
    assert "not logged in" not in err


# the lease keeper's second round fails as a bug would (its first passes, so the service has started by then)
FAILING_LATER = """
from frobozz.agent._leases import Leases

renew, rounds = Leases.renew, []


async def failing_later(self, tokens):
    rounds.append(self)
    if len(rounds) == 2:
        raise RuntimeError("a bug in the lease keeper")
    return await renew(self, tokens)
"""


@pytest.fixture
def keeper_fails_when_told(monkeypatch) -> list:
    """The lease keeper's rounds raise as a bug would, once something is put in the list returned."""
    renew, told = Leases.renew, []

    async def renew_until_told(self, tokens):
        if told:
            raise RuntimeError("a bug in the lease keeper")
        return await renew(self, tokens)

    monkeypatch.setattr(Leases, "renew", renew_until_told)
    return told


@pytest.mark.parametrize(
    ("warm_spare", "failing"),
    [(False, "lease keeper"), (True, "lease keeper"), (True, "warm spare")],
    ids=["the keeper, no spare", "the keeper, a spare claude waiting", "the spare"],
)
async def test_an_agent_whose_own_task_fails_stops_says_why_in_a_503_and_closes_its_database(
    make_agent, monkeypatch, caplog, keeper_fails_when_told, warm_spare, failing
):
    """Before, its app went on taking requests and answered each with a 500 ('this task group is not active'),
    and the database pool was never closed. With a spare claude waiting, the spare's exit, cancelled with the
    failed group, skipped the rest of the agent's; a failure of the spare's own went unrecorded."""
    if failing == "warm spare":

        async def rehearse(*args: object) -> None:
            raise RuntimeError("a bug in the warm spare")

        monkeypatch.setattr(_spare, "_rehearse", rehearse)
    failures: list[Exception] = []
    agent = make_agent(warm_spare=warm_spare, lease_ttl=1.5)  # the keeper's round: every 0.5 s
    server = LoopbackServer(BearerToken(create_app(agent, on_failure=failures.append), TOKEN), lifespan="on")
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, headers=AUTH, timeout=60) as client:
            made = await client.post("/sessions", json={"workspace": "bob/work"})  # (which primes the spare)
            assert made.status_code == 201, made.text
            with anyio.fail_after(60):
                if failing == "lease keeper":
                    await eventually(lambda: agent.spare is None or agent.spare.live == 1)
                    keeper_fails_when_told.append(True)
                await eventually(lambda: failures)
            refused = await client.post("/sessions", json={"workspace": "bob/work"})
    finally:
        server.stop()
    assert [str(f) for f in failures] == [f"a bug in the {failing}"]
    said = f"the agent service has stopped: RuntimeError: a bug in the {failing}"
    assert refused.status_code == 503 and refused.json()["error"] == said
    assert said in caplog.text
    assert agent.store is not None and agent.store.pool.is_closing()
    assert agent.spare is None or agent.spare.live == 0


async def test_in_the_hub_the_agents_failure_leaves_what_else_is_mounted_to_close_in_full(
    make_agent, keeper_fails_when_told
):
    """Unwound under the failed agent's cancelled scope (entered before it, as the web view and the plugin's
    hooks were), a lifespan's close was cut short at its first wait."""
    closed = []

    @asynccontextmanager
    async def lifespan(_app):
        try:
            yield
        finally:
            await anyio.lowlevel.checkpoint()  # a close that waits, as the web view's does
            closed.append(True)

    failures: list[Exception] = []
    agent = create_app(make_agent(lease_ttl=1.5), on_failure=failures.append)
    server = LoopbackServer(
        hub_app([], TOKEN, site=Starlette(lifespan=lifespan), mounts={"agent": agent}), lifespan="on"
    )
    server.start()
    try:
        keeper_fails_when_told.append(True)
        with anyio.fail_after(60):
            await eventually(lambda: failures and closed)
    finally:
        server.stop()
    assert [str(f) for f in failures] == ["a bug in the lease keeper"]


@pytest.mark.parametrize("hub", [False, True], ids=["serve agent", "serve all --http"])
async def test_serve_agent_exits_with_status_1_naming_what_failed_when_a_task_of_its_own_fails(
    open_dir, cortex_settings, hub
):
    """An instance without its lease keeper must not go on serving: it exits, and a supervisor starts it again."""
    code = FAILING_LATER + "Leases.renew = failing_later\nfrom frobozz.cli import main\nmain()\n"
    process, _ = _serve_agent(open_dir, cortex_settings, "--model", "scripted", code=code, hub=hub)
    try:
        _, err = await anyio.to_thread.run_sync(lambda: process.communicate(timeout=120))
    finally:
        process.kill()
    assert process.returncode == 1, err
    assert "the agent service has stopped: RuntimeError: a bug in the lease keeper" in err
