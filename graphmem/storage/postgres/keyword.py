"""The keyword leg on PostgreSQL: bm25 as FTS5 computes it, from the keyword index's postings.

PostgreSQL's own ``ts_rank`` has no inverse document frequency, so a rare word counts no more
than a common one. :class:`Bm25Ranker` computes FTS5's bm25 instead (k1 = 1.2, b = 0.75, idf
floored at 1e-6), from ``gm_postings`` alone (:mod:`graphmem.storage.postgres.schema`, migration
3); only the ranked facts are then read, for the time scope and the filters.

1. Words select or score as in the SQLite store (:mod:`graphmem.storage.sql.keyword`).
2. The scoring words' postings are kept in memory once read (:class:`CommonWords`), so a
   selected fact costs an array search rather than a descent of the index.
3. The number of facts, their average length and each word's document frequency are counted per
   namespace and cached until it has grown or shrunk by :data:`REFRESH_SHARE`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from ... import ranking
from ...temporal import TimeScope
from ..interface import Filters, Record
from ..sql import keyword, reads

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
#: The postings of words ``:lexemes`` (of the facts ``:seqs``, when given). A posting is, for a
#: fact and a lexeme of its ``tsvector``, the lexeme's weighted frequency in the fact (the sum,
#: over its occurrences, of the weight of the column it occurs in:
#: graphmem.storage.postgres.schema.LABEL_WEIGHTS) and the fact's length in tokens.
_POSTINGS: Final = (
    f"SELECT p.seq, p.lexeme, p.tf, p.tokens FROM gm_postings p WHERE {_MINE}"
    " AND p.lexeme = ANY(CAST(%(lexemes)s AS text[]))"
)
#: For each window of turns holding a lexeme of ``:lexemes``: the lexeme's frequency in it and
#: the window's length in characters (bm25 weighs it against the mean of the matches).
_WINDOW_POSTINGS: Final = (
    "SELECT p.seq, p.lexeme, p.tf, p.chars FROM gm_window_postings p WHERE"
    f" {_MINE} AND p.lexeme = ANY(CAST(%(lexemes)s AS text[]))"
)
#: The scoring words' postings are read whole, rather than looked up for each selected fact,
#: while they number at most this many times the selected facts.
SCAN_SHARE: Final = 8
#: Postings of common words kept in memory per namespace, at most (16 bytes each; a word with
#: more than a quarter of them is never kept).
CACHED_POSTINGS: Final = 2_000_000
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
        self._common = CommonWords()

    def best(
        self, conn: Any, query: str, scope: TimeScope, filters: Filters, n: int
    ) -> tuple[dict[str, float], dict[str, Record]]:
        """bm25 (higher is better) and the ranking columns of the ``n`` best visible
        matches of ``query``.

        As in the SQLite store, the rarest words select facts while their document frequencies
        add up to at most :data:`graphmem.storage.sql.keyword.RANKING_BUDGET` (the rarest
        always selects); the others add to the score of a selected fact but bring in none. The
        facts that only scoring words match are ranked only if the selected ones leave fewer
        than ``n``.
        """
        words = [t[1:-1].replace('""', '"') for t in ranking.fts_terms(query)]
        if not words:
            return {}, {}
        lexemes = self._lexemes(conn, words)
        if not lexemes:
            return {}, {}
        period = filters.period
        among = None if period is None else reads.dated_in(conn, period, keyword.PERIOD_SELECT_MAX)
        if among is not None:
            sql, params, held = among
            if not held:  # a period holding no fact: nothing to count
                return {}, {}
        size, average, frequency = self._counts(conn, lexemes)
        if max(frequency.values()) > size:  # the namespace grew since it was counted
            self._marked = -math.inf
            size = max(frequency.values())
        idf = [
            max(math.log((size - frequency[x] + 0.5) / (frequency[x] + 0.5)), 1e-6) for x in lexemes
        ]
        idf_of = dict(zip(lexemes, idf, strict=True))
        if among is not None:  # a short period of time words: its facts' matches, scored alike
            scores = _scores(conn, lexemes, [], idf_of, frequency, average, among=(sql, params))
            found = _visible(conn, scores, scope, filters, n)
            return {r["id"]: score for r, score in found}, {r["id"]: r for r, _ in found}
        selecting: list[str] = []
        total = 0
        for lexeme in sorted(lexemes, key=lambda x: (frequency[x], x)):
            if selecting and total + frequency[lexeme] > keyword.RANKING_BUDGET:
                break
            selecting.append(lexeme)
            total += frequency[lexeme]
        scoring = [x for x in lexemes if x not in selecting]
        scores = _scores(conn, selecting, scoring, idf_of, frequency, average, self._common)
        found = _visible(conn, scores, scope, filters, n)
        if len(found) < n and scoring:  # then the facts that only scoring words match
            others = _scores(conn, scoring, [], idf_of, frequency, average, excluded=set(scores))
            found += _visible(conn, others, scope, filters, n - len(found))
        return {r["id"]: score for r, score in found}, {r["id"]: r for r, _ in found}

    def windows(self, conn: Any, query: str, n: int) -> dict[int, float]:
        """bm25 (higher is better) of the ``n`` best windows of turns matching ``query``
        (graphmem.windows), ranked by its rarest words
        (:func:`graphmem.storage.sql.keyword.window_words`); a word's idf is its facts', and
        a window's length (in characters) is weighed against the mean of the windows that
        match."""
        words = [t[1:-1].replace('""', '"') for t in ranking.fts_terms(query)]
        lexemes = self._lexemes(conn, words) if words else []
        if not lexemes:
            return {}
        size, _, frequency = self._counts(conn, lexemes)
        selecting = keyword.window_words(lexemes, frequency)
        if not selecting:
            return {}
        postings = conn.execute(_WINDOW_POSTINGS, {"lexemes": selecting}).fetchall()
        if not postings:
            return {}
        length = {int(r[0]): int(r[3]) for r in postings}
        average = sum(length.values()) / len(length) or 1.0
        scores: dict[int, float] = {}
        for seq, lexeme, tf, _ in postings:
            f = frequency[lexeme]
            idf = max(math.log((size - f + 0.5) / (f + 0.5)), 1e-6)
            norm = K1 * (1 - B + B * length[seq] / average)
            scores[seq] = scores.get(seq, 0.0) + idf * tf * (K1 + 1) / (tf + norm)
        best = sorted(scores, key=lambda seq: (-scores[seq], seq))[:n]
        return {seq: scores[seq] for seq in best}

    def _lexemes(self, conn: Any, words: list[str]) -> list[str]:
        """The distinct lexemes the keyword index's configuration makes of ``words`` (the
        words of :func:`graphmem.ranking.fts_terms`), each word's stems asked of the database
        once, then cached. A word that stems to several lexemes ("e-mail") counts as each."""
        with self._lock:
            if len(self._stems) > CACHE_SIZE:
                self._stems.clear()
            missing = [w for w in dict.fromkeys(words) if w not in self._stems]
        if missing:
            rows = conn.execute(
                "SELECT w, array_remove(array_agg(u.lexeme), NULL)"
                " FROM unnest(CAST(%(words)s AS text[])) w"
                " LEFT JOIN LATERAL unnest(to_tsvector('graphmem', w)) u ON true GROUP BY w",
                {"words": missing},
            ).fetchall()
            with self._lock:
                self._stems.update({r[0]: tuple(r[1]) for r in rows})
        with self._lock:
            return sorted({x for w in words for x in self._stems.get(w, ())})

    def _counts(self, conn: Any, lexemes: list[str]) -> tuple[int, float, dict[str, int]]:
        """The namespace's number of facts, their average length in tokens, each lexeme's
        document frequency: counted over every version of every fact (as FTS5's own counts
        are), cached until the namespace has grown or shrunk by REFRESH_SHARE."""
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
                    " AND p.lexeme = ANY(CAST(%(lexemes)s AS text[])) GROUP BY p.lexeme",
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
    common: CommonWords | None = None,
    excluded: frozenset[int] | set[int] = frozenset(),
    among: tuple[str, dict[str, Any]] | None = None,
) -> dict[int, float]:
    """bm25 of the facts (by position) that words ``selecting`` match, less ``excluded`` (and
    only those a query ``among`` selects, with its parameters), with the words ``scoring``
    adding to their scores (their postings taken from ``common`` where it keeps them): read
    from the postings, summed here in the words' order (deterministic, whatever order the rows
    come in)."""
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples: thousands of rows
    tfs: dict[str, dict[int, float]] = {}
    tokens: dict[int, int] = {}
    sql, params = _POSTINGS, {"lexemes": selecting}
    if among is not None:
        sql, params = f"{sql} AND p.seq IN ({among[0]})", {**among[1], **params}
    for seq, lexeme, tf, length in cursor.execute(sql, params).fetchall():
        if seq not in excluded:
            tfs.setdefault(lexeme, {})[seq] = tf
            tokens[seq] = length
    if scoring and tokens:
        if common is not None:
            tfs.update(common.lookup(cursor, scoring, frequency, list(tokens)))
        rest = [x for x in scoring if x not in tfs]
        # Reading a word's whole list costs about a ninth of looking a fact up in it.
        if not rest:
            more = []
        elif sum(frequency[x] for x in rest) <= SCAN_SHARE * len(tokens):
            more = cursor.execute(_POSTINGS, {"lexemes": rest}).fetchall()
        else:
            more = cursor.execute(
                _POSTINGS + " AND p.seq = ANY(CAST(%(seqs)s AS bigint[]))",
                {"lexemes": rest, "seqs": list(tokens)},
            ).fetchall()
        for seq, lexeme, tf, _ in more:
            if seq in tokens:
                tfs.setdefault(lexeme, {})[seq] = tf
    norm = {seq: K1 * (1 - B + B * length / average) for seq, length in tokens.items()}
    scores = dict.fromkeys(tokens, 0.0)
    for lexeme in sorted(tfs):  # each fact's sum in the words' order
        factor = idf[lexeme]
        for seq, tf in tfs[lexeme].items():
            scores[seq] += factor * (tf * (K1 + 1)) / (tf + norm[seq])
    return scores


class _Postings(NamedTuple):
    """A word's postings: positions (ascending) and weighted frequencies. Every posting of
    the word at a position up to ``upto`` is here."""

    upto: int
    seqs: npt.NDArray[np.int64]
    tfs: npt.NDArray[np.float64]


class CommonWords:
    """The postings of a namespace's common words, kept in memory once read.

    A scoring word (``Bm25Ranker.best``) is common by definition, and looking up each
    selected fact in its list costs the database a descent of the index per fact — about
    10 ms for 2,000 facts, most of a search. Kept here, the lookup is an array search.

    Exact whatever other writers do, because a fact's postings never change after it is
    written (its indexed columns are never updated; a purge deletes the row, and positions are
    never reused), and a namespace's writers commit one after another in the order of their
    positions (the namespace's advisory lock): a list read in a snapshot holds every posting up
    to the newest position that snapshot sees. A lookup of a newer fact first reads the
    postings written since (a range of the index). A purged fact's postings stay here, unused:
    only facts the selecting words find are looked up. At most :data:`CACHED_POSTINGS`
    postings are kept; the least recently used words go first.
    """

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = CACHED_POSTINGS if capacity is None else capacity
        self._lists: OrderedDict[str, _Postings] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def lookup(
        self, cursor: Any, words: list[str], frequency: dict[str, int], seqs: list[int]
    ) -> dict[str, dict[int, float]]:
        """For each of ``words`` it keeps (or now reads, if it fits), the frequencies of the
        facts ``seqs`` it occurs in."""
        newest = max(seqs)
        with self._lock:
            have = {w: self._lists.get(w) for w in words}
            for w in words:
                if have[w] is not None:
                    self._lists.move_to_end(w)
        wanted = [w for w in words if have[w] is not None or self._fits(frequency[w])]
        new = [w for w in wanted if have[w] is None]
        stale = {w: p.upto for w in wanted if (p := have[w]) is not None and p.upto < newest}
        for group, since in ((new, -1), (list(stale), min(stale.values(), default=-1))):
            if not group:
                continue
            rows = cursor.execute(
                _POSTINGS + " AND p.seq > %(since)s", {"lexemes": group, "since": since}
            ).fetchall()
            # One statement, one snapshot: it holds every posting up to the newest it read
            # (or the newest fact looked up, which an earlier snapshot saw).
            upto = max([newest, *(r[0] for r in rows)])
            read: dict[str, list[tuple[int, float]]] = {w: [] for w in group}
            for seq, lexeme, tf, _ in rows:
                read[lexeme].append((seq, tf))
            for w in group:
                have[w] = self._extend(w, have[w], read[w], upto)
        keys = np.array(seqs, dtype=np.int64)
        out: dict[str, dict[int, float]] = {}
        for w in wanted:
            postings = have[w]
            assert postings is not None
            at = np.searchsorted(postings.seqs, keys).clip(max=max(len(postings.seqs) - 1, 0))
            hit = postings.seqs[at] == keys if len(postings.seqs) else np.zeros(len(keys), bool)
            out[w] = dict(zip(keys[hit].tolist(), postings.tfs[at[hit]].tolist(), strict=True))
        return out

    def _fits(self, count: int) -> bool:
        return count <= self.capacity // 4

    def _extend(
        self, word: str, old: _Postings | None, rows: list[tuple[int, float]], upto: int
    ) -> _Postings:
        """``old`` with ``rows`` (the postings after its ``upto``) added, kept unless another
        thread moved the word's list meanwhile."""
        fresh = [r for r in rows if old is None or r[0] > old.upto]
        seqs = np.array([r[0] for r in fresh], dtype=np.int64)
        tfs = np.array([r[1] for r in fresh], dtype=np.float64)
        if old is not None:
            seqs, tfs = np.concatenate([old.seqs, seqs]), np.concatenate([old.tfs, tfs])
        order = np.argsort(seqs, kind="stable")
        made = _Postings(upto, seqs[order], tfs[order])
        with self._lock:
            if self._lists.get(word) is old:
                if old is not None:
                    self._size -= len(old.seqs)
                self._lists[word] = made
                self._lists.move_to_end(word)
                self._size += len(made.seqs)
                while self._size > self.capacity and len(self._lists) > 1:
                    _, dropped = self._lists.popitem(last=False)
                    self._size -= len(dropped.seqs)
        return made


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
