-- Facts that change: a memory superseded by a newer one is kept, with the time it stopped being
-- current (valid_to) and a link each way. Every memory already here stays current (valid_to NULL).
ALTER TABLE memories ADD COLUMN valid_to timestamptz;
ALTER TABLE memories ADD COLUMN supersedes bigint REFERENCES memories;
ALTER TABLE memories ADD COLUMN superseded_by bigint REFERENCES memories;
CREATE INDEX memories_supersedes ON memories (supersedes) WHERE supersedes IS NOT NULL;
-- The same text may come back as a later fact (A, then B, then A again): only current memories are unique.
DROP INDEX memories_unique_content;
CREATE UNIQUE INDEX memories_unique_content ON memories (namespace, content_hash)
    WHERE deleted_at IS NULL AND valid_to IS NULL;
