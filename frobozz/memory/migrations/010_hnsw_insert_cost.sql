-- The HNSW graph built with m 16 (pgvector's default) and ef_construction 96, not 003's m 24 and 128: a store's
-- index insert was most of what Postgres does under many clients (bench/cortex_load.py --waits). At 100k memories
-- a row's INSERT takes 3.65 ms instead of 5.39 (bench/cortex.py, p50), with recall@10 against exact kNN unchanged
-- within what one build differs from the next (0.978-0.993 against 0.981-0.993). ef_construction 64 saves more
-- and strands searches again (0.920-0.970).
-- Rebuilt once here, as 003 did: like every migration, in the one transaction under the migration lock, so the
-- memories table is locked meanwhile (other servers' stores and searches wait, starting servers wait for the
-- lock). With the graph in memory, about 18 s at 100k memories (on disk, past Postgres's default 64 MB: 64 s).
SET LOCAL maintenance_work_mem = '512MB';
DROP INDEX IF EXISTS memories_embedding;
CREATE INDEX memories_embedding ON memories USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 96);
