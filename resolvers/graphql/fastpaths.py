"""The fast paths around strawberry, and the one module that reaches into its private API.

What strawberry does not offer by a public name is reached here and only here (a structure
test fails on a private strawberry name anywhere else in the service), so that a strawberry
upgrade has one module to read:

- the executor's completion of plain objects (:class:`LeanExecutor`) and the inputs built
  without strawberry's per-argument conversion (:func:`lean_inputs`);
- a schema's graphql-core schema (:func:`core_schema`), its error logging
  (:meth:`BaseSchema.log_errors`) and ``__Type.isOneOf`` as the spec says
  (:class:`BaseSchema`), which the prepared documents' shortcut (``schema.Schema``) runs on;
- the answer's errors processed under a public name (:class:`MaskingErrors`);
- the operation name a client sent (:func:`provided_operation_name`);
- a WebSocket operation's result stream sent (:func:`send_result_stream`).

The completion of plain objects: graphql-core completes each field of an answer on its own: a resolve info, the field's
resolver (strawberry's wrapper around ``getattr``), a nullability check, a coercion. At about
5-7 µs a field, that costs more than the walk itself for the 2,000 or so fields of a depth-2
traversal. :class:`LeanExecutor`:

1. completes an object whose selected fields are all plain attributes (no resolver of their
   own, no arguments), and the lists of such objects and leaves below them, by a plan compiled
   once per selection and request: one ``getattr`` and one coercion per field;
2. gives the same answer: the same keys in the same order, leaves coerced by their own types;
3. leaves the rest to graphql-core: a field with a resolver, an abstract type, a middleware,
   deferred fragments. An object whose plain completion meets something irregular (a null in a
   non-null field, a value its type cannot coerce, a missing attribute) is completed again from
   the start by graphql-core, which reports the error at its path;
4. counts the bytes the answer will take as it completes it (an estimate: strings' lengths
   and a few bytes for every other value and key), and stops the whole execution with
   :class:`AnswerTooLarge` as soon as they pass the context's ``answer_limit``: an answer too
   large is refused where it is being built, not measured once it exists.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import AsyncGenerator, Callable, Mapping
from enum import Enum
from typing import Any, Final, cast

import strawberry
from graphql import (
    GRAPHQL_MAX_INT,
    GRAPHQL_MIN_INT,
    GraphQLBoolean,
    GraphQLEnumType,
    GraphQLError,
    GraphQLFloat,
    GraphQLID,
    GraphQLInputObjectType,
    GraphQLInt,
    GraphQLLeafType,
    GraphQLList,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLResolveInfo,
    GraphQLSchema,
    GraphQLString,
    get_named_type,
    is_leaf_type,
    is_list_type,
    is_non_null_type,
    is_object_type,
)
from graphql.execution.collect_fields import FieldDetailsList
from graphql.pyutils import AwaitableOrValue, Path, Undefined
from strawberry.extensions import MaskErrors
from strawberry.relay.types import GlobalID
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import (
    BaseGraphQLTransportWSHandler,
    Operation,
    _OperationStreamClosed,
)
from strawberry.types import ExecutionContext
from strawberry.types.arguments import InputContext, _is_leaf_type, _is_optional_leaf_type
from strawberry.types.base import (
    StrawberryList,
    StrawberryMaybe,
    StrawberryObjectDefinition,
    StrawberryOptional,
)
from strawberry.types.field import StrawberryField

from graphmem.errors import Code

#: graphql-core's completion of a leaf (a static method).
_complete_leaf_value: Final = StrawberryGraphQLCoreExecutionContext.complete_leaf_value

#: Where strawberry keeps a GraphQL field's own definition.
_DEFINITION: Final = "strawberry-definition"

#: Directives collecting the fields has already applied; any other leaves a field to graphql-core.
_EVALUATED: Final = frozenset({"include", "skip"})

Completer = Callable[[Any], Any]


class _Irregular(Exception):
    """Plain completion met something only graphql-core's own completion reports correctly."""


