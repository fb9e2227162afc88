-- The HNSW graph built with m 16 (pgvector's default) and ef_construction 96, not 003's m 24 and 128: a store's
-- index insert was most of what Postgres does under many clients (bench/cortex_load.py --waits), and at 100k
-- memories it takes 2.9-3.4 ms a row instead of 5.1, with recall@10 against exact kNN unchanged within what one
-- build differs from the next (0.978-0.993 against 0.982-0.993, two builds each). ef_construction 64 saves more
-- and strands searches again (0.920-0.970). Rebuilt once here: about 20 s at 100k memories.
DROP INDEX IF EXISTS memories_embedding;
CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 96);
