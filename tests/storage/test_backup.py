"""`graphmem backup` and `graphmem restore`: a consistent copy taken while writes go on, and a
restore that gives back the same memory (an identical export, the same search results)."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphmem import Conflict, Memory, Settings
from graphmem.cli import cli
from graphmem.storage.sqlite.backup import backup, restore
from graphmem.storage.sqlite.keys import KeyFile

from ..support.clock import Clock

SETTINGS = Settings(embedder="hash")
BATCH = 10


def _export(data: Path, namespace: str = "default") -> str:
    out = io.StringIO()
    with Memory.open(data, namespace=namespace, settings=SETTINGS) as mem:
        mem.export_jsonl(out)
    return out.getvalue()


def _run(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(cli, ["--embedder", "hash", *args, "--json"])
    assert result.exit_code == 0, result.output
    parsed: dict[str, object] = json.loads(result.stdout)
    return parsed


def test_a_backup_taken_while_writes_go_on_holds_whole_batches_up_to_one_commit(
    tmp_path: Path,
) -> None:
    data, copy, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    acknowledged: list[str] = []  # batch entities, in commit order
    stop = threading.Event()
    with Memory.open(data, settings=SETTINGS) as mem:

        def write() -> None:
            n = 0
            while not stop.is_set() and n < 2_000:
                entity = f"batch{n}"
                mem.store_many(
                    [
                        {
                            "text": f"Batch {n} line {i} of the ledger",
                            "entity": entity,
                            "key": f"line{i}",
                            "value": str(i),
                        }
                        for i in range(BATCH)
                    ]
                )
                acknowledged.append(entity)
                n += 1

        writer = threading.Thread(target=write)
        writer.start()
        while len(acknowledged) < 20:
            threading.Event().wait(0.01)
        before = list(acknowledged)
        backup(data, copy)
        stop.set()
        writer.join()
    assert len(acknowledged) > len(before)  # the writes went on around the backup
    restore(copy, restored)
    with Memory.open(restored, settings=SETTINGS) as mem:
        counts: dict[str, int] = {}
        for _, fact in mem.facts(first=1000).items:
            counts[fact.entity or ""] = counts.get(fact.entity or "", 0) + 1
        assert set(counts.values()) == {BATCH}  # no batch cut in half
        assert set(before) <= counts.keys() <= set(acknowledged)
        kept = [e for e in acknowledged if e in counts]
        assert kept == acknowledged[: len(kept)]  # a prefix of the commits: one moment in time
        assert mem.check().ok
    conn = sqlite3.connect(copy / "default" / "graphmem.sqlite3")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_restore_gives_an_identical_export_and_the_same_search_results(
    tmp_path: Path, clock: Clock
) -> None:
    data, copy, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    keys = KeyFile(data)
    token, _ = keys.create(["default", "team"])
    with Memory.open(data, settings=SETTINGS, clock=clock) as mem:
        berlin = mem.store("Ana lives in Berlin", entity="Ana", key="city", value="Berlin")
        clock.advance(3600)
        mem.store("Ana lives in Paris", entity="Ana", key="city", value="Paris")
        gone = mem.store("The old wifi password was hunter2").fact
        assert gone is not None and berlin.fact is not None
        mem.forget(gone.id)
        mem.store_many([{"text": f"Service {n} is deployed on Fridays"} for n in range(20)])
        before = [(h.fact.id, round(h.score, 6)) for h in mem.search("deployed service Ana")]
    with Memory.open(data, namespace="team", settings=SETTINGS, clock=clock) as mem:
        mem.store("The team meets on Mondays")
    assert _run("--data-dir", str(data), "backup", str(copy)) == {
        "namespaces": ["default", "team"],
        "destination": str(copy),
    }
    assert not (copy / "default" / "vectors").exists()
    report = _run("--data-dir", str(restored), "restore", str(copy))
    assert report == {"default": {"facts": 23, "check": True}, "team": {"facts": 1, "check": True}}
    for namespace in ("default", "team"):
        assert _export(restored, namespace) == _export(data, namespace)
    with Memory.open(restored, settings=SETTINGS, clock=clock) as mem:
        assert [
            (h.fact.id, round(h.score, 6)) for h in mem.search("deployed service Ana")
        ] == before
        assert [f.value for f in mem.history(berlin.fact.id)] == ["Berlin", "Paris"]
    assert KeyFile(restored).authenticate(token) is not None  # the keys came along


def test_restore_refuses_to_overwrite_a_namespace_unless_told_to(tmp_path: Path) -> None:
    data, copy = tmp_path / "data", tmp_path / "backup"
    with Memory.open(data, settings=SETTINGS) as mem:
        mem.store("Backed up fact")
    backup(data, copy)
    with Memory.open(data, settings=SETTINGS) as mem:
        mem.store("Written after the backup")
    try:
        restore(copy, data)
    except Conflict as exc:
        assert "--replace" in exc.message
    else:
        raise AssertionError("restore overwrote a namespace without --replace")
    restore(copy, data, replace=True)
    with Memory.open(data, settings=SETTINGS) as mem:
        assert [f.text for _, f in mem.facts().items] == ["Backed up fact"]
        assert mem.check().ok
    result = CliRunner().invoke(cli, ["--data-dir", str(data), "backup", str(copy)])
    assert result.exit_code != 0 and "not empty" in str(result.exception)


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX permissions")
def test_data_key_backup_and_export_files_are_readable_by_their_owner_alone(
    tmp_path: Path, clock: Clock
) -> None:
    data_dir = tmp_path / "data"
    umask = os.umask(0o022)  # the usual umask, which leaves new files readable by everyone
    try:
        with Memory.open(data_dir, settings=Settings(embedder="hash"), clock=clock) as mem:
            mem.store("Ana's phone is in the drawer")
            KeyFile(data_dir).create(["default"])
            backup(data_dir, tmp_path / "backup")
            restore(tmp_path / "backup", tmp_path / "restored")
            export = CliRunner().invoke(
                cli,
                ["--data-dir", str(data_dir), "export", str(tmp_path / "export.jsonl")],
                env={"GRAPHMEM_EMBEDDER": "hash"},
            )
            assert export.exit_code == 0, export.output
            namespace = data_dir / "default"
            files = [
                *namespace.glob("graphmem.sqlite3*"),  # with its -wal and -shm files
                namespace / "vectors.lock",
                data_dir / "_keys.sqlite",
                tmp_path / "backup" / "_keys.sqlite",
                tmp_path / "backup" / "default" / "graphmem.sqlite3",
                tmp_path / "restored" / "_keys.sqlite",
                tmp_path / "restored" / "default" / "graphmem.sqlite3",
                tmp_path / "export.jsonl",
            ]
            folders = [data_dir, namespace, namespace / "vectors", tmp_path / "backup"]
            folders += [tmp_path / "backup" / "default", tmp_path / "restored"]
            folders += [tmp_path / "restored" / "default"]
            modes = {
                p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in files
            }
            assert {
                "data/default/graphmem.sqlite3-wal",
                "data/default/graphmem.sqlite3-shm",
            } <= set(modes)
            assert modes == dict.fromkeys(modes, 0o600)
            modes = {
                p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.stat().st_mode) for p in folders
            }
            assert modes == dict.fromkeys(modes, 0o700)
    finally:
        os.umask(umask)
