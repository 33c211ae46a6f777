"""The LanceDB vector index: a derived, rebuildable copy of the facts' embeddings.

One table, ``facts``, per namespace: the fact id, its vector and a ``live`` flag (some fact using
this vector is neither retracted nor superseded) so that current-time searches can pre-filter.
SQLite stays the source of truth: writes reach this index through the outbox (see memory.py).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow as pa

from .embedders import Vectors
from .errors import StorageError

TABLE: Final = "facts"
#: Rows at which ``optimize`` builds an ANN index; below it a flat scan is exact and fast enough.
ANN_INDEX_MIN_ROWS: Final = 50_000
#: Writes between automatic compactions of the table's small fragments.
COMPACT_EVERY: Final = 50
#: Table versions older than this are deleted by ``optimize`` (newer ones may still be read).
OLD_VERSIONS_KEPT: Final = timedelta(minutes=1)


class VectorIndex:
    """A namespace's LanceDB table of fact vectors."""

    def __init__(self, path: Path, dimensions: int) -> None:
        import lancedb

        self.path = path
        self.dimensions = dimensions
        self._lock = threading.Lock()
        self._table: Any  # lancedb's query builders are only partly typed
        self._commits = 0
        self._schema = pa.schema(
            [
                pa.field("id", pa.string(), nullable=False),
                pa.field("vector", pa.list_(pa.float32(), dimensions), nullable=False),
                pa.field("live", pa.bool_(), nullable=False),
            ]
        )
        try:
            self._db = lancedb.connect(str(path))
            self.missing = TABLE not in self._db.list_tables().tables
            self._table = (
                self._db.create_table(TABLE, schema=self._schema)
                if self.missing
                else self._db.open_table(TABLE)
            )
        except (OSError, ValueError, RuntimeError) as exc:
            raise StorageError(f"cannot open the vector index at {path}: {exc}") from exc
        stored = self._table.schema.field("vector").type
        if getattr(stored, "list_size", dimensions) != dimensions:
            raise StorageError(
                f"the vector index at {path} holds {stored.list_size}-dimensional vectors, "
                f"the embedder makes {dimensions}; run `graphmem reindex`"
            )

    def upsert(self, ids: Sequence[str], vectors: Vectors, live: Sequence[bool]) -> None:
        """Write (or replace) the vectors of ``ids``. Idempotent, so outbox replays are safe."""
        if not ids:
            return
        batch = pa.table(
            {
                "id": pa.array(list(ids), pa.string()),
                "vector": pa.FixedSizeListArray.from_arrays(
                    pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel()),
                    self.dimensions,
                ),
                "live": pa.array(list(live), pa.bool_()),
            },
            schema=self._schema,
        )
        with self._lock:
            (
                self._table.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(batch)
            )
            self._committed()

    def delete(self, ids: Sequence[str]) -> None:
        if ids:
            with self._lock:
                self._table.delete(_id_filter(ids))
                self._committed()

    def nearest(self, vector: Vectors, k: int, *, live_only: bool) -> list[tuple[str, float]]:
        """Up to ``k`` (id, cosine similarity) pairs, most similar first."""
        if k <= 0:
            return []
        query = self._table.search(np.asarray(vector, dtype=np.float32)).distance_type("cosine")
        query = query.select(["id", "_distance"])
        if live_only:
            query = query.where("live = true", prefilter=True)
        result = query.limit(k).to_arrow()
        ids = result.column("id").to_pylist()
        distances = result.column("_distance").to_pylist()
        return [(i, 1.0 - float(d)) for i, d in zip(ids, distances, strict=True)]

    def nearest_many(self, vectors: Vectors, *, live_only: bool) -> list[tuple[str, float] | None]:
        """The single nearest (id, cosine) for each query vector, None when the table is empty."""
        if len(vectors) == 0 or self.count() == 0:
            return [None] * len(vectors)
        query = self._table.search(np.asarray(vectors, dtype=np.float32)).distance_type("cosine")
        query = query.select(["id", "_distance"])
        if live_only:
            query = query.where("live = true", prefilter=True)
        result = query.limit(1).to_arrow()
        out: list[tuple[str, float] | None] = [None] * len(vectors)
        qi = result.column("query_index").to_pylist() if len(vectors) > 1 else [0] * result.num_rows
        for q, i, d in zip(
            qi, result.column("id").to_pylist(), result.column("_distance").to_pylist(), strict=True
        ):
            similarity = 1.0 - float(d)
            current = out[q]
            if current is None or similarity > current[1]:
                out[q] = (i, similarity)
        return out

    def rows(self, ids: Iterable[str] | None = None) -> dict[str, tuple[Vectors, bool]]:
        """Stored (vector, live) by id: all rows, or those of ``ids``."""
        if ids is None:
            table = self._table.to_arrow()
        else:
            wanted = list(ids)
            if not wanted:
                return {}
            table = self._table.search().where(_id_filter(wanted)).limit(len(wanted) * 2 + 10)
            table = table.to_arrow()
        out: dict[str, tuple[Vectors, bool]] = {}
        vectors = table.column("vector").combine_chunks().flatten().to_numpy()
        matrix = vectors.reshape(-1, self.dimensions) if table.num_rows else vectors
        for n, (i, live) in enumerate(
            zip(table.column("id").to_pylist(), table.column("live").to_pylist(), strict=True)
        ):
            out[i] = (matrix[n], bool(live))
        return out

    def count(self) -> int:
        return int(self._table.count_rows())

    def clear(self) -> None:
        """Drop every row (reindex starts from an empty table)."""
        with self._lock:
            self._db.drop_table(TABLE)
            self._table = self._db.create_table(TABLE, schema=self._schema)

    def optimize(self) -> dict[str, Any]:
        """Compact small fragments, drop old versions, and build or refresh the ANN index."""
        from lancedb.index import IvfPq

        with self._lock:
            self._table.optimize(cleanup_older_than=OLD_VERSIONS_KEPT)
            self._commits = 0
            rows = self.count()
            indexed = bool(self._table.list_indices())
            if rows >= ANN_INDEX_MIN_ROWS and not indexed:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    self._table.create_index("vector", config=IvfPq(distance_type="cosine"))
                indexed = True
        return {"rows": rows, "ann_index": indexed}

    def _committed(self) -> None:
        """Count a write; every COMPACT_EVERY writes, merge the small fragments they left.

        Each LanceDB write adds a fragment and a version, and queries slow down with their
        number (a 1k-row table: 8 ms per query compacted, 40 ms after 150 small writes).
        """
        self._commits += 1
        if self._commits >= COMPACT_EVERY:
            self._table.optimize(cleanup_older_than=OLD_VERSIONS_KEPT)
            self._commits = 0


def _id_filter(ids: Iterable[str]) -> str:
    quoted = ",".join("'" + i.replace("'", "''") + "'" for i in ids)
    return f"id IN ({quoted})"
