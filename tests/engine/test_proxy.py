"""The engine's HTTP channel, with the real CLI talking through it to the scripted Messages API."""

import json
import logging

import httpx
import pytest

from frobozz.engine import CompactBoundary, Engine, ErrorEvent, Result, Usage, is_compaction_request
from frobozz.engine._proxy import request_head
from frobozz.engine.testing import Reply, ScriptedModel, Text, replies
from tests.engine.conftest import of, until
from tests.ports import free_port
from tests.waiting import eventually

pytestmark = pytest.mark.anyio


async def test_usage_and_rate_limit_headers_reach_the_consumer_as_events(make_options):
    limits = (
        ("anthropic-ratelimit-unified-5h-utilization", "0.42"),
        ("anthropic-ratelimit-unified-7d-utilization", "0.1"),
    )
    script = replies(
        Reply((Text("small"),), input_tokens=1200, output_tokens=30, headers=limits),
        Reply((Text("bigger"),), input_tokens=5000, output_tokens=70),
        "smaller again",
    )
    async with ScriptedModel(script) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            assert engine.env["ANTHROPIC_BASE_URL"] != model.url  # claude goes through the proxy
            events = []
            for text in ("one", "two", "three"):
                await engine.send(text)
                events += await until(engine.events(), Result)
    usage = [u for u in of(events, Usage) if u.path.endswith("/v1/messages")]
    assert [(u.input_tokens, u.output_tokens, u.context_tokens) for u in usage[:2]] == [
        (1200, 30, 1230),
        (5000, 70, 5070),
    ]
    assert [u.context_high_water for u in usage] == [1230, 5070, 5070]
    assert usage[0].rate_limits == {
        "anthropic-ratelimit-unified-5h-utilization": "0.42",
        "anthropic-ratelimit-unified-7d-utilization": "0.1",
    }
    assert engine.context_high_water == 5070
    assert [r.result for r in of(events, Result)] == ["small", "bigger", "smaller again"]  # streamed through intact


async def test_a_registered_rewrite_changes_compaction_requests_only(make_options):
    def script(request):
        if is_compaction_request(request.body):
            return "SUMMARY" + (" (rewritten)" if "FROBOZZ-INSTRUCTIONS" in json.dumps(request.body) else "")
        return "a normal answer"

    def rewrite(body):
        body["messages"][-1]["content"] = [
            {
                "type": "text",
                "text": "FROBOZZ-INSTRUCTIONS: Your task is to create a detailed summary of the game so far.",
            }
        ]
        return body

    async with ScriptedModel(script) as model:
        async with Engine(make_options(model)) as engine:
            await engine.start()
            engine.set_compaction_rewrite(rewrite)
            first = []
            for text in ("hello", "tell me more", "and more"):  # claude compacts nothing shorter
                await engine.send(text)
                first += await until(engine.events(), Result)
            await engine.send("/compact")
            compacted = await until(engine.events(), Result)
    assert not any(u.rewritten for u in of(first, Usage))
    assert [u.rewritten for u in of(compacted, Usage)] == [True]
    assert of(compacted, CompactBoundary)
    seen = [r for r in model.requests if is_compaction_request(r.body)]
    assert len(seen) == 1 and "FROBOZZ-INSTRUCTIONS" in json.dumps(seen[0].body)
    assert "<summary> block" in seen[0].last_user_text()  # the form claude reads the answer in is still asked for


async def test_an_unreachable_upstream_becomes_an_api_error_not_a_hang(make_options):
    dead_port = free_port()
    async with ScriptedModel(replies("unused")) as model:
        options = make_options(model, env={"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{dead_port}"})
        async with Engine(options) as engine:
            await engine.start()
            await engine.send("hello")
            events = await until(engine.events(), Result)
    assert of(events, Result)[0].is_error
    assert of(events, ErrorEvent)[0].status == 502


def test_the_request_s_model_and_max_tokens_are_read_without_its_history_only_in_claude_s_order():
    """A traced request with no content captured needs these two only; any other shape is read whole."""
    body = json.dumps(
        {
            "model": "claude-x",
            "messages": [
                {"role": "user", "content": [{"type": "tool_use", "input": {"max_tokens": 5, "model": "not-this"}}]}
            ],
            "system": "s",
            "tools": [],
            "max_tokens": 32000,
            "thinking": {"type": "enabled"},
            "stream": True,
        },
        separators=(",", ":"),
    ).encode()
    assert request_head(body) == {"model": "claude-x", "max_tokens": 32000}
    assert request_head(b'{"model":"claude-x","messages":[]}') == {"model": "claude-x"}
    for other in (b'{"messages":[],"model":"claude-x"}', b'{"model":"a\\"b"}', b"", b"not json", b'{"model":1}'):
        assert request_head(other) is None


