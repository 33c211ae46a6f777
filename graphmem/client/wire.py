"""What travels between a ``Client`` and the service: GraphQL selections of graphmem's types and
the types built back from the answers, the inputs sent, and errors raised as ``Memory`` raises
them."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import fields
from datetime import datetime
from typing import Any, Final

import httpx

from ..episodes import Episode
from ..errors import (
    Code,
    Conflict,
    EmbedderError,
    EmbedderMismatch,
    Forbidden,
    GraphmemError,
    InvalidInput,
    LLMError,
    NotFound,
    QueryTimeout,
    StorageError,
    SubscriberTooSlow,
)
from ..models import Fact, FactInput, Link
from ..temporal import TimeInput, parse_time, to_iso
from ..timehints import TimeHint

#: The exception class of each code ``Memory`` raises itself.
_RAISED: Final[Mapping[str, type[GraphmemError]]] = {
    Code.INVALID_INPUT: InvalidInput,
    Code.NOT_FOUND: NotFound,
    Code.CONFLICT: Conflict,
    Code.FORBIDDEN: Forbidden,
    Code.EMBEDDER_MISMATCH: EmbedderMismatch,
    Code.EMBEDDER_ERROR: EmbedderError,
    Code.LLM_ERROR: LLMError,
    Code.STORAGE_ERROR: StorageError,
    Code.TIMEOUT: QueryTimeout,
    Code.UNAVAILABLE: SubscriberTooSlow,
}


class ServiceError(GraphmemError):
    """An error only a service answers, or the service out of reach: its ``code`` is the one
    answered (UNAUTHENTICATED, RATE_LIMITED, TOO_COSTLY, PAYLOAD_TOO_LARGE, INVALID_QUERY,
    INTERNAL_ERROR), or UNAVAILABLE."""

    code = Code.INTERNAL_ERROR

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        vars(self)["code"] = code  # the code the service answered, over the class's


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _selection(cls: type, renamed: Mapping[str, str]) -> str:
    """The GraphQL selection of every field of ``cls`` (camelCase unless ``renamed``; fields
    renamed alike selected once)."""
    return " ".join(dict.fromkeys(renamed.get(f.name, camel(f.name)) for f in fields(cls)))


_STATED: Final = "statedTime { start end text }"
#: Every field of a Fact, as GraphQL names it.
FACT_FIELDS: Final = _selection(
    Fact,
    {
        "superseded_by": "supersededById",
        "stated_start": _STATED,
        "stated_end": _STATED,
        "stated_text": _STATED,
    },
)
#: Every field of a Link, as GraphQL names it.
LINK_FIELDS: Final = _selection(Link, {})


#: Every field of an Episode, as GraphQL names it.
EPISODE_FIELDS: Final = "id kind source time metadata recordedAt"


def episode_of(data: Mapping[str, Any]) -> Episode:
    return Episode(
        data["id"],
        data["kind"],
        data["source"],
        parsed(data["time"], datetime),
        data["metadata"] or {},
        parsed(data["recordedAt"], datetime),
    )


def fact_cursor(position: int) -> str:
    """The service's cursor of a page position (see resolvers/types.py encode_cursor)."""
    return base64.urlsafe_b64encode(f"fact:{position}".encode()).decode()


def fact_position(cursor: str) -> int:
    kind, _, value = base64.urlsafe_b64decode(cursor.encode()).decode().partition(":")
    if kind != "fact" or not value.isdigit():
        raise ServiceError(Code.INTERNAL_ERROR, f"the service answered a cursor {cursor!r}")
    return int(value)


def fact_of(data: Mapping[str, Any]) -> Fact:
    """A Fact from the GraphQL fields of FACT_FIELDS."""
    values: dict[str, Any] = {}
    stated = data.get("statedTime") or {}
    for f in fields(Fact):
        if f.name.startswith("stated_"):
            raw = stated.get(f.name.removeprefix("stated_"))
        else:
            raw = data[camel(f.name) if f.name != "superseded_by" else "supersededById"]
        values[f.name] = parsed(raw, f.type)
    return Fact(**values)


