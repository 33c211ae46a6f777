"""``graphmem.Client``: Memory's verbs over a real service (uvicorn on loopback), with the same
answers, types and exceptions as ``Memory`` in process — the same script runs against both —
and retries, keys and namespaces of its own."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from graphmem.server.http.app import create_app

import graphmem
from graphmem import (
    Conflict,
    Entity,
    Fact,
    Forbidden,
    InvalidInput,
    KeyStore,
    Memory,
    NotFound,
    Profile,
    Settings,
)
from graphmem.client import AsyncClient, Client, ServiceError
from graphmem.client.wire import FACT_FIELDS

from ..support.clock import Clock
from ..support.graphql_clients import InProcess, LiveServer


@pytest.fixture(params=["memory", "client"])
def api(request: pytest.FixtureRequest, settings: Settings, clock: Clock) -> Iterator[Any]:
    """Memory in process, or a Client of a service on the same settings."""
    if request.param == "memory":
        with Memory.open(settings.data_dir, settings=settings, clock=clock) as memory:
            yield memory
    else:
        with (
            LiveServer(create_app(settings, clock=clock)) as server,
            Client(server.base_url) as client,
        ):
            yield client


def test_the_same_script_gives_the_same_answers(api: Any, clock: Clock) -> None:
    [berlin, tea] = api.store_many(
        [
            {"text": "Ana lives in Berlin", "entity": "ana", "key": "city", "value": "Berlin"},
            {"text": "Ana drinks green tea in 2019", "entity": "ana", "tags": ["drinks"]},
        ]
    )
    assert berlin.action == "ADD" and isinstance(berlin.fact, Fact)
    assert tea.fact.stated_time is not None and tea.fact.stated_time.text == "in 2019"
    before = clock.now
    clock.advance(60)
    moved = api.store("Ana lives in Paris", entity="ana", key="city", value="Paris")
    assert moved.action == "UPDATE" and moved.target_ids == (berlin.fact.id,)
    assert api.get(berlin.fact.id) is None  # replaced now
    old = api.get(berlin.fact.id, known_at=before)
    assert old is not None and old.text == "Ana lives in Berlin" and old.superseded_by is None
    assert [f.text for f in api.history(moved.fact.id)] == [
        "Ana lives in Berlin",
        "Ana lives in Paris",
    ]
    assert [f.value for f in api.lookup("ana", key="city")] == ["Paris"]
    hits = api.search("where does Ana live", limit=3)
    assert hits[0].fact.id == moved.fact.id and hits[0].score > 0
    assert hits[0].fact == api.get(moved.fact.id)  # every field, as get reads it
    dated = api.search("what did Ana drink in 2019", limit=1)
    assert dated[0].time_hint is not None and dated[0].time_matched == "stated"
    link = api.link(
        moved.fact.id, tea.fact.id, "RELATED_TO", strength=0.5, metadata={"why": "test"}
    )
    assert (link.type, link.strength, link.origin, link.metadata) == (
        "RELATED_TO",
        0.5,
        "explicit",
        {"why": "test"},
    )
    assert api.unlink(link.id).id == link.id
    forgotten = api.forget(tea.fact.id)
    assert forgotten.id == tea.fact.id and api.get(tea.fact.id) is None


def test_the_same_bad_input_raises_the_same_exceptions(api: Any) -> None:
    fact = api.store("Ana lives in Berlin").fact
    with pytest.raises(InvalidInput) as refused:
        api.store("x", importance=2)
    assert "importance" in str(refused.value)
    with pytest.raises(InvalidInput):
        api.search("anything", as_of="last May")
    with pytest.raises(NotFound):
        api.forget("01a220ea-0000-7000-8000-000000000000")
    api.forget(fact.id)
    with pytest.raises(Conflict):
        api.forget(fact.id)
    with pytest.raises(InvalidInput) as bad_link:
        api.link(fact.id, fact.id, "RELATED_TO", strength=3)
    assert bad_link.value.field in ("strength", None)
    assert api.get("01a220ea-0000-7000-8000-000000000000") is None


def test_a_key_and_a_namespace_are_sent_from_the_arguments_or_the_environment(
    settings: Settings, keys: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, _ = keys.create(["alpha", "beta"])
    reader, _ = keys.create(["alpha"], read_only=True)
    with LiveServer(create_app(settings)) as server:
        with Client(server.base_url, api_key=token, namespace="beta") as client:
            stored = client.store("Only in beta").fact
        assert stored is not None
        monkeypatch.setenv("GRAPHMEM_URL", server.base_url)
        monkeypatch.setenv("GRAPHMEM_API_KEY", token)
        with Client() as alpha:  # the key's first namespace
            assert alpha.get(stored.id) is None
        monkeypatch.setenv("GRAPHMEM_NAMESPACE", "beta")
        with Client() as beta:
            assert beta.get(stored.id) is not None
        with (
            Client(server.base_url, api_key=reader, namespace="alpha") as read_only,
            pytest.raises(Forbidden),  # as Memory raises it for a read-only key
        ):
            read_only.store("x")
        with (
            Client(server.base_url, api_key="gm_wrong") as stranger,
            pytest.raises(Forbidden) as unknown,  # as a refused key is in process
        ):
            stranger.get(stored.id)
        assert isinstance(unknown.value, ServiceError) and unknown.value.code == "UNAUTHENTICATED"


def answering(*replies: tuple[int, dict[str, Any]]) -> tuple[httpx.MockTransport, list[int]]:
    """A transport answering ``replies`` in turn (status, JSON body); and the count of
    requests it received."""
    seen: list[int] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(1)
        status, body = replies[min(len(seen), len(replies)) - 1]
        return httpx.Response(status, json=body, headers={"retry-after": "0"})

    return httpx.MockTransport(handle), seen


def test_the_source_names_of_a_service_one_release_older_are_read_as_their_new_names(
    service: InProcess,
) -> None:
    # Up to 0.3.0 a recalled fact's source named an engine: SQLITE for KEYWORD, LANCE for VECTOR.
    stored = service.data(
        f'mutation {{ storeFact(input: {{text: "Ana moved to Lisbon"}}) {{ fact {{ {FACT_FIELDS} }} }} }}'
    )["storeFact"]["fact"]
    old = [
        {
            "fact": stored,
            "score": s,
            "source": name,
            "line": f"[{name.lower()}/other] …",
            "summarized": False,
        }
        for s, name in ((0.9, "SQLITE"), (0.5, "LANCE"), (0.4, "GRAPH"))
    ]
    recall = {"context": "…", "tokens": 9, "omitted": 0, "items": old, "profiles": []}
    transport, _ = answering((200, {"data": {"recall": recall}}))
    with Client("http://memory.test", transport=transport) as client:
        found = client.recall("where does Ana live")
    assert [i.source for i in found.items] == ["keyword", "vector", "graph"]
    assert found.items[0].fact.text == "Ana moved to Lisbon"


LIMITED = {"errors": [{"message": "slow down", "extensions": {"code": "RATE_LIMITED"}}]}


def test_429_and_503_are_retried_then_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("graphmem.client.sync.BACKOFF_S", 0.0)
    transport, seen = answering((429, LIMITED), (503, {}), (200, {"data": {"fact": None}}))
    with Client("http://memory.test", transport=transport) as client:
        assert client.get("x") is None
    assert len(seen) == 3
    transport, seen = answering((429, LIMITED))
    with (
        Client("http://memory.test", transport=transport, retries=2) as client,
        pytest.raises(ServiceError) as limited,
    ):
        client.get("x")
    assert limited.value.code == "RATE_LIMITED" and len(seen) == 3


def test_a_server_of_another_version_is_named_with_the_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    unknown = {
        "errors": [
            {
                "message": "Cannot query field 'statedTime' on type 'Fact'.",
                "extensions": {"code": "INVALID_QUERY"},
            }
        ]
    }
    transport, seen = answering((400, unknown), (200, {"data": {"version": "0.2.0"}}))
    with (
        Client("http://memory.test", transport=transport) as client,
        pytest.raises(ServiceError) as older,
    ):
        client.get("x")
    assert older.value.code == "INVALID_QUERY" and len(seen) == 2
    assert f"graphmem server 0.2.0, client {graphmem.__version__}" in older.value.message
    assert "statedTime" in older.value.message
    transport, seen = answering((400, unknown), (200, {"data": {"version": graphmem.__version__}}))
    with (
        Client("http://memory.test", transport=transport) as client,
        pytest.raises(ServiceError) as same,
    ):
        client.get("x")
    assert same.value.message == "Cannot query field 'statedTime' on type 'Fact'."


def test_a_key_sent_in_clear_beyond_this_machine_is_warned_of(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GRAPHMEM_API_KEY", raising=False)
    for url, key, warned in [
        ("http://10.1.2.3:8420", "secret-key", True),
        ("http://memory.example", "secret-key", True),
        ("https://memory.example", "secret-key", False),
        ("http://127.0.0.1:8420", "secret-key", False),
        ("http://localhost:8420", "secret-key", False),
        ("http://10.1.2.3:8420", None, False),  # no key, nothing to read on the way
    ]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="graphmem.client"), Client(url, api_key=key):
            pass
        assert ("clear text" in caplog.text) == warned, url
        assert "secret-key" not in caplog.text


def test_an_unreachable_service_is_unavailable_and_named_without_credentials(
    tmp_path: Path,
) -> None:
    url = "http://svc-user:s3cretpass@127.0.0.1:9"
    with Client(url, retries=1) as client, pytest.raises(ServiceError) as down:
        client.get("x")
    assert down.value.code == "UNAVAILABLE"
    assert "127.0.0.1:9" in down.value.message and "s3cretpass" not in down.value.message


def test_the_graph_episodes_recall_and_erasure_verbs_answer_alike(api: Any, clock: Clock) -> None:
    results = api.store_many(
        [
            {"text": "The billing migration is blocked by the disk quota", "entity": "billing"},
            {"text": "The disk quota was raised on Monday", "entity": "ops"},
        ],
        episode={"id": "standup-1", "kind": "conversation", "time": "2024-05-02T09:00:00Z"},
    )
    blocked, quota = (r.fact for r in results)
    other = api.store("Deploys happen on Fridays").fact
    link = api.link(blocked.id, quota.id, "DEPENDS_ON", strength=0.8)
    assert [k.id for k in api.links(blocked.id, direction="OUT", types=["DEPENDS_ON"])] == [link.id]
    many = api.get_many([blocked.id, other.id, "01a220ea-0000-7000-8000-000000000000"])
    assert set(many) == {blocked.id, other.id} and many[other.id] == api.get(other.id)
    sub = api.traverse(blocked.id, depth=1, types=["DEPENDS_ON"], direction="OUT")
    assert [(n.fact.id, n.depth) for n in sub.nodes] == [(blocked.id, 0), (quota.id, 1)]
    assert [e.id for e in sub.edges] == [link.id] and sub.truncated_by == ()
    found = api.path(blocked.id, quota.id, types=["DEPENDS_ON"])
    assert found is not None and [f.id for f in found] == [blocked.id, quota.id]
    assert [k.id for k in found.links] == [link.id]
    assert api.path(blocked.id, other.id) is None
    block = api.recall("what blocks the billing migration?", max_tokens=200)
    assert block.context.startswith("<memory-context>") and block.tokens > 0
    assert blocked.id in [i.fact.id for i in block.items]
    [episode] = api.episodes()
    assert (episode.id, episode.kind) == ("standup-1", "conversation")
    assert api.episode("standup-1") == episode and api.episode("nope") is None
    assert [f.id for f in api.episode_facts("standup-1")] == [blocked.id, quota.id]
    with pytest.raises(NotFound):
        api.episode_facts("nope")
    counted = api.purge(other.id, dry_run=True)
    assert (counted.facts, counted.dry_run) == (1, True) and api.get(other.id) is not None
    erased = api.purge(entity="ops")
    assert erased.facts == 1 and api.get(quota.id) is None
    clock.advance(60)
    old = api.store("Ana lives in Berlin", entity="ana", key="city", value="Berlin").fact
    new = api.store("Ana lives in Paris", entity="ana", key="city", value="Paris").fact
    both = api.get_many([old.id, new.id], include_superseded=True)
    assert set(both) == {old.id, new.id} and both[old.id].superseded_by == new.id


def test_capture_keeps_turns_and_draws_facts_alike_and_keep_facts_keeps_facts_alone(
    api: Any,
) -> None:
    messages = [
        {"role": "user", "content": "I prefer tea over coffee. What time is it?"},
        {"role": "assistant", "content": "It is noon."},
    ]
    turn, fact, answer = api.capture(messages, episode="chat-1")
    assert [(r.action, r.kind, r.message) for r in (turn, fact, answer)] == [
        ("ADD", "turn", 0),
        ("ADD", "fact", 0),
        ("ADD", "turn", 1),
    ]
    assert turn.fact.kind == "turn" and turn.fact.source == "turn:user" and turn.turn_id is None
    assert fact.turn_id == turn.fact.id and fact.fact.text == "I prefer tea over coffee."
    # The episode is the conversation: its turns (the fact drawn is linked to its turn).
    assert [f.id for f in api.episode_facts("chat-1")] == [turn.fact.id, answer.fact.id]
    recalled = api.recall("what time is it", max_tokens=200)
    assert [(i.kind, i.fact.id) for i in recalled.items] == [  # the fact or its turn, once
        ("turn", turn.fact.id),
        ("turn", answer.fact.id),
    ]
    only = api.capture(
        [{"role": "user", "content": "I always use black for formatting. Thanks!"}],
        keep="facts",
    )
    assert [(r.action, r.kind, r.turn_id, r.fact.source) for r in only] == [
        ("ADD", "fact", None, "capture:user")
    ]
    with pytest.raises(InvalidInput):
        api.capture(messages, keep="everything")


def test_capture_paging_documents_erasures_and_stats_answer_alike(api: Any, tmp_path: Path) -> None:
    results = api.capture(
        [
            {"role": "user", "content": "I prefer tea over coffee. What time is it?"},
            {"role": "assistant", "content": "It is noon."},
        ],
        episode="chat-1",
        keep="facts",
    )
    assert results[0].action == "ADD" and results[0].fact.text == "I prefer tea over coffee."
    assert {r.action for r in results[1:]} == {"SKIP"}
    for n in range(3):
        api.store(f"Deploy number {n} went fine")
    first = api.facts(first=2)
    assert len(first.items) == 2 and first.has_more
    rest = api.facts(first=10, after=first.items[-1][0])
    assert not rest.has_more
    assert [f.id for _, f in first.items + rest.items] == [
        f.id for _, f in api.facts(first=10).items
    ]
    with pytest.raises(InvalidInput):
        api.facts(first=0)
    assert api.documents() == []
    with pytest.raises(NotFound):
        api.read_lines(tmp_path / "nowhere.md", 1, 2)
    api.purge(entity="nobody")  # matched nothing: no record
    api.purge(ids=[first.items[0][1].id])
    [erasure] = api.erasures()
    assert erasure.facts == 1 and "ids" in erasure.filter
    stats = api.stats()
    assert stats.facts == stats.current == 3 and stats.embedding_usage.kind == "embedding"
    with pytest.raises(InvalidInput):
        api.capture("not a list")


def test_entity_names_are_read_declared_and_refused_alike(api: Any, clock: Clock) -> None:
    api.store_many(
        [
            {"text": "Melanie paints sunsets by the lake", "entity": "Melanie"},
            {"text": "Caroline went to a support group", "entity": "Caroline"},
            {"text": "Mrs Lopez teaches chemistry", "entity": "Lopez"},
        ]
    )
    clock.advance(60)
    api.store("Mel ran a charity race in June", entity="Mel")
    melanie = Entity("Melanie", ("Melanie", "Mel"), (), 2)
    assert api.entities(limit=1) == [melanie] and api.entity("mel\u2019s") == melanie
    assert api.entity("Melanie", known_at=clock.now - 30).names == ("Melanie",)  # Mel: later
    assert api.entities(known_at=clock.now - 120) == []  # before any fact
    clock.advance(60)
    before = clock.now - 30
    taught = api.alias("Teacher", of="Lopez")
    assert taught == Entity("Lopez", ("Lopez",), ("Teacher",), 1) == api.entity("teacher")
    assert api.entity("Lopez", known_at=before).aliases == ()  # declared after that moment
    with pytest.raises(NotFound):
        api.entity("Teacher", known_at=before)
    merged = api.merge_entities("Caroline", "Lopez")
    assert (merged.name, set(merged.names), merged.facts) == ("Caroline", {"Caroline", "Lopez"}, 2)
    assert api.split_alias("Mel") == Entity("Melanie", ("Melanie",), (), 1)
    assert api.entity("Mel").names == ("Mel",)
    with pytest.raises(Conflict):
        api.split_alias("Melanie")  # the only name left
    with pytest.raises(NotFound):
        api.alias("Prof", of="Nobody Known")
    with pytest.raises(NotFound):
        api.merge_entities("Melanie", "Nobody Known")
    with pytest.raises(InvalidInput) as refused:
        api.entity("!!")
    assert refused.value.field == "name"
    with pytest.raises(InvalidInput):
        api.entities(limit=0)
    assert api.rebuild_entities() == 4


def attributes(profile: Profile) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """A profile's attributes: each key's values with their valid times and facts' ids."""
    return [
        (a.key, [(v.value, v.valid_from, v.valid_until, v.fact.id) for v in a.values])
        for a in profile.attributes
    ]


