"""The lean OTLP encoding: for every kind of span the SDK makes, its bytes parse back into the very message
the exporter's own `encode_spans` builds; what it does not write goes the exporter's own way; and the
exporter built on it delivers to a real OTLP receiver."""

from __future__ import annotations

import math

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

from frobozz import _spans
from frobozz.tracing._otlp import LeanOTLPExporter, Unsupported, encode
from tests.otlp import receiver

ODD_VALUES = {
    "text": "the brass lantern",
    "empty": "",
    "unicode": "Zork — ǅ 🏰 \u0000 nul",
    "long": "x" * 70_000,  # a length past two varint bytes
    "true": True,
    "false": False,
    "zero": 0,
    "negative": -5,
    "big": 2**63 - 1,
    "most negative": -(2**63),
    "float": 0.1,
    "float zero": 0.0,
    "infinite": math.inf,
    "strings": ("a", "", "ǅ"),
    "ints": (1, -1, 0),
    "floats": (1.5, -0.0),
    "bools": (True, False),
    "no items": (),
}


def _made(make) -> list[ReadableSpan]:
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "frobozz-test", "team": "zork"}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    make(provider)
    return list(kept.get_finished_spans())


def _same(spans: list[ReadableSpan]) -> None:
    assert ExportTraceServiceRequest.FromString(encode(spans)) == encode_spans(spans)


def test_nothing_is_an_empty_request():
    assert encode([]) == b""
    _same([])


def test_every_attribute_type_parses_back_as_the_exporter_builds_it():
    def make(provider):
        tracer = provider.get_tracer("frobozz")
        tracer.start_span(_spans.TURN, attributes=ODD_VALUES).end()
        tracer.start_span("").end()  # no name, no attributes
        tracer.start_span(_spans.TURN, attributes=ODD_VALUES).end()  # the same again: from the memo

    _same(_made(make))


def test_a_negative_zero_after_a_zero_under_the_same_key_keeps_its_sign():
    def make(provider):
        tracer = provider.get_tracer("frobozz")
        tracer.start_span("a", attributes={"x": 0.0}).end()
        tracer.start_span("b", attributes={"x": -0.0}).end()  # equal to 0.0, and hashed the same: not memoized

    _same(_made(make))


def test_events_links_status_kinds_parents_and_trace_state_parse_back_as_the_exporter_builds_them():
    def make(provider):
        tracer = provider.get_tracer("frobozz", "1.2.3", schema_url="https://opentelemetry.io/schemas/1.21.0")
        remote = SpanContext(
            trace_id=2**127 + 5,
            span_id=2**63 + 7,
            is_remote=True,
            trace_flags=TraceFlags(1),
            trace_state=TraceState([("vendor", "value"), ("other", "x")]),
        )
        parent = tracer.start_span(
            _spans.SESSION, kind=SpanKind.SERVER, context=set_span_in_context(NonRecordingSpan(remote))
        )
        for kind in SpanKind:
            child = tracer.start_span(
                f"{kind.name}",
                kind=kind,
                context=set_span_in_context(parent),
                links=[Link(remote, {"why": "the session", "n": 3}), Link(parent.get_span_context())],
            )
            child.add_event(_spans.COMPACTION, {_spans.COMPACTION_TOKENS: 1200, "trigger": "auto"})
            child.add_event("plain")
            child.record_exception(ValueError("the troll blocks the way"))
            child.set_status(Status(StatusCode.ERROR, "the troll blocks the way"))
            child.end()
        ok = tracer.start_span("ok", context=set_span_in_context(parent))
        ok.set_status(Status(StatusCode.OK))
        ok.end()
        parent.end()
        other = provider.get_tracer("frobozz.memory")  # a second scope in the same batch
        other.start_span(_spans.RECALL).end()

    spans = _made(make)
    assert len(spans) == len(SpanKind) + 3
    _same(spans)


