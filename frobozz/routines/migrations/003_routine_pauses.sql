-- A routine's pauses, from when it was paused to when it was resumed (none yet: it is paused now). A schedule's
-- due times inside a pause are neither fired nor recorded; those before it that no worker was looking at are
-- recorded as missed once it is resumed, as any other. A routine paused now is paused since its last change.
CREATE TABLE routine_pauses (
    routine  text NOT NULL REFERENCES routines ON DELETE CASCADE,
    paused   timestamptz NOT NULL,
    resumed  timestamptz,
    PRIMARY KEY (routine, paused)
);
INSERT INTO routine_pauses (routine, paused) SELECT name, updated FROM routines WHERE paused;
