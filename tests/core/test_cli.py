"""The `graphmem` command line, driven in-process with click's CliRunner (successes), through
its console entry point ``graphmem.server.commands.main`` (errors: "error [CODE]: message", exit 1),
and a few times as the installed script in a subprocess. Always on the hash embedder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from graphmem.server.commands import cli as installed_cli
from graphmem.server.commands import main

from graphmem import Memory, Settings
from graphmem.cli import cli
from graphmem.decay import DAY, DECAY_CLASSES

HASH_ENV = {"GRAPHMEM_EMBEDDER": "hash"}


def _script() -> str:
    beside = Path(sys.executable).parent / "graphmem"
    found = str(beside) if beside.exists() else shutil.which("graphmem")
    assert found, "the graphmem console script is not installed"
    return found


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str


Gm = Callable[..., Any]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def gm(data: Path) -> Gm:
    """Run a command that must succeed; returns its parsed JSON if it printed JSON, else text."""
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None, data_dir: Path = data) -> Any:
        result: Result = runner.invoke(
            cli, ["--data-dir", str(data_dir), *args], env={**HASH_ENV, **(env or {})}
        )
        assert result.exit_code == 0, (result.stderr, result.exception)
        return json.loads(result.stdout) if "--json" in args else result.stdout

    return invoke


@pytest.fixture
def gm_main(data: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Gm:
    """Run the console entry point in-process (exactly what the installed script calls)."""

    def run(*args: str, env: dict[str, str] | None = None) -> Outcome:
        for name, value in {**HASH_ENV, **(env or {})}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(sys, "argv", ["graphmem", "--data-dir", str(data), *args])
        capsys.readouterr()
        code: Any = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        finally:
            for name in {**HASH_ENV, **(env or {})}:
                monkeypatch.delenv(name)
        out, err = capsys.readouterr()
        return Outcome(code if isinstance(code, int) else 1, out, err)

    return run


def fact_count(gm: Gm, **kw: Any) -> int:
    return int(gm("stats", "--json", **kw)["facts"])


# --------------------------------------------------------------------------------- store, search


def test_store_json_prints_the_action_and_the_stored_fact(gm: Gm) -> None:
    out = gm("store", "User prefers dark mode", "--tags", "ui,settings", "--json")
    assert out["action"] == "ADD"
    assert out["fact"]["text"] == "User prefers dark mode"
    assert set(out["fact"]["tags"]) == {"ui", "settings"}
    assert gm("get", out["fact"]["id"], "--json")["text"] == "User prefers dark mode"


def test_storing_the_same_text_twice_is_a_noop(gm: Gm) -> None:
    first = gm("store", "The build server is called hal", "--json")
    again = gm("store", "The build server is called hal", "--json")
    assert again["action"] == "NOOP"
    assert again["target_ids"] == [first["fact"]["id"]]
    assert fact_count(gm) == 1


def test_search_json_prints_facts_with_scores_best_first(gm: Gm) -> None:
    gm("store", "User prefers dark mode in the editor", "--json")
    gm("store", "The office coffee machine is broken", "--json")
    hits = gm("search", "dark mode", "--json")
    assert isinstance(hits, list) and hits
    assert all(set(h) == {"fact", "score"} for h in hits)
    assert hits[0]["fact"]["text"] == "User prefers dark mode in the editor"
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert "dark mode" in gm("search", "dark mode")  # the human-readable listing


def test_a_move_from_berlin_to_paris_is_answered_at_each_point_in_time(gm: Gm) -> None:
    about = ("--entity", "alice", "--key", "city")
    berlin = gm(
        "store",
        "Alice lives in Berlin",
        *about,
        "--value",
        "Berlin",
        "--valid-from",
        "2020-01-01",
        "--json",
    )
    paris = gm(
        "store",
        "Alice lives in Paris",
        *about,
        "--value",
        "Paris",
        "--valid-from",
        "2022-01-01",
        "--json",
    )
    assert berlin["action"] == "ADD"
    assert paris["action"] == "UPDATE"
    assert paris["target_ids"] == [berlin["fact"]["id"]]
    berlin_id, paris_id = berlin["fact"]["id"], paris["fact"]["id"]

    then = gm("search", "where does Alice live", "--as-of", "2021-01-01", "--json")
    assert [h["fact"]["value"] for h in then] == ["Berlin"]
    now = gm("search", "where does Alice live", "--json")
    assert [h["fact"]["value"] for h in now] == ["Paris"]

    assert [f["value"] for f in gm("lookup", "alice", "--json")] == ["Paris"]
    assert [f["value"] for f in gm("lookup", "alice", "--as-of", "2021-06-01", "--json")] == [
        "Berlin"
    ]

    for fact_id in (berlin_id, paris_id):
        chain = gm("history", fact_id, "--json")
        assert [f["id"] for f in chain] == [berlin_id, paris_id]
    assert gm("history", paris_id, "--json")[0]["valid_until"] == "2022-01-01T00:00:00Z"

    assert gm("get", berlin_id, "--as-of", "2021-01-01", "--json")["value"] == "Berlin"
    assert gm("get", paris_id, "--as-of", "2023-01-01", "--json")["value"] == "Paris"


def test_a_fact_is_not_visible_before_it_became_true(gm: Gm, gm_main: Gm) -> None:
    paris = gm(
        "store",
        "Alice lives in Paris",
        "--entity",
        "alice",
        "--key",
        "city",
        "--value",
        "Paris",
        "--valid-from",
        "2022-01-01",
        "--json",
    )
    done = gm_main("get", paris["fact"]["id"], "--as-of", "2021-01-01")
    assert done.code == 1
    assert done.stderr.startswith("error [NOT_FOUND]:")
    assert done.stdout == ""


def test_a_forgotten_fact_can_no_longer_be_read(gm: Gm, gm_main: Gm) -> None:
    stored = gm("store", "The wifi password is hunter2", "--json")["fact"]
    assert gm("forget", stored["id"], "--json") == {"forgotten": stored["id"]}

    done = gm_main("get", stored["id"])
    assert done.code == 1
    assert done.stderr.startswith("error [NOT_FOUND]:") and stored["id"] in done.stderr
    assert gm("search", "wifi password", "--json") == []
    # Still readable as known before it was forgotten (bi-temporal).
    before = gm("get", stored["id"], "--known-at", stored["recorded_at"], "--json")
    assert before["text"] == "The wifi password is hunter2"

    again = gm_main("forget", stored["id"])
    assert again.code == 1 and again.stderr.startswith("error [CONFLICT]:")


@pytest.mark.integration
def test_the_installed_script_prints_errors_with_their_code_and_exits_1(data: Path, gm: Gm) -> None:
    stored = gm("store", "Temporary note", "--json")["fact"]
    gm("forget", stored["id"])
    done = subprocess.run(
        [_script(), "--data-dir", str(data), "get", stored["id"]],
        capture_output=True,
        text=True,
        env={**os.environ, **HASH_ENV},
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error [NOT_FOUND]:")
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


@pytest.mark.integration
def test_the_installed_script_exits_2_on_a_usage_error(data: Path) -> None:
    done = subprocess.run(
        [_script(), "--data-dir", str(data), "store", "x", "--importance", "very"],
        capture_output=True,
        text=True,
        env={**os.environ, **HASH_ENV},
        timeout=120,
    )
    assert done.returncode == 2
    assert "--importance" in done.stderr and "Traceback" not in done.stderr
    assert not data.exists()


# --------------------------------------------------------------------------------- agent loop


def test_capture_reads_messages_from_a_file_and_recall_prints_the_block(
    gm: Gm, tmp_path: Path
) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text(
        json.dumps(
            [
                {"role": "user", "content": "I live in Lisbon. My password is hunter2."},
                {"role": "user", "content": "I always use black for formatting. Thanks!"},
                {"role": "assistant", "content": "Glad to help."},
            ]
        ),
        encoding="utf-8",
    )
    results = gm("capture", str(turn), "--episode", "chat-1", "--json")
    assert [(r["action"], r["kind"], r["message"]) for r in results] == [
        ("SKIP", "turn", 0),
        ("ADD", "turn", 1),
        ("ADD", "fact", 1),
        ("ADD", "turn", 2),
    ]
    assert "sensitive content (a password)" in results[0]["reason"]
    assert results[1]["fact"]["text"] == "I always use black for formatting. Thanks!"
    assert results[2]["fact"]["text"] == "I always use black for formatting."
    assert results[2]["turn_id"] == results[1]["fact"]["id"]
    out = gm("recall", "how should code be formatted?", "--json")
    # The turn says more than its fact: it is shown, the fact not.
    assert out["items"][0]["kind"] == "turn"
    assert out["items"][0]["fact"]["id"] == results[1]["fact"]["id"]
    assert results[2]["fact"]["id"] not in [i["fact"]["id"] for i in out["items"]]
    assert "user: I always use black for formatting. Thanks!" in out["context"]
    out = gm("recall", "formatting", "--max-tokens", "5", "--json")
    assert (out["context"], out["items"]) == ("", [])
    assert "hunter2" not in gm("export")


def test_capture_with_keep_facts_stores_the_memorable_sentences_alone(
    gm: Gm, tmp_path: Path
) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text(
        json.dumps(
            [
                {"role": "user", "content": "I always use black for formatting. Thanks!"},
                {"role": "assistant", "content": "Glad to help."},
            ]
        ),
        encoding="utf-8",
    )
    results = gm("capture", str(turn), "--keep", "facts", "--json")
    assert [(r["action"], r["kind"], r["message"]) for r in results] == [
        ("ADD", "fact", 0),
        ("SKIP", "fact", 1),
    ]
    assert results[0]["fact"]["text"] == "I always use black for formatting."
    block = gm("recall", "how should code be formatted?", "--format", "minimal")
    assert block == "<memory-context>\nI always use black for formatting.\n</memory-context>\n"


def test_capture_reads_standard_input_and_prints_what_it_did(data: Path) -> None:
    messages = json.dumps(
        [
            {"role": "user", "content": "My favourite editor is helix."},
            {"role": "assistant", "content": "Noted, helix it is."},
        ]
    )
    result = CliRunner().invoke(
        cli, ["--data-dir", str(data), "capture"], input=messages, env=HASH_ENV
    )
    assert result.exit_code == 0, result.output
    fact, turn = result.output.splitlines()
    assert fact.startswith("ADD    fact #0 user: ") and "user.favourite_editor=helix" in fact
    assert turn.startswith("ADD    turn #1 assistant: ") and "Noted, helix it is." in turn


@pytest.mark.parametrize(
    ("content", "mentions"),
    [
        ("not json at all", "not JSON"),
        ('{"role": "user", "content": "hi"}', "list of"),
        ('[{"role": "robot", "content": "I live in Rome"}]', "unknown role"),
    ],
)
def test_capture_of_bad_messages_is_refused(
    gm_main: Gm, tmp_path: Path, content: str, mentions: str
) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text(content, encoding="utf-8")
    done = gm_main("capture", str(turn))
    assert done.code == 1 and done.stderr.startswith("error [INVALID_INPUT]:")
    assert mentions in done.stderr


def test_recall_with_a_zero_budget_is_refused(gm_main: Gm) -> None:
    done = gm_main("recall", "anything", "--max-tokens", "0")
    assert done.code == 1 and "max_tokens" in done.stderr


# --------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "code", "mentions"),
    [
        (["   "], "INVALID_INPUT", "text"),
        (["x is y", "--importance", "2"], "INVALID_INPUT", "importance"),
        (["x is y", "--decay-class", "bogus"], "INVALID_INPUT", "bogus"),
        (["x is y", "--category", "gossip"], "INVALID_INPUT", "gossip"),
        (["x is y", "--valid-from", "not a date"], "INVALID_INPUT", "not a date"),
        (["x is y", "--supersedes", "no-such-id"], "NOT_FOUND", "no-such-id"),
    ],
    ids=["empty-text", "importance-2", "decay-class", "category", "valid-from", "supersedes"],
)
def test_invalid_store_input_is_refused_and_nothing_is_written(
    gm: Gm, gm_main: Gm, args: list[str], code: str, mentions: str
) -> None:
    gm("store", "A fact stored before", "--json")
    before = gm("export")

    done = gm_main("store", *args, "--json")

    assert done.code == 1
    assert done.stderr.startswith(f"error [{code}]:")
    assert mentions in done.stderr
    assert done.stdout == ""
    assert fact_count(gm) == 1
    assert gm("export") == before


def test_an_option_of_the_wrong_type_is_a_usage_error(gm_main: Gm, data: Path) -> None:
    done = gm_main("store", "x is y", "--importance", "very")
    assert done.code == 2
    assert "--importance" in done.stderr
    assert not data.exists()


@pytest.mark.parametrize("option", ["--as-of", "--known-at"])
def test_an_unreadable_time_scope_is_refused(gm: Gm, gm_main: Gm, option: str) -> None:
    gm("store", "Some fact", "--json")
    done = gm_main("search", "fact", option, "yesterday-ish")
    assert done.code == 1
    assert done.stderr.startswith("error [INVALID_INPUT]:") and "yesterday-ish" in done.stderr


def test_an_invalid_namespace_is_refused_without_creating_anything(
    gm_main: Gm, data: Path, tmp_path: Path
) -> None:
    done = gm_main("--namespace", "../escape", "stats")
    assert done.code == 1
    assert done.stderr.startswith("error [INVALID_INPUT]:") and "namespace" in done.stderr
    assert not (tmp_path / "escape").exists()


# --------------------------------------------------------------------------------- transfer


def test_export_then_import_into_a_fresh_store_gives_an_identical_export(
    gm: Gm, tmp_path: Path
) -> None:
    gm(
        "store",
        "Alice lives in Berlin",
        "--entity",
        "alice",
        "--key",
        "city",
        "--value",
        "Berlin",
        "--valid-from",
        "2020-01-01",
    )
    gm(
        "store",
        "Alice lives in Paris",
        "--entity",
        "alice",
        "--key",
        "city",
        "--value",
        "Paris",
        "--valid-from",
        "2022-01-01",
    )
    gm("store", "Bob likes tea — und Kuchen", "--tags", "food", "--importance", "0.9")
    gone = gm("store", "A passing thought", "--json")["fact"]["id"]
    gm("forget", gone)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    gm("export", str(first))

    fresh = tmp_path / "fresh"
    report = gm("import", str(first), "--json", data_dir=fresh)
    assert report == {"facts": 4, "links": 1, "skipped_existing": 0, "declarations": 0}
    gm("export", str(second), data_dir=fresh)

    assert second.read_bytes() == first.read_bytes()
    assert gm("check", data_dir=fresh).strip() == "ok"
    # Importing the same file again adds nothing.
    again = gm("import", str(first), "--json", data_dir=fresh)
    assert again == {"facts": 0, "links": 0, "skipped_existing": 5, "declarations": 0}
    assert fact_count(gm, data_dir=fresh) == 4


def test_an_imported_store_answers_searches(gm: Gm, tmp_path: Path) -> None:
    gm("store", "The deploy key lives in the vault", "--json")
    export = tmp_path / "export.jsonl"
    gm("export", str(export))
    fresh = tmp_path / "fresh"
    gm("import", str(export), data_dir=fresh)
    hits = gm("search", "deploy key vault", "--json", data_dir=fresh)
    assert [h["fact"]["text"] for h in hits] == ["The deploy key lives in the vault"]


# --------------------------------------------------------------------------------- maintenance


def test_prune_prints_what_it_would_remove_and_what_it_removed(gm: Gm, data: Path) -> None:
    # Two facts stored twelve days ago: one expired long since, one past 75% of its TTL.
    twelve_days_ago = time.time() - 12 * DAY
    with Memory.open(
        data, settings=Settings(embedder="hash"), clock=lambda: twelve_days_ago
    ) as mem:
        mem.store("Scratch note for the demo", decay_class="ephemeral")
        mem.store("The sprint review moved to Thursday", decay_class="normal")
        mem.store("Our company was founded in 1999", decay_class="permanent")

    dry = gm("prune", "--dry-run", "--json")
    assert dry == {"expired": 1, "decayed": 1, "low_confidence": 0, "dry_run": True}
    assert fact_count(gm) == 3

    soft = gm("prune", "--soft", "--json")
    assert soft == {"expired": 0, "decayed": 1, "low_confidence": 0, "dry_run": False}
    assert fact_count(gm) == 3

    hard = gm("prune", "--json")
    assert hard["expired"] == 1 and hard["dry_run"] is False
    assert fact_count(gm) == 2
    texts = {h["fact"]["text"] for h in gm("search", "scratch note demo", "--json")}
    assert "Scratch note for the demo" not in texts
    assert "Our company was founded in 1999" in texts


def test_stats_counts_live_facts_in_every_decay_class(gm: Gm) -> None:
    for n, decay_class in enumerate(["permanent", "session", "session", "checkpoint"]):
        gm("store", f"Fact number {n} about {decay_class}", "--decay-class", decay_class)
    stats = gm("stats", "--json")
    assert list(stats["by_decay_class"]) == list(DECAY_CLASSES)
    expected = dict.fromkeys(DECAY_CLASSES, 0) | {"permanent": 1, "session": 2, "checkpoint": 1}
    assert stats["by_decay_class"] == expected
    assert stats["facts"] == 4
    assert stats["embedder"]["provider"] == "hash"


def test_check_prints_ok_and_exits_0_on_a_consistent_store(gm: Gm, gm_main: Gm) -> None:
    gm("store", "One fact", "--json")
    gm("store", "Another fact entirely", "--json")
    done = gm_main("check")
    assert (done.code, done.stdout.strip()) == (0, "ok")
    report = gm("check", "--json")
    assert report["ok"] is True and report["facts"] == 2 and report["vectors"] == 2


def test_namespaces_keep_their_facts_apart(gm: Gm) -> None:
    gm("--namespace", "a", "store", "Project Zephyr ships in May", "--json")
    assert gm("--namespace", "b", "search", "Project Zephyr", "--json") == []
    assert fact_count(gm, env={"GRAPHMEM_NAMESPACE": "b"}) == 0
    found = gm("-n", "a", "search", "Project Zephyr", "--json")
    assert [h["fact"]["text"] for h in found] == ["Project Zephyr ships in May"]
    assert gm("stats", "--json")["facts"] == 0  # nor in the default namespace


def test_an_embedder_change_is_refused_until_graphmem_reindex(gm: Gm, gm_main: Gm) -> None:
    gm("store", "Carol's laptop runs Debian", "--json")
    smaller = {"GRAPHMEM_HASH_DIMENSIONS": "64"}

    refused = gm_main("search", "laptop", env=smaller)
    assert refused.code == 1
    assert refused.stderr.startswith("error [EMBEDDER_MISMATCH]:")
    assert "graphmem reindex" in refused.stderr

    assert gm("reindex", "--json", env=smaller) == {"vectors": 1, "embedder": "feature-hash-64"}
    hits = gm("search", "laptop Debian", "--mode", "vector", "--json", env=smaller)
    assert [h["fact"]["text"] for h in hits] == ["Carol's laptop runs Debian"]
    assert gm("stats", "--json", env=smaller)["embedder"]["dimensions"] == 64


def test_check_reports_a_lost_vector_and_exits_1_until_reindex(
    gm: Gm, gm_main: Gm, data: Path
) -> None:
    from graphmem.vectors.index import VectorIndex

    kept = gm("store", "The cat is called Miso", "--json")["fact"]["id"]
    lost = gm("store", "Backups run every night at two", "--json")["fact"]["id"]
    index = VectorIndex(data / "default" / "vectors", 256)
    index.delete([lost])

    done = gm_main("check", "--json")
    assert done.code == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False and report["missing_vectors"] == [lost]
    assert kept not in report["missing_vectors"]

    assert gm("reindex", "--json") == {"vectors": 2, "embedder": "feature-hash-256"}
    assert gm("check").strip() == "ok"


# --------------------------------------------------------------------------------- graph


def test_store_makes_automatic_links_unless_told_not_to(gm: Gm) -> None:
    first = gm("store", "The payments service is written in Rust", "--json")["fact"]["id"]
    close = gm("store", "The payments service is written in Rust, mostly", "--json")["fact"]
    assert [k["target_id"] for k in gm("links", close["id"], "--json")] == [first]
    other = gm(
        "store", "The payments service is written in Rust, mainly", "--no-autolink", "--json"
    )["fact"]
    assert gm("links", other["id"], "--json") == []


def test_graph_commands_link_walk_and_unlink(gm: Gm, gm_main: Gm) -> None:
    ids = {
        n: gm("store", f"Service {n} runs in the cluster ({n})", "--json")["fact"]["id"]
        for n in ("app", "api", "db")
    }
    first = gm("link", ids["app"], ids["api"], "DEPENDS_ON", "--strength", "0.9", "--json")
    assert (first["type"], first["source_id"], first["strength"]) == ("DEPENDS_ON", ids["app"], 0.9)
    gm("link", ids["api"], ids["db"], "depends_on", "--json")
    assert [k["id"] for k in gm("links", ids["app"], "--json")] == [first["id"]]
    sub = gm("traverse", ids["app"], "--depth", "2", "--direction", "out", "--json")
    assert [(n["fact"]["id"], n["depth"]) for n in sub["nodes"]] == [
        (ids["app"], 0),
        (ids["api"], 1),
        (ids["db"], 2),
    ]
    assert len(sub["edges"]) == 2 and sub["truncated"] is False
    route = gm("path", ids["db"], ids["app"], "--json")
    assert [f["id"] for f in route["facts"]] == [ids["db"], ids["api"], ids["app"]]
    assert gm("deps", ids["app"], "--json")["order"] == [ids["db"], ids["api"], ids["app"]]
    assert gm("clusters", "--json")["groups"] == [sorted(ids.values())]
    assert "3 facts, 2 links" in gm("traverse", ids["app"])
    assert gm("unlink", first["id"], "--json") == {"unlinked": first["id"]}
    assert gm("links", ids["app"], "--json") == []
    no_path = gm_main("path", ids["db"], ids["app"], "--direction", "IN")
    assert no_path.code == 1 and "error [NOT_FOUND]" in no_path.stderr
    bad = gm_main("link", ids["app"], ids["db"], "LIKES")
    assert bad.code == 1 and "error [INVALID_INPUT]" in bad.stderr


def test_entity_commands_list_find_alias_merge_split_and_rebuild(gm: Gm, gm_main: Gm) -> None:
    for text, entity in [
        ("Melanie paints sunsets", "Melanie"),
        ("Mel ran a charity race", "Mel"),
        ("Caroline went to a support group", "Caroline"),
        ("Mrs Lopez teaches chemistry", "Lopez"),
    ]:
        gm("store", text, "--entity", entity)
    listed = gm("entities", "--limit", "2", "--json")
    assert listed[0] == {"name": "Melanie", "names": ["Melanie", "Mel"], "aliases": [], "facts": 2}
    assert len(listed) == 2
    assert gm("entity", "mel's", "--json") == listed[0]
    assert "Melanie  (2 facts)  names: Melanie, Mel" in gm("entities")
    before = gm("store", "A note between the two", "--json")["fact"]["recorded_at"]
    time.sleep(0.01)
    assert gm("alias", "Teacher", "--of", "Lopez", "--json")["aliases"] == ["Teacher"]
    assert gm("entity", "Lopez", "--known-at", before, "--json")["aliases"] == []
    merged = gm("merge-entities", "Caroline", "Lopez", "--json")
    assert (merged["name"], set(merged["names"])) == ("Caroline", {"Caroline", "Lopez"})
    assert gm("split-alias", "Mel", "--json")["names"] == ["Melanie"]
    assert "split Teacher off Caroline" in gm("split-alias", "Teacher")
    assert gm("rebuild-entities", "--json") == {"names": 4}
    unknown = gm_main("entity", "Nobody Known")
    assert unknown.code == 1 and unknown.stderr.startswith("error [NOT_FOUND]:")
    only = gm_main("split-alias", "Melanie")
    assert only.code == 1 and only.stderr.startswith("error [CONFLICT]:")
    empty = gm_main("alias", "!!", "--of", "Melanie")
    assert empty.code == 1 and empty.stderr.startswith("error [INVALID_INPUT]:")


def test_the_installed_command_line_is_the_core_commands_and_the_services_three() -> None:
    added = set(installed_cli.commands) - set(cli.commands)
    assert added == {"serve", "mcp", "export-schema"}
    assert set(cli.commands) < set(installed_cli.commands)