def test_a_profile_and_the_recall_it_leads_answer_alike(api: Any, clock: Clock) -> None:
    api.store_many(
        [
            {"text": "Ana lives in Berlin", "entity": "Ana", "key": "city", "value": "Berlin"},
            *[
                {"text": f"Ana has a {pet}", "entity": "Ana", "key": "pets", "value": pet}
                for pet in ("cat", "dog")
            ],
        ]
    )
    before = clock.now
    clock.advance(60)
    paris = api.store("Ana lives in Paris", entity="Ana", key="city", value="Paris").fact
    profile = api.profile("ana's")
    values = {a.key: sorted(v.value for v in a.values) for a in profile.attributes}
    assert values == {"city": ["Paris"], "pets": ["cat", "dog"]}
    then = api.profile("Ana", known_at=before)
    assert [v.value for v in then.attributes[0].values] == ["Berlin"]
    block = api.recall("Where does Ana live?", profile=True)
    [shown] = block.profiles
    assert shown.entity == profile.entity and shown.summary is None
    assert attributes(shown) == attributes(profile) and (shown.facts, shown.linked) == ((), ())
    assert paris.id in {v.fact.id for a in shown.attributes for v in a.values}
    assert api.recall("Where does Ana live?", profile=False).profiles == ()
    with pytest.raises(NotFound):
        api.profile("Nobody Known")
    with pytest.raises(InvalidInput) as refused:
        api.profile("!!")
    assert refused.value.field == "entity"


