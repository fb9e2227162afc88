-- Letters from one context window to the next (the handoff server), beside the memories they name.
CREATE TABLE handoffs (
    id bigserial PRIMARY KEY,
    namespace text NOT NULL,
    session_id text,
    summary text NOT NULL,
    next_steps jsonb NOT NULL DEFAULT '[]'::jsonb,
    memory_ids bigint[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX handoffs_latest ON handoffs (namespace, created_at DESC, id DESC);
CREATE INDEX handoffs_by_session ON handoffs (session_id, created_at DESC);
