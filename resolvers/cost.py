"""What a GraphQL document may cost, worked out before it runs, and what each key may spend.

1. **Cost** (:func:`cost_of`): the most list items the document's answer may hold, as GitHub's
   node limit counts them, introspection's included (its lists sized from the schema itself,
   :func:`introspection_sizes`). A document over the ``graphql_max_cost`` setting is refused
   before anything runs (``TOO_COSTLY``, naming both).
2. **Spending** (:class:`Buckets`): each API key has ``rate_limit_per_minute`` cost points,
   refilled continuously; a request that finds too few is refused with ``RATE_LIMITED`` (HTTP
   429 and ``Retry-After``). Buckets live in the server process.
3. **Heavy documents**: a document of :data:`HEAVY_COST` or more, or with a list of no knowable
   bound, runs off the event loop, on the lane (``resolvers.fairness``), so a large answer never
   holds up another tenant's request.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from graphql import (
    BooleanValueNode,
    DocumentNode,
    EnumValueNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLEnumType,
    GraphQLField,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    Undefined,
    ValueNode,
    VariableNode,
    get_named_type,
    is_abstract_type,
    is_leaf_type,
    is_list_type,
    is_non_null_type,
    value_from_ast_untyped,
)

from graphmem import profiles
from graphmem import recall as recalls
from graphmem.capture import TURN_PART_CHARS
from graphmem.categorize import ASSIGNABLE, MAX_DISCOVERED
from graphmem.consolidation import MAX_CONSIDERED
from graphmem.errors import Code
from graphmem.limits import (
    MAX_BATCH,
    MAX_CAPTURE_MESSAGES,
    MAX_DEPTH,
    MAX_LIMIT,
    MAX_NODES,
    MAX_SYNC_PATHS,
)
from graphmem.maintenance import REGISTRY, most_changed_kinds
from graphmem.reflection import MAX_FOUND
from graphmem.tagging import CATEGORIES

#: Documents of at least this cost run on a thread of their own (the lane, ``fairness.py``, which
#: says how many run at once): completing a few thousand items takes tens of ms of the event
#: loop, which every other request would wait for.
HEAVY_COST: Final = 2_000
#: The most a subscription may cost: each of its events is answered on the event loop, once
#: for every change, and a key may hold a thousand subscriptions (20 a socket, 50 sockets).
SUBSCRIPTION_MAX_COST: Final = 100
#: What a version chain, an episode's facts and a recall block count as (they take no page
#: size): chains and episodes are read whole, and a recall block holds what fits its budget.
HISTORY_COUNT: Final = 100
EPISODE_FACTS_COUNT: Final = 1_000
RECALL_ITEMS_COUNT: Final = 100


@dataclass(frozen=True, slots=True)
class Size:
    """How many objects a list field may hold: the value of ``argument`` (of the field itself,
    or of its parent field when ``of_parent``; for a list argument, its length; its default when
    not given), at most ``cap``; or ``fixed``; times ``factor``."""

    argument: str | None = None
    cap: int = 0
    of_parent: bool = False
    fixed: int = 0
    factor: int = 1
    #: The list's items were counted at the field above it (a connection's ``edges``, a
    #: payload's ``results``): the list adds nothing itself.
    counted_above: bool = False
    #: Its length has no bound the cost can know (a version chain, an episode, the links among
    #: a traversal's facts): a document selecting it runs on the lane whatever its cost.
    unbounded: bool = False
    #: What the docs say about the count (Markdown).
    note: str = ""
    #: For a list argument of objects: each item counts once per this many characters begun
    #: of its ``content`` (at least once) rather than once (:func:`capture_points`).
    per_chars: int = 0


#: Every list of objects in the schema, and every field whose items are counted where it is
#: selected (connections, batch mutations), with how many items each may hold (a test checks
#: that no list is missing).
LIST_SIZES: Final[Mapping[tuple[str, str], Size]] = {
    ("Query", "search"): Size("limit", MAX_LIMIT),
    ("Query", "lookup"): Size("limit", MAX_LIMIT),
    ("Query", "entities"): Size("limit", MAX_LIMIT),
    ("Query", "episodes"): Size("limit", MAX_LIMIT),
    ("Query", "erasures"): Size("limit", MAX_LIMIT),
    ("Query", "maintenanceRuns"): Size("limit", MAX_LIMIT),
    ("MaintenanceRun", "changed"): Size(fixed=most_changed_kinds()),
    ("MaintainPayload", "runs"): Size(fixed=len(REGISTRY)),
    ("Query", "categories"): Size(fixed=len(CATEGORIES) + MAX_DISCOVERED),
    ("AutoClassifyPayload", "relabelled"): Size(fixed=len(ASSIGNABLE) + MAX_DISCOVERED),
    ("ReflectPayload", "patterns"): Size(fixed=MAX_FOUND),
    ("ReflectPayload", "rules"): Size(fixed=MAX_FOUND),
    ("ConsolidatePayload", "merged"): Size(
        fixed=MAX_CONSIDERED // 2, note=f"counted as {MAX_CONSIDERED // 2:,} facts"
    ),
    ("Query", "facts"): Size("first", MAX_LIMIT),
    ("Fact", "links"): Size("first", MAX_LIMIT),
    ("FactConnection", "edges"): Size(counted_above=True),
    ("LinkConnection", "edges"): Size(counted_above=True),
    ("Mutation", "storeFacts"): Size("inputs", MAX_BATCH),
    ("Mutation", "captureMessages"): Size(
        "messages",
        MAX_CAPTURE_MESSAGES,
        per_chars=TURN_PART_CHARS,
        note=f"a point per {TURN_PART_CHARS:,} characters begun of each of its `messages` "
        f"(at least one a message, at most {MAX_CAPTURE_MESSAGES:,} messages): the turn parts "
        "capture embeds and stores",
    ),
    ("StoreFactsPayload", "results"): Size(counted_above=True),
    ("CapturePayload", "results"): Size(counted_above=True),
    ("Query", "documents"): Size(
        fixed=MAX_SYNC_PATHS, unbounded=True, note=f"counted as {MAX_SYNC_PATHS:,} files"
    ),
    ("Query", "history"): Size(
        fixed=HISTORY_COUNT, unbounded=True, note=f"counted as {HISTORY_COUNT} versions"
    ),
    ("Fact", "history"): Size(
        fixed=HISTORY_COUNT, unbounded=True, note=f"counted as {HISTORY_COUNT} versions"
    ),
    ("Episode", "facts"): Size(
        fixed=EPISODE_FACTS_COUNT, unbounded=True, note=f"counted as {EPISODE_FACTS_COUNT:,} facts"
    ),
    ("Subgraph", "nodes"): Size("maxNodes", MAX_NODES, of_parent=True),
    ("Subgraph", "edges"): Size(
        "maxNodes",
        MAX_NODES,
        of_parent=True,
        factor=2,
        unbounded=True,
        note="counted as twice `maxNodes`",
    ),
    ("Path", "facts"): Size(fixed=MAX_DEPTH + 1),
    ("Path", "links"): Size(fixed=MAX_DEPTH),
    ("Profile", "attributes"): Size(fixed=profiles.KEYS),
    ("ProfileAttribute", "values"): Size(fixed=profiles.VALUES_PER_KEY),
    ("Profile", "facts"): Size(fixed=profiles.FACTS),
    ("Profile", "linked"): Size(fixed=profiles.LINKED),
    ("Recall", "profiles"): Size(fixed=recalls.PROFILES),
    ("Recall", "items"): Size(fixed=RECALL_ITEMS_COUNT, note=f"counted as {RECALL_ITEMS_COUNT}"),
    ("Recall", "facts"): Size(fixed=RECALL_ITEMS_COUNT, note=f"counted as {RECALL_ITEMS_COUNT}"),
}


#: Mutations whose work is far more than the items of their answer, with the items that work
#: counts as: a consolidation reads, embeds and searches up to MAX_CONSIDERED facts (and so may
#: maintenance, which runs it); reflection and auto-classify send requests to the chat model;
#: rebuilding the entity names reads every fact of the namespace in one write transaction.
#: Each counts at least HEAVY_COST, so it also runs on the lane, a few at a time.
WORK: Final[Mapping[tuple[str, str], int]] = {
    ("Mutation", "consolidate"): MAX_CONSIDERED,
    ("Mutation", "maintain"): MAX_CONSIDERED,
    ("Mutation", "reflect"): HEAVY_COST,
    ("Mutation", "autoClassify"): HEAVY_COST,
    ("Mutation", "rebuildEntities"): HEAVY_COST,
}
#: The rerankers that send a request (to a reranker service, to the chat model): a search or
#: recall one reranks counts HEAVY_COST more (:func:`rerank_work`), and so runs on the lane like
#: the mutations above.
CALLING_OUT: Final = frozenset({"http", "llm"})
#: The fields the rerank stage runs in (recall names no reranker: the setting's runs).
RERANKED: Final = frozenset({("Query", "search"), ("Query", "recall")})
#: The fields that send the chat model a request when the boolean argument named here is true:
#: each then counts HEAVY_COST more, and so runs on the lane.
ASKING: Final[Mapping[tuple[str, str], str]] = {("Query", "profile"): "summary"}


def rerank_work(named: Any, default: str) -> int:
    """HEAVY_COST when the reranker a search runs sends a request: the one it names, or when it
    names none (None, or an argument left out), the server's ``reranker`` setting ``default``;
    else 0. A call that names ``none`` or ``features`` sends none, whatever the setting."""
    chosen = default if named is None or named is Undefined else str(named)
    return HEAVY_COST if chosen.lower() in CALLING_OUT else 0


class CostError(Exception):
    """A document refused for its cost, or for a key's spent budget: the GraphQL error code,
    the message, and the seconds to wait before trying again (rate limits only)."""

    def __init__(self, code: str, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after


def fragments_of(document: DocumentNode) -> dict[str, FragmentDefinitionNode]:
    """The document's fragment definitions by name."""
    return {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}


