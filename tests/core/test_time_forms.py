"""Date forms: ISO-8601 in full or reduced precision (a year, a month, a day, a moment, with or
without a zone) or epoch seconds, the same on every interface; anything else is refused with an
error that quotes the accepted forms."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from graphmem.server.commands import cli
from graphmem.server.mcp import call

from graphmem import InvalidInput, Memory
from graphmem.temporal import ACCEPTED_TIMES, TIME_FORMS, parse_time

from ..support.graphql_clients import InProcess


def at(iso: str) -> datetime:
    return datetime.fromisoformat(iso).astimezone(UTC)


FORMS = [
    ("2024", at("2024-01-01T00:00:00+00:00")),
    ("2024-05", at("2024-05-01T00:00:00+00:00")),
    ("2024-05-01", at("2024-05-01T00:00:00+00:00")),
    ("2024-05-01T12:30", at("2024-05-01T12:30:00+00:00")),
    ("2024-05-01T12:30:15.250", at("2024-05-01T12:30:15.250+00:00")),
    ("2024-05-01 12:30:15", at("2024-05-01T12:30:15+00:00")),
    ("2024-05-01T12:30:15Z", at("2024-05-01T12:30:15+00:00")),
    ("2024-05-01T14:30:15+02:00", at("2024-05-01T12:30:15+00:00")),
    ("1714566615", at("2024-05-01T12:30:15+00:00")),
    (" 2024-05 ", at("2024-05-01T00:00:00+00:00")),
]
REFUSED = ["yesterday", "24", "999", "0", "2024-13", "2024-5", "0000", "1234.5", "2024-05-01T25:00"]


@pytest.mark.parametrize(("text", "instant"), FORMS)
def test_each_iso_form_means_its_first_instant_in_utc(
    mem: Memory, text: str, instant: datetime
) -> None:
    stored = mem.store(f"Something that began at {text}", valid_from=text).fact
    assert stored is not None and stored.valid_from == instant


def test_a_bare_year_is_the_year_not_epoch_seconds(mem: Memory) -> None:
    alice = mem.store("Alice joined Acme", valid_from="2023-03-01").fact
    bob = mem.store("Bob joined Acme", valid_from="2024-07-01").fact
    assert alice is not None and bob is not None
    assert mem.get(alice.id, as_of="2024") is not None  # 2024-01-01, not 1970-01-01T00:33:44Z
    assert mem.get(bob.id, as_of="2024") is None
    assert [h.fact.id for h in mem.search("joined Acme", as_of="2024")] == [alice.id]


def test_a_month_reads_memory_at_its_first_instant(mem: Memory) -> None:
    early = mem.store("The office opened", valid_from="2024-04-30T23:59:59Z").fact
    late = mem.store("The canteen opened", valid_from="2024-05-01T00:00:01Z").fact
    assert early is not None and late is not None
    assert mem.get(early.id, as_of="2024-05") is not None
    assert mem.get(late.id, as_of="2024-05") is None
    assert mem.get(late.id, as_of="2024-06") is not None


def test_numbers_are_epoch_seconds_whatever_their_size(mem: Memory) -> None:
    assert parse_time(2024) == 2024.0
    assert parse_time(0) == 0.0
    assert parse_time(1714566615.5) == 1714566615.5
    assert parse_time("12345") == 12345.0  # a digit string longer than four digits
    assert parse_time("-86400") == -86400.0


def test_python_also_takes_datetimes_and_dates() -> None:
    assert (
        parse_time(datetime(2024, 5, 1, 14, tzinfo=UTC)) == at("2024-05-01T14:00+00:00").timestamp()
    )
    assert parse_time(datetime(2024, 5, 1, 14)) == at("2024-05-01T14:00+00:00").timestamp()
    assert parse_time(date(2024, 5, 1)) == at("2024-05-01T00:00+00:00").timestamp()


@pytest.mark.parametrize("text", REFUSED)
def test_anything_else_is_refused_with_the_accepted_forms(mem: Memory, text: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        mem.search("anything", as_of=text)
    assert refused.value.field == "as_of"
    for form in TIME_FORMS:
        assert form.example in refused.value.message, form
    with pytest.raises(InvalidInput, match="epoch seconds"):
        mem.store("Something happened", valid_from=text)
    assert mem.stats().facts == 0


def test_every_documented_example_reads_as_what_it_says() -> None:
    instants = {form.example: parse_time(form.example) for form in TIME_FORMS}
    assert instants == {
        "2024": at("2024-01-01T00:00+00:00").timestamp(),
        "2024-05": at("2024-05-01T00:00+00:00").timestamp(),
        "2024-05-01": at("2024-05-01T00:00+00:00").timestamp(),
        "2024-05-01T12:00:00": at("2024-05-01T12:00+00:00").timestamp(),
        "2024-05-01T14:00:00+02:00": at("2024-05-01T12:00+00:00").timestamp(),
        "1714564800": at("2024-05-01T12:00+00:00").timestamp(),
    }


# ------------------------------------------------------------------------------------ interfaces


STORE = """mutation($t: String!, $from: DateTime) {
  storeFact(input: {text: $t, validFrom: $from}) { fact { id validFrom } error { code } }
}"""
GET = "query($id: ID!, $asOf: DateTime) { fact(id: $id, asOf: $asOf) { id } }"


def test_graphql_takes_every_form_in_the_datetime_scalar(service: InProcess) -> None:
    stored = {}
    for value, iso in [
        ("2024", "2024-01-01T00:00:00Z"),
        ("2024-05", "2024-05-01T00:00:00Z"),
        ("2024-05-01T14:30:00+02:00", "2024-05-01T12:30:00Z"),
        (1714566600, "2024-05-01T12:30:00Z"),
        ("1714566600", "2024-05-01T12:30:00Z"),
    ]:
        fact = service.data(STORE, {"t": f"Began at {value}", "from": value})["storeFact"]["fact"]
        assert fact["validFrom"] == iso, value
        stored[str(value)] = fact["id"]
    may = stored["2024-05"]
    assert service.data(GET, {"id": may, "asOf": "2024-05"})["fact"] == {"id": may}
    assert service.data(GET, {"id": may, "asOf": "2024"})["fact"] is None
    assert service.data(f'{{ fact(id: "{may}", asOf: 1714608000) {{ id }} }}')["fact"] == {
        "id": may
    }


def test_graphql_refuses_other_text_quoting_the_accepted_forms(service: InProcess) -> None:
    status, body = service.post(GET, {"id": "x", "asOf": "2024-5"})
    assert status in (200, 400)
    [error] = body["errors"]
    assert error["extensions"]["code"] == "INVALID_QUERY"  # a variable the scalar refused
    assert "cannot parse '2024-5'" in error["message"] and ACCEPTED_TIMES in error["message"]
    status, body = service.post('{ search(query: "x", asOf: "soon") { score } }')
    assert "cannot parse 'soon'" in body["errors"][0]["message"]


def test_the_datetime_scalar_describes_the_accepted_forms(service: InProcess) -> None:
    query = '{ __type(name: "DateTime") { description } }'
    assert ACCEPTED_TIMES in service.data(query)["__type"]["description"]


def test_mcp_tools_take_epoch_seconds_as_numbers_and_years_as_text(mem: Memory) -> None:
    request: Any = None  # no MCP request: the caller below names the Memory itself

    def run(tool: str, arguments: dict[str, Any]) -> Any:
        result = anyio.run(call, lambda _: (mem, None), request, tool, arguments)
        assert not result.is_error, result.content
        return result.structured_content

    stored = run("memory_store", {"text": "Alice lives in Lyon", "valid_from": "2024-05"})
    assert stored["fact"]["valid_from"] == "2024-05-01T00:00:00Z"
    assert run("memory_lookup", {"entity": "alice", "as_of": "2024"})["facts"] == []
    hits = run("memory_recall", {"query": "Lyon", "as_of": 1717200000})["hits"]  # June 2024
    assert [h["fact"]["id"] for h in hits] == [stored["fact"]["id"]]


def test_the_cli_reads_a_month(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--data-dir", str(tmp_path / "data"), "--embedder", "hash"]
    stored = runner.invoke(
        cli, [*base, "store", "Alice lives in Lyon", "--valid-from", "2024-05", "--json"]
    )
    assert stored.exit_code == 0, stored.output
    assert '"valid_from": "2024-05-01T00:00:00Z"' in stored.output
    refused = runner.invoke(cli, [*base, "search", "Lyon", "--as-of", "May"])
    assert isinstance(refused.exception, InvalidInput)
    assert "cannot parse 'May'" in refused.exception.message
