-- Which process fired a firing's current attempt ("host:pid", as the runner names its workers): a worker's, or
-- the `routine run` that fired it by hand (its key begins "run:"). `frobozz runs show` names it for the firing's
-- run, which no queue worker took (none: before this was kept).
ALTER TABLE routine_firings ADD COLUMN worker text;