def cost_of(
    schema: GraphQLSchema,
    operation: OperationDefinitionNode,
    fragments: Mapping[str, FragmentDefinitionNode],
    variables: Mapping[str, Any] | None,
    default_rerank: str = "none",
) -> tuple[int, bool]:
    """The worst-case cost of ``operation``, and whether it selects a list of no knowable
    bound (``Size.unbounded``); ``default_rerank`` is the server's ``reranker`` setting, which
    reranks the searches that name none and every recall.

    Each list of objects counts its page size (``first``, ``limit``, ``maxNodes``, or the
    number of inputs, clamped to the field's own maximum) times the items of the lists above
    it, and every alias counts again; an object outside a list is part of the item that holds
    it. So ``fact(id) { links(first: 100) { edges { neighbour { links(first: 10) { edges {
    neighbourId } } } } } }`` costs 100 + 100 x 10 = 1,100. Lists without a page size count
    the bound in ``LIST_SIZES``, introspection's lists the sizes of the schema itself
    (:func:`introspection_sizes`); the mutations of ``WORK`` count their work too; every
    document costs at least 1.
    """
    root = {
        OperationType.QUERY: schema.query_type,
        OperationType.MUTATION: schema.mutation_type,
        OperationType.SUBSCRIPTION: schema.subscription_type,
    }[operation.operation]
    if root is None:
        return 0, False
    defaults = {
        d.variable.name.value: d.default_value
        for d in operation.variable_definitions or ()
        if d.default_value is not None
    }
    walk = _Walk(schema, fragments, variables or {}, defaults, default_rerank)
    # At least 1: every request spends something from its key's bucket.
    return max(1, walk.selections(root, operation.selection_set, 1, {}, set())), walk.unbounded


