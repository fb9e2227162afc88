"""cortex search quality: evidence recall@5 and @10 of each mode and fusion, on long multi-session
conversations with labelled evidence (bench/cortex_quality_data.py), in one run.

Each turn of the conversations is one memory. For each question, recall@k is the share of its
evidence turns found in the top k; the figure is the mean over questions. The fusions are computed
here from one candidate pool per question (the nearest 40 by vector and the best 40 by full text
matching any of the question's words), so they compare like with like; the last lines are the
server's own searches (its full text fetches memories with every word or any uncommon one, which
keeps it fast at 100k memories: see `_word_queries`).

Run: .venv/bin/python bench/cortex_quality.py [--copies 3] [--noise 1500]
Baseline (issue 8, on its held-out benchmark): the weighted fusion of normalised keyword rank (0.3)
and cosine (0.7) scored 0.68 recall@10; cosine alone 0.53, BM25 alone 0.60, RRF 0.60.
"""

from __future__ import annotations

import argparse
import math
import re
import random
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from cortex import memory as noise_memory  # noqa: E402
from cortex_quality_data import CHATTER, FACTS, LEAD_INS, NEAR_MISSES  # noqa: E402

from frobozz.servers.cortex import Settings  # noqa: E402
from frobozz.servers.cortex._database import stop_embedded  # noqa: E402
from frobozz.servers.cortex._server import Cortex  # noqa: E402
from frobozz.servers.cortex._store import MemoryStore  # noqa: E402

POOL = 40
BASELINE = "weighted ranks 0.3/0.7, any word (the issue's baseline)"


@dataclass(frozen=True)
class Candidate:
    id: int
    cosine: float
    words: float  # ts_rank_cd against the query's words, any of them (0 when none match)
    all_words: bool  # every query word matches (what websearch_to_tsquery asks)
    phrase: bool
    idf: float = 0.0  # the sum of the matched query words' inverse document frequencies (BM25's weights)


def conversation(seed: int, noise: int, sessions: int = 24) -> tuple[list[tuple[int, str, str]], dict[str, list[str]]]:
    """Sam's sessions as (session, role, text) turns in order, and each question's evidence turns.

    Evidence is told in passing, after a lead-in about something else; near misses and chatter sit
    among it, and `noise` short notes (bench/cortex.py's generator) stand for the rest of a life."""
    rng = random.Random(seed)
    placed: dict[int, list[list[tuple[str, str]]]] = {s: [] for s in range(sessions)}
    told: dict[str, str] = {}
    for _, evidence, reply in FACTS:
        first = rng.randrange(sessions - len(evidence) + 1)
        later = sorted(rng.sample(range(first + 1, sessions), len(evidence) - 1))
        for n, (session, text) in enumerate(zip([first, *later], evidence, strict=True)):
            if text in told:
                continue
            told[text] = f"{rng.choice(LEAD_INS)} {text}"
            placed[session].append([("user", told[text])] + ([("assistant", reply)] if n == 0 and reply else []))
    for question, answer in CHATTER:
        placed[rng.randrange(sessions)].append([("user", question), ("assistant", answer)])
    for text in NEAR_MISSES:
        placed[rng.randrange(sessions)].append([("user", text)])
    for n in range(noise):
        placed[rng.randrange(sessions)].append([("user", noise_memory(rng, n))])
    turns = []
    for session in range(sessions):
        rng.shuffle(placed[session])  # exchanges are kept whole: a reply stays after what it answers
        turns += [(session, role, text) for exchange in placed[session] for role, text in exchange]
    return turns, {q: [told[t] for t in evidence] for q, evidence, _ in FACTS}


async def load(store: MemoryStore, namespace: str, turns: list[tuple[int, str, str]]) -> dict[str, int]:
    start = datetime(2025, 1, 6, 19, tzinfo=UTC)
    vectors = await store.embedder.embed([text for _, _, text in turns])
    ids = {}
    async with store.pool.acquire() as c:
        for n, ((session, role, text), vector) in enumerate(zip(turns, vectors, strict=True)):
            when = start + timedelta(days=9 * session, minutes=n)
            ids[text] = await c.fetchval(
                "INSERT INTO memories (namespace, content, content_hash, metadata, source, embedding, created_at) "
                "VALUES ($1, $2, md5($2), $3::jsonb, 'bench', $4, $5) RETURNING id",
                namespace, f"{'Sam' if role == 'user' else 'Assistant'}: {text}",
                f'{{"session": {session}, "role": "{role}"}}', vector, when)
        await c.execute("ANALYZE memories")  # the word statistics the server's search reads
    return ids


