-- Keyword search as BM25 (scored in _search.py) over each memory's words in context (bench/cortex_quality.py chose it on
-- the LoCoMo development split). A memory's searchable words are its own (weight A), its neighbours'
-- (B: the memory just before and after it in its namespace, C: two away), so a reply ("yes, last
-- week!") is found by the words of what it answers. Word statistics per namespace (how many
-- memories hold each word, and their length) give BM25's inverse document frequency; statement
-- triggers keep them, so every write path (store, import, forget, update, COPY) counts.

-- A word's weighted count from its positions' weights: its own (A) 1, a neighbour's (B) 0.5, two away (C) 0.25.
CREATE FUNCTION cortex_tf(weights text[]) RETURNS float8 IMMUTABLE PARALLEL SAFE LANGUAGE sql
    RETURN cardinality(array_positions(weights, 'A')) + 0.5 * cardinality(array_positions(weights, 'B'))
           + 0.25 * cardinality(array_positions(weights, 'C'));

-- Every position of a tsvector, weighted: the document length BM25 normalises by.
CREATE FUNCTION cortex_length(v tsvector) RETURNS float8 IMMUTABLE PARALLEL SAFE LANGUAGE sql
    RETURN (SELECT coalesce(sum(cortex_tf(u.weights)), 0) FROM unnest(v) u);

-- A memory's own length is fixed at insert; its words in context live in a table of their own, so
-- refreshing a neighbour's context rewrites a small row, never the memory's (whose every update
-- would insert its vector into the HNSW graph again).
ALTER TABLE memories ADD COLUMN own_length float8
    GENERATED ALWAYS AS (cortex_length(setweight(to_tsvector('english', content), 'A'))) STORED;
CREATE INDEX memories_order ON memories (namespace, created_at, id) WHERE deleted_at IS NULL;
CREATE TABLE memory_context (
    id bigint PRIMARY KEY REFERENCES memories ON DELETE CASCADE,
    namespace text NOT NULL,
    words tsvector NOT NULL,      -- its own words (A), its neighbours' (B), two away (C)
    words_length float8 NOT NULL  -- cortex_length(words)
);
-- memories_fts (own words) finds a memory with every query word of its own; memory_context_words
-- those whose words in context hold an uncommon one.
CREATE INDEX memory_context_words ON memory_context USING gin (words);

-- The words in context of the live memories within two places of each anchor (a memory stored,
-- changed or forgotten), from their neighbours in (created_at, id) order; a forgotten memory's
-- own row goes, and its words leave its neighbours'.
CREATE FUNCTION cortex_refresh_context(ns text, anchors bigint[]) RETURNS void LANGUAGE sql
BEGIN ATOMIC
    DELETE FROM memory_context c USING memories m
    WHERE c.id = m.id AND m.id = ANY (anchors) AND m.deleted_at IS NOT NULL;
    WITH a AS (SELECT created_at, id FROM memories WHERE id = ANY (anchors) AND namespace = ns),
    near AS (
        SELECT n.id, min(n.distance) AS distance FROM a CROSS JOIN LATERAL (
            SELECT m.id, 0 AS distance FROM memories m WHERE m.id = a.id AND m.deleted_at IS NULL
            UNION ALL
            SELECT b.id, row_number() OVER (ORDER BY b.created_at DESC, b.id DESC) FROM (
                SELECT m.id, m.created_at FROM memories m
                WHERE m.namespace = ns AND m.deleted_at IS NULL AND (m.created_at, m.id) < (a.created_at, a.id)
                ORDER BY m.created_at DESC, m.id DESC LIMIT 4) b
            UNION ALL
            SELECT f.id, row_number() OVER (ORDER BY f.created_at, f.id) FROM (
                SELECT m.id, m.created_at FROM memories m
                WHERE m.namespace = ns AND m.deleted_at IS NULL AND (m.created_at, m.id) > (a.created_at, a.id)
                ORDER BY m.created_at, m.id LIMIT 4) f) n
        GROUP BY n.id),
    ordered AS (
        SELECT m.id, near.distance, setweight(m.fts, 'A')
               || setweight(coalesce(lag(m.fts) OVER w, '') || coalesce(lead(m.fts) OVER w, ''), 'B')
               || setweight(coalesce(lag(m.fts, 2) OVER w, '') || coalesce(lead(m.fts, 2) OVER w, ''), 'C') AS words
        FROM memories m JOIN near ON near.id = m.id
        WINDOW w AS (ORDER BY m.created_at, m.id))
    INSERT INTO memory_context (id, namespace, words, words_length)
    SELECT o.id, ns, o.words, cortex_length(o.words) FROM ordered o WHERE o.distance <= 2
    ON CONFLICT (id) DO UPDATE SET words = excluded.words, words_length = excluded.words_length
    WHERE memory_context.words IS DISTINCT FROM excluded.words;
END;

