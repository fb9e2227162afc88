-- The agent service (frobozz.agent): sessions, their event log (what every client is relayed, by sequence
-- number), and their tool log.
CREATE TABLE agent_sessions (
    id text PRIMARY KEY,
    workspace text NOT NULL,              -- user/name under the service's root
    owner text NOT NULL,                  -- the user
    options jsonb NOT NULL DEFAULT '{}'::jsonb,
    preamble text NOT NULL DEFAULT '',    -- history and attachments, sent before the first message
    claude_session_id text,
    status text NOT NULL DEFAULT 'idle',
    usage jsonb NOT NULL DEFAULT '{}'::jsonb,
    cost_usd double precision NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_activity timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_sessions_recent ON agent_sessions (owner, last_activity DESC);

CREATE TABLE agent_events (
    session_id text NOT NULL REFERENCES agent_sessions ON DELETE CASCADE,
    seq int NOT NULL,
    kind text NOT NULL,
    data jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE agent_tool_calls (
    session_id text NOT NULL REFERENCES agent_sessions ON DELETE CASCADE,
    n int NOT NULL,
    call jsonb NOT NULL,
    PRIMARY KEY (session_id, n)
);

CREATE TABLE agent_messages (            -- the conversation as the user and the app see it (agentapi's /messages)
    session_id text NOT NULL REFERENCES agent_sessions ON DELETE CASCADE,
    n int NOT NULL,
    role text NOT NULL CHECK (role IN ('user', 'agent')),
    content text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, n)
);