def test_spans_of_two_resources_are_grouped_as_the_exporter_groups_them():
    first = _made(lambda p: p.get_tracer("a").start_span("one").end())
    second = _made(lambda p: p.get_tracer("a").start_span("two").end())  # an equal resource, another object
    kept = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource({"service.name": "cortex"}, schema_url="https://x/1"))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    provider.get_tracer("b").start_span("three").end()
    _same([*first, *kept.get_finished_spans(), *second])


def test_a_value_the_sdk_never_makes_is_left_to_the_exporter_s_own_encoding():
    (span,) = _made(lambda p: p.get_tracer("a").start_span("odd").end())
    odd = ReadableSpan(
        name="odd",
        context=span.context,
        resource=span.resource,
        attributes={"nested": {"a": 1}},  # a mapping: not an attribute value the SDK lets through
        instrumentation_scope=InstrumentationScope("a"),
    )
    with pytest.raises(Unsupported):
        encode([odd])
    for huge in (2**63, 2**64, -(2**63) - 1):  # not an int64: the SDK's encoding drops the attribute, not the batch
        with pytest.raises(Unsupported):
            encode([ReadableSpan(name="odd", context=span.context, resource=span.resource, attributes={"n": huge})])
    with receiver() as got:
        exporter = LeanOTLPExporter(endpoint=got.url + "/v1/traces")
        assert exporter.export([odd]) is SpanExportResult.SUCCESS  # the exporter's own encoding sent it
        spans = got.wait_for(lambda s: len(s) == 1)
        exporter.shutdown()
    assert spans[0]["attributes"]["nested"] == {"a": 1}


def test_the_lean_exporter_delivers_the_engine_s_spans_to_a_real_receiver():
    spans = _made(
        lambda p: (
            p.get_tracer("frobozz")
            .start_span(
                "chat claude-sonnet-4-5",
                kind=SpanKind.CLIENT,
                attributes={_spans.GEN_AI_REQUEST_MODEL: "claude-sonnet-4-5", _spans.GEN_AI_INPUT_TOKENS: 1200},
            )
            .end()
        )
    )
    with receiver() as got:
        exporter = LeanOTLPExporter(endpoint=got.url + "/v1/traces")
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        (span,) = got.wait_for(lambda s: len(s) == 1)
        exporter.shutdown()
    assert span["name"] == "chat claude-sonnet-4-5"
    assert span["attributes"][_spans.GEN_AI_INPUT_TOKENS] == 1200
    assert span["resource"]["team"] == "zork"


def test_a_hurried_exporter_makes_one_attempt_at_a_backend_that_is_unavailable_and_no_retry():
    """`hurry` sets the SDK client's own shutdown event (a private name: an SDK that renamed it would make every
    exit with the backend down wait through the retries again, 1 + 2 + 4 s, up to the exit's 3 s bound)."""
    spans = _made(lambda p: p.get_tracer("frobozz").start_span("turn").end())
    with receiver() as got:
        got.status = 503  # a status the exporter retries after a wait
        exporter = LeanOTLPExporter(endpoint=got.url + "/v1/traces")
        exporter.hurry()
        assert exporter.export(spans) is SpanExportResult.FAILURE
        assert got.requests == 1
        exporter.shutdown()


def test_a_span_past_its_limits_says_what_it_dropped_in_the_exporter_s_very_bytes():
    """Dropped attributes, events and links are counted, each count written in its field's order."""
    from opentelemetry.sdk.trace import SpanLimits
    from opentelemetry.trace import Link

    kept = InMemorySpanExporter()
    limits = SpanLimits(max_span_attributes=1, max_events=1, max_links=1)
    provider = TracerProvider(resource=Resource({"service.name": "frobozz-test"}), span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("frobozz")
    linked = tracer.start_span("linked")
    linked.end()
    links = [Link(linked.get_span_context()), Link(linked.get_span_context())]
    span = tracer.start_span("full", attributes={"a": 1, "b": 2}, links=links)
    span.add_event("one")
    span.add_event("two")
    span.end()
    spans = list(kept.get_finished_spans())
    assert (spans[-1].dropped_attributes, spans[-1].dropped_events, spans[-1].dropped_links) == (1, 1, 1)
    _same(spans)
    assert encode(spans) == encode_spans(spans).SerializeToString()
