"""The graph's structure in memory, for traversals: who links to whom, and when each is visible.

A depth-2 walk asks for the links of about a hundred facts, their far ends' visibility and the
links among everything reached: milliseconds of SQL for what compact arrays answer in a fraction
of it. :class:`GraphCopy` keeps each fact's time columns and each link's ends, type, strength and
time columns, with each fact's links as compressed rows (CSR); facts and links are read in SQL.

1. A namespace's first walk starts loading the copy in a background thread; walks run in SQL
   until it is ready (5.3 s at 100k facts and 500k links: bench/REPORT.md, "Traversal").
2. Before each walk, the copy reads what is new in the walk's snapshot (:meth:`Adjacency.catch_up`).
3. A walk (:class:`IndexWalk`) applies the time scope with vectorised comparisons that are the
   SQL clauses of :class:`graphmem.temporal.TimeScope`, NULLs included, so it answers exactly
   what the SQL walk (:class:`graphmem.storage.sql.traversal.Walk`) answers.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ...limits import FAN_OUT
from ...models import LINK_TYPES, Link, link_columns
from ...temporal import TimeScope
from ..interface import Step
from .connections import SQLConnection
from .params import id_list

_log = logging.getLogger("graphmem")

#: Log entries kept; a copy further behind reloads.
GRAPH_LOG_KEPT: Final = 200_000
#: Rows read at a time when loading.
LOAD_BATCH_ROWS: Final = 65_536
#: Links added since the compressed rows were built before they are rebuilt.
REBUILD_AFTER: Final = 20_000
#: Links one fact gained since then before they are rebuilt (a new hub).
REBUILD_FACT: Final = 64

FACT_CHANGED: Final = 0
LINK_CHANGED: Final = 1
FACT_DELETED: Final = 2
LINK_DELETED: Final = 3

_TYPE_CODE: Final = {t: n for n, t in enumerate(LINK_TYPES)}

_FACT_SQL: Final = (
    "SELECT seq, id, recorded_at, retracted_at, valid_from, expires_at, valid_until,"
    " valid_until_recorded_at FROM facts"
)
_LINK_SQL: Final = (
    "SELECT seq, source_id, target_id, type, strength, recorded_at, retracted_at,"
    " valid_from, valid_until, valid_until_recorded_at FROM links"
)

Ints = npt.NDArray[np.int64]


class _Columns:
    """Growable numpy columns of one kind of row, by position."""

    def __init__(self, dtypes: dict[str, Any]) -> None:
        self.size = 0
        self.data: dict[str, npt.NDArray[Any]] = {
            name: np.empty(0, dtype) for name, dtype in dtypes.items()
        }

    def append(self, rows: dict[str, Sequence[Any]]) -> int:
        """Append ``rows`` (a column each, all as long); returns the first new position."""
        count = len(next(iter(rows.values())))
        start, end = self.size, self.size + count
        for name, values in rows.items():
            column = self.data[name]
            if end > len(column):
                grown = np.empty(max(end, 2 * len(column), 1024), column.dtype)
                grown[:start] = column[:start]
                self.data[name] = column = grown
            column[start:end] = values
        self.size = end
        return start

    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        return self.data[name]


def _marks(conn: SQLConnection) -> tuple[int, int, int]:
    """The highest seq of the graph log, the facts and the links in ``conn``'s snapshot."""
    position, fact_seq, link_seq = conn.execute(
        "SELECT (SELECT coalesce(max(seq), 0) FROM graph_log),"
        " (SELECT coalesce(max(seq), 0) FROM facts), (SELECT coalesce(max(seq), 0) FROM links)"
    ).fetchone()
    return (position, fact_seq, link_seq)


def _rows(conn: SQLConnection, select: str, where: str, value: Any) -> list[Any]:
    """The rows of ``select`` (``_FACT_SQL`` or ``_LINK_SQL``) where ``where`` holds, its one
    parameter being ``value``."""
    return conn.execute(f"{select} WHERE {where}", [value]).fetchall()


