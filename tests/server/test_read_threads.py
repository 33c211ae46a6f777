"""Reads run in at most ``read_threads`` worker threads at once; writes never wait for them."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

import graphmem
from graphmem import Settings

from ..support.graphql_clients import SEARCH, STORE, LiveServer


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return Settings(embedder="hash", data_dir=data_dir, read_threads=2)


def test_reads_beyond_read_threads_wait_and_writes_go_through(
    app: Starlette, monkeypatch: pytest.MonkeyPatch
) -> None:
    running, most = 0, 0
    lock = threading.Lock()
    release = threading.Event()
    search = graphmem.Memory.search

    def held(self: graphmem.Memory, *args: Any, **kwargs: Any) -> Any:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            assert release.wait(30), "the test never released the searches"
            return search(self, *args, **kwargs)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(graphmem.Memory, "search", held)

    def post(query: str, variables: dict[str, Any]) -> dict[str, Any]:
        with httpx.Client(base_url=server.base_url, timeout=60) as client:
            body: dict[str, Any] = client.post(
                "/graphql", json={"query": query, "variables": variables}
            ).json()
            return body

    with LiveServer(app) as server, ThreadPoolExecutor(6) as pool:
        searches = [pool.submit(post, SEARCH, {"q": f"deploy {i}"}) for i in range(5)]
        _until(lambda: running == 2)
        # Three searches wait for a thread; a write does not wait behind them.
        stored = post(STORE, {"t": "The deploy runs on Fridays"})
        assert stored["data"]["storeFact"]["fact"]["id"], stored
        assert running == 2 and not any(s.done() for s in searches)
        release.set()
        answers = [s.result(timeout=60) for s in searches]
    assert all("errors" not in a for a in answers), answers
    assert most == 2
    assert [a["data"]["search"][0]["fact"]["text"] for a in answers] == [
        "The deploy runs on Fridays"
    ] * 5


def _until(done: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
