"""Files graphmem writes are private: folders 0700, files 0600, whatever the umask; and the
name of the folder a namespace's vector index lives in."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

#: The mode of every file graphmem makes (namespace databases, the key file, backups, exports)
#: and of the folders that hold them: its owner's alone, whatever the process's umask lets
#: others have (SQLite gives a database's -wal and -shm files the database file's mode).
PRIVATE_FILE: Final = 0o600


PRIVATE_FOLDER: Final = 0o700

#: The vector index's directory inside a namespace's directory.
VECTOR_DIR: Final = "vectors"


def private_folder(path: Path) -> Path:
    """``path``, made if missing as a folder only its owner may open (PRIVATE_FOLDER; its
    missing parents as ``mkdir -p`` makes them). A folder that exists keeps its mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=PRIVATE_FOLDER, exist_ok=True)
    return path


def private_file(path: Path) -> Path:
    """``path``, made empty if missing with its owner's permissions alone (PRIVATE_FILE), before
    anything is written to it (SQLite opens an empty file as a new database). A file that
    exists keeps its mode."""
    with contextlib.suppress(FileExistsError):
        os.close(private_opener(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    return path


def private_opener(path: str, flags: int) -> int:
    """``os.open`` for ``open(..., opener=)``: a file it creates is PRIVATE_FILE."""
    return os.open(path, flags | os.O_CLOEXEC, PRIVATE_FILE)
