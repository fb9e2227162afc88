-- Sessions with memory on: the memory loop's own session (its archive, windows and capsules), resumed
-- with the agent session.
ALTER TABLE agent_sessions ADD COLUMN memory_session text;
