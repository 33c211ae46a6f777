"""``MemoryAPI`` is what ``Memory``, ``Client`` and ``AsyncClient`` offer alike: mypy checks this
module, so a verb one of them lacks, or takes otherwise, fails ``make lint``."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from graphmem import Memory, MemoryAPI
from graphmem.client import AsyncClient, Client

VERBS = [name for name in vars(MemoryAPI) if not name.startswith("_")]


def either(memory: Memory, client: Client) -> list[MemoryAPI]:
    """Both, as the protocol (what mypy checks: neither may lack a verb or take it otherwise)."""
    return [memory, client]


def remember_and_find(memory: MemoryAPI) -> list[str]:
    """Code written once against the protocol."""
    stored = memory.store("Alice moved to Paris in June 2023", entity="alice", key="city")
    assert stored.fact is not None
    return [hit.fact.id for hit in memory.search("Where does Alice live?")]


def test_code_written_against_the_protocol_runs_on_memory(tmp_path) -> None:
    with Memory.open(tmp_path, embedder="hash") as memory:
        [api, _] = either(memory, Client("http://127.0.0.1:9"))
        assert len(remember_and_find(api)) == 1


def test_the_protocol_names_the_verbs_memory_and_the_clients_share() -> None:
    assert {"store", "search", "recall", "traverse", "link", "capture", "maintain"} <= set(VERBS)
    for verb in VERBS:
        wanted = [p for p in inspect.signature(getattr(MemoryAPI, verb)).parameters if p != "self"]
        for cls in (Memory, Client):
            given = inspect.signature(inspect.unwrap(getattr(cls, verb))).parameters
            assert set(wanted) <= set(given) or "fields" in given, (cls.__name__, verb)


def test_the_async_client_offers_every_verb_as_a_coroutine() -> None:
    for verb in VERBS:
        assert inspect.iscoroutinefunction(getattr(AsyncClient, verb)), verb


def test_the_clients_take_each_verb_with_memorys_arguments_and_defaults() -> None:
    for verb in VERBS:
        memory = inspect.signature(getattr(Memory, verb))
        for cls in (Client, AsyncClient):
            assert inspect.signature(getattr(cls, verb)) == memory, (cls.__name__, verb)


def test_a_client_call_memory_would_refuse_fails_as_memorys_before_any_request(tmp_path) -> None:
    unknown: dict[str, Any] = {"colour": "blue"}
    client = Client("http://127.0.0.1:9")  # nothing listens: a request would be UNAVAILABLE
    with Memory.open(tmp_path, embedder="hash") as memory:
        for api in either(memory, client):
            with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
                api.store("Alice moved to Paris", **unknown)
