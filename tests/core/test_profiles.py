"""Profiles: an entity's current values by key (with their valid time and the facts behind
them), its other facts and the entities linked to it, as of any time; a summary by the chat
model (the OpenAI stub) in one request, kept until its facts change, none on failure; recall
led by the profile of the entity a prompt names — on the store ``--store`` names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from graphmem import InvalidInput, Memory, NotFound, Profile, Settings, Usage
from graphmem import profiles as profiles_module
from graphmem.limits import MAX_FIELD_LENGTH

from ..support.clock import Clock
from ..support.openai_stub import OpenAIStub
from .test_erasure import chat_settings

pytestmark = [
    pytest.mark.engines,
    pytest.mark.in_process("reads Memory's bounds and settings"),
]


def values(profile: Profile) -> dict[str, list[str]]:
    """Each key's values (a value the fact does not give as its text)."""
    return {a.key: [v.value or v.fact.text for v in a.values] for a in profile.attributes}


def stored(mem: Memory, text: str, **fields: Any) -> str:
    """The id of the fact ``mem`` stores."""
    fact = mem.store(text, **fields).fact
    assert fact is not None
    return fact.id


def usage(mem: Memory) -> Usage:
    """The chat model's usage."""
    found = mem.stats().llm_usage
    assert found is not None
    return found


@pytest.fixture
def ana(mem: Memory, clock: Clock) -> dict[str, str]:
    """Ana moved from Berlin (2020) to Paris (2023-06), keeps a cat and a dog, likes tea; her
    facts' ids by what they say."""
    ids = {}
    ids["berlin"] = stored(
        mem, "Ana lives in Berlin", entity="Ana", key="city", value="Berlin", valid_from="2020"
    )
    clock.advance(60)
    for pet in ("cat", "dog"):
        ids[pet] = stored(mem, f"Ana has a {pet}", entity="Ana", key="pets", value=pet)
    ids["tea"] = stored(mem, "Ana likes green tea", entity="ana", importance=0.9)
    ids["chess"] = stored(mem, "Ana played chess once", entity="Ana", importance=0.2)
    clock.advance(60)
    ids["paris"] = stored(
        mem, "Ana lives in Paris", entity="Ana", key="City", value="Paris", valid_from="2023-06"
    )
    return ids


def test_a_profile_shows_each_keys_current_value_with_its_valid_time_and_fact(
    mem: Memory, ana: dict[str, str]
) -> None:
    profile = mem.profile("Ana")
    assert profile.entity == mem.entity("Ana")
    [city] = [a for a in profile.attributes if a.key.lower() == "city"]
    [paris] = city.values
    assert (paris.value, paris.fact.id, paris.valid_until) == ("Paris", ana["paris"], None)
    assert paris.valid_from.isoformat() == "2023-06-01T00:00:00+00:00"
    assert sorted(values(profile)["pets"]) == ["cat", "dog"]  # a multi-valued key: both
    assert [f.id for f in profile.facts] == [ana["tea"], ana["chess"]]  # the important first
    assert profile.linked == () and not profile.truncated and profile.summary is None


def test_as_of_and_known_at_read_the_profile_as_memory_knew_it_then(
    mem: Memory, ana: dict[str, str], clock: Clock
) -> None:
    [city] = [a for a in mem.profile("Ana", as_of="2021").attributes if a.key == "city"]
    [berlin] = city.values
    assert berlin.value == "Berlin" and berlin.valid_until is not None  # it ended in 2023-06
    before_paris = mem.known_now([ana["paris"]])[ana["paris"]].recorded_at.timestamp() - 1
    then = mem.profile("Ana", known_at=before_paris)
    [berlin] = [v for a in then.attributes if a.key == "city" for v in a.values]
    assert berlin.value == "Berlin" and berlin.valid_until is None  # no move known yet
    mem.forget(ana["dog"])
    assert values(mem.profile("Ana"))["pets"] == ["cat"]
    assert sorted(values(mem.profile("Ana", known_at=clock.now - 1))["pets"]) == ["cat", "dog"]


def test_every_name_of_the_entity_reaches_one_profile(mem: Memory, ana: dict[str, str]) -> None:
    mem.store("Annie runs on Sundays", entity="Annie")
    mem.alias("Annie", of="Ana")
    profile = mem.profile("annie")
    assert profile.entity.name == "Ana" and profile.entity.aliases == ("Annie",)
    assert "Annie runs on Sundays" in {f.text for f in profile.facts}
    assert mem.profile("ana's") == mem.profile("Ana")


