"""Opening a namespace: its name, its directory, which embedder indexed it, and whether its
vector index must be rebuilt.

A namespace is one directory under the data directory, holding its store (the SQLite file) and
its vector index. The vector index is derived from the store: when it is missing, damaged or was
built by another embedder (with ``reindex``), it is rebuilt; vector writes a crash left pending
in the outbox are replayed.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

from .errors import EmbedderMismatch, InvalidInput, StorageError
from .files import VECTOR_DIR, private_folder
from .ids import check_namespace
from .settings import Settings
from .storage.interface import Store
from .vectors.embedders import Embedder
from .vectors.index import Location, VectorIndex, opening_calls
from .vectors.outbox import Progress, VectorSync

#: Times the object store client retries a failed request (its default, 10 over 3 minutes,
#: outlasts any request's time limit).
S3_RETRIES: Final = 2

_log = logging.getLogger("graphmem")


def directory(data_dir: str | Path | None, namespace: str, settings: Settings) -> Path:
    """The namespace's directory, created if needed (StorageError if it cannot be), as the
    data directory is: folders only their owner may open."""
    check_namespace(namespace)
    path = Path(data_dir if data_dir is not None else settings.data_dir) / namespace
    try:
        private_folder(private_folder(path.parent) / namespace)
    except OSError as exc:
        raise StorageError(f"cannot create the namespace directory {path}: {exc.strerror}") from exc
    return path


@dataclass(frozen=True, slots=True)
class Indexing:
    """Which embedder the namespace was indexed with, which one opens it, and whether the
    vector index must be rebuilt."""

    recorded: dict[str, Any] | None
    wanted: dict[str, Any]
    rebuild: bool


def indexing(store: Store, embedder: Embedder, namespace: str, *, reindex: bool) -> Indexing:
    """Compare the embedder recorded in the store with ``embedder``: EmbedderMismatch when
    they differ, unless ``reindex``, which asks for a rebuild."""
    recorded = store.meta("embedder")
    wanted = {
        "provider": embedder.provider,
        "model": embedder.model,
        "dimensions": embedder.dimensions,
    }
    if recorded is not None and recorded != wanted and not reindex:
        raise EmbedderMismatch(
            f"namespace {namespace!r} was indexed with {_describe(recorded)}, but this "
            f"process uses {_describe(wanted)}; run `graphmem reindex` to rebuild the "
            "vectors with the new embedder (or open it with the old one)"
        )
    return Indexing(recorded, wanted, reindex or recorded != wanted)


def vector_location(
    directory: Path,
    namespace: str,
    settings: Settings,
    lock: Callable[[], AbstractContextManager[None]] | None = None,
) -> Location:
    """Where the namespace's vector index lives: its folder's ``vectors``, or (setting
    ``vectors``) ``s3://bucket/prefix/<namespace>``, written under ``lock`` if given."""
    if not settings.vectors:
        return Location(directory / VECTOR_DIR)
    parts = urlsplit(settings.vectors)
    if parts.scheme != "s3" or not parts.netloc:
        raise InvalidInput(
            f"vectors must be an s3://bucket/prefix URL (or unset for local folders), not "
            f"{settings.vectors!r}",
            field="vectors",
        )
    options = {"aws_region": settings.s3_region or "us-east-1"}
    if settings.s3_endpoint:
        options["aws_endpoint"] = settings.s3_endpoint
        if settings.s3_endpoint.startswith("http://"):
            options["allow_http"] = "true"
    if settings.s3_access_key_id and settings.s3_secret_access_key:
        options["aws_access_key_id"] = settings.s3_access_key_id
        options["aws_secret_access_key"] = settings.s3_secret_access_key
    # The object store client's own defaults wait 30 s a request and retry for 3 minutes: a
    # store that accepts connections and never answers held a write for 8 minutes.
    timeout = f"{settings.s3_timeout:g}s"
    options.update(
        timeout=timeout,
        connect_timeout=timeout,
        client_max_retries=str(S3_RETRIES),
        client_retry_timeout=str(math.ceil(settings.s3_timeout * (S3_RETRIES + 1))),
    )
    uri = f"{settings.vectors.rstrip('/')}/{namespace}"
    return Location(directory / VECTOR_DIR, uri, options, lock, settings.s3_timeout)


def open_vectors(
    where: Location, dimensions: int, namespace: str, *, rebuild: bool
) -> tuple[VectorIndex, bool]:
    """The namespace's vector index, and whether it must be rebuilt: a damaged index is
    removed and rebuilt (with a warning), as is one about to be rebuilt anyway. An object store
    that cannot be reached is a StorageError (nothing is removed)."""
    if rebuild:
        where.remove()  # rebuilt from the store anyway; also recovers a damaged index
    try:
        return VectorIndex(where, dimensions), rebuild
    except StorageError as exc:  # the index cannot be read: it is derived, rebuild it
        if exc.unreachable:  # no answer in time: said as it is
            raise
        if where.uri is not None and not _reachable(where):
            raise StorageError(
                f"cannot reach the vector store at {where.uri}: {exc.message}", unreachable=True
            ) from None
        _log.warning("%s: namespace %r: rebuilding it from the store", exc.message, namespace)
        where.remove()
        return VectorIndex(where, dimensions), True


def _reachable(where: Location) -> bool:
    """Whether the object store answers (a damaged table is rebuilt; an outage is not)."""
    try:
        opening_calls(where).call(lambda: where.connect().list_tables())
    except Exception:
        return False
    return True


def recover(
    store: Store,
    vectors: VectorIndex,
    sync: VectorSync,
    namespace: str,
    index: Indexing,
    progress: Progress | None,
) -> None:
    """Bring the vector index in line with the store on open: rebuild it if asked or missing,
    else replay the outbox and warn when the counts still disagree; then record the embedder."""
    rebuild = index.rebuild
    owners = store.vector_owner_count()
    if not rebuild and vectors.missing and owners:
        _log.warning(
            "the vector index of namespace %r is missing: rebuilding it from the store", namespace
        )
        rebuild = True
    if not rebuild:
        sync.replay()
        counted = None if sync.failed else vectors.count_if_answered()
        if counted is not None and counted != owners:
            _log.warning(
                "the vector index of namespace %r holds %d vectors where the store has %d "
                "facts to index: run `graphmem check`, then `graphmem reindex`",
                namespace,
                counted,
                owners,
            )
    if rebuild:
        sync.reindex(progress)
    if index.recorded != index.wanted:  # only once the vectors are this embedder's
        with store.transaction() as tx:
            tx.set_meta("embedder", index.wanted)


def _describe(embedder: Mapping[str, Any]) -> str:
    return f"{embedder['provider']}/{embedder['model']} ({embedder['dimensions']} dims)"
