-- The memory loop's records (frobozz.memory's SessionStore): conversations, everything said in them
-- as it happens, the memories already shown in each, the facts waiting to be stored, and capsules.
CREATE TABLE loop_sessions (
    id text PRIMARY KEY,              -- the loop's own id; claude's session id may change on a restart
    namespace text NOT NULL,
    client text NOT NULL DEFAULT '',
    claude_session_id text,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_active_at timestamptz NOT NULL DEFAULT now(),
    window_started_at timestamptz NOT NULL DEFAULT now(),  -- the current context window's start
    preview text NOT NULL DEFAULT ''  -- the first thing the user said
);
CREATE INDEX loop_sessions_recent ON loop_sessions (namespace, last_active_at DESC, id);

CREATE TABLE loop_archive (
    id bigserial PRIMARY KEY,
    session_id text NOT NULL REFERENCES loop_sessions ON DELETE CASCADE,
    namespace text NOT NULL,
    turn int NOT NULL,
    kind text NOT NULL CHECK (kind IN ('user', 'assistant', 'tool_use', 'tool_result', 'usage', 'note')),
    content text NOT NULL,
    data jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    fts tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE INDEX loop_archive_session ON loop_archive (session_id, id);
CREATE INDEX loop_archive_recent ON loop_archive (namespace, created_at DESC, id DESC);
CREATE INDEX loop_archive_fts ON loop_archive USING gin (fts);

CREATE TABLE loop_seen (
    session_id text NOT NULL REFERENCES loop_sessions ON DELETE CASCADE,
    memory_id bigint NOT NULL,
    shown_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, memory_id)
);

CREATE TABLE loop_suggestions (
    id bigserial PRIMARY KEY,
    session_id text NOT NULL REFERENCES loop_sessions ON DELETE CASCADE,
    content text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    cleared_at timestamptz,
    UNIQUE (session_id, content)
);

CREATE TABLE loop_capsules (
    namespace text NOT NULL,
    period text NOT NULL,             -- what it covers, e.g. 'earlier today', 'the last session'
    until_id bigint NOT NULL,         -- the last archive row it summarises: newer rows make it stale
    summary text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, period)
);
