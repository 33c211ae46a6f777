"""Episodes: where facts came from, recorded once, their facts in order and linked in turn."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from graphmem.server.mcp import tools
from starlette.applications import Starlette

from graphmem import Conflict, InvalidInput, Memory, NotFound, Settings
from graphmem.cli import cli

from ..support.clock import Clock
from ..support.graphql_clients import InProcess

pytestmark = [pytest.mark.engines, pytest.mark.client_api]

SESSION: dict[str, Any] = {
    "id": "chat-42/session-3",
    "kind": "conversation",
    "source": "chat-42",
    "time": "2023-05-08T13:56:00Z",
    "metadata": {"speakers": ["Caroline", "Melanie"]},
}
TURNS = [
    {"text": "Caroline: I went to the support group yesterday", "entity": "caroline"},
    {"text": "Melanie: How did it go?", "entity": "melanie"},
    {"text": "Caroline: It was powerful, I want to study counseling", "entity": "caroline"},
]


def episode_links(mem: Memory, fact_id: str) -> list[tuple[str, str]]:
    return [
        (k.source_id, k.target_id)
        for k in mem.links(fact_id, direction="OUT")
        if k.origin == "episode"
    ]


def test_a_session_is_recorded_once_and_its_facts_are_in_order_and_chained(mem: Memory) -> None:
    results = mem.store_many(TURNS, episode=SESSION)
    ids = [r.fact.id for r in results if r.fact is not None]
    episode = mem.episode("chat-42/session-3")
    assert episode is not None
    assert (episode.kind, episode.source, episode.time, episode.metadata) == (
        "conversation",
        "chat-42",
        datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
        {"speakers": ["Caroline", "Melanie"]},
    )
    assert [f.id for f in mem.episode_facts("chat-42/session-3")] == ids
    assert all(r.fact is not None and r.fact.episode_id == episode.id for r in results)
    # Each fact is linked to the one before it: newer -[RELATED_TO]-> older, origin episode.
    assert episode_links(mem, ids[0]) == []
    assert episode_links(mem, ids[1]) == [(ids[1], ids[0])]
    assert episode_links(mem, ids[2]) == [(ids[2], ids[1])]
    # A later batch of the same episode (named by its id alone) continues the chain.
    more = mem.store_many(
        [{"text": "Melanie: That suits you, you listen well"}], episode="chat-42/session-3"
    )
    assert more[0].fact is not None
    assert episode_links(mem, more[0].fact.id) == [(more[0].fact.id, ids[2])]
    assert [f.id for f in mem.episode_facts("chat-42/session-3")] == [*ids, more[0].fact.id]


def test_a_batch_keeps_its_order_in_the_episode_whatever_columns_its_facts_fill(
    mem: Memory,
) -> None:
    """Facts stating a time, or giving an entity, fill columns others leave empty: they are
    written in the batch's order all the same, and a later batch continues after the last."""
    turns = [
        {"text": "Ana: we met in May 2023"},
        {"text": "Bo: I remember", "entity": "bo"},
        {"text": "Ana: and again last week"},
        {"text": "Bo: yes"},
    ]
    results = mem.store_many(turns, episode={"id": "chat", "time": "2024-05-02T09:00:00Z"})
    ids = [r.fact.id for r in results if r.fact is not None]
    assert [f.id for f in mem.episode_facts("chat")] == ids
    more = mem.store_many([{"text": "Ana: see you"}], episode="chat")
    assert more[0].fact is not None
    assert episode_links(mem, more[0].fact.id) == [(more[0].fact.id, ids[-1])]


def test_an_episode_named_again_with_other_attributes_is_a_conflict(mem: Memory) -> None:
    mem.store_many(TURNS[:1], episode=SESSION)
    with pytest.raises(Conflict) as error:
        mem.store_many(TURNS[1:], episode={**SESSION, "time": "2023-05-09"})
    assert "time" in error.value.message
    assert len(mem.episode_facts(SESSION["id"])) == 1  # nothing of the refused batch was written
    mem.store_many(TURNS[1:], episode={"id": SESSION["id"], "kind": "conversation"})
    assert len(mem.episode_facts(SESSION["id"])) == 3


