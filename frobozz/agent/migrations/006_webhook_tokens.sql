-- Webhooks per token as well as per user: a session records the scoped token that made it (its name, never the
-- secret; null: the hub's one token, or the service used in process), and a webhook is for a user (every
-- session of theirs) or for a token (the sessions that token made). A paused webhook's deliveries are kept (at
-- most FROBOZZ_AGENT_WEBHOOK_KEEP a webhook: beyond it the oldest go, counted in `dropped`) for its resumption.
ALTER TABLE agent_sessions ADD COLUMN token text;

ALTER TABLE agent_webhooks ALTER COLUMN owner DROP NOT NULL;
ALTER TABLE agent_webhooks ADD COLUMN token text;
ALTER TABLE agent_webhooks ADD COLUMN dropped bigint NOT NULL DEFAULT 0;  -- deliveries let go over the bound
ALTER TABLE agent_webhooks ADD CONSTRAINT agent_webhooks_for_one CHECK ((owner IS NULL) <> (token IS NULL));
CREATE INDEX agent_webhooks_token ON agent_webhooks (token) WHERE token IS NOT NULL;
