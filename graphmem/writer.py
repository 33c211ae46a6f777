"""The write path: every change to a namespace, from validated input to an announced change.

1. ``store_many`` validates in the caller's thread (and asks the LLM classifier there, if used),
   then queues the write for the next group commit (:mod:`graphmem.group_commit`).
2. The group's texts are embedded in one batch; near-duplicate and similarity candidates come
   from the vector index and from the group's own facts.
3. In one store transaction, each write, in a savepoint of its own, dedups, classifies,
   supersedes, inserts, links (:mod:`graphmem.autolink`), caches new embeddings and queues an
   outbox row per vector. The changes go to the change log, where other processes hear of them.
4. After one durable commit, the vector index is brought in line (:mod:`graphmem.vectors.outbox`),
   each write gets its own results or error, and this process's subscribers are told. A crash
   after the commit loses nothing: opening the namespace replays the outbox.
"""

from __future__ import annotations

import itertools
import logging
import os
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

import numpy as np

from . import autolink as autolinks
from . import capture as captures
from . import categorize, classify, dedup, documents, episodes, sensitive, tracing
from .entities import Entities
from .erasure import PurgeFilter, PurgeReport
from .errors import InvalidInput, LLMError
from .group_commit import GroupCommit, Pending
from .ids import text_hash
from .imports import EXPORT_RULES
from .limits import MAX_BATCH
from .llm import ChatClient
from .models import (
    Change,
    ChangeKind,
    Fact,
    FactInput,
    Keep,
    Link,
    LinkOrigin,
    StoreResult,
    Tier,
    Vectors,
    Verdict,
)
from .settings import Settings
from .storage.interface import BatchChanges, ImportReport, Purged, Transaction
from .tagging import CATEGORIES, CATEGORY_LIST
from .vectors.outbox import Progress, VectorSync

_log = logging.getLogger("graphmem")

Listener = Callable[[list[Change]], None]
T = TypeVar("T")

#: Facts (and links) written at most by one group commit (see :mod:`graphmem.group_commit`).
GROUP_MAX_ITEMS: Final = 2 * MAX_BATCH


