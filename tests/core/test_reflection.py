"""Reflection: patterns among recent facts, each backed by at least two of them, then rules from
the patterns, one chat request each (the OpenAI stub over real HTTP), stored as facts linked to
their evidence — through Python, GraphQL, MCP and the CLI, on the store ``--store`` names. A
failed or malformed answer stores nothing (a late, huge or deeply nested one too); no facts, no
request."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from graphmem import InvalidInput, Memory, Settings
from graphmem.cli import cli
from graphmem.limits import MAX_ANSWER_NESTING, MAX_CHAT_ANSWER_BYTES

from ..support.clock import Clock
from ..support.graphql_clients import InProcess
from ..support.mcp_clients import READ_ONLY_KEY, call_in_process
from ..support.openai_stub import OpenAIStub

pytestmark = [pytest.mark.integration, pytest.mark.engines, pytest.mark.client_api]

FACTS = [
    "Ana asked for the summary in French",
    "Ana wants replies in French, not English",
    "Ana reviewed the billing migration on Monday",
    "Ana skipped the standup to review the migration",
]


@pytest.fixture
def settings(settings: Settings, stub: OpenAIStub) -> Settings:
    return settings.model_copy(
        update={"llm_base_url": stub.base_url, "llm_api_key": "test", "llm_max_retries": 0}
    )


@pytest.fixture
def stored(mem: Memory) -> list[str]:
    items = [{"text": t, "entity": "ana", "decay_class": "permanent"} for t in FACTS]
    return [r.fact.id for r in mem.store_many(items)]  # type: ignore[union-attr]


def listed(body: dict[str, Any]) -> dict[str, str]:
    """The facts a request listed: name → text."""
    return {f["name"]: f["text"] for f in json.loads(body["messages"][1]["content"])["facts"]}


def patterns_answer(*entries: tuple[str, list[str]]) -> str:
    return json.dumps({"patterns": [{"text": t, "evidence": e} for t, e in entries]})


def test_patterns_need_two_facts_of_evidence_and_are_linked_to_them(
    mem: Memory, stub: OpenAIStub, stored: list[str]
) -> None:
    stub.reply_next(
        patterns_answer(
            ("Ana prefers French for everything written to her", ["E1", "E2"]),
            ("Ana puts the migration before meetings", ["E3", "E4", "E4"]),
            ("Ana likes Mondays", ["E3"]),  # one fact: ignored
            ("Ana is everywhere", ["E1", "E9"]),  # E9 names no listed fact: one left, ignored
            ("", ["E1", "E2"]),  # no text: ignored
        )
    )
    stub.reply_next(
        json.dumps({"rules": [{"text": "Write to Ana in French.", "evidence": ["P1"]}]})
    )
    report = mem.reflect()
    assert report.requests == 2 and report.error is None and report.ignored == 3
    asked = listed(stub.chat_requests[0].body)
    assert sorted(asked.values()) == sorted(FACTS)
    french, migration = report.patterns
    assert french.text == "Ana prefers French for everything written to her"
    assert (french.category, french.importance, french.decay_class, french.source) == (
        "pattern",
        0.9,
        "permanent",
        "reflection",
    )
    by_text = {t: i for i, t in zip(stored, FACTS, strict=True)}
    evidence = {
        k.target_id for k in mem.links(french.id, direction="OUT") if k.type == "DEPENDS_ON"
    }
    assert evidence == {by_text[asked["E1"]], by_text[asked["E2"]]}
    assert {k.origin for k in mem.links(migration.id, direction="OUT")} >= {"reflection"}
    [rule] = report.rules
    assert (rule.text, rule.category) == ("Write to Ana in French.", "rule")
    assert [k.target_id for k in mem.links(rule.id, direction="OUT") if k.type == "DEPENDS_ON"] == [
        french.id
    ]
    rules_question = json.loads(stub.chat_requests[1].body["messages"][1]["content"])
    assert [p["name"] for p in rules_question["patterns"]] == ["P1", "P2"]


def test_a_pattern_close_to_a_live_one_is_skipped_and_the_next_reflection_does_not_read_patterns(
    mem: Memory, stub: OpenAIStub, stored: list[str]
) -> None:
    text = "Ana prefers French for everything written to her"
    stub.reply_next(patterns_answer((text, ["E1", "E2"])))
    stub.reply_next('{"rules": []}')
    assert len(mem.reflect().patterns) == 1
    stub.reply_next(patterns_answer((text, ["E1", "E2"]), (text + ".", ["E2", "E3"])))
    again = mem.reflect()
    assert again.patterns == [] and again.ignored == 2 and again.requests == 1  # no rules asked
    assert "pattern" not in {f.category for f in _listed_facts(mem, stub.chat_requests[-1].body)}


def _listed_facts(mem: Memory, body: dict[str, Any]) -> list[Any]:
    texts = set(listed(body).values())
    return [f for _, f in mem.facts().items if f.text in texts]


@pytest.mark.parametrize(
    "answer",
    [
        "not json at all",
        '{"patterns": "several"}',
        '{"insights": []}',
        "[]",
    ],
)
def test_a_malformed_answer_stores_nothing_and_says_why(
    mem: Memory, stub: OpenAIStub, stored: list[str], answer: str
) -> None:
    stub.reply_next(answer)
    before = mem.stats().facts
    report = mem.reflect()
    assert report.patterns == [] and report.rules == [] and report.requests == 1
    assert report.error is not None and report.error.startswith("patterns:")
    assert mem.stats().facts == before


def test_a_failed_request_stores_nothing(mem: Memory, stub: OpenAIStub, stored: list[str]) -> None:
    stub.fail_next(status=500)
    report = mem.reflect()
    assert report.patterns == [] and report.requests == 1 and "failed" in (report.error or "")


def test_reflecting_over_too_few_facts_asks_nothing(
    mem: Memory, stub: OpenAIStub, clock: Clock
) -> None:
    assert mem.reflect().requests == 0
    mem.store("Ana asked for French")
    assert mem.reflect().requests == 0  # one fact is no pattern
    mem.store("Ana wants French replies")
    clock.advance(3 * 86_400)
    assert mem.reflect(window_days=2).requests == 0  # both older than the window
    assert stub.chat_requests == []
    with pytest.raises(InvalidInput) as refused:
        mem.reflect(window_days=0)
    assert refused.value.field == "window_days"


def test_reflection_without_a_chat_endpoint_is_refused(tmp_path: Any) -> None:
    with Memory.open(tmp_path / "data", settings=Settings(embedder="hash")) as mem:
        mem.store_many([{"text": t} for t in FACTS])
        with pytest.raises(InvalidInput) as refused:
            mem.reflect()
    assert refused.value.field == "llm_base_url"


REFLECT = """mutation($days: Float) {
  reflect(windowDays: $days) {
    patterns { id text category } rules { text } requests ignored problem error { code }
  }
}"""


def test_graphql_reflects(service: InProcess, stub: OpenAIStub, stored: list[str]) -> None:
    stub.reply_next(patterns_answer(("Ana prefers French", ["E1", "E2"])))
    stub.reply_next('{"rules": [{"text": "Answer Ana in French.", "evidence": ["P1"]}]}')
    data = service.data(REFLECT)["reflect"]
    assert [p["text"] for p in data["patterns"]] == ["Ana prefers French"]
    assert data["patterns"][0]["category"] == "pattern"
    assert data["rules"] == [{"text": "Answer Ana in French."}]
    assert (data["requests"], data["problem"], data["error"]) == (2, None, None)
    refused = service.data(REFLECT, {"days": -1})["reflect"]
    assert refused["error"]["code"] == "INVALID_INPUT"


@pytest.mark.in_process("calls the MCP tools in process")
def test_the_mcp_tool_reflects_and_a_read_only_key_may_not(
    mem: Memory, stub: OpenAIStub, stored: list[str]
) -> None:
    failed, data = call_in_process(mem, READ_ONLY_KEY, "memory_reflect")
    assert failed and data["error"]["code"] == "FORBIDDEN"
    assert stub.chat_requests == []
    stub.reply_next(patterns_answer(("Ana prefers French", ["E1", "E2"])))
    stub.reply_next('{"rules": []}')
    failed, data = call_in_process(mem, None, "memory_reflect", window_days=7)
    assert not failed and [p["text"] for p in data["patterns"]] == ["Ana prefers French"]
    failed, data = call_in_process(mem, None, "memory_reflect", window_days=-3)
    assert failed and data["error"]["code"] == "INVALID_INPUT"


@pytest.fixture
def cli_env(settings: Settings) -> Iterator[list[str]]:
    yield ["--data-dir", str(settings.data_dir), "--embedder", "hash"]


def test_the_cli_reflects(
    mem: Memory, stub: OpenAIStub, stored: list[str], cli_env: list[str], settings: Settings
) -> None:
    mem.close()  # the CLI opens the namespace itself
    stub.reply_next(patterns_answer(("Ana prefers French", ["E1", "E2"])))
    stub.reply_next('{"rules": []}')
    env = {"GRAPHMEM_LLM_BASE_URL": settings.llm_base_url or "", "GRAPHMEM_LLM_API_KEY": "test"}
    if settings.store:
        env["GRAPHMEM_STORE"] = settings.store
    # The facts were stored at the test clock's time, months before the CLI's.
    run = CliRunner().invoke(cli, [*cli_env, "reflect", "--window-days", "3650", "--json"], env=env)
    assert run.exit_code == 0, run.output
    assert [p["text"] for p in json.loads(run.output)["patterns"]] == ["Ana prefers French"]


def test_a_late_answer_stores_nothing(settings: Settings, stub: OpenAIStub, clock: Clock) -> None:
    late = settings.model_copy(update={"llm_timeout": 0.3})
    with Memory.open(settings.data_dir, settings=late, clock=clock) as mem:
        mem.store_many([{"text": t} for t in FACTS])
        stub.delay_next(2.0, route="chat")
        stub.reply_next(patterns_answer(("Ana prefers French", ["E1", "E2"])))
        before = mem.stats().facts
        report = mem.reflect()
        assert report.patterns == [] and report.error is not None
        assert mem.stats().facts == before


# --------------------------------------------------------------------------------- bounded answers


def test_a_dripped_answer_is_given_up_when_llm_timeout_has_passed_retries_included(
    settings: Settings, stub: OpenAIStub, clock: Clock
) -> None:
    # Each byte comes well within the timeout; the whole answer would take 3 s.
    late = settings.model_copy(update={"llm_timeout": 0.5, "llm_max_retries": 2})
    with Memory.open(settings.data_dir, settings=late, clock=clock) as mem:
        mem.store_many([{"text": t} for t in FACTS])
        stub.drip_next(0.05, lasting=3.0, times=3, route="chat")
        stub.reply_next(patterns_answer(("Ana prefers French", ["E1", "E2"])))
        before = mem.stats().facts
        started = time.monotonic()
        report = mem.reflect()
        took = time.monotonic() - started
        assert report.patterns == [] and "timed out" in (report.error or "")
        assert mem.stats().facts == before
    assert took < 1.5


def test_an_answer_larger_than_the_chat_cap_is_refused_and_stores_nothing(
    mem: Memory, stub: OpenAIStub, stored: list[str]
) -> None:
    stub.huge_next(2 * MAX_CHAT_ANSWER_BYTES, route="chat")
    stub.reply_next(patterns_answer(("Ana prefers French", ["E1", "E2"])))
    before = mem.stats().facts
    report = mem.reflect()
    assert report.patterns == [] and f"larger than {MAX_CHAT_ANSWER_BYTES:,} bytes" in (
        report.error or ""
    )
    assert mem.stats().facts == before


def test_an_answer_nested_too_deep_is_refused_whether_the_body_or_its_content(
    mem: Memory, stub: OpenAIStub, stored: list[str]
) -> None:
    before = mem.stats().facts
    stub.deep_next(100_000, route="chat")
    body = mem.reflect()
    stub.reply_next("[" * 100_000 + "]" * 100_000)
    content = mem.reflect()
    for report in (body, content):
        assert report.patterns == [] and report.requests == 1
        assert f"nested deeper than {MAX_ANSWER_NESTING} levels" in (report.error or "")
    assert mem.stats().facts == before


def test_graphql_answers_a_deep_chat_answer_as_the_reflections_problem(
    service: InProcess, stub: OpenAIStub, stored: list[str]
) -> None:
    stub.deep_next(100_000, route="chat")
    data = service.data(REFLECT)["reflect"]  # no INTERNAL_ERROR
    assert data["patterns"] == [] and "nested deeper" in data["problem"]
