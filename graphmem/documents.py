"""Documents: markdown files as a source of memory, kept in step with the files on disk.

The files are the source of truth; memory holds an index of them. ``Memory.sync_files``:

1. compares each file's SHA-256 with its last sync's: an unchanged file costs nothing;
2. writes a new or changed file, in one transaction, as a ``document`` episode (id: its absolute
   path) whose facts are its chunks (:func:`chunk_markdown`), each superseding the old chunk at
   its position (``Writer.sync_document``);
3. forgets the chunks of a file gone from a synced folder, and drops its record.

A chunk's ``source`` is ``{path}:{first line}-{last line}``, so :func:`read_lines` gives back the
lines a hit came from, from the file the sync read and no other:

- files are opened without following any symbolic link (:func:`_open_file`);
- a file with more than one name (a hard link: its link count above 1) is neither synced nor
  read back, since its other name may be anywhere, another namespace's database included;
- a sync records the file's device and inode numbers (``DocumentFile.inode``), and read-back
  refuses another file at that path (a link or a rename put there, an editor's save to a new
  file) until a sync records it: NotFound saying to sync again. So does a record from before
  graphmem recorded them; the next sync records them, unchanged or not. (A file system gives
  a deleted file's inode number to a later file: a file made after the synced one was deleted
  may get it, and is read back; it has no other name.)
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from .errors import InvalidInput, NotFound
from .jsonform import NOT_SHOWN, json_fields
from .limits import MAX_DOCUMENT_BYTES, MAX_FIELD_LENGTH, MAX_READ_LINES, MAX_SYNC_PATHS
from .temporal import to_iso

#: The file names ``sync_files`` indexes.
MARKDOWN_SUFFIXES: Final = (".md", ".markdown")
#: A chunk's target size and the overlap carried into the next one, in tokens of about
#: ``CHARS_PER_TOKEN`` characters.
CHUNK_TOKENS: Final = 400
OVERLAP_TOKENS: Final = 80
CHARS_PER_TOKEN: Final = 4
#: The episode kind of a document.
KIND: Final = "document"

#: How a document is opened: a symbolic link is refused (ELOOP), a FIFO does not block the
#: open, a terminal does not become the process's.
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: How each folder on the way is opened: only to look up the next name in it (``O_PATH`` needs
#: no read permission, as a path lookup needs none), never through a link.
_FOLDER_FLAGS: Final = (
    getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
)

#: Why a file is refused: it has other names; it is not the file its sync read; its record
#: does not say which file that was.
_HARD_LINK: Final = "a hard link (the file has another name, which may be anyone's file)"
_REPLACED: Final = (
    "it is another file than the one synced (replaced, or a link to another file): sync it "
    "again to read it back"
)
_UNRECORDED: Final = (
    "it was synced before graphmem recorded which file it is: sync it again to read it back"
)

_HEADING: Final = re.compile(r"^ {0,3}#{1,6}(?:\s|$)")
_FENCE: Final = re.compile(r"^ {0,3}(```|~~~)")
_NAME_DATE: Final = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


@dataclass(frozen=True, slots=True)
class Chunk:
    """Lines ``start`` to ``end`` of a file (1-based, inclusive) and their text."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class DocumentFile:
    """What memory recorded of a file at its last sync."""

    path: str
    hash: str
    mtime: float
    size: int
    chunks: int
    synced_at: float
    #: Loaded by an import and not synced on this machine since: not read back (the path is
    #: another machine's) until a sync here finds the file.
    imported: bool = False
    #: Which file the sync read: its device and inode numbers (``"2049:1234"``); read-back
    #: opens that file only. None: recorded by an import, or before graphmem recorded it. Left
    #: out of the JSON form: only read-back on this machine uses it.
    inode: str | None = field(default=None, metadata=NOT_SHOWN)

    def to_dict(self) -> dict[str, Any]:
        return json_fields(self, mtime=to_iso(self.mtime), synced_at=to_iso(self.synced_at))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A file as one sync read it: its text and the hash, time and size of those bytes."""

    path: str
    text: str
    hash: str
    mtime: float
    size: int
    #: The file's device and inode numbers (see ``DocumentFile.inode``).
    inode: str

    @property
    def date(self) -> float | None:
        """The date its name carries (daily notes: ``2024-05-01.md``), as epoch seconds."""
        return name_date(self.path)


@dataclass
class SyncReport:
    """What one ``sync_files`` did, by path: added, changed, removed and unchanged files, the
    chunks it wrote, and the files it skipped with the reason (unreadable, not UTF-8 text,
    changed while read, too large)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    chunks: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return json_fields(self, skipped=[{"path": p, "reason": r} for p, r in self.skipped])


