-- A firing's worker may die mid-firing (kill -9): the queue gives its job to another worker, which starts it
-- again. `alive` is when the worker of its current attempt was last seen running it (marked every few seconds;
-- none yet: at its start). Each earlier attempt is kept, from its start to when its worker was last seen, so
-- that a due time that came while it ran was an overlap, and one that came while its worker was dead, before it
-- was taken up again, was missed.
ALTER TABLE routine_firings ADD COLUMN alive timestamptz;
CREATE TABLE routine_attempts (
    routine  text NOT NULL,
    key      text NOT NULL,
    started  timestamptz NOT NULL,
    alive    timestamptz NOT NULL,   -- its worker last seen running it (then it died)
    PRIMARY KEY (routine, key, started),
    FOREIGN KEY (routine, key) REFERENCES routine_firings ON DELETE CASCADE
);
