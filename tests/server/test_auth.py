"""API keys: once one exists every request needs one; a key is scoped to its namespaces and may be
read-only; revoking takes effect at once; keys are stored hashed and compared in constant time. No
request with a key for one namespace reads, changes or even detects another namespace's facts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from graphmem.server import create_app
from starlette.applications import Starlette
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

from graphmem import KeyStore, Memory, Settings, StorageError
from graphmem.storage import open_keys
from graphmem.storage.sqlite.keys import KeyFile

from ..support.clock import Clock
from ..support.graphql_clients import SEARCH, STORE, WS, InProcess, LiveServer, bearer

pytestmark = pytest.mark.engines


def test_once_a_key_exists_requests_without_a_valid_one_get_401(
    service: InProcess, keys: KeyStore
) -> None:
    assert service.post(STORE, {"t": "Open while no key exists"})[0] == 200
    token, _ = keys.create(["default"])
    for headers in (
        None,
        {"Authorization": "Bearer gm_000000000000_notthesecretatall"},
        {"Authorization": token},
        bearer(token[:-1] + "x"),
    ):
        status, body = service.post(SEARCH, {"q": "open"}, headers)
        assert status == 401, headers
        assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    assert service.post(SEARCH, {"q": "open"}, bearer(token))[0] == 200


def test_a_key_made_after_every_key_was_revoked_is_required_at_once(
    service: InProcess, keys: KeyStore
) -> None:
    _, key = keys.create(["default"])
    keys.revoke(key.id)  # the key file stays, with no active key: requests are open again
    for _ in range(2):  # the second answer comes from what the server remembers of the file
        assert service.post(SEARCH, {"q": "open"})[0] == 200
    token, _ = keys.create(["default"])
    assert service.post(SEARCH, {"q": "open"})[0] == 401
    assert service.post(SEARCH, {"q": "open"}, bearer(token))[0] == 200


def test_a_revoked_key_stops_working_at_once(service: InProcess, keys: KeyStore) -> None:
    token, key = keys.create(["default"])
    keys.create(["default"])  # another key stays, so keys are still required
    assert service.post(SEARCH, {"q": "anything"}, bearer(token))[0] == 200
    keys.revoke(key.id)
    assert service.post(SEARCH, {"q": "anything"}, bearer(token))[0] == 401


def test_a_read_only_key_reads_but_cannot_write(service: InProcess, keys: KeyStore) -> None:
    writer, _ = keys.create(["default"])
    reader, _ = keys.create(["default"], read_only=True)
    service.data(STORE, {"t": "Readers may search this fact"}, **bearer(writer))
    refused = service.data(STORE, {"t": "Readers may not store"}, **bearer(reader))
    assert refused["storeFact"] == {"fact": None, "error": {"code": "FORBIDDEN"}}
    assert len(service.data(SEARCH, {"q": "search fact"}, **bearer(reader))["search"]) == 1


def test_keys_are_stored_hashed(keys: KeyStore, settings: Settings, data_dir: Path) -> None:
    token, key = keys.create(["default"], label="ci")
    if settings.store:  # every column of the key table, as the database holds it
        with psycopg.connect(settings.store) as conn:
            raw = repr(conn.execute("SELECT * FROM gm_api_keys").fetchall()).encode()
    else:  # the key file's bytes
        raw = (data_dir / "_keys.sqlite").read_bytes()
    secret = token.split("_", 2)[2]  # after the prefix and the key id (it may hold "_" itself)
    assert key.id.encode() in raw and len(secret) >= 40 and secret.encode() not in raw
    with closing(open_keys(settings)) as again:  # read back from storage, not from memory
        assert again.authenticate(token) == key


def test_key_secrets_are_compared_in_constant_time(
    keys: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hmac

    token, key = keys.create(["default"])
    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def recording(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr("graphmem.storage.keys.hmac.compare_digest", recording)
    wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert keys.authenticate(wrong) is None
    assert keys.authenticate(token) == key
    assert len(compared) == 2  # every presented secret goes through compare_digest
    assert all(len(a) == len(b) == 64 for a, b in compared)  # sha256 hex digests, not secrets


def test_a_key_for_one_namespace_never_sees_another(service: InProcess, keys: KeyStore) -> None:
    alice, _ = keys.create(["alice"])
    bob, _ = keys.create(["bob"])
    stored = service.data(STORE, {"t": "Alice keeps her notes in Obsidian"}, **bearer(alice))
    fact_id = stored["storeFact"]["fact"]["id"]
    assert service.data(SEARCH, {"q": "Obsidian notes"}, **bearer(bob))["search"] == []
    assert service.data(
        "query($id: ID!) { fact(id: $id) { id } }", {"id": fact_id}, **bearer(bob)
    ) == {"fact": None}
    forget = "mutation($id: ID!) { forgetFact(id: $id) { error { code } } }"
    assert service.data(forget, {"id": fact_id}, **bearer(bob))["forgetFact"]["error"]["code"] == (
        "NOT_FOUND"
    )
    status, body = service.post(
        SEARCH, {"q": "Obsidian"}, {**bearer(bob), "X-Graphmem-Namespace": "alice"}
    )
    assert status == 403 and body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    assert service.data("{ namespace }", **bearer(alice)) == {"namespace": "alice"}
    hits = service.data(SEARCH, {"q": "Obsidian notes"}, **bearer(alice))["search"]
    assert [h["fact"]["text"] for h in hits] == ["Alice keeps her notes in Obsidian"]


def test_no_cursor_traversal_mutation_or_guessed_id_crosses_namespaces(
    service: InProcess, keys: KeyStore
) -> None:
    alice, _ = keys.create(["alice"])
    bob, _ = keys.create(["bob"])
    store = "mutation($t: String!) { storeFact(input: {text: $t}) { fact { id } } }"
    a = [
        service.data(store, {"t": f"Alice's private note {n} about the merger"}, **bearer(alice))[
            "storeFact"
        ]["fact"]["id"]
        for n in range(3)
    ]
    link = "mutation($s: ID!, $t: ID!) { linkFacts(input: {sourceId: $s, targetId: $t, type: PART_OF}) { link { id } error { code } } }"
    alice_link = service.data(link, {"s": a[1], "t": a[0]}, **bearer(alice))["linkFacts"]["link"][
        "id"
    ]
    b = service.data(store, {"t": "Bob's note about lunch"}, **bearer(bob))["storeFact"]["fact"][
        "id"
    ]
    page = "query($after: String) { facts(first: 1, after: $after) { edges { cursor node { id text } } } }"
    alice_cursor = service.data(page, {"after": None}, **bearer(alice))["facts"]["edges"][0][
        "cursor"
    ]
    links = "query($id: ID!, $after: String) { fact(id: $id) { links(first: 1, after: $after) { edges { cursor neighbour { id } } } } }"
    alice_link_cursor = service.data(links, {"id": a[0], "after": None}, **bearer(alice))["fact"][
        "links"
    ]["edges"][0]["cursor"]

    def as_bob(query: str, **variables: object) -> dict[str, Any]:
        """The answer without its extensions (the cost and what bob's key has left of it)."""
        status, body = service.post(query, dict(variables), bearer(bob))
        assert status == 200, body
        body.pop("extensions", None)
        return body

    reads = [
        (page, {"after": alice_cursor}),
        (links, {"id": b, "after": alice_link_cursor}),
        (links, {"id": a[0], "after": None}),
        (
            "query($ids: [ID!]!) { traverse(from: $ids, depth: 6) { nodes { fact { id } } edges { id } } }",
            {"ids": a},
        ),
        (
            "query($a: ID!, $b: ID!) { path(from: $a, to: $b) { facts { id } } }",
            {"a": b, "b": a[0]},
        ),
        ("query($id: ID!) { history(id: $id) { id } }", {"id": a[0]}),
        ('{ search(query: "private note merger", limit: 50) { fact { id text } } }', {}),
        ('{ recall(prompt: "What about the merger?") { context } }', {}),
    ]
    seen = json.dumps([as_bob(query, **variables).get("data") for query, variables in reads])
    for secret in [*a, alice_link, "merger"]:
        assert secret not in seen, (secret, seen)
    # A guessed id that exists in another namespace answers exactly as one that exists nowhere.
    nowhere = "00000000-0000-4000-8000-000000000000"
    for query, variables in reads[2:6]:
        answer = json.dumps(as_bob(query, **variables))
        for fact_id in a:
            answer = answer.replace(fact_id, nowhere)
        guessed = {
            k: ([nowhere] * len(v) if isinstance(v, list) else nowhere if v in a else v)
            for k, v in variables.items()
        }
        assert answer == json.dumps(as_bob(query, **guessed)), query
    for mutation, variables in [
        (link, {"s": b, "t": a[0]}),
        ("mutation($id: ID!) { unlink(id: $id) { error { code } } }", {"id": alice_link}),
        ("mutation($id: ID!) { forgetFact(id: $id) { error { code } } }", {"id": a[2]}),
        ("mutation($id: ID!) { purgeFact(id: $id) { error { code } } }", {"id": a[2]}),
        (
            'mutation($id: ID!) { storeFact(input: {text: "Replaced by Bob", supersedes: $id}) { error { code } } }',
            {"id": a[1]},
        ),
    ]:
        body = as_bob(mutation, **variables)
        payload = next(iter(body["data"].values()))
        assert payload["error"]["code"] == "NOT_FOUND", (mutation, body)
    after = service.data(
        "{ facts { edges { node { id links { edges { link { id } } } } } } }", **bearer(alice)
    )["facts"]["edges"]
    assert sorted(e["node"]["id"] for e in after) == sorted(a)  # nothing forgotten, purged, added
    assert sum(len(e["node"]["links"]["edges"]) for e in after) == 2  # the one link, both ends
    for name in ("alice", "../alice", "bob/../alice", "ALICE"):
        status, body = service.post(
            "{ namespace }", None, {**bearer(bob), "X-Graphmem-Namespace": name}
        )
        assert status in (400, 403) and body["errors"][0]["extensions"]["code"] != "OK", name


def test_a_key_file_from_before_admin_keys_keeps_its_keys(data_dir: Path) -> None:
    import sqlite3

    data_dir.mkdir(parents=True)
    conn = sqlite3.connect(data_dir / "_keys.sqlite")
    conn.execute(
        "CREATE TABLE api_keys (id TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, namespaces TEXT"
        " NOT NULL, read_only INTEGER NOT NULL DEFAULT 0, label TEXT, created_at REAL NOT NULL,"
        " revoked_at REAL)"
    )
    conn.execute(
        "INSERT INTO api_keys VALUES ('0123456789ab', 'x', '[\"default\"]', 0, 'old', 1.0, NULL)"
    )
    conn.commit()
    conn.close()
    [old] = KeyFile(data_dir).list()
    assert (old.id, old.admin, old.label) == ("0123456789ab", False, "old")
    KeyFile(data_dir).create(["default"], admin=True)
    assert [k.admin for k in KeyFile(data_dir).list()] == [False, True]


# ------------------------------------------------------------------ sockets and failing closed


@contextmanager
def _socket(server: LiveServer, token: str | None) -> Iterator[ClientConnection]:
    """A graphql-transport-ws session with the live server, acknowledged."""
    url = server.base_url.replace("http", "ws") + "/graphql"
    with connect(url, subprotocols=[Subprotocol(WS)], open_timeout=10) as ws:
        init: dict[str, object] = {"type": "connection_init"}
        if token is not None:
            init["payload"] = {"Authorization": f"Bearer {token}"}
        ws.send(json.dumps(init))
        assert json.loads(ws.recv(timeout=10))["type"] == "connection_ack"
        yield ws


def _run(ws: ClientConnection, op: str, query: str, **variables: object) -> dict[str, Any]:
    ws.send(
        json.dumps(
            {"id": op, "type": "subscribe", "payload": {"query": query, "variables": variables}}
        )
    )
    message = json.loads(ws.recv(timeout=10))
    assert message["id"] == op, message
    return message


def _closed(ws: ClientConnection, within: float) -> tuple[int | None, float]:
    """The close code the server sent within ``within`` seconds, and how long it took."""
    start = time.monotonic()
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=within)
    return closed.value.rcvd.code if closed.value.rcvd else None, time.monotonic() - start