@dataclass(frozen=True, slots=True)
class Plan:
    """The markdown files a sync reads (absolute, sorted) and the scopes it answers for: a
    recorded document under a scope that is not among ``files`` has gone."""

    files: list[Path]
    scopes: list[str]
    #: Named paths not on disk: their recorded documents have gone (none recorded: an error).
    missing: list[str]


def plan(paths: Sequence[str | os.PathLike[str]], root: str | os.PathLike[str] | None) -> Plan:
    """The files and scopes of a sync of ``paths``. InvalidInput, before anything is read, for
    no paths, too many, a named file that is not markdown, a path that neither exists nor was
    synced before (``missing``: the caller checks), or one outside ``root``."""
    if isinstance(paths, str | bytes | os.PathLike) or not paths:
        raise InvalidInput("sync_files takes a list of one or more paths", field="paths")
    if len(paths) > MAX_SYNC_PATHS:
        raise InvalidInput(f"at most {MAX_SYNC_PATHS} paths per sync", field="paths")
    base = None if root is None else resolved(root, "root")
    if base is not None and not base.is_dir():
        raise InvalidInput(f"root {str(root)!r} is not a folder", field="root")
    files: dict[Path, None] = {}
    scopes: list[str] = []
    missing: list[str] = []
    for given in paths:
        if not isinstance(given, str | os.PathLike) or not str(given).strip():
            raise InvalidInput("each path must be a non-empty path", field="paths")
        path = resolved(given, "paths")
        if base is not None and not path.is_relative_to(base):
            raise InvalidInput(f"{str(given)!r} is outside the root {str(base)!r}", field="paths")
        scopes.append(str(path))
        if path.is_dir():
            files.update((p, None) for p in _markdown_under(path, base or path))
        elif not path.exists():
            missing.append(str(path))
        elif path.suffix.lower() in MARKDOWN_SUFFIXES:
            files[path] = None
        else:
            raise InvalidInput(
                f"{str(given)!r} is not a markdown file ({', '.join(MARKDOWN_SUFFIXES)})",
                field="paths",
            )
    return Plan(sorted(files), scopes, missing)


def under(path: str, scope: str) -> bool:
    """Whether ``path`` is ``scope`` or inside it."""
    return path == scope or path.startswith(scope.rstrip(os.sep) + os.sep)


def checked_path(value: str | os.PathLike[str], name: str) -> str:
    """``value`` as a string, if it can be a synced file's path; InvalidInput naming ``name``
    for a NUL or a character UTF-8 cannot encode (a lone surrogate): no file memory records
    has such a path, and the file system or the store would fail on it."""
    text = os.fspath(value) if isinstance(value, str | os.PathLike) else value
    if not isinstance(text, str):
        raise InvalidInput(f"{name} must be a path", field=name)
    if "\x00" in text:
        raise InvalidInput(f"{name} must not hold a NUL character", field=name)
    if not _utf8(text):
        raise InvalidInput(f"{name} must be UTF-8 text (it holds a lone surrogate)", field=name)
    return text


def resolved(value: str | os.PathLike[str], name: str) -> Path:
    """The absolute path ``value`` names, links followed (``~`` expanded): how a path given is
    matched with the paths syncs record. InvalidInput naming ``name`` as ``checked_path``; a
    link loop or a link changed while followed leaves the path as given, made absolute."""
    path = os.path.expanduser(checked_path(value, name))
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # RuntimeError: a loop (Python 3.11)
        return Path(os.path.abspath(path))


def is_document_path(path: object) -> bool:
    """Whether ``path`` can be a synced file's: absolute and normalised, UTF-8 without a NUL,
    with a markdown suffix (what an import checks a file record's path is)."""
    return (
        isinstance(path, str)
        and "\x00" not in path
        and _utf8(path)
        and os.path.isabs(path)
        and os.path.normpath(path) == path
        and path.lower().endswith(MARKDOWN_SUFFIXES)
    )


