"""LangGraph's long-term memory store (``langgraph.store.base.BaseStore``) over graphmem, in
process (a ``Memory``) or over the service (a ``Client``): ``pip install 'graphmem[langgraph]'``.

    store = GraphmemStore(Memory.open("data"))          # or GraphmemStore(Client(url))
    graph = builder.compile(store=store, checkpointer=InMemorySaver())
    store.put(("users", "alice", "memories"), "food", {"text": "likes pizza"})
    store.search(("users", "alice"), query="what does she eat?")

1. An item is a fact of the graphmem namespace the memory or client works in: its entity is the
   LangGraph namespace joined by "/" (``users/alice/memories``), its key the item's key, its
   source ``langgraph``; its JSON value is kept whole in the fact's ``context`` and its text is
   the value's ``text`` (else ``content``, ``memory`` or ``value`` when they are text, else the
   value as JSON), which search and recall read.
2. ``put`` stores a new version that supersedes the item's current one (history keeps every
   version: ``created_at`` is the first's recording time, ``updated_at`` the current's);
   ``delete`` forgets it.
3. ``search`` with a ``query`` is graphmem's hybrid search among the items under the namespace
   prefix (``score`` its score); without one, the items under the prefix in the order they
   were written. ``filter`` keeps items whose value has each key with that value.
4. ``list_namespaces`` lists the namespaces of the items (prefix and suffix conditions, ``*``
   matching one part, ``max_depth`` truncating).

LangGraph's ``index`` (which fields to embed) and ``ttl`` are not used: graphmem embeds the
text, and decay classes govern expiry.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..client import Client
from ..errors import InvalidInput
from ..limits import MAX_LIMIT
from ..memory import Memory
from ..models import Fact

#: The source of every fact an item is.
SOURCE: Final = "langgraph"
#: The value fields whose text is searched, the first that is text.
TEXT_FIELDS: Final = ("text", "content", "memory", "value")
#: Items a search without a query, or a namespace listing, reads at most.
MAX_LISTED: Final = 10_000


class GraphmemStore(BaseStore):
    """LangGraph's ``BaseStore`` over a ``Memory`` or a ``Client`` (see the module)."""

    def __init__(self, memory: Memory | Client) -> None:
        self.memory = memory

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; each result in its place (None for a put)."""
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread (graphmem's calls block)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, PutOp):
            self._put(op.namespace, op.key, op.value)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        raise InvalidInput(f"unknown store operation {type(op).__name__}")

    # ----------------------------------------------------------------------------- items

    def _current(self, namespace: tuple[str, ...], key: str) -> Fact | None:
        # lookup matches entities whatever their case and outer spaces: ("Users", "ALICE") is
        # another namespace than ("users", "alice"), so the entity must be the same exactly.
        name = entity(namespace)
        found = self.memory.lookup(name, key=key, limit=MAX_LIMIT)
        return next(
            (f for f in found if f.source == SOURCE and f.entity == name and f.key == key), None
        )

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        fact = self._current(namespace, key)
        value = None if fact is None else _value(fact)
        return None if fact is None or value is None else self._item(fact, value)

    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any] | None) -> None:
        current = self._current(namespace, key)
        if value is None:
            if current is not None:
                self.memory.forget(current.id)
            return
        if not isinstance(value, Mapping):
            raise InvalidInput("an item's value must be a JSON object", field="value")
        try:
            context = json.dumps(dict(value), ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidInput(f"an item's value must be JSON: {exc}", field="value") from None
        item = {
            "text": text_of(value),
            "entity": entity(namespace),
            "key": key,
            "context": context,
            "source": SOURCE,
            "classify": False,
            "dedup": False,  # another namespace's item may say the same
        }
        if current is not None:
            item["supersedes"] = current.id
        self.memory.store_many([item])

    def _item(self, fact: Fact, value: dict[str, Any], score: float | None = None) -> SearchItem:
        created = fact.recorded_at
        if fact.supersedes_id is not None:  # a later version: created with the first
            versions = self.memory.history(fact.id)
            created = versions[0].recorded_at if versions else created
        return SearchItem(
            namespace_of(fact.entity or ""),
            fact.key or "",
            value,
            created,
            fact.recorded_at,
            score,
        )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = entity(op.namespace_prefix) if op.namespace_prefix else ""
        wanted = op.offset + op.limit
        found: list[tuple[Fact, float | None]]
        if op.query:
            hits = self.memory.search(op.query, limit=MAX_LIMIT, source=SOURCE)
            found = [(h.fact, h.score) for h in hits if _under(h.fact, prefix)]
        else:
            found = [(f, None) for f in self._items() if _under(f, prefix)]
        kept = [
            (fact, value, score)
            for fact, score in found
            if (value := _value(fact)) is not None and _matches(value, op.filter or {})
        ][op.offset : wanted]
        return [self._item(fact, value, score) for fact, value, score in kept]

    def _items(self) -> list[Fact]:
        out: list[Fact] = []
        after: int | None = None
        while len(out) < MAX_LISTED:
            page = self.memory.facts(first=MAX_LIMIT, after=after, source=SOURCE)
            out += [fact for _, fact in page.items]
            if not page.has_more or not page.items:
                break
            after = page.items[-1][0]
        return out

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        found = sorted({namespace_of(f.entity or "") for f in self._items()})
        kept = [n for n in found if all(_meets(n, c) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            kept = sorted(set(n[: op.max_depth] for n in kept))
        return kept[op.offset : op.offset + op.limit]


def entity(namespace: tuple[str, ...]) -> str:
    """The entity of a LangGraph namespace: its parts joined by "/"; InvalidInput for an empty
    part or one holding "/"."""
    if not isinstance(namespace, tuple) or not namespace:
        raise InvalidInput("a namespace is a non-empty tuple of strings", field="namespace")
    for part in namespace:
        if not isinstance(part, str) or not part or "/" in part:
            raise InvalidInput(
                f"namespace part {part!r} must be non-empty text without '/'", field="namespace"
            )
    return "/".join(namespace)


def namespace_of(name: str) -> tuple[str, ...]:
    return tuple(name.split("/"))


def text_of(value: Mapping[str, Any]) -> str:
    """The text an item is searched by (see the module's step 1)."""
    for name in TEXT_FIELDS:
        if isinstance(value.get(name), str) and value[name].strip():
            return str(value[name])
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True)


def _under(fact: Fact, prefix: str) -> bool:
    name = fact.entity or ""
    return not prefix or name == prefix or name.startswith(prefix + "/")


def _matches(value: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(value.get(k) == v for k, v in wanted.items())


def _meets(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def _value(fact: Fact) -> dict[str, Any] | None:
    """The item's value a fact holds, or None when its context is not a JSON object (a fact
    written with this store's source by other means, perhaps nested too deep to parse)."""
    try:
        value = json.loads(fact.context or "{}")
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


__all__ = ["GraphmemStore"]