def test_the_entities_its_facts_are_linked_to_are_listed_with_the_link_types(
    mem: Memory, ana: dict[str, str]
) -> None:
    bob = mem.store("Bob fixes bikes", entity="Bob", autolink=False).fact
    team = mem.store("The chess club meets on Fridays", entity="Chess club").fact
    assert bob and team
    mem.link(ana["tea"], bob.id, "RELATED_TO")
    mem.link(bob.id, ana["paris"], "DEPENDS_ON")
    mem.link(ana["chess"], team.id, "PART_OF")
    linked = {e.entity.name: (e.links, set(e.types)) for e in mem.profile("Ana").linked}
    assert linked["Bob"] == (2, {"RELATED_TO", "DEPENDS_ON"})
    assert linked["Chess club"] == (1, {"PART_OF"})
    [back] = mem.profile("Bob").linked  # the same links, seen from Bob
    assert (back.entity.name, back.links) == ("Ana", 2)


def test_the_bounds_cut_the_lists_and_say_so(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles_module, "KEYS", 2)
    monkeypatch.setattr(profiles_module, "VALUES_PER_KEY", 1)
    monkeypatch.setattr(profiles_module, "FACTS", 1)
    mem.store_many(
        [
            *(
                {"text": f"Ana speaks {lang}", "entity": "Ana", "key": "languages", "value": lang}
                for lang in ("Greek", "Dutch")
            ),
            {"text": "Ana is a pilot", "entity": "Ana", "key": "job", "value": "pilot"},
            {"text": "Ana is 40", "entity": "Ana", "key": "age", "value": "40"},
            {"text": "Ana likes figs", "entity": "Ana"},
            {"text": "Ana likes plums", "entity": "Ana"},
        ]
    )
    profile = mem.profile("Ana")
    assert profile.truncated and len(profile.attributes) == 2 and len(profile.facts) == 1
    assert all(len(a.values) == 1 for a in profile.attributes)


def test_bad_names_and_unknown_entities_are_typed_errors(mem: Memory, ana: dict[str, str]) -> None:
    for bad in ["", "   ", "!!", "x" * (MAX_FIELD_LENGTH + 1), "a\x00b"]:
        with pytest.raises(InvalidInput):
            mem.profile(bad)
    with pytest.raises(NotFound):
        mem.profile("Nobody Known")
    with pytest.raises(InvalidInput):
        mem.profile("Ana", as_of="last May")


def test_a_summary_without_a_chat_model_is_none_and_says_why(
    mem: Memory, ana: dict[str, str]
) -> None:
    mem.settings = mem.settings.model_copy(update={"llm_base_url": None, "llm_api_key": None})
    profile = mem.profile("Ana", summary=True)
    assert profile.summary is None and "llm_base_url" in (profile.summary_error or "")


# ------------------------------------------------------------------------------- recall


def test_recall_leads_with_the_profile_of_the_entity_the_prompt_names_when_asked(
    mem: Memory, ana: dict[str, str]
) -> None:
    assert not mem.recall("Where does Ana live?").context.splitlines()[1].startswith("[profile")
    block = mem.recall("Where does Ana live?", profile=True)
    first = block.context.splitlines()[1]
    assert first.startswith("[profile/Ana] ") and "Paris" in first and "Berlin" not in first
    [shown] = block.profiles
    assert shown.entity.name == "Ana" and "City" in {a.key for a in shown.attributes}
    minimal = mem.recall("Where does Ana live?", profile=True, format="minimal")
    assert minimal.context.splitlines()[1].startswith("Ana — ")
    assert mem.recall("What is the weather like?", profile=True).profiles == ()


def test_the_profile_line_stays_within_a_quarter_of_the_budget(
    mem: Memory, ana: dict[str, str]
) -> None:
    mem.store_many(
        [
            {"text": f"Ana's {k} is {v}", "entity": "Ana", "key": k, "value": v}
            for k, v in [(f"trait{n}", "remarkably long-winded value " * 3) for n in range(20)]
        ]
    )
    block = mem.recall("Tell me about Ana", profile=True, max_tokens=200)
    line = block.context.splitlines()[1]
    assert line.startswith("[profile/Ana]") and len(line) / 4 <= 50
    assert block.tokens <= 200


