-- Game sessions shared by every game server on one database (a hub behind a load balancer): the game
-- after its latest change (interpreter state, with a few turns back for undo) and its history. version
-- goes up by one with every change, so a process knows whether the copy it holds is current.
CREATE TABLE game_sessions (
    session_id  text PRIMARY KEY,
    story       text NOT NULL,
    story_md5   text NOT NULL,
    snapshot    jsonb NOT NULL,
    turns       jsonb NOT NULL,
    version     bigint NOT NULL DEFAULT 1,
    updated     timestamptz NOT NULL DEFAULT now()
);