def link_of(data: Mapping[str, Any]) -> Link:
    """A Link from the GraphQL fields of LINK_FIELDS."""
    return Link(**{f.name: parsed(data[camel(f.name)], f.type) for f in fields(Link)})


def parsed(raw: Any, annotation: Any) -> Any:
    """A GraphQL value as the dataclass field of ``annotation`` holds it: times as UTC
    datetimes, lists as lists, the rest as given."""
    if raw is None:
        return None
    if "datetime" in str(annotation) and isinstance(raw, str):
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return raw


def hint_of(data: Mapping[str, Any] | None) -> TimeHint | None:
    if data is None:
        return None
    start, end = data.get("start"), data.get("end")
    return TimeHint(
        data["text"],
        None if start is None else parse_time(start),
        None if end is None else parse_time(end),
        data.get("month"),
        data.get("event"),
    )


def fact_input(item: Mapping[str, Any] | FactInput) -> dict[str, Any]:
    """A fact to store as GraphQL's FactInput: validated here first, as Memory does, so bad
    input fails the same way before any request."""
    parsed = item if isinstance(item, FactInput) else FactInput.parse(item)
    given = parsed.model_dump(exclude_defaults=True)
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in ("valid_from", "source_date", "expires_at"):
            value = to_iso(value)
        out[camel(name)] = value
    return out


def episode_input(episode: str | Mapping[str, Any]) -> dict[str, Any]:
    given: dict[str, Any] = {"id": episode} if isinstance(episode, str) else dict(episode)
    if "time" in given and given["time"] is not None:
        given["time"] = time_text(given["time"])
    return {camel(k): v for k, v in given.items() if v is not None}


def epoch(text: str) -> float:
    """A time the service answered, as epoch seconds."""
    seconds = parse_time(text)
    assert seconds is not None
    return seconds


def time_text(value: TimeInput | None) -> str | None:
    """A time as the API takes it (ISO-8601 UTC); InvalidInput, before any request, for one
    graphmem does not read."""
    return None if value is None else to_iso(parse_time(value))


def data_of(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise ServiceError(
            Code.INTERNAL_ERROR, f"HTTP {response.status_code}: {response.text[:200]}"
        ) from None
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        raise graphql_error(errors)
    if response.status_code >= 400 or not isinstance(body.get("data"), dict):
        raise ServiceError(Code.INTERNAL_ERROR, f"HTTP {response.status_code}")
    data: dict[str, Any] = body["data"]
    return data


def refused(response: httpx.Response) -> GraphmemError:
    """The error of a 429 or 503 answer (its GraphQL error's code, when it has one)."""
    try:
        data_of(response)
    except GraphmemError as exc:
        return exc
    return ServiceError(Code.UNAVAILABLE, f"HTTP {response.status_code}")


def retry_after(response: httpx.Response, default: float) -> float:
    try:
        return max(float(response.headers.get("retry-after", default)), 0.0)
    except ValueError:
        return default


def graphql_error(errors: list[Any]) -> GraphmemError:
    """The exception of a GraphQL answer's first error (its ``extensions.code``)."""
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    code = (first.get("extensions") or {}).get("code") or Code.INTERNAL_ERROR
    return exception(code, first.get("message", ""), None)


def scope(as_of: TimeInput | None, known_at: TimeInput | None) -> dict[str, str | None]:
    """A read's time scope as the API's ``asOf`` and ``knownAt`` variables."""
    return {"asOf": time_text(as_of), "knownAt": time_text(known_at)}


def exception(code: str, message: str, field: str | None) -> GraphmemError:
    """The exception ``Memory`` raises for ``code`` (the service's message kept as it is)."""
    cls = _RAISED.get(code)
    if cls is None:
        return ServiceError(code, message)
    error = cls(message)
    if isinstance(error, InvalidInput):
        error.field = field
    return error