def read(path: Path) -> Snapshot | str:
    """The file's text with the hash, time and size of the bytes read, or why it is skipped."""
    if not _utf8(str(path)):
        return "its path is not UTF-8"
    if len(str(path)) > MAX_FIELD_LENGTH - 24:
        return f"its path is longer than {MAX_FIELD_LENGTH - 24} characters"
    try:
        data, before, after = _load(str(path))
    except _Refused as refused:
        return refused.reason
    if (before.st_mtime_ns, before.st_size) != (after.st_mtime_ns, after.st_size) or len(
        data
    ) != after.st_size:
        return "changed while it was read; sync again"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "not UTF-8 text"
    if "\x00" in text:
        return "binary content (NUL bytes)"
    return Snapshot(
        str(path),
        text.removeprefix("\ufeff"),
        hashlib.sha256(data).hexdigest(),
        after.st_mtime,
        after.st_size,
        inode_of(after),
    )


def inode_of(status: os.stat_result) -> str:
    """A file's device and inode numbers, as ``DocumentFile.inode`` records them."""
    return f"{status.st_dev}:{status.st_ino}"


def lines_of(text: str) -> list[str]:
    """The file's lines as an editor numbers them (line n is item n-1), without their ends."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def chunk_markdown(
    text: str, *, tokens: int = CHUNK_TOKENS, overlap: int = OVERLAP_TOKENS
) -> list[Chunk]:
    """Line-based chunks of about ``tokens`` tokens, the last ``overlap`` tokens of lines of one
    chunk repeated at the start of the next; a heading (outside a code fence) starts a new chunk
    without overlap; a line longer than a chunk is cut into pieces of that size. Blank lines at
    a chunk's edges are left out of it and of its line range."""
    size, carry = tokens * CHARS_PER_TOKEN, overlap * CHARS_PER_TOKEN
    chunks: list[Chunk] = []
    current: list[tuple[int, str]] = []
    length = 0
    fenced = False

    def emit() -> None:
        body = list(current)
        while body and not body[0][1].strip():
            body.pop(0)
        while body and not body[-1][1].strip():
            body.pop()
        if body:
            chunks.append(Chunk(body[0][0], body[-1][0], "\n".join(s for _, s in body)))

    for number, line in enumerate(lines_of(text), start=1):
        heading = not fenced and bool(_HEADING.match(line))
        if _FENCE.match(line):
            fenced = not fenced
        pieces = [line[i : i + size] for i in range(0, len(line), size)] or [""]
        for n, piece in enumerate(pieces):
            if n == 0 and heading and any(s.strip() and not _HEADING.match(s) for _, s in current):
                emit()
                current, length = [], 0
            elif current and length + len(piece) + 1 > size:
                emit()
                kept: list[tuple[int, str]] = []
                total = 0
                for entry in reversed(current[1:]):
                    if total + len(entry[1]) + 1 > carry:
                        break
                    kept.insert(0, entry)
                    total += len(entry[1]) + 1
                current, length = kept, total
            current.append((number, piece))
            length += len(piece) + 1
    emit()
    return chunks


def source_of(path: str, chunk: Chunk) -> str:
    """A chunk's fact ``source``: the file's path and the chunk's line range."""
    return f"{path}:{chunk.start}-{chunk.end}"


def name_date(path: str) -> float | None:
    """The date a file's name carries (``YYYY-MM-DD``), as epoch seconds, if a real date."""
    found = _NAME_DATE.search(Path(path).name)
    if found is None:
        return None
    try:
        year, month, day = (int(g) for g in found.groups())
        moment = datetime(year, month, day, tzinfo=UTC)
    except ValueError:
        return None
    return moment.timestamp()