class AnswerTooLarge(GraphQLError):
    """The answer being completed has passed its limit of bytes: raised through every field
    (none catches it as a field error), so the execution ends with this one error."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the answer would come to more than the limit of {limit:,} bytes (setting "
            "graphql_max_response_bytes): ask for smaller pages or fewer fields",
            extensions={"code": Code.TOO_COSTLY},
        )


class LeanExecutor(StrawberryGraphQLCoreExecutionContext):
    """graphql-core's executor, completing plain objects by a compiled plan, the answer's
    size bounded by the context's ``answer_limit`` (bytes; None: no limit)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Keyed like graphql-core's own memo of sub-fields: the field list is kept alive with
        # the plan so that its id cannot be reused within the request.
        # (the field list, its plan, whether the plan was compiled).
        self._plans: dict[tuple[GraphQLObjectType, int], tuple[Any, Completer | None, bool]] = {}
        # The bytes of each selection's keys, keyed and kept alive as the plans are.
        self._keys: dict[tuple[GraphQLObjectType, int], tuple[Any, int]] = {}
        limit = getattr(self.context_value, "answer_limit", None)
        self._room: float = math.inf if limit is None else limit
        #: The bytes of the answer completed so far (``_spend``).
        self.answer_bytes = 0

    def build_per_event_executor(self, payload: Any) -> LeanExecutor:
        # Each event of a subscription is an answer of its own: its own count, and plans
        # that count to it.
        executor = super().build_per_event_executor(payload)
        assert isinstance(executor, LeanExecutor)
        executor._plans = {}
        executor._keys = {}
        executor.answer_bytes = 0
        return executor

    def _spend(self, size: int) -> None:
        self.answer_bytes += size
        if self.answer_bytes > self._room:
            raise AnswerTooLarge(int(self._room))

    def handle_field_error(
        self,
        raw_error: Exception,
        return_type: GraphQLOutputType,
        field_details_list: FieldDetailsList,
        path: Path,
    ) -> None:
        if isinstance(raw_error, AnswerTooLarge):
            raise raw_error  # not a field's error: the whole answer's
        super().handle_field_error(raw_error, return_type, field_details_list, path)

    # graphql-core declares it a static method and calls it on the executor: an instance
    # method of the same arguments overrides it, which mypy cannot tell.
    def complete_leaf_value(self, return_type: GraphQLLeafType, result: Any) -> Any:  # type: ignore[override]
        completed = _complete_leaf_value(return_type, result)
        self._spend(
            len(completed) + _PER_STRING if type(completed) is str else _value_size(completed)
        )
        return completed

    def complete_object_value(
        self,
        return_type: GraphQLObjectType,
        field_details_list: FieldDetailsList,
        info: GraphQLResolveInfo[Any],
        path: Path,
        result: Any,
        position_context: Any,
    ) -> AwaitableOrValue[dict[str, Any]]:
        plan = self._plan(return_type, field_details_list, now=False)
        if plan is not None:
            spent = self.answer_bytes
            try:
                completed: dict[str, Any] = plan(result)
            except _Irregular:
                self.answer_bytes = spent  # graphql-core completes and counts it again
            else:
                return completed
        # Its keys, worked out once per selection (counted in an override of execute_fields
        # instead, they made a large introspection answer take half as long again).
        key = (return_type, id(field_details_list))
        known = self._keys.get(key)
        if known is None:
            grouped = self.collect_subfields(return_type, field_details_list)[0]
            known = (field_details_list, sum(len(name) + _PER_KEY for name in grouped))
            self._keys[key] = known
        self._spend(known[1])
        return super().complete_object_value(
            return_type, field_details_list, info, path, result, position_context
        )

    def complete_list_value(
        self,
        return_type: GraphQLList[GraphQLOutputType],
        field_details_list: FieldDetailsList,
        info: GraphQLResolveInfo[Any],
        path: Path,
        result: Any,
        position_context: Any,
    ) -> AwaitableOrValue[list[Any]]:
        self._spend(_PER_LIST + len(result) if isinstance(result, list | tuple) else _PER_LIST)
        # A list of plain objects in one go, not item by item through graphql-core.
        item_type = return_type.of_type
        inner = item_type.of_type if is_non_null_type(item_type) else item_type
        if (
            is_object_type(inner)
            and isinstance(result, list | tuple)
            and not _directed(field_details_list)
        ):
            plan = self._plan(inner, field_details_list, now=len(result) > 1)
            if plan is not None:
                required = is_non_null_type(item_type)
                spent = self.answer_bytes
                try:
                    return [_item(plan, value, required) for value in result]
                except _Irregular:
                    self.answer_bytes = spent
        return super().complete_list_value(
            return_type, field_details_list, info, path, result, position_context
        )

    def _plan(
        self, return_type: GraphQLObjectType, field_details_list: FieldDetailsList, *, now: bool
    ) -> Completer | None:
        """The plan for this selection; unless ``now``, only from its second object on (an
        object completed once, as most answers' payloads are, costs less without one)."""
        key = (return_type, id(field_details_list))
        known = self._plans.get(key)
        if known is None and not now:
            self._plans[key] = (field_details_list, None, False)
            return None
        if known is None or not known[2]:
            plan = self._compile(return_type, field_details_list)
            self._plans[key] = (field_details_list, plan, True)
            return plan
        return known[1]

    def _compile(
        self, return_type: GraphQLObjectType, field_details_list: FieldDetailsList
    ) -> Completer | None:
        """A function completing a value of ``return_type`` for this selection, or None when
        the selection needs graphql-core's own completion."""
        middleware = self.middleware_manager
        if return_type.is_type_of is not None or (middleware and middleware.middlewares):
            return None
        grouped, defer_usages, _ = self.collect_subfields(return_type, field_details_list)
        if defer_usages:
            return None
        fields: list[tuple[str, str | None, Any]] = []
        # What the answer's size counts for the object: its keys and the leaves of fixed size,
        # then its texts, other leaves and lists of leaves by their values (an object below
        # counts its own, and a list of objects its items).
        fixed = 0
        texts: list[str] = []
        values: list[tuple[str, Callable[[Any], int]]] = []
        for response_name, details in grouped.items():
            node = details[0].node
            name = node.name.value
            fixed += len(response_name) + _PER_KEY
            if name == "__typename":
                fields.append((response_name, None, return_type.name))
                fixed += len(return_type.name) + _PER_STRING
                continue
            field_def = self.schema.get_field(return_type, name)
            if field_def is None:
                continue  # graphql-core leaves out fields it does not know, as here
            attribute = _plain_attribute(field_def.resolve, field_def.extensions)
            if attribute is None or field_def.args or node.arguments or _directed(details):
                return None
            finish = self._completer(field_def.type, details)
            if finish is None:
                return None
            fields.append((response_name, attribute, finish))
            kind = field_def.type.of_type if is_non_null_type(field_def.type) else field_def.type
            if is_leaf_type(kind):
                sized = _sized(kind)
                if sized is _Sizing.FIXED:
                    fixed += _PER_VALUE
                elif sized is _Sizing.TEXT:
                    texts.append(response_name)
                    fixed += _PER_STRING
                else:
                    values.append((response_name, _value_size))
            elif is_list_type(kind) and is_leaf_type(get_named_type(kind)):
                of_texts = is_leaf_type(kind.of_type) and _sized(kind.of_type) is _Sizing.TEXT
                values.append((response_name, _texts_size if of_texts else _value_size))
        texts_of = _getter(texts)
        spend = self._spend

        def complete(value: Any) -> dict[str, Any]:
            out: dict[str, Any] = {}
            try:
                for response_name, attribute, finish in fields:
                    out[response_name] = (
                        finish if attribute is None else finish(getattr(value, attribute))
                    )
            except (_Irregular, AnswerTooLarge):
                raise
            except Exception as exc:  # graphql-core says where and why
                raise _Irregular from exc
            size = fixed
            if texts_of is not None:  # in C: a dozen texts cost what one would in Python
                size += sum(map(len, filter(None, texts_of(out))))
            for response_name, size_of in values:
                size += size_of(out[response_name])
            spend(size)
            return out

        return complete

    def _completer(
        self, type_: GraphQLOutputType, field_details_list: FieldDetailsList
    ) -> Completer | None:
        if is_non_null_type(type_):
            if is_leaf_type(type_.of_type):
                return _leaf(type_.of_type, required=True)
            inner = self._completer(type_.of_type, field_details_list)
            if inner is None:
                return None

            def non_null(value: Any) -> Any:
                completed = inner(value)
                if completed is None:
                    raise _Irregular
                return completed

            return non_null
        if is_list_type(type_):
            item = self._completer(type_.of_type, field_details_list)
            if item is None:
                return None
            # A list of objects counts its brackets and commas here; one of leaves is counted
            # whole by the object holding it.
            of_objects = not is_leaf_type(get_named_type(type_))
            spend = self._spend

            def listed(value: Any) -> Any:
                if value is None or value is Undefined:
                    return None
                if not isinstance(value, list | tuple):
                    raise _Irregular
                items = [item(x) for x in value]
                if of_objects:
                    spend(_PER_LIST + len(items))
                return items

            return listed
        if is_leaf_type(type_):
            return _leaf(type_, required=False)
        if is_object_type(type_):
            plan = self._plan(type_, field_details_list, now=True)
            if plan is None:
                return None

            def nested(value: Any) -> Any:
                return None if value is None or value is Undefined else plan(value)

            return nested
        return None  # interfaces and unions: graphql-core resolves the runtime type


