"""Search: candidates through the indexes, then one absolute score per memory.

Candidates are the nearest memories by vector (HNSW), those whose own words hold every word of the
query (GIN on `fts`), and those whose words in context hold any uncommon one (GIN on
`memory_context.words`; in a namespace of a few hundred memories, any word). Each is scored against
the query alone, never against the other candidates, so a score means the same from one query to the
next:

- `words`: BM25 of the memory's words in context (its own, its neighbours' at half weight and
  two away at a quarter: migration 004), with per-namespace inverse document frequencies, divided
  by the sum of the query words' IDFs (a memory holding each query word once, at average length,
  scores about 1) and squashed into [0, 1) by tanh;
- `closeness`: the embeddings' cosine similarity above what unrelated sentences get, scaled to
  [0, 1]: (cosine - floor) / (1 - floor), with the floor 0.2 for MiniLM (pairs of turns from
  different LoCoMo conversations: median cosine 0.12, 90th percentile 0.24);
- hybrid score = 0.6 x words + 0.4 x closeness, in [0, 1]; semantic = closeness; keyword counts a
  memory's own words only, as tanh(2 x coverage), so a memory holding every query word scores
  about 0.96 (its neighbours' words, which would saturate it, do not count there).
  A memory scoring 0 has nothing in common with the query and is never returned. The weights,
  the neighbour weights, BM25's k1 and b and the floor were chosen on the LoCoMo development split
  (bench/cortex_quality.py).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

import asyncpg

from .. import _spans
from .._tasks import both, every
from ._records import COLUMNS, Hit, memory, storable
from .exceptions import MemoryStoreError

if TYPE_CHECKING:
    from ._store import MemoryStore

Mode = Literal["hybrid", "semantic", "keyword"]
WORDS_WEIGHT, COSINE_WEIGHT = 0.6, 0.4
# What the neighbours' words add counts in full for a memory close to the query in meaning (closeness LEAN
# and up) and 1 - LEAN of it for one that is not: a reply is still found by the words of what it answers, and
# an unrelated note beside a keyword match stays under the recall threshold (issue 38: "troll" against a
# garlic note 0.32 -> 0.19, a 100,000-character "xxxx" 0.41 -> 0.26). On the LoCoMo development split
# recall@10 0.749 (0.752 with them in full; a flat share of 0.75 gave 0.745 and left "xxxx" at 0.31, 0.5 0.726);
# bench/cortex_quality.py prints every scoring tried.
LEAN = 0.4
K1, B = 1.5, 0.75
KEYWORD_SCALE = 2.0  # keyword mode: own words only, so a memory with every query word scores ~0.96
# The threshold for recalling memories unasked (the memory loop): on the LoCoMo development split, 96% of
# the questions that find evidence in their top 10 keep it, and 93% of unrelated queries return nothing.
RECALL_MIN_SCORE = 0.3
COSINE_FLOOR = 0.2  # all-MiniLM-L6-v2's cosine for unrelated text; a setting, as other models differ
WINDOW = 1 + 2 * 0.5 + 2 * 0.25  # a memory's words in context against its own: the neighbour weights (004)
UNCOMMON_SHARE, UNCOMMON_FLOOR = 0.05, 100  # a word in fewer memories than this fetches memories alone
MAX_QUERY_CHARS, MAX_QUERY_WORDS = 10_000, 64
# A word pool is ranked (ts_rank, which reads every match from the heap) only when it can hold at most this
# many memories; a larger one gives its first matches unranked, and the vector pool carries the query. In a
# namespace of up to RANK_CAP memories (LoCoMo's are ~600) every pool is ranked. At 100k memories, ranking
# the 6,500 holders of "quarterly report" took 17 ms of a 25 ms lookup.
RANK_CAP = 2_000
CONTEXT_SPAN = 5  # a memory's words are in the context of itself and four neighbours (migration 004)
_WORD = re.compile(r"\w+")
# A memory that is a line of a conversation (`[date] Name: text`, or `Name: text`) whose speaker the query names
# ("what did Nate cook?") scores SPEAKER times more (at most 1). A name is in half a conversation's turns, so its
# words weigh little; on the LoCoMo development split this took hybrid recall@10 from 0.752 to 0.767 (x1.2 0.761,
# x1.5 0.767, x1.75 0.765; +0.2 added 0.768: bench/cortex_quality.py). Hybrid mode only.
SPEAKER = 1.35
_SPEAKER = re.compile(r"(?:\[[^\]\n]{1,80}\]\s*)?([A-Z][\w'.-]{0,39})(?: [A-Z][\w'.-]{0,39}){0,2}:\s")

_WORD_STATS = """
SELECT coalesce(n.memories, 0) AS memories, coalesce(n.length, 0) AS length,
       array(SELECT q.lexeme FROM unnest(to_tsvector('english', $1)) q ORDER BY q.lexeme) AS lexemes,
       array(SELECT coalesce((SELECT w.memories FROM memory_words w WHERE w.namespace = $2 AND w.lexeme = q.lexeme), 0)
             FROM unnest(to_tsvector('english', $1)) q ORDER BY q.lexeme) AS counts