class Writer:
    """Writes to one namespace's store and vector index, and announces each change.

    Forget, link and unlink go through the same group commit as ``store_many``; purge, import
    and document syncs follow the same order in a transaction of their own."""

    def __init__(
        self, sync: VectorSync, settings: Settings, llm: ChatClient | None, entities: Entities
    ) -> None:
        #: Brings the index in line with each write: the store, index, embedding cache and
        #: namespace written are the ones it keeps.
        self._sync = sync
        #: The namespace's entities, which the rule classifier compares.
        self._entities = entities
        self._store = sync.store
        self._cache = sync.cache
        self.settings = settings
        self.llm = llm
        self._listeners: list[Listener] = []
        #: This writer's name in the change log: its own changes reach its listeners directly.
        self.origin = uuid.uuid4().hex
        self._group: GroupCommit[Any] = GroupCommit(self._write_group, max_items=GROUP_MAX_ITEMS)

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
        merges: Sequence[Sequence[str]] | None = None,
        then: Callable[[Transaction, list[StoreResult]], None] | None = None,
        plan: captures.Plan | None = None,
        asked: _Asked | None = None,
    ) -> list[StoreResult]:
        """See ``Memory.store_many``; ``merges[i]``: further live facts item i supersedes
        (see ``dedup.write_batch``); ``then(tx, results)`` writes more in the same transaction
        (the links reflection draws to what it stored); ``plan``: the capture these items are,
        and ``asked`` what its chat request decided (see ``capture``)."""
        given = None if episode is None else episodes.EpisodeInput.parse(episode)
        if isinstance(items, Mapping | str | bytes):
            raise InvalidInput("store_many takes a list of facts")
        if len(items) > MAX_BATCH:
            raise InvalidInput(f"at most {MAX_BATCH} facts per batch, got {len(items)}")
        inputs = [FactInput.parse(item, index=i) for i, item in enumerate(items)]
        if not inputs:
            return []
        if plan is not None:
            plan.parsed = {i: FactInput.parse(x, index=i) for i, x in plan.standins.items()}
        if any(x.category and x.category not in CATEGORIES for x in inputs):
            registry = categorize.discovered(self._store)
            if bad := categorize.unknown([x.category for x in inputs], registry):
                raise InvalidInput(
                    f"unknown category {bad[0]!r}; use one of {CATEGORY_LIST}", field="category"
                )
        if self.settings.store_secrets != "allow":
            inputs = [
                _without_secrets(x, i, self.settings.store_secrets) for i, x in enumerate(inputs)
            ]
        if autolink is False:
            inputs = [
                x if x.autolink is not None else x.model_copy(update={"autolink": False})
                for x in inputs
            ]
        write = _Write(self._store_batch, len(inputs), facts=inputs, episode=given)
        write.merges, write.then, write.plan = merges, then, plan
        if asked is not None:  # a capture whose chat request was made
            write.embedded_as(*self._embedded(inputs, asked))
            write.verdicts = asked.verdicts
        elif plan is not None and plan.drawn and self.settings.classifier != "llm":
            write.embedded_as(*self._shared_with_turns(inputs, plan))
        elif self.settings.classifier == "llm":  # the chat model is asked before queuing
            write.embedded_as(*self._cache.embed(self._store, [x.text for x in inputs]))
            write.verdicts = self._classify(inputs, write.vectors)
        results: list[StoreResult] = self._submit(write)
        return results

    def capture(
        self,
        messages: Sequence[captures.Message],
        *,
        keep: Keep,
        episode: str | Mapping[str, Any] | None,
    ) -> tuple[captures.Plan, list[StoreResult]]:
        """Plan a capture of ``messages`` (:func:`graphmem.capture.plan`) and write it as one
        ``store_many``: the plan, and its items' results (the turns written in place of
        whole-message facts the rules did not write are the plan's ``written``). With the LLM
        classifier, its one chat request draws the facts (see ``_drawn``)."""
        planned = captures.plan(
            messages,
            keep=keep,
            max_chars=self.settings.capture_max_chars,
            turn_decay_class=self.settings.turn_decay_class,
        )
        asked = None
        if self.settings.classifier == "llm":
            planned, asked = self._drawn(messages, keep, episode, planned)
        if not planned.items:
            return planned, []
        results = self.store_many(
            planned.items, autolink=None, episode=episode, plan=planned, asked=asked
        )
        return planned, results

    def _drawn(
        self,
        messages: Sequence[captures.Message],
        keep: Keep,
        episode: str | Mapping[str, Any] | None,
        planned: captures.Plan,
    ) -> tuple[captures.Plan, _Asked | None]:
        """A capture's plan with the facts the chat model drew in place of the triggers', and
        what its one request decided (:func:`graphmem.classify.draw`). The request carries the
        messages the plan read (``said``, so never one skipped for a secret) of at most
        ``capture_max_chars`` each, with the live facts nearest to their turns' vectors and
        those of the trigger facts' entity and key. If anything goes wrong, the trigger plan,
        each of its facts an ADD saying why. A capture of more messages than one request
        carries (``llm_batch_size``), or with none of MIN_CHARS, keeps the trigger plan,
        classified as ``store_many`` classifies (None)."""
        limit = self.settings.capture_max_chars
        sent = [(i, m.role, m.content) for i, m in planned.said.items() if len(m.content) <= limit]
        if len(sent) > self.settings.llm_batch_size or all(
            len(text) < captures.MIN_CHARS for *_, text in sent
        ):
            return planned, None
        given = None if episode is None else episodes.EpisodeInput.parse(episode)
        texts = list(dict.fromkeys(p for *_, text in sent for p in captures.turn_parts(text)))
        vectors, fresh = self._cache.embed(self._store, texts)
        now = self._store.now()
        neighbours = self._sync.vectors.neighbours_many(
            vectors, classify.CANDIDATES, live_only=True
        )
        keys = [(x["entity"], x["key"]) for x in planned.items if x.get("entity") and x.get("key")]
        shown = classify.shown_facts(self._store, neighbours, keys, now, entities=self._entities)
        asked = _Asked([], dict(zip(texts, vectors, strict=True)), fresh)
        try:
            drawn = classify.draw(
                self._chat(),
                sent,
                shown,
                date=self._dated(given, now),
                categories=categorize.discovered(self._store),
                max_chars=limit,
            )
            replanned = captures.plan(
                messages,
                keep=keep,
                max_chars=limit,
                turn_decay_class=self.settings.turn_decay_class,
                drawn=drawn,
            )
        except (LLMError, InvalidInput) as exc:
            why = exc.message
            _log.warning("capture kept its trigger facts, added as ADD: %s", why)
            asked.verdicts = [
                classify.fallback(why) if x.get("classify", True) else None for x in planned.items
            ]
            return planned, asked
        asked.verdicts = [replanned.verdicts.get(i) for i in range(len(replanned.items))]
        if missing := [n for n, v in enumerate(asked.verdicts) if v is not None and v.fallback]:
            _log.warning(
                "classifier fell back to ADD for items %s of a capture: %s",
                missing,
                "; ".join({v.reason for v in asked.verdicts if v is not None and v.fallback}),
            )
        return replanned, asked

    def _shared_with_turns(
        self, inputs: Sequence[FactInput], planned: captures.Plan
    ) -> tuple[Vectors, list[tuple[str, Vectors]]]:
        """The vectors of a capture's items, the facts drawn from a turn sharing that turn's:
        a sentence of a message means what the message means closely enough to be found
        through it (recall then shows the turn, which says more), and the capture embeds what
        a ``store_many`` of its messages would, not a third more. A shared vector is stored
        once (the fact's ``vector_of`` is its turn)."""
        own = [i for i in range(len(inputs)) if i not in planned.drawn]
        vectors, fresh = self._cache.embed(self._store, [inputs[i].text for i in own])
        out = np.empty((len(inputs), vectors.shape[1]), dtype=vectors.dtype)
        out[own] = vectors
        for fact, turn in planned.drawn.items():
            out[fact] = out[turn]
        return out, fresh

    def _chat(self) -> ChatClient:
        """The LLM classifier's chat model (made from the settings when first needed)."""
        if self.llm is None:
            self.llm = ChatClient.from_settings(self.settings)
        return self.llm

    def _dated(self, given: episodes.EpisodeInput | None, now: float) -> float:
        """The time of a capture's conversation: its episode's, given or recorded, else now."""
        if given is not None and given.time is not None:
            return given.time
        known = None if given is None else self._store.episode(given.id)
        return now if known is None else known.time.timestamp()

    def _embedded(
        self, inputs: Sequence[FactInput], asked: _Asked
    ) -> tuple[Vectors, list[tuple[str, Vectors]]]:
        """The vectors of ``inputs`` (those embedded to ask the chat model, the others now), and
        those newly computed among them, for the embedding cache."""
        texts = [x.text for x in inputs]
        missing = [t for t in dict.fromkeys(texts) if t not in asked.vectors]
        known, fresh = dict(asked.vectors), list(asked.fresh)
        if missing:
            more, computed = self._cache.embed(self._store, missing)
            known.update(zip(missing, more, strict=True))
            fresh.extend(computed)
        hashes = {text_hash(t) for t in texts}
        return np.stack([known[t] for t in texts]), [f for f in fresh if f[0] in hashes]

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
                # Its chunks came with an import, or it is another file of the same text (an
                # editor's save to a new file), or its record predates inodes: recorded anew,
                # so that read-back opens it.
                if before.imported or before.inode != snapshot.inode:
                    self._recorded_again(before, snapshot)
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
        is recorded. Texts already embedded come from the embedding cache, so only changed
        chunks are embedded. Returns the chunks written. See :mod:`graphmem.documents`."""
        path, date = snapshot.path, snapshot.date
        # A chunk belongs to its file: the file, not a decay class, decides how long it lives
        # (permanent), it is never merged with an identical text elsewhere (no dedup) and makes
        # no similarity links. A date in the file name (daily notes) is its valid_from and
        # source date, so as-of reads and date words find it; else it holds from this sync.
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
        options = autolinks.Options.resolve(self.settings, self._cache.embedder.provider)
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
            results, touched = dedup.write_batch(tx, inputs, twins, self.settings, episode_id=path)
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
                    path,
                    snapshot.hash,
                    snapshot.mtime,
                    snapshot.size,
                    len(new),
                    tx.now,
                    inode=snapshot.inode,
                )
            )
            self._cache.keep(tx, fresh)
            tx.queue_vectors(touched)
            kind: ChangeKind = "FACT_SUPERSEDED" if new else "FACT_FORGOTTEN"
            changes = self._logged(
                tx, [*(("FACT_STORED", f.id) for f in new), *((kind, i) for i in old)]
            )
        self._sync.sync(touched, _new_vectors(results, vectors))
        self._announce_committed(tx, changes)
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
            changes = self._logged(tx, [("FACT_FORGOTTEN", i) for i in old])
        self._sync.sync(old)
        self._announce_committed(tx, changes)
        return len(old)

    def _recorded_again(
        self, recorded: documents.DocumentFile, snapshot: documents.Snapshot
    ) -> None:
        """Record the file this sync read, of the text ``recorded`` names (its chunks stand)."""
        with self._store.transaction() as tx:
            tx.put_document(
                documents.DocumentFile(
                    snapshot.path,
                    snapshot.hash,
                    snapshot.mtime,
                    snapshot.size,
                    recorded.chunks,
                    tx.now,
                    inode=snapshot.inode,
                )
            )

    def forget(self, fact_id: str) -> Fact:
        """See ``Memory.forget``."""

        def run(tx: Transaction, write: _Write) -> Fact:
            fact = tx.retract(fact_id)
            write.touched = {fact_id}
            write.changes = [("FACT_FORGOTTEN", fact_id)]
            return fact

        return self._run(run)

    def set_tier(self, fact_id: str, tier: Tier, only_from: Tier | None = None) -> Fact:
        """See ``Memory.pin`` and ``Memory.set_cold``. A tier is not a change of what the fact
        says: nothing is announced to subscribers nor sent to the vector index."""
        return self._run(lambda tx, write: tx.set_tier(fact_id, tier, only_from=only_from))

    def purge(self, ids: Sequence[str]) -> int:
        """Delete facts for good (see ``Memory.purge``); returns how many existed. The vector
        index keeps older versions until compacted: ``erase`` them after the last purge."""
        if not ids:
            return 0
        return self._purged(lambda tx: tx.purge(ids)).removed

    def purge_where(self, where: PurgeFilter) -> PurgeReport:
        """Purge what ``where`` matches, record the erasure, then leave no copy on disk: the
        vector index drops its older versions and the store scrubs its files."""
        purged = self._purged(lambda tx: tx.purge_where(where))
        if purged.removed:
            self.erase()
            self._store.scrub()
        return PurgeReport(
            purged.removed, purged.links, purged.vectors, purged.episodes, names=where.covered
        )

    def _purged(self, purge: Callable[[Transaction], Purged]) -> Purged:
        """What ``purge`` deleted in a transaction that also queues the vectors it touched and
        logs each fact gone; the vectors synced and the purge announced once it commits."""
        with self._store.transaction() as tx:
            purged = purge(tx)
            tx.queue_vectors(purged.touched)
            changes = self._logged(tx, [("FACT_PURGED", i) for i in purged.gone])
        self._sync.sync(purged.touched)
        self._announce_committed(tx, changes)
        return purged

    def _logged(
        self, tx: Transaction, changes: list[tuple[ChangeKind, str]]
    ) -> list[tuple[ChangeKind, str]]:
        """``changes``, recorded in the change log by ``tx`` (to be announced once it commits)."""
        tx.log_changes(changes, self.origin)
        return changes

    def erase(self) -> None:
        """Compact the vector index so that no older table version keeps a purged vector."""
        self._sync.compact(erase=True)

    def link_many(self, links: Iterable[Mapping[str, Any]]) -> list[Link]:
        """See ``Memory.link_many``."""
        items = list(links)

        def run(tx: Transaction, write: _Write) -> list[Link]:
            made = tx.link_many(items)
            write.changes = [("LINK_MADE", k.id) for k in made]
            return made

        return self._run(run, max(1, len(items)))

    def unlink(self, link_id: str) -> Link:
        """See ``Memory.unlink``."""

        def run(tx: Transaction, write: _Write) -> Link:
            removed = tx.unlink(link_id)
            write.changes = [("LINK_REMOVED", link_id)]
            return removed

        return self._run(run)

    def import_lines(self, lines: Iterable[str], progress: Progress | None) -> ImportReport:
        """See ``Memory.import_jsonl``."""
        with self._store.transaction() as tx:
            report, ids = tx.import_lines(lines, EXPORT_RULES)
            tx.queue_vectors(ids)
        self._sync.synced(ids, progress)
        return report

    def _submit(self, write: _Write) -> Any:
        """Queue ``write`` for the next group commit; announce its changes once written."""
        result = self._group.submit(write)
        self._announce(write.changes, write.at)
        return result

    def _run(self, run: Callable[[Transaction, _Write], T], items: int = 1) -> T:
        """``run(tx, write)`` as a write of its own in the next group commit."""
        return cast(T, self._submit(_Write(run, items)))

    def _write_group(self, group: Sequence[Pending[Any]]) -> None:
        """Write a group of queued writes (see :mod:`graphmem.group_commit`): the facts of all its
        ``store_many`` calls embedded and checked at once, then one transaction in which each
        write runs in a savepoint of its own (one that raises is rolled back alone and answered
        with its error), one durable commit, one vector index write."""
        # The leader runs on its own request's thread, often after waiting its turn: that
        # request's read time limit must not stop the group (everyone's writes, their
        # embedding cache reads among them); writes are bounded by their size.
        attributes: tracing.Attributes = {
            tracing.NAMESPACE: self._sync.namespace,
            "graphmem.write.writes": len(group),
            "graphmem.write.items": sum(p.items for p in group),
        }
        links = [p.caller for p in group if p.caller is not None]
        with self._store.unlimited(), tracing.span("graphmem.write", attributes, links=links):
            writes = [w for w in group if isinstance(w, _Write)]
            self._prepare([w for w in writes if w.facts])  # the store_many writes
            with self._store.transaction() as tx:
                for w in writes:
                    if w.error is not None:  # failed while being prepared
                        continue
                    try:
                        with tx.savepoint():
                            w.result = w.run(tx, w)
                    except Exception as exc:  # this write's own failure: the others go on
                        w.error = exc
                        w.touched, w.known, w.changes = set(), {}, []
                touched = {i for w in writes for i in w.touched}
                tx.queue_vectors(touched)
                self._logged(tx, [c for w in writes for c in w.changes])
            self._sync.sync(touched, {i: v for w in writes for i, v in w.known.items()})
            for w in writes:
                w.at = tx.now

    def _prepare(self, writes: Sequence[_Write]) -> None:
        """Embed the facts of these ``store_many`` writes (those not embedded by their caller)
        in one batch, then find every fact's near-duplicates and link candidates among the
        stored facts and the group's. A write whose texts cannot be embedded fails alone."""
        self._embed([w for w in writes if not w.embedded])
        writes = [w for w in writes if w.embedded]
        if not writes:
            return
        inputs = [x for w in writes for x in w.facts]
        vectors = np.concatenate([w.vectors for w in writes])
        options = autolinks.Options.resolve(self.settings, self._cache.embedder.provider)
        twins, similar = self._similar(vectors, inputs, options)
        positions: list[str | None] = [None] * len(inputs)
        offset = 0
        for w in writes:
            end = offset + len(w.facts)
            w.twins, w.similar = twins[offset:end], similar[offset:end]
            w.options, w.offset, w.positions = options, offset, positions
            offset = end

    def _embed(self, writes: Sequence[_Write]) -> None:
        """Embed the facts of ``writes`` in one batch; if that fails, each write on its own, so
        that only a write whose texts cannot be embedded fails (with the embedder's error)."""
        if not writes:
            return
        try:
            vectors, fresh = self._cache.embed(
                self._store, [x.text for w in writes for x in w.facts]
            )
        except Exception as exc:
            if len(writes) == 1:
                writes[0].error = exc
            else:
                for w in writes:
                    self._embed([w])
            return
        offset = 0
        for w in writes:
            hashes = {text_hash(x.text) for x in w.facts}
            w.embedded_as(
                vectors[offset : offset + len(w.facts)], [f for f in fresh if f[0] in hashes]
            )
            offset += len(w.facts)

    def _store_batch(self, tx: Transaction, w: _Write) -> list[StoreResult]:
        """A ``store_many`` write, run inside its group's transaction."""
        episode = None if w.episode is None else tx.episode(w.episode)
        episode_id = None if episode is None else episode.id
        facts = w.facts if episode is None else _dated_by(episode, w.facts)
        results, touched = dedup.write_batch(
            tx,
            facts,
            [None if t is None else w.local(t) for t in w.twins],
            self.settings,
            w.verdicts,
            episode_id=episode_id,
            merges=w.merges,
            outside=() if w.plan is None or w.plan.chained is None else w.plan.drawn,
            entities=self._entities,
        )
        w.known = _new_vectors(results, w.vectors)
        chained = results
        if w.plan is not None:
            chained = self._captured(tx, w, w.plan, episode, results, touched)
        # A fact drawn from a turn is linked to it PART_OF, not also by similarity.
        own_turn = {} if w.plan is None else w.plan.drawn
        similar = [
            [
                (t, score)
                for hit, score in hits
                if (t := w.local(hit)) is not None and t != own_turn.get(i)
            ]
            for i, hits in enumerate(w.similar)
        ]
        assert w.options is not None
        autolinks.link_batch(tx, facts, results, similar, w.options)
        if w.verdicts is not None:
            _link_as_classified(tx, results, w.verdicts)
        if episode_id is not None:
            _chain_episode(tx, episode_id, chained)
        if w.then is not None:
            w.then(tx, results)
        self._cache.keep(tx, w.fresh)
        w.touched = touched
        for r in [*results, *(w.plan.written.values() if w.plan is not None else ())]:
            if r.action in ("ADD", "UPDATE") and r.fact is not None:
                w.changes.append(("FACT_STORED", r.fact.id))
            kind: ChangeKind = "FACT_FORGOTTEN" if r.action == "DELETE" else "FACT_SUPERSEDED"
            if r.action in ("UPDATE", "DELETE"):
                w.changes.extend((kind, target) for target in r.target_ids)
        for i, r in enumerate(results):
            w.positions[w.offset + i] = None if r.fact is None else r.fact.id
        return results

    def _captured(
        self,
        tx: Transaction,
        w: _Write,
        planned: captures.Plan,
        episode: episodes.Episode | None,
        results: list[StoreResult],
        touched: set[str],
    ) -> list[StoreResult]:
        """A capture's turns, once its items are written: the turn written in place of each
        whole-message fact the rules did not write (a repeat, a retraction: the conversation
        still said it), and each fact's PART_OF link to the turn it was drawn from.
        Returns the results that make up the episode, in its order (see ``capture.Plan``)."""
        missing = [i for i in planned.standins if results[i].action not in ("ADD", "UPDATE")]
        if missing:
            standins = [planned.parsed[i] for i in missing]
            written, more = dedup.write_batch(
                tx,
                standins if episode is None else _dated_by(episode, standins),
                [None] * len(missing),
                self.settings,
                episode_id=None if episode is None else episode.id,
                entities=self._entities,
            )
            touched |= more
            planned.written = dict(zip(missing, written, strict=True))
            w.known |= {
                r.fact.id: w.vectors[i] for i, r in planned.written.items() if r.fact is not None
            }
        # A fact the rules matched or retracted instead of writing was said again in this turn:
        # it is linked too, so that a purge of the fact takes every turn that says it.
        pairs = [*planned.drawn.items(), *((i, i) for i in missing)]
        drawn = [
            (fact.id, turn.id, max(fact.valid_from, turn.valid_from).timestamp())
            for f, t in pairs
            if (fact := results[f].fact) is not None
            and (turn := (planned.written.get(t) or results[t]).fact) is not None
            and fact.id != turn.id
        ]
        if drawn:
            tx.add_links(
                [
                    (fact, turn, "PART_OF", 1.0, LinkOrigin.CAPTURE.value, start)
                    for fact, turn, start in drawn
                ]
            )
        if planned.chained is None:
            return results
        return [planned.written.get(i) or results[i] for i in planned.chained]

    def _announce_committed(
        self, tx: Transaction, changes: Sequence[tuple[ChangeKind, str]]
    ) -> None:
        """Announce the changes ``tx`` committed. Its time is asked for only if there are any:
        a transaction that recorded no time has none, and asking for it after the commit would
        stamp one, outside any transaction, on the connection another write may be using."""
        if changes:
            self._announce(changes, tx.now)

    def _announce(self, changes: Sequence[tuple[ChangeKind, str]], at: float) -> None:
        if not changes or not self._listeners:
            return
        batch = [Change(kind, item, self._sync.namespace, at) for kind, item in changes]
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
        chosen = [inputs[i] for i in asked]
        neighbours = self._sync.vectors.neighbours_many(
            vectors[asked], classify.CANDIDATES, live_only=True
        )
        similar = classify.similar_facts(
            self._store, chosen, neighbours, now, entities=self._entities
        )
        verdicts = classify.classify(self._chat(), chosen, similar, self.settings.llm_batch_size)
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
        stored = self._sync.vectors.neighbours_many(vectors, k, live_only=True, floor=floor)
        in_batch = autolinks.batch_neighbours(vectors, k, floor)
        for i in range(len(vectors)):
            merged = sorted([*stored[i], *in_batch[i]], key=lambda hit: -hit[1])
            if merged and merged[0][1] >= dedup:
                twins[i] = merged[0][0]
            if linking[i]:
                similar[i] = [hit for hit in merged if hit[1] >= options.threshold]
        return twins, similar