#: What the answer's size counts, about as JSON writes it without escapes: a string's
#: characters and its quotes; a key's characters, its quotes, colon and comma; a few bytes for
#: any other leaf (``true``, ``null``, ``0.25``); a list's brackets and a comma for each item.
#: An object's braces count nothing (its last key has no comma).
_PER_STRING: Final = 2
_PER_KEY: Final = 4
_PER_VALUE: Final = 4
_PER_LIST: Final = 2


class _Sizing(Enum):
    """How a leaf type's values are sized."""

    #: Texts (String, ID, enums): by their length.
    TEXT = "text"
    #: Numbers and booleans: a few bytes.
    FIXED = "fixed"
    #: Any other scalar (a date, JSON): by its value (``_value_size``).
    VALUE = "value"


def _sized(type_: Any) -> _Sizing:
    if type_ in (GraphQLString, GraphQLID) or isinstance(type_, GraphQLEnumType):
        return _Sizing.TEXT
    if type_ in (GraphQLInt, GraphQLFloat, GraphQLBoolean):
        return _Sizing.FIXED
    return _Sizing.VALUE


def _getter(names: list[str]) -> Callable[[dict[str, Any]], tuple[Any, ...]] | None:
    """What takes the values of ``names`` from a dict, as a tuple (None: no names)."""
    if not names:
        return None
    if len(names) == 1:
        [name] = names
        return lambda out: (out[name],)
    return operator.itemgetter(*names)