FROM (VALUES (1)) one LEFT JOIN memory_namespaces n ON n.namespace = $2"""  # each word's own sum (migration 009)


@dataclass(frozen=True)
class Words:
    """The query's words with their inverse document frequencies in the namespace."""

    memories: int
    own_length: float  # the average memory's own words
    idf: dict[str, float]
    counts: dict[str, int]
    own: bool = False  # keyword mode: a memory's own words only (fts), not its neighbours'

    @classmethod
    def of(cls, row: asyncpg.Record, *, own: bool) -> Words:
        n = max(int(row["memories"]), 0)
        counts = {w: max(int(c), 0) for w, c in zip(row["lexemes"], row["counts"], strict=True) if _WORD.fullmatch(w)}
        counts = dict(list(counts.items())[:MAX_QUERY_WORDS])
        idf = {w: math.log(1 + (n - c + 0.5) / (c + 0.5)) for w, c in counts.items()}
        return cls(n, float(row["length"]) / n if n else 0.0, idf, counts, own)

    @property
    def average_length(self) -> float:
        return self.own_length if self.own else WINDOW * self.own_length

    def every(self) -> str:
        return " & ".join(f"'{w}'" for w in self.idf)

    def rare(self) -> str:
        """The words rare enough to fetch a memory alone (in a small namespace, any word)."""
        rare = max(UNCOMMON_SHARE * self.memories, UNCOMMON_FLOOR)
        return " | ".join(f"'{w}'" for w, c in self.counts.items() if c <= rare)

    def any(self) -> str:
        return " | ".join(f"'{w}'" for w in self.idf)

    def every_bound(self) -> int:
        """At most this many memories hold every query word (the rarest word's count)."""
        return min(min(self.counts.values(), default=0), self.memories)

    def rare_bound(self) -> int:
        """At most this many memories hold a rare word in their words in context."""
        rare = max(UNCOMMON_SHARE * self.memories, UNCOMMON_FLOOR)
        return min(CONTEXT_SPAN * sum(c for c in self.counts.values() if c <= rare), self.memories)

    def coverage(self, bm25: float) -> float:
        """BM25 against what a memory holding each query word once, at average length, scores."""
        total = sum(self.idf.values())
        return bm25 / total if total else 0.0


def _in_range(moment: datetime | None) -> datetime | None:
    """A window's end as the database can take it: one before or after what a time in UTC can say (year 1 at
    +01:00, 9999-12-31 at -01:00, or without a zone on a machine west or east of UTC, which the database's driver
    reads as local time) is the first or last moment there is (the driver failed on it, and the tool said only
    "Error executing tool search")."""
    if moment is None:
        return None
    try:
        return moment.astimezone(UTC)  # (one without a zone: local time, as the driver would read it)
    except (OverflowError, ValueError):
        return (datetime.min if moment.year == 1 else datetime.max).replace(tzinfo=UTC)


