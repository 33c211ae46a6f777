"""The keyword leg on PostgreSQL: bm25 as FTS5 computes it, from the keyword index's postings.

PostgreSQL's own ``ts_rank`` has no inverse document frequency, so a rare word counts no more
than a common one. :class:`Bm25Ranker` computes FTS5's bm25 instead (k1 = 1.2, b = 0.75, idf
floored at 1e-6) from ``gm_postings`` (graphmem.pgschema, migration 3), which holds, for each
fact and each lexeme of its ``tsvector``, the lexeme's weighted frequency in the fact — the sum,
over its occurrences, of the weight of the column it occurs in (:data:`graphmem.pgschema.LABEL_WEIGHTS`) — and the
fact's length in tokens. Ranking reads that index alone; only the ranked facts are then read, for
the time scope and the filters.

* Selecting and scoring words, as in the SQLite store (graphmem.keyword): the rarest words
  select facts while their document frequencies add up to at most
  :data:`graphmem.keyword.RANKING_BUDGET` (the rarest always selects); the others add to the
  score of a selected fact but bring in none. The facts that only scoring words match are
  ranked only if the selected ones leave fewer than asked for.
* A fact's length is its number of tokens, the average over the namespace's facts; the number
  of facts and each word's document frequency are counted per namespace and cached until the
  namespace has grown or shrunk by a tenth (they steer idf, as FTS5's own counts do, over
  every version of every fact).

The query's words are those of :func:`graphmem.ranking.fts_terms`, stemmed by the same
configuration as the facts; a word that stems to several lexemes ("e-mail") counts as each.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Final

from . import keyword, ranking, reads
from .reads import Filters
from .store import Record
from .temporal import TimeScope

#: FTS5's bm25 constants.
K1: Final = 1.2
B: Final = 0.75
#: Cached counts are taken again once the namespace's size moved by this share.
REFRESH_SHARE: Final = 0.1
#: Words whose frequency, and words whose stems, are cached at most (cleared when full).
CACHE_SIZE: Final = 20_000
#: How often the namespace's growth (which renews the cached counts) is looked at, seconds.
MARKER_EVERY_S: Final = 1.0

#: The postings of the connection's namespace.
_MINE: Final = "p.namespace = current_setting('graphmem.namespace')"
#: The postings of words ``:lexemes`` (of the facts ``:seqs``, when given).
_POSTINGS: Final = (
    f"SELECT p.seq, p.lexeme, p.tf, p.tokens FROM gm_postings p WHERE {_MINE}"
    " AND p.lexeme = ANY(CAST(:lexemes AS text[]))"
)
#: The scoring words' postings are read whole, rather than looked up for each selected fact,
#: while they number at most this many times the selected facts.
SCAN_SHARE: Final = 8
#: Facts whose visibility is read per step, as a share of the facts wanted (at least MIN_STEP).
STEP_SHARE: Final = 2
MIN_STEP: Final = 100


class Bm25Ranker:
    """bm25-ranked keyword matches, with per-namespace counts cached."""

    def __init__(self) -> None:
        self._df: dict[str, int] = {}
        self._marker = -1  # the newest fact's position when last counted
        self._size = 0
        self._average = 1.0
        self._marked = -math.inf  # when the marker was last read (time.monotonic)
        self._stems: dict[str, tuple[str, ...]] = {}  # word -> its lexemes
        self._lock = threading.Lock()

    def best(
        self, conn: Any, query: str, scope: TimeScope, filters: Filters, n: int
    ) -> tuple[dict[str, float], dict[str, Record]]:
        """bm25 (higher is better) and the ranking columns of the ``n`` best visible
        matches of ``query``."""
        words = [t[1:-1].replace('""', '"') for t in ranking.fts_terms(query)]
        if not words:
            return {}, {}
        lexemes = self._lexemes(conn, words)
        if not lexemes:
            return {}, {}
        size, average, frequency = self._counts(conn, lexemes)
        if max(frequency.values()) > size:  # the namespace grew since it was counted
            self._marked = -math.inf
            size = max(frequency.values())
        idf = [
            max(math.log((size - frequency[x] + 0.5) / (frequency[x] + 0.5)), 1e-6) for x in lexemes
        ]
        idf_of = dict(zip(lexemes, idf, strict=True))
        selecting: list[str] = []
        total = 0
        for lexeme in sorted(lexemes, key=lambda x: (frequency[x], x)):
            if selecting and total + frequency[lexeme] > keyword.RANKING_BUDGET:
                break
            selecting.append(lexeme)
            total += frequency[lexeme]
        scoring = [x for x in lexemes if x not in selecting]
        scores = _scores(conn, selecting, scoring, idf_of, frequency, average, set())
        found = _visible(conn, scores, scope, filters, n)
        if len(found) < n and scoring:  # then the facts that only scoring words match
            others = _scores(conn, scoring, [], idf_of, frequency, average, set(scores))
            found += _visible(conn, others, scope, filters, n - len(found))
        return {r["id"]: score for r, score in found}, {r["id"]: r for r, _ in found}

    def _lexemes(self, conn: Any, words: list[str]) -> list[str]:
        """The distinct lexemes the keyword index's configuration makes of ``words`` (each
        word's stems asked of the database once, then cached)."""
        with self._lock:
            if len(self._stems) > CACHE_SIZE:
                self._stems.clear()
            missing = [w for w in dict.fromkeys(words) if w not in self._stems]
        if missing:
            rows = conn.execute(
                "SELECT w, array_remove(array_agg(u.lexeme), NULL)"
                " FROM unnest(CAST(:words AS text[])) w"
                " LEFT JOIN LATERAL unnest(to_tsvector('graphmem', w)) u ON true GROUP BY w",
                {"words": missing},
            ).fetchall()
            with self._lock:
                self._stems.update({r[0]: tuple(r[1]) for r in rows})
        with self._lock:
            return sorted({x for w in words for x in self._stems.get(w, ())})

    def _counts(self, conn: Any, lexemes: list[str]) -> tuple[int, float, dict[str, int]]:
        """The namespace's number of facts, their average length, each lexeme's document
        frequency (cached, see the module's docstring)."""
        # The newest fact's position moves at least as fast as the namespace grows (positions
        # are shared by every namespace): cheap to read, and it never misses a tenth's growth.
        # Read at most every MARKER_EVERY_S: counts a second late steer a query all the same.
        marker = self._marker
        if time.monotonic() - self._marked >= MARKER_EVERY_S:
            (marker,) = conn.execute("SELECT coalesce(max(seq), 0) FROM facts").fetchone()
            self._marked = time.monotonic()
        with self._lock:
            refresh = abs(marker - self._marker) > REFRESH_SHARE * max(self._size, 1)
            if refresh or len(self._df) > CACHE_SIZE:
                self._df.clear()
            known = {x: self._df[x] for x in lexemes if x in self._df}
        if refresh:
            count, average = conn.execute(
                "SELECT count(*), avg(fts_tokens) FROM gm_facts f"
                " WHERE f.namespace = current_setting('graphmem.namespace')"
            ).fetchone()
            with self._lock:
                self._marker = marker
                self._size, self._average = max(int(count), 1), float(average or 1) or 1.0
        missing = [x for x in lexemes if x not in known]
        if missing:
            counted = {
                r[0]: r[1]
                for r in conn.execute(
                    f"SELECT p.lexeme, count(*) FROM gm_postings p WHERE {_MINE}"
                    " AND p.lexeme = ANY(CAST(:lexemes AS text[])) GROUP BY p.lexeme",
                    {"lexemes": missing},
                )
            }
            known.update({x: int(counted.get(x, 0)) for x in missing})
        with self._lock:
            self._df.update(known)
            return self._size, self._average, known