def _texts_size(texts: list[str | None] | None) -> int:
    """The bytes of a list of texts (or of none) as JSON."""
    if texts is None:
        return _PER_VALUE
    if None in texts:
        return _value_size(texts)
    strings = cast("list[str]", texts)  # no null among them
    return _PER_LIST + (1 + _PER_STRING) * len(strings) + sum(map(len, strings))


def _value_size(value: Any) -> int:
    """About the bytes a leaf's value takes as JSON (a JSON scalar's objects and lists too)."""
    if type(value) is str:
        return len(value) + _PER_STRING
    size = 0
    stack = [value]
    while stack:
        value = stack.pop()
        kind = type(value)
        if kind is str:
            size += len(value) + _PER_STRING
        elif kind is dict:
            size += sum(len(str(name)) + _PER_KEY for name in value)
            stack.extend(value.values())
        elif kind is list or kind is tuple:
            size += _PER_LIST + len(value)
            stack.extend(value)
        else:
            size += _PER_VALUE
    return size


def _leaf(type_: GraphQLLeafType, *, required: bool) -> Completer:
    """Completes a leaf by its type's coercion; a value that is already what a built-in scalar
    answers (a str for ID and String, an int in 32 bits for Int, a bool for Boolean) as it is.
    None or a failed coercion: None, or _Irregular when ``required``."""
    coerce = type_.coerce_output_value
    kind: Any  # a type, or None: never ``type(value)``
    kind, bounds = _AS_IS.get(type_, (None, None))
    low, high = bounds or (0, 0)

    def leaf(value: Any) -> Any:
        if type(value) is kind and (bounds is None or low <= value <= high):
            return value
        coerced = None if value is None or value is Undefined else coerce(value)
        if coerced is None or coerced is Undefined:
            if required:
                raise _Irregular
            return None
        return coerced

    return leaf