@pytest.mark.parametrize(
    ("episode", "field"),
    [
        ("", "episode"),
        ({"kind": "conversation"}, "episode"),
        ({"id": "x", "kind": "podcast"}, "episode.kind"),
        ({"id": "x", "time": "last May"}, "episode.time"),
        ({"id": "x", "metadata": ["not", "an", "object"]}, "episode.metadata"),
        ({"id": "x", "colour": "blue"}, "episode"),
        (42, "episode"),
    ],
)
def test_bad_episodes_are_refused_and_nothing_is_written(
    mem: Memory, episode: object, field: str
) -> None:
    with pytest.raises(InvalidInput) as error:
        mem.store_many(TURNS, episode=episode)  # type: ignore[arg-type]
    assert error.value.field == field
    assert mem.facts().items == [] and mem.episodes() == []


def test_an_unknown_episode_is_none_or_not_found(mem: Memory) -> None:
    assert mem.episode("nope") is None
    with pytest.raises(NotFound):
        mem.episode_facts("nope")


def test_a_duplicate_stays_in_the_episode_it_was_first_written_with(mem: Memory) -> None:
    [first] = mem.store_many(TURNS[:1], episode="monday")
    [again] = mem.store_many(TURNS[:1], episode="tuesday")
    assert again.action == "NOOP" and again.fact is not None and first.fact is not None
    assert again.fact.episode_id == "monday"
    assert mem.episode_facts("tuesday") == []


def test_episodes_are_listed_by_source_and_time(mem: Memory, clock: Clock) -> None:
    for day, source in ((1, "slack"), (2, "email"), (3, "slack")):
        mem.store_many(
            [{"text": f"note of day {day} from {source}"}],
            episode={"id": f"{source}-{day}", "source": source, "time": f"2024-03-0{day}"},
        )
    assert [e.id for e in mem.episodes()] == ["slack-1", "email-2", "slack-3"]
    assert [e.id for e in mem.episodes(source="slack")] == ["slack-1", "slack-3"]
    assert [e.id for e in mem.episodes(after="2024-03-02", before="2024-03-03")] == ["email-2"]
    with pytest.raises(InvalidInput):
        mem.episodes(limit=0)


def test_episode_facts_follow_the_time_scope(mem: Memory, clock: Clock) -> None:
    results = mem.store_many(TURNS, episode="s")
    before_forget = clock.advance(60)
    clock.advance(60)
    assert results[1].fact is not None
    mem.forget(results[1].fact.id)
    assert len(mem.episode_facts("s")) == 2
    assert len(mem.episode_facts("s", known_at=before_forget)) == 3
    # The next fact of the episode links to the last one not forgotten.
    [last] = mem.store_many([{"text": "Caroline: thanks, see you"}], episode="s")
    assert last.fact is not None and results[2].fact is not None
    assert episode_links(mem, last.fact.id) == [(last.fact.id, results[2].fact.id)]


def test_capture_records_the_turns_episode(mem: Memory) -> None:
    captured = mem.capture(
        [{"role": "user", "content": "I prefer dark mode in every editor."}], episode="turn-1"
    )
    stored = [c for c in captured if c.fact is not None]
    assert stored and all(c.fact is not None and c.fact.episode_id == "turn-1" for c in stored)
    assert mem.episode("turn-1") is not None


@pytest.mark.in_process("export_jsonl is not in the GraphQL API")
def test_an_export_keeps_episodes_and_imports_them_back(
    mem: Memory, tmp_path: Path, clock: Clock
) -> None:
    mem.store_many(TURNS, episode=SESSION)
    out = io.StringIO()
    mem.export_jsonl(out)
    with Memory.open(tmp_path / "copy", settings=Settings(embedder="hash"), clock=clock) as copy:
        copy.import_jsonl(io.StringIO(out.getvalue()))
        assert copy.episode(SESSION["id"]) == mem.episode(SESSION["id"])
        assert [f.id for f in copy.episode_facts(SESSION["id"])] == [
            f.id for f in mem.episode_facts(SESSION["id"])
        ]


