-- Webhook deliveries waiting to be made: written when the event is, delivered by whichever instance claims them
-- (a claim lapses, so a delivery an instance was making when it died is made by another), retried with a
-- doubling backoff, and gone once delivered or given up on (the webhook's failures say so).
CREATE TABLE agent_webhook_outbox (
    id bigserial PRIMARY KEY,
    webhook_id text NOT NULL REFERENCES agent_webhooks ON DELETE CASCADE,
    delivery text NOT NULL,                 -- the X-Frobozz-Delivery id: session:seq (the same on every retry)
    body text NOT NULL,                     -- the JSON sent, signed anew at every try
    attempts int NOT NULL DEFAULT 0,        -- tries begun (a claim counts: an instance that died mid-try tried)
    due_at timestamptz NOT NULL DEFAULT now(),
    claimed_by text,                        -- the instance making the delivery now
    claimed_until timestamptz,              -- after this, another instance may make it
    last_problem text,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (webhook_id, delivery)           -- an event is queued for a webhook once
);
CREATE INDEX agent_webhook_outbox_due ON agent_webhook_outbox (due_at);
