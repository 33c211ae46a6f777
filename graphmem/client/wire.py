"""What travels between a ``Client`` and the service: GraphQL selections of graphmem's types and
the types built back from the answers, the inputs sent, and errors raised as ``Memory`` raises
them (an answer that cannot be read as ``ServiceError``)."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, Final

import httpx

from ..bounded_http import BadAnswer, parse_json
from ..checkpoints import Checkpoint
from ..entities import Entity
from ..episodes import Episode, EpisodeInput
from ..errors import RAISED, Code, Forbidden, GraphmemError, InvalidInput
from ..graph import check_direction, check_types
from ..limits import MAX_BATCH
from ..models import RERANK_CHOICES, Change, Fact, FactInput, Link, MaintenanceRun, Reranked
from ..profiles import Attribute, AttributeValue, LinkedEntity, Profile, ProfileSummary
from ..rerank.interface import check_choice
from ..temporal import TimeInput, parse_time, to_iso
from ..timehints import TimeHint


class ServiceError(GraphmemError):
    """An error only a service answers, or the service out of reach: its ``code`` is the one
    answered (UNAUTHENTICATED, RATE_LIMITED, TOO_COSTLY, PAYLOAD_TOO_LARGE, INVALID_QUERY,
    INTERNAL_ERROR), or UNAVAILABLE."""

    code = Code.INTERNAL_ERROR

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        vars(self)["code"] = code  # the code the service answered, over the class's


class Unauthenticated(ServiceError, Forbidden):
    """A key the service does not admit (HTTP 401, code UNAUTHENTICATED): a ``ServiceError``,
    and a ``Forbidden`` as a refused key is in process, so one ``except Forbidden`` serves
    both."""

    code = Code.UNAUTHENTICATED

    def __init__(self, message: str) -> None:
        super().__init__(Code.UNAUTHENTICATED, message)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


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


#: Every field of a Checkpoint, as GraphQL names it.
CHECKPOINT_FIELDS: Final = f"intent state expectedOutcome workingFiles fact {{ {FACT_FIELDS} }}"
#: Every field of a MaintenanceRun, as GraphQL names it.
RUN_FIELDS: Final = "id job startedAt finishedAt status changed { kind count } requests error"
#: Every field of an Entity, as GraphQL names it.
ENTITY_FIELDS: Final = _selection(Entity, {})


def checkpoint_of(data: Mapping[str, Any]) -> Checkpoint:
    return Checkpoint(
        data["intent"],
        data["state"],
        data["expectedOutcome"],
        tuple(data["workingFiles"]),
        fact_of(data["fact"]),
    )


def run_of(data: Mapping[str, Any]) -> MaintenanceRun:
    return MaintenanceRun(
        data["job"],
        parsed(data["startedAt"], datetime),
        parsed(data["finishedAt"], datetime),
        data["status"],
        {c["kind"]: c["count"] for c in data["changed"]},
        data["requests"],
        data["error"],
        data["id"],
    )


def entity_of(data: Mapping[str, Any]) -> Entity:
    return Entity(data["name"], tuple(data["names"]), tuple(data["aliases"]), data["facts"])


#: Every field of a Profile, as GraphQL names it.
PROFILE_FIELDS: Final = f"""entity {{ {ENTITY_FIELDS} }}
    attributes {{ key values {{ value validFrom validUntil fact {{ {FACT_FIELDS} }} }} }}
    facts {{ {FACT_FIELDS} }} linked {{ entity {{ {ENTITY_FIELDS} }} links types }}
    truncated summary {{ text facts cached }} summaryError"""


def profile_of(data: Mapping[str, Any]) -> Profile:
    """A Profile from the GraphQL fields of PROFILE_FIELDS."""
    summary = data["summary"]
    return Profile(
        entity_of(data["entity"]),
        tuple(
            Attribute(
                a["key"],
                tuple(
                    AttributeValue(
                        v["value"],
                        parsed(v["validFrom"], datetime),
                        parsed(v["validUntil"], datetime),
                        fact_of(v["fact"]),
                    )
                    for v in a["values"]
                ),
            )
            for a in data["attributes"]
        ),
        tuple(fact_of(f) for f in data["facts"]),
        tuple(
            LinkedEntity(entity_of(e["entity"]), e["links"], tuple(e["types"]))
            for e in data["linked"]
        ),
        data["truncated"],
        None
        if summary is None
        else ProfileSummary(summary["text"], tuple(summary["facts"]), summary["cached"]),
        data["summaryError"],
    )


def episode_of(data: Mapping[str, Any]) -> Episode:
    return Episode(
        data["id"],
        data["kind"],
        data["source"],
        parsed(data["time"], datetime),
        data["metadata"] or {},
        parsed(data["recordedAt"], datetime),
    )


class ChangeFeed:
    """The graphql-transport-ws conversation of a ``memoryChanged`` subscription, whatever
    carries it (the sync and the asyncio websockets clients): the opening message, then for
    each message received the replies to send, the change it brings and whether it ended."""

    SUBPROTOCOL: Final = "graphql-transport-ws"

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        namespace: str,
        kinds: Iterable[str] | None,
    ) -> None:
        self.url = "ws" + base_url.removeprefix("http") + "/graphql"
        self.headers = dict(headers)
        self.namespace = namespace
        self.opening = json.dumps({"type": "connection_init", "payload": {}})
        self._subscribe = json.dumps(
            {
                "id": "1",
                "type": "subscribe",
                "payload": {
                    "query": "subscription($kinds: [ChangeKind!]) { memoryChanged(kinds: $kinds) "
                    "{ kind id at } }",
                    "variables": {"kinds": None if kinds is None else [k.upper() for k in kinds]},
                },
            }
        )

    def receive(self, raw: str | bytes) -> tuple[list[str], Change | None, bool]:
        """What to do with a message: raises the exception of an error the service sends, and
        ServiceError for a message that cannot be read."""
        try:
            return self._received(parse_json(raw))
        except BadAnswer as exc:
            raise malformed(f"a message is {exc}") from None
        except (AttributeError, KeyError, TypeError) as exc:
            raise malformed(f"a message lacks what it should hold ({exc!r})") from None

    def _received(self, message: Any) -> tuple[list[str], Change | None, bool]:
        kind = message.get("type")
        if kind == "connection_ack":
            return [self._subscribe], None, False
        if kind == "ping":
            return [json.dumps({"type": "pong"})], None, False
        if kind == "next":
            payload = message["payload"]
            if payload.get("errors"):
                raise graphql_error(payload["errors"])
            event = payload["data"]["memoryChanged"]
            return [], Change(event["kind"], event["id"], self.namespace, epoch(event["at"])), False
        if kind == "error":
            raise graphql_error(message.get("payload") or [])
        return [], None, kind == "complete"


def fact_cursor(position: int) -> str:
    """The service's cursor of a page position (see resolvers/graphql/types.py encode_cursor)."""
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


