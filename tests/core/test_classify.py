"""Classify-before-write by an LLM, against the OpenAI stub over real
HTTP: one chat request per batch, UPDATE supersedes, DELETE retracts, NOOP stores nothing, and
every failure of the endpoint or of its answer still stores each fact as ADD."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from graphmem import InvalidInput, Memory, Settings

from ..support.clock import Clock
from ..support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.integration, pytest.mark.engines]


def llm_settings(stub: OpenAIStub, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "embedder": "hash",
        "classifier": "llm",
        "llm_base_url": stub.base_url,
        "llm_api_key": "test",
        "llm_max_retries": 2,
    }
    return Settings(**{**values, **overrides})


@pytest.fixture
def settings(stub: OpenAIStub) -> Settings:
    return llm_settings(stub)


def question(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON graphmem sent as the user message of a chat request."""
    parsed: dict[str, Any] = json.loads(body["messages"][1]["content"])
    return parsed


def answer(decide: Callable[[str], tuple[str, str | None]]) -> Callable[[dict[str, Any]], str]:
    """A scripted reply: ``decide(new text)`` gives (action, text of the target or None); the
    target is named by the reference the request gave it."""

    def reply(body: dict[str, Any]) -> str:
        asked = question(body)
        refs = {e["text"]: e["id"] for e in asked["existing_facts"]}
        decisions = []
        for new in asked["new_facts"]:
            action, target = decide(new["text"])
            decisions.append(
                {
                    "fact": new["fact"],
                    "action": action,
                    "target": None if target is None else refs[target],
                    "reason": f"scripted {action.lower()}",
                }
            )
        return json.dumps({"decisions": decisions})

    return reply


def seed(mem: Memory, *texts: str, **fields: Any) -> list[str]:
    """Store facts without classification; their ids."""
    results = mem.store_many([{"text": t, "classify": False, **fields} for t in texts])
    return [r.fact.id for r in results if r.fact is not None]


def test_a_batch_of_twenty_facts_is_classified_by_exactly_one_chat_request(
    mem: Memory, stub: OpenAIStub
) -> None:
    seed(mem, *(f"Project {n} uses Postgres" for n in range(20)))
    stub.reply_next(answer(lambda text: ("ADD", None)))
    results = mem.store_many([{"text": f"Project {n} uses Postgres 16"} for n in range(20)])
    assert len(stub.chat_requests) == 1
    body = stub.chat_requests[0].body
    assert body["model"] == "gpt-4o-mini" and body["response_format"] == {"type": "json_object"}
    asked = question(body)
    assert [f["text"] for f in asked["new_facts"]] == [
        f"Project {n} uses Postgres 16" for n in range(20)
    ]
    assert all(f["similar"] for f in asked["new_facts"])
    assert [r.action for r in results] == ["ADD"] * 20
    assert all(r.reason == "llm: scripted add" for r in results)


def test_a_batch_larger_than_llm_batch_size_takes_one_request_per_part(
    tmp_path: Path, stub: OpenAIStub
) -> None:
    with Memory.open(tmp_path, settings=llm_settings(stub, llm_batch_size=8)) as mem:
        seed(mem, "Deploys happen on Fridays")
        stub.default_reply = answer(lambda text: ("ADD", None))
        mem.store_many([{"text": f"Deploys of service {n} happen on Fridays"} for n in range(20)])
    assert [len(question(r.body)["new_facts"]) for r in stub.chat_requests] == [8, 8, 4]


def test_update_supersedes_the_target_and_the_old_fact_stays_readable_as_of_before(
    mem: Memory, stub: OpenAIStub, clock: Clock
) -> None:
    [berlin] = seed(mem, "Ana lives in Berlin", entity="Ana", valid_from="2020-01-01")
    clock.set("2026-03-01T00:00:00+00:00")
    stub.reply_next(answer(lambda text: ("UPDATE", "Ana lives in Berlin")))
    result = mem.store("Ana has moved to Paris", entity="Ana", valid_from="2025-06-01")
    assert result.action == "UPDATE" and result.target_ids == (berlin,)
    assert result.reason == "llm: scripted update"
    assert result.fact is not None and result.fact.supersedes_id == berlin
    assert [f.text for f in mem.lookup("Ana")] == ["Ana has moved to Paris"]
    old = mem.get(berlin, as_of="2021-01-01")
    assert old is not None and old.superseded_by == result.fact.id
    assert [f.text for f in mem.lookup("Ana", as_of="2021-01-01")] == ["Ana lives in Berlin"]
    assert [f.text for f in mem.history(result.fact.id)] == [
        "Ana lives in Berlin",
        "Ana has moved to Paris",
    ]