def test_changes_arrive_as_an_iterator_and_end_when_closed(
    settings: Settings, keys: KeyStore
) -> None:
    token, _ = keys.create(["default"])
    with LiveServer(create_app(settings)) as server, Client(server.base_url, api_key=token) as c:
        stream = c.changes(kinds=["FACT_STORED"])
        arrived: list[Any] = []

        def listen() -> None:
            for change in stream:
                arrived.append(change)
                if len(arrived) == 2:
                    break
            stream.close()

        worker = threading.Thread(target=listen)
        worker.start()
        deadline = time.monotonic() + 10
        stored: list[str] = []
        while worker.is_alive() and time.monotonic() < deadline:  # until the socket listens
            stored.append(c.store(f"Change number {len(stored)}").fact.id)  # type: ignore[union-attr]
            time.sleep(0.2)
        worker.join(10)
    assert [a.kind for a in arrived] == ["FACT_STORED", "FACT_STORED"]
    assert {a.id for a in arrived} <= set(stored) and arrived[0].namespace == "default"


def test_the_async_client_answers_as_the_client(settings: Settings) -> None:
    async def script(url: str) -> tuple[Any, ...]:
        async with AsyncClient(url) as mem:
            stored = await mem.store("Ana lives in Lisbon", entity="ana")
            assert stored.fact is not None
            [hit] = await mem.search("where does Ana live", limit=1)
            again = await mem.get(stored.fact.id)
            with pytest.raises(NotFound):
                await mem.forget("01a220ea-0000-7000-8000-000000000000")
            return stored, hit, again

    with LiveServer(create_app(settings)) as server:
        stored, hit, again = asyncio.run(script(server.base_url))
    assert hit.fact.id == again.id == stored.fact.id and again.text == "Ana lives in Lisbon"


