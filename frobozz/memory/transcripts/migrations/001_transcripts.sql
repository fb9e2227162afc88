-- claude's session transcripts (frobozz.memory.TranscriptStore): one row per transcript, main or a
-- subagent's (subpath ''), with its write time and, for a main one, its folded summary; and the entries.
CREATE TABLE claude_transcripts (
    project_key text NOT NULL,
    session_id text NOT NULL,
    subpath text NOT NULL DEFAULT '',
    mtime bigint NOT NULL,            -- the store's last write, epoch milliseconds
    summary jsonb,                    -- {session_id, mtime, data} for a main transcript
    PRIMARY KEY (project_key, session_id, subpath)
);

CREATE TABLE claude_transcript_entries (
    seq bigserial PRIMARY KEY,        -- the order entries were appended in
    project_key text NOT NULL,
    session_id text NOT NULL,
    subpath text NOT NULL,
    uuid text,                        -- claude's entry id: an entry appended twice is kept once
    entry jsonb NOT NULL,
    FOREIGN KEY (project_key, session_id, subpath) REFERENCES claude_transcripts ON DELETE CASCADE
);
CREATE INDEX claude_transcript_entries_key ON claude_transcript_entries (project_key, session_id, subpath, seq);
CREATE UNIQUE INDEX claude_transcript_entries_uuid ON claude_transcript_entries (project_key, session_id, subpath, uuid)
    WHERE uuid IS NOT NULL;
