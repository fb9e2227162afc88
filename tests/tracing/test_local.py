"""Spans kept locally in Postgres, beside the OTLP backend: found by run, pruned past their time, and
nothing on a database that never kept any."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import asyncpg
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult

from frobozz import _spans as S
from frobozz.tracing import LocalSpans, prune, run_spans
from tests.otlp import receiver

pytestmark = pytest.mark.anyio


async def test_a_database_that_kept_no_spans_has_none_for_any_run(cortex_settings):
    connection = await asyncpg.connect(cortex_settings.database_url.get_secret_value())
    try:
        assert await run_spans(connection, "20261124-000000-abcdef") == []
    finally:
        await connection.close()


async def test_a_traced_process_keeps_its_spans_by_run_and_old_ones_are_pruned(cortex_settings):
    url = cortex_settings.database_url.get_secret_value()
    code = textwrap.dedent("""
        from frobozz import _spans as S
        from frobozz.tracing import configure
        tracing = configure("frobozz-test", force=True)
        with S.span(S.TURN, attributes={S.RUN_ID: "run-1", S.SESSION_ID: "sess-1"}):
            with S.span(S.CHAT, attributes={S.GEN_AI_INPUT_TOKENS: 12}):
                pass
            try:
                with S.span(S.GAME_ACT):
                    raise ValueError("the game broke")
            except ValueError:
                pass
        with S.span(S.TURN, attributes={S.RUN_ID: "run-2"}):
            pass
        tracing.shutdown()
    """)
    with receiver() as got:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
            "OTEL_EXPORTER_OTLP_ENDPOINT": got.url,
            "FROBOZZ_DATABASE_URL": url,
        }
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    connection = await asyncpg.connect(url)
    try:
        kept = await run_spans(connection, "run-1")
        assert [s["name"] for s in kept] == [S.TURN, S.CHAT, S.GAME_ACT]
        turn, chat, act = kept
        assert chat["parent_id"] == turn["span_id"] and chat["attributes"][S.GEN_AI_INPUT_TOKENS] == 12
        assert act["status"] == "error" and turn["session_id"] == "sess-1" and turn["service"] == "frobozz-test"
        assert [s["name"] for s in await run_spans(connection, "run-2")] == [S.TURN]
        await connection.execute(
            "UPDATE trace_spans SET started_at = now() - interval '10 days' WHERE run_id = 'run-2'"
        )
        assert await prune(connection, keep_days=7) == 1
        assert await run_spans(connection, "run-2") == [] and len(await run_spans(connection, "run-1")) == 3
    finally:
        await connection.close()


async def test_with_no_database_url_spans_are_kept_in_the_embedded_postgres(postgres, frobozz_env):
    """The default everywhere in Frobozz: no FROBOZZ_DATABASE_URL, the embedded Postgres in the data directory
    (here the session's own, which the traced process finds running there, as a second Frobozz process would)."""
    frobozz_env.mkdir(parents=True, exist_ok=True)
    (frobozz_env / "postgres").symlink_to(postgres.pgdata, target_is_directory=True)
    run_id = f"run-embedded-{os.getpid()}"
    code = textwrap.dedent(f"""
        from frobozz import _spans as S
        from frobozz.cli._trace import start_tracing
        from frobozz.tracing import current
        start_tracing(True, "frobozz-test")
        with S.span(S.TURN, attributes={{S.RUN_ID: {run_id!r}}}):
            with S.span(S.CHAT):
                pass
        current().shutdown(timeout=60)
    """)
    try:
        with receiver() as got:
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "FROBOZZ_DATABASE_URL"))},
                "OTEL_EXPORTER_OTLP_ENDPOINT": got.url,
            }
            done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    finally:  # not the test's own embedded Postgres: the data directory's teardown must not stop the session's
        (frobozz_env / "postgres").unlink()
    assert done.returncode == 0, done.stderr
    assert "cannot be kept" not in done.stderr
    connection = await asyncpg.connect(postgres.get_uri())
    try:
        kept = await run_spans(connection, run_id)
    finally:
        await connection.close()
    assert [s["name"] for s in kept] == [S.TURN, S.CHAT]