async def test_while_rehearsing_the_proxy_answers_model_requests_itself_and_reports_no_usage(make_options):
    async with ScriptedModel(lambda r: "from the model") as model:
        assert Engine(make_options(model, proxy=False)).rehearse() is False  # no proxy: nothing answered on the way
        options = make_options(model)
        async with Engine(options) as engine:
            await engine.start()
            assert engine.rehearse()
            await engine.send("a rehearsal")
            rehearsed = await until(engine.events(), Result)
            assert model.requests == []  # nothing reached the API
            await engine.send("a second, still before a taker")
            await until(engine.events(), Result)
            assert model.requests == []  # the rehearsal lasts until a session takes the claude over
            engine.take_over(options)
            await engine.send("a real one")
            real = await until(engine.events(), Result)
    assert [r.result for r in of(rehearsed, Result)] == ["."] and of(rehearsed, Usage) == []
    assert of(rehearsed, Result)[0].total_cost_usd == 0 and not of(rehearsed, Result)[0].is_error
    assert [r.result for r in of(real, Result)] == ["from the model"] and len(model.requests) == 1
    assert [u.input_tokens for u in of(real, Usage) if u.path.endswith("/v1/messages")] == [100]


async def test_a_request_whose_claude_is_stopped_mid_answer_is_given_up_not_logged_as_the_upstream_failing(
    make_options, caplog
):
    """A claude stopped while its request waits for the answer (a sidecar's question given up as a session
    closes: `close(finish=False)`) left the proxy waiting on; the engine's close then closed the proxy's client
    under it, and the cut was logged as `proxy: upstream http://127.0.0.1:… failed: ` (httpx's ReadError says
    nothing) after a run that had succeeded."""
    import threading

    import anyio

    release = threading.Event()

    def slow(request):
        release.wait(30)  # the answer comes only after claude is gone
        return "too late"

    caplog.set_level(logging.DEBUG, logger="frobozz.engine.proxy")
    try:
        async with ScriptedModel(slow) as model:
            async with Engine(make_options(model)) as engine:
                await engine.start()
                await engine.send("a question nobody waits for")
                with anyio.fail_after(60):  # the request has reached the upstream: its answer is awaited
                    await eventually(lambda: model.requests)
                await engine.close(finish=False)
            release.set()
    finally:
        release.set()
    proxy = [r for r in caplog.records if r.name == "frobozz.engine.proxy"]
    assert not [r.getMessage() for r in proxy if r.levelno >= logging.WARNING]
    assert any("given up" in r.getMessage() for r in proxy)  # said, at debug level


class _ResettingServer:
    """An upstream that reads a request and resets the connection (RST): httpx's ReadError or WriteError, whose
    str() is ''."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import socket
        import struct

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def close(self) -> None:
        self.sock.close()


async def test_an_upstream_failure_is_logged_and_answered_with_a_reason_that_is_never_empty(caplog):
    """A reset connection was logged as `proxy: upstream http://127.0.0.1:… failed: ` and answered 'upstream: ':
    httpx's ReadError and WriteError from a closed or reset connection have no words of their own."""
    import anyio
    import httpx

    from frobozz.engine._proxy import Proxy

    server = _ResettingServer()
    proxy = Proxy(f"http://127.0.0.1:{server.port}", lambda usage: None)
    caplog.set_level(logging.WARNING, logger="frobozz.engine.proxy")
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(proxy.run)
            async with httpx.AsyncClient() as client:
                answer = await client.post(f"{proxy.url}/v1/messages", json={"model": "m", "messages": []})
            await proxy.aclose()
    finally:
        server.close()
    assert answer.status_code == 502
    said = answer.json()["error"]["message"]
    (record,) = [r for r in caplog.records if r.name == "frobozz.engine.proxy"]
    reason = record.getMessage().split("failed", 1)[1]
    assert reason.split(":", 1)[1].strip() and said.removeprefix("upstream:").strip(), (reason, said)
    assert ("ReadError" in reason or "WriteError" in reason or "RemoteProtocolError" in reason) and "Error" in said


@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadError(""),
        httpx.WriteError(""),
        httpx.ReadTimeout(""),
        httpx.ConnectError(""),
        httpx.RemoteProtocolError(""),
        httpx.PoolTimeout(""),
    ],
)
def test_an_upstream_error_with_no_words_of_its_own_is_described_by_its_kind_and_its_causes(error):
    import anyio

    from frobozz.engine._proxy import upstream_reason

    assert upstream_reason(error).startswith(type(error).__name__)
    try:
        try:
            try:
                raise ConnectionResetError(104, "Connection reset by peer")
            except ConnectionResetError as reset:
                raise anyio.BrokenResourceError from reset
        except anyio.BrokenResourceError as broken:
            raise error from broken
    except httpx.HTTPError as caught:
        reason = upstream_reason(caught)
    assert reason.startswith(type(error).__name__) and "BrokenResourceError" in reason
    assert "Connection reset by peer" in reason
    assert upstream_reason(httpx.ConnectError("All connection attempts failed")) == (
        "ConnectError: All connection attempts failed"
    )
