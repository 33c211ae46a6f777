"""The LangGraph store (``graphmem.integrations.langgraph``): a LangGraph graph that stores what a
user says in one thread and recalls it in another (no model: langchain-core's fake chat model),
and the store's operations — over ``Memory`` in process and over ``Client`` against a service."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")

from graphmem.server.http.app import create_app
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_store
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import (
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)

from graphmem import Client, InvalidInput, Memory, Settings
from graphmem.integrations.langgraph import GraphmemStore

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
    with pytest.raises(InvalidNamespaceError):
        store.put(("users", "a/b"), "k", {"text": "x"})


def test_namespaces_differing_in_case_are_apart_spaced_ones_refused_odd_facts_passed_over(
    store: GraphmemStore,
) -> None:
    alice = ("users", "alice")
    store.put(alice, "food", {"text": "likes pizza"})
    assert store.get(("Users", "ALICE"), "food") is None
    store.delete(("Users", "ALICE"), "food")  # deletes nothing of alice's
    for spaced in [(" users", "alice"), ("users", "alice\n")]:  # an entity keeps no outer spaces
        with pytest.raises(InvalidNamespaceError):
            store.put(spaced, "food", {"text": "likes soup"})
        with pytest.raises(InvalidNamespaceError):
            store.get(spaced, "food")
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


def live(store: GraphmemStore, namespace: tuple[str, ...], key: str) -> list[Any]:
    """The live facts of an item (one, whatever the writers did)."""
    name = "/".join(namespace)
    found = store.memory.lookup(name, key=key)
    return [f for f in found if f.entity == name and f.key == key and f.source == "langgraph"]


def test_concurrent_puts_to_one_item_leave_one_live_version_the_last_written(
    store: GraphmemStore,
) -> None:
    # Two stores over one memory or service: their puts race as two processes' would (each
    # store's own puts to an item take turns).
    other = GraphmemStore(store.memory)
    namespace = ("users", "alice")
    writers = 6
    start = threading.Barrier(writers)
    errors: list[BaseException] = []

    def put(n: int) -> None:
        start.wait()
        try:
            (store if n % 2 else other).put(namespace, "food", {"text": f"likes dish {n}"})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=put, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []  # no Conflict reached a caller
    [current] = live(store, namespace, "food")
    item = store.get(namespace, "food")
    assert item is not None and item.value["text"] in {f"likes dish {n}" for n in range(writers)}
    assert item.value["text"] == current.text
    assert store.memory.history(current.id)[-1].id == current.id  # the last version written
    assert [i.key for i in store.search(namespace)] == ["food"]
    store.put(namespace, "food", {"text": "likes soup"})  # and a put after them supersedes it
    [after] = live(store, namespace, "food")
    assert after.supersedes_id == current.id and after.text == "likes soup"


def test_a_graph_whose_two_branches_put_one_key_at_once_keeps_one_item(
    store: GraphmemStore,
) -> None:
    namespace = ("users", "alice", "memories")

    def node(name: str) -> Any:
        def write(state: MessagesState) -> dict[str, Any]:
            get_store().put(namespace, "mood", {"text": f"said by {name}"})
            return {}

        return write

    builder = StateGraph(MessagesState)
    for name in ("a", "b"):  # a fan-out: both run in the same step, on two threads
        builder.add_node(name, node(name))
        builder.add_edge(START, name)
    graph = builder.compile(store=store)
    for _ in range(3):
        graph.invoke({"messages": [HumanMessage("hi")]})
        [current] = live(store, namespace, "mood")
        assert current.text in {"said by a", "said by b"}


def test_filters_with_operators_dotted_keys_and_nested_objects(store: GraphmemStore) -> None:
    namespace = ("docs",)
    store.put(namespace, "a", {"price": 10, "tag": "x", "user": {"age": 30, "name": "ann"}})
    store.put(namespace, "b", {"price": 20, "tag": "y", "user": {"age": 40}, "on": True})
    store.put(namespace, "c", {"price": 30, "user.age": 50, "on": 1, "tags": ["p", "q"]})

    def keys(wanted: dict[str, Any]) -> list[str]:
        return sorted(i.key for i in store.search(namespace, filter=wanted))

    assert keys({"price": {"$gt": 15}}) == ["b", "c"]
    assert keys({"price": {"$gte": 20, "$lt": 30}}) == ["b"]
    assert keys({"price": {"$lte": 10}}) == ["a"]
    assert keys({"price": {"$eq": 20}}) == ["b"]
    assert keys({"tag": {"$ne": "x"}}) == ["b", "c"]  # a missing entry is not "x"
    assert keys({"tag": {"$gt": "x"}}) == ["b"]  # texts compare with texts
    assert keys({"price": {"$gt": "5"}}) == []  # a number is no text
    assert keys({"user.age": {"$gte": 40}}) == ["b", "c"]  # a path, or c's own dotted key
    assert keys({"user": {"name": "ann"}}) == ["a"]  # a nested object: the keys it names
    assert keys({"on": True}) == ["b"]  # true is not 1
    assert keys({"tags": ["p", "q"]}) == ["c"]
    assert keys({"price": {"$lt": float("inf")}, "tag": "x"}) == ["a"]
    with pytest.raises(InvalidInput):
        store.search(namespace, filter={"price": {"$in": [10]}})


def test_batch_checks_every_operation_before_running_any(store: GraphmemStore) -> None:
    store.put(("foo", "bar"), "key", {"original": True})
    refused: list[Op] = [
        PutOp(("foo.bar",), "key", {"changed": True}),  # LangGraph's rules
        PutOp(("foo", ""), "key", None),
        GetOp(("foo", 1), "key"),  # type: ignore[arg-type]
        SearchOp(("foo\x00",)),
        ListNamespacesOp((MatchCondition("suffix", ("a.b",)),)),
    ]
    for bad in refused:
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(("valid",), "key", {"v": 1}), bad])
    with pytest.raises(InvalidNamespaceError):  # graphmem's: "/" joins the labels
        store.batch([PutOp(("valid",), "key", {"v": 1}), PutOp(("a/b",), "key", {"v": 1})])
    invalid: list[Op] = [PutOp(("valid",), " key", {"v": 1}), GetOp(("valid",), "")]
    for op in invalid:
        with pytest.raises(InvalidInput):
            store.batch([PutOp(("valid",), "key", {"v": 1}), op])
    with pytest.raises(NotImplementedError):
        store.batch([PutOp(("valid",), "key", {"v": 1}, ttl=5)])
    assert store.get(("valid",), "key") is None  # nothing of those batches ran
    item = store.get(("foo", "bar"), "key")
    assert item is not None and item.value == {"original": True}
    # A put whose root label is "langgraph" is refused by put, not by batch (as LangGraph's).
    store.batch([PutOp(("langgraph", "x"), "key", {"v": 1})])
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "key", {"v": 1})


def test_index_fields_are_the_text_of_an_item(store: GraphmemStore) -> None:
    config: IndexConfig = {"dims": 8, "embed": "not used", "fields": ["memory"]}
    indexed = GraphmemStore(store.memory, index=config)
    assert indexed.index_config is not None and indexed.index_config["dims"] == 8
    namespace = ("users", "alice")
    value = {"memory": "likes pizza", "note": "zebra stripes", "tags": ["a", "b"]}
    indexed.put(namespace, "store-level", value)
    indexed.put(namespace, "per-put", value, index=["note", "tags[*]"])
    indexed.put(namespace, "unindexed", value, index=False)
    indexed.put(namespace, "no-text", value, index=["missing"])
    texts = {k: live(store, namespace, k)[0].text for k in ["store-level", "per-put"]}
    assert texts == {"store-level": "likes pizza", "per-put": "zebra stripes\na\nb"}
    found = indexed.search(namespace, query="zebra stripes")
    assert [i.key for i in found if i.score is not None] == ["per-put", "store-level"]
    # Unindexed items come after the scored ones, without a score.
    assert {i.key for i in found if i.score is None} == {"unindexed", "no-text"}
    assert len(indexed.search(namespace, query="zebra stripes", limit=2)) == 2
    with pytest.raises(InvalidInput):
        indexed.put(namespace, "k", value, index="memory")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        GraphmemStore(store.memory, index={"fields": "memory"})  # type: ignore[arg-type]
