"""Auto-classify: facts of category ``other`` relabelled by the chat model (the OpenAI stub), one
request per batch; labels shared by enough facts become categories of the namespace, which
writes may then use; offline nothing changes — through Python, GraphQL, the CLI and the
maintenance job, on the store ``--store`` names."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from graphmem import InvalidInput, Memory, Settings
from graphmem import categorize as categorizing
from graphmem.cli import cli

from ..support.graphql_clients import InProcess
from ..support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.integration, pytest.mark.engines, pytest.mark.client_api]


@pytest.fixture
def settings(settings: Settings, stub: OpenAIStub) -> Settings:
    chat = {"llm_base_url": stub.base_url, "llm_api_key": "test", "llm_max_retries": 0}
    return settings.model_copy(update={"classifier": "llm", **chat})


def store_other(mem: Memory, texts: list[str]) -> dict[str, str]:
    """Store ``texts`` as category other, unclassified; their ids by text."""
    items = [
        {"text": t, "category": "other", "classify": False, "decay_class": "permanent"}
        for t in texts
    ]
    return {t: r.fact.id for t, r in zip(texts, mem.store_many(items), strict=True) if r.fact}


def labelling(decide: Callable[[str], dict[str, str]]) -> Callable[[dict[str, Any]], str]:
    """A scripted answer: ``decide(text)`` gives the entry's category (and label)."""

    def reply(body: dict[str, Any]) -> str:
        asked = json.loads(body["messages"][1]["content"])
        return json.dumps(
            {"labels": [{"fact": f["name"], **decide(f["text"])} for f in asked["facts"]]}
        )

    return reply


TRIPS = [f"Booked the train to city {n} for the spring trip" for n in range(10)]
MISC = [f"Miscellaneous note number {n} about nothing much" for n in range(6)]


def test_facts_are_relabelled_and_a_label_shared_by_ten_becomes_a_category(
    mem: Memory, stub: OpenAIStub
) -> None:
    ids = store_other(mem, ["Ana enjoys long walks", "The build uses Bazel", *TRIPS, *MISC])

    def decide(text: str) -> dict[str, str]:
        if text == "Ana enjoys long walks":
            return {"category": "preference"}
        if text == "The build uses Bazel":
            return {"category": "FACT"}
        if text.startswith("Booked"):
            return {"category": "other", "label": "Travel"}
        return {"category": "other", "label": "misc"}  # six: too few to be a category

    stub.reply_next(labelling(decide))
    report = mem.auto_classify()
    assert report.requests == 1 and report.error is None
    assert report.relabelled == {"preference": 1, "fact": 1, "travel": 10}
    assert report.discovered == ["travel"]
    asked = json.loads(stub.chat_requests[0].body["messages"][1]["content"])
    assert {c["name"] for c in asked["categories"]} == {"preference", "fact", "decision", "entity"}
    assert {f["text"] for f in asked["facts"]} == set(ids)
    facts = mem.get_many(list(ids.values()))
    assert facts[ids["Ana enjoys long walks"]].category == "preference"
    assert {facts[ids[t]].category for t in TRIPS} == {"travel"}
    assert {facts[ids[t]].category for t in MISC} == {"other"}
    travel = [c for c in mem.categories() if c.name == "travel"]
    assert travel and travel[0].discovered_at is not None
    assert mem.search("train", limit=20, category="travel")  # a category like any other
    stored = mem.store("Flights to Lisbon are cheaper on Tuesdays", category="travel").fact
    assert stored is not None and stored.category == "travel"
    with pytest.raises(InvalidInput) as refused:
        mem.store("x", category="gardening")  # shaped like a category, but not discovered here
    assert refused.value.field == "category"


def test_discovery_waits_for_fifteen_facts_left_other(mem: Memory, stub: OpenAIStub) -> None:
    store_other(mem, [*TRIPS[:10], "Note A about nothing", "Note B about nothing"])
    stub.reply_next(labelling(lambda text: {"category": "other", "label": "travel"}))
    report = mem.auto_classify()
    assert report.discovered == [] and report.relabelled == {}  # twelve remain other
    assert [c.name for c in mem.categories() if c.discovered_at] == []


