-- Routines (sessions nobody starts by hand) and their firings: one row per due time, mail or feed
-- entry, its state from queued to done. A firing's key is unique within its routine, so however many
-- workers look, each due time and each item is fired once; a firing is done only after its turn ended
-- and its run was recorded. The firings' jobs are pgqueuer's (its own tables).
CREATE TABLE routines (
    name     text PRIMARY KEY,
    spec     jsonb NOT NULL,
    paused   boolean NOT NULL DEFAULT false,
    problem  text,                   -- why its source could not be read at the last look (none: it could)
    created  timestamptz NOT NULL DEFAULT now(),
    updated  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE routine_firings (
    routine   text NOT NULL REFERENCES routines ON DELETE CASCADE,
    key       text NOT NULL,
    title     text NOT NULL,
    due       timestamptz,           -- a schedule's due time; for mail and feeds, when the item was found
    state     text NOT NULL,         -- queued, running, done, skipped, failed
    reason    text,
    item      jsonb,                 -- a mail's or entry's parts, for whichever worker fires it
    run_id    text,
    cost_usd  double precision NOT NULL DEFAULT 0,
    attempts  int NOT NULL DEFAULT 0,
    created   timestamptz NOT NULL DEFAULT now(),
    started   timestamptz,
    ended     timestamptz,
    PRIMARY KEY (routine, key)
);
CREATE INDEX routine_firings_open ON routine_firings (routine) WHERE state IN ('queued', 'running');
