"""Auto-capture: triggers, sensitive-content exclusion, length limits,
categories, entity/key/value extraction, then the write path."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from graphmem import InvalidInput, Memory, Settings
from graphmem import capture as captures
from graphmem.limits import MAX_CAPTURE_MESSAGES

from ..support.clock import Clock

pytestmark = pytest.mark.client_api

SECRETS = [
    "my password is hunter2-Blue",
    "the db passwd: Tr0ub4dor&3",
    "use the key sk-proj-4fT9xQ2mZk81LwPq7RbN3vYc",
    "AWS key AKIAIOSFODNN7EXAMPLE",
    "my github token ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "the api_key = 'a8f5f167f44f4964e6c998dee827110c'",
    "card 4111 1111 1111 1111 expires 12/29",
    "SSN 078-05-1120",
    "connect to postgres://admin:s3cr3t@db.internal/prod",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N",
]


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant(content: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


@pytest.mark.parametrize("secret", SECRETS)
def test_sensitive_messages_are_never_stored(
    mem: Memory, secret: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    message = f"I always prefer dark mode. Remember this: {secret}. I live in Berlin."
    [result] = mem.capture([user(message)])
    assert result.action == "SKIP" and result.fact is None and result.text is None
    assert result.reason.startswith("sensitive content")
    assert mem.stats().facts == 0
    token = secret.split()[-1] if "PRIVATE" not in secret else "b3BlbnNzaC1rZXktdjEAAAAA"
    assert token not in json.dumps(result.to_dict()) and token not in caplog.text


def test_memorable_sentences_are_stored_with_category_and_fields(mem: Memory) -> None:
    results = mem.capture(
        [
            user("Hi! My favourite editor is vim. Can you help me with a bug in the parser?"),
            assistant("Sure. We decided to use PostgreSQL because of its JSONB support."),
        ]
    )
    assert [(r.kind, r.action, r.message, r.role, r.text) for r in results] == [
        (
            "turn",
            "ADD",
            0,
            "user",
            "Hi! My favourite editor is vim. Can you help me with a bug in the parser?",
        ),
        ("fact", "ADD", 0, "user", "My favourite editor is vim."),
        (
            "turn",
            "ADD",
            1,
            "assistant",
            "Sure. We decided to use PostgreSQL because of its JSONB support.",
        ),
        (
            "fact",
            "ADD",
            1,
            "assistant",
            "We decided to use PostgreSQL because of its JSONB support.",
        ),
    ]
    first, editor, second, decision = (r.fact for r in results)
    assert first is not None and editor is not None and second is not None
    assert decision is not None
    assert (first.kind, first.source, first.decay_class) == ("turn", "turn:user", "turn")
    assert (first.entity, first.key) == (None, None)
    assert (editor.entity, editor.key, editor.value) == ("user", "favourite_editor", "vim")
    assert (editor.kind, editor.source) == ("fact", "capture:user")
    assert [r.turn_id for r in results] == [None, first.id, None, second.id]
    [drawn] = [k for k in mem.links(editor.id) if k.type == "PART_OF"]
    assert (drawn.target_id, drawn.origin) == (first.id, "capture")
    assert (decision.category, decision.entity, decision.value, decision.why) == (
        "decision",
        "decision",
        "PostgreSQL",
        "of its JSONB support",
    )
    assert decision.decay_class == "permanent"


@pytest.mark.parametrize(
    ("role", "sentence", "fields"),
    [
        ("user", "My birthday is Nov 13", ("user", "birthday", "Nov 13")),
        ("user", "I moved to Lisbon last year", ("user", "location", "Lisbon")),
        ("user", "I work at Acme Robotics", ("user", "employer", "Acme Robotics")),
        ("user", "Please remember: call me Ana.", ("user", "name", "Ana")),
        ("assistant", "Your favourite colour is teal now.", ("user", "favourite_colour", "teal")),
        ("user", "Carol's email is carol@example.com", ("Carol", "email", "carol@example.com")),
        (
            "user",
            "Always use tabs in the Makefile",
            ("convention", "use_tabs_in_the_makefile", "always"),
        ),
        ("user", "I really prefer tea over coffee", ("user", None, None)),
    ],
)
def test_entity_key_and_value_are_extracted(
    mem: Memory, role: str, sentence: str, fields: tuple[str | None, ...]
) -> None:
    [result] = mem.capture([{"role": role, "content": sentence}])
    assert result.fact is not None
    assert (result.fact.entity, result.fact.key, result.fact.value) == fields


def test_a_later_capture_supersedes_by_entity_and_key(mem: Memory, clock: Clock) -> None:
    [vim] = mem.capture([user("My favourite editor is vim.")])
    clock.advance(86_400)
    [helix] = mem.capture([user("Actually, my favourite editor is helix now!")])
    assert vim.fact is not None and helix.fact is not None
    assert helix.action == "UPDATE" and helix.target_ids == (vim.fact.id,)
    assert [f.value for f in mem.lookup("user", key="favourite_editor")] == ["helix"]
    earlier = datetime_iso(clock.now - 3600)
    assert [f.value for f in mem.lookup("user", key="favourite_editor", as_of=earlier)] == ["vim"]
    # A repeat is stored as this conversation's turn, the fact it repeats left as it is.
    turn, again = mem.capture([assistant("Your favourite editor is helix.")])
    assert (again.kind, again.action, again.target_ids) == ("fact", "NOOP", (helix.fact.id,))
    assert turn.kind == "turn" and turn.fact is not None
    assert turn.fact.text == "Your favourite editor is helix."


def datetime_iso(seconds: float) -> str:
    from graphmem.temporal import to_iso

    iso = to_iso(seconds)
    assert iso is not None
    return iso


SMALL_TALK = [
    {"role": "system", "content": "You are a helpful assistant. Always answer briefly."},
    user("Do you prefer dark mode or light mode?"),
    assistant("Here is the diff you asked for, take a look."),
    {"role": "tool", "content": '{"status": "I always win"}'},
    user("ok"),
]


def test_questions_and_small_talk_are_kept_as_turns_other_roles_skipped(mem: Memory) -> None:
    results = mem.capture(SMALL_TALK, episode="s1")
    assert [(r.kind, r.action, r.message) for r in results] == [
        ("turn", "SKIP", 0),
        ("turn", "ADD", 1),
        ("turn", "ADD", 2),
        ("turn", "SKIP", 3),
        ("turn", "ADD", 4),
    ]
    assert [r.reason for r in results if r.action == "SKIP"] == [
        "system messages are not captured",
        "tool messages are not captured",
    ]
    assert [f.text for f in mem.episode_facts("s1")] == [
        "Do you prefer dark mode or light mode?",
        "Here is the diff you asked for, take a look.",
        "ok",
    ]


def test_with_keep_facts_only_memorable_sentences_are_stored(mem: Memory) -> None:
    results = mem.capture(SMALL_TALK, keep="facts")
    assert [(r.action, r.message) for r in results] == [("SKIP", n) for n in range(5)]
    assert [r.reason for r in results] == [
        "system messages are not captured",
        "nothing memorable (no trigger in any sentence)",
        "nothing memorable (no trigger in any sentence)",
        "tool messages are not captured",
        f"shorter than {captures.MIN_CHARS} characters",
    ]
    assert mem.stats().facts == 0
    [fact] = mem.capture([user("Hi there. I live in Porto.")], keep="facts")
    assert (fact.kind, fact.action, fact.text, fact.turn_id) == (
        "fact",
        "ADD",
        "I live in Porto.",
        None,
    )
    with pytest.raises(InvalidInput, match="unknown keep"):
        mem.capture([user("I live in Porto.")], keep="turns")  # type: ignore[arg-type]


def test_messages_longer_than_capture_max_chars_are_kept_as_turns_without_facts(
    tmp_path: Path, clock: Clock
) -> None:
    settings = Settings(embedder="hash", capture_max_chars=200)
    with Memory.open(tmp_path, settings=settings, clock=clock) as mem:
        long = "I always use vim. " + "This is filler text. " * 12
        [result] = mem.capture([user(long)], keep="facts")
        assert result.action == "SKIP" and "longer than 200" in result.reason
        [turn] = mem.capture([user(long)])
        assert (turn.kind, turn.action, turn.text) == ("turn", "ADD", long.strip())
        turn, fact = mem.capture([user(long[:150])])
        assert (turn.kind, fact.kind, fact.action) == ("turn", "fact", "ADD")


def test_a_long_message_is_kept_in_parts_cut_at_sentences(mem: Memory) -> None:
    sentences = [
        f"Sentence {i} tells part {i} of a long story about the garden." for i in range(80)
    ]
    long = " ".join(sentences)
    results = mem.capture([user(long)], episode="long")
    parts = [r.text or "" for r in results if r.kind == "turn"]
    assert len(parts) > 1 and all(len(p) <= captures.TURN_PART_CHARS for p in parts)
    assert " ".join(parts) == long  # nothing lost, cut between sentences
    assert all(p.endswith("garden.") for p in parts)
    assert [f.text for f in mem.episode_facts("long")] == parts


def test_recalled_context_and_code_are_not_captured_again(mem: Memory) -> None:
    mem.store("User prefers dark mode", category="preference")
    block = mem.recall("dark mode").context
    results = mem.capture(
        [
            user(f"{block}\nI live in Porto."),
            assistant("```python\n# always use tabs\nprint('I love pasta')\n```\nDone, it runs."),
        ]
    )
    # The first message is one fact standing for its turn; the second says nothing once its
    # code is removed but that it ran.
    assert [(r.kind, r.action, r.text) for r in results] == [
        ("fact", "ADD", "I live in Porto."),
        ("turn", "ADD", "Done, it runs."),
    ]
    assert mem.stats().facts == 3


def test_content_given_as_parts_is_read(mem: Memory) -> None:
    [result] = mem.capture(
        [
            user(
                [
                    {"type": "text", "text": "I live in Oslo."},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                ]
            )
        ]
    )
    assert result.action == "ADD" and result.fact is not None
    assert result.fact.value == "Oslo"


def test_a_sentence_repeated_in_one_capture_is_one_fact_and_two_turns(mem: Memory) -> None:
    results = mem.capture([user("I hate cilantro."), assistant("I hate cilantro.")], episode="s1")
    assert [(r.kind, r.action) for r in results] == [
        ("fact", "ADD"),
        ("turn", "ADD"),
        ("fact", "NOOP"),
    ]
    fact, turn, _ = (r.fact for r in results)
    assert fact is not None and turn is not None
    assert [f.id for f in mem.episode_facts("s1")] == [fact.id, turn.id]


def test_a_turn_repeated_in_another_session_is_that_sessions_turn(mem: Memory) -> None:
    for session in ("s1", "s2"):
        mem.capture(
            [user("Good morning!"), assistant("Morning! How did the race go?")], episode=session
        )
    first, second = (mem.episode_facts(s) for s in ("s1", "s2"))
    assert [f.text for f in first] == [f.text for f in second]
    assert {f.id for f in first}.isdisjoint(f.id for f in second)


@pytest.mark.parametrize(
    ("messages", "match"),
    [
        ("I live in Berlin", "list of"),
        ({"role": "user", "content": "I live in Berlin"}, "list of"),
        ([user("I live in Berlin"), "I live in Paris"], "item 1"),
        ([user("I live in Berlin"), {"role": "narrator", "content": "x"}], "unknown role"),
        ([{"role": 3, "content": "x"}], "unknown role"),
        ([{"role": "user"}], "needs content"),
        ([user(42)], "content must be text"),
        ([user([{"type": "text", "text": None}])], "text part"),
        ([user("x")] * (MAX_CAPTURE_MESSAGES + 1), "at most"),
    ],
)
def test_malformed_messages_are_rejected_and_nothing_is_stored(
    mem: Memory, messages: Any, match: str
) -> None:
    with pytest.raises(InvalidInput, match=match):
        mem.capture(messages)
    assert mem.stats().facts == 0


def test_the_episode_is_its_turns_in_order_the_facts_drawn_linked_to_them(mem: Memory) -> None:
    # The agent loop: one capture per exchange, into the session's episode.
    first = mem.capture(
        [user("Hello! I moved to Lisbon last week."), assistant("Welcome! I love Lisbon.")],
        episode="s1",
    )
    second = mem.capture([user("Thanks. My sister lives in Porto.")], episode="s1")
    results = [*first, *second]
    turns = [r.fact for r in results if r.kind == "turn" and r.fact is not None]
    facts = [r.fact for r in results if r.kind == "fact" and r.fact is not None]
    assert [f.id for f in mem.episode_facts("s1")] == [t.id for t in turns]
    assert len(turns) == 3 and len(facts) == 3 and all(f.episode_id is None for f in facts)
    chained = {
        (k.source_id, k.target_id) for t in turns for k in mem.links(t.id) if k.origin == "episode"
    }
    assert chained == {(turns[1].id, turns[0].id), (turns[2].id, turns[1].id)}


@pytest.mark.in_process("reads the windows through the store")
def test_the_windows_of_a_captured_episode_hold_its_turns_only(mem: Memory) -> None:
    results = mem.capture(
        [user("Hello! I moved to Lisbon last week."), assistant("Welcome! I love Lisbon.")],
        episode="s1",
    )
    turns = {r.fact.id for r in results if r.kind == "turn" and r.fact is not None}
    assert len(turns) == 2 and len(results) > len(turns)  # a fact was drawn beside them
    held = mem._store.windows_holding(list(turns))
    assert held and all(set(ids) <= turns for ids in held.values())