#: The built-in scalars whose values of one Python type are their own output (bounds for Int).
_AS_IS: Final[dict[GraphQLLeafType, tuple[type, tuple[int, int] | None]]] = {
    GraphQLID: (str, None),
    GraphQLString: (str, None),
    GraphQLInt: (int, (GRAPHQL_MIN_INT, GRAPHQL_MAX_INT)),
    GraphQLBoolean: (bool, None),
}


def _directed(field_details_list: FieldDetailsList) -> bool:
    """Whether a field carries a directive other than those collecting fields applied."""
    return any(
        directive.name.value not in _EVALUATED
        for details in field_details_list
        for directive in details.node.directives or ()
    )


def _item(plan: Completer, value: Any, required: bool) -> Any:
    if value is None or value is Undefined:
        if required:
            raise _Irregular
        return None
    return plan(value)


def _plain_attribute(resolve: Any, extensions: dict[str, Any]) -> str | None:
    """The attribute a field reads when its resolver is strawberry's plain ``getattr``."""
    field = extensions.get(_DEFINITION)
    if (
        not getattr(resolve, "_is_default", False)
        or not isinstance(field, StrawberryField)
        or field.base_resolver is not None
        or field.extensions
        or field.default_resolver is not getattr
    ):
        return None
    return field.python_name


def lean_inputs(schema: strawberry.Schema) -> None:
    """Build the schema's input objects without resolving each field's annotation per request.

    strawberry converts an input value field by field, resolving every field's type each time
    (a ``FactInput`` cost about 0.3 ms a request); the builder set here resolves them once and
    converts only what needs converting (nested inputs, ``Maybe`` values), leaves as they are.
    """
    for concrete in schema.schema_converter.type_map.values():
        definition = concrete.definition
        if (
            isinstance(definition, StrawberryObjectDefinition)
            and definition.is_input
            and definition.from_input is None
        ):
            definition.from_input = _InputBuilder(definition)


