"""Stated time: the dates a fact's text mentions, read at write time against its own date,
stored, ranked by a query's time words like valid time — and never hiding a fact. Through
Python, GraphQL, MCP and the CLI, on the store ``--store`` names."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphmem.server.mcp.rendering import fact_line

from graphmem import Memory, Settings
from graphmem.cli import cli
from graphmem.statedtime import MAX_MENTIONS, stated_time

from ..support.clock import Clock
from ..support.graphql_clients import InProcess
from ..support.mcp_clients import call_in_process

pytestmark = [pytest.mark.engines, pytest.mark.client_api]

#: The reference time of the table: Thursday 2 May 2024, 09:00 UTC.
REFERENCE = datetime(2024, 5, 2, 9, tzinfo=UTC).timestamp()

PHRASINGS = [
    # absolute dates and periods
    ("I moved to Lisbon in 2019", "2019-01-01", "2020-01-01", "in 2019"),
    ("May 2023 was a busy month", "2023-05-01", "2023-06-01", "May 2023"),
    ("We met on 12 March", "2024-03-12", "2024-03-13", "12 March"),
    ("The launch was March 12, 2024", "2024-03-12", "2024-03-13", "March 12, 2024"),
    ("Released 2024-04-30 at noon", "2024-04-30", "2024-05-01", "2024-04-30"),
    ("She grew up in the 1990s", "1990-01-01", "2000-01-01", "in the 1990s"),
    ("Grunge peaked in the late 1990s", "1990-01-01", "2000-01-01", "in the late 1990s"),
    ("The office opens in June", "2024-06-01", "2024-07-01", "in June"),
    ("Prices rose in mid-2020", "2020-01-01", "2021-01-01", "mid-2020"),
    ("It snowed last December", "2023-12-01", "2024-01-01", "last December"),
    # ranges
    ("She was at Perimeter from 2006 to 2009", "2006-01-01", "2010-01-01", "from 2006 to 2009"),
    ("Term ran 2006\u20132009", "2006-01-01", "2010-01-01", "2006\u20132009"),
    ("Busy between May and July 2023", "2023-05-01", "2023-08-01", "between May and July 2023"),
    ("Winter from November to February 2024", "2023-11-01", "2024-03-01", None),
    # relative words
    ("We shipped the billing migration yesterday", "2024-05-01", "2024-05-02", "yesterday"),
    ("Today the build is green", "2024-05-02", "2024-05-03", "Today"),
    ("The demo is tomorrow", "2024-05-03", "2024-05-04", "tomorrow"),
    ("I slept badly last night", "2024-05-01", "2024-05-02", "last night"),
    ("The day before yesterday it rained", "2024-04-30", "2024-05-01", None),
    ("We hired two people last week", "2024-04-22", "2024-04-29", "last week"),
    ("Busy this month", "2024-05-01", "2024-06-01", "this month"),
    ("We plan to move next year", "2025-01-01", "2026-01-01", "next year"),
    ("We went hiking last weekend", "2024-04-27", "2024-04-29", "last weekend"),
    ("I ran a marathon two years ago", "2022-01-01", "2023-01-01", "two years ago"),
    ("She called 3 days ago", "2024-04-29", "2024-04-30", "3 days ago"),
    ("It broke a couple of weeks ago", "2024-04-15", "2024-04-22", "a couple of weeks ago"),
    ("The review is next Friday", "2024-05-03", "2024-05-04", "next Friday"),
    ("The outage was last Monday", "2024-04-29", "2024-04-30", "last Monday"),
    ("Since May I run daily", "2024-05-01", "2024-06-01", "Since May"),
    ("Since 2021 she works remotely", "2021-01-01", "2024-05-03", "Since 2021"),
    # a period next to a date, a week of a month, a year after a comma without a space
    ("Rain the week before 16 November 2023", "2023-11-09", "2023-11-16", None),
    ("Vacation on the Monday after April 1, 2024", "2024-04-08", "2024-04-09", None),
    ("Traffic peaks in the last week of August 2023", "2023-08-25", "2023-09-01", None),
    ("Shot on December 1,2023 at dawn", "2023-12-01", "2023-12-02", "December 1,2023"),
    # several mentions: the span covering them
    ("Born 5 June 1990, moved in 2019", "1990-06-05", "2020-01-01", "5 June 1990; in 2019"),
]

NOT_DATES = [
    "Room 2019 is free after lunch",
    "We have 2,019 users now",
    "Upgrade to Python 3.11",
    "The 2014 world cup final",
    "See you on the 40th of May",
    "In year 0 nothing happened",
    "I may go to the gym",
    "The soldiers march on",
    "Deploy on Friday",
    "Call me at 555 2019",
    "The token is valid until December 9999",  # a month before a number that is no year
    "Filed under 9999 December 31",
    "It costs 1999 euros",
    "",
]


@pytest.mark.parametrize(("text", "start", "end", "words"), PHRASINGS)
def test_the_time_a_text_states(text: str, start: str, end: str, words: str | None) -> None:
    found = stated_time(text, REFERENCE)
    assert found is not None, text
    assert (found.start.date().isoformat(), found.end.date().isoformat()) == (start, end)
    if words is not None:
        assert found.text == words


@pytest.mark.parametrize("text", NOT_DATES)
def test_what_is_not_a_date_is_left_alone(text: str) -> None:
    assert stated_time(text, REFERENCE) is None


def test_a_text_with_many_dates_keeps_a_bounded_number() -> None:
    text = " ".join(f"in {year}," for year in range(2000, 2020))
    found = stated_time(text, REFERENCE)
    assert found is not None and found.text.count(";") == MAX_MENTIONS - 1
    assert found.end.year == 2000 + MAX_MENTIONS


def test_a_write_reads_the_time_its_text_states_against_its_episode(mem: Memory) -> None:
    [r] = mem.store_many(
        [{"text": "We shipped the billing migration yesterday"}],
        episode={"id": "standup-2024-05-02", "time": "2024-05-02T09:00:00Z"},
    )
    assert r.fact is not None and r.fact.stated_time is not None
    stated = r.fact.stated_time
    assert (stated.start, stated.end, stated.text) == (
        datetime(2024, 5, 1, tzinfo=UTC),
        datetime(2024, 5, 2, tzinfo=UTC),
        "yesterday",
    )
    again = mem.get(r.fact.id)
    assert again is not None and again.stated_time == stated
    assert again.to_dict()["stated_time"] == {
        "start": "2024-05-01T00:00:00Z",
        "end": "2024-05-02T00:00:00Z",
        "text": "yesterday",
    }
    dated = mem.store("The audit happened last week", source_date="2023-07-12").fact
    assert dated is not None and dated.stated_time is not None
    assert dated.stated_time.start == datetime(2023, 7, 3, tzinfo=UTC)  # against its source date
    plain = mem.store("The cache is warm").fact
    assert plain is not None and plain.stated_time is None


@pytest.mark.in_process("changes Memory.settings")
def test_stated_time_never_hides_a_fact_unless_asked_to_become_valid_time(
    mem: Memory, clock: Clock
) -> None:
    f = mem.store("I moved to Lisbon in 2019").fact
    assert f is not None and f.stated_time is not None
    assert f.valid_from.timestamp() == clock.now  # valid time as given (now), not 2019
    assert mem.get(f.id, as_of="2019-06-01") is None  # visibility unchanged
    assert mem.get(f.id) is not None
    moved = mem.store("Bo moved to Porto in 2019", valid_from="stated").fact
    assert moved is not None and moved.valid_from == datetime(2019, 1, 1, tzinfo=UTC)
    assert mem.get(moved.id, as_of="2019-06-01") is not None
    unstated = mem.store("Bo likes tea", valid_from="stated").fact
    assert unstated is not None and unstated.valid_from.timestamp() == clock.now
    mem.settings = mem.settings.model_copy(update={"stated_valid_from": True})
    by_setting = mem.store("Cy joined in 2021").fact
    assert by_setting is not None and by_setting.valid_from == datetime(2021, 1, 1, tzinfo=UTC)
    mem.settings = mem.settings.model_copy(update={"read_stated_time": False})
    off = mem.store("Di left in 2022").fact
    assert off is not None and off.stated_time is None


def test_a_query_period_ranks_facts_by_the_time_their_text_states(mem: Memory) -> None:
    shipped = mem.store(
        "We shipped the billing migration yesterday", source_date="2024-05-02T09:00:00Z"
    ).fact
    other = mem.store(
        "We shipped the billing dashboard migration", source_date="2024-06-20T09:00:00Z"
    ).fact
    assert shipped is not None and other is not None
    hits = mem.search("what billing migration shipped on May 1st 2024", limit=5)
    assert hits[0].fact.id == shipped.id
    assert hits[0].time_matched == "stated"  # its date is 2 May: only its text says 1 May
    assert {h.fact.id: h.time_matched for h in hits}[other.id] is None
    plain = mem.search("what billing migration shipped on May 1st 2024", time_hints=False)
    assert all(h.time_matched is None and h.time_hint is None for h in plain)
    by_date = mem.search("what billing migration shipped in June 2024", limit=5)
    assert by_date[0].fact.id == other.id and by_date[0].time_matched == "valid"


def test_facts_stored_before_get_their_stated_time_by_a_backfill(
    settings: Settings, clock: Clock
) -> None:
    before = settings.model_copy(update={"read_stated_time": False})
    with Memory.open(settings.data_dir, settings=before, clock=clock) as mem:
        f = mem.store("We moved offices last month", source_date="2024-05-02").fact
        mem.store("The cache is warm")
        assert f is not None and f.stated_time is None
        assert mem.backfill_stated_time(dry_run=True) == {"facts": 2, "stating": 1, "changed": 1}
        assert mem.get(f.id).stated_time is None  # type: ignore[union-attr]
        assert mem.backfill_stated_time() == {"facts": 2, "stating": 1, "changed": 1}
        stated = mem.get(f.id).stated_time  # type: ignore[union-attr]
        assert stated is not None and stated.start == datetime(2024, 4, 1, tzinfo=UTC)
        assert mem.backfill_stated_time()["changed"] == 0


@pytest.mark.in_process("export_jsonl is not in the GraphQL API")
def test_an_export_keeps_the_stated_time(mem: Memory, tmp_path: Path) -> None:
    f = mem.store("I moved to Lisbon in 2019", decay_class="permanent").fact
    mem.store("No date here")
    out = io.StringIO()
    mem.export_jsonl(out)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    facts = {x["text"]: x for x in lines if x["kind"] == "fact"}
    assert facts["I moved to Lisbon in 2019"]["stated_start"] == "2019-01-01T00:00:00Z"
    assert "stated_start" not in facts["No date here"]  # left out when unset
    with Memory.open(tmp_path / "other", settings=Settings(embedder="hash")) as copy:
        copy.import_jsonl(out.getvalue().splitlines())
        assert f is not None and copy.get(f.id).stated_time == f.stated_time  # type: ignore[union-attr]


QUERY = """query($q: String!) {
  search(query: $q, limit: 3) { timeMatched fact { text statedTime { start end text } } }
}"""


@pytest.mark.in_process("calls the service, MCP and CLI on Memory's own files")
def test_graphql_mcp_and_the_cli_show_the_stated_time(
    service: InProcess, mem: Memory, tmp_path: Path
) -> None:
    mem.store("We shipped the billing migration yesterday", source_date="2024-05-02T09:00:00Z")
    hits = service.data(QUERY, {"q": "billing migration shipped on 1 May 2024"})["search"]
    assert hits[0]["timeMatched"] == "STATED"
    assert hits[0]["fact"]["statedTime"] == {
        "start": "2024-05-01T00:00:00Z",
        "end": "2024-05-02T00:00:00Z",
        "text": "yesterday",
    }
    failed, data = call_in_process(mem, None, "memory_recall", query="billing migration")
    assert not failed
    assert data["hits"][0]["fact"]["stated_time"]["text"] == "yesterday"
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path / "cli"), "--embedder", "hash", "--namespace", "cli"]
    stored = runner.invoke(cli, [*base, "store", "I moved to Lisbon in 2019"])
    assert stored.exit_code == 0 and "says 'in 2019': 2019-01-01" in stored.output
    backfilled = runner.invoke(cli, [*base, "backfill-stated-time", "--json"])
    assert json.loads(backfilled.output) == {"facts": 1, "stating": 1, "changed": 0}


def test_the_mcp_text_says_what_the_fact_states(mem: Memory) -> None:
    f = mem.store("We shipped the billing migration yesterday", source_date="2024-05-02").fact
    g = mem.store("We shipped it from 2006 to 2009").fact
    assert f is not None and g is not None
    assert "; says 'yesterday': 2024-05-01)" in fact_line(f)
    assert "; says 'from 2006 to 2009': 2006-01-01 → 2010-01-01)" in fact_line(g)
    assert "says" not in fact_line(mem.store("No date").fact)  # type: ignore[arg-type]


def test_graphql_writes_may_take_their_valid_time_from_the_text(service: InProcess) -> None:
    stored = service.data(
        'mutation { storeFact(input: {text: "Bo moved to Porto in 2019", statedValidFrom: true}) '
        "{ fact { validFrom statedTime { text } } error { code } } }"
    )["storeFact"]
    assert stored["fact"] == {
        "validFrom": "2019-01-01T00:00:00Z",
        "statedTime": {"text": "in 2019"},
    }