def test_the_model_is_shown_the_facts_of_the_same_key_under_any_name_of_the_entity(
    mem: Memory, stub: OpenAIStub
) -> None:
    seed(mem, *(f"Mel moved to Paris office number {n}" for n in range(12)))
    [rome] = seed(mem, "Melanie lives in Rome", entity="Melanie", key="city", value="Rome")
    stub.reply_next(answer(lambda text: ("UPDATE", "Melanie lives in Rome")))
    result = mem.store("Mel moved to Paris", entity="Mel", key="city", value="Paris")
    shown = [e["text"] for e in question(stub.chat_requests[0].body)["existing_facts"]]
    assert shown[-1] == "Melanie lives in Rome"  # not among the nearest: by entity and key
    assert (result.action, result.target_ids) == ("UPDATE", (rome,))


def test_delete_retracts_the_target_and_stores_nothing_new(
    mem: Memory, stub: OpenAIStub, clock: Clock
) -> None:
    [cat] = seed(mem, "Ana has a cat called Miso")
    before = clock.advance(60)
    clock.advance(60)
    stub.reply_next(answer(lambda text: ("DELETE", "Ana has a cat called Miso")))
    result = mem.store("Forget that Ana has a cat, she never had one")
    assert result.action == "DELETE" and result.target_ids == (cat,)
    assert result.fact is not None and result.fact.id == cat and result.fact.retracted_at
    assert mem.get(cat) is None
    assert mem.get(cat, known_at=before) is not None  # retracted, not deleted
    assert mem.stats().facts == 1
    report = mem.check()  # the retracted fact's vector is still its own text's
    assert report.ok, report.to_dict()


def test_noop_stores_nothing_and_names_the_fact_it_repeats(mem: Memory, stub: OpenAIStub) -> None:
    [tea] = seed(mem, "Ben drinks green tea every morning")
    stub.reply_next(answer(lambda text: ("NOOP", "Ben drinks green tea every morning")))
    result = mem.store("Every morning Ben has a green tea")
    assert result.action == "NOOP" and result.target_ids == (tea,)
    assert mem.stats().facts == 1


def test_facts_without_similar_facts_are_added_without_asking(
    mem: Memory, stub: OpenAIStub
) -> None:
    results = mem.store_many([{"text": "The office opens at 9"}, {"text": "Lunch is at noon"}])
    assert [r.action for r in results] == ["ADD", "ADD"]
    assert [r.reason for r in results] == ["no similar facts", "no similar facts"]
    assert stub.chat_requests == []


def test_repeats_of_stored_facts_are_noops_without_asking(mem: Memory, stub: OpenAIStub) -> None:
    [tea] = seed(mem, "Ben drinks green tea every morning")
    results = mem.store_many(
        [
            {"text": "Ben drinks green tea every morning"},
            {"text": "  ben drinks GREEN tea every morning "},
        ]
    )
    assert [(r.action, r.target_ids) for r in results] == [("NOOP", (tea,)), ("NOOP", (tea,))]
    assert stub.chat_requests == []


def test_explicit_supersedes_and_unclassified_facts_are_not_sent(
    mem: Memory, stub: OpenAIStub
) -> None:
    [old] = seed(mem, "Carol uses vim")
    stub.default_reply = answer(lambda text: ("ADD", None))
    mem.store_many(
        [
            {"text": "Carol uses helix", "supersedes": old},
            {"text": "Carol uses emacs on weekends", "classify": False},
            {"text": "Carol uses a split keyboard"},
        ]
    )
    [request] = stub.chat_requests
    assert [f["text"] for f in question(request.body)["new_facts"]] == [
        "Carol uses a split keyboard"
    ]


def test_a_rate_limit_then_success_is_retried_and_the_answer_applied(
    mem: Memory, stub: OpenAIStub
) -> None:
    [berlin] = seed(mem, "Dan lives in Berlin")
    stub.fail_next(status=429, route="chat")
    stub.reply_next(answer(lambda text: ("UPDATE", "Dan lives in Berlin")))
    result = mem.store("Dan lives in Rome now")
    assert [r.status for r in stub.chat_requests] == [429, 200]
    assert result.action == "UPDATE" and result.target_ids == (berlin,)
    usage = mem.stats().llm_usage
    assert usage is not None
    assert (usage.calls, usage.retries, usage.failed_calls) == (1, 1, 0)