class _Walk:
    def __init__(
        self,
        schema: GraphQLSchema,
        fragments: Mapping[str, FragmentDefinitionNode],
        variables: Mapping[str, Any],
        defaults: Mapping[str, ValueNode],
        default_rerank: str,
    ) -> None:
        self.schema = schema
        self.default_rerank = default_rerank
        self.types = schema.type_map
        self.introspection = introspection_sizes(schema)
        self.fragments = fragments
        self.unbounded = False
        #: A fragment's cost for one item where it is spread, by (name, type, arguments
        #: above): a fragment spread many times is walked once.
        self.units: dict[Any, int] = {}
        self.variables = variables
        self.defaults = defaults

    def selections(
        self,
        parent: GraphQLObjectType,
        selection_set: SelectionSetNode,
        times: int,
        parent_args: Mapping[str, Any],
        spreading: set[str],
    ) -> int:
        cost = 0
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                cost += self.field(parent, selection, times, parent_args, spreading)
            elif isinstance(selection, InlineFragmentNode):
                inner = parent
                if selection.type_condition is not None:
                    named = selection.type_condition.name.value
                    inner = self.object_type(parent, named)
                cost += self.selections(
                    inner, selection.selection_set, times, parent_args, spreading
                )
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = self.fragments.get(name)
                if fragment is None or name in spreading:  # validation refuses both
                    continue
                inner = self.object_type(parent, fragment.type_condition.name.value)
                key = (name, inner.name, _frozen(parent_args))
                unit = self.units.get(key)
                if unit is None:
                    unit = self.selections(
                        inner, fragment.selection_set, 1, parent_args, spreading | {name}
                    )
                    self.units[key] = unit
                cost += times * unit  # a cost is linear in the items above it
        return cost

    def field(
        self,
        parent: GraphQLObjectType,
        node: FieldNode,
        times: int,
        parent_args: Mapping[str, Any],
        spreading: set[str],
    ) -> int:
        name = node.name.value
        # The root's __schema and __type too, which are no field of the type itself.
        definition = self.schema.get_field(parent, name)
        if definition is None:  # validation refuses it
            return 0
        named = get_named_type(definition.type)
        if is_leaf_type(named) or not isinstance(named, GraphQLObjectType):
            return 0
        args = self.arguments(definition, node)
        work = times * WORK.get((parent.name, name), 0)
        if (parent.name, name) in RERANKED:
            work += times * rerank_work(args.get("rerank"), self.default_rerank)
        asking = ASKING.get((parent.name, name))
        if asking is not None and args.get(asking) is True:
            work += times * HEAVY_COST
        size = LIST_SIZES.get((parent.name, name)) or self.introspection.get((parent.name, name))
        if size is None and _is_list(definition):
            size = Size(fixed=MAX_LIMIT)
        listed = 0
        if size is not None and not size.counted_above:
            listed = times * _count(size, args, parent_args)
            self.unbounded = self.unbounded or size.unbounded
        objects = listed or times  # a single object is part of the item that holds it
        if node.selection_set is None:
            return work + listed
        return work + listed + self.selections(named, node.selection_set, objects, args, spreading)

    def object_type(self, parent: GraphQLObjectType, name: str) -> GraphQLObjectType:
        """The type a fragment's condition names when it is an object type, else ``parent``
        (this schema's abstract types have no fields of their own to count)."""
        named = self.types.get(name)
        return named if isinstance(named, GraphQLObjectType) else parent

    def arguments(self, definition: GraphQLField, node: FieldNode) -> dict[str, Any]:
        """The field's arguments as far as sizes go: integers, and lists' lengths."""
        given = {argument.name.value: argument.value for argument in node.arguments or ()}
        values: dict[str, Any] = {}
        for name, argument in definition.args.items():
            value = self.value(given[name]) if name in given else argument.default_value
            values[name] = value
        return values

    def value(self, node: ValueNode) -> Any:
        if isinstance(node, VariableNode):
            name = node.name.value
            if name in self.variables:
                return self.variables[name]
            default = self.defaults.get(name)
            return None if default is None else self.value(default)
        if isinstance(node, IntValueNode):
            return int(node.value)
        if isinstance(node, EnumValueNode):  # a reranker's name
            return node.value
        if isinstance(node, BooleanValueNode):  # whether to ask the chat model
            return node.value
        if isinstance(node, ListValueNode):  # its items, as a variable's: counted as listed
            return value_from_ast_untyped(node, dict(self.variables))
        return None


