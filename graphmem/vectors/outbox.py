"""Store → vector index: the outbox drained, checked, replayed and rebuilt.

The store is the truth and the vector index is derived from it. Every write queues an outbox
row per fact whose vector must change, in the write's own transaction; once it has committed,
``VectorSync.sync`` brings the index in line and clears those rows. If the index cannot be
written (disk full, damaged files), the write has still committed: the rows stay, the failure
is logged and latched, and the next sync retries every pending row — as does the next open.

On an object store, a sync is waited for at most the location's timeout (``s3_timeout``): a
store that answers late or never leaves the write acknowledged with its rows in the outbox,
and while the index cannot be written a write does not wait for it at all (its retry runs
beside it, one at a time; the server's drain retries every second).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import pyarrow as pa

from ..errors import StorageError
from ..ids import text_hash
from ..jsonform import json_fields
from ..models import Vectors
from ..storage.interface import Store
from .cache import EmbeddingCache
from .index import COMPACTED, REBUILT, ROW_DELETED, ROW_LIVE, ROW_STORED, VectorIndex
from .remote import RemoteCalls, Unanswered

#: Facts per vector-index write when syncing (a batch of 1,000 is one commit, not two).
SYNC_CHUNK: Final = 5_000
#: Facts per step of a rebuild or replay (each step reports progress).
REBUILD_CHUNK: Final = 500

#: Most outbox rows a search scores exactly (writes whose vectors are not in the index yet).
PENDING_SCORED_MAX: Final = 2_000
#: A fact's outbox row older than this (seconds) is drained by whichever process holds the
#: namespace open: the process that queued it died, or its vector write failed.
DRAIN_AFTER_S: Final = 2.0

#: Called as ``progress(done, total)`` during long operations.
Progress = Callable[[int, int], None]

_log = logging.getLogger("graphmem")


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Every disagreement between the store (the truth) and the vector index."""

    facts: int
    #: Rows read from the index (None when it is ``unreadable``).
    vectors: int | None
    missing_vectors: list[str] = field(default_factory=list)
    orphan_vectors: list[str] = field(default_factory=list)
    stale_live_flags: list[str] = field(default_factory=list)
    wrong_vectors: list[str] = field(default_factory=list)
    duplicate_vectors: list[str] = field(default_factory=list)
    pending_outbox: int = 0
    #: Why the vector index could not be read, so that nothing was compared (on an object
    #: store: no answer within ``s3_timeout``, or a failed request); None when it was read.
    unreadable: str | None = None

    @property
    def ok(self) -> bool:
        return not (
            self.unreadable
            or self.missing_vectors
            or self.orphan_vectors
            or self.stale_live_flags
            or self.wrong_vectors
            or self.duplicate_vectors
            or self.pending_outbox
        )

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, **json_fields(self)}