-- The whole namespace at once: for bulk loads and this migration.
CREATE FUNCTION cortex_rebuild_context(ns text) RETURNS void LANGUAGE sql
BEGIN ATOMIC
    DELETE FROM memory_context c USING memories m WHERE c.id = m.id AND m.namespace = ns AND m.deleted_at IS NOT NULL;
    WITH ordered AS (
        SELECT id, setweight(fts, 'A')
               || setweight(coalesce(lag(fts) OVER w, '') || coalesce(lead(fts) OVER w, ''), 'B')
               || setweight(coalesce(lag(fts, 2) OVER w, '') || coalesce(lead(fts, 2) OVER w, ''), 'C') AS words
        FROM memories WHERE namespace = ns AND deleted_at IS NULL
        WINDOW w AS (ORDER BY created_at, id))
    INSERT INTO memory_context (id, namespace, words, words_length)
    SELECT o.id, ns, o.words, cortex_length(o.words) FROM ordered o
    ON CONFLICT (id) DO UPDATE SET words = excluded.words, words_length = excluded.words_length
    WHERE memory_context.words IS DISTINCT FROM excluded.words;
END;

CREATE TABLE memory_namespaces (
    namespace text PRIMARY KEY,
    memories bigint NOT NULL DEFAULT 0,  -- live memories
    length float8 NOT NULL DEFAULT 0     -- their own words (positions), for the average length
);
CREATE TABLE memory_words (
    namespace text NOT NULL,
    lexeme text NOT NULL,
    memories bigint NOT NULL,  -- live memories whose own text has the word
    PRIMARY KEY (namespace, lexeme)
);

-- Count (+1) or uncount (-1) memories' own words; rows are locked in key order, namespace first,
-- so concurrent writers queue instead of deadlocking.
CREATE FUNCTION cortex_count(namespaces text[], vectors tsvector[], signs int[]) RETURNS void LANGUAGE sql
BEGIN ATOMIC
    INSERT INTO memory_namespaces AS s (namespace, memories, length)
        SELECT c.ns, sum(c.sign), sum(c.sign * cortex_length(setweight(c.v, 'A')))
        FROM unnest(namespaces, vectors, signs) AS c(ns, v, sign) GROUP BY c.ns ORDER BY c.ns
        ON CONFLICT (namespace) DO UPDATE SET memories = s.memories + excluded.memories,
                                              length = s.length + excluded.length;
    INSERT INTO memory_words AS w (namespace, lexeme, memories)
        SELECT c.ns, l.lexeme, sum(c.sign)
        FROM unnest(namespaces, vectors, signs) AS c(ns, v, sign), unnest(tsvector_to_array(c.v)) AS l(lexeme)
        GROUP BY c.ns, l.lexeme ORDER BY c.ns, l.lexeme
        ON CONFLICT (namespace, lexeme) DO UPDATE SET memories = w.memories + excluded.memories;
END;

CREATE FUNCTION cortex_count_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cortex_count(array_agg(namespace), array_agg(fts), array_agg(1))
    FROM inserted WHERE deleted_at IS NULL HAVING count(*) > 0;
    RETURN NULL;
END $$;

CREATE FUNCTION cortex_count_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cortex_count(array_agg(namespace), array_agg(fts), array_agg(-1))
    FROM deleted WHERE deleted_at IS NULL HAVING count(*) > 0;
    RETURN NULL;
END $$;

-- An update counts when a memory is forgotten or its text (or namespace) changes; other updates do not.
CREATE FUNCTION cortex_count_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cortex_count(array_agg(c.ns), array_agg(c.v), array_agg(c.sign)) FROM (
        SELECT o.namespace AS ns, o.fts AS v, -1 AS sign FROM before o JOIN after n USING (id)
        WHERE o.deleted_at IS NULL AND (n.deleted_at IS NOT NULL OR o.content <> n.content OR o.namespace <> n.namespace)
        UNION ALL
        SELECT n.namespace, n.fts, 1 FROM before o JOIN after n USING (id)
        WHERE n.deleted_at IS NULL AND (o.deleted_at IS NOT NULL OR o.content <> n.content OR o.namespace <> n.namespace)
    ) c HAVING count(*) > 0;
    RETURN NULL;
END $$;

INSERT INTO memory_namespaces (namespace) SELECT DISTINCT namespace FROM memories ORDER BY 1;
SELECT cortex_count(array_agg(namespace), array_agg(fts), array_agg(1)) FROM memories WHERE deleted_at IS NULL
HAVING count(*) > 0;
SELECT cortex_rebuild_context(namespace) FROM memory_namespaces;

CREATE TRIGGER memories_count_inserted AFTER INSERT ON memories REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_count_inserted();
CREATE TRIGGER memories_count_deleted AFTER DELETE ON memories REFERENCING OLD TABLE AS deleted
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_count_deleted();
CREATE TRIGGER memories_count_updated AFTER UPDATE ON memories REFERENCING OLD TABLE AS before NEW TABLE AS after
    FOR EACH STATEMENT EXECUTE FUNCTION cortex_count_updated();