def _positions(columns: _Columns, rows: Sequence[Sequence[Any]]) -> list[int]:
    """Where the rows (seq first) are in ``columns``, appended in seq order; rows not there
    are left out."""
    seqs = columns["seq"][: columns.size]
    wanted = np.fromiter((row[0] for row in rows), np.int64, len(rows))
    at = np.minimum(np.searchsorted(seqs, wanted), max(columns.size - 1, 0))
    return at[seqs[at] == wanted].tolist() if columns.size else []


def _times(values: Iterable[float | None], null: float) -> list[float]:
    return [null if v is None else v for v in values]


def _until_recorded(
    valid_until: Sequence[float | None], recorded: Sequence[float | None]
) -> list[float]:
    """valid_until_recorded_at as the clause reads it: with a valid_until but no recording time
    (``NULL <= :known_at``), the row is hidden once valid_until is past, as if recorded always."""
    return [
        (-math.inf if u is not None else math.inf) if r is None else r
        for u, r in zip(valid_until, recorded, strict=True)
    ]


def prune_graph_log(conn: SQLConnection) -> None:
    """Drop the graph log's entries beyond the newest GRAPH_LOG_KEPT (in a write transaction)."""
    d = conn.dialect
    (last,) = conn.execute("SELECT coalesce(max(seq), 0) FROM graph_log").fetchone()
    conn.execute(f"DELETE FROM graph_log WHERE seq <= {d.arg}", [last - GRAPH_LOG_KEPT])


class _Stopped(Exception):
    """The namespace closed while its copy was loading."""


class GraphCopy:
    """One namespace's graph structure in memory (see the module docstring)."""

    def __init__(self, connect: Any, *, enabled: bool = True) -> None:
        #: A callable giving a read connection of the calling thread (for the background load).
        self._connect = connect
        self._lock = threading.Lock()
        self._state: Adjacency | None = None
        self._loading = False
        self._failed = not enabled  # never loaded: every walk in SQL
        self._closed = threading.Event()
        self._loader: threading.Thread | None = None

    @contextmanager
    def walking(self, conn: SQLConnection) -> Iterator[Adjacency | None]:
        """The copy as of ``conn``'s snapshot, held for the block; None when the walk must run
        in SQL (the copy is loading, failed to load, or is newer than the snapshot: a walk
        never mixes two states)."""
        with self._lock:
            state = self._state
            if state is None:
                self._start_loading()
                yield None
                return
            marks = _marks(conn)
            if marks != state.marks and not state.catch_up(conn):
                state = self._state = None  # deleted rows, or a log it lost: load afresh
                self._start_loading()
                yield None
                return
            # Unless the snapshot is older than the copy (another thread caught it up).
            yield state if marks == state.marks else None

    def wait(self, timeout: float) -> bool:
        """Wait until the copy is loaded (starting the load if it has not begun); False if it
        is not ready within ``timeout`` seconds or is not used at all."""
        with self._lock:
            self._start_loading()
            loader = self._loader
        if loader is not None and timeout > 0:
            loader.join(timeout)
        return self._state is not None

    @property
    def loading(self) -> bool:
        """Whether a load is under way (walks run in SQL until it ends)."""
        loader = self._loader
        return loader is not None and loader.is_alive()

    def close(self) -> None:
        """Stop a load under way (before the store closes its connections)."""
        self._closed.set()
        loader = self._loader
        if loader is not None:
            loader.join()

    def _start_loading(self) -> None:
        if self._loading or self._failed or self._closed.is_set():
            return
        self._loading = True
        self._loader = threading.Thread(target=self._load, name="graphmem-adjacency", daemon=True)
        self._loader.start()

    def _load(self) -> None:
        try:
            conn = self._connect()
            conn.execute("BEGIN")
            try:
                state = Adjacency.load(conn, self._closed)
            finally:
                conn.execute("COMMIT")
        except _Stopped:
            return
        except Exception:  # the SQL walk goes on; say why once
            _log.exception("cannot load the graph's adjacency copy; traversals stay in SQL")
            with self._lock:
                self._loading, self._failed = False, True
            return
        with self._lock:
            self._state, self._loading = state, False