def test_a_revoked_keys_open_socket_is_closed_within_a_second_without_sending_anything(
    app: Starlette, keys: KeyStore
) -> None:
    token, key = keys.create(["default"])
    keys.create(["default"])  # another key stays live
    with LiveServer(app) as server, _socket(server, token) as ws:
        assert _run(ws, "1", "{ namespace }")["payload"]["data"] == {"namespace": "default"}
        keys.revoke(key.id)
        code, after = _closed(ws, within=5)
    assert code == 4403
    assert after < 1.5  # checked every 0.5 s


def test_a_revoked_key_runs_nothing_more_on_its_open_socket(
    app: Starlette, keys: KeyStore, settings: Settings, clock: Clock
) -> None:
    token, key = keys.create(["default"])
    keys.create(["default"])
    with LiveServer(app) as server, _socket(server, token) as ws:
        stored = _run(ws, "1", STORE, t="Stored before the revocation")
        fact_id = stored["payload"]["data"]["storeFact"]["fact"]["id"]
        keys.revoke(key.id)
        # Sent at once, before the server's next look at its sockets' keys.
        purge = "mutation($id: ID!) { purgeFact(id: $id) { error { code } } }"
        for op, query, variables in [("2", STORE, {"t": "After"}), ("3", purge, {"id": fact_id})]:
            payload = {"query": query, "variables": variables}
            ws.send(json.dumps({"id": op, "type": "subscribe", "payload": payload}))
        code, _ = _closed(ws, within=5)
    assert code == 4403
    with Memory.open(settings=settings, clock=clock) as mem:
        page = mem.facts()
    assert [f.text for _, f in page.items] == ["Stored before the revocation"]


