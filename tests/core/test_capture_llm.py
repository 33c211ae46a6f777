"""Capture with the LLM classifier, against the OpenAI stub over real HTTP: the one chat request
of a capture draws its facts (fields, stated time, verdicts, links) from the messages kept as
turns; every failure keeps the trigger facts, and the turns whatever the model answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from graphmem import Memory, Settings
from graphmem.classify import DRAWN_PER_MESSAGE
from graphmem.limits import MAX_CHAT_ANSWER_BYTES

from ..support.openai_stub import OpenAIStub
from .test_classify import llm_settings as classify_settings

pytestmark = pytest.mark.integration

Reply = Callable[[dict[str, Any]], str]


def llm_settings(stub: OpenAIStub, **overrides: Any) -> Settings:
    """The classifier's test settings, without retries: each failure here is the one meant."""
    return classify_settings(stub, **{"llm_max_retries": 0, **overrides})


@pytest.fixture
def settings(stub: OpenAIStub) -> Settings:
    return llm_settings(stub)


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


def question(body: dict[str, Any]) -> dict[str, Any]:
    """The JSON graphmem sent as the user message of a chat request."""
    parsed: dict[str, Any] = json.loads(body["messages"][1]["content"])
    return parsed


def drawing(*facts: dict[str, Any], links: tuple[dict[str, Any], ...] = ()) -> Reply:
    """An answer drawing ``facts`` (ADD unless they say otherwise). A ``target`` given as the
    text of an existing fact is sent as the reference the request gave that fact."""

    def reply(body: dict[str, Any]) -> str:
        refs = {e["text"]: e["id"] for e in question(body)["existing_facts"]}
        drawn = [
            {"action": "ADD", "reason": "new", **f, "target": refs.get(f.get("target") or "")}
            for f in facts
        ]
        named = [{**k, "target": refs[k["target"]]} for k in links]
        return json.dumps({"facts": drawn, "links": named})

    return reply


def seed(mem: Memory, *texts: str, **fields: Any) -> list[str]:
    """Store facts without classification; their ids."""
    results = mem.store_many([{"text": t, "classify": False, **fields} for t in texts])
    return [r.fact.id for r in results if r.fact is not None]


def calls(mem: Memory) -> int:
    """The chat requests made so far, answered or failed."""
    usage = mem.stats().llm_usage
    assert usage is not None
    return usage.calls + usage.failed_calls


CONVERSATION = [
    user("Hi! We just got back from Porto, where my sister Ines lives. Any tips for jet lag?"),
    assistant("Welcome back! Try to get some daylight in the morning."),
]


def test_the_one_request_draws_the_facts_with_their_fields_each_linked_to_its_turn(
    mem: Memory, stub: OpenAIStub
) -> None:
    stub.reply_next(
        drawing(
            {
                "message": 0,
                "text": "The user's sister Ines lives in Porto",
                "entity": "Ines",
                "key": "location",
                "value": "Porto",
                "category": "entity",
            },
            {"message": 0, "text": "The user has just been to Porto", "category": "fact"},
        )
    )
    results = mem.capture(CONVERSATION, episode="s1")
    assert len(stub.chat_requests) == 1 and calls(mem) == 1
    asked = question(stub.chat_requests[0].body)
    assert asked["turns"] == [
        {"message": 0, "role": "user", "text": CONVERSATION[0]["content"]},
        {"message": 1, "role": "assistant", "text": CONVERSATION[1]["content"]},
    ]
    assert [(r.kind, r.action, r.message, r.text) for r in results] == [
        ("turn", "ADD", 0, CONVERSATION[0]["content"]),
        ("fact", "ADD", 0, "The user's sister Ines lives in Porto"),
        ("fact", "ADD", 0, "The user has just been to Porto"),
        ("turn", "ADD", 1, CONVERSATION[1]["content"]),
    ]
    turn, sister, trip = (r.fact for r in results[:3])
    assert turn is not None and sister is not None and trip is not None
    assert (sister.entity, sister.key, sister.value, sister.category) == (
        "Ines",
        "location",
        "Porto",
        "entity",
    )
    assert (sister.source, sister.episode_id, trip.category) == ("capture:user", None, "fact")
    assert results[1].reason == "llm: new"
    assert [r.turn_id for r in results[1:3]] == [turn.id, turn.id]
    for fact in (sister, trip):
        [part_of] = [k for k in mem.links(fact.id, direction="OUT") if k.type == "PART_OF"]
        assert (part_of.target_id, part_of.origin) == (turn.id, "capture")


