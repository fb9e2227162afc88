-- A store in one statement, so one round trip: the new memory, and its words in its neighbours' context
-- (004). Storing counts the memory's words (the triggers of 004), which locks its namespace's row until
-- the transaction ends; as three round trips (insert, refresh, commit) from a busy client, that lock was
-- held across them and concurrent stores into one namespace queued behind it. Nothing is returned when a
-- current memory already has that exact text (the caller reads that one).
CREATE FUNCTION cortex_store(ns text, body text, digest text, meta jsonb, src text, vec vector)
RETURNS SETOF memories LANGUAGE plpgsql AS $$
DECLARE
    stored memories;
BEGIN
    INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding)
    VALUES (ns, body, digest, meta, src, vec)
    ON CONFLICT (namespace, content_hash) WHERE deleted_at IS NULL AND valid_to IS NULL DO NOTHING
    RETURNING * INTO stored;
    IF FOUND THEN
        PERFORM cortex_refresh_context(ns, ARRAY[stored.id]);
        RETURN NEXT stored;
    END IF;
END;
$$;