def test_a_keyless_socket_on_loopback_is_closed_once_a_key_exists(
    app: Starlette, keys: KeyStore
) -> None:
    with LiveServer(app) as server, _socket(server, None) as ws:
        assert _run(ws, "1", "{ canWrite }")["payload"]["data"] == {"canWrite": True}
        keys.create(["default"])
        code, after = _closed(ws, within=5)
    assert code == 4403 and after < 1.5


@pytest.fixture
def exposed(settings: Settings, clock: Clock) -> Iterator[InProcess]:
    """The service as bound beyond loopback (0.0.0.0), in process."""
    with InProcess(create_app(settings.model_copy(update={"host": "0.0.0.0"}), clock=clock)) as c:
        yield c


def test_a_server_beyond_loopback_refuses_keyless_requests_after_its_last_key_is_revoked(
    exposed: InProcess, keys: KeyStore
) -> None:
    token, key = keys.create(["t1"])
    assert exposed.post("{ canWrite }", None, bearer(token))[0] == 200
    keys.revoke(key.id)
    for headers in ({}, {"X-Graphmem-Namespace": "t1"}, {"X-Graphmem-Namespace": "other"}):
        status, body = exposed.post("{ canWrite }", None, headers)
        assert status == 401 and body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    mcp = exposed.request(
        "POST",
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert mcp.status_code == 401
    status, _ = exposed.post("{ canWrite }", None, bearer(token))
    assert status == 401


def test_a_server_beyond_loopback_with_no_key_file_refuses_every_request(
    exposed: InProcess, data_dir: Path, settings: Settings
) -> None:
    if settings.store is not None:
        pytest.skip("the key file is the SQLite store's (PostgreSQL keeps keys in a table)")
    token, _ = KeyFile(data_dir).create(["default"])
    assert exposed.post("{ canWrite }", None, bearer(token))[0] == 200
    (data_dir / "_keys.sqlite").unlink()
    assert exposed.post("{ canWrite }", None)[0] == 401
    assert exposed.post("{ canWrite }", None, bearer(token))[0] == 401


def test_an_unreadable_key_store_is_an_outage_not_an_open_door(
    service: InProcess, data_dir: Path, settings: Settings
) -> None:
    if settings.store is not None:
        pytest.skip("the key file is the SQLite store's (PostgreSQL keeps keys in a table)")
    token, _ = KeyFile(data_dir).create(["default"])
    (data_dir / "_keys.sqlite").write_bytes(b"not a database" * 100)
    for headers in ({}, bearer(token)):
        status, body = service.post("{ canWrite }", None, headers)
        assert status == 503, body
        assert str(data_dir) not in str(body) and "_keys.sqlite" not in str(body)


def test_a_subscriptions_key_check_reads_each_revocation_at_once_and_never_an_old_file(
    keys: KeyStore, settings: Settings, data_dir: Path
) -> None:
    """The check each subscription event makes: read afresh every time (another process's
    revocation is seen by the next call), and never through a connection to a key file that
    was removed or replaced."""
    _, key = keys.create(["default"])
    other_process = open_keys(settings)
    try:
        assert keys.is_active(key.id)
        other_process.revoke(key.id)
        assert not keys.is_active(key.id)  # the very next check
        _, second = other_process.create(["default"])
        assert keys.is_active(second.id)
        if settings.store is None:
            (data_dir / "_keys.sqlite").unlink()
            assert not keys.is_active(second.id)  # removed: no key is live
            _, third = KeyFile(data_dir).create(["default"])  # a new file in its place
            assert not keys.is_active(second.id) and keys.is_active(third.id)
    finally:
        other_process.close()


def test_a_closed_key_store_opens_no_connection_again(keys: KeyStore) -> None:
    keys.close()  # as the server stops, while a socket's last check may still come
    with pytest.raises(StorageError, match="closed"):
        keys.is_active("0123456789ab")
