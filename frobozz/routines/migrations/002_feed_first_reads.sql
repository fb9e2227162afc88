-- A feed's first read is recorded (the firing 'first-read'): the undated entries in the feed then are taken
-- for its archive, not fired. A feed routine added before that was read already, and what its feed holds
-- now that it has not fired came after: it is marked as read once, so that none of that is taken for the
-- archive.
INSERT INTO routine_firings (routine, key, title, due, state, reason, ended)
SELECT name, 'first-read', 'the feed read for the first time', now(), 'skipped',
       'the routine was added before its first read was recorded', now()
FROM routines WHERE spec->>'kind' = 'feed'
ON CONFLICT DO NOTHING;
