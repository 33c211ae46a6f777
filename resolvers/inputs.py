"""Strings a GraphQL operation or an MCP tool call may carry: text, never NUL nor a lone
surrogate.

JSON can spell a lone UTF-16 surrogate (``"\\ud83d"``) and NUL, a GraphQL literal NUL
(``"\\u0000"``); neither is text that SQLite, PostgreSQL or a file path can hold, so such a
string failed deep in a read or a write as an unexpected error. Before anything runs:

1. ``refusal`` walks the operation to run: the literals of its arguments (inside input objects
   and lists too, through fragments) and the values its variables take (given, or their
   defaults), JSON scalars' keys and strings included;
2. the first string that is not text (``graphmem.models.not_text``) makes an ``INVALID_INPUT``
   error naming the argument where it was written, with its path inside the argument's value:
   ``entity``, ``filter.entity``, ``inputs[3].text`` (also ``extensions.field``).

``TextArguments`` runs it in strawberry's pipeline, ``Schema.execute_prepared`` for documents
validated before; ``check_arguments`` checks an MCP tool call's arguments the same way.

``error_field`` names, by the same paths, the argument any other error is about (a resolver's
``InvalidInput``, a literal or a variable's value refused), for ``extensions.field``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

import orjson
from graphql import (
    ArgumentNode,
    DirectiveNode,
    DocumentNode,
    FieldNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    ListValueNode,
    Node,
    ObjectValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    StringValueNode,
    ValueNode,
    VariableDefinitionNode,
    VariableNode,
)
from graphql.utilities import get_operation_ast
from strawberry.extensions import SchemaExtension
from strawberry.utils.str_converters import to_camel_case

from graphmem import InvalidInput
from graphmem.errors import Code
from graphmem.models import not_text

from .cost import fragments_of


class TextArguments(SchemaExtension):
    """Refuse, before it runs, an operation whose arguments hold a string that is not text."""

    def on_execute(self) -> Iterator[None]:
        context = self.execution_context
        document = context.graphql_document
        if document is not None:
            error = refusal(document, context.operation_name, context.variables)
            if error is not None:
                # Raised, the error ends the operation before execution (a subscription's
                # too); it already carries its code.
                raise error
        yield


def refusal(
    document: DocumentNode, operation_name: str | None, variables: Mapping[str, Any] | None
) -> GraphQLError | None:
    """The INVALID_INPUT error for the first string of the operation's arguments that is not
    text, or None (also when no operation matches ``operation_name``: execution says so)."""
    operation = get_operation_ast(document, operation_name)
    if operation is None:
        return None
    if not isinstance(variables, Mapping):
        variables = {}
    used: dict[str, str] = {}  # variable name -> where it is first used
    for argument in _arguments(document, operation):
        for node, path in _value_nodes(argument.value, argument.name.value):
            if isinstance(node, VariableNode):
                used.setdefault(node.name.value, path)
            elif isinstance(node, StringValueNode) and (found := not_text(node.value)):
                return _error(path, found, node)
    for definition in operation.variable_definitions or ():
        name = definition.variable.name.value
        path = used.get(name, f"${name}")
        if name in variables:
            bad = problem(variables[name], path)
            if bad is not None:
                return _error(*bad, definition)
        elif definition.default_value is not None:
            for node, where in _value_nodes(definition.default_value, path):
                if isinstance(node, StringValueNode) and (found := not_text(node.value)):
                    return _error(where, found, node)
    return None


def problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """The path and problem of the first string in ``value`` (JSON: strings, numbers, lists,
    objects, their keys too) that is not text, or None. Paths go on from ``path``: ``path.key``,
    ``path[3]``."""
    if not _holds_non_text(value):  # the common case, without building paths
        return None
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            found = not_text(item)
            if found is not None:
                return where, found
        elif isinstance(item, Mapping):
            for key in item:
                if isinstance(key, str) and (found := not_text(key)):
                    return where, f"a key holding {found}"
            pairs = list(item.items())[::-1]
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in pairs)
        elif isinstance(item, list | tuple):
            stack.extend((item[i], f"{where}[{i}]") for i in reversed(range(len(item))))
    return None


def _holds_non_text(value: Any) -> bool:
    """False if ``value`` surely holds text only; True if it may not (orjson refuses a lone
    surrogate and writes NUL as an escape: what finds one finds maybe a backslash before
    ``u0000``, which ``problem`` then passes)."""
    try:
        return b"\\u0000" in orjson.dumps(value)
    except orjson.JSONEncodeError:  # a surrogate, or what orjson does not write (a huge int)
        return True


def check_arguments(arguments: Mapping[str, Any]) -> None:
    """InvalidInput for the first string among a tool call's ``arguments`` that is not text,
    named as ``refusal`` names it."""
    bad = problem(arguments)
    if bad is not None:
        raise InvalidInput(_message(*bad))


def _message(path: str, found: str) -> str:
    return f"argument `{path}` contains {found}"


def _error(path: str, found: str, node: Node) -> GraphQLError:
    message = _message(path, found)
    return GraphQLError(
        message,
        nodes=[node],
        original_error=InvalidInput(message),
        extensions={"code": Code.INVALID_INPUT, "field": path},
    )


def _arguments(
    document: DocumentNode, operation: OperationDefinitionNode
) -> Iterator[ArgumentNode]:
    """The arguments of the operation's fields and directives, through its fragments (each
    fragment once)."""
    fragments = fragments_of(document)
    seen: set[str] = set()
    yield from _directive_arguments(operation.directives)
    stack: list[SelectionSetNode] = [operation.selection_set]
    while stack:
        for selection in stack.pop().selections:
            yield from _directive_arguments(selection.directives)
            if isinstance(selection, FieldNode):
                yield from selection.arguments or ()
                if selection.selection_set is not None:
                    stack.append(selection.selection_set)
            elif isinstance(selection, InlineFragmentNode):
                stack.append(selection.selection_set)
            elif isinstance(selection, FragmentSpreadNode):
                name = selection.name.value
                fragment = fragments.get(name)
                if fragment is not None and name not in seen:
                    seen.add(name)
                    yield from _directive_arguments(fragment.directives)
                    stack.append(fragment.selection_set)


def _directive_arguments(directives: tuple[DirectiveNode, ...] | None) -> Iterator[ArgumentNode]:
    for directive in directives or ():
        yield from directive.arguments or ()


def _value_nodes(value: ValueNode, path: str) -> Iterator[tuple[ValueNode, str]]:
    """The nodes of a literal value (lists and objects, then what they hold), with their paths
    (iteratively: a literal may nest as deep as the token limit lets it)."""
    stack: list[tuple[ValueNode, str]] = [(value, path)]
    while stack:
        node, where = stack.pop()
        yield node, where
        if isinstance(node, ListValueNode):
            stack.extend(
                (node.values[i], f"{where}[{i}]") for i in reversed(range(len(node.values)))
            )
        elif isinstance(node, ObjectValueNode):
            stack.extend((f.value, f"{where}.{f.name.value}") for f in reversed(node.fields))


# ------------------------------------------------------------------------ where an error points

#: graphql-core's refusal of a variable's value, and the place inside the value it names.
_BAD_VARIABLE: Final = re.compile(r"Variable '\$(\w+)' (?:has|got) invalid value(?: at ([^:]+))?")
#: Engine parameters whose argument is not their name in camelCase: ``traverse(from:)``.
_ARGUMENT_OF: Final = {"ids": "from"}


def error_field(error: GraphQLError, document: DocumentNode | None) -> str | None:
    """The argument ``error`` is about, as a path like ``refusal``'s (``knownAt``,
    ``filter.entity``, ``input.validFrom``), or None when it is about none:

    1. a resolver's ``InvalidInput`` names the engine's parameter (``graph_depth``): the
       argument of that field it came from (``graphDepth``);
    2. a literal refused by validation (a ``DateTime`` in none of the accepted forms): the
       argument where it stands;
    3. a variable's value refused: where the variable is used, and the place inside it."""
    given = (error.extensions or {}).get("field")
    if isinstance(given, str):
        return given
    node = error.nodes[0] if error.nodes else None
    if isinstance(node, FieldNode):
        field = getattr(error.original_error, "field", None)
        return _argument_path(node, field) if isinstance(field, str) else None
    if document is None or node is None:
        return None
    nodes, variables = _argument_places(document, node)
    if isinstance(node, VariableDefinitionNode):
        used = variables.get(node.variable.name.value)
        if used is None:
            return None
        bad = _BAD_VARIABLE.match(error.message)
        return used + ((bad.group(2) or "") if bad else "")  # inside: ".validFrom", "[0].text"
    return nodes.get(id(node))


