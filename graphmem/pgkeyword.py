"""The keyword leg on PostgreSQL: bm25 as FTS5 computes it, from the generated ``tsvector``.

PostgreSQL's own ``ts_rank`` has no inverse document frequency, so a rare word counts no more
than a common one. :class:`Bm25Ranker` computes FTS5's bm25 instead (k1 = 1.2, b = 0.75, idf
floored at 1e-6) over the facts the query's words match (the GIN index finds them):

* a word's weighted frequency in a fact is the sum, over its occurrences, of the weight of the
  column it occurs in — carried by the ``tsvector``'s weight labels (:data:`LABEL_WEIGHTS`: the
  text, then entity/key/value, tags, and category/context/date terms, as
  ``graphmem.ranking.FTS_COLUMN_WEIGHTS`` weighs them, category taking its neighbours' 0.3);
* a word in more than half of the facts (whose idf is floored) does not select facts unless the
  rarer words leave fewer than asked for: it would bring in most of the namespace to add next to
  nothing to their scores;
* a fact's length is its number of tokens (``fts_tokens``), the average over the namespace's
  facts; the number of facts and each word's document frequency are counted per namespace and
  cached until the namespace has grown or shrunk by a tenth (they steer idf, as FTS5's own
  counts do, over every version of every fact).

The query's words are those of :func:`graphmem.ranking.fts_terms`, stemmed by the same
configuration as the facts; a word that stems to several lexemes ("e-mail") counts as each.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Final

from . import ranking
from .reads import CANDIDATE_COLUMNS, Filters
from .store import Record
from .temporal import TimeScope

#: The weight of each weight label of the keyword index (see graphmem.pgschema).
LABEL_WEIGHTS: Final = {"A": 1.0, "B": 0.6, "C": 0.4, "D": 0.3}
#: FTS5's bm25 constants.
K1: Final = 1.2
B: Final = 0.75
#: Cached counts are taken again once the namespace's size moved by this share.
REFRESH_SHARE: Final = 0.1
#: Words whose frequency is cached at most (the cache is cleared when full).
CACHE_SIZE: Final = 20_000

_WEIGHT: Final = (
    "CASE lab "
    + " ".join(f"WHEN '{label}' THEN {w}" for label, w in LABEL_WEIGHTS.items())
    + " END"
)
#: The facts of the connection's namespace (the base table: the view has no keyword columns).
_MINE: Final = "f.namespace = current_setting('graphmem.namespace')"
#: The ranking columns and bm25 of the visible facts (``{where}``, on ``f``) matching ``:match``,
#: best first: one pass over the matching rows, visibility checked on the same rows.
_RANKED: Final = f"""
    SELECT {CANDIDATE_COLUMNS}, sum(q.idf * (w.tf * {K1 + 1}) / (w.tf + {K1} * ({1 - B} + {B}
        * f.fts_tokens / :avgdl)) ORDER BY q.term) AS score
    FROM gm_facts f
    CROSS JOIN LATERAL (
        SELECT u.lexeme, sum({_WEIGHT} ORDER BY lab) AS tf FROM unnest(f.fts) u, unnest(u.weights) lab
        WHERE u.lexeme = ANY(CAST(:lexemes AS text[])) GROUP BY u.lexeme
    ) w
    JOIN unnest(CAST(:lexemes AS text[]), CAST(:idf AS float8[])) AS q(term, idf)
        ON q.term = w.lexeme
    WHERE {_MINE} AND f.fts @@ CAST(:match AS tsquery) AND {{where}}
    GROUP BY f.namespace, f.seq
    ORDER BY score DESC, f.seq LIMIT :n
"""


class Bm25Ranker:
    """bm25-ranked keyword matches, with per-namespace counts cached."""

    def __init__(self) -> None:
        self._df: dict[str, int] = {}
        self._marker = -1  # the newest fact's position when last counted
        self._size = 0
        self._average = 1.0
        self._lock = threading.Lock()

    def best(
        self, conn: Any, query: str, scope: TimeScope, filters: Filters, n: int
    ) -> tuple[dict[str, float], dict[str, Record]]:
        """bm25 (higher is better) and the ranking columns of the ``n`` best visible
        matches of ``query``."""
        words = [t[1:-1].replace('""', '"') for t in ranking.fts_terms(query)]
        if not words:
            return {}, {}
        lexemes = _lexemes(conn, words)
        if not lexemes:
            return {}, {}
        size, average, frequency = self._counts(conn, lexemes)
        idf = [
            max(math.log((size - frequency[x] + 0.5) / (frequency[x] + 0.5)), 1e-6) for x in lexemes
        ]
        where, params = filters.clause(scope)
        params.update(lexemes=lexemes, idf=idf, avgdl=average, n=n)
        sql = _RANKED.format(where=where)
        # A word in more than half the facts scores next to nothing (idf floored at 1e-6) but
        # would bring in most of them: the others select, and it only scores; the facts that
        # have it alone are ranked only if the others leave fewer than n.
        selecting = [x for x in lexemes if 2 * frequency[x] <= size] or lexemes
        rows = conn.execute(sql, {**params, "match": _any(selecting)}).fetchall()
        if len(rows) < n and len(selecting) < len(lexemes):
            rows = conn.execute(sql, {**params, "match": _any(lexemes)}).fetchall()
        return {r["id"]: float(r["score"]) for r in rows}, {r["id"]: r for r in rows}

    def _counts(self, conn: Any, lexemes: list[str]) -> tuple[int, float, dict[str, int]]:
        """The namespace's number of facts, their average length, each lexeme's document
        frequency (cached, see the module's docstring)."""
        # The newest fact's position moves at least as fast as the namespace grows (positions
        # are shared by every namespace): cheap to read, and it never misses a tenth's growth.
        (marker,) = conn.execute("SELECT coalesce(max(seq), 0) FROM facts").fetchone()
        with self._lock:
            refresh = abs(marker - self._marker) > REFRESH_SHARE * max(self._size, 1)
            if refresh or len(self._df) > CACHE_SIZE:
                self._df.clear()
            known = {x: self._df[x] for x in lexemes if x in self._df}
        if refresh:
            count, average = conn.execute(
                f"SELECT count(*), avg(fts_tokens) FROM gm_facts f WHERE {_MINE}"
            ).fetchone()
            with self._lock:
                self._marker = marker
                self._size, self._average = max(int(count), 1), float(average or 1) or 1.0
        for lexeme in lexemes:
            if lexeme not in known:
                (known[lexeme],) = conn.execute(
                    f"SELECT count(*) FROM gm_facts f WHERE {_MINE}"
                    " AND f.fts @@ CAST(:match AS tsquery)",
                    {"match": _any([lexeme])},
                ).fetchone()
        with self._lock:
            self._df.update(known)
            return self._size, self._average, known


def _lexemes(conn: Any, words: list[str]) -> list[str]:
    """The distinct lexemes the keyword index's configuration makes of ``words``."""
    rows = conn.execute(
        "SELECT DISTINCT u.lexeme FROM unnest(CAST(:words AS text[])) w,"
        " unnest(to_tsvector('graphmem', w)) u",
        {"words": words},
    )
    return sorted(r[0] for r in rows)


def _any(lexemes: list[str]) -> str:
    """A tsquery matching any of ``lexemes`` (already normalised: quoted, not parsed again)."""
    return " | ".join("'" + x.replace("\\", "\\\\").replace("'", "''") + "'" for x in lexemes)