def test_the_time_a_drawn_fact_states_starts_it_when_stated_valid_time_is_on(
    tmp_path: Path, stub: OpenAIStub
) -> None:
    settings = llm_settings(stub, stated_valid_from=True)
    with Memory.open(tmp_path, settings=settings) as mem:
        stub.reply_next(
            drawing(
                {
                    "message": 0,
                    "text": "The user has worked at Acme since March 2019",
                    "entity": "user",
                    "key": "employer",
                    "value": "Acme",
                    "valid_from": "2019-03-01",
                }
            )
        )
        episode = {"id": "s1", "time": "2023-05-08T10:00:00Z"}
        results = mem.capture([user("I've been at Acme since March 2019.")], episode=episode)
    assert question(stub.chat_requests[0].body)["date"] == "2023-05-08"
    fact = results[1].fact
    assert fact is not None and fact.valid_from == datetime(2019, 3, 1, tzinfo=UTC)


def test_update_noop_delete_verdicts_and_links_of_drawn_facts_are_applied(
    mem: Memory, stub: OpenAIStub
) -> None:
    berlin, tea, dog, job = seed(
        mem,
        "The user lives in Berlin",
        "The user drinks green tea every morning",
        "The user has a dog called Rex",
        "The user's job search",
    )
    stub.reply_next(
        drawing(
            {
                "message": 0,
                "text": "The user lives in Paris",
                "action": "UPDATE",
                "target": "The user lives in Berlin",
            },
            {
                "message": 0,
                "text": "The user has green tea each morning",
                "action": "NOOP",
                "target": "The user drinks green tea every morning",
            },
            {
                "message": 1,
                "text": "The user never had a dog",
                "action": "DELETE",
                "target": "The user has a dog called Rex",
            },
            {"message": 1, "text": "The user moved to Paris for a new job"},
            links=(
                {
                    "fact": 3,
                    "target": "The user's job search",
                    "type": "PART_OF",
                    "reason": "it ended",
                },
            ),
        )
    )
    results = mem.capture(
        [
            user("I live in Paris now and still have my green tea every morning."),
            user("Forget the dog, I never had one. I moved to Paris for a new job."),
        ]
    )
    assert len(stub.chat_requests) == 1
    facts = [r for r in results if r.kind == "fact"]
    assert [(r.action, r.target_ids) for r in facts] == [
        ("UPDATE", (berlin,)),
        ("NOOP", (tea,)),
        ("DELETE", (dog,)),
        ("ADD", ()),
    ]
    assert [r.action for r in results if r.kind == "turn"] == ["ADD", "ADD"]
    assert [f.text for f in mem.history(berlin)] == [
        "The user lives in Berlin",
        "The user lives in Paris",
    ]
    assert mem.get(dog) is None
    moved = facts[3].fact
    assert moved is not None
    [classified] = [k for k in mem.links(moved.id, direction="OUT") if k.origin == "classifier"]
    assert (classified.type, classified.target_id) == ("PART_OF", job)


def test_a_drawn_fact_that_is_the_whole_message_stands_for_its_turn(
    mem: Memory, stub: OpenAIStub
) -> None:
    [tea] = seed(mem, "I drink green tea every morning.")
    stub.reply_next(
        drawing(
            {"message": 0, "text": "I moved to Lisbon last year."},
            {
                "message": 1,
                "text": "I drink green tea every morning.",
                "action": "NOOP",
                "target": "I drink green tea every morning.",
            },
            {"message": 1, "text": "The user drinks tea"},
        )
    )
    results = mem.capture(
        [user("I moved to Lisbon last year."), user("I drink green tea every morning.")],
        episode="s1",
    )
    assert [(r.kind, r.action, r.message) for r in results] == [
        ("fact", "ADD", 0),  # stands for its turn
        ("turn", "ADD", 1),  # written in place of the NOOP
        ("fact", "NOOP", 1),
        ("fact", "ADD", 1),
    ]
    lisbon, turn, repeat, drinks = (r.fact for r in results)
    assert lisbon is not None and turn is not None and drinks is not None
    assert repeat is not None and repeat.id == tea
    assert (lisbon.kind, turn.kind, turn.text) == (
        "fact",
        "turn",
        "I drink green tea every morning.",
    )
    assert results[3].turn_id == turn.id
    [part_of] = [k for k in mem.links(drinks.id, direction="OUT") if k.type == "PART_OF"]
    assert part_of.target_id == turn.id


