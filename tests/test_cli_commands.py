"""The CLI contract: JSON shapes, exit codes and messages, and the time scenario end to end."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from graphmem.cli import main

GRAPHMEM = str(Path(sys.executable).parent / "graphmem")


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def run(data: Path, *args: str, ok: bool = True) -> Done:
    """The console entry point, in-process (as the installed `graphmem` script runs it)."""
    argv = ["graphmem", "--data-dir", str(data), "--embedder", "hash", *args]
    out, err, code = _invoke(argv)
    if ok:
        assert code == 0, err
    return Done(code, out, err)


def _invoke(argv: list[str]) -> tuple[str, str, int]:
    stdout, stderr = io.StringIO(), io.StringIO()
    old_argv = sys.argv
    sys.argv = argv
    code = 0
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old_argv
    return stdout.getvalue(), stderr.getvalue(), code


@pytest.mark.integration
def test_the_installed_script_reports_errors_with_a_code_and_exit_status_1(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [GRAPHMEM, "--data-dir", str(tmp_path), "--embedder", "hash", "get", "nope"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.startswith("error [NOT_FOUND]")


def test_the_berlin_paris_scenario_through_the_cli(tmp_path: Path) -> None:
    berlin = json.loads(run(tmp_path, "store", "Alice lives in Berlin", "--entity", "alice",
                            "--key", "city", "--value", "Berlin", "--valid-from", "2020-01-01",
                            "--json").stdout)  # fmt: skip
    assert berlin["action"] == "ADD" and berlin["fact"]["valid_from"] == "2020-01-01T00:00:00Z"
    paris = json.loads(run(tmp_path, "store", "Alice lives in Paris", "--entity", "alice",
                           "--key", "city", "--value", "Paris", "--valid-from", "2023-06-01",
                           "--json").stdout)  # fmt: skip
    assert paris["action"] == "UPDATE"
    hits = json.loads(run(tmp_path, "search", "where does alice live", "--json").stdout)
    assert [h["fact"]["text"] for h in hits] == ["Alice lives in Paris"]
    assert set(hits[0]) >= {"fact", "score"}
    old = json.loads(run(tmp_path, "search", "alice", "--as-of", "2021-01-01", "--json").stdout)
    assert [h["fact"]["text"] for h in old] == ["Alice lives in Berlin"]
    looked = json.loads(run(tmp_path, "lookup", "Alice", "--key", "city", "--json").stdout)
    assert [f["value"] for f in looked] == ["Paris"]
    chain = json.loads(run(tmp_path, "history", paris["fact"]["id"], "--json").stdout)
    assert [f["value"] for f in chain] == ["Berlin", "Paris"]
    got = json.loads(run(tmp_path, "get", berlin["fact"]["id"], "--as-of", "2021-01-01",
                         "--json").stdout)  # fmt: skip
    assert got["id"] == berlin["fact"]["id"]
    run(tmp_path, "forget", paris["fact"]["id"])
    missing = run(tmp_path, "get", paris["fact"]["id"], ok=False)
    assert missing.returncode == 1 and "error [NOT_FOUND]" in missing.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["store", ""], "text"),
        (["store", "x", "--importance", "2"], "importance"),
        (["store", "x", "--decay-class", "forever"], "decay class"),
        (["store", "x", "--valid-from", "not a date"], "cannot parse"),
        (["store", "x", "--supersedes", "no-such-id"], "NOT_FOUND"),
        (["search", "x", "--as-of", "soon"], "cannot parse"),
        (["history", "no-such-id"], "NOT_FOUND"),
    ],
)
def test_bad_input_exits_non_zero_with_a_message_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = run(tmp_path, *args, ok=False)
    assert done.returncode == 1
    assert message in done.stderr and done.stderr.startswith("error [")
    assert json.loads(run(tmp_path, "stats", "--json").stdout)["facts"] == 0


def test_export_import_prune_check_and_namespaces(tmp_path: Path) -> None:
    run(tmp_path / "a", "store", "Scratch note", "--decay-class", "ephemeral")
    run(tmp_path / "a", "-n", "other", "store", "Only in the other namespace")
    found = json.loads(run(tmp_path / "a", "search", "namespace", "--mode", "fts", "--json").stdout)
    assert found == []
    dump = tmp_path / "dump.jsonl"
    run(tmp_path / "a", "export", str(dump))
    imported = json.loads(run(tmp_path / "b", "import", str(dump), "--json").stdout)
    assert imported == {"facts": 1, "links": 0, "skipped_existing": 0}
    again = run(tmp_path / "b", "export").stdout
    assert again == dump.read_text()
    report = json.loads(run(tmp_path / "b", "prune", "--dry-run", "--json").stdout)
    assert report == {"expired": 0, "decayed": 0, "low_confidence": 0, "dry_run": True}
    assert run(tmp_path / "b", "check").stdout.strip() == "ok"
    stats = json.loads(run(tmp_path / "b", "stats", "--json").stdout)
    assert stats["by_decay_class"]["ephemeral"] == 1 and len(stats["by_decay_class"]) == 9