def introspection_sizes(schema: GraphQLSchema) -> Mapping[tuple[str, str], Size]:
    """How many objects each list of the introspection types may hold in ``schema``: its
    number of types and of directives, and for a type's fields (arguments, enum values…) the
    most that any one of them has. Worked out once per schema."""
    found = _INTROSPECTION_SIZES.get(schema)
    if found is None:
        found = _INTROSPECTION_SIZES[schema] = _introspection_sizes(schema)
    return found


_INTROSPECTION_SIZES: weakref.WeakKeyDictionary[GraphQLSchema, Mapping[tuple[str, str], Size]] = (
    weakref.WeakKeyDictionary()
)


def _introspection_sizes(schema: GraphQLSchema) -> Mapping[tuple[str, str], Size]:
    kinds = list(schema.type_map.values())
    composite = [k for k in kinds if isinstance(k, GraphQLObjectType | GraphQLInterfaceType)]
    counts = {
        ("__Schema", "types"): len(kinds),
        ("__Schema", "directives"): len(schema.directives),
        ("__Type", "fields"): max((len(k.fields) for k in composite), default=0),
        ("__Type", "interfaces"): max((len(k.interfaces) for k in composite), default=0),
        ("__Type", "possibleTypes"): max(
            (len(schema.get_possible_types(k)) for k in kinds if is_abstract_type(k)), default=0
        ),
        ("__Type", "enumValues"): max(
            (len(k.values) for k in kinds if isinstance(k, GraphQLEnumType)), default=0
        ),
        ("__Type", "inputFields"): max(
            (len(k.fields) for k in kinds if isinstance(k, GraphQLInputObjectType)), default=0
        ),
        ("__Field", "args"): max(
            (len(f.args) for k in composite for f in k.fields.values()), default=0
        ),
        ("__Directive", "args"): max((len(d.args) for d in schema.directives), default=0),
    }
    return {key: Size(fixed=count) for key, count in counts.items()}


