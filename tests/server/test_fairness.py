"""One key's work takes at most its share: reads, heavy documents and MCP calls run in pools
served to keys in turn, each key's server time is charged and capped, every request has a
deadline, and subscription events are paced and bounded per key (graphmem.server.fairness)."""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from graphmem.server import create_app, events, fairness, mcp
from graphmem.server.events import Broadcaster
from graphmem.server.mcp import tool_cost
from graphmem.server.mcp.tools import CaptureArgs

from graphmem import ApiKey, Change, KeyStore, Memory, Settings
from graphmem.errors import SubscriberTooSlow

from ..support.graphql_clients import InProcess, LiveServer, bearer

SEARCH = "query($q: String!) { search(query: $q, limit: 5) { fact { id } } }"


class Held:
    """Memory.search held until released when its query is ``"hold"``, and how many are held
    at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.release = threading.Event()
        self.search = Memory.search

    def __call__(self, memory: Memory, query: str, *args: Any, **kwargs: Any) -> Any:
        if query != "hold":
            return self.search(memory, query, *args, **kwargs)
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            assert self.release.wait(30), "the test never released the searches"
        finally:
            with self.lock:
                self.running -= 1
        return []


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    searches = Held()

    def search(memory: Memory, query: str, *args: Any, **kwargs: Any) -> Any:
        return searches(memory, query, *args, **kwargs)

    monkeypatch.setattr(Memory, "search", search)
    yield searches
    searches.release.set()


def test_one_keys_reads_take_its_share_and_another_keys_read_goes_through(
    settings: Settings, keys: KeyStore, held: Held
) -> None:
    """A dozen reads of one key in flight take at most ``read_threads`` threads; another key's
    read is answered meanwhile instead of queueing behind them."""
    mine, _ = keys.create(["default"])
    theirs, _ = keys.create(["default"])
    two = settings.model_copy(update={"read_threads": 2})
    with LiveServer(create_app(two)) as live, ThreadPoolExecutor(12) as pool:
        url = f"{live.base_url}/graphql"

        def post(token: str, query: str) -> httpx.Response:
            body = {"query": SEARCH, "variables": {"q": query}}
            return httpx.post(url, json=body, headers=bearer(token), timeout=60)

        flood = [pool.submit(post, mine, "hold") for _ in range(12)]
        deadline = time.monotonic() + 10
        while held.running < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        answer = post(theirs, "anything")
        waited = time.monotonic() - started
        assert answer.status_code == 200 and "errors" not in answer.json(), answer.text
        assert held.running == 2  # the flood still holds its share, and no more
        held.release.set()
        assert all(f.result().status_code == 200 for f in flood)
    assert held.most == 2
    assert waited < 5  # answered while the flood was held (it would wait for ever otherwise)


def test_one_keys_slow_heavy_calls_leave_the_lane_to_another_key(
    settings: Settings, keys: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two slow ``reflect`` calls of one key hold one lane thread between them; another key's
    heavy document (a consolidation, which counts 10,000) runs on the other."""
    mine, _ = keys.create(["default"])
    theirs, _ = keys.create(["default"])
    release = threading.Event()

    def slow_reflect(*_: object, **__: object) -> Any:
        assert release.wait(30), "the test never released reflect"
        raise AssertionError("released: the test is over")

    monkeypatch.setattr(Memory, "reflect", slow_reflect)
    heavy = "mutation { consolidate(dryRun: true) { superseded } }"
    with LiveServer(create_app(settings)) as live, ThreadPoolExecutor(2) as pool:
        url = f"{live.base_url}/graphql"
        reflecting = [
            pool.submit(
                httpx.post,
                url,
                json={"query": "mutation { reflect { error { code } } }"},
                headers=bearer(mine),
                timeout=60,
            )
            for _ in range(2)
        ]
        time.sleep(0.3)  # both reflects admitted: one on the lane, one waiting its key's turn
        try:
            answer = httpx.post(
                url,
                json={"query": heavy},
                headers=bearer(theirs),
                timeout=20,
            )
        finally:
            release.set()
        [f.result() for f in reflecting]
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["consolidate"]["superseded"] == 0