def _argument_path(node: FieldNode, field: str) -> str | None:
    """The engine's ``field`` (``max_depth``, ``links[2]``) as the path of the argument of
    ``node`` it came from, or None when the field was given no such argument."""
    head = re.split(r"[.\[]", field, maxsplit=1)[0]
    rest = field[len(head) :]
    given = {argument.name.value for argument in node.arguments or ()}
    for name in (to_camel_case(head), _ARGUMENT_OF.get(head)):
        if name in given:
            return name + re.sub(r"\.(\w+)", lambda m: "." + to_camel_case(m[1]), rest)
    return None


def _argument_places(document: DocumentNode, node: Node) -> tuple[dict[int, str], dict[str, str]]:
    """Where each value node of the document's arguments stands (by node identity), and where
    each variable is first used: in the operation that defines ``node`` when it is a variable's
    definition (variables belong to their operation), else in every operation."""
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    defining = [o for o in operations if any(v is node for v in o.variable_definitions or ())]
    nodes: dict[int, str] = {}
    variables: dict[str, str] = {}
    for operation in defining or operations:
        for argument in _arguments(document, operation):
            for value, path in _value_nodes(argument.value, argument.name.value):
                nodes[id(value)] = path
                if isinstance(value, VariableNode):
                    variables.setdefault(value.name.value, path)
    return nodes, variables