def _link_as_classified(
    tx: Transaction, results: Sequence[StoreResult], verdicts: Sequence[Verdict | None]
) -> None:
    """The typed links the classifier drew from each new fact (see graphmem.classify), to the
    targets still live; strength 1, the reason in the link's metadata."""
    drawn = [
        (r.fact, target, kind, reason)
        for r, v in zip(results, verdicts, strict=True)
        if v is not None and r.fact is not None and r.action in ("ADD", "UPDATE")
        for target, kind, reason in v.links
        if target != r.fact.id
    ]
    if not drawn:
        return
    live = tx.live_ids([target for _, target, _, _ in drawn])
    starts = tx.valid_from(live)
    kept = [d for d in drawn if d[1] in live]
    tx.add_links(
        [
            (
                fact.id,
                target,
                kind,
                1.0,
                LinkOrigin.CLASSIFIER.value,
                max(fact.valid_from.timestamp(), starts[target]),
            )
            for fact, target, kind, _ in kept
        ],
        [{"reason": reason} for *_, reason in kept],
    )


@dataclass(slots=True)
class _Asked:
    """What a capture's chat request decided: a verdict per item (None for a turn), and the
    vectors embedded to ask it, by text, with those newly computed (for the embedding cache)."""

    verdicts: list[Verdict | None]
    vectors: dict[str, Vectors]
    fresh: list[tuple[str, Vectors]]