def test_turns_are_never_shown_to_the_model_as_facts_to_decide_against(
    mem: Memory, stub: OpenAIStub
) -> None:
    seed(mem, "Ana lives in Berlin with her cat", source="turn:user")
    seed(mem, "Ana lives in Berlin")
    stub.reply_next(drawing())
    mem.capture([user("Ana lives in Berlin with her cat Miso")])
    stub.reply_next(lambda body: json.dumps({"decisions": []}))
    mem.store("Ana lives in Berlin since 2020")
    capture, store = (question(r.body) for r in stub.chat_requests)
    assert [e["text"] for e in capture["existing_facts"]] == ["Ana lives in Berlin"]
    assert [e["text"] for e in store["existing_facts"]] == ["Ana lives in Berlin"]


def test_a_message_holding_a_secret_is_never_sent(mem: Memory, stub: OpenAIStub) -> None:
    stub.reply_next(drawing({"message": 1, "text": "The user lives in Porto"}))
    results = mem.capture(
        [user("my password is hunter2-Blue, and I live in Porto"), user("I live in Porto.")]
    )
    [request] = stub.chat_requests
    assert "hunter2" not in json.dumps(request.body)
    assert [t["message"] for t in question(request.body)["turns"]] == [1]
    assert [(r.kind, r.action) for r in results] == [
        ("turn", "SKIP"),
        ("turn", "ADD"),
        ("fact", "ADD"),
    ]


def test_keep_facts_draws_the_facts_without_turns(mem: Memory, stub: OpenAIStub) -> None:
    stub.reply_next(drawing({"message": 0, "text": "The user's sister Ines lives in Porto"}))
    results = mem.capture(CONVERSATION, keep="facts")
    assert [t["message"] for t in question(stub.chat_requests[0].body)["turns"]] == [0, 1]
    assert [(r.kind, r.action, r.text, r.turn_id) for r in results] == [
        ("fact", "ADD", "The user's sister Ines lives in Porto", None),
        ("fact", "SKIP", None, None),
    ]
    assert results[1].reason == "the chat model drew no fact from it"
    assert mem.stats().facts == 1


def test_a_capture_of_more_messages_than_one_request_carries_is_classified_by_its_triggers(
    tmp_path: Path, stub: OpenAIStub
) -> None:
    with Memory.open(tmp_path, settings=llm_settings(stub, llm_batch_size=2)) as mem:
        seed(mem, "I live in Berlin")
        stub.reply_next(drawing())
        mem.capture([user("I live in Paris now."), user("Hello there")])
        stub.reply_next(json.dumps({"decisions": [{"fact": 0, "action": "ADD"}]}))
        results = mem.capture([user("I live in Rome now."), user("Hello there"), user("Bye!")])
    drawn, classified = (question(r.body) for r in stub.chat_requests)
    assert [t["message"] for t in drawn["turns"]] == [0, 1]
    assert [f["text"] for f in classified["new_facts"]] == ["I live in Rome now."]
    assert results[0].action == "ADD" and results[0].reason == "llm"


def failing_fact(**fields: Any) -> Callable[[OpenAIStub], None]:
    """A script answering one unusable fact beside a good one."""
    good = {"message": 0, "text": "The user lives in Paris", "action": "ADD"}
    return lambda stub: stub.reply_next(json.dumps({"facts": [good, {**good, **fields}]}))


