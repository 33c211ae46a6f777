"""The strawberry schema: roots, custom scalars, limits and error codes.

Every GraphQL error carries ``extensions.code``: a graphmem error keeps its code and message
(``INVALID_INPUT``, ``NOT_FOUND``…); a malformed or over-limit document is ``INVALID_QUERY``; one
about an argument also names it in ``extensions.field`` (``inputs.error_field``);
anything unexpected is masked as ``INTERNAL_ERROR`` ("Unexpected error.") and logged, its
traceback once a minute for each kind (:class:`UnexpectedLog`). An answer carries at most
:data:`MAX_ANSWER_ERRORS` errors.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from inspect import isawaitable
from typing import Any

from graphql import (
    ASTValidationRule,
    DocumentNode,
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    ValidationRule,
    execute,
)
from graphql import (
    ExecutionResult as GraphQLExecutionResult,
)
from graphql.utilities import get_operation_ast
from starlette.responses import Response
from strawberry.execution.is_awaitable import optimized_is_awaitable
from strawberry.extensions import (
    AddValidationRules,
    MaxTokensLimiter,
    ParserCache,
    SchemaExtension,
    ValidationCache,
)
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionResult

from graphmem import GraphmemError, Settings, tracing
from graphmem.errors import Code

from ..context import Context
from ..cost import Cost, CostError, fragments_of
from ..fairness import Admission
from ..inputs import TextArguments, error_field, refusal
from .fastpaths import (
    AnswerTooLarge,
    BaseSchema,
    LeanExecutor,
    MaskingErrors,
    core_schema,
    lean_inputs,
    provided_operation_name,
)
from .mutations import Mutation
from .queries import Query
from .subscriptions import Subscription
from .types import SCALARS

_log = logging.getLogger("graphmem.graphql")

#: Parsed and validated documents kept (per distinct query text): agents repeat a few documents,
#: and parsing plus validating one costs milliseconds.
DOCUMENT_CACHE_SIZE = 256
#: Most errors one answer carries; the rest are said in one more error (graphql-core stops
#: validation at as many).
MAX_ANSWER_ERRORS = 100
#: Seconds in which each kind of unexpected error has its traceback logged once.
UNEXPECTED_LOG_INTERVAL = 60.0
#: Most tracebacks of unexpected errors logged in one interval, whatever their kinds.
UNEXPECTED_LOG_KINDS = 20


class UnexpectedLog:
    """Which unexpected errors have their traceback logged: the first of each kind (its
    exception's type and the line that raised it) in an interval, at most ``kinds`` of them;
    the others are not (a GraphQL answer logs how many), so that one request failing 10,000
    times logs one traceback.
    Thread-safe (documents on the lane finish in other threads)."""

    def __init__(
        self,
        interval: float = UNEXPECTED_LOG_INTERVAL,
        kinds: int = UNEXPECTED_LOG_KINDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.kinds = kinds
        self.clock = clock
        self._lock = threading.Lock()
        self._since = -interval
        self._logged: set[tuple[str, str, int]] = set()

    def first(self, exc: BaseException | None) -> bool:
        """Whether ``exc`` is the first of its kind in this interval (its traceback is to be
        logged); the caller counts the others."""
        kind = _kind_of(exc)
        now = self.clock()
        with self._lock:
            if now - self._since >= self.interval:
                self._since = now
                self._logged.clear()
            if kind in self._logged or len(self._logged) >= self.kinds:
                return False
            self._logged.add(kind)
            return True


#: The server process's log of unexpected errors.
unexpected_log = UnexpectedLog()


class ErrorCodes(MaskingErrors):
    """Give every error a code, and the argument it is about its ``field``
    (``inputs.error_field``); mask the unexpected ones (their details only go to the log, by
    ``unexpected_log``); keep the first MAX_ANSWER_ERRORS."""

    def __init__(self, document: DocumentNode | None = None) -> None:
        super().__init__(should_mask_error=_unexpected)
        self._not_logged = 0
        self._document = document  # a prepared document's; else the execution context's

    @property
    def document(self) -> DocumentNode | None:
        if self._document is not None:
            return self._document
        context = getattr(self, "execution_context", None)
        return None if context is None else context.graphql_document

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        self._log_unexpected(error)
        return _with_code(error, Code.INTERNAL_ERROR, self.error_message)

    def _log_unexpected(self, error: GraphQLError) -> None:
        if unexpected_log.first(error.original_error):
            _log.error("unexpected error in %s", error.path, exc_info=error.original_error)
        else:
            self._not_logged += 1

    def process(self, errors: list[GraphQLError]) -> list[GraphQLError]:
        self._not_logged = 0
        out = []
        for error in errors[:MAX_ANSWER_ERRORS]:
            if _unexpected(error):
                out.append(self.anonymise_error(error))
            else:  # a graphmem error, a refusal that has its code, a document refused by a rule
                field = error_field(error, self.document)
                out.append(_with_code(error, _code_of(error), error.message, field))
        left_out = errors[MAX_ANSWER_ERRORS:]
        for error in left_out:
            if _unexpected(error):
                self._log_unexpected(error)
        if self._not_logged:
            _log.error(
                "%s more unexpected errors in this answer not logged (a traceback is logged "
                "for the first of each kind in %g s)",
                f"{self._not_logged:,}",
                unexpected_log.interval,
            )
        if left_out:
            first = left_out[0]
            code = Code.INTERNAL_ERROR if _unexpected(first) else _code_of(first)
            out.append(
                GraphQLError(
                    f"{len(left_out):,} more errors left out of this answer (it carries at "
                    f"most {MAX_ANSWER_ERRORS}); the first of them is {code}",
                    extensions={"code": code},
                )
            )
        return out


class Prepared:
    """Documents of one query or mutation that passed the whole pipeline's parsing and
    validation (token, depth and alias limits included), by query text: the most recently used
    DOCUMENT_CACHE_SIZE. Only the event loop's thread uses it."""

    def __init__(self, size: int = DOCUMENT_CACHE_SIZE) -> None:
        self.size = size
        self._documents: OrderedDict[str, tuple[DocumentNode, OperationDefinitionNode]] = (
            OrderedDict()
        )

    def get(self, query: str) -> tuple[DocumentNode, OperationDefinitionNode] | None:
        found = self._documents.get(query)
        if found is not None:
            self._documents.move_to_end(query)
        return found

    def add(self, query: str, document: DocumentNode) -> None:
        operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        if len(operations) != 1 or operations[0].operation is OperationType.SUBSCRIPTION:
            return
        self._documents[query] = (document, operations[0])
        self._documents.move_to_end(query)
        while len(self._documents) > self.size:
            self._documents.popitem(last=False)


class OneOperation(SchemaExtension):
    """Refuse a document of several operations sent without ``operationName``: graphql-core
    wants one named, but strawberry would run the first (the client may have meant another).
    A document that passes validation is kept in ``prepared``."""

    def __init__(self, prepared: Prepared | None = None) -> None:
        self.prepared = prepared

    def on_validate(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        operations = (
            []
            if document is None
            else [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
        )
        # operation_name falls back to the first operation's name: read what the client sent.
        if provided_operation_name(context) is None and len(operations) > 1:
            error = GraphQLError(
                "this document has several operations: say which to run with `operationName`"
            )
            context.pre_execution_errors = [*(context.pre_execution_errors or []), error]
        yield
        # The extensions before this one validated the document (ValidationCache).
        if (
            self.prepared is not None
            and document is not None
            and context.query is not None
            and not context.pre_execution_errors
        ):
            self.prepared.add(context.query, document)


def depth_limit(max_depth: int) -> type[ValidationRule]:
    """A validation rule refusing an operation nested deeper than ``max_depth`` fields,
    introspection's as any other's, as strawberry's QueryDepthLimiter does, but with each
    fragment measured once (``_measure``).

    ``ofType`` adds no depth: it unwraps a type's non-null and list wrappers, and is null past
    the named type, so however deep a document nests it the answer holds no more than the
    schema's own wrappers (``[Fact!]!``: three). Clients nest it 7 to 9 deep to be safe
    (graphql-core's and GraphiQL's introspection query 9), which a depth limit of 12 would
    refuse; counted this way their whole query is 5 deep. The schema has no ``ofType`` of its
    own (a test checks)."""

    def depth(field: FieldNode, inner: Callable[[SelectionSetNode], int]) -> int:
        if field.selection_set is None:
            return 0
        return (field.name.value != "ofType") + inner(field.selection_set)

    class DepthLimit(ValidationRule):
        def enter_document(self, node: DocumentNode, *_: Any) -> None:
            measure = _measure(node, depth, max)
            for definition in node.definitions:
                if not isinstance(definition, OperationDefinitionNode):
                    continue
                found = measure(definition.selection_set)
                if found is None or found > max_depth:
                    name = definition.name.value if definition.name else "anonymous"
                    self.report_error(
                        GraphQLError(
                            f"'{name}' exceeds maximum operation depth of {max_depth}",
                            [definition],
                        )
                    )

    return DepthLimit


def alias_limit(max_aliases: int) -> type[ValidationRule]:
    """A validation rule refusing a document with more than ``max_aliases`` aliased fields, a
    fragment's counting each time it is spread, as strawberry's MaxAliasesLimiter does, but
    with each fragment measured once (``_measure``)."""

    def aliases(field: FieldNode, inner: Callable[[SelectionSetNode], int]) -> int:
        within = 0 if field.selection_set is None else inner(field.selection_set)
        return within + (field.alias is not None)

    class AliasLimit(ValidationRule):
        def enter_document(self, node: DocumentNode, *_: Any) -> None:
            measure = _measure(node, aliases, operator.add)
            found = [
                measure(d.selection_set)
                for d in node.definitions
                if isinstance(d, OperationDefinitionNode)
            ]
            total = max_aliases + 1 if None in found else sum(n for n in found if n is not None)
            if total > max_aliases:
                self.report_error(GraphQLError(f"{total} aliases found. Allowed: {max_aliases}"))

    return AliasLimit


def _measure(
    document: DocumentNode,
    field: Callable[[FieldNode, Callable[[SelectionSetNode], int]], int],
    join: Callable[[int, int], int],
) -> Callable[[SelectionSetNode], int | None]:
    """A measure of a selection: ``field`` gives a field's part (measuring what it selects with
    the function it is handed), ``join`` joins the parts of a selection; a fragment is measured
    once, however often it is spread. Strawberry's limiters walk every spread, so fragments
    that each spread the one below twice took time doubling with every level, on the event
    loop. The measure is None for fragments spreading one another too deep to follow."""
    fragments = fragments_of(document)
    known: dict[str, int] = {}

    def measure(selection_set: SelectionSetNode, spreading: frozenset[str]) -> int:
        total = 0
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                part = field(selection, lambda inner: measure(inner, spreading))
            elif isinstance(selection, InlineFragmentNode):
                part = measure(selection.selection_set, spreading)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = fragments.get(name)
                if fragment is None or name in spreading:  # other rules refuse both
                    continue
                if name not in known:
                    known[name] = measure(fragment.selection_set, spreading | {name})
                part = known[name]
            total = join(total, part)
        return total

    def checked(selection_set: SelectionSetNode) -> int | None:
        try:
            return measure(selection_set, frozenset())
        except RecursionError:  # fragments spreading one another hundreds deep
            return None

    return checked


class CostLimit(SchemaExtension):
    """Admit an operation by its cost (``resolvers.cost``) before it runs: refuse it over the
    budget or its key's bucket, run a heavy one on the lane, and say its cost in the answer's
    ``extensions``."""

    def __init__(self, admission: Admission) -> None:
        self.admission = admission
        self.cost: Cost | None = None

    async def on_execute(self) -> AsyncIterator[None]:
        context = self.execution_context
        document = context.graphql_document
        operation = (
            None if document is None else get_operation_ast(document, context.operation_name)
        )
        caller = context.context
        if document is not None and operation is not None and isinstance(caller, Context):
            schema = core_schema(context.schema)
            with operation_span(operation, caller) as span:
                self.cost = admit(
                    self.admission, schema, document, operation, context.variables, caller
                )
                span.set_attribute(tracing.COST, self.cost.cost)
                key = caller.key
                if operation.operation is OperationType.SUBSCRIPTION:
                    if key is not None and self.admission.buckets.per_minute > 0:
                        caller.per_event = functools.partial(
                            self.admission.buckets.spend, key.id, self.cost.cost
                        )
                else:
                    context.result = await run_admitted(
                        self.admission,
                        schema,
                        document,
                        context.variables,
                        context.operation_name,
                        caller,
                        self.cost,
                    )
                    _traced_errors(span, context.result.errors)
        yield

    def get_results(self) -> dict[str, Any]:
        return {"cost": self.cost.extension()} if self.cost is not None else {}


class Schema(BaseSchema):
    """strawberry's schema, and a shortcut for documents it has validated before."""

    def __init__(self, *args: Any, prepared: Prepared, admission: Admission, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.prepared = prepared
        self.admission = admission

    def process_errors(self, errors: list[GraphQLError], execution_context: Any = None) -> None:
        """Log an expected error (a graphmem error: an unknown id, bad input) as one line, for
        those the answer carries; ErrorCodes logs the unexpected ones as it masks them."""
        for error in errors[:MAX_ANSWER_ERRORS]:
            if not _unexpected(error):  # the unexpected ones are logged as they are masked
                _log.info("%s: %s", _code_of(error), error.message)

    async def execute_prepared(
        self,
        document: DocumentNode,
        operation: OperationDefinitionNode,
        *,
        variables: dict[str, Any] | None,
        operation_name: str | None,
        context: Any,
    ) -> ExecutionResult:
        """Execute a document from ``prepared`` as ``execute`` would, without the parse and
        validation hooks it already passed (about 0.3 ms a request), admitted by its cost as by
        CostLimit: errors are logged and given their codes as by ErrorCodes."""
        with operation_span(operation, context) as span:
            refused = refusal(document, operation_name, variables)
            if refused is not None:
                _traced_errors(span, [refused])
                return ExecutionResult(data=None, errors=[refused])
            try:
                cost = admit(self.admission, self.core, document, operation, variables, context)
            except GraphQLError as error:
                _traced_errors(span, [error])
                return ExecutionResult(data=None, errors=[error])
            span.set_attribute(tracing.COST, cost.cost)
            result = await run_admitted(
                self.admission, self.core, document, variables, operation_name, context, cost
            )
            _traced_errors(span, result.errors)
        errors = result.errors
        if errors:
            self.log_errors(errors)
            errors = ErrorCodes(document).process(errors)
        return ExecutionResult(
            data=result.data, errors=errors, extensions={"cost": cost.extension()}
        )


def build_schema(settings: Settings | None = None) -> Schema:
    """The schema with the document limits of ``settings``.

    Extensions are factories, so each request gets its own instances. The depth and alias rules
    are made once here: the validation cache is keyed by the rules, so rule classes made afresh
    per request would never hit it.
    """
    settings = settings or Settings.model_validate({})
    rules: list[type[ASTValidationRule]] = [
        depth_limit(settings.graphql_max_depth),
        alias_limit(settings.graphql_max_aliases),
    ]
    prepared = Prepared()
    admission = Admission(
        settings.graphql_max_cost,
        settings.rate_limit_per_minute,
        read_threads=settings.read_threads or os.cpu_count() or 1,
        server_seconds_per_minute=settings.server_seconds_per_minute,
        events_per_second=settings.subscription_events_per_second,
        default_rerank=settings.reranker,
    )
    schema = Schema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        config=StrawberryConfig(scalar_map=SCALARS),
        execution_context_class=LeanExecutor,
        extensions=[
            functools.partial(MaxTokensLimiter, max_token_count=settings.graphql_max_tokens),
            functools.partial(AddValidationRules, rules),
            functools.partial(ParserCache, maxsize=DOCUMENT_CACHE_SIZE),
            functools.partial(ValidationCache, maxsize=DOCUMENT_CACHE_SIZE),
            functools.partial(OneOperation, prepared),
            TextArguments,
            functools.partial(CostLimit, admission),
            ErrorCodes,
        ],
        prepared=prepared,
        admission=admission,
    )
    lean_inputs(schema)
    return schema


def schema_sdl() -> str:
    """The schema in SDL, as ``schema.graphql`` holds it (limits do not change the SDL)."""
    return build_schema().as_str() + "\n"


def admit(
    admission: Admission,
    schema: Any,
    document: DocumentNode,
    operation: OperationDefinitionNode,
    variables: dict[str, Any] | None,
    context: Context,
) -> Cost:
    """``admission.admit`` for the caller of ``context``; its refusal as a GraphQL error with
    its code (and, for a rate limit over HTTP, status 429 and ``Retry-After`` on the answer)."""
    key = context.key
    try:
        return admission.admit(schema, document, operation, variables, key.id if key else None)
    except CostError as exc:
        raise _refused(exc, context) from None


def _refused(exc: CostError, context: Context) -> GraphQLError:
    """A refusal as a GraphQL error with its code; for a rate limit over HTTP, status 429 and
    ``Retry-After`` on the answer."""
    if exc.retry_after is not None and isinstance(context.response, Response):
        context.response.status_code = 429
        context.response.headers["Retry-After"] = str(exc.retry_after)
    return GraphQLError(exc.message, extensions={"code": exc.code})


async def run_admitted(
    admission: Admission,
    schema: Any,
    document: DocumentNode,
    variables: dict[str, Any] | None,
    operation_name: str | None,
    context: Context,
    cost: Cost,
) -> GraphQLExecutionResult:
    """The admitted operation's result: run on the event loop, or on the lane when ``cost``
    is heavy; an answer that would encode to more than the context's ``answer_limit`` bytes
    replaced by a TOO_COSTLY error (the executor stops as soon as it is past them, before the
    answer is whole); one that takes longer than the ``request_timeout`` setting by a TIMEOUT
    error (what already runs in a thread finishes there, holding its key's turn)."""
    timeout = context.request_timeout
    key_id = None if context.key is None else context.key.id
    try:
        # At most fairness.REQUESTS.per_key of the key's operations run at once, on any face.
        async with admission.requests.held(key_id):
            if not cost.heavy:
                return _within(
                    await asyncio.wait_for(
                        _execute(schema, document, variables, operation_name, context), timeout
                    )
                )
            own = context.for_operation(own_loop=True)
            deadline = None if timeout is None else time.monotonic() + timeout

            async def on_lane() -> GraphQLExecutionResult:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                executed = _execute(schema, document, variables, operation_name, own)
                return _within(await asyncio.wait_for(executed, left))

            return await asyncio.wait_for(admission.on_lane(key_id, on_lane), timeout)
    except TimeoutError:
        error = GraphQLError(
            f"the request took longer than {timeout:g} s (setting request_timeout): ask for "
            "less, or narrow the search",
            extensions={"code": Code.TIMEOUT},
        )
        return GraphQLExecutionResult(data=None, errors=[error])
    except CostError as exc:  # too many of the key's requests waiting already
        return GraphQLExecutionResult(data=None, errors=[_refused(exc, context)])


def operation_span(
    operation: OperationDefinitionNode, context: Context
) -> AbstractContextManager[Any]:
    """The span of one GraphQL operation (``tracing.span``), named ``graphql.<type> <name>``
    (OpenTelemetry's GraphQL conventions' name, prefixed: docs/compatibility.md), with the
    conventions' attributes but the document (it holds the query's text), and the caller's
    namespace; a child of the span a ``traceparent`` header names."""
    if not tracing.enabled():
        return tracing.OFF
    kind = operation.operation.value
    attributes: dict[str, str] = {"graphql.operation.type": kind}
    name = f"graphql.{kind}"
    if operation.name is not None:
        attributes["graphql.operation.name"] = operation.name.value
        name += f" {operation.name.value}"
    if context.admitted:
        attributes[tracing.NAMESPACE] = context.memory.namespace
    return tracing.span(name, attributes, carrier=context.request.headers)


def _traced_errors(span: Any, errors: list[GraphQLError] | None) -> None:
    """Mark an operation's span failed with the code its first error is answered with."""
    if errors:
        first = errors[0]
        tracing.failed(span, Code.INTERNAL_ERROR if _unexpected(first) else _code_of(first))
        span.set_attribute("graphmem.errors", len(errors))


def _within(result: GraphQLExecutionResult) -> GraphQLExecutionResult:
    """``result``, or only its TOO_COSTLY error when the executor stopped it for its size
    (the fields' errors met before it belong to an answer never given)."""
    for error in result.errors or ():
        if isinstance(error, AnswerTooLarge):
            return GraphQLExecutionResult(data=None, errors=[error])
    return result


async def _execute(
    schema: Any,
    document: DocumentNode,
    variables: dict[str, Any] | None,
    operation_name: str | None,
    context: Context,
) -> Any:
    """graphql-core's execution of ``document``, as strawberry runs it (graphmem's executor)."""
    result = execute(
        schema,
        document,
        variable_values=variables,
        operation_name=operation_name,
        context_value=context,
        is_awaitable=optimized_is_awaitable,  # type: ignore[arg-type]  # as strawberry's
        executor_class=LeanExecutor,
        operation_extensions=None,
    )
    if isawaitable(result):
        result = await result
    return result


def _kind_of(exc: BaseException | None) -> tuple[str, str, int]:
    """An unexpected error's kind: its type and the file and line that raised it."""
    if exc is None:
        return ("", "", 0)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return (type(exc).__qualname__, "", 0)
    return (type(exc).__qualname__, tb.tb_frame.f_code.co_filename, tb.tb_lineno)


def _code_of(error: GraphQLError) -> str:
    original = error.original_error
    if isinstance(original, GraphmemError):
        return original.code
    return str((error.extensions or {}).get("code") or Code.INVALID_QUERY)


def _unexpected(error: GraphQLError) -> bool:
    original = error.original_error
    return original is not None and not isinstance(original, GraphmemError | GraphQLError)


def _with_code(
    error: GraphQLError, code: str, message: str, field: str | None = None
) -> GraphQLError:
    extensions: dict[str, Any] = {**(error.extensions or {}), "code": code}
    if field is not None:
        extensions["field"] = field
    return GraphQLError(
        message,
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        original_error=None,
        extensions=extensions,
    )
