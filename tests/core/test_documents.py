"""Markdown notes as documents: chunked by lines, kept in step with the files, read back exactly."""

from __future__ import annotations

import dataclasses
import io
import itertools
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphmem.server.mcp import tools
from starlette.applications import Starlette

from graphmem import InvalidInput, KeyStore, Memory, NotFound, Settings, documents
from graphmem.cli import cli
from graphmem.documents import CHARS_PER_TOKEN, chunk_markdown, lines_of
from graphmem.limits import MAX_DOCUMENT_BYTES, MAX_READ_LINES

from ..support.clock import Clock
from ..support.graphql_clients import InProcess, bearer

pytestmark = pytest.mark.engines

DAILY = """# 2024-05-01

Met Bob about the graphmem launch.
We chose PostgreSQL for the scale-out mode.

## Lunch

Lunch was a margherita pizza at Da Michele.
"""


def _chunks(mem: Memory, path: Path) -> list[tuple[str | None, str]]:
    """The document's current chunks: (source, text), in order."""
    return [
        (f.source, f.text)
        for f in mem.episode_facts(str(path.resolve()))
        if f.valid_until is None and f.retracted_at is None
    ]


def _embedded(mem: Memory) -> int:
    """How many texts the embedder has been asked for so far."""
    return mem.stats().embedding_usage.inputs


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "2024-05-01.md").write_text(DAILY, encoding="utf-8")
    (folder / "MEMORY.md").write_text(
        "# Preferences\n\nThe user prefers dark mode and vim.\n", encoding="utf-8"
    )
    (folder / "todo.txt").write_text("not markdown: left alone\n", encoding="utf-8")
    hidden = folder / ".obsidian"
    hidden.mkdir()
    (hidden / "workspace.md").write_text("editor state\n", encoding="utf-8")
    return folder


# ------------------------------------------------------------------------------------ chunking


def test_chunks_follow_lines_start_at_headings_and_overlap_when_long() -> None:
    first, second = chunk_markdown(DAILY)
    assert (first.start, first.end) == (1, 4)  # the heading starts a chunk, blank edges dropped
    assert (second.start, second.end) == (6, 8)
    assert first.text == "\n".join(lines_of(DAILY)[0:4])

    # A long section: chunks of about 400 tokens, each repeating the last lines of the one before.
    long = "\n".join(f"Line {n}: " + "word " * 20 for n in range(1, 201))
    chunks = chunk_markdown(long)
    assert len(chunks) > 3
    assert all(len(c.text) <= 400 * CHARS_PER_TOKEN for c in chunks)
    assert chunks[0].start == 1 and chunks[-1].end == 200
    for before, after in itertools.pairwise(chunks):
        assert before.start < after.start <= before.end  # overlap, and progress
        overlap = lines_of(long)[after.start - 1 : before.end]
        assert 0 < len("\n".join(overlap)) <= 80 * CHARS_PER_TOKEN
    for c in chunks:  # every chunk is exactly its lines
        assert c.text == "\n".join(lines_of(long)[c.start - 1 : c.end])


def test_a_heading_inside_a_code_fence_does_not_split_and_long_lines_are_cut() -> None:
    text = "# Setup\n\nRun this:\n\n```sh\n# install\npip install graphmem\n```\n"
    assert [(c.start, c.end) for c in chunk_markdown(text)] == [(1, 8)]
    line = "x" * (400 * CHARS_PER_TOKEN * 2 + 10)
    pieces = chunk_markdown(f"intro\n{line}\n")
    assert all(len(c.text) <= 400 * CHARS_PER_TOKEN for c in pieces)
    assert "".join(c.text for c in pieces if c.start == c.end == 2).count("x") >= len(line)


# --------------------------------------------------------------------------------------- sync