@pytest.mark.parametrize(
    ("script", "why"),
    [
        (lambda stub: stub.fail_next(status=500, times=3, route="chat"), "500"),
        (lambda stub: stub.fail_next(status=429, times=3, route="chat"), "429"),
        (lambda stub: stub.garbage_next(route="chat"), "JSON"),
        (lambda stub: stub.reply_next("Sure! Here is my answer: ADD"), "not valid JSON"),
        (lambda stub: stub.reply_next('{"verdicts": []}'), '"decisions"'),
        (lambda stub: stub.reply_next("[1, 2]"), "not a JSON object"),
    ],
    ids=["server-error", "rate-limited", "garbage-body", "prose", "wrong-shape", "not-an-object"],
)
def test_a_failing_or_malformed_answer_still_stores_every_fact_as_add(
    mem: Memory, stub: OpenAIStub, script: Callable[[OpenAIStub], None], why: str
) -> None:
    seed(mem, "Eve likes jazz", "Eve plays the piano")
    script(stub)
    texts = ["Eve likes jazz and blues", "Eve plays the piano daily", "Eve likes chess"]
    results = mem.store_many([{"text": t} for t in texts])
    assert [r.action for r in results] == ["ADD", "ADD", "ADD"]
    assert all(
        r.reason.startswith("classifier fell back to ADD") and why in r.reason for r in results
    )
    assert {f.text for _, f in mem.facts().items} >= set(texts)
    assert mem.search("Eve chess", limit=1)[0].fact.text == "Eve likes chess"


def test_a_timeout_still_stores_every_fact_as_add(tmp_path: Path, stub: OpenAIStub) -> None:
    settings = llm_settings(stub, llm_timeout=0.2, llm_max_retries=0)
    with Memory.open(tmp_path, settings=settings) as mem:
        seed(mem, "Fay works at Acme")
        stub.delay_next(1.0, route="chat")
        result = mem.store("Fay works at Acme Labs")
        assert result.action == "ADD" and "timed out" in result.reason
        assert mem.stats().llm_usage.failed_calls == 1  # type: ignore[union-attr]


def test_an_answer_naming_an_unknown_fact_adds_that_fact_and_applies_the_rest(
    mem: Memory, stub: OpenAIStub, caplog: pytest.LogCaptureFixture
) -> None:
    [jazz] = seed(mem, "Gus likes jazz")

    def reply(body: dict[str, Any]) -> str:
        ref = question(body)["existing_facts"][0]["id"]
        return json.dumps(
            {
                "decisions": [
                    {"fact": 0, "action": "UPDATE", "target": "E99", "reason": "made up"},
                    {"fact": 1, "action": "NOOP", "target": ref, "reason": "same"},
                    {"fact": 2, "action": "UPDATE", "target": jazz, "reason": "a raw id"},
                ]
            }
        )

    stub.reply_next(reply)
    results = mem.store_many(
        [
            {"text": "Gus likes jazz a lot"},
            {"text": "Gus really likes jazz"},
            {"text": "Gus likes free jazz"},
        ]
    )
    assert [r.action for r in results] == ["ADD", "NOOP", "ADD"]
    assert "'E99', which is not a listed fact" in results[0].reason
    assert results[1].target_ids == (jazz,)
    assert "not a listed fact" in results[2].reason
    assert "fell back to ADD for facts [0, 2]" in caplog.text


def test_an_answer_missing_facts_or_with_unknown_actions_adds_those_facts(
    mem: Memory, stub: OpenAIStub
) -> None:
    [jazz] = seed(mem, "Hal likes jazz")
    stub.reply_next(
        json.dumps(
            {
                "decisions": [
                    {"fact": 1, "action": "MERGE", "target": "E1"},
                    {"fact": 2, "action": "noop", "target": "E1", "reason": "same thing"},
                    {"fact": 2, "action": "ADD", "reason": "a second answer for fact 2 is ignored"},
                    {"fact": 7, "action": "ADD"},
                ]
            }
        )
    )
    results = mem.store_many(
        [
            {"text": "Hal likes jazz records"},
            {"text": "Hal likes jazz clubs"},
            {"text": "Hal is into jazz"},
        ]
    )
    assert [r.action for r in results] == ["ADD", "ADD", "NOOP"]
    assert "no decision for this fact" in results[0].reason
    assert "unknown action 'MERGE'" in results[1].reason
    assert results[2].target_ids == (jazz,) and results[2].reason == "llm: same thing"


def test_a_target_that_changed_while_the_model_thought_falls_back_to_add(
    mem: Memory, stub: OpenAIStub
) -> None:
    [old] = seed(mem, "Ivy's team is Payments")

    def forget_then_update(body: dict[str, Any]) -> str:
        mem.forget(old)  # another writer, between the question and the write
        return answer(lambda text: ("UPDATE", "Ivy's team is Payments"))(body)

    stub.reply_next(forget_then_update)
    result = mem.store("Ivy's team is Search")
    assert result.action == "ADD" and "no longer live" in result.reason
    assert result.fact is not None and mem.get(result.fact.id) is not None


