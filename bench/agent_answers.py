"""What an answer costs in a long session: the agent service takes an answer once its question is written, and
checks that in the answer's own INSERT (Leases.answer). Timed on the real schema (the agent's migrations) with
sessions of many events (each text delta is one), with the partial index on the questions (migration 007) and
without it, in one run.

Run: .venv/bin/python bench/agent_answers.py [--sessions 10] [--events 100000] [--answers 100]
Baseline: the same check without the index (the ratio is with / without).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import anyio
from _ending import end_with_the_bench, scratch_postgres

from frobozz.agent._leases import Leases
from frobozz.agent._store import AgentStore
from frobozz.memory import MemorySettings

EVERY = 500  # one question among this many events


async def timed(leases: Leases, session: str, questions: list[str]) -> list[float]:
    took = []
    for question in questions:
        t0 = time.perf_counter()
        assert await leases.answer(session, question, {"Which colour?": "Blue"})
        took.append(time.perf_counter() - t0)
    return took


async def bench(url: str, sessions: int, events: int, answers: int) -> None:
    store = await AgentStore.open(MemorySettings(database_url=url))
    try:
        pool = store.pool
        for n in range(sessions):
            await pool.execute(
                "INSERT INTO agent_sessions (id, workspace, owner) VALUES ($1, 'alice/notes', 'alice')", f"s{n}"
            )
            await pool.execute(
                """INSERT INTO agent_events (session_id, seq, kind, data)
                   SELECT $1, g, CASE WHEN g % $3 = 0 THEN 'question' ELSE 'text_delta' END,
                          CASE WHEN g % $3 = 0
                               THEN jsonb_build_object('question_id', 'q' || g, 'questions', '[]'::jsonb)
                               ELSE jsonb_build_object('text', repeat('x', 40)) END
                   FROM generate_series(1, $2) g""",
                f"s{n}",
                events,
                EVERY,
            )
        await pool.execute("ANALYZE agent_events")
        leases = Leases(pool, "bench", 30.0)
        asked = [f"q{g}" for g in range(EVERY, events + 1, EVERY)]
        half = min(answers, len(asked) // 2)
        session = f"s{sessions // 2}"
        indexed = await timed(leases, session, asked[:half])
        await pool.execute("DROP INDEX agent_events_questions")
        await pool.execute("ANALYZE agent_events")
        plain = await timed(leases, session, asked[half : 2 * half])
        ratio = statistics.median(indexed) / statistics.median(plain)
        print(f"{sessions} sessions of {events} events (a question every {EVERY}), {half} answers each way:")
        print(f"  with the questions' index: median {statistics.median(indexed) * 1000:.2f} ms an answer")
        print(f"  without (the baseline):    median {statistics.median(plain) * 1000:.2f} ms an answer")
        print(f"  ratio {ratio:.3f}x")
    finally:
        await store.aclose()


def main() -> None:
    end_with_the_bench()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--answers", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        server = scratch_postgres(scratch)
        try:
            anyio.run(bench, server.get_uri(), args.sessions, args.events, args.answers)
        finally:
            server.cleanup()


if __name__ == "__main__":
    main()