def _is_list(definition: GraphQLField) -> bool:
    kind = definition.type
    if is_non_null_type(kind):
        kind = kind.of_type
    return is_list_type(kind)


def _frozen(args: Mapping[str, Any]) -> tuple[tuple[str, int | None], ...]:
    """``args`` as a key of ``_Walk.units``: what a fragment's sizes may read of the arguments
    above it (numbers, and lists' lengths). Always a key, whatever the values (a list, an input
    object): a fragment walked afresh at every spread would cost time exponential in its
    nesting."""
    return tuple(
        sorted(
            (name, len(value) if isinstance(value, list | tuple) else _number(value))
            for name, value in args.items()
        )
    )


def _number(value: Any) -> int | None:
    """A number as ``_count`` reads it; None for what it does not (and so counts as the cap)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def capture_points(contents: Iterable[object], per_chars: int = TURN_PART_CHARS) -> int:
    """What capturing messages of these contents counts as, over GraphQL and MCP alike: each
    message one point per ``per_chars`` characters begun, at least one, as capture keeps it in
    turn parts of at most that many characters, each embedded and stored."""
    return sum(
        max(1, -(-len(text) // per_chars)) if isinstance(text, str) else 1 for text in contents
    )


def _count(size: Size, args: Mapping[str, Any], parent_args: Mapping[str, Any]) -> int:
    if size.argument is None:
        return size.fixed * size.factor
    value = (parent_args if size.of_parent else args).get(size.argument)
    if size.per_chars and isinstance(value, list | tuple):
        items = value[: size.cap]  # more are refused before anything runs
        contents = (item.get("content") if isinstance(item, Mapping) else None for item in items)
        return capture_points(contents, size.per_chars) * size.factor
    if isinstance(value, list | tuple):
        value = len(value)
    if isinstance(value, bool) or not isinstance(value, int):
        value = size.cap  # not given, or not a number (the resolver refuses it)
    return max(0, min(value, size.cap)) * size.factor


class Buckets:
    """Cost points per key: ``per_minute`` points, refilled continuously (a token bucket
    that holds at most a minute's worth). Thread-safe."""

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._lock = threading.Lock()
        #: Per key id: (points left, when last counted).
        self._buckets: dict[str, tuple[float, float]] = {}

    def spend(self, key_id: str, cost: int) -> float:
        """Take ``cost`` points from the key's bucket; CostError(RATE_LIMITED) when it holds
        too few (nothing is taken then). Returns the points left."""
        if self.per_minute <= 0:
            return math.inf
        now = self.clock()
        rate = self.per_minute / 60.0
        with self._lock:
            left, then = self._buckets.get(key_id, (float(self.per_minute), now))
            left = min(float(self.per_minute), left + (now - then) * rate)
            if cost > left:
                self._buckets[key_id] = (left, now)
                wait = math.ceil((cost - left) / rate)
                raise CostError(
                    Code.RATE_LIMITED,
                    f"this API key has spent its {self.per_minute:,} cost points of the minute: "
                    f"this request costs {cost:,}, {int(left):,} are left; try again in "
                    f"{wait} s (setting rate_limit_per_minute)",
                    retry_after=wait,
                )
            self._buckets[key_id] = (left - cost, now)
            if len(self._buckets) > 10_000:  # keys long idle are full again: forget them
                self._forget_full(now, rate)
            return left - cost

    def _forget_full(self, now: float, rate: float) -> None:
        for key_id, (left, then) in list(self._buckets.items()):
            if left + (now - then) * rate >= self.per_minute:
                del self._buckets[key_id]


@dataclass(frozen=True, slots=True)
class Cost:
    """An admitted document's cost, what its key has left of the minute's points (None: no
    rate limit applies), and whether it runs on the lane."""

    cost: int
    budget: int
    remaining: float | None
    #: It selects a list of no knowable bound.
    unbounded: bool = False

    @property
    def heavy(self) -> bool:
        return self.unbounded or self.cost >= HEAVY_COST

    def extension(self) -> dict[str, Any]:
        """What the answer's ``extensions.cost`` says."""
        found: dict[str, Any] = {"requested": self.cost, "budget": self.budget}
        if self.remaining is not None:
            found["remaining"] = int(self.remaining)
        return found
