"""The keyword leg's bounded ranking: common words score but do not select, with exact bm25."""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from graphmem import Memory, Settings
from graphmem.storage.sql import keyword as plan
from graphmem.storage.sqlite import keyword
from graphmem.storage.sqlite.database import SQLiteConnection
from graphmem.timehints import TimeHint

pytestmark = pytest.mark.engines


def _connect(data_dir: Path) -> SQLiteConnection:
    """A connection to the default namespace's file, as the store opens them (its dialect)."""
    return sqlite3.connect(data_dir / "default" / "graphmem.sqlite3", factory=SQLiteConnection)


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
    monkeypatch.setattr(plan, "RANKING_BUDGET", 10)  # "platform" and "team" become scoring-only
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
    monkeypatch.setattr(plan, "RANKING_BUDGET", 10)
    hits = _fts(crowded, "zephyr platform team", limit=20)
    assert len(hits) == 20
    assert sum("Zephyr" in t for t, _ in hits) == 6
    assert all("Zephyr" in t for t, _ in hits[:6])  # every rare match outranks the fill


def test_the_split_respects_visibility(crowded: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan, "RANKING_BUDGET", 10)
    for hit in crowded.search("zephyr", mode="fts", limit=10):
        crowded.forget(hit.fact.id)
    hits = _fts(crowded, "zephyr platform team", limit=5)
    assert len(hits) == 5 and not any("Zephyr" in t for t, _ in hits)


