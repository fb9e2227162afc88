-- An interrupted turn's reply: claude ends such a turn with no result, so the conversation keeps what was streamed
-- of it, marked as interrupted (before, an empty reply was kept, though the user had read part of one).
ALTER TABLE agent_messages ADD COLUMN interrupted boolean NOT NULL DEFAULT false;
