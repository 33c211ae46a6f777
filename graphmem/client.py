"""``Client``: ``Memory``'s verbs over a graphmem service, through its GraphQL API.

    client = Client("http://memory.internal:8420", api_key="gm_…", namespace="alice")
    [result] = client.store_many([{"text": "Ana moved to Lisbon in 2019", "entity": "ana"}])
    hits = client.search("where does Ana live", as_of="2020")

1. The same names, arguments and return types as ``Memory`` (``Fact``, ``StoreResult``,
   ``SearchHit``, ``Link``): code written against one runs against the other. The URL, API key
   and namespace come from the arguments, else ``GRAPHMEM_URL`` (default
   ``http://127.0.0.1:8420``), ``GRAPHMEM_API_KEY`` and ``GRAPHMEM_NAMESPACE`` (default: the
   key's first namespace).
2. The same exceptions: an error the service answers (a GraphQL error's or a payload's
   ``code``) is raised as the class ``Memory`` raises for it (``InvalidInput``, ``NotFound``,
   ``Conflict``, ``Forbidden``…); the codes only a service answers (``UNAUTHENTICATED``,
   ``RATE_LIMITED``, ``TOO_COSTLY``…) as ``ServiceError`` with that ``code``. A service that
   cannot be reached raises ``ServiceError`` with code ``UNAVAILABLE``.
3. Retries: a 429 (rate limit) or 503 answer, or a refused connection, is retried up to
   ``retries`` times, waiting the answer's ``Retry-After`` or a backoff doubling from
   ``BACKOFF_S``; a write is retried only when the service certainly did not run it (429, 503,
   a connection refused before it was sent).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, Final

import httpx

from .errors import (
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
from .models import Fact, FactInput, Link, SearchHit, StoreResult
from .temporal import TimeInput, parse_time, to_iso
from .timehints import TimeHint

#: Where the client looks for the service without ``url`` or ``GRAPHMEM_URL``.
DEFAULT_URL: Final = "http://127.0.0.1:8420"
#: The first wait before a retry, doubled each time (unless the answer says how long).
BACKOFF_S: Final = 0.5
#: The header that names the namespace (resolvers/auth.py reads it).
NAMESPACE_HEADER: Final = "X-Graphmem-Namespace"

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
    """An error only a service answers (``code``: UNAUTHENTICATED, RATE_LIMITED, TOO_COSTLY,
    PAYLOAD_TOO_LARGE, INVALID_QUERY, INTERNAL_ERROR), or the service out of reach
    (UNAVAILABLE)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.service_code = code

    @property
    def code(self) -> str:  # type: ignore[override]  # the service's code, not the class's
        return self.service_code


