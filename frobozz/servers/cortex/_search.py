"""Search: candidates through the indexes, then one absolute score per memory.

Candidates are the nearest memories by vector (HNSW) and those whose words in context match
(GIN: every word of the query, or any uncommon one). Each is scored against the query alone,
never against the other candidates, so a score means the same from one query to the next:

- `words`: BM25 of the memory's words in context (its own, its neighbours' at half weight and
  two away at a quarter: migration 004), with per-namespace inverse document frequencies, divided
  by the sum of the query words' IDFs (a memory holding each query word once, at average length,
  scores about 1) and squashed into [0, 1) by tanh;
- `cosine`: the embeddings' cosine similarity, below 0 taken as 0;
- hybrid score = 0.6 x words + 0.4 x cosine, in [0, 1]: the weights, the neighbour weights and
  BM25's k1 and b were chosen on the LoCoMo development split (bench/cortex_quality.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

import asyncpg

from ..._tasks import both
from ._records import COLUMNS, Hit, memory
from .exceptions import CortexError

if TYPE_CHECKING:
    from ._store import MemoryStore

Mode = Literal["hybrid", "semantic", "keyword"]
WORDS_WEIGHT, COSINE_WEIGHT = 0.6, 0.4
K1, B = 1.5, 0.75
WINDOW = 1 + 2 * 0.5 + 2 * 0.25  # a memory's words in context against its own: the neighbour weights (004)
UNCOMMON_SHARE, UNCOMMON_FLOOR = 0.05, 100  # a word in fewer memories than this fetches memories alone
MAX_QUERY_CHARS, MAX_QUERY_WORDS = 10_000, 64
_WORD = re.compile(r"\w+")

_WORD_STATS = """
SELECT coalesce((SELECT memories FROM memory_namespaces WHERE namespace = $2), 0) AS memories,
       coalesce((SELECT length FROM memory_namespaces WHERE namespace = $2), 0) AS length,
       array(SELECT q.lexeme FROM unnest(to_tsvector('english', $1)) q ORDER BY q.lexeme) AS lexemes,
       array(SELECT coalesce(w.memories, 0) FROM unnest(to_tsvector('english', $1)) q
             LEFT JOIN memory_words w ON w.namespace = $2 AND w.lexeme = q.lexeme ORDER BY q.lexeme) AS counts"""


@dataclass(frozen=True)
class Words:
    """The query's words with their inverse document frequencies in the namespace."""

    memories: int
    own_length: float  # the average memory's own words
    idf: dict[str, float]
    counts: dict[str, int]
    own: bool = False  # keyword mode: a memory's own words only, not its neighbours'

    @classmethod
    def of(cls, row: asyncpg.Record, *, own: bool) -> Words:
        n = max(int(row["memories"]), 0)
        counts = {w: max(int(c), 0) for w, c in zip(row["lexemes"], row["counts"], strict=True)
                  if _WORD.fullmatch(w)}
        counts = dict(list(counts.items())[:MAX_QUERY_WORDS])
        idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in counts.items()}
        return cls(n, float(row["length"]) / n if n else 0.0, idf, counts, own)

    @property
    def average_length(self) -> float:
        return self.own_length if self.own else WINDOW * self.own_length

    def _term(self, word: str) -> str:
        return f"'{word}':A" if self.own else f"'{word}'"

    def match(self) -> str:
        """Memories to fetch: those with every word, or any word rare enough to fetch them alone."""
        rare = max(UNCOMMON_SHARE * self.memories, UNCOMMON_FLOOR)
        every = "(" + " & ".join(map(self._term, self.idf)) + ")"
        return every + "".join(f" | {self._term(w)}" for w, c in self.counts.items() if c <= rare)

    def any(self) -> str:
        return " | ".join(map(self._term, self.idf))

    def coverage(self, bm25: float) -> float:
        """BM25 against what a memory holding each query word once, at average length, scores."""
        total = sum(self.idf.values())
        return bm25 / total if total else 0.0


