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

import base64
import functools
import json
import os
import time
from collections.abc import AsyncGenerator, Generator, Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, Final

import anyio.to_thread
import httpx
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from .capture import CaptureResult
from .documents import DocumentFile
from .episodes import Episode
from .erasure import Erasure, PurgeReport
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
from .graph import DEFAULT_MAX_NODES, Node, Path, Subgraph
from .limits import MAX_LIMIT
from .models import Change, Fact, FactInput, Link, SearchHit, StoreResult
from .recall import DEFAULT_MAX_TOKENS, RecallItem, RecallResult
from .stats import Stats
from .storage.interface import FactPage
from .temporal import TimeInput, parse_time, to_iso
from .timehints import TimeHint
from .usage import Usage

#: Where the client looks for the service without ``url`` or ``GRAPHMEM_URL``.
DEFAULT_URL: Final = "http://127.0.0.1:8420"
#: The first wait before a retry, doubled each time (unless the answer says how long).
BACKOFF_S: Final = 0.5
#: Facts one ``get_many`` request asks for (aliases; the service's default limit is 30).
ALIASES_PER_REQUEST: Final = 25
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
    """An error only a service answers, or the service out of reach: its ``code`` is the one
    answered (UNAUTHENTICATED, RATE_LIMITED, TOO_COSTLY, PAYLOAD_TOO_LARGE, INVALID_QUERY,
    INTERNAL_ERROR), or UNAVAILABLE."""

    code = Code.INTERNAL_ERROR

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        vars(self)["code"] = code  # the code the service answered, over the class's


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

    def get_many(
        self,
        ids: Iterable[str],
        *,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
    ) -> dict[str, Fact]:
        """See ``Memory.get_many``: the facts of ``ids`` visible at the time scope (superseded
        versions too with ``include_superseded``), by id; ``ALIASES_PER_REQUEST`` a request."""
        wanted = list(dict.fromkeys(ids))
        scope = {"asOf": _time(as_of), "knownAt": _time(known_at)}
        field = "history" if include_superseded else "fact"
        out: dict[str, Fact] = {}
        for start in range(0, len(wanted), ALIASES_PER_REQUEST):
            chunk = wanted[start : start + ALIASES_PER_REQUEST]
            names = ", ".join(f"$i{n}: ID!" for n in range(len(chunk)))
            fields_ = " ".join(
                f"f{n}: {field}(id: $i{n}, asOf: $asOf, knownAt: $knownAt) {{ {FACT_FIELDS} }}"
                for n in range(len(chunk))
            )
            variables = {**scope, **{f"i{n}": i for n, i in enumerate(chunk)}}
            if include_superseded:  # a version chain may not hold the id (NOT_FOUND: unknown)
                data = self._query_each(names, fields_, variables, len(chunk))
            else:
                data = self._query(
                    f"query({names}, $asOf: DateTime, $knownAt: DateTime) {{ {fields_} }}",
                    variables,
                )
            for n, fact_id in enumerate(chunk):
                found = data.get(f"f{n}")
                versions = found if isinstance(found, list) else [found] if found else []
                out.update({f["id"]: fact_of(f) for f in versions if f["id"] == fact_id})
        return out

    def _query_each(
        self, names: str, fields_: str, variables: Mapping[str, Any], count: int
    ) -> dict[str, Any]:
        """The aliased fields of a get_many over history, an unknown id answering null."""
        try:
            return self._query(
                f"query({names}, $asOf: DateTime, $knownAt: DateTime) {{ {fields_} }}",
                variables,
            )
        except NotFound:  # one unknown id fails the request: ask for each alone
            out: dict[str, Any] = {}
            for n in range(count):
                try:
                    got = self._query(
                        f"query($i{n}: ID!, $asOf: DateTime, $knownAt: DateTime) "
                        f"{{ f{n}: history(id: $i{n}, asOf: $asOf, knownAt: $knownAt) "
                        f"{{ {FACT_FIELDS} }} }}",
                        {k: v for k, v in variables.items() if k in (f"i{n}", "asOf", "knownAt")},
                    )
                except NotFound:
                    continue
                out.update(got)
            return out

    def links(
        self,
        fact_id: str,
        *,
        direction: str = "BOTH",
        types: Iterable[str] | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> list[Link]:
        """See ``Memory.links``: the fact's links visible at the time scope, strongest first."""
        out: list[Link] = []
        after: str | None = None
        while True:
            data = self._query(
                f"""query($id: ID!, $direction: Direction!, $types: [LinkType!],
                          $asOf: DateTime, $knownAt: DateTime, $after: String) {{
                  fact(id: $id, asOf: $asOf, knownAt: $knownAt) {{
                    links(direction: $direction, types: $types, first: {MAX_LIMIT},
                          after: $after) {{
                      edges {{ cursor link {{ {LINK_FIELDS} }} }} pageInfo {{ hasNextPage }}
                    }}
                  }}
                }}""",
                {
                    "id": fact_id,
                    "direction": direction.upper(),
                    "types": None if types is None else [t.upper() for t in types],
                    "asOf": _time(as_of),
                    "knownAt": _time(known_at),
                    "after": after,
                },
            )
            if data["fact"] is None:
                return out
            page = data["fact"]["links"]
            out += [link_of(e["link"]) for e in page["edges"]]
            if not page["pageInfo"]["hasNextPage"] or not page["edges"]:
                return out
            after = page["edges"][-1]["cursor"]

    def traverse(
        self,
        ids: Iterable[str] | str,
        *,
        depth: int = 2,
        types: Iterable[str] | None = None,
        direction: str = "BOTH",
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        max_nodes: int = DEFAULT_MAX_NODES,
        min_strength: float = 0.0,
    ) -> Subgraph:
        """See ``Memory.traverse``: the facts reached breadth-first, and the links among them."""
        data = self._query(
            f"""query($from: [ID!]!, $depth: Int!, $types: [LinkType!], $direction: Direction!,
                      $asOf: DateTime, $knownAt: DateTime, $maxNodes: Int!,
                      $minStrength: Float!) {{
              traverse(from: $from, depth: $depth, types: $types, direction: $direction,
                       asOf: $asOf, knownAt: $knownAt, maxNodes: $maxNodes,
                       minStrength: $minStrength) {{
                nodes {{ depth parentIds fact {{ {FACT_FIELDS} }} }}
                edges {{ {LINK_FIELDS} }}
                truncatedBy
              }}
            }}""",
            {
                "from": [ids] if isinstance(ids, str) else list(ids),
                "depth": depth,
                "types": None if types is None else [t.upper() for t in types],
                "direction": direction.upper(),
                "asOf": _time(as_of),
                "knownAt": _time(known_at),
                "maxNodes": max_nodes,
                "minStrength": min_strength,
            },
        )
        sub = data["traverse"]
        return Subgraph(
            [Node(fact_of(n["fact"]), n["depth"], tuple(n["parentIds"])) for n in sub["nodes"]],
            [link_of(e) for e in sub["edges"]],
            tuple(sub["truncatedBy"]),
        )

    def path(
        self,
        source_id: str,
        target_id: str,
        *,
        types: Iterable[str] | None = None,
        direction: str = "BOTH",
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> Path | None:
        """See ``Memory.path``: a shortest path between two facts, or None."""
        data = self._query(
            f"""query($from: ID!, $to: ID!, $types: [LinkType!], $direction: Direction!,
                      $asOf: DateTime, $knownAt: DateTime) {{
              path(from: $from, to: $to, types: $types, direction: $direction, asOf: $asOf,
                   knownAt: $knownAt) {{
                facts {{ {FACT_FIELDS} }} links {{ {LINK_FIELDS} }}
              }}
            }}""",
            {
                "from": source_id,
                "to": target_id,
                "types": None if types is None else [t.upper() for t in types],
                "direction": direction.upper(),
                "asOf": _time(as_of),
                "knownAt": _time(known_at),
            },
        )
        found = data["path"]
        if found is None:
            return None
        return Path([fact_of(f) for f in found["facts"]], [link_of(k) for k in found["links"]])

    def recall(
        self,
        prompt: str,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        format: str = "full",
        graph_depth: int = 0,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        time_hints: bool = True,
        episode_links: bool = True,
        include_cold: bool = False,
    ) -> RecallResult:
        """See ``Memory.recall``: the ``<memory-context>`` block for ``prompt``."""
        data = self._query(
            f"""query($prompt: String!, $maxTokens: Int!, $format: RecallFormat!,
                      $graphDepth: Int!, $asOf: DateTime, $knownAt: DateTime,
                      $timeHints: Boolean!, $episodeLinks: Boolean!, $includeCold: Boolean!) {{
              recall(prompt: $prompt, maxTokens: $maxTokens, format: $format,
                     graphDepth: $graphDepth, asOf: $asOf, knownAt: $knownAt,
                     timeHints: $timeHints, episodeLinks: $episodeLinks,
                     includeCold: $includeCold) {{
                context tokens omitted
                items {{ score source line summarized fact {{ {FACT_FIELDS} }} }}
              }}
            }}""",
            {
                "prompt": prompt,
                "maxTokens": max_tokens,
                "format": format.upper(),
                "graphDepth": graph_depth,
                "asOf": _time(as_of),
                "knownAt": _time(known_at),
                "timeHints": time_hints,
                "episodeLinks": episode_links,
                "includeCold": include_cold,
            },
        )
        found = data["recall"]
        items = [
            RecallItem(
                fact_of(i["fact"]), i["score"], i["source"].lower(), i["line"], i["summarized"]
            )
            for i in found["items"]
        ]
        return RecallResult(found["context"], items, found["tokens"], found["omitted"])

    def episode(self, episode_id: str) -> Episode | None:
        """See ``Memory.episode``: the episode with this id, or None."""
        data = self._query(
            f"query($id: String!) {{ episode(id: $id) {{ {EPISODE_FIELDS} }} }}",
            {"id": episode_id},
        )
        return None if data["episode"] is None else _episode_of(data["episode"])

    def episodes(
        self,
        *,
        source: str | None = None,
        after: TimeInput | None = None,
        before: TimeInput | None = None,
        limit: int = 100,
    ) -> list[Episode]:
        """See ``Memory.episodes``: episodes by time, oldest first."""
        data = self._query(
            f"""query($source: String, $after: DateTime, $before: DateTime, $limit: Int!) {{
              episodes(source: $source, after: $after, before: $before, limit: $limit) {{
                {EPISODE_FIELDS} }} }}""",
            {"source": source, "after": _time(after), "before": _time(before), "limit": limit},
        )
        return [_episode_of(e) for e in data["episodes"]]

    def episode_facts(
        self,
        episode_id: str,
        *,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
    ) -> list[Fact]:
        """See ``Memory.episode_facts``: its facts, in the order they were written; NotFound
        for an unknown episode."""
        data = self._query(
            f"""query($id: String!, $asOf: DateTime, $knownAt: DateTime) {{
              episode(id: $id, asOf: $asOf, knownAt: $knownAt) {{ facts {{ {FACT_FIELDS} }} }}
            }}""",
            {"id": episode_id, "asOf": _time(as_of), "knownAt": _time(known_at)},
        )
        if data["episode"] is None:
            raise NotFound(f"no episode with id {episode_id!r}")
        return [fact_of(f) for f in data["episode"]["facts"]]

    def purge(
        self,
        fact_id: str | None = None,
        *,
        ids: Iterable[str] | None = None,
        entity: str | None = None,
        source: str | None = None,
        episode: str | None = None,
        dry_run: bool = False,
    ) -> PurgeReport:
        """See ``Memory.purge``: erase for good what the filter matches."""
        chosen = (
            None
            if ids is None and fact_id is None
            else [*(ids or []), *([fact_id] if fact_id else [])]
        )
        given = {"ids": chosen, "entity": entity, "source": source, "episode": episode}
        data = self._mutate(
            """mutation($filter: PurgeFilter!, $dryRun: Boolean!) {
              purgeFacts(filter: $filter, dryRun: $dryRun) {
                facts links vectors episodes dryRun error { code message field }
              }
            }""",
            {"filter": {k: v for k, v in given.items() if v is not None}, "dryRun": dry_run},
            "purgeFacts",
        )
        return PurgeReport(
            data["facts"], data["links"], data["vectors"], data["episodes"], data["dryRun"]
        )

    def capture(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        episode: str | Mapping[str, Any] | None = None,
    ) -> list[CaptureResult]:
        """See ``Memory.capture``: what a turn's messages say that is worth keeping, stored."""
        if isinstance(messages, str | bytes | Mapping) or not all(
            isinstance(m, Mapping) for m in messages
        ):
            raise InvalidInput("messages must be a list of {role, content}", field="messages")
        given = [{"role": m.get("role"), "content": m.get("content")} for m in messages]
        data = self._mutate(
            f"""mutation($messages: [MessageInput!]!, $episode: EpisodeInput) {{
              captureMessages(messages: $messages, episode: $episode) {{
                results {{ action reason message role text targetIds fact {{ {FACT_FIELDS} }} }}
                error {{ code message field }}
              }}
            }}""",
            {"messages": given, "episode": None if episode is None else _episode_input(episode)},
            "captureMessages",
        )
        return [
            CaptureResult(
                r["action"],
                None if r["fact"] is None else fact_of(r["fact"]),
                r["reason"],
                r["message"],
                r["role"],
                r["text"],
                tuple(r["targetIds"]),
            )
            for r in data["results"]
        ]

    def facts(
        self,
        *,
        first: int = 50,
        after: int | None = None,
        tag: str | None = None,
        category: str | None = None,
        entity: str | None = None,
        source: str | None = None,
        as_of: TimeInput | None = None,
        known_at: TimeInput | None = None,
        include_superseded: bool = False,
    ) -> FactPage:
        """See ``Memory.facts``: a page of facts in the order recorded; ``after`` the position
        of the last item of the previous page."""
        data = self._query(
            f"""query($filter: FactFilter, $first: Int!, $after: String, $asOf: DateTime,
                      $knownAt: DateTime) {{
              facts(filter: $filter, first: $first, after: $after, asOf: $asOf,
                    knownAt: $knownAt) {{
                edges {{ cursor node {{ {FACT_FIELDS} }} }} pageInfo {{ hasNextPage }}
              }}
            }}""",
            {
                "filter": {
                    "tag": tag,
                    "category": category,
                    "entity": entity,
                    "source": source,
                    "includeSuperseded": include_superseded,
                },
                "first": first,
                "after": None if after is None else _fact_cursor(after),
                "asOf": _time(as_of),
                "knownAt": _time(known_at),
            },
        )
        page = data["facts"]
        items = [(_fact_position(e["cursor"]), fact_of(e["node"])) for e in page["edges"]]
        return FactPage(items, page["pageInfo"]["hasNextPage"])

    def documents(self, *, under: str | os.PathLike[str] | None = None) -> list[DocumentFile]:
        """See ``Memory.documents``: the synced files (at or under ``under``), by path."""
        data = self._query(
            """query($under: String) { documents(under: $under) {
              path hash mtime size chunks syncedAt imported } }""",
            {"under": None if under is None else os.fspath(under)},
        )
        return [
            DocumentFile(
                d["path"],
                d["hash"],
                _epoch(d["mtime"]),
                d["size"],
                d["chunks"],
                _epoch(d["syncedAt"]),
                d["imported"],
            )
            for d in data["documents"]
        ]

    def read_lines(self, path: str | os.PathLike[str], start: int, end: int | None) -> str:
        """See ``Memory.read_lines``: lines of a synced file as it is on the service's disk."""
        data = self._query(
            """query($path: String!, $start: Int!, $end: Int) {
              documentLines(path: $path, start: $start, end: $end) }""",
            {"path": os.fspath(path), "start": start, "end": end},
        )
        text: str = data["documentLines"]
        return text

    def erasures(self, *, limit: int = 100) -> list[Erasure]:
        """See ``Memory.erasures``: the erasure records, newest first (an admin key)."""
        data = self._query(
            """query($limit: Int!) { erasures(limit: $limit) {
              at filter facts links vectors episodes } }""",
            {"limit": limit},
        )
        return [
            Erasure(
                _parsed(e["at"], datetime),
                e["filter"],
                e["facts"],
                e["links"],
                e["vectors"],
                e["episodes"],
            )
            for e in data["erasures"]
        ]

    def stats(self) -> Stats:
        """See ``Memory.stats``: counts describing the namespace, and the providers' usage."""
        data = self._query("{ stats { data } }", {})["stats"]["data"]
        usage = data.pop("usage")
        llm = usage.get("llm")
        return Stats(
            **data,
            embedding_usage=Usage(**usage["embedding"]),
            llm_usage=None if llm is None else Usage(**llm),
        )

    def changes(self, *, kinds: Iterable[str] | None = None) -> Generator[Change, None, None]:
        """Every change committed in the namespace from now on (``memoryChanged`` over
        graphql-transport-ws), as ``Memory.subscribe`` announces them; closing the iterator
        ends the subscription. A subscription the service ends (a key revoked, points spent,
        a subscriber too slow) raises its exception."""
        namespace = self._query("{ namespace }", {})["namespace"]
        url = "ws" + self.url.removeprefix("http") + "/graphql"
        headers = {
            k: v
            for k, v in self._http.headers.items()
            if k.lower() in ("authorization", NAMESPACE_HEADER.lower())
        }
        subscribe = {
            "id": "1",
            "type": "subscribe",
            "payload": {
                "query": "subscription($kinds: [ChangeKind!]) { memoryChanged(kinds: $kinds) "
                "{ kind id at } }",
                "variables": {"kinds": None if kinds is None else [k.upper() for k in kinds]},
            },
        }
        try:
            socket = connect(
                url,
                subprotocols=[Subprotocol("graphql-transport-ws")],
                additional_headers=headers,
                proxy=None,
            )
        except (OSError, WebSocketException) as exc:
            raise ServiceError(Code.UNAVAILABLE, f"cannot reach {url}: {exc}") from exc
        with socket:
            socket.send(json.dumps({"type": "connection_init", "payload": {}}))
            for raw in socket:
                message = json.loads(raw)
                kind = message.get("type")
                if kind == "connection_ack":
                    socket.send(json.dumps(subscribe))
                elif kind == "ping":
                    socket.send(json.dumps({"type": "pong"}))
                elif kind == "next":
                    payload = message["payload"]
                    if payload.get("errors"):
                        first = payload["errors"][0]
                        code = (first.get("extensions") or {}).get("code") or "INTERNAL_ERROR"
                        raise _exception(code, first.get("message", ""), None)
                    event = payload["data"]["memoryChanged"]
                    yield Change(event["kind"], event["id"], namespace, _epoch(event["at"]))
                elif kind == "error":
                    first = (message.get("payload") or [{}])[0]
                    code = (first.get("extensions") or {}).get("code") or "INTERNAL_ERROR"
                    raise _exception(code, first.get("message", ""), None)
                elif kind == "complete":
                    return

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


class AsyncClient:
    """``Client`` for asyncio code: the same verbs as coroutines, each run by a ``Client`` in a
    worker thread (the event loop never waits on the network), and ``changes`` as an async
    iterator. An async context manager that closes its connections on exit."""

    def __init__(self, url: str | None = None, **options: Any) -> None:
        self.sync = Client(url, **options)

    async def aclose(self) -> None:
        """Close the client's connections to the service."""
        await anyio.to_thread.run_sync(self.sync.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(
            functools.partial(getattr(self.sync, verb), *args, **kwargs)
        )

    async def store(self, text: str, **fields: Any) -> StoreResult:
        """See ``Client.store``."""
        result: StoreResult = await self._run("store", text, **fields)
        return result

    async def store_many(self, items: Sequence[Any], **options: Any) -> list[StoreResult]:
        """See ``Client.store_many``."""
        return list(await self._run("store_many", items, **options))

    async def capture(self, messages: Sequence[Any], **options: Any) -> list[CaptureResult]:
        """See ``Client.capture``."""
        return list(await self._run("capture", messages, **options))

    async def search(self, query: str, **options: Any) -> list[SearchHit]:
        """See ``Client.search``."""
        return list(await self._run("search", query, **options))

    async def recall(self, prompt: str, **options: Any) -> RecallResult:
        """See ``Client.recall``."""
        result: RecallResult = await self._run("recall", prompt, **options)
        return result

    async def get(self, fact_id: str, **options: Any) -> Fact | None:
        """See ``Client.get``."""
        found: Fact | None = await self._run("get", fact_id, **options)
        return found

    async def get_many(self, ids: Iterable[str], **options: Any) -> dict[str, Fact]:
        """See ``Client.get_many``."""
        return dict(await self._run("get_many", list(ids), **options))

    async def facts(self, **options: Any) -> FactPage:
        """See ``Client.facts``."""
        page: FactPage = await self._run("facts", **options)
        return page

    async def lookup(self, entity: str, **options: Any) -> list[Fact]:
        """See ``Client.lookup``."""
        return list(await self._run("lookup", entity, **options))

    async def history(self, fact_id: str, **options: Any) -> list[Fact]:
        """See ``Client.history``."""
        return list(await self._run("history", fact_id, **options))

    async def link(self, source_id: str, target_id: str, type: str, **options: Any) -> Link:
        """See ``Client.link``."""
        made: Link = await self._run("link", source_id, target_id, type, **options)
        return made

    async def unlink(self, link_id: str) -> Link:
        """See ``Client.unlink``."""
        removed: Link = await self._run("unlink", link_id)
        return removed

    async def links(self, fact_id: str, **options: Any) -> list[Link]:
        """See ``Client.links``."""
        return list(await self._run("links", fact_id, **options))

    async def traverse(self, ids: Iterable[str] | str, **options: Any) -> Subgraph:
        """See ``Client.traverse``."""
        sub: Subgraph = await self._run("traverse", ids, **options)
        return sub

    async def path(self, source_id: str, target_id: str, **options: Any) -> Path | None:
        """See ``Client.path``."""
        found: Path | None = await self._run("path", source_id, target_id, **options)
        return found

    async def forget(self, fact_id: str) -> Fact:
        """See ``Client.forget``."""
        fact: Fact = await self._run("forget", fact_id)
        return fact

    async def purge(self, fact_id: str | None = None, **options: Any) -> PurgeReport:
        """See ``Client.purge``."""
        report: PurgeReport = await self._run("purge", fact_id, **options)
        return report

    async def episode(self, episode_id: str) -> Episode | None:
        """See ``Client.episode``."""
        found: Episode | None = await self._run("episode", episode_id)
        return found

    async def episodes(self, **options: Any) -> list[Episode]:
        """See ``Client.episodes``."""
        return list(await self._run("episodes", **options))

    async def episode_facts(self, episode_id: str, **options: Any) -> list[Fact]:
        """See ``Client.episode_facts``."""
        return list(await self._run("episode_facts", episode_id, **options))

    async def documents(self, **options: Any) -> list[DocumentFile]:
        """See ``Client.documents``."""
        return list(await self._run("documents", **options))

    async def read_lines(self, path: str | os.PathLike[str], start: int, end: int | None) -> str:
        """See ``Client.read_lines``."""
        text: str = await self._run("read_lines", path, start, end)
        return text

    async def erasures(self, **options: Any) -> list[Erasure]:
        """See ``Client.erasures``."""
        return list(await self._run("erasures", **options))

    async def stats(self) -> Stats:
        """See ``Client.stats``."""
        stats: Stats = await self._run("stats")
        return stats

    async def changes(self, **options: Any) -> AsyncGenerator[Change, None]:
        """See ``Client.changes``: the changes as they are committed; leaving the loop ends the
        subscription."""
        stream = self.sync.changes(**options)
        done = object()
        try:
            while True:
                change = await anyio.to_thread.run_sync(next, stream, done)
                if not isinstance(change, Change):  # the end
                    return
                yield change
        finally:
            await anyio.to_thread.run_sync(stream.close)


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


#: Every field of an Episode, as GraphQL names it.
EPISODE_FIELDS: Final = "id kind source time metadata recordedAt"


def _episode_of(data: Mapping[str, Any]) -> Episode:
    return Episode(
        data["id"],
        data["kind"],
        data["source"],
        _parsed(data["time"], datetime),
        data["metadata"] or {},
        _parsed(data["recordedAt"], datetime),
    )


def _fact_cursor(position: int) -> str:
    """The service's cursor of a page position (see resolvers/types.py encode_cursor)."""
    return base64.urlsafe_b64encode(f"fact:{position}".encode()).decode()


def _fact_position(cursor: str) -> int:
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


def _epoch(text: str) -> float:
    """A time the service answered, as epoch seconds."""
    seconds = parse_time(text)
    assert seconds is not None
    return seconds


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