def rerank_name(rerank: object) -> str | None:
    """The ``Rerank`` value of a search's ``rerank``: a reranker's name (None: the service's
    setting); InvalidInput for a ``Reranker`` object, which runs in Python only."""
    check_choice(rerank)
    if rerank is not None and not isinstance(rerank, str):
        raise InvalidInput(
            "a Reranker object reranks in Python only; over the service name one of "
            + ", ".join(RERANK_CHOICES),
            field="rerank",
        )
    return None if rerank is None else rerank.upper()


def reranked_of(data: Mapping[str, Any] | None) -> Reranked | None:
    if data is None:
        return None
    return Reranked(data["by"], data["fusedRank"], data["score"], data["fallback"])


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


def _fact_input(item: FactInput) -> dict[str, Any]:
    """A checked fact as GraphQL's FactInput: the fields given, times as ISO-8601 text."""
    given = item.model_dump(exclude_defaults=True)
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in ("valid_from", "source_date", "expires_at"):
            value = to_iso(value)
        out[camel(name)] = value
    return out


def fact_inputs(
    items: Sequence[Mapping[str, Any] | FactInput], autolink: bool | None
) -> list[dict[str, Any]]:
    """A batch as GraphQL's [FactInput!]!: checked as Memory checks it (InvalidInput naming the
    item, before any request); ``autolink`` given to the items that do not say."""
    if isinstance(items, Mapping | str | bytes):
        raise InvalidInput("store_many takes a list of facts")
    if len(items) > MAX_BATCH:
        raise InvalidInput(f"at most {MAX_BATCH} facts per batch, got {len(items)}")
    parsed = [FactInput.parse(item, index=i) for i, item in enumerate(items)]
    inputs = [_fact_input(item) for item in parsed]
    if autolink is not None:
        for given in inputs:
            given.setdefault("autolink", autolink)
    return inputs


def episode_input(episode: str | Mapping[str, Any]) -> dict[str, Any]:
    """An episode as GraphQL's EpisodeInput, checked as Memory checks it."""
    given = EpisodeInput.parse(episode)
    return {
        "id": given.id,
        "kind": given.kind,
        "source": given.source,
        "time": None if given.time is None else to_iso(given.time),
        "metadata": given.metadata,
    }


