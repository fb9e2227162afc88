"""Tracing's set-up: off is nothing at all; on, the standard OTEL_* variables, read by the SDK, and what it
would only skip with a warning (a malformed header list, a protocol it cannot speak) a clear error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from frobozz import _spans
from frobozz.tracing import (
    TracingConfigError,
    TracingSettings,
    check_headers,
    check_protocol,
    configure,
    traces_endpoint,
)
from tests.otlp import receiver

SECRET = "s3cr3t-t0ken"


def _python(
    code: str, env: dict[str, str], timeout: float = 120, args: tuple[str, ...] | list[str] = ()
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env={**full, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_tracing_off_configures_nothing_and_spans_are_no_ops():
    assert configure("frobozz-test", TracingSettings(trace=False)) is None
    assert not _spans.recording()
    with _spans.span(_spans.TURN) as span:
        assert not span.is_recording()
    assert "traceparent" not in _spans.inject()


@pytest.mark.parametrize(
    "raw",
    [
        SECRET,
        f"authorization={SECRET},{SECRET}",
        f"bad key=Bearer%20{SECRET}",
        f"x-token={SECRET}%0D%0Ax-evil=1",
        f"={SECRET}",
    ],
)
def test_a_malformed_header_list_is_a_clear_error_that_never_shows_its_values(raw):
    with pytest.raises(TracingConfigError) as caught:
        check_headers({"OTEL_EXPORTER_OTLP_HEADERS": raw})
    message = str(caught.value)
    assert "OTEL_EXPORTER_OTLP_HEADERS is malformed" in message and SECRET not in message


def test_a_header_list_is_read_as_the_specification_writes_it():
    assert check_headers(
        {
            "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc, x-team=game,",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x-only-traces=1",
        }
    ) == {"authorization": "Bearer abc", "x-team": "game", "x-only-traces": "1"}
    assert check_headers({}) == {}


def test_an_unsupported_protocol_or_endpoint_is_a_clear_error():
    with pytest.raises(TracingConfigError, match="http/protobuf"):
        check_protocol({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(TracingConfigError, match="not an http"):
        traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": f"ftp://user:{SECRET}@example"})
    try:
        traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": f"ftp://user:{SECRET}@example"})
    except TracingConfigError as e:
        assert SECRET not in str(e)
    assert (
        traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"}) == "http://127.0.0.1:4318/v1/traces"
    )
    assert traces_endpoint({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:1/x"}) == "http://h:1/x"
    for unparsable in (f"http://user:{SECRET}@[::1:bad", "http://[::1:bad", "http://host:99999", "http://host:port"):
        with pytest.raises(TracingConfigError, match="OTEL_EXPORTER_OTLP_ENDPOINT is not an http") as refused:
            traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": unparsable})  # (a ValueError's traceback before)
        assert SECRET not in str(refused.value)


def test_play_with_a_malformed_header_list_stops_at_once_and_plays_nothing(frobozz_env):
    done = subprocess.run(
        [sys.executable, "-m", "frobozz", "play", "zork1", "--player", "walkthrough", "--max-turns", "2", "--trace"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OTEL_EXPORTER_OTLP_HEADERS": SECRET},
    )
    assert done.returncode == 2, done.stderr
    assert "OTEL_EXPORTER_OTLP_HEADERS is malformed" in done.stderr and SECRET not in done.stderr + done.stdout
    assert not (frobozz_env / "runs").exists()


def test_spans_reach_an_otlp_receiver_with_the_standard_variables():
    with receiver() as got:
        done = _python(
            """
            from frobozz import _spans
            from frobozz.tracing import configure
            tracing = configure("frobozz-test", force=True)
            with _spans.span(_spans.TURN, attributes={_spans.TURN_NUMBER: 1}):
                with _spans.span(_spans.RECALL):
                    pass
            tracing.shutdown()
        """,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": got.url,
                "OTEL_EXPORTER_OTLP_HEADERS": "x-team=game%20night",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=test",
            },
        )
        assert done.returncode == 0, done.stderr
        spans = got.wait_for(lambda s: len(s) == 2)
    turn, recall = sorted(spans, key=lambda s: s["name"] != _spans.TURN)
    assert recall["parent_id"] == turn["span_id"] and recall["trace_id"] == turn["trace_id"]
    assert turn["attributes"][_spans.TURN_NUMBER] == 1
    assert turn["resource"]["service.name"] == "frobozz-test"
    assert turn["resource"]["deployment.environment"] == "test"
    assert got.headers[0]["x-team"] == "game night"


def test_otel_service_name_wins_over_frobozz_own_name():
    with receiver() as got:
        done = _python(
            """
            from frobozz import _spans
            from frobozz.tracing import configure
            tracing = configure("frobozz-test", force=True)
            with _spans.span(_spans.TURN):
                pass
            tracing.shutdown()
        """,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": got.url, "OTEL_SERVICE_NAME": "my-zork-bench"},
        )
        assert done.returncode == 0, done.stderr
        spans = got.wait_for(lambda s: len(s) == 1)
    assert spans[0]["resource"]["service.name"] == "my-zork-bench"


def test_an_endpoint_that_is_down_costs_one_warning_and_the_work_goes_on():
    with receiver() as got:  # a port that was open a moment ago and is closed now
        url = got.url
    done = _python(
        """
        import logging, sys
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        from frobozz import _spans
        from frobozz.tracing import configure
        tracing = configure("frobozz-test", force=True)
        for batch in range(3):
            for i in range(200):
                with _spans.span(_spans.TURN):
                    pass
            tracing.provider.force_flush(5000)
        print("all work done")
        tracing.shutdown(timeout=2)
    """,
        {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_TIMEOUT": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "all work done" in done.stdout
    assert done.stderr.count("spans cannot be sent") == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_a_slow_endpoint_never_holds_the_work_up():
    with receiver() as got:
        got.delay = 60  # an export hangs far longer than the work takes
        done = _python(
            """
            import os, sys, time, urllib.request
            from frobozz import _spans
            from frobozz.tracing import configure
            tracing = configure("frobozz-test", force=True)
            for i in range(600):  # more than a batch: the exporter sends at once
                with _spans.span(_spans.TURN):
                    pass
            deadline = time.monotonic() + 60
            while urllib.request.urlopen(sys.argv[1]).read() == b"0":  # until an export hangs in the receiver
                assert time.monotonic() < deadline
                time.sleep(0.01)
            for i in range(5000):  # the work goes on while it hangs (the queue fills, then drops)
                with _spans.span(_spans.TURN):
                    pass
            print("all work done", flush=True)
            os._exit(0)  # (at a normal exit the SDK would give the hung export its own timeout)
        """,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": got.url, "OTEL_EXPORTER_OTLP_TIMEOUT": "120"},
            args=[got.url],
        )
        assert done.returncode == 0, done.stderr
        assert "all work done" in done.stdout
        assert not got.spans  # the receiver had answered no export when the work was done


def test_claude_s_own_telemetry_goes_to_the_same_endpoint_with_its_session_id(frobozz_env):
    """The id on claude's events, and on its resource (what backends group by), the user's own resource
    attributes kept beside it."""
    with receiver() as got:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
            "OTEL_EXPORTER_OTLP_ENDPOINT": got.url,
            "OTEL_LOGS_EXPORT_INTERVAL": "200",
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
            "OTEL_RESOURCE_ATTRIBUTES": "team=zork,session.id=theirs",
            "FROBOZZ_TRACE_KEEP_DAYS": "0",
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "frobozz",
                "play",
                "zork1",
                "--player",
                "walkthrough",
                "--max-turns",
                "3",
                "--trace",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        spans = got.wait_for(lambda spans: any(s["name"] == _spans.SESSION for s in spans))
    [session] = [s for s in spans if s["name"] == _spans.SESSION]
    events = got.log_attributes()  # claude's own events, beside Frobozz's spans
    assert events and {e.get("session.id") for e in events} == {session["attributes"][_spans.SESSION_ID]}
    resources = got.log_resources()
    assert resources and all(
        r.get("session.id") == session["attributes"][_spans.SESSION_ID] and r.get("team") == "zork" for r in resources
    )
    assert session["resource"].get("team") == "zork"  # Frobozz's own spans keep the user's attributes too


def test_every_span_under_one_with_a_session_id_carries_it_too():
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import set_span_in_context

    from frobozz.tracing import SessionOnEverySpan

    kept = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SessionOnEverySpan())
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("t")
    alone = tracer.start_span(_spans.GAME_ACT)  # no session above it: none made up
    alone.end()
    turn = tracer.start_span(_spans.TURN, attributes={_spans.SESSION_ID: "sess-1"})
    act = tracer.start_span(_spans.GAME_ACT, context=set_span_in_context(turn))
    own = tracer.start_span(
        _spans.HANDOFF_WRITE, context=set_span_in_context(act), attributes={_spans.SESSION_ID: "sess-2"}
    )  # its own id is kept
    for span in (own, act, turn):
        span.end()
    found = {
        s.name + str(i): (s.attributes or {}).get(_spans.SESSION_ID) for i, s in enumerate(kept.get_finished_spans())
    }
    assert list(found.values()) == [None, "sess-2", "sess-1", "sess-1"]


def test_a_server_s_spans_carry_the_session_id_its_caller_sent_as_baggage_and_no_hostile_one():
    """The engine sends claude's session id with a tool call's traceparent (W3C baggage in the MCP request's
    `_meta`); a Frobozz server in another process puts it on its span and everything under it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import set_span_in_context

    from frobozz.tracing import SessionOnEverySpan

    kept = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SessionOnEverySpan())
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("t")
    call = tracer.start_span(_spans.EXECUTE_TOOL)  # the engine's, in the caller's process
    meta = _spans.inject(span=call, session_id="sess-9")
    assert meta["traceparent"] and "session.id=sess-9" in meta["baggage"]
    served = tracer.start_span("tools/call search", context=_spans.extract(meta))  # the server's, from `_meta`
    under = tracer.start_span(_spans.SQL, context=set_span_in_context(served))
    for hostile in ("x" * 5000, "a\x00b"):
        odd = tracer.start_span(
            "tools/call search",
            context=_spans.extract({**_spans.inject(span=call), "baggage": f"session.id={hostile}"}),
        )
        odd.end()
    for span in (under, served, call):
        span.end()
    found = [(s.name, (s.attributes or {}).get(_spans.SESSION_ID)) for s in kept.get_finished_spans()]
    assert found == [
        ("tools/call search", None),
        ("tools/call search", None),
        (_spans.SQL, "sess-9"),
        ("tools/call search", "sess-9"),
        (_spans.EXECUTE_TOOL, None),
    ]


