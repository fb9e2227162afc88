-- An answer is taken once its question is written (Leases.answer checks agent_events): a session's questions are
-- found by id in the index, not by reading every event of the session (each text delta is one). Partial: the
-- questions only, so other events cost nothing more to write.
CREATE INDEX agent_events_questions ON agent_events (session_id, (data->>'question_id')) WHERE kind = 'question';
