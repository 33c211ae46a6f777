"""The embedding cache: vectors by (provider, model, sha256 of text), kept by the namespace's
store, so that a reindex or a repeated text never embeds the same text twice."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..ids import text_hash
from ..models import Vectors
from ..storage.interface import Store, Transaction
from .embedders import Embedder


class EmbeddingCache:
    """Vectors by (provider, model, sha256 of text), kept by the namespace's store."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed(
        self, store: Store, texts: Sequence[str]
    ) -> tuple[Vectors, list[tuple[str, Vectors]]]:
        """Vectors for ``texts``, from the cache where possible.

        Returns the vectors and the (hash, vector) pairs newly computed, for ``keep`` to write
        in the caller's transaction.
        """
        hashes = [text_hash(t) for t in texts]
        found = self.lookup(store, hashes)
        missing = sorted(
            {h: t for h, t in zip(hashes, texts, strict=True) if h not in found}.items()
        )
        fresh: list[tuple[str, Vectors]] = []
        if missing:
            vectors = self.embedder.embed([t for _, t in missing])
            for (h, _), v in zip(missing, vectors, strict=True):
                found[h] = v
                fresh.append((h, v))
        dims = self.embedder.dimensions
        out = np.empty((len(texts), dims), dtype=np.float32)
        for i, h in enumerate(hashes):
            out[i] = found[h]
        return out, fresh

    def lookup(self, store: Store, hashes: Sequence[str]) -> dict[str, Vectors]:
        e = self.embedder
        return store.cached_vectors(e.provider, e.model, e.dimensions, hashes)

    def keep(self, tx: Transaction, fresh: Sequence[tuple[str, Vectors]]) -> None:
        """Write newly computed vectors in ``tx``."""
        if fresh:
            e = self.embedder
            tx.cache_vectors(e.provider, e.model, e.dimensions, fresh)