def _stdio_game_server(endpoint: str) -> subprocess.Popen[bytes]:
    """`frobozz serve game` over stdio as claude starts it, tracing to `endpoint`, with no timed export (only a
    flush sends)."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "FROBOZZ_TRACE": "true",
        "FROBOZZ_TRACE_KEEP_DAYS": "0",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "600000",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "frobozz", "serve", "game"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def _listed(server: subprocess.Popen[bytes]) -> None:
    """The server initialized and asked for its tools (a `tools/list` span, waiting to be sent)."""
    assert server.stdin is not None and server.stdout is not None
    initialize = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    for message in (
        {"id": 1, "method": "initialize", "params": initialize},
        {"method": "notifications/initialized"},
        {"id": 2, "method": "tools/list", "params": {}},
    ):
        server.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        server.stdin.flush()
        if "id" in message:
            while json.loads(server.stdout.readline()).get("id") != message["id"]:
                pass


def test_a_stdio_server_sends_its_spans_as_soon_as_claude_asks_it_to_stop():
    """claude stops a stdio MCP server with SIGINT, SIGTERM 100 ms later, SIGKILL 400 ms after that: a loaded
    machine may not send the last spans in 400 ms, so they leave at the SIGINT, while stdin is still open."""
    with receiver() as got:
        server = _stdio_game_server(got.url)
        try:
            _listed(server)
            server.send_signal(signal.SIGINT)
            spans = got.wait_for(lambda s: any(x["name"] == "tools/list" for x in s), timeout=30)
        finally:
            server.kill()
            server.wait()
    assert [s["name"] for s in spans].count("tools/list") == 1


def test_a_stdio_server_told_to_stop_twice_while_its_spans_go_to_a_slow_backend_sends_them_and_ends():
    """claude's SIGTERM comes 100 ms after its SIGINT: while the spans the SIGINT sends are on their way, to a
    backend slower than that. The SIGTERM's own flush, run inside the first on the same thread, waited on a lock
    the first held: the server hung until SIGKILL, its spans unsent."""
    with receiver() as got:
        got.delay = 1.0  # each export waits a second for its answer
        server = _stdio_game_server(got.url)
        try:
            _listed(server)
            server.send_signal(signal.SIGINT)
            got.wait_for(lambda s: got.requests > 0, timeout=30)  # the SIGINT's export has come, its answer waits
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=30) == -signal.SIGTERM  # ended as SIGTERM ends it, once its spans went
            spans = got.wait_for(lambda s: any(x["name"] == "tools/list" for x in s), timeout=30)
        finally:
            server.kill()
            server.wait()
    assert [s["name"] for s in spans].count("tools/list") == 1
