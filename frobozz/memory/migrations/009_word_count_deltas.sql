-- Word statistics as deltas (issue 36, load). Counting a memory's words (004's triggers) updated its namespace's
-- row and each of its words' rows, so concurrent stores into one namespace took turns on that row's lock (and on
-- the rows of the words they shared), however short each store's transaction. A write now inserts what it
-- changes as new rows (a delta: +1 or -1 memory, its length, its words), which lock nothing another writer
-- needs; `memory_namespaces` and `memory_words` become views that add the deltas to the folded totals, so
-- what search reads is the same sum as before, to the last digit (the lengths are whole numbers). `cortex_fold`
-- moves the deltas into the totals now and then (the store does, every FOLD_EVERY memories), so the views
-- read few rows.
ALTER TABLE memory_namespaces RENAME TO memory_namespaces_folded;
ALTER TABLE memory_words RENAME TO memory_words_folded;
CREATE TABLE memory_namespace_deltas (
    namespace text NOT NULL,
    memories bigint NOT NULL,
    length float8 NOT NULL
);
CREATE INDEX memory_namespace_deltas_namespace ON memory_namespace_deltas (namespace);
CREATE TABLE memory_word_deltas (
    namespace text NOT NULL,
    lexeme text NOT NULL,
    memories bigint NOT NULL
);
CREATE INDEX memory_word_deltas_lexeme ON memory_word_deltas (namespace, lexeme);

-- The totals as search reads them: the folded rows plus the deltas not yet folded, in one snapshot.
CREATE VIEW memory_namespaces AS
    SELECT namespace, sum(memories)::bigint AS memories, sum(length)::float8 AS length FROM (
        SELECT namespace, memories, length FROM memory_namespaces_folded
        UNION ALL
        SELECT namespace, memories, length FROM memory_namespace_deltas) t
    GROUP BY namespace;
CREATE VIEW memory_words AS
    SELECT namespace, lexeme, sum(memories)::bigint AS memories FROM (
        SELECT namespace, lexeme, memories FROM memory_words_folded
        UNION ALL
        SELECT namespace, lexeme, memories FROM memory_word_deltas) t
    GROUP BY namespace, lexeme;

-- Count (+1) or uncount (-1) memories' own words: insert only, so nothing is locked that another writer waits for.
CREATE OR REPLACE FUNCTION cortex_count(namespaces text[], vectors tsvector[], signs int[]) RETURNS void LANGUAGE sql
BEGIN ATOMIC
    INSERT INTO memory_namespace_deltas (namespace, memories, length)
        SELECT c.ns, sum(c.sign), sum(c.sign * cortex_length(setweight(c.v, 'A')))
        FROM unnest(namespaces, vectors, signs) AS c(ns, v, sign) GROUP BY c.ns;
    INSERT INTO memory_word_deltas (namespace, lexeme, memories)
        SELECT c.ns, l.lexeme, sum(c.sign)
        FROM unnest(namespaces, vectors, signs) AS c(ns, v, sign), unnest(tsvector_to_array(c.v)) AS l(lexeme)
        GROUP BY c.ns, l.lexeme;
END;

-- Move the committed deltas into the totals, in one transaction: a search sees them either as deltas or as
-- totals, never both or neither. Deltas committed meanwhile stay for the next fold. One fold at a time (a
-- second returns at once: the first is folding what it would); the totals' rows are locked in key order,
-- namespace first, and by folds only, so no writer waits. Returns how many deltas it folded.
CREATE FUNCTION cortex_fold() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    namespaces bigint;
    words bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(1718578276) THEN  -- "fold"
        RETURN 0;
    END IF;
    WITH moved AS (DELETE FROM memory_namespace_deltas RETURNING namespace, memories, length),
    summed AS (
        INSERT INTO memory_namespaces_folded AS s (namespace, memories, length)
        SELECT namespace, sum(memories), sum(length) FROM moved GROUP BY namespace ORDER BY namespace
        ON CONFLICT (namespace) DO UPDATE SET memories = s.memories + excluded.memories,
                                              length = s.length + excluded.length)
    SELECT count(*) INTO namespaces FROM moved;
    WITH moved AS (DELETE FROM memory_word_deltas RETURNING namespace, lexeme, memories),
    summed AS (
        INSERT INTO memory_words_folded AS w (namespace, lexeme, memories)
        SELECT namespace, lexeme, sum(memories) FROM moved GROUP BY namespace, lexeme ORDER BY namespace, lexeme
        ON CONFLICT (namespace, lexeme) DO UPDATE SET memories = w.memories + excluded.memories)
    SELECT count(*) INTO words FROM moved;
    RETURN namespaces + words;
END $$;

-- The count row did a second job: it made every write into a namespace wait for the one before to commit, so a
-- refresh of the words in context (004) saw the memories stored just before it. Without it, two stores at once
-- would each miss the other in their neighbours' context (and two forgets of neighbours could deadlock on their
-- context rows). So the refresh takes a lock of its own, per namespace, before it reads (its statements each see
-- what committed before them): writers still take turns, but for the refresh and commit only, and counting their
-- words is no longer part of the turn.
ALTER FUNCTION cortex_refresh_context(text, bigint[]) RENAME TO cortex_refresh_context_unlocked;
CREATE FUNCTION cortex_refresh_context(ns text, anchors bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1668577396, hashtext(ns));  -- "ctxt", the namespace
    PERFORM cortex_refresh_context_unlocked(ns, anchors);  -- a statement of its own: it sees what committed first
END $$;

-- A store in two transactions (`MemoryStore.store`): the memory (committed as any write is: on disk before the
-- store returns), then its words in its neighbours' context (`cortex_settle`), under the lock above but committed
-- without waiting for the disk, so writers into a namespace take turns for the refresh alone, not for a disk
-- flush each. What a crash could lose of the second is derived data: `cortex_heal` (run when a process opens the
-- store) refreshes every live memory that has no words in context yet, with its neighbours. 008's `cortex_store`
-- (both in one) stays for a process of the version before.
CREATE FUNCTION cortex_insert(ns text, body text, digest text, meta jsonb, src text, vec vector)
RETURNS SETOF memories LANGUAGE plpgsql AS $$  -- not BEGIN ATOMIC: reembed drops and adds the embedding column
BEGIN
    RETURN QUERY
    INSERT INTO memories AS m (namespace, content, content_hash, metadata, source, embedding)
    VALUES (ns, body, digest, meta, src, vec)
    ON CONFLICT (namespace, content_hash) WHERE deleted_at IS NULL AND valid_to IS NULL DO NOTHING
    RETURNING m.*;
END $$;

CREATE FUNCTION cortex_settle(ns text, anchors bigint[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);  -- this transaction only
    PERFORM cortex_refresh_context(ns, anchors);
END $$;

CREATE FUNCTION cortex_heal() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    healed bigint := 0;
    missing record;
BEGIN
    FOR missing IN
        SELECT m.namespace, array_agg(m.id ORDER BY m.id) AS ids FROM memories m
        WHERE m.deleted_at IS NULL AND NOT EXISTS (SELECT 1 FROM memory_context c WHERE c.id = m.id)
        GROUP BY m.namespace ORDER BY m.namespace COLLATE "C"  -- the order the bulk import locks them in
    LOOP
        PERFORM cortex_refresh_context(missing.namespace, missing.ids);
        healed := healed + cardinality(missing.ids);
    END LOOP;
    RETURN healed;
END $$;