def read_lines(recorded: DocumentFile | None, path: str, start: int, end: int | None) -> str:
    """Lines ``start`` to ``end`` (1-based, inclusive; None: to the end, at most
    ``MAX_READ_LINES``) of a synced file as it is on disk now. NotFound for a file no sync on
    this machine recorded (only synced files can be read back; an imported record is not), or
    one gone, now a symbolic link (or under one), not a regular file, a hard link, or another
    file than the one the sync read (or recorded before its inode was); InvalidInput for a bad
    range, one starting past the end of the file, or a file grown past ``MAX_DOCUMENT_BYTES``."""
    for name, value in (("start", start), ("end", end)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidInput(f"{name} must be a line number", field=name)
    if start < 1:
        raise InvalidInput("start must be 1 or more (lines count from 1)", field="start")
    last = start + MAX_READ_LINES - 1 if end is None else end
    if last < start:
        raise InvalidInput("end must not be before start", field="end")
    if last - start + 1 > MAX_READ_LINES:
        raise InvalidInput(f"at most {MAX_READ_LINES} lines per read", field="end")
    if recorded is None:
        raise NotFound(f"{path!r} is not a synced document (see sync_files)")
    if recorded.imported:
        raise NotFound(
            f"{path!r} was recorded by an import, not by a sync on this machine: sync it on "
            "this machine to read it back"
        )
    try:
        data, _, _ = _load(recorded.path, recorded)
    except _TooLarge as refused:
        raise InvalidInput(f"{path!r} is {refused.reason} (see sync_files)", field="path") from None
    except _Refused as refused:
        raise NotFound(f"{path!r} can no longer be read: {refused.reason}") from None
    text = data.decode("utf-8", errors="replace")
    lines = lines_of(text.removeprefix("\ufeff"))
    if start > len(lines):
        raise InvalidInput(f"{path!r} has {len(lines)} lines; start is {start}", field="start")
    return "\n".join(lines[start - 1 : last])


class _Refused(Exception):
    """Why a file is not opened or read (a sync's reason to skip it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _TooLarge(_Refused):
    """The file is larger than ``MAX_DOCUMENT_BYTES``."""


def _load(
    path: str, recorded: DocumentFile | None = None
) -> tuple[bytes, os.stat_result, os.stat_result]:
    """The bytes of the markdown file at ``path`` (absolute, normalised) with its status before
    and after they were read. _Refused if it is no such file, if it or a folder on its path is
    a symbolic link, if it is not a regular file, if it has another name (a hard link) or, for
    a read-back of ``recorded``, if it is not the file that record's sync read; _TooLarge past
    ``MAX_DOCUMENT_BYTES`` (at most one byte more is read, whatever its size says). Nothing is
    read from a file refused."""
    if not path.lower().endswith(MARKDOWN_SUFFIXES):
        raise _Refused("not a markdown file")
    with open(_open_file(path), "rb") as file:
        before = os.fstat(file.fileno())
        if not stat.S_ISREG(before.st_mode):
            raise _Refused("not a regular file")
        if before.st_nlink > 1:
            raise _Refused(_HARD_LINK)
        if recorded is not None and recorded.inode != inode_of(before):
            raise _Refused(_UNRECORDED if recorded.inode is None else _REPLACED)
        if before.st_size > MAX_DOCUMENT_BYTES:
            raise _TooLarge(f"larger than {MAX_DOCUMENT_BYTES:,} bytes")
        data = file.read(MAX_DOCUMENT_BYTES + 1)
        after = os.fstat(file.fileno())
    if len(data) > MAX_DOCUMENT_BYTES:
        raise _TooLarge(f"larger than {MAX_DOCUMENT_BYTES:,} bytes")
    return data, before, after


def _open_file(path: str) -> int:
    """A descriptor of ``path`` opened without following a symbolic link anywhere on it: each
    folder from the root is opened in the one before (``openat``), none of them a link, so a
    link swapped in for any of them while the path is walked is refused, never followed."""
    names = path.split(os.sep)
    if not os.path.isabs(path) or any(n in ("", ".", "..") for n in names[1:]):
        raise _Refused("not an absolute, normalised path")
    try:
        folder = os.open(os.sep, _FOLDER_FLAGS)
    except OSError as e:
        raise _Refused(f"unreadable: {e.strerror or e}") from None
    try:
        for name in names[1:-1]:
            try:
                inner = os.open(name, _FOLDER_FLAGS, dir_fd=folder)
            except OSError as e:
                if e.errno in (errno.ENOTDIR, errno.ELOOP):  # a link (never followed), a file
                    raise _Refused(
                        f"{name!r} on its path is a symbolic link or not a folder"
                    ) from None
                raise _Refused(f"unreadable: {e.strerror or e}") from None
            os.close(folder)
            folder = inner
        try:
            return os.open(names[-1], _FILE_FLAGS, dir_fd=folder)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise _Refused("a symbolic link (links are not followed)") from None
            raise _Refused(f"unreadable: {e.strerror or e}") from None
    finally:
        os.close(folder)


def _utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8 (no lone surrogate, as a path of undecodable bytes
    holds)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _markdown_under(folder: Path, boundary: Path) -> Iterable[Path]:
    """The markdown files under ``folder``, skipping hidden folders and files and anything a
    link leads outside ``boundary``."""
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") or not name.lower().endswith(MARKDOWN_SUFFIXES):
                continue
            path = Path(top, name).resolve()
            if path.is_relative_to(boundary) and path.is_file():
                yield path
