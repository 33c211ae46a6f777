"""FTS5's bm25 for the matches among a few facts, without FTS5's walk of each word's list.

To rank the matches among a set of facts (a short period's, see
:mod:`graphmem.storage.sqlite.keyword`), FTS5 walks every match of the query, and each word's
whole list again to count its facts for the idf. For a day of 50 facts at a million facts,
that took 460.4 ms against 3.6 ms here (bench/REPORT.md, "Time words at 100k facts").
:class:`Scorer` computes the same ranking from the set alone:

1. the set's facts are written into an in-memory FTS5 table with the keyword index's columns
   and tokenizer, so each one's words and lengths are exactly what the index holds;
2. that table's vocabulary gives which facts match and each term's weighted frequency in each;
3. the idf takes each word's count from the keyword ranker's cache, and the number of facts and
   their average length from the index's averages record (:func:`averages`).
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ...ranking import FTS_COLUMN_WEIGHTS
from ..sql.keyword_index import FTS_COLUMNS
from .migrations import FTS_TOKENIZER

#: FTS5's bm25 parameters (``fts5_aux.c``).
K1: Final = 1.2
B: Final = 0.75
#: Words whose terms are cached at most (the cache is cleared when full).
TERM_CACHE_SIZE: Final = 20_000
#: Facts read and tokenized at a time.
READ_SLICE: Final = 500

_COLUMNS: Final = [c.strip() for c in FTS_COLUMNS.split(",")]
_WEIGHT: Final = dict(zip(_COLUMNS, FTS_COLUMN_WEIGHTS, strict=True))
_SELECTED: Final = (
    "WITH among AS MATERIALIZED ({among})"
    f" SELECT f.seq, {', '.join('f.' + c for c in _COLUMNS)} FROM facts f WHERE f.seq IN among"
)
_INSERT: Final = (
    f"INSERT INTO w(rowid, {FTS_COLUMNS}) VALUES ({', '.join('?' * (1 + len(_COLUMNS)))})"
)
_INSTANCES: Final = "SELECT doc, col, term FROM v WHERE term IN (SELECT value FROM json_each(?))"


class Scorer:
    """``(seq, bm25)`` of the facts of a set that match a query of single words (phrases of
    one term), best (lowest bm25) first, as FTS5's bm25 over the whole index gives them.

    With word counts taken since the memory last changed, the scores equal FTS5's: the same
    arithmetic in the same order (tests/storage/test_keyword.py compares them). A count is
    taken again once the memory has grown or shrunk by
    :data:`graphmem.storage.sqlite.keyword.DF_REFRESH_SHARE`; until then the idf is off by as
    much as the count moved (a word in a tenth more facts scores a few percent differently),
    never which facts match.
    """

    def __init__(self) -> None:
        self._scratch = threading.local()
        self._terms: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def ranked(
        self,
        conn: sqlite3.Connection,
        among: str,
        params: Mapping[str, Any],
        phrases: Sequence[str],
        frequency: Mapping[str, int],
    ) -> list[tuple[int, float]] | None:
        """The facts of ``among`` (a query for their ``seq``, with ``params``) that match any
        of ``phrases`` (quoted FTS5 phrases), ranked; ``frequency``: the number of facts that
        match each phrase. None when a phrase is more than one term (FTS5 must rank those: a
        phrase's terms must come in order). The facts are read and tokenized a slice at a time,
        so a time limit on ``conn``'s reads stops the work between slices."""
        scratch = self._connection()
        words = [p[1:-1].replace('""', '"') for p in phrases]
        terms = self._terms_of(scratch, words)
        if any(len(terms[w]) > 1 for w in words):
            return None
        wanted: dict[str, list[int]] = {}  # a term, the phrases it is (two words may stem alike)
        for i, w in enumerate(words):
            for term in terms[w]:
                wanted.setdefault(term, []).append(i)
        if not wanted:
            return []
        selected = conn.execute(_SELECTED.format(among=among), params)
        scratch.execute("BEGIN")
        try:  # written in a transaction, rolled back: one flush, nothing to delete
            # Read and written a slice at a time: each read of ``conn`` lets its time limit
            # stop the work (its progress handler), however many facts the period holds.
            while rows := selected.fetchmany(READ_SLICE):
                scratch.executemany(_INSERT, rows)
            found: dict[int, list[float]] = {}
            for doc, column, term in scratch.execute(_INSTANCES, [json.dumps(list(wanted))]):
                freq = found.get(doc)
                if freq is None:
                    freq = found[doc] = [0.0] * len(phrases)
                for i in wanted[term]:
                    freq[i] += _WEIGHT[column]
            lengths = _lengths(scratch, found)
        finally:
            selected.close()
            scratch.execute("ROLLBACK")
        size, average = averages(conn)
        having = [sum(1 for f in found.values() if f[i]) for i in range(len(phrases))]
        idf = [
            _idf(size, max(frequency.get(p, 0), n)) for p, n in zip(phrases, having, strict=True)
        ]
        scored = []
        for doc, counts in found.items():
            # In fts5Bm25Function's order of operations, so that the floats are FTS5's too.
            score = 0.0
            for weight, f in zip(idf, counts, strict=True):
                score += weight * (
                    (f * (K1 + 1.0)) / (f + K1 * (1 - B + B * lengths[doc] / average))
                )
            scored.append((doc, -1.0 * score))
        scored.sort(key=lambda hit: (hit[1], hit[0]))
        return scored

    def _connection(self) -> sqlite3.Connection:
        """This thread's in-memory FTS5 table (``w``, the index's columns and tokenizer), its
        vocabulary (``v``, ``fts5vocab`` ``instance``: where each term occurs) and a one-word
        table for the query's words (``q``, ``qv``). No second tokenizer: FTS5's own
        ``unicode61`` rules, diacritics and ``porter`` stems included."""
        scratch: sqlite3.Connection | None = getattr(self._scratch, "conn", None)
        if scratch is None:
            scratch = sqlite3.connect(":memory:", isolation_level=None)
            for table, columns, vocabulary in (("w", FTS_COLUMNS, "v"), ("q", "word", "qv")):
                scratch.execute(
                    f"CREATE VIRTUAL TABLE {table} USING fts5({columns},"
                    f" tokenize='{FTS_TOKENIZER}')"
                )
                scratch.execute(
                    f"CREATE VIRTUAL TABLE {vocabulary} USING fts5vocab({table}, 'instance')"
                )
            self._scratch.conn = scratch
        return scratch

    def _terms_of(
        self, scratch: sqlite3.Connection, words: Sequence[str]
    ) -> dict[str, tuple[str, ...]]:
        """Each word's terms as the keyword index makes them (none for a word the tokenizer
        drops, two or more for one it splits), cached."""
        with self._lock:
            known = {w: self._terms[w] for w in words if w in self._terms}
        missing = [w for w in dict.fromkeys(words) if w not in known]
        if missing:
            scratch.executemany("INSERT INTO q(rowid, word) VALUES (?, ?)", enumerate(missing, 1))
            split: dict[int, list[str]] = {}
            for doc, term in scratch.execute('SELECT doc, term FROM qv ORDER BY doc, "offset"'):
                split.setdefault(doc, []).append(term)
            scratch.execute("DELETE FROM q")
            fresh = {w: tuple(split.get(i, ())) for i, w in enumerate(missing, 1)}
            with self._lock:
                if len(self._terms) + len(fresh) > TERM_CACHE_SIZE:
                    self._terms.clear()
                self._terms.update(fresh)
            known.update(fresh)
        return known


def _idf(size: int, hits: int) -> float:
    """FTS5's idf: a word in more than about half the facts gets a floor, not a negative. A
    count taken before facts were deleted may exceed the facts left: it counts as all."""
    hits = min(hits, size)
    idf = math.log((size - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0 else 1e-6


def averages(conn: sqlite3.Connection) -> tuple[int, float]:
    """The number of facts in the keyword index and their average length in tokens, from
    FTS5's averages record: the row count, then each column's total."""
    row = conn.execute("SELECT block FROM facts_fts_data WHERE id = 1").fetchone()
    counts = _varints(row[0]) if row else []  # an index never written to has an empty record
    size = max(counts[0], 1) if counts else 1
    return size, max(sum(counts[1:]), 1) / size


def _lengths(scratch: sqlite3.Connection, docs: Mapping[int, Any]) -> dict[int, int]:
    """Each of ``docs``' length in tokens, all columns together, from the table's sizes."""
    rows = scratch.execute(
        "SELECT id, sz FROM w_docsize WHERE id IN (SELECT value FROM json_each(?))",
        [json.dumps(list(docs))],
    )
    return {doc: sum(_varints(sizes)) for doc, sizes in rows}


def _varints(blob: bytes) -> list[int]:
    """SQLite's variable-length integers, as FTS5 writes its sizes (a byte below 0x80 ends an
    integer; the ninth byte of one is used whole)."""
    out: list[int] = []
    value = n = 0
    for byte in blob:
        n += 1
        if n == 9:
            out.append((value << 8) | byte)
            value = n = 0
        elif byte & 0x80:
            value = (value << 7) | (byte & 0x7F)
        else:
            out.append((value << 7) | byte)
            value = n = 0
    return out