class Adjacency:
    """The arrays, as of log position ``position`` and the highest fact and link seq read."""

    def __init__(self) -> None:
        self.position = 0
        self.fact_seq = 0
        self.link_seq = 0
        self.index: dict[str, int] = {}
        self.ids: list[str] = []
        self.facts = _Columns(
            {
                "seq": np.int64,
                **{
                    name: np.float64
                    for name in (
                        "recorded",
                        "retracted",
                        "valid_from",
                        "expires",
                        "until",
                        "until_rec",
                    )
                },
            }
        )
        self.links = _Columns(
            {
                "source": np.int64,
                "target": np.int64,
                "type": np.int8,
                "strength": np.float64,
                "seq": np.int64,
                "recorded": np.float64,
                "retracted": np.float64,
                "valid_from": np.float64,
                "until": np.float64,
                "until_rec": np.float64,
            }
        )
        # Compressed rows of the links present when last built, then those added since.
        self.out_start: Ints = np.zeros(1, np.int64)
        self.out_links: Ints = np.zeros(0, np.int64)
        self.in_start: Ints = np.zeros(1, np.int64)
        self.in_links: Ints = np.zeros(0, np.int64)
        self.out_added: dict[int, list[int]] = {}
        self.in_added: dict[int, list[int]] = {}
        self.added = 0

    # ----------------------------------------------------------------------- keeping in step

    @classmethod
    def load(cls, conn: SQLConnection, stop: threading.Event | None = None) -> Adjacency:
        """The copy of ``conn``'s snapshot (read in batches; _Stopped once ``stop`` is set)."""
        state = cls()
        (state.position,) = conn.execute("SELECT coalesce(max(seq), 0) FROM graph_log").fetchone()
        for sql, read in ((_FACT_SQL, state._read_facts), (_LINK_SQL, state._read_links)):
            cursor = conn.execute(sql + " ORDER BY seq")
            while rows := cursor.fetchmany(LOAD_BATCH_ROWS):
                if stop is not None and stop.is_set():
                    raise _Stopped
                read(rows)
        state._build_rows()
        return state

    @property
    def marks(self) -> tuple[int, int, int]:
        """How far the copy has read: the graph log, the facts and the links (see _marks)."""
        return (self.position, self.fact_seq, self.link_seq)

    def current(self, conn: SQLConnection) -> bool:
        """Whether ``conn``'s snapshot holds exactly what this copy holds."""
        return _marks(conn) == self.marks

    def catch_up(self, conn: SQLConnection) -> bool:
        """Read what ``conn``'s snapshot has beyond this copy; False when the copy must be
        loaded afresh (rows were deleted, or log entries it needs were pruned). A snapshot
        older than the copy changes nothing (``current`` then says so).

        New facts and links are read by their sequence number (a higher one for every later
        commit, in any process). Changes to rows already read (a supersession, a retraction, a
        changed strength) and deletions are recorded by triggers in the ``graph_log`` table
        (SQLite migration 13), in commit order, whoever wrote them.
        """
        d = conn.dialect
        entries = conn.execute(
            f"SELECT seq, kind, row FROM graph_log WHERE seq > {d.arg} ORDER BY seq",
            [self.position],
        ).fetchall()
        if entries and entries[0][0] != self.position + 1:
            return False
        if any(kind in (FACT_DELETED, LINK_DELETED) for _, kind, _ in entries):
            return False
        facts = _rows(conn, _FACT_SQL, f"seq > {d.arg} ORDER BY seq", self.fact_seq)
        links = _rows(conn, _LINK_SQL, f"seq > {d.arg} ORDER BY seq", self.link_seq)
        changed_facts = [r for _, kind, r in entries if kind == FACT_CHANGED and r <= self.fact_seq]
        changed_links = [r for _, kind, r in entries if kind == LINK_CHANGED and r <= self.link_seq]
        changed = d.in_list("seq", d.arg, kind="bigint")
        if changed_facts and not self._update_facts(
            _rows(conn, _FACT_SQL, changed, id_list(changed_facts))
        ):
            return False
        self._read_facts(facts)
        if changed_links and not self._update_links(
            _rows(conn, _LINK_SQL, changed, id_list(changed_links))
        ):
            return False
        if links:
            first = self._read_links(links)
            self._add_to_rows(range(first, self.links.size))
        if entries:
            self.position = entries[-1][0]
        return True

    def _fact_columns(self, rows: Sequence[Sequence[Any]]) -> dict[str, Sequence[Any]]:
        seq, _, recorded, retracted, valid_from, expires, until, until_rec = zip(*rows, strict=True)
        return {
            "seq": seq,
            "recorded": recorded,
            "retracted": _times(retracted, math.inf),
            "valid_from": valid_from,
            "expires": _times(expires, math.inf),
            "until": _times(until, math.inf),
            "until_rec": _until_recorded(until, until_rec),
        }

    def _read_facts(self, rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        start = self.facts.append(self._fact_columns(rows))
        for n, row in enumerate(rows, start):
            self.index[row[1]] = n
            self.ids.append(row[1])
        self.fact_seq = rows[-1][0]

    def _update_facts(self, rows: Sequence[Sequence[Any]]) -> bool:
        if not rows:
            return True
        at = _positions(self.facts, rows)
        if len(at) < len(rows) or any(self.ids[n] != r[1] for n, r in zip(at, rows, strict=True)):
            return False  # a row deleted, or its seq taken by another fact
        for name, values in self._fact_columns(rows).items():
            self.facts[name][at] = values
        return True

    def _link_columns(self, rows: Sequence[Sequence[Any]]) -> dict[str, Sequence[Any]]:
        (
            seq,
            source,
            target,
            type_,
            strength,
            recorded,
            retracted,
            valid_from,
            until,
            until_rec,
        ) = zip(*rows, strict=True)
        index = self.index
        return {
            "source": [index.get(i, -1) for i in source],
            "target": [index.get(i, -1) for i in target],
            "type": [_TYPE_CODE[t] for t in type_],
            "strength": strength,
            "seq": seq,
            "recorded": recorded,
            "retracted": _times(retracted, math.inf),
            "valid_from": valid_from,
            "until": _times(until, math.inf),
            "until_rec": _until_recorded(until, until_rec),
        }

    def _read_links(self, rows: Sequence[Sequence[Any]]) -> int:
        start = self.links.size
        if rows:
            start = self.links.append(self._link_columns(rows))
            self.link_seq = rows[-1][0]
        return start

    def _update_links(self, rows: Sequence[Sequence[Any]]) -> bool:
        if not rows:
            return True
        at = _positions(self.links, rows)
        if len(at) < len(rows):
            return False
        columns = self._link_columns(rows)
        ends = self.links["source"][at], self.links["target"][at]
        if not (
            np.array_equal(ends[0], columns["source"])
            and np.array_equal(ends[1], columns["target"])
        ):
            return False  # a link that changed ends: rows are not worth patching for it
        for name, values in columns.items():
            self.links[name][at] = values
        return True

    def _build_rows(self) -> None:
        count, facts = self.links.size, self.facts.size
        for end, (start_name, links_name) in (
            ("source", ("out_start", "out_links")),
            ("target", ("in_start", "in_links")),
        ):
            ends = self.links[end][:count]
            order = np.argsort(ends, kind="stable")
            order = order[ends[order] >= 0]
            starts = np.searchsorted(ends[order], np.arange(facts + 1))
            setattr(self, start_name, starts.astype(np.int64))
            setattr(self, links_name, order.astype(np.int64))
        self.out_added, self.in_added, self.added = {}, {}, 0

    def _add_to_rows(self, positions: Iterable[int]) -> None:
        positions = list(positions)
        self.added += len(positions)
        if self.added > REBUILD_AFTER:
            self._build_rows()
            return
        source, target = self.links["source"], self.links["target"]
        longest = 0
        for n in positions:
            for end, added in ((int(source[n]), self.out_added), (int(target[n]), self.in_added)):
                if end >= 0:
                    links = added.setdefault(end, [])
                    links.append(n)
                    longest = max(longest, len(links))
        if longest > REBUILD_FACT:  # a fact gaining many links: read them as rows, not lists
            self._build_rows()

    # --------------------------------------------------------------------------- reading

    def seqs(self, ids: Iterable[str]) -> str:
        """The seqs of the facts ``ids`` (known ones), as one SQL parameter (id_list)."""
        index, seq = self.index, self.facts["seq"]
        return id_list(seq[[index[i] for i in ids]].tolist())

    def unknown(self, ids: Iterable[str]) -> list[str]:
        """The ids among ``ids`` that name no fact."""
        return [i for i in ids if i not in self.index]

    def fact_visible(
        self, at: Ints, scope: TimeScope, *, include_superseded: bool
    ) -> npt.NDArray[np.bool_]:
        """TimeScope.fact_clause over the facts at positions ``at`` (-1: no such fact)."""
        f, k, t = self.facts, scope.known_at, scope.as_of
        safe = np.where(at >= 0, at, 0)
        shown = (
            (at >= 0)
            & (f["recorded"][safe] <= k)
            & (f["retracted"][safe] > k)
            & (f["valid_from"][safe] <= t)
            & (f["expires"][safe] > k)
        )
        if not include_superseded:
            shown &= ~((f["until_rec"][safe] <= k) & (f["until"][safe] <= t))
        return shown

    def link_visible(self, at: Ints, scope: TimeScope) -> npt.NDArray[np.bool_]:
        """TimeScope.link_clause over the links at positions ``at``."""
        x, k, t = self.links, scope.known_at, scope.as_of
        return (
            (x["recorded"][at] <= k)
            & (x["retracted"][at] > k)
            & (x["valid_from"][at] <= t)
            & ~((x["until_rec"][at] <= k) & (x["until"][at] <= t))
        )

    def around(self, facts: Ints, outgoing: bool) -> tuple[Ints, Ints]:
        """Every link leaving (``outgoing``) or reaching each of ``facts``: (the position in
        ``facts`` it belongs to, the link's position), grouped by fact in ``facts``' order."""
        starts_all, links = (
            (self.out_start, self.out_links) if outgoing else (self.in_start, self.in_links)
        )
        added = self.out_added if outgoing else self.in_added
        built = len(starts_all) - 1
        inside = np.where(facts < built, facts, built)
        starts, ends = starts_all[inside], starts_all[np.minimum(inside + 1, built)]
        counts = ends - starts
        owner = np.repeat(np.arange(len(facts)), counts)
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        found = links[np.repeat(starts, counts) + offsets]
        if added:
            extra = [(n, x) for n, f in enumerate(facts.tolist()) for x in added.get(f, ())]
            if extra:
                more_owner, more = zip(*extra, strict=True)
                owner = np.concatenate([owner, np.asarray(more_owner, np.int64)])
                found = np.concatenate([found, np.asarray(more, np.int64)])
                order = np.argsort(owner, kind="stable")
                owner, found = owner[order], found[order]
        return owner, found


class IndexWalk:
    """The walk of :class:`graphmem.storage.sql.traversal.Walk` over the in-memory copy: the
    same steps, in the same order, with the same ranks."""

    def __init__(
        self,
        state: Adjacency,
        conn: SQLConnection,
        scope: TimeScope,
        types: tuple[str, ...],
        direction: str,
        min_strength: float,
    ) -> None:
        self.state, self.conn, self.scope, self.direction = state, conn, scope, direction
        self.min_strength = min_strength
        self.include_superseded = "SUPERSEDES" in types
        self.type_ok = np.array([t in types for t in LINK_TYPES])
        self.sides = [side for side in (True, False) if direction != ("IN" if side else "OUT")]

    def _followable(self, links: Ints) -> npt.NDArray[np.bool_]:
        x = self.state.links
        return np.asarray(
            self.type_ok[x["type"][links]]
            & (x["strength"][links] >= self.min_strength)
            & self.state.link_visible(links, self.scope),
            bool,
        )

    def _steps(self, frontier: list[str]) -> Iterator[tuple[Ints, Ints, Ints]]:
        """Per side: (frontier position, link, far fact) of every visible link, far end
        visible, grouped by frontier fact."""
        state = self.state
        at = np.fromiter((state.index[i] for i in frontier), np.int64, len(frontier))
        for outgoing in self.sides:
            owner, links = state.around(at, outgoing)
            far = state.links["target" if outgoing else "source"][links]
            keep = self._followable(links) & state.fact_visible(
                far, self.scope, include_superseded=self.include_superseded
            )
            yield owner[keep], links[keep], far[keep]

    def level(
        self, frontier: list[str], *, unbounded: bool = False, need_link_ids: bool = True
    ) -> list[Step]:
        """See ``Walk.level``; without ``need_link_ids`` the steps' link ids are left empty
        (a traversal does not use them, and they are read from SQLite)."""
        state = self.state
        parts = []
        for owner, links, far in self._steps(frontier):
            strength = state.links["strength"][links]
            # As SQL reads them: per frontier fact, strongest first (then oldest), cut after
            # FAN_OUT + 1.
            order = np.lexsort((state.links["seq"][links], -strength, owner))
            owner, links, far, strength = owner[order], links[order], far[order], strength[order]
            if not unbounded:
                first = np.searchsorted(owner, owner)  # where each frontier fact's run starts
                keep = np.arange(len(owner)) - first <= FAN_OUT
                owner, links, far, strength = owner[keep], links[keep], far[keep], strength[keep]
            # SQL hands each frontier fact's rows on by link seq.
            order = np.lexsort((state.links["seq"][links], owner))
            parts.append((owner[order], links[order], far[order], strength[order]))
        if not parts:
            return []
        owner, links, far, strength = (np.concatenate(p) for p in zip(*parts, strict=True))
        ids = state.ids
        steps = [ids[f] for f in far.tolist()]
        # Then all of them strongest first, ties by the far fact's id; equal ones stay in the
        # order above (sides, frontier, links by seq), as Python's stable sort of SQL's rows.
        order = np.lexsort((np.array(steps), -strength)).tolist() if steps else []
        link_ids = self._link_ids(links) if need_link_ids else [""] * len(steps)
        seen: dict[str, int] = {}
        out = []
        owners, strengths = owner.tolist(), strength.tolist()
        for n in order:
            via = frontier[owners[n]]
            seen[via] = seen.get(via, 0) + 1
            out.append(Step(via, steps[n], link_ids[n], seen[via], strengths[n]))
        return out

    def _link_ids(self, links: Ints) -> list[str]:
        d = self.conn.dialect
        seqs = self.state.links["seq"][links].tolist()
        if not seqs:
            return []
        found = dict(
            self.conn.execute(
                f"SELECT seq, id FROM links WHERE {d.in_list('seq', d.arg, kind='bigint')}",
                [id_list(seqs)],
            ).fetchall()
        )
        return [found[s] for s in seqs]

    def leads_beyond(self, frontier: list[str], reached: Iterable[str]) -> bool:
        inside = {self.state.index[i] for i in reached}
        return any(
            any(f not in inside for f in far.tolist()) for _, _, far in self._steps(frontier)
        )

    def visible(self, ids: list[str]) -> set[str]:
        index = self.state.index
        known = [i for i in ids if i in index]
        at = np.fromiter((index[i] for i in known), np.int64, len(known))
        shown = self.state.fact_visible(at, self.scope, include_superseded=self.include_superseded)
        return {i for i, s in zip(known, shown.tolist(), strict=True) if s}

    def edges_among(self, ids: list[str]) -> list[Link]:
        d = self.conn.dialect
        if len(ids) < 2:
            return []
        state = self.state
        at = np.fromiter((state.index[i] for i in ids), np.int64, len(ids))
        _, links = state.around(at, True)
        inside = np.zeros(state.facts.size, bool)
        inside[at] = True
        target = state.links["target"][links]
        links = links[(target >= 0) & inside[np.maximum(target, 0)]]
        links = links[self._followable(links)]
        seqs = np.sort(state.links["seq"][links]).tolist()
        if not seqs:
            return []
        rows = self.conn.execute(
            f"SELECT {link_columns('k', self.scope, param=d.param)} FROM links k"
            f" WHERE {d.in_list('k.seq', d.param('seqs'), kind='bigint')} ORDER BY k.seq",
            {"seqs": id_list(seqs), **self.scope.params},
        )
        cursor_rows = rows.fetchall()
        return [Link.from_values(r) for r in cursor_rows]
