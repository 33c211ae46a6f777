"""The keyword leg's bounded ranking: common words score but do not select, with exact bm25."""

from __future__ import annotations

import itertools
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from graphmem import Memory, Settings, keyword
from graphmem.timehints import TimeHint


@pytest.fixture
def crowded(mem: Memory) -> Memory:
    """60 of 160 facts mention the platform team; 4 of them, and 2 others, mention Zephyr."""
    facts = [{"text": f"Member {n} of the platform team owns service {n}"} for n in range(60)]
    for n in range(0, 40, 10):
        facts[n]["text"] += " and the Zephyr gateway"
    facts += [
        {"text": "Zephyr is the name of the new gateway"},
        {"text": "The Zephyr rollout starts on Monday"},
    ]
    facts += [{"text": f"Invoice {n} was paid on day {n}"} for n in range(98)]
    assert {r.action for r in mem.store_many(facts)} == {"ADD"}
    return mem


def _fts(mem: Memory, query: str, limit: int) -> list[tuple[str, float | None]]:
    return [(h.fact.text, h.fts_score) for h in mem.search(query, mode="fts", limit=limit)]


def test_a_small_budget_ranks_exactly_like_the_full_query(
    crowded: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = _fts(crowded, "zephyr platform team", limit=6)
    monkeypatch.setattr(keyword, "RANKING_BUDGET", 10)  # "platform" and "team" become scoring-only
    split = _fts(crowded, "zephyr platform team", limit=6)
    assert [t for t, _ in split] == [t for t, _ in exact]
    assert [s for _, s in split] == pytest.approx([s for _, s in exact])
    assert all("Zephyr" in t for t, _ in split)
    # the scoring words still add to the score of the facts that contain them
    alone = dict(_fts(crowded, "zephyr", limit=6))
    for text, score in split:
        assert (
            (score or 0) > (alone[text] or 0)
            if "team" in text
            else score == pytest.approx(alone[text])
        )


def test_facts_with_only_common_words_fill_up_when_the_rare_ones_run_out(
    crowded: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword, "RANKING_BUDGET", 10)
    hits = _fts(crowded, "zephyr platform team", limit=20)
    assert len(hits) == 20
    assert sum("Zephyr" in t for t, _ in hits) == 6
    assert all("Zephyr" in t for t, _ in hits[:6])  # every rare match outranks the fill


def test_the_split_respects_visibility(crowded: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keyword, "RANKING_BUDGET", 10)
    for hit in crowded.search("zephyr", mode="fts", limit=10):
        crowded.forget(hit.fact.id)
    hits = _fts(crowded, "zephyr platform team", limit=5)
    assert len(hits) == 5 and not any("Zephyr" in t for t, _ in hits)


def test_results_stay_complete_as_words_become_common(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keyword, "RANKING_BUDGET", 10)
    mem.store_many([{"text": f"Quartz note {n}"} for n in range(5)])
    assert len(_fts(mem, "quartz", limit=50)) == 5
    mem.store_many([{"text": f"Quartz memo number {n}"} for n in range(40)])
    # "quartz" is now common, "memo" too: one of them still selects, nothing is lost
    assert len(_fts(mem, "quartz memo", limit=50)) == 45


def test_a_word_that_matches_nothing_changes_nothing(
    crowded: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = _fts(crowded, "zephyr platform team", limit=8)
    monkeypatch.setattr(keyword, "RANKING_BUDGET", 10)
    split = _fts(crowded, "quokka zephyr platform team", limit=8)
    assert [t for t, _ in split] == [t for t, _ in exact]
    assert [s for _, s in split] == pytest.approx([s for _, s in exact])
    assert len(_fts(crowded, "quokka platform", limit=80)) == 60


def test_when_every_word_is_common_the_facts_with_the_rarest_words_together_select(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large memory asked in everyday words: each word alone matches more than the budget.
    The facts having the rarest words together are ranked first, by the full query's bm25;
    the others follow if asked for, by the same bm25, and none is lost. (The SQLite store's
    FTS5 ranker, on a SQLite memory whatever ``--store`` says; the PostgreSQL store's
    counterpart is tests/test_postgres.py's.)"""
    with Memory.open(data_dir, settings=Settings(embedder="hash", data_dir=data_dir)) as mem:
        rows = [{"text": f"Quartz memo number {n}"} for n in range(30)]
        rows += [{"text": f"Quartz note {n}"} for n in range(20)]
        rows += [{"text": f"Memo about lunch {n}"} for n in range(20)]
        rows += [{"text": f"Budget review {n}"} for n in range(12)]
        rows += [{"text": f"Quartz memo about the budget, draft {n}"} for n in range(3)]
        mem.store_many(rows)
        exact = _fts(mem, "quartz memo budget", limit=85)
        monkeypatch.setattr(keyword, "RANKING_BUDGET", 10)  # every word matches more than 10
        calls: list[list[str]] = []
        original = keyword.KeywordRanker._all_common

        def spy(self: keyword.KeywordRanker, *args: Any) -> Any:
            calls.append(args[2])
            return original(self, *args)

        monkeypatch.setattr(keyword.KeywordRanker, "_all_common", spy)
        split = _fts(mem, "quartz memo budget", limit=85)
        assert calls == [['"budget"', '"quartz"', '"memo"']]  # rarest first (quoted for FTS5)
        assert len(split) == 85  # nothing lost, every score the full query's
        assert [s for _, s in split] == pytest.approx([s for _, s in exact])
        # The ranker yields the facts with "budget" and "quartz" together first: a caller that
        # needs only a few (at a million facts, the search's 200 candidates) stops there.
        conn = sqlite3.connect(data_dir / "default" / "graphmem.sqlite3")
        first = [
            seq
            for seq, _ in itertools.islice(
                keyword.KeywordRanker().ranked(conn, "quartz memo budget"), 3
            )
        ]
        texts = {
            conn.execute("SELECT text FROM facts WHERE seq = ?", [seq]).fetchone()[0]
            for seq in first
        }
        assert all("budget" in t and "Quartz" in t for t in texts) and len(texts) == 3
        conn.close()


def test_counts_are_taken_once_until_the_memory_grows(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The words' counts steering the split, and the count of the rarest words together, are
    cached: asking again counts nothing; a tenth more facts counts afresh."""
    with Memory.open(data_dir, settings=Settings(embedder="hash", data_dir=data_dir)) as mem:
        mem.store_many([{"text": f"Quartz memo number {n}"} for n in range(30)])
        mem.store_many([{"text": f"Budget memo about quartz {n}"} for n in range(20)])
    monkeypatch.setattr(keyword, "RANKING_BUDGET", 10)  # every word is common: words together
    conn = sqlite3.connect(data_dir / "default" / "graphmem.sqlite3")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    ranker = keyword.KeywordRanker()

    def counts() -> int:
        statements.clear()
        list(itertools.islice(ranker.ranked(conn, "quartz memo budget"), 5))
        return sum("count(*)" in s for s in statements)

    # three words, then "budget" with "quartz" (20 facts), then with "memo" too
    assert counts() == 5
    assert counts() == 0
    with Memory.open(data_dir, settings=Settings(embedder="hash", data_dir=data_dir)) as mem:
        mem.store_many([{"text": f"Quartz note {n}"} for n in range(6)])  # 50 -> 56 facts
    assert counts() == 5
    conn.close()


def test_a_period_holding_no_facts_ranks_nothing(data_dir: Path) -> None:
    """Time words whose period holds no fact ("on 22 Oct" of a year with none) rank nothing:
    ranking the period's matches walks every match of the query's words, which at a million
    facts took over 0.4 s to find none."""
    with Memory.open(data_dir, settings=Settings(embedder="hash", data_dir=data_dir)) as mem:
        mem.store_many(
            [{"text": f"Invoice batch {n} reviewed", "source_date": "2024-10-22"} for n in range(5)]
        )
    conn = sqlite3.connect(data_dir / "default" / "graphmem.sqlite3")
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    ranker = keyword.KeywordRanker()
    day = datetime(2024, 10, 22, tzinfo=UTC).timestamp()
    held = TimeHint("on 22 Oct 2024", day, day + 86_400, None)
    assert len(list(ranker.ranked(conn, "invoice batch", held))) == 5
    assert any("MATCH" in s for s in statements)
    statements.clear()
    empty = TimeHint("on 22 Oct 2025", day + 365 * 86_400, day + 366 * 86_400, None)
    assert list(ranker.ranked(conn, "invoice batch", empty)) == []
    assert statements and not any("MATCH" in s for s in statements)
    conn.close()
