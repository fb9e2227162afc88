-- A better-connected HNSW graph: memories cluster (the same things said many times), and with
-- the defaults (m 16, ef_construction 64) some searches were stranded in the wrong cluster.
DROP INDEX IF EXISTS memories_embedding;
CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) WITH (m = 24, ef_construction = 128);