class _Write(Pending[Any]):
    """A write waiting for its group commit: ``run(tx, write)`` does it inside the group's
    transaction and records in ``write`` the facts whose vectors changed (``touched``, with
    ``known`` vectors) and the changes to announce."""

    def __init__(
        self,
        run: Callable[[Transaction, _Write], Any],
        items: int = 1,
        *,
        facts: Sequence[FactInput] = (),
        episode: episodes.EpisodeInput | None = None,
    ) -> None:
        super().__init__(items)
        self.run, self.facts, self.episode = run, facts, episode
        self.touched: set[str] = set()
        self.known: dict[str, Vectors] = {}
        self.changes: list[tuple[ChangeKind, str]] = []
        # A store_many's: its vectors (embedded by the caller with the LLM classifier, else
        # with its group) and what its group found before the transaction (Writer._prepare).
        self.embedded = False
        self.vectors: Vectors = np.empty((0, 0), np.float32)
        self.fresh: list[tuple[str, Vectors]] = []
        self.twins: Sequence[str | int | None] = ()
        self.similar: Sequence[Sequence[autolinks.Neighbour]] = ()
        self.verdicts: Sequence[Verdict | None] | None = None
        self.merges: Sequence[Sequence[str]] | None = None
        self.then: Callable[[Transaction, list[StoreResult]], None] | None = None
        self.plan: captures.Plan | None = None
        self.options: autolinks.Options | None = None
        self.offset = 0  # of its first fact among the group's
        self.positions: list[str | None] = []  # the group's facts' ids, as their writes land

    def embedded_as(self, vectors: Vectors, fresh: list[tuple[str, Vectors]]) -> None:
        """Its facts' vectors, and those of them newly computed (for the embedding cache)."""
        self.vectors, self.fresh, self.embedded = vectors, fresh, True

    def local(self, target: str | int) -> str | int | None:
        """A near-duplicate or link candidate found among the group's facts, as ``write_batch``
        takes it: a position in this write, the id an earlier write of the group gave it, or
        None if that write failed."""
        if isinstance(target, str) or target >= self.offset:
            return target if isinstance(target, str) else target - self.offset
        return self.positions[target]


