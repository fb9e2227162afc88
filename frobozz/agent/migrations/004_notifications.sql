-- Notifications of the agent service: Web Push subscriptions (per session, or per user), webhooks (per user,
-- signed with their secret; paused with a record after failing again and again), and the service's one VAPID
-- key, shared by every instance (a browser's subscription names it).
CREATE TABLE agent_vapid (
    id int PRIMARY KEY CHECK (id = 1),
    private_pem text NOT NULL,
    public_key text NOT NULL                -- base64url of the uncompressed point: the applicationServerKey
);

CREATE TABLE agent_push_subscriptions (
    id text PRIMARY KEY,
    owner text NOT NULL,
    session_id text REFERENCES agent_sessions ON DELETE CASCADE,   -- null: every session of the user
    endpoint text NOT NULL,
    p256dh text NOT NULL,
    auth text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_push_owner ON agent_push_subscriptions (owner);

CREATE TABLE agent_webhooks (
    id text PRIMARY KEY,
    owner text NOT NULL,
    url text NOT NULL,
    secret text NOT NULL,
    failures int NOT NULL DEFAULT 0,        -- deliveries that failed after every retry, in a row
    paused_at timestamptz,                  -- set when failures reach the bound: no more deliveries
    paused_reason text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_webhooks_owner ON agent_webhooks (owner);
