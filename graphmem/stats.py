"""``Memory.stats``: what a namespace holds, how its index stands, and what its models cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .decay import DECAY_CLASSES
from .jsonform import json_fields
from .llm import ChatClient
from .storage.interface import Store
from .usage import Usage
from .vectors.embedders import Embedder
from .vectors.index import VectorIndex


@dataclass(frozen=True, slots=True)
class Stats:
    """Counts by state, decay class and category, the vector index and the embedder, and the
    ``usage`` of the embedder and the classifier's chat model (see :mod:`graphmem.usage`)."""

    namespace: str
    #: Every fact stored, in any state.
    facts: int
    #: Facts a read at the current time sees.
    current: int
    superseded: int
    retracted: int
    #: Facts past their expiry that the next prune deletes.
    expired_pending_prune: int
    #: Current facts per decay class (every class listed).
    by_decay_class: dict[str, int]
    #: Current facts per category.
    by_category: dict[str, int]
    #: Links not retracted.
    links: int
    #: Rows in the vector index; None when the index, on an object store, did not answer
    #: within ``s3_timeout`` (``Memory.degraded`` says why).
    vectors: int | None
    #: Vector writes waiting in the outbox.
    outbox_pending: int
    #: provider, model and dimensions of the embedder.
    embedder: dict[str, Any]
    embedding_usage: Usage
    #: None until the LLM classifier is used.
    llm_usage: Usage | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, with the two usages under ``usage``."""
        out = json_fields(self)
        out["usage"] = {"embedding": out.pop("embedding_usage"), "llm": out.pop("llm_usage")}
        return out


def collect(
    namespace: str,
    store: Store,
    vectors: VectorIndex,
    embedder: Embedder,
    llm: ChatClient | None,
) -> Stats:
    counts = store.counts(store.now())
    by_class = dict.fromkeys(DECAY_CLASSES, 0) | counts.by_decay_class
    return Stats(
        namespace=namespace,
        facts=counts.facts,
        current=sum(by_class.values()),
        superseded=counts.superseded,
        retracted=counts.retracted,
        expired_pending_prune=counts.expired,
        by_decay_class=by_class,
        by_category=counts.by_category,
        links=counts.links,
        vectors=vectors.count_if_answered(),
        outbox_pending=counts.outbox,
        embedder={
            "provider": embedder.provider,
            "model": embedder.model,
            "dimensions": embedder.dimensions,
        },
        embedding_usage=embedder.meter.snapshot(),
        llm_usage=None if llm is None else llm.meter.snapshot(),
    )