class Client:
    """``Memory``'s verbs over a graphmem service (see the module). Thread-safe; a context
    manager that closes its connections on exit."""

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        namespace: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = (url or os.environ.get("GRAPHMEM_URL") or DEFAULT_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("GRAPHMEM_API_KEY")
        name = namespace if namespace is not None else os.environ.get("GRAPHMEM_NAMESPACE")
        headers = {"accept": "application/json"}
        if key:
            headers["authorization"] = f"Bearer {key}"
        if name:
            headers[NAMESPACE_HEADER] = name
        self.retries = retries
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        """Close the client's connections to the service."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------- writes

    def store(self, text: str, **fields: Any) -> StoreResult:
        """See ``Memory.store``: one fact through the service's write rules."""
        [result] = self.store_many([{"text": text, **fields}])
        return result

    def store_many(
        self,
        items: Sequence[Mapping[str, Any] | FactInput],
        *,
        episode: str | Mapping[str, Any] | None = None,
    ) -> list[StoreResult]:
        """See ``Memory.store_many``: the facts in order, one request."""
        inputs = [_fact_input(item) for item in items]
        given = None if episode is None else _episode_input(episode)
        data = self._mutate(
            f"""mutation($inputs: [FactInput!]!, $episode: EpisodeInput) {{
              storeFacts(inputs: $inputs, episode: $episode) {{
                results {{ action reason targetIds fact {{ {FACT_FIELDS} }} }}
                error {{ code message field }}
              }}
            }}""",
            {"inputs": inputs, "episode": given},
            "storeFacts",
        )
        return [
            StoreResult(
                r["action"],
                None if r["fact"] is None else fact_of(r["fact"]),
                r["reason"] or "",
                tuple(r["targetIds"]),
            )
            for r in data["results"]
        ]

    def forget(self, fact_id: str) -> Fact:
        """See ``Memory.forget``: the fact as it was before."""
        data = self._mutate(
            f"""mutation($id: ID!) {{ forgetFact(id: $id) {{
              fact {{ {FACT_FIELDS} }} error {{ code message field }} }} }}""",
            {"id": fact_id},
            "forgetFact",
        )
        return fact_of(data["fact"])

    def link(
        self,
        source_id: str,
        target_id: str,
        type: str,
        *,
        strength: float = 1.0,
        valid_from: TimeInput | None = None,
        valid_until: TimeInput | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Link:
        """See ``Memory.link``: ``source -[type]-> target``."""
        given = {
            "sourceId": source_id,
            "targetId": target_id,
            "type": type,
            "strength": strength,
            "validFrom": _time(valid_from),
            "validUntil": _time(valid_until),
            "metadata": None if metadata is None else dict(metadata),
        }
        data = self._mutate(
            f"""mutation($input: LinkInput!) {{ linkFacts(input: $input) {{
              link {{ {LINK_FIELDS} }} error {{ code message field }} }} }}""",
            {"input": {k: v for k, v in given.items() if v is not None}},
            "linkFacts",
        )
        return link_of(data["link"])

    def unlink(self, link_id: str) -> Link:
        """See ``Memory.unlink``: the link as it was before."""
        data = self._mutate(
            f"""mutation($id: ID!) {{ unlink(id: $id) {{
              link {{ {LINK_FIELDS} }} error {{ code message field }} }} }}""",
            {"id": link_id},
            "unlink",
        )
        return link_of(data["link"])

    # ----------------------------------------------------------------------------- reads

    def get(
        self, fact_id: str, *, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> Fact | None:
        """See ``Memory.get``: the fact visible at the time scope, else None."""
        data = self._query(
            f"""query($id: ID!, $asOf: DateTime, $knownAt: DateTime) {{
              fact(id: $id, asOf: $asOf, knownAt: $knownAt) {{ {FACT_FIELDS} }} }}""",
            {"id": fact_id, "asOf": _time(as_of), "knownAt": _time(known_at)},
        )
        return None if data["fact"] is None else fact_of(data["fact"])

    def search(
        self,
        query: str,
        *,
        limit: int = 10,
        mode: str = "hybrid",
        tag: str | None = None,
        category: str | None = None,
        entity: str | None = None,
        source: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
        graph_depth: int = 0,
        time_hints: bool = True,
        episode_links: bool = True,
    ) -> list[SearchHit]:
        """See ``Memory.search``: the best facts first."""
        data = self._query(
            f"""query($query: String!, $limit: Int!, $mode: SearchMode!, $tag: String,
                      $category: String, $entity: String, $source: String, $asOf: DateTime,
                      $knownAt: DateTime, $includeSuperseded: Boolean!, $graphDepth: Int!,
                      $timeHints: Boolean!, $episodeLinks: Boolean!) {{
              search(query: $query, limit: $limit, mode: $mode, tag: $tag, category: $category,
                     entity: $entity, source: $source, asOf: $asOf, knownAt: $knownAt,
                     includeSuperseded: $includeSuperseded, graphDepth: $graphDepth,
                     timeHints: $timeHints, episodeLinks: $episodeLinks) {{
                score ftsScore vectorScore depth via timeMatched
                timeHint {{ text start end month event }}
                fact {{ {FACT_FIELDS} }}
              }}
            }}""",
            {
                "query": query,
                "limit": limit,
                "mode": mode.upper() if isinstance(mode, str) else mode,
                "tag": tag,
                "category": category,
                "entity": entity,
                "source": source,
                "asOf": _time(as_of),
                "knownAt": _time(known_at),
                "includeSuperseded": include_superseded,
                "graphDepth": graph_depth,
                "timeHints": time_hints,
                "episodeLinks": episode_links,
            },
        )
        return [
            SearchHit(
                fact_of(h["fact"]),
                h["score"],
                h["ftsScore"],
                h["vectorScore"],
                h["depth"],
                h["via"],
                _hint(h["timeHint"]),
                None if h["timeMatched"] is None else h["timeMatched"].lower(),
            )
            for h in data["search"]
        ]

    def lookup(
        self,
        entity: str,
        *,
        key: str | None = None,
        tag: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
        limit: int = 100,
    ) -> list[Fact]:
        """See ``Memory.lookup``: the facts about ``entity`` (and ``key``), no ranking."""
        data = self._query(
            f"""query($entity: String!, $key: String, $tag: String, $asOf: DateTime,
                      $knownAt: DateTime, $includeSuperseded: Boolean!, $limit: Int!) {{
              lookup(entity: $entity, key: $key, tag: $tag, asOf: $asOf, knownAt: $knownAt,
                     includeSuperseded: $includeSuperseded, limit: $limit) {{ {FACT_FIELDS} }}
            }}""",
            {
                "entity": entity,
                "key": key,
                "tag": tag,
                "asOf": _time(as_of),
                "knownAt": _time(known_at),
                "includeSuperseded": include_superseded,
                "limit": limit,
            },
        )
        return [fact_of(f) for f in data["lookup"]]

    def history(
        self, fact_id: str, *, as_of: TimeInput | None = None, known_at: TimeInput | None = None
    ) -> list[Fact]:
        """See ``Memory.history``: every version of the fact, oldest first."""
        data = self._query(
            f"""query($id: ID!, $asOf: DateTime, $knownAt: DateTime) {{
              history(id: $id, asOf: $asOf, knownAt: $knownAt) {{ {FACT_FIELDS} }} }}""",
            {"id": fact_id, "asOf": _time(as_of), "knownAt": _time(known_at)},
        )
        return [fact_of(f) for f in data["history"]]

    # ----------------------------------------------------------------------------- transport

    def _query(self, document: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        return self._execute(document, variables, retry=True)

    def _mutate(self, document: str, variables: Mapping[str, Any], field: str) -> dict[str, Any]:
        """A mutation's payload; its ``error``, when set, raised as its exception."""
        payload: dict[str, Any] = self._execute(document, variables, retry=False)[field]
        error = payload.get("error")
        if error:
            raise _exception(error["code"], error["message"], error.get("field"))
        return payload

    def _execute(
        self, document: str, variables: Mapping[str, Any], *, retry: bool
    ) -> dict[str, Any]:
        """``data`` of one GraphQL request; errors raised as their exceptions. A read is
        retried after any answer of 429 or 503 or a failed connection; a write only when the
        service did not run it (429, 503, a connection refused)."""
        body = {"query": document, "variables": dict(variables)}
        wait = BACKOFF_S
        for attempt in range(self.retries + 1):
            try:
                response = self._http.post("/graphql", json=body)
            except httpx.ConnectError as exc:
                problem: GraphmemError = ServiceError(
                    Code.UNAVAILABLE, f"cannot reach {self.url}: {exc}"
                )
            except httpx.TransportError as exc:
                if not retry:  # sent, perhaps run: a write is not repeated
                    raise ServiceError(Code.UNAVAILABLE, f"{self.url}: {exc}") from exc
                problem = ServiceError(Code.UNAVAILABLE, f"{self.url}: {exc}")
            else:
                if response.status_code not in (429, 503):
                    return _data(response)
                problem = _refused(response)
                wait = _retry_after(response, wait)
            if attempt == self.retries:
                raise problem
            time.sleep(wait)
            wait *= 2
        raise AssertionError("unreachable")


# --------------------------------------------------------------------------------- mapping


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _selection(cls: type, renamed: Mapping[str, str]) -> str:
    """The GraphQL selection of every field of ``cls`` (camelCase unless ``renamed``; fields
    renamed alike selected once)."""
    return " ".join(dict.fromkeys(renamed.get(f.name, _camel(f.name)) for f in fields(cls)))


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


def fact_of(data: Mapping[str, Any]) -> Fact:
    """A Fact from the GraphQL fields of FACT_FIELDS."""
    values: dict[str, Any] = {}
    stated = data.get("statedTime") or {}
    for f in fields(Fact):
        if f.name.startswith("stated_"):
            raw = stated.get(f.name.removeprefix("stated_"))
        else:
            raw = data[_camel(f.name) if f.name != "superseded_by" else "supersededById"]
        values[f.name] = _parsed(raw, f.type)
    return Fact(**values)


def link_of(data: Mapping[str, Any]) -> Link:
    """A Link from the GraphQL fields of LINK_FIELDS."""
    return Link(**{f.name: _parsed(data[_camel(f.name)], f.type) for f in fields(Link)})


def _parsed(raw: Any, annotation: Any) -> Any:
    """A GraphQL value as the dataclass field of ``annotation`` holds it: times as UTC
    datetimes, lists as lists, the rest as given."""
    if raw is None:
        return None
    if "datetime" in str(annotation) and isinstance(raw, str):
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    return raw


def _hint(data: Mapping[str, Any] | None) -> TimeHint | None:
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


def _fact_input(item: Mapping[str, Any] | FactInput) -> dict[str, Any]:
    """A fact to store as GraphQL's FactInput: validated here first, as Memory does, so bad
    input fails the same way before any request."""
    parsed = item if isinstance(item, FactInput) else FactInput.parse(item)
    given = parsed.model_dump(exclude_defaults=True, exclude={"dedup"})
    out: dict[str, Any] = {}
    for name, value in given.items():
        if name in ("valid_from", "source_date", "expires_at"):
            value = to_iso(value)
        out[_camel(name)] = value
    return out


def _episode_input(episode: str | Mapping[str, Any]) -> dict[str, Any]:
    given: dict[str, Any] = {"id": episode} if isinstance(episode, str) else dict(episode)
    if "time" in given and given["time"] is not None:
        given["time"] = _time(given["time"])
    return {_camel(k): v for k, v in given.items() if v is not None}


def _time(value: TimeInput | None) -> str | None:
    """A time as the API takes it (ISO-8601 UTC); InvalidInput, before any request, for one
    graphmem does not read."""
    return None if value is None else to_iso(parse_time(value))


def _data(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        raise ServiceError(
            Code.INTERNAL_ERROR, f"HTTP {response.status_code}: {response.text[:200]}"
        ) from None
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        first = errors[0]
        code = (first.get("extensions") or {}).get("code") or Code.INTERNAL_ERROR
        raise _exception(code, first.get("message", ""), None)
    if response.status_code >= 400 or not isinstance(body.get("data"), dict):
        raise ServiceError(Code.INTERNAL_ERROR, f"HTTP {response.status_code}")
    data: dict[str, Any] = body["data"]
    return data


def _refused(response: httpx.Response) -> GraphmemError:
    """The error of a 429 or 503 answer (its GraphQL error's code, when it has one)."""
    try:
        _data(response)
    except GraphmemError as exc:
        return exc
    return ServiceError(Code.UNAVAILABLE, f"HTTP {response.status_code}")


def _retry_after(response: httpx.Response, default: float) -> float:
    try:
        return max(float(response.headers.get("retry-after", default)), 0.0)
    except ValueError:
        return default


def _exception(code: str, message: str, field: str | None) -> GraphmemError:
    """The exception ``Memory`` raises for ``code`` (the service's message kept as it is)."""
    cls = _RAISED.get(code)
    if cls is None:
        return ServiceError(code, message)
    error = cls(message)
    if isinstance(error, InvalidInput):
        error.field = field
    return error