def test_graphql_mcp_and_cli_record_and_read_episodes(
    app: Starlette, data_dir: Path, clock: Clock
) -> None:
    with InProcess(app) as api:
        stored = api.data(
            """mutation($inputs: [FactInput!]!, $episode: EpisodeInput) {
                storeFacts(inputs: $inputs, episode: $episode) {
                    results { fact { id episodeId } } error { code } } }""",
            {"inputs": TURNS, "episode": {**SESSION, "metadata": {"n": 1}}},
        )["storeFacts"]
        ids = [r["fact"]["id"] for r in stored["results"]]
        assert {r["fact"]["episodeId"] for r in stored["results"]} == {SESSION["id"]}
        read = api.data(
            """query($id: String!, $fact: ID!) {
                episode(id: $id) { kind source time metadata facts { id } }
                fact(id: $fact) { episode { id } }
                episodes(source: "chat-42") { id } }""",
            {"id": SESSION["id"], "fact": ids[0]},
        )
        assert read["episode"] == {
            "kind": "conversation",
            "source": "chat-42",
            "time": "2023-05-08T13:56:00Z",
            "metadata": {"n": 1},
            "facts": [{"id": i} for i in ids],
        }
        assert read["fact"]["episode"] == {"id": SESSION["id"]}
        assert read["episodes"] == [{"id": SESSION["id"]}]
        clash = api.data(
            """mutation($inputs: [FactInput!]!, $episode: EpisodeInput) {
                storeFacts(inputs: $inputs, episode: $episode) { error { code } } }""",
            {
                "inputs": [{"text": "another turn"}],
                "episode": {"id": SESSION["id"], "kind": "other"},
            },
        )["storeFacts"]
        assert clash["error"]["code"] == "CONFLICT"
    result = CliRunner().invoke(
        cli,
        [
            "--data-dir",
            str(data_dir),
            "store",
            "Notes from the standup",
            "--episode",
            "standup",
            "--json",
        ],
        env={"GRAPHMEM_EMBEDDER": "hash"},
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        cli,
        ["--data-dir", str(data_dir), "episode", "standup", "--json"],
        env={"GRAPHMEM_EMBEDDER": "hash"},
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["id"] == "standup" and [f["text"] for f in shown["facts"]] == [
        "Notes from the standup"
    ]


def test_the_mcp_tools_take_an_episode(mem: Memory) -> None:
    _, captured = tools.capture(
        mem,
        tools.CaptureArgs.model_validate(
            {
                "messages": [{"role": "user", "content": "I prefer tea over coffee."}],
                "episode": "turn-7",
            }
        ),
    )
    assert captured["results"][0]["fact"]["episode_id"] == "turn-7"
    _, stored = tools.store(
        mem, tools.StoreArgs(text="The standup moved to 10am", episode="turn-7")
    )
    assert stored["fact"]["episode_id"] == "turn-7"
    assert [f.text for f in mem.episode_facts("turn-7")] == [
        "I prefer tea over coffee.",
        "The standup moved to 10am",
    ]


def test_an_episode_link_takes_over_the_similarity_link_of_the_same_pair(mem: Memory) -> None:
    results = mem.store_many(
        [{"text": "Cy note 1 about the garden"}, {"text": "Cy note 1 about the garden too"}],
        episode="cy",
    )
    first, second = (r.fact for r in results)
    assert first is not None and second is not None
    [link] = [k for k in mem.links(second.id, direction="OUT") if k.target_id == first.id]
    assert (link.origin, link.strength) == ("episode", 1.0)


def test_an_episode_with_a_stated_time_dates_its_facts_and_time_words_find_them(
    mem: Memory, clock: Clock
) -> None:
    """A conversation of May 2023 stored today through its episode alone: its facts are dated
    by the episode's time (source date and the start of their valid time), so "in May 2023"
    finds them first; a fact's own date wins, and an episode without a stated time dates
    nothing (its facts are valid from when they were written)."""
    may = {"id": "chat-7/may", "time": "2023-05-08T13:56:00Z"}
    mem.store_many([{"text": "Caroline went hiking with her family"}], episode=may)
    mem.store_many(
        [{"text": "Caroline went hiking with her friends"}],
        episode={"id": "chat-7/june", "time": "2024-06-02T10:00:00Z"},
    )
    mem.store_many(
        [{"text": "Caroline went hiking with her dog", "source_date": "2024-01-03"}],
        episode={"id": "chat-7/late", "time": "2023-05-20"},
    )
    mem.store_many([{"text": "Caroline went hiking alone"}], episode="chat-7/undated")
    [family] = mem.episode_facts("chat-7/may")
    stated = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert family.source_date == stated and family.valid_from == stated
    [dog] = mem.episode_facts("chat-7/late")
    assert dog.source_date == datetime(2024, 1, 3, tzinfo=UTC) == dog.valid_from
    [alone] = mem.episode_facts("chat-7/undated")
    assert alone.source_date is None and alone.valid_from.timestamp() == clock()

    hits = mem.search("Where did Caroline go hiking in May 2023?", limit=4)
    assert hits[0].fact.id == family.id and hits[0].time_hint is not None
    assert len(hits) == 4  # the others are ranked after it, none dropped
    # As of a day in May 2023 only the facts valid then are seen.
    then = mem.search("Caroline hiking", as_of="2023-05-09", limit=4)
    assert [h.fact.id for h in then] == [family.id]


ADOPTION = [
    {"text": "Melanie: How is the adoption going with the agency?"},
    {"text": "Caroline: Great news, we were approved last Friday!"},
    {"text": "Caroline: I bought new running shoes."},
]
OTHERS = [
    {"text": "Jon: my cousin was approved for a loan"},
    {"text": "Jon: Friday is pizza night"},
    {"text": "Gina: the adoption of the new policy"},
]
QUESTION = "How is the adoption going with the agency?"


def _texts(hits: list[Any]) -> list[str]:
    return [h.fact.text for h in hits]


def test_search_lets_adjacent_turns_of_an_episode_lend_each_other_relevance(mem: Memory) -> None:
    """The answer is the reply to the turn the question matches, and shares no word with the
    question: by default it ranks right after that turn, above a fact of another source that
    shares a word; with episode_links off it ranks by its own relevance alone."""
    mem.store_many(ADOPTION, episode="chat/1")
    mem.store_many(OTHERS)
    question, answer = ADOPTION[0]["text"], ADOPTION[1]["text"]
    assert _texts(mem.search(QUESTION, limit=3)) == [question, answer, OTHERS[2]["text"]]
    alone = _texts(mem.search(QUESTION, limit=6, episode_links=False))
    assert alone[:2] == [question, OTHERS[2]["text"]] and alone.index(answer) > 2
    # Recall ranks the same way: the answer is in the block only with the episode's links.
    assert answer in mem.recall(QUESTION, max_tokens=50).context
    assert answer not in mem.recall(QUESTION, max_tokens=50, episode_links=False).context
    # With graph_depth the episode links are followed like any other, unless switched off.
    linked = mem.search(QUESTION, limit=2, graph_depth=1, episode_links=False)
    assert all(h.depth == 0 for h in linked)


def test_links_of_other_origins_lend_nothing_by_default(mem: Memory) -> None:
    """The same pair linked by hand, outside an episode, changes nothing without graph_depth."""
    results = mem.store_many([*ADOPTION, *OTHERS])
    question, answer = (r.fact for r in results[:2])
    assert question is not None and answer is not None
    mem.link(answer.id, question.id, "RELATED_TO")
    texts = _texts(mem.search(QUESTION, limit=6))
    assert texts[:2] == [question.text, OTHERS[2]["text"]] and texts.index(answer.text) > 2
    assert _texts(mem.search(QUESTION, limit=2, graph_depth=1))[1] == answer.text


def test_graphql_mcp_and_cli_search_with_and_without_episode_links(
    app: Starlette, settings: Settings
) -> None:
    answer, other = ADOPTION[1]["text"], OTHERS[2]["text"]
    query = """query($q: String!, $on: Boolean!) {
        search(query: $q, limit: 2, episodeLinks: $on) { fact { text } } }"""
    with InProcess(app) as api:
        api.data(
            """mutation($a: [FactInput!]!, $b: [FactInput!]!) {
                a: storeFacts(inputs: $a, episode: {id: "chat/1"}) { error { code } }
                b: storeFacts(inputs: $b) { error { code } } }""",
            {"a": ADOPTION, "b": OTHERS},
        )
        for on, second in ((True, answer), (False, other)):
            hits = api.data(query, {"q": QUESTION, "on": on})["search"]
            assert hits[1]["fact"]["text"] == second
    # The command line reads at the real clock: its own namespace, written at it.
    folder = settings.data_dir
    with Memory.open(folder, namespace="cli", settings=settings) as own:
        own.store_many(ADOPTION, episode="chat/1")
        own.store_many(OTHERS)
        for on, second in ((True, answer), (False, other)):
            args = tools.SearchArgs(query=QUESTION, limit=2, episode_links=on)
            assert tools.search(own, args)[1]["hits"][1]["fact"]["text"] == second
    for flags, second in (
        (["--limit", "2"], answer),
        (["--limit", "2", "--no-episode-links"], other),
    ):
        result = CliRunner().invoke(
            cli,
            ["--data-dir", str(folder), "-n", "cli", "search", QUESTION, "--json", *flags],
            env={"GRAPHMEM_EMBEDDER": "hash"},
        )
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)[1]["fact"]["text"] == second