@pytest.mark.parametrize(
    ("script", "why"),
    [
        (lambda stub: stub.fail_next(status=500, route="chat"), "500"),
        (lambda stub: stub.reply_next("Sure! I found two facts."), "not valid JSON"),
        (lambda stub: stub.reply_next('{"decisions": []}'), '"facts"'),
        (lambda stub: stub.huge_next(2 * MAX_CHAT_ANSWER_BYTES, route="chat"), "bytes"),
        (failing_fact(message=7), "message 7, which was not sent"),
        (failing_fact(text=None), "not a fact graphmem writes"),
        (failing_fact(value="x" * 2000), "not a fact graphmem writes"),
        (failing_fact(text="x" * 6000), "longer than 5000 characters"),
        (failing_fact(category="gossip"), "unknown category 'gossip'"),
        (failing_fact(category="rule"), "unknown category 'rule'"),
        (failing_fact(text="The user's password is hunter2-Blue"), "holds"),
        (
            lambda stub: stub.reply_next(
                json.dumps(
                    {"facts": [{"message": 0, "text": "Paris"}] * (2 * DRAWN_PER_MESSAGE + 1)}
                )
            ),
            f"more than {DRAWN_PER_MESSAGE} a message",
        ),
    ],
    ids=[
        "server-error",
        "prose",
        "wrong-shape",
        "huge",
        "unknown-message",
        "no-text",
        "field-too-long",
        "text-too-long",
        "unknown-category",
        "reflection-category",
        "a-secret",
        "too-many-facts",
    ],
)
def test_an_unusable_answer_keeps_the_trigger_facts_and_the_turns(
    mem: Memory, stub: OpenAIStub, script: Callable[[OpenAIStub], None], why: str
) -> None:
    seed(mem, "I live in Berlin", entity="user", key="location", value="Berlin")
    script(stub)
    results = mem.capture(
        [user("I live in Paris now. Lovely weather today."), assistant("Noted, enjoy it!")]
    )
    assert calls(mem) == 1 and "turns" in question(stub.chat_requests[0].body)
    assert [(r.kind, r.action, r.text) for r in results] == [
        ("turn", "ADD", "I live in Paris now. Lovely weather today."),
        ("fact", "ADD", "I live in Paris now."),
        ("turn", "ADD", "Noted, enjoy it!"),
    ]
    reason = results[1].reason
    assert reason.startswith("classifier fell back to ADD") and why in reason, reason
    fact = results[1].fact
    assert fact is not None and (fact.entity, fact.key, fact.value) == ("user", "location", "Paris")
    assert results[1].turn_id == results[0].fact.id  # type: ignore[union-attr]
    assert "hunter2" not in json.dumps([r.to_dict() for r in results])


def test_a_slow_answer_keeps_the_trigger_facts_and_the_turns(
    tmp_path: Path, stub: OpenAIStub
) -> None:
    with Memory.open(tmp_path, settings=llm_settings(stub, llm_timeout=0.2)) as mem:
        stub.delay_next(0.6, route="chat")
        results = mem.capture([user("I live in Paris now. Lovely weather today.")])
        usage = mem.stats().llm_usage
    assert [(r.kind, r.action) for r in results] == [("turn", "ADD"), ("fact", "ADD")]
    assert "timed out" in results[1].reason
    assert usage is not None and (usage.calls, usage.failed_calls) == (0, 1)


def test_a_verdict_naming_no_listed_fact_adds_that_fact_alone(
    mem: Memory, stub: OpenAIStub
) -> None:
    seed(mem, "The user lives in Berlin")
    stub.reply_next(
        drawing(
            {
                "message": 0,
                "text": "The user lives in Paris",
                "action": "UPDATE",
                "target": "nothing listed",
            },
            {"message": 0, "text": "The user likes the weather", "action": "MERGE"},
            {"message": 0, "text": "The user is happy"},
        )
    )
    results = mem.capture([user("I live in Paris now, lovely weather, I am happy")])
    assert [r.action for r in results] == ["ADD", "ADD", "ADD", "ADD"]
    assert "not a listed fact" in results[1].reason
    assert "unknown action 'MERGE'" in results[2].reason
    assert results[3].reason == "llm: new"
