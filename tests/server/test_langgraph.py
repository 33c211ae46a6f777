"""The LangGraph store (``graphmem.integrations.langgraph``): a LangGraph graph that stores what a
user says in one thread and recalls it in another (no model: langchain-core's fake chat model),
and the store's operations — over ``Memory`` in process and over ``Client`` against a service."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph

from graphmem import Client, InvalidInput, Memory, Settings
from graphmem.integrations.langgraph import GraphmemStore
from resolvers.app import create_app

from ..support.clock import Clock
from ..support.graphql_clients import LiveServer


@pytest.fixture(params=["memory", "client"])
def store(request: pytest.FixtureRequest, settings: Settings, clock: Clock) -> Iterator[Any]:
    if request.param == "memory":
        with Memory.open(settings.data_dir, settings=settings, clock=clock) as memory:
            yield GraphmemStore(memory)
    else:
        with (
            LiveServer(create_app(settings, clock=clock)) as server,
            Client(server.base_url) as client,
        ):
            yield GraphmemStore(client)


def test_a_graph_remembers_across_threads(store: GraphmemStore) -> None:
    model = FakeListChatModel(responses=["Noted.", "You like pizza."])
    seen: list[str] = []

    def chat(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        user = config.get("configurable", {})["user_id"]
        memory = get_store()
        namespace = ("users", user, "memories")
        said = str(state["messages"][-1].content)
        if said.lower().startswith("remember"):
            memory.put(namespace, f"m{len(seen)}", {"text": said.split(":", 1)[1].strip()})
        found = memory.search(namespace, query=said, limit=3)
        known = "; ".join(item.value["text"] for item in found)
        seen.append(known)
        answer = model.invoke([SystemMessage(f"Known: {known}"), *state["messages"]])
        return {"messages": [answer]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    first: RunnableConfig = {"configurable": {"thread_id": "1", "user_id": "alice"}}
    graph.invoke({"messages": [HumanMessage("Remember: I like pizza")]}, first)
    second: RunnableConfig = {"configurable": {"thread_id": "2", "user_id": "alice"}}
    out = graph.invoke({"messages": [HumanMessage("What food do I like?")]}, second)
    assert seen[-1] == "I like pizza"  # found from another thread, through graphmem
    assert out["messages"][-1].content == "You like pizza."
    other: RunnableConfig = {"configurable": {"thread_id": "3", "user_id": "bob"}}
    graph.invoke({"messages": [HumanMessage("What food do I like?")]}, other)
    assert seen[-1] == ""  # another user's namespace holds nothing


def test_the_store_operations(store: GraphmemStore, clock: Clock) -> None:
    alice = ("users", "alice", "memories")
    bob = ("users", "bob", "memories")
    store.put(alice, "food", {"text": "likes pizza", "kind": "taste"})
    store.put(bob, "food", {"text": "likes pizza", "kind": "taste"})  # the same words
    clock.advance(60)
    store.put(alice, "food", {"text": "likes pizza and pasta", "kind": "taste"})
    store.put(alice, "city", {"content": "lives in Lisbon", "kind": "place"})
    item = store.get(alice, "food")
    assert item is not None and item.value == {"text": "likes pizza and pasta", "kind": "taste"}
    assert item.created_at < item.updated_at  # a second version
    assert store.get(alice, "nothing") is None
    found = store.search(("users", "alice"), query="pizza")
    assert found[0].key == "food" and found[0].score is not None  # the best first
    assert {i.namespace for i in store.search(("users",), query="pizza")} == {alice, bob}
    assert [i.key for i in store.search(alice, filter={"kind": "place"})] == ["city"]
    assert len(store.search(alice, limit=1)) == 1
    assert store.list_namespaces() == [alice, bob]
    assert store.list_namespaces(suffix=("memories",), max_depth=2) == [
        ("users", "alice"),
        ("users", "bob"),
    ]
    assert store.list_namespaces(prefix=("users", "*", "memories")) == [alice, bob]
    store.delete(bob, "food")
    assert store.get(bob, "food") is None
    with pytest.raises(InvalidInput):
        store.put(("users", "a/b"), "k", {"text": "x"})


def test_namespaces_differing_in_case_or_spaces_are_apart_and_odd_facts_are_passed_over(
    store: GraphmemStore,
) -> None:
    alice = ("users", "alice")
    store.put(alice, "food", {"text": "likes pizza"})
    for other in [("Users", "ALICE"), (" users", "alice"), ("users", "alice ")]:
        assert store.get(other, "food") is None
        store.delete(other, "food")  # deletes nothing of alice's
    store.put(("Users", "Alice"), "food", {"text": "likes soup"})
    item = store.get(alice, "food")
    assert item is not None and item.value == {"text": "likes pizza"}
    # A fact written with the store's source by other means, its context no JSON object.
    store.memory.store(
        "planted", entity="users/carol", key="food", source="langgraph", context="[1]"
    )
    assert store.get(("users", "carol"), "food") is None
    assert [i.namespace for i in store.search(("users",))] == [alice]
    nested: dict[str, Any] = {}
    for _ in range(5_000):
        nested = {"n": nested}
    with pytest.raises(InvalidInput):
        store.put(alice, "deep", nested)


def test_a_planted_context_nested_deeper_than_json_parses_is_passed_over(
    store: GraphmemStore,
) -> None:
    alice = ("users", "alice")
    store.put(alice, "food", {"text": "likes pizza"})
    deep = "[" * 5_000 + "]" * 5_000  # within a context's 10,000 characters
    store.memory.store(
        "planted", entity="users/carol", key="food", source="langgraph", context=deep
    )
    assert store.get(("users", "carol"), "food") is None
    assert [i.namespace for i in store.search(("users",))] == [alice]


def test_the_async_forms(store: GraphmemStore) -> None:
    import asyncio

    async def run() -> Any:
        await store.aput(("users", "carol"), "pet", {"text": "has a cat"})
        return await store.aget(("users", "carol"), "pet")

    item = asyncio.run(run())
    assert item is not None and item.value == {"text": "has a cat"}
