"""A read at a past knownAt shows what memory knew then, and links hold when their facts hold."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from click.testing import CliRunner
from graphmem.server.mcp import tools
from starlette.applications import Starlette

from graphmem import InvalidInput, Memory
from graphmem.cli import cli

from ..support.clock import Clock
from ..support.graphql_clients import InProcess

pytestmark = [pytest.mark.engines, pytest.mark.client_api]

JUNE_2023 = datetime(2023, 6, 1, tzinfo=UTC)


@pytest.fixture
def moved(mem: Memory, clock: Clock) -> dict[str, Any]:
    """Berlin stored (valid from 2020), then t1, then Paris stored (valid from 2023-06-01)."""
    clock.set("2024-01-01T00:00:00+00:00")
    berlin = mem.store(
        "Alice lives in Berlin", entity="alice", key="city", value="Berlin", valid_from="2020"
    ).fact
    t1 = clock.advance(3600)
    clock.advance(3600)
    paris = mem.store(
        "Alice lives in Paris", entity="alice", key="city", value="Paris", valid_from="2023-06-01"
    ).fact
    assert berlin is not None and paris is not None
    clock.advance(3600)
    return {"berlin": berlin.id, "paris": paris.id, "t1": t1}


def test_a_past_known_at_does_not_show_the_later_supersession(mem: Memory, moved: dict) -> None:
    berlin, t1 = moved["berlin"], moved["t1"]
    then = mem.get(berlin, known_at=t1)
    assert then is not None
    assert (then.valid_until, then.valid_until_recorded_at, then.superseded_by) == (
        None,
        None,
        None,
    )
    # The same on every read that returns the fact at t1.
    reads = [
        mem.get_many([berlin], known_at=t1)[berlin],
        *mem.lookup("alice", known_at=t1),
        *mem.history(berlin, known_at=t1),
        *(f for _, f in mem.facts(known_at=t1).items),
        *(h.fact for h in mem.search("Alice Berlin", known_at=t1)),
        *mem.recall("Where does Alice live?", known_at=t1).facts,
        *(n.fact for n in mem.traverse(berlin, known_at=t1).nodes),
    ]
    assert reads and all(f.id == berlin and f.superseded_by is None for f in reads)
    assert all(f.valid_until is None for f in reads)
    # Now (and at any knownAt after Paris was recorded) the end is known.
    now = mem.get(berlin, as_of="2021")
    assert now is not None and (now.valid_until, now.superseded_by) == (JUNE_2023, moved["paris"])


@pytest.mark.in_process("reads Memory.known_now")
def test_a_past_known_at_does_not_show_a_later_forgetting(
    mem: Memory, moved: dict, clock: Clock
) -> None:
    before = clock.now
    clock.advance(60)
    mem.forget(moved["paris"])
    then = mem.get(moved["paris"], known_at=before)
    assert then is not None and then.retracted_at is None
    # What memory knows now is asked for separately.
    assert mem.known_now([moved["paris"]])[moved["paris"]].retracted_at is not None
    assert mem.known_now(["no-such-id"]) == {}


def test_a_back_dated_version_is_not_named_as_replaced_before_it_was_recorded(
    mem: Memory, clock: Clock
) -> None:
    acme = mem.store(
        "Carol works at Acme", entity="carol", key="employer", value="Acme", valid_from="2022"
    ).fact
    before = clock.advance(60)
    clock.advance(60)
    mem.store(
        "Carol works at Initech", entity="carol", key="employer", value="Initech", valid_from="2019"
    )
    assert acme is not None
    now = mem.get(acme.id)
    then = mem.get(acme.id, known_at=before)
    assert now is not None and now.supersedes_id is not None
    assert then is not None and then.supersedes_id is None


def test_links_show_their_end_and_unlinking_only_from_when_they_were_recorded(
    mem: Memory, clock: Clock
) -> None:
    a = mem.store("The checkout service calls the payments API", valid_from="2025").fact
    b = mem.store("The payments API runs in Frankfurt", valid_from="2025").fact
    assert a is not None and b is not None
    made = mem.link(a.id, b.id, "DEPENDS_ON")
    before = clock.advance(60)
    clock.advance(60)
    mem.unlink(made.id)
    [then] = mem.links(a.id, known_at=before)
    assert then.id == made.id and then.retracted_at is None
    assert mem.links(a.id) == []


def test_a_link_made_today_holds_from_when_both_facts_hold(mem: Memory, clock: Clock) -> None:
    clock.set("2026-03-01T00:00:00+00:00")
    cause = mem.store("The deploy on 3 March 2025 broke the login page", valid_from="2025-03-03")
    effect = mem.store("Users could not log in on 3 March 2025", valid_from="2025-03-03T10:00")
    assert cause.fact is not None and effect.fact is not None
    before_link = clock.advance(60)
    clock.advance(60)
    made = mem.link(effect.fact.id, cause.fact.id, "CAUSED_BY")
    assert made.valid_from == datetime(2025, 3, 3, 10, tzinfo=UTC)  # the later of the two
    sub = mem.traverse(effect.fact.id, as_of="2025-06-01")
    assert [e.id for e in sub.edges] == [made.id]
    path = mem.path(effect.fact.id, cause.fact.id, as_of="2025-06-01")
    assert path is not None and [k.id for k in path.links] == [made.id]
    # Transaction time still says it was learnt today.
    assert mem.traverse(effect.fact.id, as_of="2025-06-01", known_at=before_link).edges == []
    # Before both facts held, the link did not.
    assert mem.path(effect.fact.id, cause.fact.id, as_of="2025-03-03T05:00") is None


def test_a_link_validity_can_be_given_and_is_checked(mem: Memory, clock: Clock) -> None:
    a = mem.store("Dana leads the search team", valid_from="2020").fact
    b = mem.store("The search team owns the ranking service", valid_from="2020").fact
    assert a is not None and b is not None
    made = mem.link(a.id, b.id, "PART_OF", valid_from="2021", valid_until="2023-05")
    assert (made.valid_from.year, made.valid_until) == (2021, datetime(2023, 5, 1, tzinfo=UTC))
    assert [e.id for e in mem.traverse(a.id, as_of="2022").edges] == [made.id]
    assert mem.traverse(a.id, as_of="2024").edges == []
    with pytest.raises(InvalidInput) as error:
        mem.link(a.id, b.id, "RELATED_TO", valid_from="2022", valid_until="2021")
    assert error.value.field == "valid_until"
    # Relinking with another validity replaces the link; earlier knownAt keeps the old one.
    before = clock.advance(60)
    clock.advance(60)
    again = mem.link(a.id, b.id, "PART_OF", valid_until="2024")
    assert again.id != made.id and again.valid_until == datetime(2024, 1, 1, tzinfo=UTC)
    assert [k.id for k in mem.links(a.id, types=["PART_OF"], as_of="2022")] == [again.id]
    [old] = mem.links(a.id, types=["PART_OF"], as_of="2022", known_at=before)
    assert old.id == made.id and old.valid_until == datetime(2023, 5, 1, tzinfo=UTC)
    # Relinking with the same validity (or none) only updates the strength.
    assert mem.link(a.id, b.id, "PART_OF", strength=0.4).id == again.id


def test_every_interface_that_links_takes_a_validity(
    mem: Memory, app: Starlette, data_dir: Any, clock: Clock
) -> None:
    ids = [
        f.id
        for f in (
            mem.store(f"Component {n} of the billing system", valid_from="2024").fact
            for n in "ABCD"
        )
        if f is not None
    ]
    made = tools.link(
        mem,
        tools.LinkArgs(
            source_id=ids[0],
            target_id=ids[1],
            type="PART_OF",
            valid_from="2024-05",
            valid_until="2025",
        ),
    )[1]["link"]
    assert (made["valid_from"], made["valid_until"]) == (
        "2024-05-01T00:00:00Z",
        "2025-01-01T00:00:00Z",
    )
    mem.close()
    result = CliRunner().invoke(
        cli,
        [
            "--data-dir",
            str(data_dir),
            "link",
            ids[1],
            ids[2],
            "PART_OF",
            "--valid-until",
            "2026",
            "--json",
        ],
        env={"GRAPHMEM_EMBEDDER": "hash"},
    )
    assert result.exit_code == 0, result.output
    made = json.loads(result.output)
    assert (made["valid_from"], made["valid_until"]) == (
        "2024-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z",
    )
    with InProcess(app) as api:
        payload = api.data(
            """mutation($input: LinkInput!) {
                linkFacts(input: $input) { link { validFrom validUntil } error { code field } } }""",
            {
                "input": {
                    "sourceId": ids[2],
                    "targetId": ids[3],
                    "type": "PART_OF",
                    "validUntil": "2024",
                }
            },
        )["linkFacts"]
    assert payload["link"] is None and payload["error"]["field"] == "valid_until", payload


@pytest.fixture
def api(app: Starlette) -> Iterator[InProcess]:
    with InProcess(app) as client:
        yield client


def test_graphql_shows_values_as_known_then_and_what_is_known_now_apart(
    api: InProcess, clock: Clock
) -> None:
    store = """mutation($input: FactInput!) { storeFact(input: $input) { fact { id } } }"""
    berlin = api.data(
        store,
        {
            "input": {
                "text": "Alice lives in Berlin",
                "entity": "alice",
                "key": "city",
                "value": "Berlin",
                "validFrom": "2020",
            }
        },
    )
    t1 = clock.advance(60)
    clock.advance(60)
    paris = api.data(
        store,
        {
            "input": {
                "text": "Alice lives in Paris",
                "entity": "alice",
                "key": "city",
                "value": "Paris",
                "validFrom": "2023-06-01",
            }
        },
    )
    berlin_id = berlin["storeFact"]["fact"]["id"]
    paris_id = paris["storeFact"]["fact"]["id"]
    query = """query($id: ID!, $knownAt: DateTime) { fact(id: $id, knownAt: $knownAt) {
        validUntil supersededById supersededBy { id } history { id validUntil }
        links { edges { link { type } } }
        knownNow { validUntil supersededById retractedAt } } }"""
    then = api.data(query, {"id": berlin_id, "knownAt": t1})["fact"]
    assert then["validUntil"] is None and then["supersededById"] is None
    assert then["supersededBy"] is None
    assert then["history"] == [{"id": berlin_id, "validUntil": None}]
    assert then["links"]["edges"] == []
    assert then["knownNow"] == {
        "validUntil": "2023-06-01T00:00:00Z",
        "supersededById": paris_id,
        "retractedAt": None,
    }