async def search(
    store: MemoryStore,
    queries: Sequence[str],
    *,
    limit: int,
    since: datetime | None,
    until: datetime | None,
    namespace: str | None,
    mode: Mode,
    min_score: float,
    context: bool = True,
    include_history: bool = False,
) -> list[list[Hit]]:
    """The hits of each query, in order. Several queries are embedded in one batch and looked up side by
    side: the memory loop's recall asks a few at once, and one model run for all costs less than one each.
    `context=False` scores a memory's own words only: for standalone notes (a game's), whose neighbours
    are other notes, not the conversation around them. A NUL in a query is taken out and a lone surrogate made
    U+FFFD, as the loop's archive does with what it keeps (`storable`): Postgres text cannot hold either, and
    neither is a word to look for."""
    queries = [storable(q) for q in queries]
    for query in queries:
        if not isinstance(query, str) or not query.strip():
            raise MemoryStoreError("the query is empty: say what to look for")
        if len(query) > MAX_QUERY_CHARS:
            raise MemoryStoreError(f"the query is longer than {MAX_QUERY_CHARS:,} characters")
    if not 0.0 <= min_score <= 1.0:
        raise MemoryStoreError("min_score is a score between 0 and 1")
    since, until = _in_range(since), _in_range(until)
    ns = store.namespace(namespace)
    live = [q for q in queries if _WORD.search(q)]  # only punctuation or symbols: nothing to look for
    if not live:
        return [[] for _ in queries]

    async def embed() -> Sequence[list[float] | None]:
        if mode == "keyword":
            return [None] * len(live)
        with _spans.span(_spans.EMBED, attributes={_spans.MEMORY_QUERY_COUNT: len(live)}):
            return await store.embedder.embed(live)

    async def stats() -> list[Words]:
        with _spans.span(_spans.SQL, attributes={_spans.DB_OPERATION: "word statistics"}):
            async with store.connection() as c:
                words = []
                for q in live:
                    row = await c.fetchrow(_WORD_STATS, q, ns)
                    assert row is not None  # a SELECT with no FROM: always one row
                    words.append(Words.of(row, own=mode == "keyword" or not context))
                return words

    vectors, words = await both(embed, stats)  # the CPU embeds while Postgres counts the words

    async def one(query: str, vector: list[float] | None, query_words: Words) -> list[Hit]:
        if not query_words.memories or (mode == "keyword" and not query_words.idf):
            return []
        with _spans.span(_spans.SQL, attributes={_spans.DB_OPERATION: "candidates"}) as sql:
            rows = await _candidates(
                store, ns, since, until, vector, query_words if mode != "semantic" else None, limit, include_history
            )
            sql.set_attribute(_spans.DB_ROWS, len(rows))
        with _spans.span(_spans.SCORE) as scoring:
            names = set(_WORD.findall(query)) if mode == "hybrid" else set()
            scored = [(_score(row, query_words, mode, store.cosine_floor, names), row) for row in rows]
            scored = sorted(
                (s for s in scored if s[0][0] >= min_score and s[0][0] > 0), key=lambda s: (-s[0][0], -s[1]["id"])
            )
            hits = [Hit(memory(row), score, parts, row["has_image"]) for (score, parts), row in scored[:limit]]
            if scoring.is_recording():
                scoring.set_attributes(
                    {
                        _spans.MEMORY_FOUND: len(hits),
                        _spans.MEMORY_IDS: [h.memory.id for h in hits],
                        _spans.MEMORY_SCORES: [round(h.score, 4) for h in hits],
                    }
                )
            return hits

    found = iter(await every([functools.partial(one, q, v, w) for q, v, w in zip(live, vectors, words, strict=True)]))
    return [next(found) if _WORD.search(q) else [] for q in queries]


async def _candidates(
    store: MemoryStore,
    ns: str,
    since: datetime | None,
    until: datetime | None,
    vector: list[float] | None,
    words: Words | None,
    limit: int,
    include_history: bool = False,
) -> list[asyncpg.Record]:
    where = (
        "m.namespace = $1 AND m.deleted_at IS NULL AND ($2::timestamptz IS NULL OR m.created_at >= $2) "
        "AND ($3::timestamptz IS NULL OR m.created_at < $3)" + ("" if include_history else " AND m.valid_to IS NULL")
    )  # current memories, unless history is asked
    args: list[object] = [ns, since, until]

    def arg(value: object) -> str:
        args.append(value)
        return f"${len(args)}"

    pools, cosine, found, length = [], "NULL::float8", "''::text AS found", "0::float8 AS length"
    if vector is not None:
        v = arg(vector)
        pools.append(
            f"(SELECT m.id FROM memories m WHERE {where} ORDER BY m.embedding <=> {v} LIMIT {arg(max(limit * 4, 40))})"
        )
        cosine = f"1 - (m.embedding <=> {v})"
    if words is not None and words.idf:
        # a memory whose own words hold every query word (memories_fts), and those whose words (in context,
        # unless keyword mode keeps to their own) hold a rare one (memory_context_words)
        many = arg(max(limit * 20, 200))

        def order(column: str, bound: int) -> str:
            return f"ORDER BY ts_rank({column}, {arg(words.any())}::tsquery) DESC " if bound <= RANK_CAP else ""

        pools.append(
            f"(SELECT m.id FROM memories m WHERE m.fts @@ {arg(words.every())}::tsquery AND {where} "
            f"{order('m.fts', words.every_bound())}LIMIT {many})"
        )
        if words.rare() and words.own:
            pools.append(
                f"(SELECT m.id FROM memories m WHERE m.fts @@ {arg(words.rare())}::tsquery AND {where} "
                f"{order('m.fts', words.rare_bound())}LIMIT {many})"
            )
        elif words.rare():
            pools.append(
                f"(SELECT m.id FROM memory_context c JOIN memories m USING (id) WHERE c.namespace = $1 "
                f"AND c.words @@ {arg(words.rare())}::tsquery AND {where} "
                f"{order('c.words', words.rare_bound())}LIMIT {many})"
            )
        # own words: the memory's fts (unweighted positions count 1); in context: memory_context, or the
        # memory's own words while it has none (a bulk load not yet refreshed)
        text, length = (
            ("m.fts", "m.own_length")
            if words.own
            else ("coalesce(c.words, setweight(m.fts, 'A'))", "coalesce(c.words_length, m.own_length)")
        )
        lexemes = arg(list(words.idf))
        found = f"ts_delete({text}, tsvector_to_array(ts_delete({text}, {lexemes}::text[])))::text"  # query's only
        found, length = f"{found} AS found", f"{length} AS length"
    if not pools:
        return []
    columns = ", ".join(f"m.{c}" for c in COLUMNS.split(", "))
    async with store.connection() as c:
        # whether each has an image too: search results say so, without a round trip of their own
        return await c.fetch(
            f"SELECT {columns}, {cosine} AS cosine, {found}, {length}, EXISTS (SELECT 1 FROM "
            "memory_images i WHERE i.memory_id = m.id) AS has_image FROM memories m "
            f"LEFT JOIN memory_context c USING (id) WHERE m.id IN ({' UNION '.join(pools)})",
            *args,
        )


