"""Online backup and restore of a data directory.

A backup holds, per namespace, a copy of its SQLite file made with SQLite's backup API, and a
copy of the API key file, each readable by its owner alone (as are the folders made for them).
The copy is taken in one step inside a read transaction, so it is the database as of one commit
even while a server goes on writing (WAL readers do not block the writer, nor it them). The
LanceDB index is not copied: it could not be copied at the same instant, and it is derived from
SQLite and the embedding cache (also in SQLite), so ``restore`` rebuilds it without embedding
anything again.

    backup/
    ├── _keys.sqlite
    └── <namespace>/graphmem.sqlite3
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from ...errors import Conflict, InvalidInput, StorageError
from ...files import PRIVATE_FOLDER, VECTOR_DIR, private_file, private_folder
from ...ids import check_namespace
from .keys import KEYS_FILE
from .store import SQLITE_FILE


def backup(data_dir: Path, destination: Path) -> list[str]:
    """Copy every namespace of ``data_dir`` (and its key file) into ``destination``, which must
    not exist or be empty. Returns the namespaces copied."""
    if destination.exists() and any(destination.iterdir()):
        raise Conflict(f"{destination} is not empty: back up into a new directory")
    names = [path.parent.name for path in _databases(data_dir)]
    try:
        private_folder(destination)
        for name in names:
            (destination / name).mkdir(mode=PRIVATE_FOLDER)
            _copy(data_dir / name / SQLITE_FILE, destination / name / SQLITE_FILE)
        if (data_dir / KEYS_FILE).exists():
            _copy(data_dir / KEYS_FILE, destination / KEYS_FILE)
    except OSError as exc:
        raise StorageError(f"cannot write the backup to {destination}: {exc.strerror}") from exc
    return names


def restore(source: Path, data_dir: Path, *, replace: bool = False) -> list[str]:
    """Copy a backup's namespaces (and key file) into ``data_dir``; their vector indexes are
    rebuilt when they are next opened. A namespace that exists in ``data_dir`` is a Conflict
    unless ``replace``. Stop any server on ``data_dir`` first: it keeps its files open.
    Returns the namespaces restored."""
    names = [path.parent.name for path in _databases(source)]
    if not names:
        raise InvalidInput(f"{source} holds no graphmem backup", field="source")
    taken = [n for n in names if (data_dir / n / SQLITE_FILE).exists()]
    if taken and not replace:
        raise Conflict(
            f"namespaces {', '.join(taken)} exist in {data_dir}: pass --replace to overwrite them"
        )
    try:
        for name in names:
            target = data_dir / name
            private_folder(private_folder(data_dir) / name)
            for stale in (f"{SQLITE_FILE}-wal", f"{SQLITE_FILE}-shm"):
                (target / stale).unlink(missing_ok=True)
            shutil.rmtree(target / VECTOR_DIR, ignore_errors=True)
            _copy(source / name / SQLITE_FILE, target / SQLITE_FILE)
        if (source / KEYS_FILE).exists():
            _copy(source / KEYS_FILE, data_dir / KEYS_FILE)
    except OSError as exc:
        raise StorageError(f"cannot restore into {data_dir}: {exc.strerror}") from exc
    return names


def _databases(directory: Path) -> Iterator[Path]:
    if not directory.is_dir():
        raise InvalidInput(f"{directory} is not a directory", field="directory")
    for path in sorted(directory.glob(f"*/{SQLITE_FILE}")):
        try:
            check_namespace(path.parent.name)
        except InvalidInput:
            continue  # not a namespace graphmem would open
        yield path


def _copy(source: Path, target: Path) -> None:
    """``source`` as of one commit into ``target`` (written beside it, flushed, then renamed)."""
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        with (
            closing(sqlite3.connect(f"file:{source}?mode=ro", uri=True, timeout=30)) as src,
            closing(sqlite3.connect(private_file(partial))) as dst,
        ):
            src.backup(dst)  # every page in one step: a consistent copy
            dst.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
    except sqlite3.Error as exc:
        partial.unlink(missing_ok=True)
        raise StorageError(f"cannot copy {source}: {exc}") from exc
    with partial.open("rb") as written:
        os.fsync(written.fileno())
    partial.replace(target)