async def candidates(store: MemoryStore, namespace: str, query: str) -> list[Candidate]:
    """Every memory the server could see: the nearest POOL by vector and the best POOL by full text."""
    [vector] = await store.embedder.embed([query])
    phrase = " ".join(query.lower().split())
    async with store.pool.acquire() as c:
        rows = await c.fetch(
            "WITH q AS (SELECT websearch_to_tsquery('english', $3) AS all_q, "
            "  websearch_to_tsquery('english', $5) AS any_q), "
            "near AS (SELECT id FROM memories WHERE namespace = $1 ORDER BY embedding <=> $2 LIMIT $4), "
            "words AS (SELECT id FROM memories, q WHERE namespace = $1 AND fts @@ any_q "
            "  ORDER BY ts_rank_cd(fts, any_q) DESC LIMIT $4) "
            "SELECT m.id, m.content, 1 - (m.embedding <=> $2) AS cosine, tsvector_to_array(m.fts) AS lexemes, "
            "  coalesce(ts_rank_cd(m.fts, q.any_q), 0) AS words, coalesce(m.fts @@ q.all_q, false) AS all_words "
            "FROM memories m, q WHERE m.id IN (SELECT id FROM near UNION SELECT id FROM words)",
            namespace, vector, query, POOL, any_word(query))
        df = dict(await c.fetch(
            "SELECT t, (SELECT count(*) FROM memories WHERE namespace = $1 AND fts @@ quote_literal(t)::tsquery) "
            "FROM unnest(tsvector_to_array(to_tsvector('english', $2))) t", namespace, query))
        total = await c.fetchval("SELECT count(*) FROM memories WHERE namespace = $1", namespace)
    idf = {t: math.log(1 + (total - n + 0.5) / (n + 0.5)) for t, n in df.items()}
    return [Candidate(r["id"], float(r["cosine"]), float(r["words"]), bool(r["all_words"]),
                      phrase in " ".join(r["content"].lower().split()),
                      sum(idf.get(t, 0) for t in r["lexemes"])) for r in rows]


def any_word(query: str) -> str:
    """websearch_to_tsquery input matching any of the query's words."""
    return " or ".join(w for w in dict.fromkeys(w.lower() for w in re.findall(r"\w+", query)) if w != "or")


def by_rank(values: dict[int, float]) -> dict[int, int]:
    """1-based ranks, best first."""
    ordered = sorted(values, key=lambda i: -values[i])
    return {i: n + 1 for n, i in enumerate(ordered)}


def rank_score(ranks: dict[int, int]) -> dict[int, float]:
    """The issue's normalised keyword rank: 1 for the best, falling linearly to 0 past the last."""
    return {i: 1 - (r - 1) / len(ranks) for i, r in ranks.items()}


Fusion = Callable[[list[Candidate]], dict[int, float]]