_POSITIONS = re.compile(r"'(\w+)':([0-9A-D,]+)")
_WEIGHTS = {"B": 0.5, "C": 0.25}  # a neighbour's word, one two away (migration 004); its own (A, or none) count 1


def bm25(found: str, length: float, words: Words) -> tuple[float, float]:
    """BM25 of a memory from its query words with their positions as Postgres prints them (`'lamp':3A,9B`):
    computed here rather than in SQL, where a function per row cost ten times more. Two scores from one reading:
    with its words in context, and with its own words only (the positions without a neighbour's mark)."""
    norm = K1 * (1 - B + B * length / max(words.average_length, 1.0))
    total = own_total = 0.0
    for lexeme, positions in _POSITIONS.findall(found):
        marks = [p[-1] for p in positions.split(",")]
        idf = words.idf.get(lexeme, 0.0)
        tf = sum(_WEIGHTS.get(mark, 1.0) for mark in marks)
        if tf:
            total += idf * tf * (K1 + 1) / (tf + norm)
        own = sum(1.0 for mark in marks if mark not in _WEIGHTS)
        if own:
            own_total += idf * own * (K1 + 1) / (own + norm)
    return total, own_total


def speaker_named(content: str, names: set[str]) -> bool:
    """Whether `content` is a line of a conversation whose speaker's (first) name is among the query's words."""
    match = _SPEAKER.match(content)
    return match is not None and match.group(1) in names


def _score(
    row: asyncpg.Record, words: Words, mode: Mode, floor: float, names: set[str] | None = None
) -> tuple[float, dict[str, float]]:
    bm25_, own_bm25 = bm25(row["found"] or "", float(row["length"] or 0.0), words)
    coverage, own = words.coverage(bm25_), words.coverage(own_bm25)
    cosine = float(row["cosine"]) if row["cosine"] is not None else 0.0
    closeness = min(max((cosine - floor) / (1 - floor), 0.0), 1.0)
    # what the neighbours' words add: they find a reply, but alone they must not make an unrelated note
    # "likely relevant" (issue 38), so in full only for a memory that is itself close in meaning
    neighbours = min(1.0, 1 - LEAN + closeness)
    word_score = math.tanh(own) + neighbours * (math.tanh(coverage) - math.tanh(own))
    if mode == "keyword":
        word_score = score = math.tanh(KEYWORD_SCALE * coverage)
    elif mode == "semantic":
        score = closeness
    else:
        score = WORDS_WEIGHT * word_score + COSINE_WEIGHT * closeness
    speaker = speaker_named(row["content"], names) if names else False
    if speaker:
        score *= SPEAKER
    parts = {} if mode == "semantic" else {"words": word_score, "coverage": coverage, "bm25": bm25_, "own": own}
    if speaker:
        parts["speaker"] = SPEAKER
    if mode != "keyword":
        parts |= {"cosine": cosine, "closeness": closeness}
    return min(max(score, 0.0), 1.0), parts