def _scores(
    conn: Any,
    selecting: list[str],
    scoring: list[str],
    idf: dict[str, float],
    frequency: dict[str, int],
    average: float,
    excluded: set[int],
) -> dict[int, float]:
    """bm25 of the facts (by position) that words ``selecting`` match, less ``excluded``, with
    the words ``scoring`` adding to their scores: read from the postings, summed here in the
    words' order (deterministic, whatever order the rows come in)."""
    found: dict[int, list[tuple[str, float]]] = {}
    tokens: dict[int, int] = {}
    for seq, lexeme, tf, length in conn.execute(_POSTINGS, {"lexemes": selecting}).fetchall():
        if seq not in excluded:
            found.setdefault(seq, []).append((lexeme, tf))
            tokens[seq] = length
    if scoring and found:
        # Reading a word's whole list costs about a ninth of looking a fact up in it.
        if sum(frequency[x] for x in scoring) <= SCAN_SHARE * len(found):
            more = conn.execute(_POSTINGS, {"lexemes": scoring}).fetchall()
        else:
            more = conn.execute(
                _POSTINGS + " AND p.seq = ANY(CAST(:seqs AS bigint[]))",
                {"lexemes": scoring, "seqs": list(found)},
            ).fetchall()
        for seq, lexeme, tf, _ in more:
            if seq in found:
                found[seq].append((lexeme, tf))
    scores = {}
    for seq, terms in found.items():
        norm = K1 * (1 - B + B * tokens[seq] / average)
        scores[seq] = sum(
            idf[lexeme] * (tf * (K1 + 1)) / (tf + norm) for lexeme, tf in sorted(terms)
        )
    return scores


def _visible(
    conn: Any, scores: dict[int, float], scope: TimeScope, filters: Filters, n: int
) -> list[tuple[Record, float]]:
    """The ``n`` best of the scored facts that are visible in ``scope`` and pass ``filters``,
    with their scores: read a step at a time, best first."""
    ranked = sorted(scores, key=lambda seq: (-scores[seq], seq))
    out: list[tuple[Record, float]] = []
    step = max(n * STEP_SHARE, MIN_STEP)
    for start in range(0, len(ranked), step):
        chunk = ranked[start : start + step]
        rows = {r["seq"]: r for r in reads.candidates(conn, "seq", chunk, scope, filters)}
        out += [(rows[seq], scores[seq]) for seq in chunk if seq in rows]
        if len(out) >= n:
            break
    return out[:n]