def _dated_by(episode: episodes.Episode, facts: Sequence[FactInput]) -> Sequence[FactInput]:
    """``facts`` with the episode's time as the source date of those that give none, when the
    episode's time was stated (not the default, the moment it was recorded): a conversation of
    May 2023 stored today is dated May 2023, so the time words of a question ("in May 2023",
    "last week" asked as of then) find its facts, and their valid time starts then unless
    they say otherwise (see :func:`graphmem.dedup.write_batch`)."""
    if episode.time == episode.recorded_at:
        return facts
    when = episode.time.timestamp()
    return [
        x if x.source_date is not None else x.model_copy(update={"source_date": when})
        for x in facts
    ]


def _new_vectors(results: Sequence[StoreResult], vectors: Vectors) -> dict[str, Vectors]:
    """The vectors of the facts these results stored, by fact id. Only new facts: a
    duplicate's or a retraction's result is an older fact, whose vector is its own text's,
    not that of the text written."""
    return {
        r.fact.id: vectors[i]
        for i, r in enumerate(results)
        if r.fact is not None and r.action in ("ADD", "UPDATE")
    }


def _chain_episode(tx: Transaction, episode_id: str, results: Sequence[StoreResult]) -> None:
    """Link each fact the batch added to ``episode_id`` to the fact before it there, and cut
    the windows of turns ending on each (:mod:`graphmem.windows`)."""
    new = {
        r.fact.id: r.fact.text
        for r in results
        if r.action in ("ADD", "UPDATE") and r.fact is not None and r.fact.episode_id == episode_id
    }
    _link_in_episode(tx, tx.episode_chain(episode_id, list(new)))
    tx.add_windows(episode_id, list(new.items()))


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