class _InputBuilder:
    """``from_input`` of one input type: strawberry's conversion, its decisions made once."""

    def __init__(self, definition: StrawberryObjectDefinition) -> None:
        self.definition = definition
        self.plan: tuple[dict[str, None], list[tuple[str, str, Any]]] | None = None

    def __call__(self, cls: type, value: Mapping[str, Any], context: InputContext) -> Any:
        if self.plan is None:
            self.plan = self._compile(context)
        nulls, fields = self.plan
        # As strawberry does: fields without a default are None unless given.
        kwargs: dict[str, Any] = dict(nulls)
        for graphql_name, python_name, kind in fields:
            if graphql_name not in value:
                continue
            given = value[graphql_name]
            if kind is _LEAF or given is None:
                kwargs[python_name] = given
            elif kind is _LEAVES:  # copied: graphql-core shares default lists between requests
                kwargs[python_name] = list(given)
            else:
                kwargs[python_name] = context.convert(given, kind, graphql_name)
        return cls(**kwargs)

    def _compile(self, context: InputContext) -> tuple[dict[str, None], list[tuple[str, str, Any]]]:
        definition, registry = self.definition, context.scalar_registry
        nulls = {
            f.python_name: None
            for f in definition.fields
            if f.default_value is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        fields = []
        for field in definition.fields:
            type_ = field.resolve_type(type_definition=definition)
            kind: Any = type_
            if not isinstance(type_, StrawberryMaybe):
                inner = type_.of_type if isinstance(type_, StrawberryOptional) else type_
                if _is_leaf_type(inner, registry, skip_classes=(GlobalID,)):
                    kind = _LEAF
                elif isinstance(inner, StrawberryList) and (
                    _is_leaf_type(inner.of_type, registry, skip_classes=(GlobalID,))
                    or _is_optional_leaf_type(inner.of_type, registry, skip_classes=(GlobalID,))
                ):
                    kind = _LEAVES
            fields.append(
                (context.config.name_converter.from_field(field), field.python_name, kind)
            )
        return nulls, fields


_LEAF: Final = object()
_LEAVES: Final = object()


# ------------------------------------------------------- strawberry's private API, used here only


#: strawberry's signal that a WebSocket operation's stream was closed under it (the client
#: completed it, or the socket went).
OperationStreamClosed: Final = _OperationStreamClosed


class BaseSchema(strawberry.Schema):
    """strawberry's schema with ``__Type.isOneOf`` as the spec says, and by public names the
    graphql-core schema it wraps (:attr:`core`) and its logging of an answer's errors."""

    def _extend_introspection(self) -> None:
        # strawberry's isOneOf reads the extensions of whatever type it is asked of, and a
        # non-null or list wrapper has none: an INTERNAL_ERROR for each wrapped type.
        super()._extend_introspection()
        introspected = self._schema.type_map["__Type"]
        assert isinstance(introspected, GraphQLObjectType)
        introspected.fields["isOneOf"].resolve = _is_one_of

    @property
    def core(self) -> GraphQLSchema:
        """The graphql-core schema this one executes on."""
        return self._schema

    def log_errors(self, errors: list[GraphQLError]) -> None:
        """strawberry's handling of an answer's errors (``process_errors``, as ``execute``
        calls it)."""
        self._process_errors(errors)


class MaskingErrors(MaskErrors):
    """strawberry's MaskErrors whose processing of an answer's errors is :meth:`process`, a
    public name a subclass overrides and the prepared documents' shortcut calls."""

    def _process_errors(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        return self.process(errors)

    def process(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        return super()._process_errors(errors)


def core_schema(schema: strawberry.Schema) -> GraphQLSchema:
    """The graphql-core schema a strawberry schema executes on."""
    return schema._schema


def provided_operation_name(context: ExecutionContext) -> str | None:
    """The ``operationName`` the client sent (``operation_name`` falls back to the first
    operation's name)."""
    return context._provided_operation_name


async def send_result_stream(
    handler: BaseGraphQLTransportWSHandler[Any, Any],
    operation: Operation[Any, Any],
    stream: AsyncGenerator[Any, None],
) -> None:
    """Send each result of ``stream`` to ``operation``'s client, as strawberry's handler does."""
    await handler._send_result_stream(operation, stream)


def _is_one_of(kind: Any, _info: Any) -> bool | None:
    """``__Type.isOneOf`` as the spec says: whether an input object is ``@oneOf``, null for
    any other type (a wrapper included)."""
    if not isinstance(kind, GraphQLInputObjectType):
        return None
    definition = kind.extensions.get("strawberry-definition")
    return kind.is_one_of if definition is None else bool(definition.is_one_of)