def fusions() -> dict[str, Fusion]:
    def semantic(cs): return {c.id: c.cosine for c in cs}
    def keyword_all(cs): return {c.id: c.words for c in cs if c.all_words}
    def keyword_any(cs): return {c.id: c.words for c in cs if c.words > 0}

    def rrf(keyword: Fusion) -> Fusion:
        def fuse(cs):
            sem, kw = by_rank(semantic(cs)), by_rank(keyword(cs))
            return {c.id: 1 / (60 + sem[c.id]) + (1 / (60 + kw[c.id]) if c.id in kw else 0) for c in cs}
        return fuse

    def weighted(keyword: Fusion, w_kw: float = 0.3, boost: float = 0.0) -> Fusion:
        def fuse(cs):
            kw = rank_score(by_rank(keyword(cs)))
            return {c.id: (1 - w_kw) * c.cosine + w_kw * kw.get(c.id, 0) + (boost if c.phrase else 0) for c in cs}
        return fuse

    def keyword_idf(cs): return {c.id: c.idf for c in cs if c.idf > 0}

    def weighted_scores(w_kw: float, keyword: Fusion = keyword_any) -> Fusion:
        """Min-max normalised scores instead of ranks, so a weak word match counts for little."""
        def fuse(cs):
            kw, cos = keyword(cs), semantic(cs)
            top, lo, hi = max(kw.values(), default=0) or 1, min(cos.values()), max(cos.values())
            return {c.id: (1 - w_kw) * (c.cosine - lo) / ((hi - lo) or 1) + w_kw * kw.get(c.id, 0) / top for c in cs}
        return fuse

    return {
        "semantic (cosine)": semantic,
        "keyword, every word (websearch_to_tsquery)": keyword_all,
        "keyword, any word (ts_rank_cd)": keyword_any,
        "keyword, any word weighted by IDF (as BM25)": keyword_idf,
        "RRF (k=60), any word": rrf(keyword_any),
        "weighted ranks 0.3/0.7, every word": weighted(keyword_all),
        BASELINE: weighted(keyword_any),
        "weighted ranks 0.3/0.7, any word + phrase boost": weighted(keyword_any, boost=0.1),
        "min-max scores 0.2/0.8, any word": weighted_scores(0.2),
        "min-max scores 0.3/0.7, any word (chosen)": weighted_scores(0.3),
        "min-max scores 0.4/0.6, any word": weighted_scores(0.4),
        "min-max scores 0.3/0.7, IDF-weighted words": weighted_scores(0.3, keyword_idf),
    }


def recall(ranked: list[int], evidence: set[int], k: int) -> float:
    return len(evidence & set(ranked[:k])) / len(evidence)


async def main(copies: int, noise: int) -> None:
    cortex = Cortex(Settings(data_dir=Path(tempfile.mkdtemp(prefix="frobozz-cortex-quality-"))))
    store = await cortex.store()
    servers = {f"server: search(mode={mode!r})": mode for mode in ("semantic", "keyword", "hybrid")}
    table: dict[str, list[tuple[float, float]]] = {name: [] for name in [*fusions(), *servers]}
    memories = 0
    for copy in range(copies):  # the facts told again in other words and order, each in its own namespace
        namespace = f"eval-{copy}"
        turns, questions = conversation(seed=copy, noise=noise)
        ids = await load(store, namespace, turns)
        memories += len(turns)
        for question, evidence_texts in questions.items():
            evidence = {ids[t] for t in evidence_texts}
            found = await candidates(store, namespace, question)
            for name, fuse in fusions().items():
                scores = fuse(found)
                ranked = sorted(scores, key=lambda i: -scores[i])
                table[name].append((recall(ranked, evidence, 5), recall(ranked, evidence, 10)))
            for name, mode in servers.items():
                hits = [h.memory.id for h in await store.search(question, limit=10, namespace=namespace, mode=mode)]
                table[name].append((recall(hits, evidence, 5), recall(hits, evidence, 10)))
    await cortex.aclose()
    stop_embedded(cortex.settings, delete=True)  # a scratch database: nothing is left running
    shutil.rmtree(cortex.settings.data_dir, ignore_errors=True)

    baseline = statistics.mean(r10 for _, r10 in table[BASELINE])
    print(f"{len(FACTS)} questions x {copies} conversations of {memories // copies} turns ({len(CHATTER)} chatter "
          f"exchanges, {len(NEAR_MISSES)} near misses and {noise} other notes among the evidence)")
    print(f"{'mode or fusion':55} {'recall@5':>9} {'recall@10':>10} {'vs baseline':>12}")
    for name, rows in table.items():
        r5, r10 = statistics.mean(r for r, _ in rows), statistics.mean(r for _, r in rows)
        print(f"{name:55} {r5:9.3f} {r10:10.3f} {r10 / baseline:11.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=3, help="conversations, each the facts told another way")
    parser.add_argument("--noise", type=int, default=1500, help="other short notes in each conversation")
    args = parser.parse_args()
    anyio.run(main, args.copies, args.noise)
