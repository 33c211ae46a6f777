"""Windows of turns: consecutive facts of an episode searched together, each window's score lent
to the turns it holds, never from a text that is gone or not yet known."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import cast

import pytest
from click.testing import CliRunner

from graphmem import Memory, Settings
from graphmem.cli import cli
from graphmem.storage.sql import keyword
from graphmem.storage.sql.store import SQLTransaction
from graphmem.storage.sql.windows import WINDOW_TURNS, Window, cut

from ..support.clock import Clock

pytestmark = [pytest.mark.engines, pytest.mark.quick_engines, pytest.mark.client_api]

#: The question's two words are two turns apart in the conversation; elsewhere, facts match each
#: word alone, and a chat about something else is cut into windows too.
TURNS = [
    "Ana: where is the marathon?",
    "Bo: let me check the calendar",
    "Bo: in Porto, in October",
    "Ana: great, I will book a train",
]
OTHERS = [
    {"text": "Porto wine is sweet"},
    {"text": "marathon shoes on sale"},
    {"text": "an article on the long history of the marathon and of the runners who won it"},
    {"text": "a guide to Porto, its bridges, its river, its old town and its many bookshops"},
]
CHAT = [
    "Cy: did you water the plants?",
    "Di: yes, and I fed the cat",
    "Cy: the tomatoes look ripe",
    "Di: we should pick them tomorrow",
    "Cy: and the basil too",
]
QUESTION = "marathon Porto"


def store_chat(mem: Memory) -> list[str]:
    mem.store_many(OTHERS)
    mem.store_many([{"text": t} for t in CHAT], episode={"id": "chat-0"})
    results = mem.store_many([{"text": t} for t in TURNS], episode={"id": "chat-1"})
    return [r.fact.id for r in results if r.fact is not None]


def top(mem: Memory, n: int = 2, **kwargs: object) -> set[str]:
    """The ``n`` best by keywords (the hash embedder's vectors would only add noise)."""
    hits = mem.search(QUESTION, limit=n, mode="fts", **kwargs)  # type: ignore[arg-type]
    return {h.fact.text for h in hits}


SINGLE = {OTHERS[0]["text"], OTHERS[1]["text"]}


def test_a_question_whose_words_are_turns_apart_finds_both_turns(mem: Memory) -> None:
    store_chat(mem)
    assert top(mem) == {TURNS[0], TURNS[2]}
    # Without evidence from the episode, the facts repeating one word each rank first.
    assert top(mem, episode_links=False) == SINGLE


def test_a_window_lends_nothing_once_a_turn_it_holds_is_forgotten(mem: Memory) -> None:
    ids = store_chat(mem)
    mem.forget(ids[1])
    assert top(mem) == SINGLE


def test_a_search_of_the_past_ranks_as_a_search_did_then(mem: Memory, clock: Clock) -> None:
    mem.store_many(OTHERS)
    mem.store_many([{"text": t} for t in CHAT], episode={"id": "chat-0"})
    mem.store_many([{"text": t} for t in TURNS[:2]], episode={"id": "chat-1"})
    then = top(mem, 3)
    before = clock.advance(60)
    clock.advance(60)
    mem.store_many([{"text": t} for t in TURNS[2:]], episode={"id": "chat-1"})
    # The windows holding the turn that names Porto were not known then: they lend nothing.
    assert top(mem, 3, known_at=before) == then


def test_facts_a_window_brings_in_pass_the_search_filters(mem: Memory) -> None:
    mem.store_many(OTHERS)
    mem.store_many([{"text": t} for t in CHAT], episode={"id": "chat-0"})
    mem.store_many(
        [{"text": t, "entity": t.split(":")[0].lower()} for t in TURNS], episode={"id": "chat-1"}
    )
    hits = mem.search(QUESTION, limit=10, entity="ana")
    assert {h.fact.text for h in hits} <= {TURNS[0], TURNS[3]}
    assert hits and hits[0].fact.text == TURNS[0]


@pytest.mark.in_process("reads the windows through the store")
def test_each_turn_ends_a_window_of_the_turns_before_it(mem: Memory) -> None:
    ids = store_chat(mem)
    more = mem.store_many([{"text": "Bo: see you there"}], episode={"id": "chat-1"})
    assert more[0].fact is not None
    ids.append(more[0].fact.id)
    held = mem._store.windows_holding(ids)
    expected = {tuple(ids[max(0, i - WINDOW_TURNS + 1) : i + 1]) for i in range(1, len(ids))}
    assert set(held.values()) == expected


@pytest.mark.in_process("reads the windows through the store")
def test_a_word_in_too_many_facts_ranks_no_window(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Windows are ranked by the query's rarest words within the keyword budget; a word over
    it alone ranks none (a query of everyday words reads no long list of windows)."""
    store_chat(mem)  # "marathon" in 3 facts: 12 windows at most; "Porto" in 3 too
    mem.store_many([{"text": "Ana: October again"}], episode="chat-1")
    monkeypatch.setattr(keyword, "RANKING_BUDGET", 8)
    assert mem._store.window_matches("marathon", 10) == {}
    assert mem._store.window_matches("weekend October", 10) != {}  # October: 2 facts


@pytest.mark.in_process("reads the windows through the store")
def test_a_purge_leaves_no_window_with_the_erased_text(mem: Memory) -> None:
    ids = store_chat(mem)
    assert mem._store.window_matches("Porto October", 10)
    mem.purge(ids[2])
    assert mem._store.window_matches("October", 10) == {}
    # The other turns are cut again into windows, without the erased one.
    held = set(mem._store.windows_holding([ids[0]]).values())
    assert held == {(ids[0], ids[1]), (ids[0], ids[1], ids[3])}


@pytest.mark.in_process("reads the windows through the store")
def test_an_import_cuts_the_windows_of_its_episodes(
    mem: Memory, settings: Settings, clock: Clock
) -> None:
    ids = store_chat(mem)
    out = io.StringIO()
    mem.export_jsonl(out)
    other = settings.model_copy(update={"data_dir": settings.data_dir / "copy"})
    with Memory.open(other.data_dir, settings=other, namespace="copy", clock=clock) as copy:
        copy.import_jsonl(io.StringIO(out.getvalue()))
        assert set(copy._store.windows_holding([ids[0]]).values()) == {
            tuple(ids[:2]),
            tuple(ids[:3]),
            tuple(ids[:4]),
        }
        assert top(copy) == {TURNS[0], TURNS[2]}


@pytest.mark.in_process("reads the windows through the store")
def test_backfill_windows_cuts_the_windows_of_episodes_stored_without_them(mem: Memory) -> None:
    ids = store_chat(mem)
    _drop_windows(mem)
    assert mem._store.windows_holding(ids) == {}
    assert top(mem) == SINGLE
    assert mem.backfill_windows() == {"episodes": 2, "windows": 7}
    assert top(mem) == {TURNS[0], TURNS[2]}


def test_the_command_line_backfills_windows(data_dir: Path) -> None:
    with Memory.open(data_dir, settings=Settings(embedder="hash")) as mem:
        store_chat(mem)
        _drop_windows(mem)
    result = CliRunner().invoke(
        cli,
        ["--data-dir", str(data_dir), "backfill-windows", "--json"],
        env={"GRAPHMEM_EMBEDDER": "hash"},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"episodes": 2, "windows": 7}
    with Memory.open(data_dir, settings=Settings(embedder="hash")) as mem:
        assert top(mem) == {TURNS[0], TURNS[2]}


def _drop_windows(mem: Memory) -> None:
    """As a database written before windows were cut holds none."""
    with mem._store.transaction() as tx:
        conn = cast(SQLTransaction, tx).conn
        conn.execute("DELETE FROM window_facts")
        conn.execute("DELETE FROM windows")


def test_a_window_is_cut_only_where_a_fact_has_turns_before_it() -> None:
    order = [(f"f{i}", f"turn {i}") for i in range(6)]
    windows = cut(order, first=0)
    assert [w.end_id for w in windows] == ["f1", "f2", "f3", "f4", "f5"]
    assert windows[-1] == Window("f5", ("f2", "f3", "f4", "f5"), "turn 2 turn 3 turn 4 turn 5")
    assert cut(order[:1], first=0) == []
    assert [w.end_id for w in cut(order, first=4)] == ["f4", "f5"]
