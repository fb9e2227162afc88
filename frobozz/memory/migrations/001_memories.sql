-- Memories, with the embedding model recorded so a switch of model is an error, never garbage.
CREATE TABLE cortex_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO cortex_meta (key, value) VALUES ('embedding_model', '{model}'), ('embedding_dim', '{dim}');

CREATE TABLE memories (
    id bigserial PRIMARY KEY,
    namespace text NOT NULL,
    content text NOT NULL,
    content_hash text NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
    source text,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    deleted_at timestamptz,
    embedding vector({dim}) NOT NULL,
    fts tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
);
CREATE INDEX memories_fts ON memories USING gin (fts);
CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops);
CREATE INDEX memories_recent ON memories (namespace, created_at DESC) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX memories_unique_content ON memories (namespace, content_hash) WHERE deleted_at IS NULL;