def test_a_database_that_cannot_be_found_is_said_once_and_the_spans_are_dropped(caplog):
    """(Its message never repeats the error's own text, which may name the database's address.)"""

    async def nowhere() -> str:
        raise OSError("no Postgres here")

    local = LocalSpans(nowhere, keep_days=7, find_wait=30)
    spans = []
    for name in ("one", "two"):
        span = TracerProvider().get_tracer("t").start_span(name)
        span.end()
        spans.append(span)
    with caplog.at_level("WARNING", logger="frobozz.tracing"):
        assert local.export(spans[:1]) is SpanExportResult.FAILURE
        assert local.export(spans[1:]) is SpanExportResult.FAILURE
    said = [r.getMessage() for r in caplog.records if "cannot be kept" in r.getMessage()]
    assert len(said) == 1 and "OSError" in said[0] and "no Postgres here" not in said[0]


async def test_spans_flushed_from_a_thread_whose_event_loop_runs_are_kept(cortex_settings):
    """A flush may come in the middle of the work (a SIGTERM's handler, on the loop's thread): this test's own."""
    url = cortex_settings.database_url.get_secret_value()
    tracer = TracerProvider().get_tracer("t")
    span = tracer.start_span(S.TURN, attributes={S.RUN_ID: "run-in-a-loop"})
    span.end()
    later = tracer.start_span(S.GAME_ACT, attributes={S.RUN_ID: "run-in-a-loop"})
    later.end()
    local = LocalSpans(url, keep_days=7)
    try:
        assert local.export([span]) is SpanExportResult.SUCCESS
        assert local.export([span]) is SpanExportResult.SUCCESS  # on the same connection, kept between batches
        # a batch with a span kept already: the new one is kept all the same, the old one not twice
        assert local.export([span, later]) is SpanExportResult.SUCCESS
    finally:
        local.shutdown()
    connection = await asyncpg.connect(url)
    try:
        assert sorted(s["name"] for s in await run_spans(connection, "run-in-a-loop")) == [S.GAME_ACT, S.TURN]
    finally:
        await connection.close()


async def test_a_span_with_odd_attribute_values_is_kept_with_its_batch(cortex_settings):
    """jsonb refuses `Infinity` and `NaN` (what json writes for them): such a float is kept as null, and the
    rest of the span, and of its batch, as they were (tuples as lists, an int past 64 bits as the number)."""
    url = cortex_settings.database_url.get_secret_value()
    tracer = TracerProvider().get_tracer("t")
    odd = tracer.start_span(
        S.CHAT,
        attributes={
            S.RUN_ID: "run-odd",
            "infinite": float("inf"),
            "nan": float("nan"),
            "ids": ("a", "b"),
            "ǅ": "🏰",
            "n": 3,
        },
    )
    odd.end()
    huge = tracer.start_span(S.GAME_ACT, attributes={S.RUN_ID: "run-odd", "huge": 2**70})
    huge.end()
    plain = tracer.start_span(S.TURN, attributes={S.RUN_ID: "run-odd"})
    plain.end()
    local = LocalSpans(url, keep_days=7)
    try:
        assert local.export([odd, huge, plain]) is SpanExportResult.SUCCESS
    finally:
        local.shutdown()
    connection = await asyncpg.connect(url)
    try:
        kept = {s["name"]: s["attributes"] for s in await run_spans(connection, "run-odd")}
    finally:
        await connection.close()
    assert kept[S.CHAT] == {S.RUN_ID: "run-odd", "infinite": None, "nan": None, "ids": ["a", "b"], "ǅ": "🏰", "n": 3}
    assert kept[S.GAME_ACT]["huge"] == 2**70 and S.TURN in kept