class VectorSync:
    """Brings one namespace's vector index in line with its store. Thread-safe.

    Its ``store``, ``vectors``, ``cache`` and ``namespace`` are the ones the namespace's writer
    and search work on: the vectors of writes not in the index yet are its to hand out."""

    def __init__(
        self, store: Store, vectors: VectorIndex, cache: EmbeddingCache, namespace: str
    ) -> None:
        self.store = store
        self.vectors = vectors
        self.cache = cache
        self.namespace = namespace
        self._lock = threading.Lock()
        self._failed = False  # a vector write failed: the next sync replays the outbox
        location = vectors.location
        self._writes = RemoteCalls(
            None if location.uri is None else location.timeout, "graphmem-vector-write"
        )
        vectors.vectors_from(self.expected)  # other processes' rows, from the embedding cache

    @property
    def failed(self) -> bool:
        """Whether the last sync could not write the index (its rows wait in the outbox)."""
        return self._failed

    def sync(
        self,
        ids: Iterable[str],
        known: Mapping[str, Vectors] | None = None,
        *,
        reread: bool = False,
    ) -> bool:
        """Make the index agree with the store for these facts, then clear their outbox rows;
        whether that was done (else the rows wait in the outbox: the index failed, or, on an
        object store, did not answer in time, or cannot be written and this is a write's
        sync, which does not wait then).

        ``known`` holds vectors the caller already has (by fact id), saving cache lookups.
        ``reread``: the rows may have been written by a process that died before logging them
        (see ``drain``); they are read back from the table first. One sync at a time: two
        writers' syncs interleaved could leave the older state of a fact in the index. An
        outbox row queued again while this runs is left for the sync of the write that queued
        it.
        """
        ids = list(dict.fromkeys(ids))
        if not ids:
            return True
        try:
            return self._writes.call(
                functools.partial(self._synced_now, ids, known or {}, reread),
                wait=0 if self._failed and not reread else None,
            )
        except Unanswered:
            if not self._failed:
                _log.error(
                    "namespace %r: the vector index on the object store did not answer in "
                    "time; its outbox keeps the writes and retries them",
                    self.namespace,
                )
            self._failed = True
            return False

    def _synced_now(self, ids: list[str], known: Mapping[str, Vectors], reread: bool) -> bool:
        """``sync``'s work, in the caller's thread or (on an object store) one of its own."""
        with self._lock:
            if self._failed:
                ids = list(dict.fromkeys([*ids, *(i for i, _ in self.store.outbox())]))
            try:
                with self.vectors.writing():
                    if reread:
                        self.vectors.reread(ids)
                    for start in range(0, len(ids), SYNC_CHUNK):
                        self._sync_chunk(ids[start : start + SYNC_CHUNK], known)
            except (OSError, RuntimeError, ValueError, StorageError) as exc:
                if not self._failed:  # once per outage, not at every retry
                    _log.error(
                        "namespace %r: the vector index could not be written (%s); its "
                        "outbox keeps the writes and retries them",
                        self.namespace,
                        exc,
                    )
                self._failed = True
                return False
            if self._failed:
                _log.warning(
                    "namespace %r: the vector index is written again; the writes its outbox "
                    "kept are in it",
                    self.namespace,
                )
            self._failed = False
            return True

    @property
    def degraded(self) -> str | None:
        """Why searches may miss vectors now (the vector index could not be written), or None."""
        if not self._failed:
            return None
        return (
            "the vector index cannot be written; searches score the writes still waiting "
            "exactly and the keyword leg is complete"
        )

    def pending(self) -> dict[str, Vectors]:
        """The vectors (from the embedding cache) of the facts whose rows the index, as this
        process sees it, may lack or hold old: vector writes still waiting in the outbox (in
        flight, or refused by the index) and rows other processes wrote since this process
        last followed the vector log. Searches score them exactly, so an acknowledged write
        is found by meaning at once, from any process."""
        ids = list(dict.fromkeys([*self.store.waiting(PENDING_SCORED_MAX), *self.vectors.unseen()]))
        return self.expected(ids[:PENDING_SCORED_MAX]) if ids else {}

    def drain(self, older_than: float = DRAIN_AFTER_S) -> int:
        """Write to the index the outbox rows older than ``older_than`` seconds: left by a
        process that died between its commit and its vector write, or by a failed write.
        Safe to run in every process (vector writes take the namespace's vector lock, and are
        idempotent). The process may have died after writing a row and before logging it: the
        rows are read back from the table first, so that none is appended twice. Returns how
        many facts it synced (none if the index could not be written)."""
        ids = self.store.waiting(SYNC_CHUNK, queued_before=self.store.now() - older_than)
        if ids and not self.sync(ids, reread=True):
            return 0
        return len(ids)

    def close(self) -> None:
        """Wait for a vector write still running (bounded by the object store's timeouts)."""
        self._writes.close()

    def replay(self) -> int:
        """Apply vector writes that a crash left pending; returns how many facts were synced."""
        ids = [i for i, _ in self.store.outbox()]
        for start in range(0, len(ids), REBUILD_CHUNK):
            self.sync(ids[start : start + REBUILD_CHUNK])
        return len(ids)

    def synced(self, ids: list[str], progress: Progress | None = None) -> None:
        """``sync`` in steps, reporting each to ``progress``."""
        for start in range(0, len(ids), REBUILD_CHUNK):
            self.sync(ids[start : start + REBUILD_CHUNK])
            if progress:
                progress(min(start + REBUILD_CHUNK, len(ids)), len(ids))

    def reindex(self, progress: Progress | None = None) -> int:
        """Rebuild the index from the store and the embedding cache; returns vectors written.

        Texts missing from the cache are embedded (and cached).
        """
        with self._lock, self.vectors.writing():
            self.vectors.clear()
            owners = self.store.vector_owners()
            ids = list(owners)
            written = 0
            for start in range(0, len(ids), REBUILD_CHUNK):
                chunk = ids[start : start + REBUILD_CHUNK]
                vectors = self.expected(chunk, embed_missing=True)
                self.vectors.upsert(
                    chunk, np.stack([vectors[i] for i in chunk]), [owners[i] for i in chunk]
                )
                written += len(chunk)
                if progress:
                    progress(written, len(ids))
            # The table was made anew: none of its earlier versions is of use to anyone (other
            # processes reload it on REBUILT), and at a million rows they held 12 GB.
            self.vectors.compact(erase=True)
            with self.store.transaction() as tx:
                tx.clear_outbox()
                logged = tx.log_vectors([REBUILT])
            self.vectors.logged(logged, 1)
        return written

    def optimize(self) -> dict[str, Any]:
        """``VectorIndex.optimize``, logged like ``compact``."""
        with self._lock, self.vectors.writing():
            report = self.vectors.optimize()
            self._log_compacted()
        return report

    def compact(self, *, erase: bool = False) -> None:
        """Compact the vector index (see ``VectorIndex.compact``); the other processes move to
        the compacted table at their next look at the vector log."""
        with self._lock, self.vectors.writing():
            self.vectors.compact(erase=erase)
            self._log_compacted()

    def _log_compacted(self) -> None:
        with self.store.transaction(durable=False) as tx:
            logged = tx.log_vectors([COMPACTED])
        self.vectors.logged(logged, 1)

    def check(self, progress: Progress | None = None) -> CheckReport:
        """Compare the index with the store and list every disagreement (changes nothing).

        The table is read a batch at a time, each batch compared with the facts' cached
        embeddings, so memory stays bounded whatever the namespace's size. An index on an
        object store that does not answer its first request in time, or fails a later one,
        is reported ``unreadable``."""
        # The table as the other processes left it; on an object store, waited for at most
        # s3_timeout (a store that hangs held a check for over a minute).
        total = self.vectors.stored_rows()
        if total is None:
            return self._unreadable(self.vectors.unanswered or "no answer in time")
        try:
            return self._compared(total, progress)
        except (OSError, RuntimeError, ValueError, pa.ArrowException) as exc:
            if self.vectors.location.uri is None:  # a local table's damage is not an outage
                raise
            _log.error("namespace %r: the vector index could not be read (%s)", self.namespace, exc)
            return self._unreadable("the request failed")

    def _unreadable(self, why: str) -> CheckReport:
        counts = self.store.counts(self.store.now())
        return CheckReport(
            facts=counts.facts,
            vectors=None,
            pending_outbox=counts.outbox,
            unreadable=f"the vector index on the object store cannot be read ({why})",
        )

    def _compared(self, total: int, progress: Progress | None) -> CheckReport:
        owners = self.store.vector_owners()
        seen: set[str] = set()
        orphans: set[str] = set()
        stale: set[str] = set()
        wrong: set[str] = set()
        duplicates: set[str] = set()
        done = 0
        for ids, vectors, live in self.vectors.scan():
            duplicates.update(i for i in ids if i in seen)
            seen.update(ids)
            orphans.update(i for i in ids if i not in owners)
            known = [n for n, i in enumerate(ids) if i in owners]
            stale.update(ids[n] for n in known if bool(live[n]) != owners[ids[n]])
            expected = self.expected([ids[n] for n in known])
            compared = [n for n in known if ids[n] in expected]
            if compared:
                want = np.stack([expected[ids[n]] for n in compared])
                close = np.isclose(vectors[compared], want, atol=1e-5).all(axis=1)
                wrong.update(ids[compared[j]] for j in np.nonzero(~close)[0])
            done += len(ids)
            if progress:
                progress(min(done, total), total)
        counts = self.store.counts(self.store.now())
        return CheckReport(
            facts=counts.facts,
            vectors=len(seen),
            missing_vectors=sorted(owners.keys() - seen),
            orphan_vectors=sorted(orphans),
            stale_live_flags=sorted(stale),
            wrong_vectors=sorted(wrong),
            duplicate_vectors=sorted(duplicates),
            pending_outbox=counts.outbox,
        )

    def expected(self, ids: list[str], *, embed_missing: bool = False) -> dict[str, Vectors]:
        """The vector each fact should have in the index: from the embedding cache, or (with
        ``embed_missing``) embedded now and cached."""
        if not ids:
            return {}
        texts = {i: text for i, (text, _) in self.store.vector_sources(ids).items()}
        by_hash = {i: text_hash(t) for i, t in texts.items()}
        cached = self.cache.lookup(self.store, list(by_hash.values()))
        out = {i: cached[h] for i, h in by_hash.items() if h in cached}
        todo = [i for i in by_hash if i not in out]
        if todo and embed_missing:
            vectors, fresh = self.cache.embed(self.store, [texts[i] for i in todo])
            with self.store.transaction() as tx:
                self.cache.keep(tx, fresh)
            out.update(zip(todo, vectors, strict=True))
        return out

    def _sync_chunk(self, chunk: list[str], known: Mapping[str, Vectors]) -> None:
        queued = self.store.outbox(chunk)
        found = self.store.vector_sources(chunk)
        gone = [i for i in chunk if i not in found or found[i][1] is not None]
        owners = self.store.vector_owners({found[i][1] or i for i in chunk if i in found})
        vectors = {i: known[i] for i in owners if i in known}
        vectors.update(self.expected([i for i in owners if i not in vectors], embed_missing=True))
        self.vectors.delete(gone)
        ordered = list(owners)
        if ordered:
            self.vectors.upsert(
                ordered, np.stack([vectors[i] for i in ordered]), [owners[i] for i in ordered]
            )
        # Only the rows read above: one queued again since (a new position) stays for its own
        # sync. Not flushed to disk: a row that survives a power cut is replayed, harmlessly.
        # The vector log tells the other processes which rows changed, and how: a stored row's
        # vector is the one the embedding cache holds for its fact's text.
        changed = [*gone, *ordered]
        states = [ROW_DELETED] * len(gone) + [
            ROW_LIVE if owners[i] else ROW_STORED for i in ordered
        ]
        with self.store.transaction(durable=False) as tx:
            tx.vectors_synced(queued)
            logged = tx.log_vectors(changed, states)
        self.vectors.logged(logged, len(changed))
