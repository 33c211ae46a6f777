"""The write path: every change to a namespace, from validated input to an announced change.

``store_many``: validate → embed (outside the write lock) → near-duplicate and similarity
candidates from the vector index → with the LLM classifier, one chat request for the batch
(also outside the lock) → one store transaction that dedups, classifies (rules, or applies the
LLM's verdicts), supersedes, inserts, links automatically (:mod:`graphmem.autolink`), caches new
embeddings and queues an outbox row per vector to sync → commit → bring the vector index in
line (:mod:`graphmem.sync`) → tell subscribers. A crash after the commit loses nothing: opening
the namespace replays the outbox. Forget, purge, link, unlink and import follow the same order.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from . import autolink as autolinks
from . import classify, documents, episodes, ingest, sensitive
from .cache import EmbeddingCache
from .embedders import Embedder, Vectors
from .erasure import PurgeFilter, PurgeReport
from .errors import InvalidInput
from .limits import MAX_BATCH
from .llm import ChatClient
from .models import Change, ChangeKind, Fact, FactInput, Link, StoreResult, Verdict
from .settings import Settings
from .store import BatchChanges, Store, Transaction
from .sync import Progress, VectorSync
from .temporal import TimeInput
from .transfer import ImportReport
from .vectors import VectorIndex

_log = logging.getLogger("graphmem")

Listener = Callable[[list[Change]], None]


class Writer:
    """Writes to one namespace's store and vector index, and announces each change."""

    def __init__(
        self,
        namespace: str,
        store: Store,
        vectors: VectorIndex,
        sync: VectorSync,
        embedder: Embedder,
        settings: Settings,
        llm: ChatClient | None,
    ) -> None:
        self._namespace = namespace
        self._store = store
        self._vectors = vectors
        self._sync = sync
        self._embedder = embedder
        self._cache = EmbeddingCache(embedder)
        self.settings = settings
        self.llm = llm
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` with each write's changes once committed; returns the unsubscribe."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def store_many(
        self,
        items: Sequence[Mapping[str, Any] | FactInput],
        *,
        autolink: bool | None,
        episode: str | Mapping[str, Any] | None = None,
    ) -> list[StoreResult]:
        """See ``Memory.store_many``."""
        given = None if episode is None else episodes.EpisodeInput.parse(episode)
        if isinstance(items, Mapping | str | bytes):
            raise InvalidInput("store_many takes a list of facts")
        if len(items) > MAX_BATCH:
            raise InvalidInput(f"at most {MAX_BATCH} facts per batch, got {len(items)}")
        inputs = [FactInput.parse(item, index=i) for i, item in enumerate(items)]
        if not inputs:
            return []
        if self.settings.store_secrets != "allow":
            inputs = [
                _without_secrets(x, i, self.settings.store_secrets) for i, x in enumerate(inputs)
            ]
        if autolink is False:
            inputs = [
                x if x.autolink is not None else x.model_copy(update={"autolink": False})
                for x in inputs
            ]
        vectors, fresh = self._cache.embed(self._store, [x.text for x in inputs])
        options = autolinks.Options.resolve(self.settings, self._embedder.provider)
        twins, similar = self._similar(vectors, inputs, options)
        verdicts = self._classify(inputs, vectors) if self.settings.classifier == "llm" else None
        with self._store.transaction() as tx:
            episode_id = None if given is None else tx.episode(given).id
            results, touched = ingest.write_batch(
                tx, inputs, twins, self.settings, verdicts, episode_id=episode_id
            )
            autolinks.link_batch(tx, inputs, results, similar, options)
            if episode_id is not None:
                _chain_episode(tx, episode_id, results)
            self._cache.keep(tx, fresh)
            tx.queue_vectors(touched)
        known = {r.fact.id: vectors[i] for i, r in enumerate(results) if r.fact is not None}
        self._sync.sync(touched, known)
        changes: list[tuple[ChangeKind, str]] = []
        for r in results:
            if r.action in ("ADD", "UPDATE") and r.fact is not None:
                changes.append(("FACT_STORED", r.fact.id))
            kind: ChangeKind = "FACT_FORGOTTEN" if r.action == "DELETE" else "FACT_SUPERSEDED"
            if r.action in ("UPDATE", "DELETE"):
                changes.extend((kind, target) for target in r.target_ids)
        self._announce(changes, tx.now)
        return results

    def sync_files(
        self, paths: Sequence[str | os.PathLike[str]], root: str | os.PathLike[str] | None
    ) -> documents.SyncReport:
        """See ``Memory.sync_files``."""
        plan = documents.plan(paths, root)
        recorded = {d.path: d for d in self._store.documents(plan.scopes)}
        for path in plan.missing:
            if not any(documents.under(p, path) for p in recorded):
                raise InvalidInput(f"{path!r} does not exist and was never synced", field="paths")
        report = documents.SyncReport()
        for file in plan.files:
            path = str(file)
            before = recorded.pop(path, None)
            snapshot = documents.read(file)
            if isinstance(snapshot, str):
                report.skipped.append((path, snapshot))
                continue
            if before is not None and before.hash == snapshot.hash:
                report.unchanged.append(path)
                continue
            report.chunks += self.sync_document(snapshot, documents.chunk_markdown(snapshot.text))
            (report.added if before is None else report.changed).append(path)
        for path in recorded:  # under a synced scope, not a markdown file there any more
            self.remove_document(path)
            report.removed.append(path)
        return report

    def sync_document(self, snapshot: documents.Snapshot, chunks: Sequence[documents.Chunk]) -> int:
        """Make the document ``snapshot`` is (an episode whose id is its path) hold ``chunks``:
        in one transaction each chunk is written as a fact that supersedes the document's
        current chunk at its position, old chunks beyond the new count are superseded by the
        last new one (forgotten if there is none), consecutive chunks are linked, and the file
        is recorded. Returns the chunks written. See :mod:`graphmem.documents`."""
        path, date = snapshot.path, snapshot.date
        inputs = [
            FactInput(
                text=c.text,
                source=documents.source_of(path, c),
                decay_class="permanent",
                valid_from=date,
                source_date=date,
                classify=False,
                autolink=False,
                dedup=False,
            )
            for c in chunks
            if c.text.strip()
        ]
        if self.settings.store_secrets != "allow":
            inputs = [
                _without_secrets(x, i, self.settings.store_secrets) for i, x in enumerate(inputs)
            ]
        vectors, fresh = self._cache.embed(self._store, [x.text for x in inputs])
        options = autolinks.Options.resolve(self.settings, self._embedder.provider)
        twins, _ = self._similar(vectors, inputs, options)
        given = (
            episodes.EpisodeInput(path)
            if self._store.episode(path) is not None
            else episodes.EpisodeInput(
                path, documents.KIND, path, snapshot.mtime if date is None else date
            )
        )
        with self._store.transaction() as tx:
            tx.episode(given)
            old = tx.current_chunks(path)
            inputs = [
                x.model_copy(update={"supersedes": old[i]}) if i < len(old) else x
                for i, x in enumerate(inputs)
            ]
            results, touched = ingest.write_batch(tx, inputs, twins, self.settings, episode_id=path)
            new = [r.fact for r in results if r.fact is not None]
            extra = old[len(inputs) :]
            if new:
                last = new[-1]
                start = last.valid_from.timestamp()
                tx.apply(
                    BatchChanges(
                        supersessions=[(start, tx.now, last.id, i) for i in extra],
                        links=[(last.id, i, tx.now, start) for i in extra],
                    )
                )
            else:
                for fact_id in extra:
                    tx.retract(fact_id)
            touched.update(extra)
            _link_in_episode(tx, [(b.id, a.id) for a, b in itertools.pairwise(new)])
            tx.put_document(
                documents.DocumentFile(
                    path, snapshot.hash, snapshot.mtime, snapshot.size, len(new), tx.now
                )
            )
            self._cache.keep(tx, fresh)
            tx.queue_vectors(touched)
        self._sync.sync(
            touched, {r.fact.id: vectors[i] for i, r in enumerate(results) if r.fact is not None}
        )
        changes: list[tuple[ChangeKind, str]] = [("FACT_STORED", f.id) for f in new]
        kind: ChangeKind = "FACT_SUPERSEDED" if new else "FACT_FORGOTTEN"
        changes.extend((kind, i) for i in old)
        self._announce(changes, tx.now)
        return len(new)

    def remove_document(self, path: str) -> int:
        """Forget the current chunks of the document at ``path`` and drop its record (the file
        is gone); returns how many chunks were forgotten."""
        with self._store.transaction() as tx:
            old = tx.current_chunks(path)
            for fact_id in old:
                tx.retract(fact_id)
            tx.drop_document(path)
            tx.queue_vectors(old)
        self._sync.sync(old)
        self._announce([("FACT_FORGOTTEN", i) for i in old], tx.now)
        return len(old)

    def forget(self, fact_id: str) -> Fact:
        """See ``Memory.forget``."""
        with self._store.transaction() as tx:
            fact = tx.retract(fact_id)
            tx.queue_vectors([fact_id])
        self._sync.sync([fact_id])
        self._announce([("FACT_FORGOTTEN", fact_id)], tx.now)
        return fact

    def purge(self, ids: Sequence[str]) -> int:
        """Delete facts for good (see ``Memory.purge``); returns how many existed. The vector
        index keeps older versions until compacted: ``erase`` them after the last purge."""
        if not ids:
            return 0
        with self._store.transaction() as tx:
            purged = tx.purge(ids)
            tx.queue_vectors(purged.touched)
        self._sync.sync(purged.touched)
        self._announce([("FACT_PURGED", i) for i in purged.gone], tx.now)
        return purged.removed

    def purge_where(self, where: PurgeFilter) -> PurgeReport:
        """Purge what ``where`` matches, record the erasure, then leave no copy on disk: the
        vector index drops its older versions and the store scrubs its files."""
        with self._store.transaction() as tx:
            purged = tx.purge_where(where)
            tx.queue_vectors(purged.touched)
        self._sync.sync(purged.touched)
        self._announce([("FACT_PURGED", i) for i in purged.gone], tx.now)
        if purged.removed:
            self.erase()
            self._store.scrub()
        return PurgeReport(purged.removed, purged.links, purged.vectors, purged.episodes)

    def erase(self) -> None:
        """Compact the vector index so that no older table version keeps a purged vector."""
        self._vectors.compact(erase=True)

    def link(
        self,
        source_id: str,
        target_id: str,
        type: str,
        strength: float,
        *,
        valid_from: TimeInput | None,
        valid_until: TimeInput | None,
        metadata: dict[str, Any] | None,
    ) -> Link:
        """See ``Memory.link``."""
        with self._store.transaction() as tx:
            made = tx.link(
                source_id,
                target_id,
                type,
                strength,
                valid_from=valid_from,
                valid_until=valid_until,
                metadata=metadata,
            )
        self._announce([("LINK_MADE", made.id)], tx.now)
        return made

    def link_many(self, links: Iterable[Mapping[str, Any]]) -> list[Link]:
        """See ``Memory.link_many``."""
        made: list[Link] = []
        with self._store.transaction() as tx:
            for i, item in enumerate(links):
                if not isinstance(item, Mapping):
                    raise InvalidInput(f"link {i}: expected an object", field=f"links[{i}]")
                unknown = set(item) - _LINK_FIELDS
                if unknown or not {"source_id", "target_id", "type"} <= set(item):
                    raise InvalidInput(
                        f"link {i}: source_id, target_id and type are required; "
                        f"unknown fields: {sorted(unknown)}",
                        field=f"links[{i}]",
                    )
                made.append(
                    tx.link(
                        item["source_id"],
                        item["target_id"],
                        item["type"],
                        item.get("strength", 1.0),
                        valid_from=item.get("valid_from"),
                        valid_until=item.get("valid_until"),
                        metadata=item.get("metadata"),
                    )
                )
        self._announce([("LINK_MADE", k.id) for k in made], tx.now)
        return made

    def unlink(self, link_id: str) -> Link:
        """See ``Memory.unlink``."""
        with self._store.transaction() as tx:
            removed = tx.unlink(link_id)
        self._announce([("LINK_REMOVED", link_id)], tx.now)
        return removed

    def import_lines(self, lines: Iterable[str], progress: Progress | None) -> ImportReport:
        """See ``Memory.import_jsonl``."""
        with self._store.transaction() as tx:
            report, ids = tx.import_lines(lines)
            tx.queue_vectors(ids)
        self._sync.synced(ids, progress)
        return report

    def _announce(self, changes: Sequence[tuple[ChangeKind, str]], at: float) -> None:
        if not changes or not self._listeners:
            return
        batch = [Change(kind, item, self._namespace, at) for kind, item in changes]
        for listener in list(self._listeners):
            try:
                listener(batch)
            except Exception:  # a listener's failure must not fail a committed write
                _log.exception("memory change listener failed")

    def _classify(self, inputs: Sequence[FactInput], vectors: Vectors) -> list[Verdict | None]:
        """The LLM classifier's verdicts for the items it may decide (classify on, no explicit
        ``supersedes``, not a repeat that dedup will catch); None for the others. See
        :mod:`graphmem.classify`."""
        now = self._store.now()
        repeats = classify.repeats(self._store, inputs, now, self.settings.fuzzy_dedup)
        asked = [
            i
            for i, x in enumerate(inputs)
            if x.classify and x.supersedes is None and i not in repeats
        ]
        out: list[Verdict | None] = [None] * len(inputs)
        if not asked:
            return out
        if self.llm is None:
            self.llm = ChatClient.from_settings(self.settings)
        chosen = [inputs[i] for i in asked]
        neighbours = self._vectors.neighbours_many(
            vectors[asked], classify.SIMILAR_FACTS, live_only=True
        )
        similar = classify.similar_facts(self._store, chosen, neighbours, now)
        verdicts = classify.classify(self.llm, chosen, similar, self.settings.llm_batch_size)
        for i, verdict in zip(asked, verdicts, strict=True):
            out[i] = verdict
        return out

    def _similar(
        self, vectors: Vectors, inputs: Sequence[FactInput], options: autolinks.Options
    ) -> tuple[list[str | int | None], list[list[autolinks.Neighbour]]]:
        """For each new vector: the live fact id, or the earlier batch position, that it
        near-duplicates (cosine ≥ vector_dedup_threshold), else None; and its candidates for
        similarity links (cosine ≥ the autolink threshold), most similar first."""
        dedup = self.settings.vector_dedup_threshold
        linking = [options.similarity_for(x) for x in inputs]
        # Two spare neighbours: the version a fact supersedes and a retracted one are skipped.
        k = options.max_similar + 2 if any(linking) else 1
        floor = min(dedup, options.threshold if any(linking) else dedup)
        twins: list[str | int | None] = [None] * len(vectors)
        similar: list[list[autolinks.Neighbour]] = [[] for _ in range(len(vectors))]
        if floor > 1.0:
            return twins, similar
        stored = self._vectors.neighbours_many(vectors, k, live_only=True, floor=floor)
        in_batch = autolinks.batch_neighbours(vectors, k, floor)
        for i in range(len(vectors)):
            merged = sorted([*stored[i], *in_batch[i]], key=lambda hit: -hit[1])
            if merged and merged[0][1] >= dedup:
                twins[i] = merged[0][0]
            if linking[i]:
                similar[i] = [hit for hit in merged if hit[1] >= options.threshold]
        return twins, similar


_LINK_FIELDS = frozenset(
    {"source_id", "target_id", "type", "strength", "valid_from", "valid_until", "metadata"}
)


def _chain_episode(tx: Transaction, episode_id: str, results: Sequence[StoreResult]) -> None:
    """Link each fact the batch added to ``episode_id`` to the fact before it there."""
    new = [
        r.fact.id
        for r in results
        if r.action in ("ADD", "UPDATE") and r.fact is not None and r.fact.episode_id == episode_id
    ]
    _link_in_episode(tx, tx.episode_chain(episode_id, list(dict.fromkeys(new))))


def _link_in_episode(tx: Transaction, pairs: Sequence[tuple[str, str]]) -> None:
    """Link each (newer, older) pair of an episode's facts: RELATED_TO, origin ``episode``,
    holding from when both facts hold."""
    starts = tx.valid_from({end for pair in pairs for end in pair})
    tx.add_links(
        [
            (
                newer,
                older,
                "RELATED_TO",
                episodes.STRENGTH,
                episodes.ORIGIN,
                max(starts[newer], starts[older]),
            )
            for newer, older in pairs
        ]
    )


#: The fields of a fact a secret could be written in.
_FREE_TEXT = ("text", "value", "summary", "why", "context")


def _without_secrets(x: FactInput, index: int, policy: str) -> FactInput:
    """``x`` with its secrets redacted, or InvalidInput if ``policy`` is refuse and it has one."""
    changed: dict[str, str] = {}
    for name in _FREE_TEXT:
        value = getattr(x, name)
        if not value:
            continue
        found = sensitive.sensitive(value)
        if found is None:
            continue
        if policy == "refuse":
            raise InvalidInput(
                f"item {index}: {name} holds {found}; not stored (store_secrets = refuse)",
                field=f"items[{index}].{name}",
            )
        changed[name] = sensitive.redact(value)
    return x.model_copy(update=changed) if changed else x