def test_one_request_per_batch_and_a_bad_batch_changes_nothing_of_its_own(
    mem: Memory, stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(categorizing, "BATCH", 3)
    ids = store_other(mem, [f"Ana said thing {n} again" for n in range(6)])
    stub.reply_next("no JSON here")
    stub.reply_next(labelling(lambda text: {"category": "decision"}))
    report = mem.auto_classify()
    assert len(stub.chat_requests) == 2 and report.requests == 2
    assert report.error is not None and report.relabelled == {"decision": 3}
    categories = [f.category for f in mem.get_many(list(ids.values())).values()]
    assert sorted(categories) == ["decision"] * 3 + ["other"] * 3


def test_entries_naming_unknown_facts_or_categories_are_ignored(
    mem: Memory, stub: OpenAIStub
) -> None:
    ids = store_other(mem, ["Ana said hello", "Ana said goodbye"])
    stub.reply_next(
        json.dumps(
            {
                "labels": [
                    {"fact": "E1", "category": "gossip"},
                    {"fact": "E1", "category": "pattern"},  # reflection's, not assignable
                    {"fact": "E7", "category": "fact"},
                    {"fact": "E2", "category": "other", "label": "Not A Label!"},
                    "nonsense",
                ]
            }
        )
    )
    report = mem.auto_classify()
    assert report.relabelled == {} and report.error is None
    assert {f.category for f in mem.get_many(list(ids.values())).values()} == {"other"}


def test_offline_the_job_changes_nothing_and_asks_nothing(
    settings: Settings, stub: OpenAIStub
) -> None:
    offline = settings.model_copy(update={"classifier": "rules"})
    with Memory.open(settings.data_dir, settings=offline) as mem:
        store_other(mem, TRIPS)
        [run] = mem.maintain(["classify"], force=True)
        assert run.status == "done" and run.changed == {"relabelled": 0, "discovered": 0}
        assert run.requests == 0 and stub.chat_requests == []


def test_the_maintenance_job_records_what_it_relabelled(mem: Memory, stub: OpenAIStub) -> None:
    store_other(mem, ["Ana enjoys long walks"])
    stub.reply_next(labelling(lambda text: {"category": "preference"}))
    [run] = mem.maintain(["classify"], force=True)
    assert (run.changed, run.requests) == ({"relabelled": 1, "discovered": 0}, 1)


AUTO = """mutation {
  autoClassify { relabelled { category count } discovered requests problem error { code } }
}"""


def test_graphql_classifies_and_lists_the_categories(
    service: InProcess, mem: Memory, stub: OpenAIStub
) -> None:
    store_other(mem, [*TRIPS, *MISC, "Spare note one", "Spare note two", "Spare note 3"])
    stub.reply_next(
        labelling(
            lambda t: {"category": "other", "label": "travel" if t.startswith("Booked") else "x1"}
        )
    )
    data = service.data(AUTO)["autoClassify"]
    assert data["relabelled"] == [{"category": "travel", "count": 10}]
    assert (data["discovered"], data["requests"], data["error"]) == (["travel"], 1, None)
    listed = service.data("{ categories { name description discoveredAt } }")["categories"]
    assert [c["name"] for c in listed][:5] == ["preference", "fact", "decision", "entity", "other"]
    assert listed[-1]["name"] == "travel" and listed[-1]["discoveredAt"] is not None
    stored = service.data(
        'mutation { storeFact(input: {text: "Trains to Porto", category: "travel"}) '
        "{ fact { category } error { code } } }"
    )["storeFact"]
    assert stored == {"fact": {"category": "travel"}, "error": None}
    refused = service.data(
        'mutation { storeFact(input: {text: "x", category: "knitting"}) { error { code field } } }'
    )["storeFact"]
    assert refused["error"] == {"code": "INVALID_INPUT", "field": "category"}


def test_the_cli_classifies_and_lists_categories(
    mem: Memory, stub: OpenAIStub, settings: Settings
) -> None:
    store_other(mem, ["Ana enjoys long walks"])
    mem.close()
    stub.reply_next(labelling(lambda text: {"category": "preference"}))
    base = ["--data-dir", str(settings.data_dir), "--embedder", "hash"]
    env = {
        "GRAPHMEM_CLASSIFIER": "llm",
        "GRAPHMEM_LLM_BASE_URL": settings.llm_base_url or "",
        "GRAPHMEM_LLM_API_KEY": "test",
    }
    if settings.store:
        env["GRAPHMEM_STORE"] = settings.store
    done = CliRunner().invoke(cli, [*base, "auto-classify", "--json"], env=env)
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["relabelled"] == {"preference": 1}
    listed = CliRunner().invoke(cli, [*base, "categories"], env=env)
    assert listed.exit_code == 0 and listed.output.startswith("preference  ")