def epoch(text: str) -> float:
    """A time the service answered, as epoch seconds."""
    seconds = parse_time(text)
    if seconds is None:
        raise malformed("the service answered no time where one was due")
    return seconds


def time_text(value: TimeInput | None) -> str | None:
    """A time as the API takes it (ISO-8601 UTC); InvalidInput, before any request, for one
    graphmem does not read."""
    return None if value is None else to_iso(parse_time(value))


def data_of(response: httpx.Response) -> dict[str, Any]:
    """The ``data`` of an answer; the exception of its first error; ServiceError for an answer
    that is not a GraphQL answer."""
    try:
        body = parse_json(response.content)
    except BadAnswer as exc:
        raise malformed(f"HTTP {response.status_code}: the answer is {exc}") from None
    if not isinstance(body, dict):
        raise malformed(f"HTTP {response.status_code}: the answer is not a JSON object")
    errors = body.get("errors")
    if errors:
        raise graphql_error(errors if isinstance(errors, list) else [])
    if response.status_code >= 400 or not isinstance(body.get("data"), dict):
        raise malformed(f"HTTP {response.status_code}")
    data: dict[str, Any] = body["data"]
    return data


def malformed(message: str) -> ServiceError:
    """The error of an answer the client cannot read."""
    return ServiceError(Code.INTERNAL_ERROR, message)


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


#: How graphql-core refuses a variable's value: its name and where inside it.
_BAD_VARIABLE: Final = re.compile(
    r"Variable '\$(\w+)' (?:has|got) invalid value(?: at \.?([\w.\[\]]+))?"
)


def graphql_error(errors: list[Any]) -> GraphmemError:
    """The exception of a GraphQL answer's first error (its ``extensions.code``), with the
    argument its ``extensions.field`` names as Memory names it. The client writes every
    document itself, so a variable the schema refuses (an unknown enum value, a fraction for an
    Int) is the caller's argument: InvalidInput naming it, as Memory raises."""
    first = errors[0] if errors and isinstance(errors[0], dict) else {}
    extensions = first.get("extensions")
    if not isinstance(extensions, dict):
        extensions = {}
    code = extensions.get("code")
    code = code if isinstance(code, str) and code else Code.INTERNAL_ERROR
    message = str(first.get("message", ""))
    bad = _BAD_VARIABLE.match(message) if code == Code.INVALID_QUERY else None
    if bad:
        variable, inside = bad.groups()
        field = snake(variable) + (f".{snake(inside)}" if inside else "")
        why = message[bad.end() :].lstrip(": ")
        return exception(Code.INVALID_INPUT, f"{field}: {why}", field)
    return exception(code, message, parameter(extensions.get("field")))


#: The arguments whose Memory parameter is not their name in snake_case: ``traverse(from:)``
#: is ``ids`` (``path``'s ``from`` and ``to`` are never refused as input, only NOT_FOUND).
_PARAMETER_OF: Final = {"from": "ids"}


def parameter(field: object) -> str | None:
    """The Memory parameter of an argument path the service names (``graphDepth``,
    ``inputs[1].validFrom``): its innermost name in snake_case, as Memory's InvalidInput
    names the field it refuses."""
    if not isinstance(field, str):
        return None
    names = re.findall(r"[A-Za-z_]\w*", field)
    if not names:
        return None
    return _PARAMETER_OF.get(names[-1]) or snake(names[-1])


def link_filter(types: Iterable[str] | str | None, direction: str) -> dict[str, Any]:
    """A graph read's ``types`` and ``direction`` variables, checked and named as Memory does."""
    return {
        "types": None if types is None else list(check_types(types)),
        "direction": check_direction(direction),
    }


def scope(as_of: TimeInput | None, known_at: TimeInput | None) -> dict[str, str | None]:
    """A read's time scope as the API's ``asOf`` and ``knownAt`` variables."""
    return {"asOf": time_text(as_of), "knownAt": time_text(known_at)}


def exception(code: str, message: str, field: str | None) -> GraphmemError:
    """The exception ``Memory`` raises for ``code`` (the service's message kept as it is)."""
    if code == Code.UNAUTHENTICATED:
        return Unauthenticated(message)
    cls = RAISED.get(code)
    if cls is None:
        return ServiceError(code, message)
    error = cls(message)
    if isinstance(error, InvalidInput):
        error.field = field
    return error