def test_the_async_clients_changes_stream_and_a_cancelled_wait_ends_at_once(
    settings: Settings,
) -> None:
    async def script(url: str) -> tuple[list[Any], list[str]]:
        async with AsyncClient(url) as mem:
            arrived: list[Any] = []

            async def listen() -> None:
                async for change in mem.changes(kinds=["FACT_STORED"]):
                    arrived.append(change)
                    if len(arrived) == 2:
                        return

            listener = asyncio.create_task(listen())
            stored: list[str] = []
            while not listener.done() and len(stored) < 50:  # until the socket listens
                result = await mem.store(f"Change number {len(stored)}")
                assert result.fact is not None
                stored.append(result.fact.id)
                await asyncio.sleep(0.2)
            await asyncio.wait_for(listener, 10)

            async def wait_for_a_purge() -> Any:
                async for change in mem.changes(kinds=["FACT_PURGED"]):
                    return change

            idle = asyncio.create_task(wait_for_a_purge())
            await asyncio.sleep(0.5)
            idle.cancel()  # nothing will come: the wait ends now, not at a timeout
            started = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await idle
            assert time.monotonic() - started < 2
            return arrived, stored

    with LiveServer(create_app(settings)) as server:
        arrived, stored = asyncio.run(asyncio.wait_for(script(server.base_url), 60))
    assert [a.kind for a in arrived] == ["FACT_STORED", "FACT_STORED"]
    assert {a.id for a in arrived} <= set(stored)