def test_a_folder_syncs_its_markdown_files_as_documents_of_chunks(mem: Memory, notes: Path) -> None:
    report = mem.sync_files([notes])
    daily, memory_md = (str((notes / n).resolve()) for n in ("2024-05-01.md", "MEMORY.md"))
    assert report.added == [daily, memory_md]  # not todo.txt, not the hidden folder
    assert (report.changed, report.removed, report.unchanged, report.skipped) == ([], [], [], [])
    assert report.chunks == 3
    episode = mem.episode(daily)
    assert episode is not None and (episode.kind, episode.source) == ("document", daily)
    assert episode.time.isoformat() == "2024-05-01T00:00:00+00:00"  # the date in its name
    assert _chunks(mem, notes / "2024-05-01.md") == [
        (f"{daily}:1-4", "\n".join(DAILY.splitlines()[0:4])),
        (f"{daily}:6-8", "\n".join(DAILY.splitlines()[5:8])),
    ]
    facts = mem.episode_facts(daily)
    assert all(f.decay_class == "permanent" and f.expires_at is None for f in facts)
    assert facts[0].valid_from.isoformat().startswith("2024-05-01")  # as-of reads find notes
    # consecutive chunks are linked, newer -> older, like an episode's turns
    assert [
        (k.source_id, k.target_id, k.origin) for k in mem.links(facts[1].id, direction="OUT")
    ] == [(facts[1].id, facts[0].id, "episode")]
    hits = mem.search("what pizza was lunch", limit=1)
    assert hits and hits[0].fact.source == f"{daily}:6-8"
    assert [d.path for d in mem.documents()] == [daily, memory_md]
    assert [d.path for d in mem.documents(under=notes / "MEMORY.md")] == [memory_md]


def test_an_unchanged_file_costs_nothing_and_a_changed_one_embeds_only_what_changed(
    mem: Memory, notes: Path, clock: Clock
) -> None:
    mem.sync_files([notes])
    before = _embedded(mem)
    (notes / "MEMORY.md").touch()  # a new mtime, the same content
    again = mem.sync_files([notes])
    assert again.unchanged == [str((notes / n).resolve()) for n in ("2024-05-01.md", "MEMORY.md")]
    assert again.chunks == 0 and _embedded(mem) == before

    old = _chunks(mem, notes / "2024-05-01.md")
    lunch_id = mem.episode_facts(str((notes / "2024-05-01.md").resolve()))[1].id
    clock.advance(60)
    (notes / "2024-05-01.md").write_text(DAILY.replace("PostgreSQL", "SQLite"), encoding="utf-8")
    changed = mem.sync_files([notes])
    assert changed.changed == [str((notes / "2024-05-01.md").resolve())]
    assert changed.chunks == 2
    assert _embedded(mem) == before + 1  # the lunch chunk came from the embedding cache
    now = _chunks(mem, notes / "2024-05-01.md")
    assert [s for s, _ in now] == [s for s, _ in old] and "SQLite" in now[0][1]
    # the old version is history: superseded, still readable as memory knew it before
    lunch = mem.get(lunch_id, known_at=clock() - 30)
    assert lunch is not None and lunch.superseded_by is None
    assert all("PostgreSQL" not in h.fact.text for h in mem.search("PostgreSQL scale-out"))
    assert any(
        "PostgreSQL" in h.fact.text
        for h in mem.search("PostgreSQL scale-out", known_at=clock() - 30)
    )


def test_renamed_deleted_and_emptied_files(mem: Memory, notes: Path) -> None:
    mem.sync_files([notes])
    daily = notes / "2024-05-01.md"
    old_ids = [f.id for f in mem.episode_facts(str(daily.resolve()))]
    before = _embedded(mem)
    daily.rename(notes / "2024-05-01-standup.md")
    report = mem.sync_files([notes])
    assert report.removed == [str(daily.resolve())]
    assert report.added == [str((notes / "2024-05-01-standup.md").resolve())]
    assert _embedded(mem) == before  # a rename re-embeds nothing
    assert all(mem.get(i) is None for i in old_ids)  # forgotten, not erased:
    assert all(mem.get(i, known_at="2020-01-01") is None for i in old_ids)
    assert all(f.retracted_at is not None for f in mem.known_now(old_ids).values())
    assert [d.path for d in mem.documents()] == [
        str((notes / n).resolve()) for n in ("2024-05-01-standup.md", "MEMORY.md")
    ]

    (notes / "MEMORY.md").write_text("", encoding="utf-8")
    emptied = mem.sync_files([notes / "MEMORY.md"])
    assert emptied.changed == [str((notes / "MEMORY.md").resolve())] and emptied.chunks == 0
    assert _chunks(mem, notes / "MEMORY.md") == []

    (notes / "MEMORY.md").unlink()
    gone = mem.sync_files([notes / "MEMORY.md"])  # a named file that is gone
    assert gone.removed == [str((notes / "MEMORY.md").resolve())]
    with pytest.raises(InvalidInput, match="does not exist and was never synced"):
        mem.sync_files([notes / "MEMORY.md"])