def test_the_recall_profile_setting_turns_it_on_for_every_recall(
    mem: Memory, ana: dict[str, str]
) -> None:
    mem.settings = mem.settings.model_copy(update={"recall_profile": True})
    assert mem.recall("Where does Ana live?").context.splitlines()[1].startswith("[profile/Ana]")
    assert not mem.recall("Where does Ana live?", profile=False).profiles


# ------------------------------------------------------------------------------- summaries


@pytest.fixture
def settings(settings: Settings, stub: OpenAIStub) -> Settings:
    return settings.model_copy(update=chat_settings(stub))


def shown(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The facts a summary request showed the model: name → fact."""
    return {f["name"]: f for f in json.loads(body["messages"][1]["content"])["facts"]}


def citing(*texts: str, extra: tuple[str, ...] = ()) -> Any:
    """A chat answer citing the shown facts whose text is one of ``texts``, and ``extra``."""

    def reply(body: dict[str, Any]) -> str:
        names = [n for n, f in shown(body).items() if f["text"] in texts]
        return json.dumps({"summary": "Ana  lives in Paris.", "facts": [*names, *extra]})

    return reply


def test_a_summary_cites_its_facts_takes_one_request_and_is_kept_until_they_change(
    mem: Memory, ana: dict[str, str], stub: OpenAIStub
) -> None:
    stub.reply_next(citing("Ana lives in Paris", extra=("F99", "Berlin")))
    profile = mem.profile("Ana", summary=True)
    assert profile.summary is not None and profile.summary_error is None
    assert (profile.summary.text, profile.summary.facts) == ("Ana lives in Paris.", (ana["paris"],))
    assert not profile.summary.cached
    [request] = stub.chat_requests
    assert {f["text"] for f in shown(request.body).values()} == {f.text for f in profile.shown}
    assert "Ana lives in Berlin" not in {f["text"] for f in shown(request.body).values()}
    # Its names and facts alone: no linked entity's name, which a purge of it would leave.
    assert set(json.loads(request.body["messages"][1]["content"])) == {"entity", "names", "facts"}
    assert usage(mem).calls == 1
    again = mem.profile("Ana", summary=True)
    assert again.summary is not None and again.summary.cached and len(stub.chat_requests) == 1
    assert again.summary.text == "Ana lives in Paris."
    mem.store("Ana has a parrot", entity="Ana", key="pets", value="parrot")
    stub.reply_next(citing("Ana has a parrot"))
    changed = mem.profile("Ana", summary=True)
    assert changed.summary is not None and not changed.summary.cached
    assert len(stub.chat_requests) == 2 and usage(mem).calls == 2


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps({"summary": "Ana lives in Paris.", "facts": ["F99", 3]}),
        json.dumps({"summary": "", "facts": ["F1"]}),
        json.dumps({"facts": ["F1"]}),
        "not json at all",
        json.dumps(["a list"]),
    ],
)
def test_an_unusable_answer_leaves_the_profile_without_a_summary_and_keeps_nothing(
    mem: Memory, ana: dict[str, str], stub: OpenAIStub, answer: str
) -> None:
    stub.reply_next(answer)
    profile = mem.profile("Ana", summary=True)
    assert profile.summary is None and profile.summary_error
    assert values(profile) == values(mem.profile("Ana"))  # the rest of the profile is whole
    stub.reply_next(citing("Ana lives in Paris"))
    retried = mem.profile("Ana", summary=True)
    assert retried.summary is not None and not retried.summary.cached  # nothing was kept


def test_a_failed_request_leaves_the_profile_without_a_summary_and_is_counted(
    mem: Memory, ana: dict[str, str], stub: OpenAIStub
) -> None:
    stub.fail_next(status=500, route="chat")
    profile = mem.profile("Ana", summary=True)
    assert profile.summary is None and profile.summary_error
    assert [a.key for a in profile.attributes] == [a.key for a in mem.profile("Ana").attributes]
    assert usage(mem).failed_calls == 1


def test_after_a_purge_of_a_fact_it_was_shown_the_summary_is_asked_for_again(
    mem: Memory, ana: dict[str, str], stub: OpenAIStub
) -> None:
    stub.reply_next(citing("Ana lives in Paris"))
    assert mem.profile("Ana", summary=True).summary is not None
    mem.purge(ana["chess"])  # shown to the model, not cited
    stub.reply_next(citing("Ana lives in Paris"))
    after = mem.profile("Ana", summary=True)
    assert after.summary is not None and not after.summary.cached
    assert len(stub.chat_requests) == 2
