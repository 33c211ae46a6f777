"""Time words in questions: read as a period of the facts' dates, relative to as_of or now."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from graphmem.server.mcp import tools
from starlette.applications import Starlette

from graphmem import Memory
from graphmem.statedtime import stated_time
from graphmem.timehints import event, understand

from ..support.clock import Clock
from ..support.graphql_clients import InProcess

pytestmark = pytest.mark.client_api

BASE = datetime(2023, 7, 15, 12, tzinfo=UTC).timestamp()


def _day(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("query", "words", "start", "end"),
    [
        (
            "What did Caroline do last week?",
            "last week",
            "2023-07-03",
            "2023-07-10",
        ),
        (
            "Where did Ana live in May 2023?",
            "in May 2023",
            "2023-05-01",
            "2023-06-01",
        ),
        (
            "What happened two years ago?",
            "two years ago",
            "2021-01-01",
            "2022-01-01",
        ),
        (
            "What did they do yesterday?",
            "yesterday",
            "2023-07-14",
            "2023-07-15",
        ),
        (
            "Who did Maria meet on May 3, 2023?",
            "on May 3, 2023",
            "2023-05-03",
            "2023-05-04",
        ),
        ("Where did Ana live before 2020?", "2020", None, "2020-01-01"),
        ("what changed since March 2023", "March 2023", "2023-03-01", None),
        ("music of the 1990s", "the 1990s", "1990-01-01", "2000-01-01"),
    ],
)
def test_time_words_become_a_period_relative_to_the_base(
    query: str, words: str, start: str | None, end: str | None
) -> None:
    hint = understand(query, BASE)
    assert hint is not None
    assert (hint.text, hint.start, hint.end, hint.month) == (
        words,
        None if start is None else _day(start),
        None if end is None else _day(end),
        None,
    )


def test_a_month_without_a_year_is_that_month_of_any_year_and_numbers_are_not_dates() -> None:
    hint = understand("When did Melanie go camping in June?", BASE)
    assert hint is not None and (hint.month, hint.start, hint.end) == (6, None, None)
    assert hint.covers(_day("2019-06-20")) and not hint.covers(_day("2023-07-01"))
    assert not hint.covers(None)  # an undated fact is never in a period
    assert understand("what changed since June", BASE) is not None  # "since June 2023" then
    for query in (
        "How long ago was Caroline's 18th birthday?",
        "What are Melanie's 3 favourite paintings?",
        "When did Melanie paint a sunrise?",
        "the release notes",
        "deploy friday",  # a weekday alone is not a date
        "what day is the standup",
        "what may the team decide",  # the verb, not the month
        "when was auburn last in march madness",
        "who won wimbledon 2017",  # a year naming an edition
        "who won the 2014 world cup",
        "who ran for president in the election of 1892",  # after "of": an edition
        "who has the most caps as of 2016",  # the time the question stands at
        "who is singing the anthem at this year's superbowl",  # an edition
        "what transmission is in a 2000 ford expedition",  # a model year
        "who is opening for pink 2018 in boston",
    ):
        assert understand(query, BASE) is None, query


def test_facts_dated_in_the_period_rank_first_and_none_is_dropped(mem: Memory) -> None:
    mem.store_many(
        [
            {"text": "Caroline went to a pottery class", "source_date": "2023-07-05"},
            {"text": "Caroline went to a painting class", "source_date": "2023-05-02"},
            {"text": "Caroline went to a dance class", "source_date": "2022-01-10"},
        ]
    )
    as_of = "2023-07-12"
    last_week = mem.search("Which class did Caroline go to last week?", as_of=as_of)
    assert last_week[0].fact.text == "Caroline went to a pottery class"
    assert len(last_week) == 3  # the others are still there, below
    assert last_week[0].time_hint is not None and last_week[0].time_hint.text == "last week"
    in_may = mem.search("Which class did Caroline go to in May 2023?", as_of=as_of)
    assert in_may[0].fact.text == "Caroline went to a painting class"
    # relative to as_of: "last week" of 2022-01-15 is the dance class's week
    earlier = mem.search("Which class did Caroline go to last week?", as_of="2022-01-15")
    assert earlier[0].fact.text == "Caroline went to a dance class"
    # off: the words are searched as words, and nothing is understood
    plain = mem.search("Which class did Caroline go to last week?", as_of=as_of, time_hints=False)
    assert all(h.time_hint is None for h in plain)


def test_search_without_time_words_is_unchanged(mem: Memory) -> None:
    mem.store_many(
        [
            {
                "text": f"Note {n}: the team discussed topic {n % 7} at length",
                "source_date": f"2023-0{1 + n % 9}-10",
            }
            for n in range(40)
        ]
    )
    for query in ("what did the team discuss about topic 3", "topic 5 discussion", "team"):
        with_hints = mem.search(query, limit=20)
        without = mem.search(query, limit=20, time_hints=False)
        assert [(h.fact.id, h.score) for h in with_hints] == [(h.fact.id, h.score) for h in without]
        assert all(h.time_hint is None for h in with_hints)


@pytest.mark.in_process("calls the MCP tools in process")
def test_graphql_mcp_and_recall_say_what_was_understood(
    app: Starlette, mem: Memory, clock: Clock
) -> None:
    moved = mem.store("Ana moved to Lisbon", source_date="2023-05-20").fact
    assert moved is not None
    text, found = tools.search(
        mem, tools.SearchArgs(query="where did Ana move in May 2023", as_of="2023-07-01")
    )
    assert text.startswith("Time words understood: 'in May 2023': 2023-05-01T00:00:00Z")
    assert found["hits"][0]["time_hint"]["start"] == "2023-05-01T00:00:00Z"
    recalled = mem.recall("where did Ana move in May 2023", as_of="2023-07-01")
    assert "Ana moved to Lisbon" in recalled.context
    mem.close()
    with InProcess(app) as api:
        data = api.data(
            """{ search(query: "where did Ana move in May 2023", asOf: "2023-07-01") {
                    fact { text } timeHint { text start end month described } }
                 plain: search(query: "where did Ana move in May 2023", asOf: "2023-07-01",
                               timeHints: false) { timeHint { text } }
                 event: search(query: "where did Ana live before she moved?") {
                    timeHint { text end event } } }"""
        )
    assert data["search"][0]["timeHint"] == {
        "text": "in May 2023",
        "start": "2023-05-01T00:00:00Z",
        "end": "2023-06-01T00:00:00Z",
        "month": None,
        "described": "'in May 2023': 2023-05-01T00:00:00Z to 2023-06-01T00:00:00Z",
    }
    assert data["plain"] == [{"timeHint": None}]
    assert data["event"][0]["timeHint"] == {
        "text": "before she moved",
        "end": "2023-05-21T00:00:00Z",
        "event": moved.id,
    }


def test_a_month_without_a_year_raises_that_month_in_any_year(mem: Memory) -> None:
    mem.store_many(
        [
            {"text": "We went camping by the lake", "source_date": "2019-06-14"},
            {"text": "We went camping in the mountains", "source_date": "2023-03-02"},
            {"text": "The shop sells camping gear and other things", "source_date": "2021-01-05"},
        ]
    )
    query, as_of = "when did we go camping in June", "2023-07-15"
    hinted = {h.fact.text: h.score for h in mem.search(query, as_of=as_of)}
    plain = {h.fact.text: h.score for h in mem.search(query, as_of=as_of, time_hints=False)}
    assert hinted["We went camping by the lake"] == pytest.approx(
        2 * plain["We went camping by the lake"]  # June 2019: in the period, relevance doubled
    )
    assert hinted["We went camping in the mountains"] == pytest.approx(
        plain["We went camping in the mountains"]
    )


#: Phrases the question parser once read otherwise than a fact's stated time did, or not at all
#: (a year of a range, a month of any year, nothing): one grammar now reads both, against
#: Thursday 2 May 2024.
SAME_READING = [
    ("Released 2024-04-30 at noon", "2024-04-30", "2024-05-01"),
    ("Prices rose in mid-2020", "2020-01-01", "2021-01-01"),
    ("She was at Perimeter from 2006 to 2009", "2006-01-01", "2010-01-01"),
    ("Term ran 2006\u20132009", "2006-01-01", "2010-01-01"),
    ("Busy between May and July 2023", "2023-05-01", "2023-08-01"),
    ("I slept badly last night", "2024-05-01", "2024-05-02"),
    ("We went hiking last weekend", "2024-04-27", "2024-04-29"),
    ("It broke a couple of weeks ago", "2024-04-15", "2024-04-22"),
    ("I took up chess a few years ago", "2021-01-01", "2022-01-01"),
    ("It rained the week before 16 November 2023", "2023-11-09", "2023-11-16"),
    ("The photo was taken on December 1,2023", "2023-12-01", "2023-12-02"),
]


@pytest.mark.parametrize(("text", "start", "end"), SAME_READING)
def test_a_question_and_a_fact_read_the_same_words_as_the_same_period(
    text: str, start: str, end: str
) -> None:
    reference = datetime(2024, 5, 2, 9, tzinfo=UTC).timestamp()
    hint, stated = understand(text, reference), stated_time(text, reference)
    assert hint is not None and stated is not None, text
    assert (hint.start, hint.end) == (_day(start), _day(end))
    assert (stated.start.timestamp(), stated.end.timestamp()) == (_day(start), _day(end))


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        # a day, a weekday or a week next to a date: that period, not the date
        ("What did John do the week before August 3, 2023?", "2023-07-27", "2023-08-03"),
        ("What did they do on the Monday before July 24, 2023?", "2023-07-17", "2023-07-18"),
        ("What did they plan on the Saturday after October 28, 2023?", "2023-11-04", "2023-11-05"),
        ("Where was she during the last week of August 2023?", "2023-08-25", "2023-09-01"),
        ("What did Audrey do the weekend before 4th October, 2023?", "2023-09-30", "2023-10-02"),
        # a question that dates itself counts its relative words from that date
        ("What did Joanna finish last Friday on 23 January, 2022?", "2022-01-21", "2022-01-22"),
        (
            "What was his issue last week, as mentioned on November 6, 2023?",
            "2023-10-30",
            "2023-11-06",
        ),
        # a day without a year: the latest one; after it, everything from the next day on
        ("What did Ana do after Aug 15th?", "2022-08-16", None),
    ],
)
def test_a_question_reads_periods_next_to_a_date_and_from_the_date_it_names(
    query: str, start: str, end: str | None
) -> None:
    hint = understand(query, BASE)
    assert hint is not None, query
    assert (hint.start, hint.end, hint.month) == (
        _day(start),
        None if end is None else _day(end),
        None,
    )


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("Where did Ana live before she moved?", ("before she moved", "before", "she moved")),
        (
            "How did Melanie feel after the accident?",
            ("after the accident", "after", "the accident"),
        ),
        (
            "What has John learned since starting boot camp, and why?",
            ("since starting boot camp", "after", "starting boot camp"),
        ),
        ("What did Jean go through prior to meeting Maria", None),
        ("what happened after?", None),
        ("where did Ana live before 2020", None),  # no event: a date, which understand reads
        ("What did they do on the Monday before July 24, 2023?", None),
        ("How many tournaments has John organized till date?", None),
        ("What does Jolene enjoy after a long day?", None),
    ],
)
def test_a_question_placed_before_or_after_an_event_names_the_event(
    query: str, found: tuple[str, str, str] | None
) -> None:
    if found is None and "prior to" in query:
        found = ("prior to meeting Maria", "before", "meeting Maria")
    assert event(query) == found


def test_before_or_after_an_event_ranks_by_the_date_of_the_fact_that_names_it(
    mem: Memory,
) -> None:
    """For "before she moved" the move is dated by the fact that names it; the facts dated up
    to that day rank higher, the others keep their score; the hint names the dating fact."""
    results = mem.store_many(
        [
            {"text": "Ana lives in Lisbon", "source_date": "2021-03-01"},
            {"text": "Ana moved to Berlin for a new job", "source_date": "2023-05-10"},
            {"text": "Ana lives in Berlin now", "source_date": "2024-01-10"},
        ]
    )
    lisbon, moved, berlin = (r.fact for r in results)
    assert lisbon is not None and moved is not None and berlin is not None

    def scores(query: str, **options: object) -> dict[str, float]:
        hits = mem.search(query, limit=3, **options)  # type: ignore[arg-type]
        assert len(hits) == 3  # none dropped
        return {h.fact.id: h.score for h in hits}

    before = mem.search("Where did Ana live before she moved?", limit=3)
    hint = before[0].time_hint
    assert hint is not None and hint.event == moved.id and hint.start is None
    assert hint.end == _day("2023-05-11")  # the event's day included
    assert "dated by fact" in hint.describe()
    for query, raised, kept in (
        ("Where did Ana live before she moved?", lisbon.id, berlin.id),
        ("Where did Ana live after she moved?", berlin.id, lisbon.id),
    ):
        hinted, unhinted = scores(query), scores(query, time_hints=False)
        assert hinted[raised] == pytest.approx(2 * unhinted[raised])
        assert hinted[kept] == pytest.approx(unhinted[kept])
    # Off, or with an event that no fact names: nothing understood.
    plain = mem.search("Where did Ana live before she moved?", limit=3, time_hints=False)
    assert all(h.time_hint is None for h in plain)
    unknown = mem.search("Where did Ana live before the earthquake?", limit=3)
    assert all(h.time_hint is None for h in unknown)


@pytest.mark.parametrize(
    "query",
    [
        " " * 301 + "where is the staging database",  # all whitespace where time words are read
        "\t\n" * 200 + "staging database",
        "\u3000" * 400 + "staging",  # whitespace beyond ASCII
        "staging database in December 9999",  # a period that would end past year 9999
        "staging database on 9999 December 31",
    ],
    ids=["spaces", "tabs-and-newlines", "ideographic-spaces", "year-9999", "last-day"],
)
def test_a_query_of_whitespace_or_an_unrepresentable_date_searches_normally(
    mem: Memory, query: str
) -> None:
    """Once an INTERNAL_ERROR: 301 spaces left no word to keep, and a period ending past
    year 9999 overflowed; now the query is searched with no time understood from it."""
    mem.store("The staging database runs Postgres 16")
    hits = mem.search(query)
    assert [h.fact.text for h in hits] == ["The staging database runs Postgres 16"]
    assert all(h.time_hint is None for h in hits)
    assert "Postgres 16" in mem.recall(query).context