async def search(store: MemoryStore, query: str, *, limit: int, since: datetime | None, until: datetime | None,
                 namespace: str | None, mode: Mode, min_score: float) -> list[Hit]:
    if not isinstance(query, str) or not query.strip():
        raise CortexError("the query is empty: say what to look for")
    if len(query) > MAX_QUERY_CHARS:
        raise CortexError(f"the query is longer than {MAX_QUERY_CHARS:,} characters")
    if not 0.0 <= min_score <= 1.0:
        raise CortexError("min_score is a score between 0 and 1")
    ns = store.namespace(namespace)
    if not _WORD.search(query):  # only punctuation or symbols: nothing to look for
        return []

    async def embed() -> list[float] | None:
        return (await store.embedder.embed([query]))[0] if mode != "keyword" else None

    async def stats() -> Words:
        async with store.connection() as c:
            return Words.of(await c.fetchrow(_WORD_STATS, query, ns), own=mode == "keyword")

    vector, words = await both(embed, stats)  # the CPU embeds while Postgres counts the words
    if not words.memories or (mode == "keyword" and not words.idf):
        return []
    rows = await _candidates(store, ns, since, until, vector, words if mode != "semantic" else None, limit)
    hits = [_score(row, words, mode) for row in rows]
    hits = [h for h in hits if h.score >= min_score and h.score > 0]
    return sorted(hits, key=lambda h: (-h.score, -h.memory.id))[:limit]


async def _candidates(store: MemoryStore, ns: str, since: datetime | None, until: datetime | None,
                      vector: list[float] | None, words: Words | None, limit: int) -> list[asyncpg.Record]:
    where = ("namespace = $1 AND deleted_at IS NULL AND ($2::timestamptz IS NULL OR created_at >= $2) "
             "AND ($3::timestamptz IS NULL OR created_at < $3)")
    args: list[object] = [ns, since, until]

    def arg(value: object) -> str:
        args.append(value)
        return f"${len(args)}"

    pools, cosine, bm25 = [], "NULL::float8", "0::float8"
    if vector is not None:
        v = arg(vector)
        pools.append(f"(SELECT id FROM memories WHERE {where} ORDER BY embedding <=> {v} LIMIT {arg(max(limit * 4, 40))})")
        cosine = f"1 - (embedding <=> {v})"
    if words is not None and words.idf:
        pools.append(f"(SELECT id FROM memories WHERE words @@ {arg(words.match())}::tsquery AND {where} "
                     f"ORDER BY ts_rank(words, {arg(words.any())}::tsquery) DESC LIMIT {arg(max(limit * 20, 200))})")
        text, length = ("ts_filter(words, '{a}')", "cortex_length(ts_filter(words, '{a}'))") if words.own \
            else ("words", "words_length")
        bm25 = (f"cortex_bm25({text}, {length}, {arg(words.average_length)}, {arg(list(words.idf))}::text[], "
                f"{arg(list(words.idf.values()))}::float8[], {K1}, {B})")
    if not pools:
        return []
    async with store.connection() as c:
        return await c.fetch(f"SELECT {COLUMNS}, {cosine} AS cosine, {bm25} AS bm25 FROM memories "
                             f"WHERE id IN ({' UNION '.join(pools)})", *args)


def _score(row: asyncpg.Record, words: Words, mode: Mode) -> Hit:
    bm25 = float(row["bm25"])
    coverage = words.coverage(bm25)
    word_score = math.tanh(coverage)
    cosine = float(row["cosine"]) if row["cosine"] is not None else 0.0
    closeness = max(cosine, 0.0)
    if mode == "keyword":
        score = word_score
    elif mode == "semantic":
        score = closeness
    else:
        score = WORDS_WEIGHT * word_score + COSINE_WEIGHT * closeness
    parts = {"cosine": cosine} if mode == "semantic" else {"words": word_score, "coverage": coverage, "bm25": bm25}
    if mode == "hybrid":
        parts["cosine"] = cosine
    return Hit(memory(row), min(max(score, 0.0), 1.0), parts)
