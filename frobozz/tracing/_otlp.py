"""The OTLP exporter with a leaner encoding: the same `ExportTraceServiceRequest`, written as protobuf's wire
bytes directly instead of through a message object per span, attribute and value.

The exporter's own encoder (`encode_spans`) builds four protobuf objects per attribute and was most of
tracing's CPU on a scripted turn (~60 µs a span); this writes a span in a fraction of that, and an
attribute it has written before (a key and its value: the operation, the provider, the session's id) is
copied from a small memo. Field numbers come from the OTLP descriptors the exporter ships, not from here.
Anything this does not write exactly as the exporter would (a value of a type the SDK does not make, an
exporter whose internals moved) is left to the exporter's own encoding, and
`tests/tracing/test_otlp.py` holds the bytes to the exporter's message, parsed back, for every kind of span.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as PbResource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, SpanFlags, Status
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanKind

log = logging.getLogger("frobozz.tracing")
_MEMO_MAX = 4096  # attributes kept written (keys and values repeat across spans: a bound, not a leak)
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


class Unsupported(ValueError):
    """A value this encoding does not write (the exporter's own encoding takes the batch)."""


def _tag(message: Any, field: str, wire: int) -> bytes:
    return _varint(message.DESCRIPTOR.fields_by_name[field].number << 3 | wire)


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 two's complement, ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


_REQUEST_RESOURCE_SPANS = _tag(ExportTraceServiceRequest, "resource_spans", _BYTES)
_RS_RESOURCE, _RS_SCOPE_SPANS, _RS_SCHEMA = (
    _tag(ResourceSpans, name, _BYTES) for name in ("resource", "scope_spans", "schema_url")
)
_RES_ATTRIBUTES = _tag(PbResource, "attributes", _BYTES)
_SS_SCOPE, _SS_SPANS, _SS_SCHEMA = (_tag(ScopeSpans, name, _BYTES) for name in ("scope", "spans", "schema_url"))
_SCOPE_NAME, _SCOPE_VERSION, _SCOPE_ATTRIBUTES = (
    _tag(InstrumentationScope, name, _BYTES) for name in ("name", "version", "attributes")
)
_S_TRACE_ID, _S_SPAN_ID, _S_TRACE_STATE, _S_PARENT, _S_NAME, _S_ATTRIBUTES, _S_EVENTS, _S_LINKS, _S_STATUS = (
    _tag(Span, name, _BYTES)
    for name in (
        "trace_id",
        "span_id",
        "trace_state",
        "parent_span_id",
        "name",
        "attributes",
        "events",
        "links",
        "status",
    )
)
_S_KIND, _S_DROPPED_ATTRIBUTES, _S_DROPPED_EVENTS, _S_DROPPED_LINKS = (
    _tag(Span, name, _VARINT)
    for name in ("kind", "dropped_attributes_count", "dropped_events_count", "dropped_links_count")
)
_S_START, _S_END = _tag(Span, "start_time_unix_nano", _FIXED64), _tag(Span, "end_time_unix_nano", _FIXED64)
_S_FLAGS = _tag(Span, "flags", _FIXED32)
_E_TIME = _tag(Span.Event, "time_unix_nano", _FIXED64)
_E_NAME, _E_ATTRIBUTES = _tag(Span.Event, "name", _BYTES), _tag(Span.Event, "attributes", _BYTES)
_E_DROPPED = _tag(Span.Event, "dropped_attributes_count", _VARINT)
_L_TRACE_ID, _L_SPAN_ID, _L_ATTRIBUTES = (_tag(Span.Link, n, _BYTES) for n in ("trace_id", "span_id", "attributes"))
_L_DROPPED, _L_FLAGS = _tag(Span.Link, "dropped_attributes_count", _VARINT), _tag(Span.Link, "flags", _FIXED32)
_ST_MESSAGE, _ST_CODE = _tag(Status, "message", _BYTES), _tag(Status, "code", _VARINT)
_KV_KEY, _KV_VALUE = _tag(KeyValue, "key", _BYTES), _tag(KeyValue, "value", _BYTES)
_AV_STRING, _AV_BYTES, _AV_ARRAY = (_tag(AnyValue, n, _BYTES) for n in ("string_value", "bytes_value", "array_value"))
_AV_BOOL, _AV_INT = _tag(AnyValue, "bool_value", _VARINT), _tag(AnyValue, "int_value", _VARINT)
_AV_DOUBLE = _tag(AnyValue, "double_value", _FIXED64)
_ARRAY_VALUES = _tag(ArrayValue, "values", _BYTES)
_KINDS = {kind: Span.SpanKind.Value(f"SPAN_KIND_{kind.name}") for kind in SpanKind}
_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_fixed64 = struct.Struct("<Q").pack
_fixed32 = struct.Struct("<I").pack
_double = struct.Struct("<d").pack
_memo: dict[tuple[str, type, Any], bytes] = {}
_SCALARS = frozenset((str, bool, int))  # hashable, told apart by their type (True is not 1); not float: 0.0 == -0.0


def _value(value: Any) -> bytes:
    """An AnyValue's bytes (its one field: set even when it is its type's zero, as a oneof is)."""
    if isinstance(value, bool):
        return _AV_BOOL + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        return _field(_AV_STRING, value.encode())
    if isinstance(value, int):
        if not -(1 << 63) <= value < 1 << 63:  # not an int64: the SDK drops the attribute; its encoding does that
            raise Unsupported("an integer outside int64")
        return _AV_INT + _varint(value)
    if isinstance(value, float):
        return _AV_DOUBLE + _double(value)
    if isinstance(value, bytes):
        return _field(_AV_BYTES, value)
    if isinstance(value, tuple | list):
        return _field(_AV_ARRAY, b"".join(_field(_ARRAY_VALUES, _value(v)) for v in value))
    if value is None:
        return b""
    raise Unsupported(type(value).__name__)


def _attributes(tag: bytes, attributes: Any) -> bytes:
    """Repeated KeyValues under `tag`; each KeyValue's length-prefixed bytes memoized by key, type and value."""
    if not attributes:
        return b""
    out: list[bytes] = []
    for key, value in attributes.items():
        memo = (key, type(value), value) if type(value) in _SCALARS else None
        written = _memo.get(memo) if memo is not None else None
        if written is None:
            body = _field(_KV_KEY, key.encode()) + _field(_KV_VALUE, _value(value))
            written = _varint(len(body)) + body
            if memo is not None:
                if len(_memo) >= _MEMO_MAX:
                    _memo.clear()
                _memo[memo] = written
        out += (tag, written)
    return b"".join(out)


def _flags(parent: Any) -> bytes:
    return _fixed32(_HAS_IS_REMOTE | (_IS_REMOTE if parent is not None and parent.is_remote else 0))


def _span(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context is not None
    parts = [_S_TRACE_ID, b"\x10", context.trace_id.to_bytes(16, "big"), _S_SPAN_ID, b"\x08"]
    parts.append(context.span_id.to_bytes(8, "big"))
    state = ",".join(f"{k}={v}" for k, v in context.trace_state.items()) if context.trace_state is not None else ""
    if state:
        parts.append(_field(_S_TRACE_STATE, state.encode()))
    if span.parent is not None:
        parts += (_S_PARENT, b"\x08", span.parent.span_id.to_bytes(8, "big"))
    if span.name:
        parts.append(_field(_S_NAME, span.name.encode()))
    kind = _KINDS[span.kind]
    if kind:
        parts += (_S_KIND, _varint(kind))
    if span.start_time:
        parts += (_S_START, _fixed64(span.start_time))
    if span.end_time:
        parts += (_S_END, _fixed64(span.end_time))
    parts.append(_attributes(_S_ATTRIBUTES, span.attributes))
    if span.dropped_attributes:  # each field in its number's order, as protobuf writes them
        parts += (_S_DROPPED_ATTRIBUTES, _varint(span.dropped_attributes))
    for event in span.events:
        body = [_E_TIME + _fixed64(event.timestamp)] if event.timestamp else []
        if event.name:
            body.append(_field(_E_NAME, event.name.encode()))
        body.append(_attributes(_E_ATTRIBUTES, event.attributes))
        if event.dropped_attributes:
            body.append(_E_DROPPED + _varint(event.dropped_attributes))
        parts.append(_field(_S_EVENTS, b"".join(body)))
    if span.dropped_events:
        parts += (_S_DROPPED_EVENTS, _varint(span.dropped_events))
    for link in span.links:
        body = [_L_TRACE_ID, b"\x10", link.context.trace_id.to_bytes(16, "big")]
        body += (_L_SPAN_ID, b"\x08", link.context.span_id.to_bytes(8, "big"))
        body.append(_attributes(_L_ATTRIBUTES, link.attributes))
        if link.dropped_attributes:
            body.append(_L_DROPPED + _varint(link.dropped_attributes))
        body += (_L_FLAGS, _flags(link.context))
        parts.append(_field(_S_LINKS, b"".join(body)))
    if span.dropped_links:
        parts += (_S_DROPPED_LINKS, _varint(span.dropped_links))
    status = b""
    if span.status.description:
        status += _field(_ST_MESSAGE, span.status.description.encode())
    if span.status.status_code.value:
        status += _ST_CODE + _varint(span.status.status_code.value)
    parts += (_field(_S_STATUS, status), _S_FLAGS, _flags(span.parent))
    return b"".join(parts)


def _scope(scope: Any) -> bytes:
    if scope is None:
        return b""
    out = _field(_SCOPE_NAME, scope.name.encode()) if scope.name else b""
    if scope.version:
        out += _field(_SCOPE_VERSION, scope.version.encode())
    return out + _attributes(_SCOPE_ATTRIBUTES, scope.attributes)


def _find(groups: list[tuple[Any, list[Any]]], key: Any) -> list[Any]:
    """The group of `key` (by identity first: a provider's spans share its resource and scope), made if new."""
    for known, members in groups:
        if known is key:
            return members
    for known, members in groups:
        if known == key:
            return members
    groups.append((key, []))
    return groups[-1][1]


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """The serialized `ExportTraceServiceRequest` of `spans`, grouped by resource then scope in the order first
    seen, as the exporter's `encode_spans` groups them. Raises `Unsupported` for what it does not write."""
    resources: list[tuple[Any, list[Any]]] = []
    for span in spans:
        scopes = _find(resources, span.resource)
        _find(scopes, span.instrumentation_scope or None).append(_span(span))
    out = []
    for resource, scopes in resources:
        body = [_field(_RS_RESOURCE, _attributes(_RES_ATTRIBUTES, resource.attributes))]
        for scope, encoded in scopes:
            inner = [_field(_SS_SCOPE, _scope(scope))]
            inner += (_field(_SS_SPANS, s) for s in encoded)
            if scope is not None and scope.schema_url:
                inner.append(_field(_SS_SCHEMA, scope.schema_url.encode()))
            body.append(_field(_RS_SCOPE_SPANS, b"".join(inner)))
        if resource.schema_url:
            body.append(_field(_RS_SCHEMA, resource.schema_url.encode()))
        out.append(_field(_REQUEST_RESOURCE_SPANS, b"".join(body)))
    return b"".join(out)


class LeanOTLPExporter(OTLPSpanExporter):
    """`OTLPSpanExporter` sending `encode`'s bytes through its own client (its retries, timeout, size limit and
    metrics); a batch `encode` does not write, or an exporter whose internals moved, is its own export."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lean = all(hasattr(self, name) for name in ("_client", "_metrics", "_max_request_size", "_shutdown"))

    def hurry(self) -> None:
        """From now on an export makes its attempt and no retry after a wait (the client's backoff, 1 + 2 + 4 s,
        as its shutdown cuts it): the process is ending, and a backend that is down must not hold its exit up.
        A retry wait under way ends at once."""
        event = getattr(getattr(self, "_client", None), "_shutdown_event", None)
        if isinstance(event, threading.Event):
            event.set()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self._lean or self._shutdown:
            return super().export(spans)
        try:
            data = encode(spans)
        except Exception as e:  # noqa: BLE001 - Unsupported, or a span the SDK made oddly: the exporter's own way
            log.debug("tracing: a batch is encoded by the exporter itself (%s)", e)
            return super().export(spans)
        max_size = self._max_request_size
        with self._metrics.export_operation(len(spans)) as result:
            if max_size and max_size > 0 and len(data) > max_size:
                log.warning("Dropping span batch: serialized size %d bytes exceeds %d bytes.", len(data), max_size)
                return SpanExportResult.FAILURE
            sent = self._client.export(data)
            if not sent.success:
                result.error = sent.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