def test_bad_paths_are_refused_before_anything_is_written(
    mem: Memory, notes: Path, tmp_path: Path
) -> None:
    for paths, message in [
        ([], "one or more paths"),
        ([notes / "todo.txt"], "not a markdown file"),
        ([notes / "nowhere.md"], "does not exist"),
        ([notes, tmp_path / "missing-folder"], "does not exist"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            mem.sync_files(paths)
    with pytest.raises(InvalidInput, match="outside the root"):
        mem.sync_files([tmp_path], root=notes)
    with pytest.raises(InvalidInput, match="paths"):
        mem.sync_files(str(notes))  # a string is not a list of paths
    assert mem.documents() == [] and mem.stats().facts == 0


def test_binary_unreadable_and_linked_out_files_are_skipped_with_the_reason(
    mem: Memory, notes: Path, tmp_path: Path
) -> None:
    (notes / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (notes / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    secret = tmp_path / "outside.md"
    secret.write_text("outside the folder\n", encoding="utf-8")
    (notes / "link.md").symlink_to(secret)
    locked = notes / "locked.md"
    locked.write_text("locked\n", encoding="utf-8")
    locked.chmod(0)
    try:
        report = mem.sync_files([notes])
    finally:
        locked.chmod(0o644)
    reasons = {Path(p).name: r for p, r in report.skipped}
    assert reasons["image.md"] == "not UTF-8 text"
    assert reasons["latin1.md"] == "not UTF-8 text"
    if os.geteuid() != 0:  # root reads any file
        assert reasons["locked.md"].startswith("unreadable")
    assert "link.md" not in {Path(p).name for p in report.added} and all(
        "outside" not in h.fact.text for h in mem.search("outside the folder")
    )
    assert len(report.added) == 2 + (os.geteuid() == 0)


def test_a_file_changing_while_read_is_skipped(
    mem: Memory, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_md = notes / "MEMORY.md"
    inode = memory_md.stat().st_ino

    class Growing:
        """A file that MEMORY.md grows under while it is read."""

        def __init__(self, fd: int, mode: str) -> None:
            self.file = open(fd, mode)  # noqa: SIM115 (closed by __exit__)

        def __enter__(self) -> Growing:
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

        def fileno(self) -> int:
            return self.file.fileno()

        def read(self, size: int) -> bytes:
            data = self.file.read(size)
            if os.fstat(self.file.fileno()).st_ino == inode:
                with memory_md.open("a", encoding="utf-8") as f:
                    f.write("a line written during the sync\n")
            return data

    monkeypatch.setattr(documents, "open", Growing, raising=False)
    report = mem.sync_files([notes])
    assert report.skipped == [(str(memory_md.resolve()), "changed while it was read; sync again")]
    monkeypatch.undo()
    assert mem.sync_files([notes]).added == [str(memory_md.resolve())]


def test_a_files_chunks_change_all_together_or_not_at_all(
    mem: Memory, notes: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mem.sync_files([notes])
    before = _chunks(mem, notes / "2024-05-01.md")
    (notes / "2024-05-01.md").write_text(DAILY + "\n## Evening\n\nA walk by the river.\n")
    from graphmem.storage.sql.store import SQLTransaction

    def fail(self: SQLTransaction, document: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(SQLTransaction, "put_document", fail)
    with pytest.raises(OSError, match="disk full"):
        mem.sync_files([notes])
    assert _chunks(mem, notes / "2024-05-01.md") == before
    monkeypatch.undo()
    assert mem.sync_files([notes]).changed == [str((notes / "2024-05-01.md").resolve())]
    assert len(_chunks(mem, notes / "2024-05-01.md")) == 3


# ---------------------------------------------------------------------------------- reading


def test_every_chunk_reads_back_exactly_from_its_source(mem: Memory, notes: Path) -> None:
    long = "# Journal\n\n" + "\n".join(f"Entry {n}: " + "note " * 15 for n in range(300)) + "\n"
    (notes / "journal.md").write_text(long, encoding="utf-8")
    mem.sync_files([notes])
    checked = 0
    for document in mem.documents():
        for fact in mem.episode_facts(document.path):
            assert fact.source is not None
            path, _, span = fact.source.rpartition(":")
            start, end = (int(n) for n in span.split("-"))
            lines = mem.read_lines(path, start, end)  # exactly the lines; the fact's text is
            assert lines.strip() == fact.text  # them without the whitespace at either end
            checked += 1
    assert checked > 8
    journal = notes / "journal.md"
    assert mem.read_lines(journal, 1, 1) == "# Journal"
    assert mem.read_lines(journal, 300, None).count("\n") == 2  # to the end: lines 300-302
    assert mem.read_lines(journal, 302, 999) == "Entry 299: " + "note " * 15


def test_only_synced_files_can_be_read_and_ranges_are_checked(
    mem: Memory, notes: Path, tmp_path: Path
) -> None:
    mem.sync_files([notes / "MEMORY.md"])
    with pytest.raises(NotFound, match="not a synced document"):
        mem.read_lines("/etc/passwd", 1, 1)
    with pytest.raises(NotFound, match="not a synced document"):
        mem.read_lines(notes / "2024-05-01.md", 1, 2)  # on disk, but never synced
    with pytest.raises(NotFound, match="not a synced document"):
        mem.read_lines(notes / ".." / "notes" / ".." / ".." / "etc" / "passwd", 1, 1)
    memory_md = notes / "MEMORY.md"
    for start, end, message in [
        (0, 1, "start must be 1"),
        (3, 2, "end must not be before start"),
        (1, MAX_READ_LINES + 1, "at most"),
        (9, 9, "has 3 lines"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            mem.read_lines(memory_md, start, end)
    memory_md.unlink()
    with pytest.raises(NotFound, match="can no longer be read"):
        mem.read_lines(memory_md, 1, 1)


def test_a_synced_file_swapped_for_a_symbolic_link_is_not_read_through_it(
    mem: Memory, notes: Path, tmp_path: Path
) -> None:
    mem.sync_files([notes])
    memory_md = notes / "MEMORY.md"
    [record] = mem.documents(under=memory_md)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "MEMORY.md").write_text("the server's secret\n", encoding="utf-8")
    memory_md.unlink()
    memory_md.symlink_to(outside / "MEMORY.md")
    with pytest.raises(NotFound, match="not a synced document"):
        mem.read_lines(memory_md, 1, 1)  # its path leads to a file no sync recorded
    with pytest.raises(NotFound, match="a symbolic link"):
        documents.read_lines(record, record.path, 1, 1)  # the record's path is not followed
    memory_md.unlink()
    notes.rename(tmp_path / "notes.real")
    notes.symlink_to(outside)  # a folder on the path swapped for a link to another folder
    with pytest.raises(NotFound, match="not a synced document"):
        mem.read_lines(memory_md, 1, 1)
    with pytest.raises(NotFound, match="'notes' on its path is a symbolic link"):
        documents.read_lines(record, record.path, 1, 1)


def _other_tenants_database(folder: Path) -> Path:
    """A SQLite database holding another tenant's secret, as another namespace's file is."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "graphmem.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE facts (text TEXT)")
        conn.execute("INSERT INTO facts VALUES ('the other tenant''s secret')")
    conn.close()
    return path


def test_a_synced_note_swapped_for_a_hard_link_to_another_file_is_refused_for_a_reader(
    app: Starlette, settings: Settings, clock: Clock, keys: KeyStore, notes: Path, tmp_path: Path
) -> None:
    """A hard link is the file itself under a second name: it was read back as the note, so a
    read-only key of one namespace read another namespace's SQLite file."""
    memory_md = notes / "MEMORY.md"
    with Memory.open(settings=settings, clock=clock) as mem:
        mem.sync_files([memory_md])
        other = _other_tenants_database(tmp_path / "elsewhere" / "other")
        memory_md.unlink()
        os.link(other, memory_md)
        with pytest.raises(NotFound, match="a hard link"):
            mem.read_lines(memory_md, 1, 5)
        assert mem.sync_files([memory_md]).skipped == [(str(memory_md), documents._HARD_LINK)]
    reader, _ = keys.create(["default"], read_only=True)
    query = "query($p: String!) { documentLines(path: $p) }"
    with InProcess(app) as api:
        status, body = api.post(query, {"p": str(memory_md)}, bearer(reader))
    assert status == 200 and body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
    assert "hard link" in body["errors"][0]["message"] and "secret" not in json.dumps(body)


def test_a_synced_note_replaced_by_another_file_is_read_back_only_after_the_next_sync(
    mem: Memory, notes: Path, tmp_path: Path
) -> None:
    """Read-back opens the file the sync read (its device and inode), not whatever is at its
    path now: another file moved there, or an editor's save to a new file, waits for a sync."""
    memory_md = notes / "MEMORY.md"
    mem.sync_files([memory_md])
    assert mem.read_lines(memory_md, 1, 1) == "# Preferences"
    # Both made while the note exists, so that neither reuses its inode number once it is gone.
    other = _other_tenants_database(tmp_path / "elsewhere" / "other")
    saved = tmp_path / "saved.md"  # an editor's save: the same text, in a new file
    saved.write_text("# Preferences\n\nThe user prefers dark mode and vim.\n", encoding="utf-8")
    other.replace(memory_md)  # one name only: a rename, not a link
    with pytest.raises(NotFound, match="another file than the one synced") as refused:
        mem.read_lines(memory_md, 1, 5)
    assert "secret" not in refused.value.message
    saved.replace(memory_md)
    with pytest.raises(NotFound, match="sync it again"):
        mem.read_lines(memory_md, 1, 1)
    report = mem.sync_files([memory_md])
    assert report.unchanged == [str(memory_md)] and report.chunks == 0  # nothing re-indexed
    assert mem.read_lines(memory_md, 1, 1) == "# Preferences"


def test_a_note_with_another_name_is_not_synced(mem: Memory, notes: Path, tmp_path: Path) -> None:
    """Its other name may be anywhere, another tenant's file included: it is skipped, saying
    why, and a synced note given a second name later is no longer read back."""
    memory_md, daily = notes / "MEMORY.md", notes / "2024-05-01.md"
    os.link(daily, tmp_path / "second-name.md")
    report = mem.sync_files([notes])
    assert report.added == [str(memory_md)]
    assert report.skipped == [(str(daily), documents._HARD_LINK)]
    os.link(memory_md, tmp_path / "another-name.md")
    with pytest.raises(NotFound, match="a hard link"):
        mem.read_lines(memory_md, 1, 1)


def test_a_record_synced_before_inodes_were_recorded_is_read_back_after_the_next_sync(
    mem: Memory, notes: Path
) -> None:
    memory_md = notes / "MEMORY.md"
    mem.sync_files([memory_md])
    [record] = mem.documents()
    with mem._store.transaction() as tx:  # as migration 23 leaves a record made before it
        tx.put_document(dataclasses.replace(record, inode=None))
    with pytest.raises(NotFound, match="synced before graphmem recorded which file it is"):
        mem.read_lines(memory_md, 1, 1)
    assert mem.sync_files([memory_md]).unchanged == [str(memory_md)]
    assert mem.read_lines(memory_md, 1, 1) == "# Preferences"


@pytest.mark.parametrize("swapped", ["the file", "a folder on its path"])
def test_a_link_swapped_in_while_reading_never_reads_what_it_points_to(
    mem: Memory, notes: Path, tmp_path: Path, swapped: str
) -> None:
    """A thread swaps the synced note (or its folder) for a link to a secret and back for a
    second; no read in that time returns the secret (it was once read 219 times in 9,212)."""
    mem.sync_files([notes / "MEMORY.md"])
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "MEMORY.md").write_text("the server's secret\n", encoding="utf-8")
    memory_md = notes / "MEMORY.md"
    stop = threading.Event()

    def swap_the_file() -> None:
        note, link = tmp_path / "note.md", tmp_path / "link.md"
        while not stop.is_set():
            memory_md.rename(note)  # the synced file itself comes back: another one is refused
            link.symlink_to(outside / "MEMORY.md")
            link.replace(memory_md)
            note.replace(memory_md)
            stop.wait(0.0005)  # the real file stays a moment, so that some reads find it

    def swap_the_folder() -> None:
        real = tmp_path / "notes.real"
        while not stop.is_set():
            notes.rename(real)
            notes.symlink_to(outside)
            notes.unlink()
            real.rename(notes)
            stop.wait(0.0005)

    swapper = threading.Thread(
        target=swap_the_file if swapped == "the file" else swap_the_folder, daemon=True
    )
    swapper.start()
    read = refused = 0
    started = time.monotonic()
    try:
        # A second of swapping, and on a busy machine on until a read has found the note.
        while (elapsed := time.monotonic() - started) < 1.0 or (read == 0 and elapsed < 20):
            try:
                text = mem.read_lines(memory_md, 1, 1)
            except NotFound:
                refused += 1
            else:
                assert text == "# Preferences"
                read += 1
    finally:
        stop.set()
        swapper.join(timeout=10)
    assert read + refused > 100 and read > 0


def test_a_file_grown_past_the_sync_limit_is_refused_without_reading_it(
    mem: Memory, notes: Path
) -> None:
    mem.sync_files([notes])
    memory_md = notes / "MEMORY.md"
    os.truncate(memory_md, 1_500_000_000)  # sparse: no disk used
    started = time.monotonic()
    with pytest.raises(InvalidInput, match=f"larger than {MAX_DOCUMENT_BYTES:,} bytes") as refused:
        mem.read_lines(memory_md, 1, 2)
    assert refused.value.field == "path" and time.monotonic() - started < 1
    assert mem.sync_files([notes]).skipped == [
        (str(memory_md.resolve()), f"larger than {MAX_DOCUMENT_BYTES:,} bytes")
    ]


def test_a_nul_or_a_lone_surrogate_in_a_path_is_invalid_input_naming_it(
    mem: Memory, notes: Path
) -> None:
    mem.sync_files([notes])
    for bad in ("/etc/passwd\x00.md", "\ud83d.md", str(notes / "\udcff.md")):
        with pytest.raises(InvalidInput) as refused:
            mem.read_lines(bad, 1, 1)
        assert refused.value.field == "path"
        with pytest.raises(InvalidInput) as refused:
            mem.documents(under=bad)
        assert refused.value.field == "under"
        with pytest.raises(InvalidInput) as refused:
            mem.sync_files([bad])
        assert refused.value.field == "paths"


def test_a_record_of_a_file_no_sync_here_found_is_never_opened(
    mem: Memory, notes: Path, tmp_path: Path
) -> None:
    """An export can name any path: import refuses a file record that is not a markdown file's,
    and keeps one that is, but read-back opens it only after a sync on this machine."""
    secret = tmp_path / "outside" / "secret.md"
    secret.parent.mkdir()
    secret.write_text("the server's secret\n", encoding="utf-8")
    for path in ("/etc/passwd", str(mem.settings.data_dir), "notes/secret.md", "/a/../b.md"):
        with pytest.raises(InvalidInput, match="line 2: a file's path must be"):
            mem.import_jsonl(_export_of_file(path))
    mem.import_jsonl(_export_of_file(str(secret)))
    [record] = mem.documents()
    assert (record.path, record.imported) == (str(secret), True)
    with pytest.raises(NotFound, match="sync it on this machine"):
        mem.read_lines(secret, 1, 1)
    assert mem.sync_files([secret]).changed == [str(secret)]  # its hash was another file's
    [record] = mem.documents()
    assert not record.imported and mem.read_lines(secret, 1, 1) == "the server's secret"

    # A record of a file that is not markdown (no sync makes one) is not opened either.
    with mem._store.transaction() as tx:
        tx.put_document(documents.DocumentFile("/etc/passwd", "0" * 64, 0.0, 1, 0, tx.now))
    with pytest.raises(NotFound, match="not a markdown file"):
        mem.read_lines("/etc/passwd", 1, 1)


def test_an_imported_file_record_opens_nothing_for_a_read_only_key(
    app: Starlette, settings: Settings, clock: Clock, keys: KeyStore, tmp_path: Path
) -> None:
    secret = tmp_path / "outside" / "secret.md"
    secret.parent.mkdir()
    secret.write_text("the server's secret\n", encoding="utf-8")
    with Memory.open(settings=settings, clock=clock) as mem:
        mem.import_jsonl(_export_of_file(str(secret)))
    reader, _ = keys.create(["default"], read_only=True)
    query = "query($p: String!) { documents { path } documentLines(path: $p) }"
    with InProcess(app) as api:
        status, body = api.post(query, {"p": str(secret)}, bearer(reader))
        assert status == 200 and body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
        assert "sync it on this machine" in body["errors"][0]["message"]
        assert "the server's secret" not in json.dumps(body)
        for bad in ("/etc/passwd\x00.md", "\ud83d"):  # JSON escapes: \u0000, \ud83d
            sent = json.dumps({"query": query, "variables": {"p": bad}}).encode("ascii")
            headers = {"Content-Type": "application/json", **bearer(reader)}
            answer = api.request("POST", "/graphql", content=sent, headers=headers)
            assert answer.status_code == 200
            assert answer.json()["errors"][0]["extensions"]["code"] == "INVALID_INPUT"


def _export_of_file(path: str) -> list[str]:
    """An export holding one file record, for ``path``."""
    header = {"kind": "header", "format": "graphmem-export", "version": 1, "namespace": "default"}
    at = "2026-01-01T00:00:00+00:00"
    record = {"kind": "file", "path": path, "hash": "0" * 64, "mtime": at, "size": 1}
    return [json.dumps(header), json.dumps({**record, "chunks": 0, "synced_at": at})]


# ------------------------------------------------------------------------ erasure and transfer


def test_a_purge_by_the_files_path_erases_its_chunks_and_the_next_sync_reindexes_it(
    mem: Memory, notes: Path
) -> None:
    mem.sync_files([notes])
    daily = str((notes / "2024-05-01.md").resolve())
    report = mem.purge(source=daily)
    assert (report.facts, report.episodes) == (2, 1)
    assert mem.episode(daily) is None and [d.path for d in mem.documents()] == [
        str((notes / "MEMORY.md").resolve())
    ]
    assert mem.sync_files([notes]).added == [daily]  # the file is the source of truth


def test_export_and_import_keep_the_documents(mem: Memory, notes: Path, tmp_path: Path) -> None:
    mem.sync_files([notes])
    out = io.StringIO()
    mem.export_jsonl(out)
    files = [json.loads(x) for x in out.getvalue().splitlines() if '"kind": "file"' in x]
    assert [f["path"] for f in files] == [d.path for d in mem.documents()]
    with Memory.open(tmp_path / "copy", settings=Settings(embedder="hash")) as copy:
        copy.import_jsonl(io.StringIO(out.getvalue()))
        assert [(d.path, d.hash, d.size, d.chunks) for d in copy.documents()] == [
            (d.path, d.hash, d.size, d.chunks) for d in mem.documents()
        ]
        again = io.StringIO()
        copy.export_jsonl(again)
        assert again.getvalue() == out.getvalue()  # the import's mark is not exported
        with pytest.raises(NotFound, match="sync it on this machine"):
            copy.read_lines(notes / "MEMORY.md", 1, 1)  # imported: not read back yet
        assert copy.sync_files([notes]).unchanged == [d.path for d in mem.documents()]
        assert copy.read_lines(notes / "MEMORY.md", 1, 1) == "# Preferences"


# -------------------------------------------------------------------------------- interfaces


def test_the_cli_syncs_and_reads(data_dir: Path, notes: Path) -> None:
    def gm(*args: str) -> str:
        result = CliRunner().invoke(
            cli, ["--data-dir", str(data_dir), *args], env={"GRAPHMEM_EMBEDDER": "hash"}
        )
        assert result.exit_code == 0, result.output
        return result.output

    assert gm("sync", str(notes)).startswith("2 added, 0 changed, 0 removed, 0 unchanged")
    shown = json.loads(gm("sync", str(notes), "--json"))
    assert len(shown["unchanged"]) == 2 and shown["chunks"] == 0
    assert gm("read", str(notes / "2024-05-01.md"), "--lines", "3-4") == (
        "Met Bob about the graphmem launch.\nWe chose PostgreSQL for the scale-out mode.\n"
    )
    assert gm("read", str(notes / "2024-05-01.md"), "--lines", "8") == (
        "Lunch was a margherita pizza at Da Michele.\n"
    )
    bad = CliRunner().invoke(
        cli,
        ["--data-dir", str(data_dir), "read", str(notes / "MEMORY.md"), "--lines", "x-2"],
        env={"GRAPHMEM_EMBEDDER": "hash"},
    )
    assert isinstance(bad.exception, InvalidInput) and "--lines takes A-B" in str(bad.exception)


@pytest.mark.integration
def test_sync_watch_keeps_a_folder_in_step(data_dir: Path, notes: Path) -> None:
    env = {**os.environ, "GRAPHMEM_EMBEDDER": "hash", "GRAPHMEM_DATA_DIR": str(data_dir)}
    with subprocess.Popen(
        [str(Path(sys.executable).parent / "graphmem"), "sync", str(notes), "--watch"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as watcher:
        try:
            assert watcher.stdout is not None
            assert watcher.stdout.readline().startswith("2 added")
            time.sleep(0.5)  # the watcher is set up once the first sync has printed
            (notes / "2024-05-02.md").write_text("# Tuesday\n\nThe release went out.\n")
            line = watcher.stdout.readline()
            assert line.startswith("1 added, 0 changed, 0 removed, 2 unchanged"), line
        finally:
            watcher.terminate()
            watcher.wait(timeout=10)
    with Memory.open(data_dir, settings=Settings(embedder="hash")) as mem:
        assert str((notes / "2024-05-02.md").resolve()) in [d.path for d in mem.documents()]


def test_graphql_and_mcp_read_a_documents_lines(
    app: Starlette, settings: Settings, clock: Clock, notes: Path
) -> None:
    with Memory.open(settings=settings, clock=clock) as mem:
        mem.sync_files([notes])
        _, read = tools.read_lines(
            mem, tools.ReadArgs(path=str(notes / "2024-05-01.md"), start=3, end=4)
        )
        assert (
            read["text"]
            == "Met Bob about the graphmem launch.\nWe chose PostgreSQL for the scale-out mode."
        )
        assert (read["start"], read["end"]) == (3, 4)
    daily = str((notes / "2024-05-01.md").resolve())
    with InProcess(app) as api:
        found = api.data(
            """query($path: String!) {
                documents { path chunks }
                documentLines(path: $path, start: 8, end: 8)
                search(query: "margherita pizza", limit: 1) { fact { source } } }""",
            {"path": daily},
        )
        assert found["documents"][0] == {"path": daily, "chunks": 2}
        assert found["documentLines"] == "Lunch was a margherita pizza at Da Michele."
        assert found["search"] == [{"fact": {"source": f"{daily}:6-8"}}]
        status, body = api.post('{ documentLines(path: "/etc/passwd") }')
        assert status == 200 and body["errors"][0]["extensions"]["code"] == "NOT_FOUND"
