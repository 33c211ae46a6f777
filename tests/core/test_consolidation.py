"""Consolidation: clusters of near-duplicate live facts (same entity; contact details, ids and
numbers left alone) merged into one fact that supersedes every source, offline or with the chat
model (the OpenAI stub), the sources kept in history — through Python, GraphQL, MCP and the
CLI, on the store ``--store`` names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphmem import Memory, Settings
from graphmem import consolidation as consolidations
from graphmem.cli import cli

from ..support.clock import Clock
from ..support.graphql_clients import InProcess
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process
from ..support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.engines, pytest.mark.client_api]

# The hash embedder's cosines: A~B 1.0, A~C 0.86, A~D 0.71, the phones 0.8, A~E 0.86.
A = "Ana likes green tea in the morning"
B = "In the morning Ana likes green tea"
C = "Ana likes green tea in the mornings"
D = "Ana likes black coffee in the morning"
E = "Bo likes green tea in the morning"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"consolidate_similarity": 0.8})


@pytest.fixture
def ids(mem: Memory, clock: Clock) -> dict[str, str]:
    out = {}
    for name, text, entity, confidence in [
        ("A", A, "ana", 0.8),
        ("B", B, "ana", 0.95),
        ("C", C, "ana", 0.8),
        ("D", D, "ana", 0.8),
        ("E", E, "bo", 0.8),
        ("phone1", "Ana's phone is 555 1234", "ana", 0.8),
        ("phone2", "Ana's phone is 555 1243", "ana", 0.8),
    ]:
        clock.advance(60)
        fact = mem.store(text, entity=entity, confidence=confidence, tags=[name.lower()]).fact
        assert fact is not None
        out[name] = fact.id
    return out


def test_a_dry_run_lists_the_clusters_and_changes_nothing(mem: Memory, ids: dict[str, str]) -> None:
    before = mem.stats().facts
    report = mem.consolidate(dry_run=True)
    assert [set(c) for c in report.clusters] == [{ids["A"], ids["B"], ids["C"]}]
    assert report.clusters[0][0] == ids["A"]  # the first recorded gathers the others
    assert report.merged == [] and report.dry_run and report.requests == 0
    assert mem.stats().facts == before


def test_a_cluster_becomes_one_fact_that_supersedes_every_source_and_history_keeps_them(
    mem: Memory, ids: dict[str, str], clock: Clock
) -> None:
    before = clock.now
    clock.advance(60)
    report = mem.consolidate()
    [merged] = report.merged
    assert report.superseded == 3 and report.requests == 0
    assert merged.text == B  # offline: the most confident source's text
    assert (merged.entity, merged.confidence, merged.source) == ("ana", 0.95, "consolidation")
    assert {"a", "b", "c"} <= set(merged.tags)
    sources = [ids["A"], ids["B"], ids["C"]]
    assert all(mem.get(i) is None for i in sources)  # no longer current
    assert all(mem.get(i, known_at=before) is not None for i in sources)  # as memory knew then
    superseded = {k.target_id for k in mem.links(merged.id) if k.type == "SUPERSEDES"}
    assert superseded == set(sources)
    assert all(
        f.superseded_by == merged.id
        for f in mem.get_many(sources, known_at=clock.now, include_superseded=True).values()
    )
    found = [h.fact.id for h in mem.search("green tea morning", limit=10)]
    assert merged.id in found and not set(sources) & set(found)
    assert mem.get(ids["D"]) is not None and mem.get(ids["E"]) is not None
    assert mem.get(ids["phone1"]) is not None and mem.get(ids["phone2"]) is not None
    assert mem.consolidate().clusters == []  # nothing left to merge


def test_with_a_model_one_request_writes_the_merged_text_and_a_bad_answer_changes_nothing(
    settings: Settings, clock: Clock, stub: OpenAIStub, tmp_path: Path
) -> None:
    chat = {"llm_base_url": stub.base_url, "llm_api_key": "test", "llm_max_retries": 0}
    with Memory.open(
        settings.data_dir, settings=settings.model_copy(update=chat), clock=clock
    ) as mem:
        for text in (A, B, C):
            mem.store(text, entity="ana")
        stub.reply_next("the facts are the same")
        before = mem.stats().facts
        bad = mem.consolidate()
        assert bad.merged == [] and bad.requests == 1 and bad.error is not None
        assert mem.stats().facts == before
        stub.reply_next(
            json.dumps({"merged": [{"cluster": 0, "text": "Ana has green tea every morning"}]})
        )
        good = mem.consolidate()
    assert [f.text for f in good.merged] == ["Ana has green tea every morning"]
    assert good.requests == 1 and good.superseded == 3
    asked = json.loads(stub.chat_requests[-1].body["messages"][1]["content"])
    assert sorted(asked["clusters"][0]["facts"]) == sorted([A, B, C])


def test_successive_runs_cover_the_namespace_a_slice_at_a_time(
    mem: Memory, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    monkeypatch.setattr(consolidations, "MAX_CONSIDERED", 2)
    for text in ("Bo plays chess on weekends", "Cy paints on Sundays", A, B):
        clock.advance(60)
        mem.store(text, entity="x")
    assert mem.consolidate().clusters == []  # the first two facts
    assert len(mem.consolidate().merged) == 1  # the next two
    assert mem.consolidate().clusters == []  # from the start again


CONSOLIDATE = """mutation($dry: Boolean) {
  consolidate(dryRun: $dry) {
    clusters merged { text source } superseded requests dryRun problem error { code }
  }
}"""


def test_graphql_consolidates(service: InProcess, ids: dict[str, str]) -> None:
    listed = service.data(CONSOLIDATE, {"dry": True})["consolidate"]
    assert [set(c) for c in listed["clusters"]] == [{ids["A"], ids["B"], ids["C"]}]
    assert listed["merged"] == [] and listed["dryRun"] is True
    done = service.data(CONSOLIDATE)["consolidate"]
    assert done["merged"] == [{"text": B, "source": "consolidation"}]
    assert (done["superseded"], done["requests"], done["problem"], done["error"]) == (
        3,
        0,
        None,
        None,
    )


@pytest.mark.in_process("calls the MCP tools in process")
def test_the_mcp_tool_consolidates_and_a_read_only_key_may_only_list(
    mem: Memory, ids: dict[str, str]
) -> None:
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_consolidate", dry_run=True)
    assert not failed and len(data["clusters"]) == 1 and data["merged"] == []
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_consolidate")
    assert failed and data["error"]["code"] == "FORBIDDEN"
    failed, data = call_in_process(mem, None, "memory_consolidate")
    assert not failed and [f["text"] for f in data["merged"]] == [B]


def test_the_maintenance_job_consolidates(mem: Memory, ids: dict[str, str]) -> None:
    [run] = mem.maintain(["consolidate"], force=True)
    assert run.status == "done" and run.changed == {"merged": 1, "superseded": 3}


def test_the_cli_consolidates(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path), "--embedder", "hash"]
    env = {"GRAPHMEM_CONSOLIDATE_SIMILARITY": "0.8"}
    for text in (A, C):
        assert runner.invoke(cli, [*base, "store", text, "--entity", "ana"]).exit_code == 0
    listed = runner.invoke(cli, [*base, "consolidate", "--dry-run", "--json"], env=env)
    assert listed.exit_code == 0, listed.output
    assert len(json.loads(listed.output)["clusters"]) == 1
    done = runner.invoke(cli, [*base, "consolidate"], env=env)
    assert done.exit_code == 0 and "1 merged, 2 facts superseded" in done.output
