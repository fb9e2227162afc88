-- Runs, their turns and their results, for runs played by workers on many machines (the run
-- directory stays each machine's local record). info is the run's run.json; snapshot the game after
-- its last committed turn, so that any worker can take the run up from there.
CREATE TABLE runs (
    run_id      text PRIMARY KEY,
    game        text NOT NULL,
    story_md5   text NOT NULL,
    player      text NOT NULL,
    mode        text NOT NULL,
    model       text,
    status      text NOT NULL,
    reason      text,
    score       int,
    max_score   int,
    turns       int NOT NULL DEFAULT 0,
    won         boolean NOT NULL DEFAULT false,
    cost_usd    double precision NOT NULL DEFAULT 0,
    info        jsonb NOT NULL,
    snapshot    jsonb,
    job_id      bigint,  -- the queue's job for it (pgqueuer's tables are the queue library's own)
    worker      text,
    run_dir     text,
    queued_at   timestamptz,
    started_at  timestamptz,
    ended_at    timestamptz,
    created     timestamptz NOT NULL DEFAULT now(),
    updated     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runs_by_game ON runs (game, created DESC);
CREATE INDEX runs_by_status ON runs (status);

CREATE TABLE run_turns (
    run_id  text NOT NULL REFERENCES runs ON DELETE CASCADE,
    turn    int NOT NULL,
    record  jsonb NOT NULL,
    PRIMARY KEY (run_id, turn)
);
