-- Spans kept locally (the web view's waterfall), beside whatever OTLP backend there is.
CREATE TABLE IF NOT EXISTS trace_spans (
    trace_id    text NOT NULL,
    span_id     text NOT NULL,
    parent_id   text,
    name        text NOT NULL,
    kind        text NOT NULL,
    service     text,
    started_at  timestamptz NOT NULL,
    duration_ms double precision NOT NULL,
    status      text NOT NULL,
    session_id  text,
    run_id      text,
    attributes  jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS trace_spans_run ON trace_spans (run_id) WHERE run_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS trace_spans_session ON trace_spans (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS trace_spans_started ON trace_spans (started_at);
