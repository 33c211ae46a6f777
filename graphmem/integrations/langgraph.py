"""LangGraph's long-term memory store (``langgraph.store.base.BaseStore``) over graphmem, in
process (a ``Memory``) or over the service (a ``Client``): ``pip install 'graphmem[langgraph]'``.

    store = GraphmemStore(Memory.open("data"))          # or GraphmemStore(Client(url))
    graph = builder.compile(store=store, checkpointer=InMemorySaver())
    store.put(("users", "alice", "memories"), "food", {"text": "likes pizza"})
    store.search(("users", "alice"), query="what does she eat?")

1. An item is a fact of the graphmem namespace the memory or client works in: its entity is the
   LangGraph namespace joined by "/" (``users/alice/memories``), its key the item's key, its
   source ``langgraph``; its JSON value is kept whole in the fact's ``context`` and its text,
   which search and recall read, is what the item is indexed by (step 5).
2. ``put`` stores a new version that supersedes the item's current one (history keeps every
   version: ``created_at`` is the first's recording time, ``updated_at`` the current's);
   ``delete`` forgets it. Puts to one item are last-writer-wins, leaving one live version
   however many run at once: one store's puts to an item take turns, and a put that finds the
   version it read superseded meanwhile (another store, process or service replica) reads
   again and retries; two first versions written at once are settled by the later forgetting
   the earlier.
3. ``search`` with a ``query`` is graphmem's hybrid search among the items under the namespace
   prefix (``score`` its score), best first, then the prefix's other items, unscored, up to
   ``limit``; without a query, the items under the prefix in the order they were last
   written. ``filter`` keeps the items whose value matches each of its entries as LangGraph's
   InMemoryStore matches them: a value equal to the filter's (a nested object matches the
   keys it names, a list element by element), or the operators ``$eq``, ``$ne``, ``$gt``,
   ``$gte``, ``$lt`` and ``$lte`` (comparisons between numbers, or between texts); a key
   with dots (``"user.age"``) is a path into nested objects, unless the value has the dotted
   key itself.
4. ``list_namespaces`` lists the namespaces of the items (prefix and suffix conditions, ``*``
   matching one part, ``max_depth`` truncating).
5. ``index``: the fields of a value that are its text, as LangGraph's stores embed them —
   ``GraphmemStore(memory, index={"fields": ["memory", "tags[*]"]})`` for every put, or
   ``put(..., index=[...])`` for one (LangGraph's path syntax; ``"$"`` the whole value as JSON);
   their texts, one a line, are the fact's text. ``index=False``, or fields that hold no
   text, keep the item out of the scored part of a query's results (its fact's text is then
   its value's, for graphmem's own search). With no ``index`` anywhere, the text is the
   value's ``text`` (else ``content``, ``memory`` or ``value`` when they are text, else the
   value as JSON); with an ``index`` that names no fields, the value as JSON. graphmem embeds
   with its own embedder (the memory's or the service's setting), so ``embed`` and ``dims``
   are kept in ``index_config`` and not used.

Every operation of a ``batch`` is checked before any runs, as LangGraph's SQL stores check
them: InvalidNamespaceError for a namespace label that is not text, is empty, or holds ".",
a NUL, or the "/" graphmem joins labels with (or that begins or ends the namespace with
spaces, which graphmem's entities do not keep); InvalidInput for a key that is not text, is
empty or has outer spaces, a value that is not a JSON object, and an unknown filter operator.
``ttl`` is not supported (``supports_ttl`` is False): decay classes govern expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    validate_op_namespace,
)

from ..client import Client
from ..errors import Conflict, InvalidInput, NotFound
from ..limits import MAX_FIELD_LENGTH, MAX_LIMIT, MAX_TEXT_LENGTH
from ..memory import Memory
from ..models import Fact

#: The source of every fact an item is.
SOURCE: Final = "langgraph"
#: The tag of an item kept out of the scored part of a query's results (``index=False``).
UNINDEXED: Final = "langgraph-unindexed"
#: The value fields whose text is searched, the first that is text (no ``index`` given).
TEXT_FIELDS: Final = ("text", "content", "memory", "value")
#: Items a search without a query, or a namespace listing, reads at most.
MAX_LISTED: Final = 10_000
#: How many times a put reads the current version again when another writer superseded it.
MAX_ATTEMPTS: Final = 50
#: The filter operators, as LangGraph's stores name them.
OPERATORS: Final = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
#: One store's puts to one item take turns on one of this many locks.
LOCKS: Final = 64

_MISSING: Final = object()


class GraphmemStore(BaseStore):
    """LangGraph's ``BaseStore`` over a ``Memory`` or a ``Client`` (see the module)."""

    def __init__(self, memory: Memory | Client, *, index: IndexConfig | None = None) -> None:
        self.memory = memory
        self.index_config: dict[str, Any] | None = None if index is None else dict(index)
        self.fields: list[str] | None = None
        if self.index_config is not None:
            self.fields = _fields(self.index_config.get("fields") or ["$"], "index.fields")
        self._locks = [threading.Lock() for _ in range(LOCKS)]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order, each result in its place (None for a put), once every one of
        them has been checked (see the module)."""
        ops = list(ops)
        for op in ops:
            _check(op)
        return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` in a worker thread (graphmem's calls block)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(tuple(op.namespace), op.key)
        if isinstance(op, PutOp):
            self._put(tuple(op.namespace), op.key, op.value, op.index)
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        assert isinstance(op, ListNamespacesOp)  # _check refused any other
        return self._namespaces(op)

    # ----------------------------------------------------------------------------- items

    def _versions(self, name: str, key: str) -> list[Fact]:
        """The item's live facts, the current first: one, but for a moment while writers race
        (the module's step 2). lookup matches entities whatever their case and outer spaces: ("Users", "ALICE") is
        another namespace than ("users", "alice"), so the entity must be the same exactly."""
        found = self.memory.lookup(name, key=key, limit=MAX_LIMIT)
        mine = [f for f in found if f.source == SOURCE and f.entity == name and f.key == key]
        return sorted(mine, key=_newest, reverse=True)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        versions = self._versions(entity(namespace), key)
        value = _value(versions[0]) if versions else None
        return None if value is None else self._item(versions[0], value)

    def _put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any] | None,
        index: Sequence[str] | bool | None,
    ) -> None:
        name = entity(namespace)
        with self._locks[hash((name, key)) % LOCKS]:
            if value is None:
                self._forget(self._versions(name, key))
                return
            item = self._fact(name, key, value, index)
            for _ in range(MAX_ATTEMPTS):
                current = self._versions(name, key)
                item["supersedes"] = current[0].id if current else None
                try:
                    self.memory.store_many([item])
                except (Conflict, NotFound):  # another writer's version came in between
                    continue
                break
            else:
                raise Conflict(f"put of {name}/{key}: {MAX_ATTEMPTS} other writers came first")
            self._forget(self._versions(name, key)[1:])

    def _forget(self, facts: Iterable[Fact]) -> None:
        for fact in facts:
            with contextlib.suppress(Conflict, NotFound):  # another writer's forget came first
                self.memory.forget(fact.id)

    def _fact(
        self,
        name: str,
        key: str,
        value: Mapping[str, Any],
        index: Sequence[str] | bool | None,
    ) -> dict[str, Any]:
        """The fact an item's value is stored as (see the module's steps 1 and 5)."""
        try:
            context = json.dumps(dict(value), ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidInput(f"an item's value must be JSON: {exc}", field="value") from None
        fields = self.fields if index is None or index is True else index
        text = None if fields is False else _indexed_text(value, fields)
        item: dict[str, Any] = {
            "text": (text or text_of(value))[:MAX_TEXT_LENGTH],
            "entity": name,
            "key": key,
            "context": context,
            "source": SOURCE,
            "classify": False,
            "dedup": False,  # another namespace's item may say the same
        }
        if text is None:
            item["tags"] = [UNINDEXED]
        return item

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
        prefix = entity(tuple(op.namespace_prefix)) if op.namespace_prefix else ""
        wanted = op.offset + op.limit
        kept: list[tuple[Fact, dict[str, Any], float | None]] = []
        seen: set[tuple[str | None, str | None]] = set()

        def keep(fact: Fact, score: float | None) -> None:
            value = _value(fact)
            if (fact.entity, fact.key) not in seen and value is not None:
                seen.add((fact.entity, fact.key))
                if _matches(value, op.filter or {}):
                    kept.append((fact, value, score))

        if op.query:
            for hit in self.memory.search(
                op.query[:MAX_TEXT_LENGTH], limit=MAX_LIMIT, source=SOURCE
            ):
                if _under(hit.fact, prefix) and UNINDEXED not in hit.fact.tags:
                    keep(hit.fact, hit.score)
        if len(kept) < wanted:  # the prefix's other items, unscored
            for fact in _current(self._items()):
                if _under(fact, prefix):
                    keep(fact, None)
        return [self._item(fact, value, score) for fact, value, score in kept[op.offset : wanted]]

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
    """The entity of a LangGraph namespace: its parts joined by "/"; InvalidNamespaceError for
    a part that is not text, is empty or holds "/", "." or a NUL, or a namespace that begins
    or ends with spaces."""
    if not isinstance(namespace, tuple) or not namespace:
        raise InvalidNamespaceError(f"a namespace is a non-empty tuple of strings: {namespace!r}")
    _labels(namespace)
    name = "/".join(namespace)
    if name != name.strip():
        raise InvalidNamespaceError(
            f"namespace {namespace!r} begins or ends with spaces, which graphmem does not keep"
        )
    if len(name) > MAX_FIELD_LENGTH:
        raise InvalidNamespaceError(
            f"namespace {namespace!r} is longer than {MAX_FIELD_LENGTH} characters joined"
        )
    return name


def namespace_of(name: str) -> tuple[str, ...]:
    return tuple(name.split("/"))


def text_of(value: Mapping[str, Any]) -> str:
    """The text an item is searched by when no ``index`` names its fields (step 5)."""
    for name in TEXT_FIELDS:
        if isinstance(value.get(name), str) and value[name].strip():
            return str(value[name])
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True)


def _indexed_text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str | None:
    """The texts at ``fields``, one a line (graphmem's own rule with no fields); None when
    they hold none."""
    if fields is None:
        return text_of(value)
    texts = [t for path in fields for t in get_text_at_path(value, path) if t.strip()]
    return "\n".join(texts) if texts else None


def _check(op: Op) -> None:
    """Refuse ``op`` as the module says, before anything of its batch runs."""
    if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
        raise InvalidInput(f"unknown store operation {type(op).__name__}")
    validate_op_namespace(op)  # LangGraph's own rules for labels
    if isinstance(op, GetOp | PutOp):
        entity(tuple(op.namespace))
        _key(op.key)
    if isinstance(op, PutOp):
        if op.ttl is not None:
            raise NotImplementedError(
                "GraphmemStore does not support ttl: graphmem's decay classes govern expiry"
            )
        if op.value is not None and not isinstance(op.value, Mapping):
            raise InvalidInput("an item's value must be a JSON object", field="value")
        if op.index is not None and op.index is not False:
            _fields(op.index, "index")
    elif isinstance(op, SearchOp):
        if op.namespace_prefix:
            entity(tuple(op.namespace_prefix))
        if op.filter is not None and not isinstance(op.filter, Mapping):
            raise InvalidInput("a search filter must be an object", field="filter")
        _check_filter(op.filter or {})
    elif isinstance(op, ListNamespacesOp):
        for condition in op.match_conditions or ():
            _labels(tuple(condition.path))


def _labels(parts: tuple[Any, ...]) -> None:
    for part in parts:
        if isinstance(part, str) and "/" in part:
            raise InvalidNamespaceError(
                f"namespace label {part!r} holds '/', which graphmem joins labels with"
            )


def _key(key: Any) -> None:
    if not isinstance(key, str) or not key or key != key.strip() or len(key) > MAX_FIELD_LENGTH:
        raise InvalidInput(
            f"an item's key must be text of 1 to {MAX_FIELD_LENGTH} characters without outer "
            f"spaces, got {key!r}",
            field="key",
        )


def _fields(fields: Any, name: str) -> list[str]:
    if isinstance(fields, str) or not isinstance(fields, Sequence):
        raise InvalidInput(f"{name} must be a list of field paths", field=name)
    if not all(isinstance(f, str) and f for f in fields):
        raise InvalidInput(f"{name} must be a list of field paths (text)", field=name)
    return list(fields)


def _check_filter(wanted: Mapping[str, Any]) -> None:
    for value in wanted.values():
        if isinstance(value, Mapping):
            if any(str(k).startswith("$") for k in value):
                if bad := [k for k in value if k not in OPERATORS]:
                    raise InvalidInput(
                        f"unknown filter operator {bad[0]!r}: use {', '.join(OPERATORS)}",
                        field="filter",
                    )
            else:
                _check_filter(value)


def _under(fact: Fact, prefix: str) -> bool:
    name = fact.entity or ""
    return not prefix or name == prefix or name.startswith(prefix + "/")


def _newest(fact: Fact) -> tuple[Any, str]:
    """Orders an item's versions: the one written last, the id breaking a tie of time."""
    return fact.recorded_at, fact.id


def _current(facts: list[Fact]) -> list[Fact]:
    """One fact per item (the newest, where racing writers left two), in the order given."""
    best: dict[tuple[str | None, str | None], Fact] = {}
    for fact in facts:
        known = best.get((fact.entity, fact.key))
        if known is None or _newest(fact) > _newest(known):
            best[(fact.entity, fact.key)] = fact
    chosen = {f.id for f in best.values()}
    return [f for f in facts if f.id in chosen]


def _matches(value: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return all(_compare(_at(value, key), expected) for key, expected in wanted.items())


def _at(value: Mapping[str, Any], key: str) -> Any:
    """The value's entry ``key``, or the entry its dotted path leads to; _MISSING if none."""
    if key in value:
        return value[key]
    here: Any = value
    for part in key.split("."):
        if not isinstance(here, Mapping) or part not in here:
            return _MISSING
        here = here[part]
    return here


def _compare(actual: Any, expected: Any) -> bool:
    """InMemoryStore's matching (see the module's step 3); a missing entry is null."""
    actual = None if actual is _MISSING else actual
    if isinstance(expected, Mapping):
        if any(str(k).startswith("$") for k in expected):
            return all(_operator(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, Mapping) and all(
            _compare(actual.get(k, _MISSING), v) for k, v in expected.items()
        )
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_compare(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return _equal(actual, expected)


def _equal(actual: Any, expected: Any) -> bool:
    if isinstance(actual, bool) or isinstance(expected, bool):  # True is no 1 in JSON
        return type(actual) is type(expected) and actual == expected
    return bool(actual == expected)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _compare(actual, operand)
    if op == "$ne":
        return not _compare(actual, operand)
    comparable = (_number(actual) and _number(operand)) or (
        isinstance(actual, str) and isinstance(operand, str)
    )
    if comparable:
        if op == "$gt":
            return bool(actual > operand)
        if op == "$gte":
            return bool(actual >= operand)
        if op == "$lt":
            return bool(actual < operand)
        return bool(actual <= operand)  # $lte: _check_filter refused any other
    return False


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _meets(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    path = tuple(condition.path)
    if not path:
        return True
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