def test_results_stay_complete_as_words_become_common(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(plan, "RANKING_BUDGET", 10)
    mem.store_many([{"text": f"Quartz note {n}"} for n in range(5)])
    assert len(_fts(mem, "quartz", limit=50)) == 5
    mem.store_many([{"text": f"Quartz memo number {n}"} for n in range(40)])
    # "quartz" is now common, "memo" too: one of them still selects, nothing is lost
    assert len(_fts(mem, "quartz memo", limit=50)) == 45


def test_a_word_that_matches_nothing_changes_nothing(
    crowded: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    exact = _fts(crowded, "zephyr platform team", limit=8)
    monkeypatch.setattr(plan, "RANKING_BUDGET", 10)
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
    counterpart is tests/storage/test_postgres_store.py's.)"""
    with Memory.open(data_dir, settings=Settings(embedder="hash", data_dir=data_dir)) as mem:
        rows = [{"text": f"Quartz memo number {n}"} for n in range(30)]
        rows += [{"text": f"Quartz note {n}"} for n in range(20)]
        rows += [{"text": f"Memo about lunch {n}"} for n in range(20)]
        rows += [{"text": f"Budget review {n}"} for n in range(12)]
        rows += [{"text": f"Quartz memo about the budget, draft {n}"} for n in range(3)]
        mem.store_many(rows)
        exact = _fts(mem, "quartz memo budget", limit=85)
        monkeypatch.setattr(plan, "RANKING_BUDGET", 10)  # every word matches more than 10
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
        conn = _connect(data_dir)
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
    monkeypatch.setattr(plan, "RANKING_BUDGET", 10)  # every word is common: words together
    conn = _connect(data_dir)
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
    conn = _connect(data_dir)
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


def _period_ranker(
    data_dir: Path, facts: list[dict[str, Any]]
) -> tuple[SQLiteConnection, list[str], TimeHint]:
    """A store of ``facts`` (those dated 3 March 2024 form the period), a connection tracing
    its statements into the list, and the period."""
    with Memory.open(data_dir, settings=Settings(embedder="hash", data_dir=data_dir)) as mem:
        mem.store_many(facts, autolink=False)
    conn = _connect(data_dir)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    day = datetime(2024, 3, 3, tzinfo=UTC).timestamp()
    return conn, statements, TimeHint("on 3 March 2024", day, day + 86_400, None)


def test_a_short_periods_matches_are_scored_from_its_facts_alone_as_fts5_scores_them(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the query's words are common against the period (SCORE_HERE_RATIO), the period's
    matches are ranked by graphmem.storage.sqlite.bm25 without walking the words' lists: the same facts,
    the same order, FTS5's scores. Here: words in every column, inflections that stem alike,
    accents written composed and decomposed, case, a word in most facts (idf floored), a word
    twice in a fact, and a fact of the period that matches nothing."""
    period: list[dict[str, Any]] = [
        {"text": "Ana reviewed the invoice batch", "source_date": "2024-03-03"},
        {"text": "Invoice review: the invoice INVOICE total", "source_date": "2024-03-03"},
        {"text": "Lunch with the team", "source_date": "2024-03-03"},
        {
            "text": "Payment run finished",
            "entity": "Invoice desk",
            "key": "reviews",
            "value": "naïve totals",
            "tags": ["invoice"],
            "context": "quarter close review",
            "source_date": "2024-03-03",
        },
        {"text": "Cafe\u0301 receipts were nai\u0308ve guesses", "source_date": "2024-03-03"},
        {
            "text": "A long note " + "about nothing much " * 12 + "and an invoice",
            "source_date": "2024-03-03",
        },
    ]
    others = [
        {"text": f"Invoice {n} of the batch was reviewed by the team", "source_date": "2024-02-01"}
        for n in range(40)
    ] + [{"text": f"Café visit {n}", "source_date": "2024-01-05"} for n in range(5)]
    conn, statements, day = _period_ranker(data_dir, period + others)
    query = "invoice reviews naïve café review batch"

    def ranked(ratio: int) -> list[tuple[int, float]]:
        monkeypatch.setattr(keyword, "SCORE_HERE_RATIO", ratio)
        statements.clear()
        return list(ranker.ranked(conn, query, day))

    ranker = keyword.KeywordRanker()
    by_fts5 = ranked(10**9)
    assert any("bm25(" in s for s in statements)
    here = ranked(0)
    assert not any("MATCH" in s or "bm25(" in s for s in statements)  # counts cached, no walk
    assert len(by_fts5) == 5  # the lunch matches nothing
    assert [seq for seq, _ in here] == [seq for seq, _ in by_fts5]
    assert [score for _, score in here] == pytest.approx([score for _, score in by_fts5], rel=1e-9)
    conn.close()


def test_a_query_word_of_two_terms_is_ranked_by_fts5(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query word the index splits in two ("build_id": "build", "id") must match as a phrase,
    in order, which only FTS5 ranks: the period's matches are ranked by it, correctly."""
    period = [
        {"text": "The build_id of the release", "source_date": "2024-03-03"},
        {"text": "The id of the build", "source_date": "2024-03-03"},
        {"text": "A release note", "source_date": "2024-03-03"},
    ]
    conn, statements, day = _period_ranker(data_dir, period)
    monkeypatch.setattr(keyword, "SCORE_HERE_RATIO", 0)
    hits = list(keyword.KeywordRanker().ranked(conn, "build_id release", day))
    assert any("bm25(" in s for s in statements)
    texts = dict(conn.execute("SELECT seq, text FROM facts"))
    assert [texts[seq] for seq, _ in hits][:2] == [
        "The build_id of the release",
        "A release note",
    ]
    assert "The id of the build" not in [texts[seq] for seq, _ in hits]
    conn.close()


def test_counts_follow_deletions_and_never_exceed_the_facts_left(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge shrinks the index without moving the newest position: the cached counts are
    taken again once a tenth of the facts went, and a count taken before one fact went (in
    every fact, so more than the facts left) is no error. A period's scores stay FTS5's."""
    facts = [
        {"text": f"Invoice {n} reviewed" + " twice" * (n % 3), "source_date": "2024-03-03"}
        for n in range(20)
    ] + [{"text": f"Invoice {n} paid", "source_date": "2024-02-01"} for n in range(20)]
    conn, _, day = _period_ranker(data_dir, facts)
    ranker = keyword.KeywordRanker()

    def both() -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        monkeypatch.setattr(keyword, "SCORE_HERE_RATIO", 10**9)
        by_fts5 = list(keyword.KeywordRanker().ranked(conn, "invoice reviewed twice", day))
        monkeypatch.setattr(keyword, "SCORE_HERE_RATIO", 0)
        return by_fts5, list(ranker.ranked(conn, "invoice reviewed twice", day))

    by_fts5, here = both()  # counts cached: "invoice" in all 40 facts
    assert [seq for seq, _ in here] == [seq for seq, _ in by_fts5]
    ids = [r[0] for r in conn.execute("SELECT id FROM facts ORDER BY seq")]
    settings = Settings(embedder="hash", data_dir=data_dir)
    with Memory.open(data_dir, settings=settings) as mem:
        mem.purge(ids=[ids[0]])  # counts kept: a word's idf is off by the count it moved
    by_fts5, here = both()
    assert sorted(seq for seq, _ in here) == sorted(seq for seq, _ in by_fts5)
    with Memory.open(data_dir, settings=settings) as mem:
        mem.purge(ids=ids[1:8])  # a sixth of the facts: counted again, FTS5's scores
    by_fts5, here = both()
    assert len(here) == 12
    assert [seq for seq, _ in here] == [seq for seq, _ in by_fts5]
    assert [s for _, s in here] == pytest.approx([s for _, s in by_fts5], rel=1e-9)
    conn.close()


def test_a_count_being_taken_is_waited_for_not_taken_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A search's two keyword legs ask for the same words' counts at once: one thread counts,
    the other waits for its answer; if that count fails, the waiting thread counts itself."""
    calls: list[str] = []
    fail_first = [True]

    def slow_count(conn: object, match: str) -> int:
        calls.append(match)
        time.sleep(0.3)
        if fail_first[0]:
            fail_first[0] = False
            raise sqlite3.OperationalError("interrupted")
        return 7

    ranker = keyword.KeywordRanker()
    results: dict[str, object] = {}

    def ask(name: str) -> None:
        try:
            results[name] = ranker._count(None, '"invoice"', 100)  # type: ignore[arg-type]
        except sqlite3.OperationalError as exc:
            results[name] = exc

    monkeypatch.setattr(keyword, "_count", slow_count)
    for failing in (True, False):
        fail_first[0] = failing
        calls.clear()
        ranker = keyword.KeywordRanker()
        threads = [threading.Thread(target=ask, args=(n,)) for n in ("a", "b")]
        threads[0].start()
        time.sleep(0.05)  # "a" is counting when "b" asks
        threads[1].start()
        for t in threads:
            t.join()
        if failing:  # "a" failed; "b" waited, then counted itself
            assert isinstance(results["a"], sqlite3.OperationalError)
            assert results["b"] == 7 and len(calls) == 2
        else:
            assert results == {"a": 7, "b": 7} and len(calls) == 1


def test_an_empty_memory_ranks_nothing(data_dir: Path) -> None:
    """A keyword index never written to has an empty averages record: nothing to rank, and
    no error."""
    Memory.open(data_dir, settings=Settings(embedder="hash", data_dir=data_dir)).close()
    conn = _connect(data_dir)
    assert list(keyword.KeywordRanker().ranked(conn, "invoice batch")) == []
    conn.close()
