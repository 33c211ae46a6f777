"""Automatic links made as facts are stored (docs/graph.md#automatic-links).

- **Similarity** (origin ``auto_similarity``, on by default): a new fact gets a RELATED_TO link
  to each of its nearest live facts (and earlier facts of the same batch) whose cosine is at or
  above the embedder's threshold, at most ``autolink_max`` of them, strength = the cosine.
- **Same entity** (origin ``auto_entity``, off by default): a new fact naming an entity gets a
  RELATED_TO link to the ``entity_links_max`` most recent live facts naming the same entity
  (case-insensitive). Each fact links only backwards to that many, so a fact is the target of at
  most as many newer facts: a popular entity makes a chain of small neighbourhoods, never a hub.

Links point from the new fact to the older one and are valid from the later of the two facts'
``valid_from``. They are written in the same transaction as the facts: a batch is stored with
its links or not at all. A fact never gets an automatic link to the version it supersedes (the
SUPERSEDES link says more) nor to a retracted or superseded fact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import numpy as np

from .models import FactInput, LinkOrigin, StoreResult, Vectors
from .settings import Settings

if TYPE_CHECKING:
    from .storage.interface import Transaction

#: Cosine at or above which a new fact is linked to a neighbour, by embedder provider.
#: Calibrated with ``python -m bench.autolink`` (docs/graph.md gives the figures): for each
#: embedder, the lowest cosine at which at most 5% of automatic links join LoCoMo turns of
#: different conversations. OpenAI-compatible models vary; that value was not measured here.
THRESHOLDS: Final = {"local": 0.75, "hash": 0.9, "openai": 0.75}
#: Strength of a same-entity link: weaker than a close paraphrase, stronger than chance.
ENTITY_LINK_STRENGTH: Final = 0.5
#: New facts' pairs per matrix product when comparing a batch with itself.
_BLOCK: Final = 1024

#: A neighbour: a stored fact's id, or the position of an earlier item of the same batch.
Neighbour = tuple[str | int, float]


@dataclass(frozen=True, slots=True)
class Options:
    """What a write links automatically."""

    similarity: bool
    entity: bool
    threshold: float
    max_similar: int
    max_entity: int

    @classmethod
    def resolve(cls, settings: Settings, provider: str) -> Options:
        threshold = settings.autolink_threshold
        return cls(
            similarity=settings.autolink,
            entity=settings.entity_links,
            threshold=THRESHOLDS.get(provider, 0.75) if threshold is None else threshold,
            max_similar=settings.autolink_max,
            max_entity=settings.entity_links_max,
        )

    def similarity_for(self, x: FactInput) -> bool:
        on = self.similarity if x.autolink is None else x.autolink
        return on and self.max_similar > 0

    def entity_for(self, x: FactInput) -> bool:
        on = x.entity_links if x.entity_links is not None else self.entity
        return on and x.autolink is not False and self.max_entity > 0 and bool(x.entity)


def batch_neighbours(vectors: Vectors, k: int, floor: float) -> list[list[Neighbour]]:
    """For each item, up to ``k`` earlier items of the batch with cosine ≥ ``floor``, most
    similar first."""
    out: list[list[Neighbour]] = [[] for _ in range(len(vectors))]
    if k <= 0:
        return out
    for start in range(0, len(vectors), _BLOCK):
        block = vectors[start : start + _BLOCK] @ vectors[: start + _BLOCK].T
        for r in range(block.shape[0]):
            i = start + r
            if i == 0:
                continue
            row = block[r, :i]
            hits = np.nonzero(row >= floor)[0]
            if len(hits) > k:
                hits = hits[np.argpartition(-row[hits], k - 1)[:k]]
            out[i] = sorted(((int(j), float(row[j])) for j in hits), key=lambda h: -h[1])
    return out


def link_batch(
    tx: Transaction,
    inputs: Sequence[FactInput],
    results: Sequence[StoreResult],
    similar: Sequence[Sequence[Neighbour]],
    options: Options,
) -> int:
    """Write the automatic links of a stored batch in the transaction ``tx``; returns how
    many. ``similar[i]`` are item i's candidates (stored ids or earlier batch positions) with
    their cosine, most similar first, already above the threshold."""
    made: list[tuple[str, str, float, str]] = []  # source, target, strength, origin
    new = [i for i, r in enumerate(results) if r.fact is not None and r.action in ("ADD", "UPDATE")]
    wanted: dict[int, list[tuple[str, float]]] = {}
    for i in new:
        if not options.similarity_for(inputs[i]):
            continue
        resolved = []
        for target, score in similar[i]:
            if isinstance(target, int):
                fact = results[target].fact
                if fact is None:
                    continue
                target = fact.id
            resolved.append((target, score))
        wanted[i] = resolved
    live = tx.live_ids(sorted({t for hits in wanted.values() for t, _ in hits}))
    for i, hits in wanted.items():
        fact = results[i].fact
        assert fact is not None
        skip = {fact.id, *results[i].target_ids}
        chosen: list[str] = []
        for target, score in hits:
            if target in live and target not in skip and target not in chosen:
                chosen.append(target)
                made.append(
                    (fact.id, target, min(1.0, max(0.0, score)), LinkOrigin.AUTO_SIMILARITY)
                )
                if len(chosen) == options.max_similar:
                    break
    entity_items = [i for i in new if options.entity_for(inputs[i])]
    if entity_items:
        already = {(s, t) for s, t, _, _ in made}
        for i in entity_items:
            fact = results[i].fact
            assert fact is not None
            for target in tx.recent_same_entity(fact.id, options.max_entity):
                if target not in results[i].target_ids and (fact.id, target) not in already:
                    made.append((fact.id, target, ENTITY_LINK_STRENGTH, LinkOrigin.AUTO_ENTITY))
    if not made:
        return 0
    starts = tx.valid_from({end for s, t, _, _ in made for end in (s, t)})
    tx.add_links(
        [
            (s, t, "RELATED_TO", round(float(strength), 4), origin, max(starts[s], starts[t]))
            for s, t, strength, origin in made
        ]
    )
    return len(made)
