"""What one request may cost: documents too deep, with too many aliases or too large a body are
refused, and a page of facts with their links costs a bounded number of SQL queries (the N+1
guard)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import graphmem.storage.sqlite.database
from graphmem import Settings

from ..support.graphql_clients import STORE, InProcess


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    """Limits low enough for a test to reach them in a few lines."""
    return Settings(
        embedder="hash",
        data_dir=data_dir,
        max_body_bytes=4096,
        graphql_max_depth=8,
        graphql_max_aliases=3,
    )


def test_deep_aliased_and_oversized_documents_are_refused(service: InProcess) -> None:
    deep = (
        "{ facts { edges { node { links { edges { neighbour { links { edges { neighbour "
        "{ id } } } } } } } } } }"
    )
    aliases = "{ " + " ".join(f"a{i}: namespace" for i in range(4)) + " }"
    for _ in range(2):  # the second time from the document caches, refused all the same
        status, body = service.post(deep)
        assert "exceeds maximum operation depth" in body["errors"][0]["message"]
        assert body["errors"][0]["extensions"]["code"] == "INVALID_QUERY"
        assert "data" not in body or body["data"] is None
        assert "aliases" in service.post(aliases)[1]["errors"][0]["message"]
    status, body = service.post(STORE, {"t": "x" * 5000})
    assert status == 413 and body["errors"][0]["extensions"]["code"] == "PAYLOAD_TOO_LARGE"
    chunked = service.request(
        "POST",
        "/graphql",
        content=iter([b"{" + b" " * 3000, b" " * 3000]),
        headers={"content-type": "application/json"},
    )
    assert chunked.status_code == 413
    assert service.data("{ facts { edges { cursor } } }")["facts"]["edges"] == []


def test_a_list_of_facts_with_links_costs_a_bounded_number_of_queries(
    service: InProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [
        service.data(STORE, {"t": f"Component {i} of the payment system"})["storeFact"]["fact"][
            "id"
        ]
        for i in range(50)
    ]
    link = "mutation($s: ID!, $t: ID!) { linkFacts(input: {sourceId: $s, targetId: $t, type: PART_OF}) { error { code } } }"
    for source, target in zip(ids[1:], ids[:-1], strict=True):
        service.data(link, {"s": source, "t": target})
    statements: list[str] = []
    reader = graphmem.storage.sqlite.database.Database.reader

    def traced(self: graphmem.storage.sqlite.database.Database) -> sqlite3.Connection:
        # Every worker thread's read connection, whether it opened before this test or not.
        conn = reader(self)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(graphmem.storage.sqlite.database.Database, "reader", traced)
    query = """query($n: Int!) { facts(first: $n) { edges { node { id supersedes { id }
        links { edges { link { type } neighbour { id text supersededBy { id } } } } } } } }"""

    def counted() -> int:
        # The service's once-a-second outbox drain runs on the same worker threads and may land
        # in the window; it is housekeeping, not a cost of the list.
        return len([s for s in statements if not s.startswith("PRAGMA") and "FROM outbox" not in s])

    service.data(query, {"n": 5})
    statements.clear()
    service.data(query, {"n": 5})
    few = counted()
    statements.clear()
    service.data(query, {"n": 50})
    many = counted()
    assert many == few <= 10, (few, many)