def test_a_key_past_its_server_time_gets_429_on_graphql_and_mcp(
    settings: Settings, keys: KeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, _ = keys.create(["default"])
    theirs, _ = keys.create(["default"])
    search = Memory.search

    def slow(memory: Memory, query: str, *args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return search(memory, query, *args, **kwargs)

    monkeypatch.setattr(Memory, "search", slow)
    tight = settings.model_copy(update={"server_seconds_per_minute": 0.2})
    body = {"query": SEARCH, "variables": {"q": "coffee"}}
    with InProcess(create_app(tight)) as service:
        first = service.request("POST", "/graphql", json=body, headers=bearer(mine))
        assert first.status_code == 200, first.text  # admitted: it had time left
        second = service.request("POST", "/graphql", json=body, headers=bearer(mine))
        assert second.status_code == 429
        assert second.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        assert 1 <= int(second.headers["Retry-After"]) <= 60
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        over_mcp = service.request(
            "POST",
            "/mcp",
            json=message,
            headers={**bearer(mine), "Accept": "application/json, text/event-stream"},
        )
        assert over_mcp.status_code == 429 and over_mcp.headers["Retry-After"]
        assert over_mcp.json()["error"]["data"]["code"] == "RATE_LIMITED"
        # Another key has its own time.
        other = service.request("POST", "/graphql", json=body, headers=bearer(theirs))
        assert other.status_code == 200


def test_a_tool_call_past_the_request_timeout_answers_timeout(
    mem: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()

    def stuck(*_: object, **__: object) -> Any:
        release.wait(30)
        return []

    monkeypatch.setattr(Memory, "search", stuck)
    quick = mem.settings.model_copy(update={"request_timeout": 0.3})
    monkeypatch.setattr(Memory, "settings", property(lambda _: quick))
    key = ApiKey("k1", ("default",), False, None, 0.0, None)
    admission = fairness.Admission(500_000, 0, read_threads=1)

    async def run() -> tuple[Any, float, int]:
        started = time.monotonic()
        no_context: Any = None  # the caller below reads none
        result = await mcp.call(
            lambda _: (mem, key), no_context, "memory_recall", {"query": "x"}, admission=admission
        )
        elapsed = time.monotonic() - started
        busy = admission.reads.busy(key.id)  # the abandoned call still holds its turn
        release.set()
        await asyncio.sleep(0.1)
        return result, elapsed, busy

    result, elapsed, busy = asyncio.run(run())
    assert result.is_error and result.structured_content["error"]["code"] == "TIMEOUT"
    assert elapsed < 2
    assert busy == 1


def test_a_document_past_the_request_timeout_answers_timeout(
    settings: Settings, held: Held
) -> None:
    quick = settings.model_copy(update={"request_timeout": 0.3})
    body = {"query": SEARCH, "variables": {"q": "hold"}}
    with InProcess(create_app(quick)) as service:
        started = time.monotonic()
        answer = service.request("POST", "/graphql", json=body).json()
        elapsed = time.monotonic() - started
        held.release.set()
    assert answer["errors"][0]["extensions"]["code"] == "TIMEOUT", answer
    assert elapsed < 5  # not the 30 s the search was held for


def test_a_capture_costs_its_messages_over_mcp_as_over_graphql() -> None:
    messages = [{"role": "user", "content": f"message {n}"} for n in range(1_000)]
    assert tool_cost(CaptureArgs.model_validate({"messages": messages})) == 1_000


def test_turns_serve_keys_in_turn_and_refuse_a_queue_too_long() -> None:
    """A key with many calls waiting delays another key's call by one call, not by all."""
    order: list[str] = []
    pool = fairness.Turns("test", 1, 1, queue_per_key=5)

    def call(name: str) -> None:
        time.sleep(0.02)
        order.append(name)

    async def run() -> str | None:
        flood = [asyncio.create_task(pool.run("a", lambda: call("a"))) for _ in range(6)]
        await asyncio.sleep(0.005)  # the first of a's runs, five wait (its queue is full)
        late = asyncio.create_task(pool.run("b", lambda: call("b")))
        await asyncio.sleep(0)
        refused = None
        try:
            await pool.run("a", lambda: call("a"))
        except Exception as exc:  # a's queue is full
            refused = getattr(exc, "code", None)
        await asyncio.gather(*flood, late)
        return refused

    try:
        refused = asyncio.run(run())
    finally:
        pool.close()
    assert order.index("b") <= 1  # right after the call running when it came
    assert refused == "RATE_LIMITED"


def _change(n: int) -> Change:
    return Change(namespace="default", kind="FACT_STORED", id=f"f{n}", at=0.0)


def test_a_keys_subscriptions_share_one_backlog_and_one_that_does_not_read_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Twenty subscriptions of one key, each stuck sending its first change (its client does
    not read), hold at most SUBSCRIBER_BACKLOG changes between them; each is ended, and its
    ``on_end`` (which closes its socket) is called once it has not taken the end for
    END_WAIT_S. One that reads is told, and not closed."""
    monkeypatch.setattr(events, "SUBSCRIBER_BACKLOG", 30)
    monkeypatch.setattr(events, "END_WAIT_S", 0.05)
    closed: list[str] = []

    async def run() -> tuple[int, str]:
        broadcaster = Broadcaster(asyncio.get_running_loop())
        broadcaster._positions["default"] = 0  # no change log to read in this test
        stuck = [
            broadcaster.changes("default", key="k", on_end=functools.partial(closed.append, "k"))
            for _ in range(20)
        ]
        reader = broadcaster.changes(
            "default", key="r", on_end=functools.partial(closed.append, "r")
        )
        firsts = [asyncio.ensure_future(anext(stream)) for stream in [*stuck, reader]]
        await asyncio.sleep(0)  # every subscription is waiting for its first change
        broadcaster._deliver([_change(0)])
        await asyncio.gather(*firsts)  # each has its first change: "sending" it
        broadcaster._deliver([_change(n) for n in range(1, 100)])
        waiting = broadcaster._backlog["k"]
        told = ""
        try:
            while True:
                await anext(reader)
        except SubscriberTooSlow as exc:
            told = exc.code
        await asyncio.sleep(0.2)
        return waiting, told

    waiting, told = asyncio.run(run())
    assert waiting <= 30
    assert told == "UNAVAILABLE"
    assert closed == ["k"] * 20


def test_events_of_a_key_are_paced_to_its_rate() -> None:
    clock = [0.0]
    rate = fairness.EventRate(100, clock=lambda: clock[0])
    waits = [rate.wait("k") for _ in range(300)]
    assert waits[:100] == [0.0] * 100  # a second's worth at once
    assert waits[299] == pytest.approx(2.0)  # then 100 a second
    assert rate.wait("other") == 0.0  # each key its own


def test_a_keys_requests_beyond_its_share_wait_for_one_of_its_own_to_end() -> None:
    requests = fairness.Turns("request", 8, 2)

    async def run() -> list[str]:
        order: list[str] = []
        release = asyncio.Event()

        async def request(key: str, name: str) -> None:
            async with requests.held(key):
                order.append(name)
                if name != "other":
                    await release.wait()

        mine = [asyncio.create_task(request("a", f"a{n}")) for n in range(3)]
        await asyncio.sleep(0.01)
        await request("b", "other")  # another key goes in at once
        assert requests.busy("a") == 2 and order[:2] == ["a0", "a1"]
        release.set()
        await asyncio.gather(*mine)
        return order

    assert asyncio.run(run()) == ["a0", "a1", "other", "a2"]
