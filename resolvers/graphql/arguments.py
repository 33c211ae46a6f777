"""A field's arguments described once: taken from the engine's input model (``SearchInput``,
``TraverseInput``, ``CaptureInput``), which names, defaults and describes each of them for
every face, so that a resolver states only which it takes.

``@takes(model, "a", "b", types={...})`` gives the decorated resolver, after its own arguments,
one keyword argument a field of ``model`` named, with the field's default and description; its
GraphQL type is the field's Python type unless ``types`` gives another (GraphQL's ``DateTime``
for a time, an enum). The resolver reads them as ``**given``, and :func:`core` hands them to the
``Memory`` verb as it takes them (an enum's value, not the enum).
"""

import inspect
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Annotated, Any, Final, TypeVar, cast

import strawberry
from pydantic import BaseModel

from graphmem.models import SearchInput

from ..context import Scope
from .types import DateTime

F = TypeVar("F", bound=Callable[..., Any])

#: The GraphQL type of a time argument of any input model.
TIMES: Final[Mapping[str, Any]] = {"as_of": DateTime | None, "known_at": DateTime | None}


def takes(
    model: type[BaseModel],
    *names: str,
    types: Mapping[str, Any] = TIMES,
    renamed: Mapping[str, str] | None = None,
) -> Callable[[F], F]:
    """Append to the decorated resolver's signature the fields ``names`` of ``model`` (its
    ``**given`` stands for them), as keyword arguments in that order; ``renamed`` gives a
    field the GraphQL name of its own (``from``)."""

    def decorate(resolver: F) -> F:
        signature = inspect.signature(resolver)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        added = [_parameter(model, name, types, (renamed or {}).get(name)) for name in names]
        cast(Any, resolver).__signature__ = signature.replace(parameters=own + added)
        return resolver

    return decorate


def time_scope(resolver: F) -> F:
    """``@takes`` the time scope, ``asOf`` and ``knownAt``, as a search describes it."""
    return takes(SearchInput, "as_of", "known_at")(resolver)


def core(given: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments ``given`` as the ``Memory`` verbs take them: an enum's value (a link type's
    and a direction's value is its name)."""
    return {name: _value(value) for name, value in given.items()}


def scope_of(given: Mapping[str, Any]) -> Scope:
    """The time scope the arguments ``given`` read at."""
    return (given["as_of"], given["known_at"])


def _value(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value


def _parameter(
    model: type[BaseModel], name: str, types: Mapping[str, Any], graphql_name: str | None
) -> inspect.Parameter:
    field = model.model_fields[name]
    kind = types.get(name, field.annotation)
    default = inspect.Parameter.empty if field.is_required() else field.default
    if isinstance(kind, type) and issubclass(kind, Enum) and default is not None:
        default = kind(default)
    argument = strawberry.argument(description=field.description, name=graphql_name)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, argument]
    )