def test_the_chat_model_is_metered_in_stats(mem: Memory, stub: OpenAIStub) -> None:
    seed(mem, "Jo runs on Tuesdays")
    stub.reply_next(answer(lambda text: ("ADD", None)))
    mem.store("Jo runs on Thursdays too")
    usage = mem.stats().llm_usage
    assert usage is not None
    assert (usage.kind, usage.provider, usage.model) == ("llm", "openai", "gpt-4o-mini")
    assert usage.calls == 1 and usage.prompt_tokens > 0 and usage.completion_tokens > 0


def test_the_llm_classifier_needs_an_endpoint(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="llm_base_url"):
        Memory.open(tmp_path, settings=Settings(embedder="hash", classifier="llm"))


def test_the_same_request_draws_typed_links_and_ignores_what_it_cannot_use(
    mem: Memory, stub: OpenAIStub
) -> None:
    outage, migration = seed(mem, "The billing database ran out of disk", "The billing migration")

    def reply(body: dict[str, Any]) -> str:
        asked = question(body)
        refs = {e["text"]: e["id"] for e in asked["existing_facts"]}
        disk, move = refs["The billing database ran out of disk"], refs["The billing migration"]
        return json.dumps(
            {
                "decisions": [{"fact": 0, "action": "ADD", "target": None, "reason": "new"}],
                "links": [
                    {"fact": 0, "target": disk, "type": "caused_by", "reason": "the disk filled"},
                    {"fact": 0, "target": move, "type": "PART_OF", "reason": "a step of it"},
                    {"fact": 0, "target": move, "type": "PART_OF", "reason": "a repeat"},
                    {"fact": 0, "target": disk, "type": "RELATED_TO", "reason": "not drawn"},
                    {"fact": 0, "target": "E99", "type": "DEPENDS_ON", "reason": "no such fact"},
                    {"fact": 7, "target": disk, "type": "DEPENDS_ON", "reason": "no such new fact"},
                    "not a link",
                ],
            }
        )

    stub.reply_next(reply)
    result = mem.store("The billing migration paused because the billing database ran out of disk")
    assert result.fact is not None and len(stub.chat_requests) == 1
    drawn = {
        (k.type, k.target_id, k.metadata.get("reason"))
        for k in mem.links(result.fact.id, direction="OUT")
        if k.origin == "classifier"
    }
    assert drawn == {
        ("CAUSED_BY", outage, "the disk filled"),
        ("PART_OF", migration, "a step of it"),
    }


def test_links_to_a_target_gone_meanwhile_or_of_a_fact_not_stored_are_not_made(
    mem: Memory, stub: OpenAIStub
) -> None:
    [target] = seed(mem, "Deploys happen on Fridays")

    def reply(body: dict[str, Any]) -> str:
        ref = question(body)["existing_facts"][0]["id"]
        mem.forget(target)  # gone while the model thought
        return json.dumps(
            {
                "decisions": [{"fact": 0, "action": "ADD", "target": None, "reason": "new"}],
                "links": [{"fact": 0, "target": ref, "type": "DEPENDS_ON", "reason": "x"}],
            }
        )

    stub.reply_next(reply)
    result = mem.store("Deploys of the API happen on Fridays")
    assert result.fact is not None
    assert [k for k in mem.links(result.fact.id) if k.origin == "classifier"] == []
    [kept] = seed(mem, "Backups run nightly")
    stub.reply_next(
        lambda body: json.dumps(
            {
                "decisions": [{"fact": 0, "action": "NOOP", "target": "E1", "reason": "same"}],
                "links": [{"fact": 0, "target": "E1", "type": "DEPENDS_ON", "reason": "x"}],
            }
        )
    )
    assert mem.store("Backups run every night").action == "NOOP"
    assert [k for k in mem.links(kept) if k.origin == "classifier"] == []


def test_the_answer_may_give_valid_time_from_the_text_used_only_when_the_write_asks(
    mem: Memory, stub: OpenAIStub, clock: Clock
) -> None:
    seed(mem, "Ana works at Acme")

    def reply(body: dict[str, Any]) -> str:
        decisions = [
            {
                "fact": n["fact"],
                "action": "ADD",
                "target": None,
                "reason": "new",
                "valid_from": "2019-03-01",
            }
            for n in question(body)["new_facts"]
        ]
        return json.dumps({"decisions": decisions})

    stub.reply_next(reply)
    asked = mem.store("Ana has worked at Acme since March 2019", valid_from="stated").fact
    assert asked is not None and asked.valid_from == datetime(2019, 3, 1, tzinfo=UTC)
    stub.reply_next(reply)
    kept = mem.store("Ana has worked at Acme for years").fact  # no opt-in: valid from now
    assert kept is not None and kept.valid_from.timestamp() == clock.now
    prompt = stub.chat_requests[0].body["messages"][0]["content"]
    assert '"valid_from"' in prompt
