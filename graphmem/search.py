"""The search pipeline: keyword and vector legs, fusion, graph evidence, one consistent answer.

1. The legs run concurrently (FTS5 and the embedding/matrix product release the GIL): the
   keyword leg asks the store for its best visible matches, the vector leg embeds the query and
   widens its nearest-neighbour search until enough visible facts are found.
2. Their scores are fused (:func:`graphmem.ranking.fuse`); candidates linked in an episode (by
   default) or by any link (``graph_depth`` > 0) lend each other evidence
   (:mod:`graphmem.expansion`), and so do the windows of turns that hold them
   (:mod:`graphmem.windows`, with the episode evidence); the facts whose entity the query names
   (by any of its names, :mod:`graphmem.entities`) are raised (:data:`ENTITY_BOOST`); then the relevance is adjusted by importance, confidence,
   freshness and decay class (:func:`graphmem.ranking.adjust`).
3. A reranker, if one is chosen, puts the best ``rerank_candidates`` of that order in a new one
   (:mod:`graphmem.rerank`); when it fails the fused order stands.
4. The legs ran as separate statements, so a write committed between them (a supersession) may
   have hidden a candidate since: the hits are read again in one snapshot, old and new version
   are never both returned, and the next candidates fill in.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

import numpy as np

from . import expansion, ranking, timehints, tracing, windows
from .decay import freshness
from .entities import Entities
from .errors import InvalidInput
from .limits import MAX_DEPTH, MAX_TEXT_LENGTH
from .models import Fact, Reranked, SearchHit, TimeKind, Vectors, check_limit
from .recall import entity_names
from .rerank import Candidate, Reranker, Reranking
from .settings import Settings
from .storage.interface import Filters, Record
from .temporal import TimeScope
from .vectors.embedders import Embedder
from .vectors.outbox import VectorSync

#: Threads that run the vector leg beside the keyword leg (one per concurrent search).
SEARCH_THREADS: Final = 4
#: A candidate whose entity the query names (:func:`_named_entities`) has its relevance raised
#: by this share; the others keep theirs. On LoCoMo, with windows of turns, it lifts every
#: category on both halves; alone it loses adversarial questions, which name the wrong speaker
#: on purpose (bench/REPORT.md, "Windows of turns").
ENTITY_BOOST: Final = 0.2

#: The attribute of a search leg's span saying how many candidates it found.
FOUND: Final = "graphmem.search.found"

T = TypeVar("T")
_Candidates = dict[str, Record]


class Search:
    """Hybrid, keyword or vector search over one namespace. Thread-safe."""

    def __init__(
        self,
        sync: VectorSync,
        embedder: Embedder,
        settings: Settings,
        *,
        entities: Entities | None = None,
    ) -> None:
        #: The namespace's index, and the vectors of writes not in it yet (scored exactly).
        self._sync = sync
        self._store = sync.store
        #: The names of each entity, for the entity boost.
        self._entities = entities or Entities(sync.store)
        self._embedder = embedder
        self.settings = settings
        self._pool = ThreadPoolExecutor(
            max_workers=SEARCH_THREADS, thread_name_prefix="graphmem-search"
        )
        #: The rerankers this search has used (:mod:`graphmem.rerank`).
        self.reranking = Reranking()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.reranking.close()

    def run(
        self,
        query: str,
        scope: TimeScope,
        filters: Filters,
        *,
        limit: int,
        mode: str,
        graph_depth: int,
        episode_links: bool = True,
        time_hints: bool = False,
        rerank: str | Reranker | None = None,
    ) -> list[SearchHit]:
        """Facts matching ``query``, best first (see ``Memory.search``)."""
        _check(query, mode, limit, graph_depth)
        reranker = self.reranking.chosen(rerank, self.settings)
        attributes: tracing.Attributes = {
            tracing.NAMESPACE: self._sync.namespace,
            "graphmem.search.mode": mode,
            "graphmem.search.limit": limit,
            "graphmem.search.graph_depth": graph_depth,
        }
        with tracing.span("graphmem.search", attributes) as span:
            hits = self._run(
                query, scope, filters, limit, mode, graph_depth, episode_links, time_hints, reranker
            )
            span.set_attribute("graphmem.search.hits", len(hits))
            return hits

    def _run(
        self,
        query: str,
        scope: TimeScope,
        filters: Filters,
        limit: int,
        mode: str,
        graph_depth: int,
        episode_links: bool,
        time_hints: bool,
        reranker: Reranker | None,
    ) -> list[SearchHit]:
        """``run``'s search, inside its span."""
        wanted = max(self.settings.fusion_candidates, limit)
        live_only = scope.current and not filters.include_superseded
        fts: dict[str, float] = {}
        vec: dict[str, float] = {}
        query_vector: Vectors | None = None
        candidates: _Candidates = {}
        pending = (
            self._pool.submit(
                tracing.carried(self._limited),
                self._store.deadline,
                self._vector_leg,
                query,
                scope,
                filters,
                wanted,
                live_only,
            )
            if mode != "fts"
            else None
        )
        dated = (
            self._pool.submit(
                tracing.carried(self._limited),
                self._store.deadline,
                self._dated_leg,
                query,
                scope,
                filters,
                wanted,
                mode != "vector",
            )
            if time_hints
            else None
        )
        if mode != "vector":
            with tracing.span("graphmem.search.keyword", self._leg_attributes(wanted)) as span:
                fts, rows = self._store.keyword_matches(query, scope, filters, wanted)
                span.set_attribute(FOUND, len(rows))
            candidates.update(rows)
        hint = None
        if dated is not None:
            hint, in_period, rows = dated.result()
            candidates.update(rows)
            fts = {**in_period, **fts}
        if pending is not None:
            vec, rows, query_vector = pending.result()
            candidates.update(rows)
        if mode == "hybrid":
            relevance = ranking.fuse(fts, vec, self.settings.fts_weight)
        elif mode == "fts":
            relevance = ranking.min_max(fts)
        else:
            relevance = dict(vec)
        fused = relevance
        if graph_depth > 0 or episode_links:
            with tracing.span("graphmem.search.evidence", self._leg_attributes(len(relevance))):
                if graph_depth > 0:
                    relevance = expansion.lend_evidence(
                        self._store,
                        relevance,
                        scope,
                        expansion.skipping(expansion.EVIDENCE_SKIPS, episode_links),
                    )
                else:
                    relevance = expansion.lend_along_episodes(
                        self._store, relevance, candidates, scope
                    )
        if episode_links:
            with tracing.span("graphmem.search.windows", self._leg_attributes(len(relevance))):
                matches = (
                    {}
                    if mode == "vector"
                    else self._store.window_matches(query, windows.WINDOW_DEPTH)
                )
                relevance = windows.lend(
                    self._store,
                    matches,
                    relevance,
                    candidates,
                    vec,
                    None if query_vector is None else self._cosines(query_vector),
                    scope,
                    filters,
                )
        named = _named_entities(query, relevance, candidates, self._entities, scope)
        relevance = {i: r * (1 + ENTITY_BOOST) if i in named else r for i, r in relevance.items()}
        ranked = sorted(
            (_scored(candidates[i], rel, scope, hint) for i, rel in relevance.items()),
            reverse=True,
        )
        placed: dict[str, Reranked] = {}
        if reranker is not None:
            with tracing.span("graphmem.search.rerank", self._leg_attributes(len(ranked))):
                ranked, placed = self._reranked(
                    reranker,
                    query,
                    ranked,
                    candidates,
                    scope,
                    filters,
                    _Evidence(fts, vec, fused, relevance, named, hint),
                )
        top = ranked[:limit]
        reached: dict[str, tuple[float, int, str]] = {}
        if graph_depth > 0:
            with tracing.span("graphmem.search.neighbours", self._leg_attributes(len(top))) as span:
                reached = expansion.neighbours(
                    self._store,
                    [(fact_id, score) for score, _, fact_id in top],
                    graph_depth,
                    scope,
                    lambda ids: {r["id"] for r in self._store.candidates(ids, scope, filters)},
                    {fact_id: score for score, _, fact_id in ranked},
                    None
                    if query_vector is None
                    else functools.partial(self._sync.vectors.similarities, query_vector),
                    skip_origins=expansion.skipping(expansion.NEIGHBOUR_SKIPS, episode_links),
                )
                span.set_attribute(FOUND, len(reached))
            merged = [(score, 0, fact_id) for score, _, fact_id in top if fact_id not in reached]
            merged += [(score, depth, fact_id) for fact_id, (score, depth, _) in reached.items()]
            merged.sort(key=lambda x: (-x[0], x[1]))
            top = [(score, 0, fact_id) for score, _, fact_id in merged[:limit]]
        more = iter([] if graph_depth > 0 else ranked[limit:])
        shown: dict[str, Fact] = {}
        with self._store.snapshot():
            while True:
                shown.update(self._store.visible([f for _, _, f in top], scope, filters))
                if len(shown) >= min(limit, len(top)) or graph_depth > 0:
                    break
                extra = list(itertools.islice(more, limit - len(shown)))
                if not extra:
                    break
                top = [hit for hit in top if hit[2] in shown] + extra
        return [
            SearchHit(
                shown[fact_id],
                score,
                fts.get(fact_id),
                vec.get(fact_id),
                reached[fact_id][1] if fact_id in reached else 0,
                reached[fact_id][2] if fact_id in reached else None,
                hint,
                _matched(candidates.get(fact_id), hint),
                named.get(fact_id),
                placed.get(fact_id),
            )
            for score, _, fact_id in top
            if fact_id in shown
        ]

    def _reranked(
        self,
        reranker: Reranker,
        query: str,
        ranked: list[tuple[float, float, str]],
        rows: _Candidates,
        scope: TimeScope,
        filters: Filters,
        evidence: _Evidence,
    ) -> tuple[list[tuple[float, float, str]], dict[str, Reranked]]:
        """``ranked`` with its best ``rerank_candidates`` in the order ``reranker`` gives them
        (the candidates no longer visible after them), and how each was placed."""
        head, tail = (
            ranked[: self.settings.rerank_candidates],
            ranked[self.settings.rerank_candidates :],
        )
        facts = self._store.visible([fact_id for _, _, fact_id in head], scope, filters)
        shown = [hit for hit in head if hit[2] in facts]
        fts_rank = _ranks(evidence.fts)
        vec_rank = _ranks(evidence.vec)
        candidates = [
            Candidate(
                id=fact_id,
                text=facts[fact_id].text,
                entity=rows[fact_id]["entity"],
                fused_rank=place,
                score=score,
                fused=evidence.fused.get(fact_id, 0.0),
                relevance=evidence.relevance[fact_id],
                fts_score=evidence.fts.get(fact_id),
                fts_rank=fts_rank.get(fact_id),
                vector_score=evidence.vec.get(fact_id),
                vector_rank=vec_rank.get(fact_id),
                entity_matched=fact_id in evidence.named,
                time_matched=_matched(rows[fact_id], evidence.hint),
                time_hint=evidence.hint is not None,
                importance=rows[fact_id]["importance"],
                confidence=rows[fact_id]["confidence"],
                effective=effective,
                episode_id=rows[fact_id]["episode_id"],
            )
            for place, (score, effective, fact_id) in enumerate(shown)
        ]
        order, placed = self.reranking.apply(reranker, query, candidates)
        hidden = [hit for hit in head if hit[2] not in facts]
        return (
            [shown[i] for i in order] + hidden + tail,
            {candidates[i].id: how for i, how in zip(order, placed, strict=True)},
        )

    def _cosines(self, query: Vectors) -> Callable[[list[str]], dict[str, float]]:
        """The query's cosine with given facts: from the index, or the vectors waiting for it."""

        def cosines(ids: list[str]) -> dict[str, float]:
            found = self._sync.vectors.similarities(query, ids)
            waiting = self._sync.pending()
            found.update(_cosines(query, {i: waiting[i] for i in ids if i in waiting}))
            return found

        return cosines

    def _leg_attributes(self, wanted: int) -> tracing.Attributes:
        """What a leg's span says before it runs: the namespace, the candidates it works on
        (or asks for)."""
        return {tracing.NAMESPACE: self._sync.namespace, "graphmem.search.wanted": wanted}

    def _limited(self, deadline: float | None, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` with its reads stopped at ``deadline`` (for work on pool threads)."""
        with self._store.time_limit(deadline):
            return fn(*args)

    def _dated_leg(
        self, query: str, scope: TimeScope, filters: Filters, n: int, keywords: bool
    ) -> tuple[timehints.TimeHint | None, dict[str, float], _Candidates]:
        """The time words of ``query`` understood (relative to ``as_of``), and with
        ``keywords`` the ``n`` best keyword matches of their period, which join the candidates
        so that a period's facts are found however many others match better. Runs on a pool
        thread, beside the keyword leg."""
        with tracing.span("graphmem.search.dated", self._leg_attributes(n)) as span:
            hint = timehints.understand(query, scope.as_of) or self._event_hint(
                query, scope, filters
            )
            span.set_attribute("graphmem.search.time_hint", hint is not None)
            if hint is None or not keywords:
                return hint, {}, {}
            dated = dataclasses.replace(filters, period=hint)
            scores, rows = self._store.keyword_matches(query, scope, dated, n)
            span.set_attribute(FOUND, len(rows))
            return hint, scores, rows

    def _event_hint(
        self, query: str, scope: TimeScope, filters: Filters
    ) -> timehints.TimeHint | None:
        """The period before or after the event the query names ("before she moved"), dated
        by the earliest of the best keyword matches of its words among the facts in scope; None when
        the query names no event, or no dated fact matches it."""
        found = timehints.event(query)
        if found is None:
            return None
        text, relation, words = found
        _, rows = self._store.keyword_matches(words, scope, filters, timehints.EVENT_MATCHES)
        dated = [
            (row["source_date"] if row["source_date"] is not None else row["valid_from"], i)
            for i, row in rows.items()
        ]
        if not dated:
            return None
        moment, fact_id = min(dated)
        return timehints.anchored(text, relation, moment, fact_id)

    def _vector_leg(
        self, query: str, scope: TimeScope, filters: Filters, n: int, live_only: bool
    ) -> tuple[dict[str, float], _Candidates, Vectors]:
        """Cosine of the ``n`` most similar visible facts, widening the nearest-neighbour
        search as needed; and the query's vector. Runs on a pool thread."""
        with tracing.span("graphmem.search.vector", self._leg_attributes(n)) as span:
            vector = self._embedder.embed([query])[0]
            waiting = _cosines(vector, self._sync.pending())
            k = n
            while True:
                # Fewer than k: the index has no more (or, on an object store that does not
                # answer, none: then the writes waiting are all the leg scores).
                nearest = self._sync.vectors.nearest(vector, k, live_only=live_only)
                hits = dict(nearest)
                hits.update(waiting)  # the index may hold an older vector of these, or none
                scores = dict(hits)
                for owner, dependant in self._store.sharing_vectors(hits.keys()):
                    scores[dependant] = hits[owner]
                shown = self._store.candidates(list(scores), scope, filters)
                if len(shown) >= n or len(nearest) < k:
                    break
                k *= 4
            shown.sort(key=lambda row: scores[row["id"]], reverse=True)
            best = shown[:n]
            span.set_attributes({FOUND: len(best), "graphmem.search.nearest": k})
        return (
            {row["id"]: scores[row["id"]] for row in best},
            {row["id"]: row for row in best},
            vector,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Evidence:
    """What the search knows of its candidates when the reranker runs: each leg's scores, their
    fusion, the relevance after the loans and the entity boost, the entities the query names
    and the period of its time words."""

    fts: dict[str, float]
    vec: dict[str, float]
    fused: dict[str, float]
    relevance: dict[str, float]
    named: dict[str, str]
    hint: timehints.TimeHint | None


def _ranks(scores: Mapping[str, float]) -> dict[str, int]:
    """Each id's place (from 0) in ``scores``, best first."""
    return {fact_id: i for i, fact_id in enumerate(sorted(scores, key=lambda k: -scores[k]))}


def _named_entities(
    query: str,
    relevance: Mapping[str, float],
    candidates: _Candidates,
    entities: Entities,
    scope: TimeScope,
) -> dict[str, str]:
    """The candidates whose entity ``query`` names: id -> the entity, as the fact spells it. A
    name is a word or a run of words of the query (:func:`graphmem.recall.entity_names`), a
    possessive read as the name ("Caroline's"); an entity of several words is also named by
    its first ("Caroline" for "Caroline Smith"), and every entity by each of its names
    ("Mel" for "Melanie" when a fact or a declaration gives that alias)."""
    names = set(entity_names(query))
    names |= {n.removesuffix("'s") for n in names}
    if not any(candidates[i]["entity"] for i in relevance):
        return {}
    names |= set(entities.reached(sorted(names), scope.known_at))
    named: dict[str, str] = {}
    for fact_id in relevance:
        entity = candidates[fact_id]["entity"]
        if entity:
            folded = entity.lower()
            if folded in names or folded.split(maxsplit=1)[0] in names:
                named[fact_id] = entity
    return named


def _cosines(query: Vectors, vectors: dict[str, Vectors]) -> dict[str, float]:
    """Cosine between ``query`` and each of ``vectors``."""
    if not vectors:
        return {}
    matrix = np.stack(list(vectors.values())).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    scores = matrix @ np.asarray(query, dtype=np.float32) / np.maximum(norms, 1e-12)
    return dict(zip(vectors, (float(x) for x in scores), strict=True))


def _scored(
    row: Record, relevance: float, scope: TimeScope, hint: timehints.TimeHint | None
) -> tuple[float, float, str]:
    """(final score, effective date, id) of a candidate: the ranking order, ties to the newer.
    A fact dated in the period of the query's time words has its relevance raised."""
    effective = row["source_date"] if row["source_date"] is not None else row["valid_from"]
    if _matched(row, hint) is not None:
        relevance *= 1 + timehints.TIME_HINT_BOOST
    score = ranking.adjust(
        relevance,
        importance=row["importance"],
        confidence=row["confidence"],
        freshness=freshness(row["expires_at"], row["last_confirmed_at"], scope.known_at),
        decay_class=row["decay_class"],
    )
    return score, effective, row["id"]


def _matched(row: Record | None, hint: timehints.TimeHint | None) -> TimeKind | None:
    """Which time of the candidate ``row`` falls in the period of the query's time words: its
    date (source date, else valid_from), else the time its text states; None if neither."""
    if hint is None or row is None:
        return None
    if hint.covers(row["source_date"] if row["source_date"] is not None else row["valid_from"]):
        return "valid"
    if hint.overlaps(row["stated_start"], row["stated_end"]):
        return "stated"
    return None


def _check(query: str, mode: str, limit: int, graph_depth: int) -> None:
    if not isinstance(query, str) or not query.strip():
        raise InvalidInput("query must be a non-empty string", field="query")
    if len(query) > MAX_TEXT_LENGTH:
        raise InvalidInput(f"query longer than {MAX_TEXT_LENGTH} characters", field="query")
    if mode not in ranking.MODES:
        raise InvalidInput(f"unknown mode {mode!r}; use hybrid, fts or vector", field="mode")
    check_limit(limit)
    if (
        isinstance(graph_depth, bool)
        or not isinstance(graph_depth, int)
        or not (0 <= graph_depth <= MAX_DEPTH)
    ):
        raise InvalidInput(f"graph_depth must be from 0 to {MAX_DEPTH}", field="graph_depth")
