-- Many instances of the agent service on one database: one instance at a time runs a session's claude (a
-- lease with a fencing token), messages reach it through an inbox in the order they were accepted, and a
-- question's answer is the first one written (the table decides, whichever instance took it).
CREATE SEQUENCE agent_lease_tokens;

CREATE TABLE agent_leases (
    session_id text PRIMARY KEY REFERENCES agent_sessions ON DELETE CASCADE,
    instance text NOT NULL,               -- the instance running the session's claude
    token bigint NOT NULL,                -- the fencing token: larger with every acquisition
    expires timestamptz NOT NULL          -- renewed while the instance lives
);
CREATE INDEX agent_leases_instance ON agent_leases (instance);

CREATE TABLE agent_inbox (
    id bigserial PRIMARY KEY,             -- the order the messages were accepted in
    session_id text NOT NULL REFERENCES agent_sessions ON DELETE CASCADE,
    message_id text NOT NULL,
    content text NOT NULL,
    done boolean NOT NULL DEFAULT false,  -- answered (set with the turn's done, in the same transaction)
    at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (session_id, message_id)
);
CREATE INDEX agent_inbox_waiting ON agent_inbox (session_id, id) WHERE NOT done;

CREATE TABLE agent_answers (
    session_id text NOT NULL REFERENCES agent_sessions ON DELETE CASCADE,
    question_id text NOT NULL,
    answers jsonb,                        -- null: the question timed out unanswered
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (session_id, question_id)
);

-- the turn a conversation message belongs to, so a turn taken over is not recorded twice
ALTER TABLE agent_messages ADD COLUMN message_id text;
CREATE UNIQUE INDEX agent_messages_turn ON agent_messages (session_id, message_id, role) WHERE message_id IS NOT NULL;

-- Images a message carries (uploaded, or sent inline as base64), kept so that whichever instance runs the
-- turn passes them to the model.
CREATE TABLE agent_files (
    id text PRIMARY KEY,
    session_id text NOT NULL REFERENCES agent_sessions ON DELETE CASCADE,
    media_type text NOT NULL,
    data bytea NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE agent_inbox ADD COLUMN files text[] NOT NULL DEFAULT '{}';
