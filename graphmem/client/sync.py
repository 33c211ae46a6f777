"""``Client``: Memory's verbs over a service, one GraphQL request each (see
:mod:`graphmem.client`). Each verb takes ``Memory``'s signature (``remote``) and says only what
it sends and how it reads the answer."""

from __future__ import annotations

import functools
import inspect
import logging
import os
import re
import time
from collections.abc import Callable, Generator, Iterable, Mapping
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Concatenate, Final, ParamSpec, TypeVar, cast

import httpx
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect
from websockets.typing import Subprotocol

from .. import checkpoints
from ..bounded_http import AnswerTooLarge, BadAnswer, BoundedTransport, bounds
from ..capture import CaptureResult, parse_messages
from ..categorize import CategoryInfo, ClassifyReport
from ..checkpoints import Checkpoint
from ..consolidation import ConsolidateReport
from ..documents import DocumentFile
from ..entities import Entity
from ..episodes import Episode
from ..erasure import Erasure, PurgeReport
from ..errors import Code, GraphmemError, InvalidInput, NotFound, shown_url
from ..graph import (
    Node,
    Path,
    Subgraph,
    check_metadata,
    check_strength,
    check_types,
)
from ..limits import MAX_LIMIT
from ..maintenance import checked_jobs
from ..memory import Memory
from ..models import (
    KEEPS,
    Change,
    Fact,
    Link,
    MaintenanceRun,
    SearchHit,
    StoreResult,
)
from ..profiles import Profile
from ..prune import PruneReport
from ..recall import FORMER_SOURCES, RecallItem, RecallResult
from ..reflection import ReflectReport
from ..settings import Settings, is_loopback
from ..stats import Stats
from ..storage.interface import FactPage
from ..usage import Usage
from ..version import __version__
from .wire import (
    CHECKPOINT_FIELDS,
    ENTITY_FIELDS,
    EPISODE_FIELDS,
    FACT_FIELDS,
    LINK_FIELDS,
    PROFILE_FIELDS,
    RUN_FIELDS,
    ChangeFeed,
    ServiceError,
    checkpoint_of,
    data_of,
    entity_of,
    episode_input,
    episode_of,
    epoch,
    exception,
    fact_cursor,
    fact_inputs,
    fact_of,
    fact_position,
    hint_of,
    link_filter,
    link_of,
    malformed,
    parsed,
    profile_of,
    refused,
    rerank_name,
    reranked_of,
    retry_after,
    run_of,
    scope,
    time_text,
)

#: Where the client looks for the service without ``url`` or ``GRAPHMEM_URL``.
DEFAULT_URL: Final = "http://127.0.0.1:8420"
#: The first wait before a retry, doubled each time (unless the answer says how long).
BACKOFF_S: Final = 0.5
#: Facts one ``get_many`` request asks for (aliases; the service's default limit is 30).
ALIASES_PER_REQUEST: Final = 25
#: How graphql-core refuses a document that asks for what the schema lacks.
UNKNOWN_TO_SERVICE: Final = re.compile(
    r"Cannot query field|Unknown argument|Unknown type|is not defined by type"
)
#: Seconds to connect to the service.
CONNECT_TIMEOUT_S: Final = 5.0
#: The most bytes of one answer a client reads unless told otherwise: the service's own default
#: largest answer (``graphql_max_response_bytes``), so that none it sends is refused.
DEFAULT_MAX_ANSWER_BYTES: Final[int] = Settings.model_fields["graphql_max_response_bytes"].default
#: The header that names the namespace (resolvers/http/auth.py reads it).
NAMESPACE_HEADER: Final = "X-Graphmem-Namespace"
_log = logging.getLogger("graphmem.client")


#: A verb's arguments by name, as ``Memory``'s signature binds a call (its defaults applied).
Arguments = Mapping[str, Any]
_P = ParamSpec("_P")
_R = TypeVar("_R")


def remote(
    core: Callable[Concatenate[Any, _P], _R],
) -> Callable[[Callable[[Any, Arguments], _R]], Callable[Concatenate[Any, _P], _R]]:
    """The client's verb for ``Memory``'s verb ``core``, sent by the function decorated: that
    takes the client and the call's ``Arguments`` and returns what ``core`` returns. The verb
    has ``core``'s signature (what mypy, ``inspect`` and an IDE see, and what binds a call: a
    missing or unknown argument is the TypeError ``Memory`` raises), so the client's verbs
    are written once, in ``Memory``, and sent here."""
    full = inspect.signature(core)
    signature = full.replace(parameters=list(full.parameters.values())[1:])  # without self

    def derived(send: Callable[[Any, Arguments], _R]) -> Callable[Concatenate[Any, _P], _R]:
        def verb(client: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            call = signature.bind(*args, **kwargs)
            call.apply_defaults()
            return send(client, call.arguments)

        functools.update_wrapper(
            verb, send, ("__module__", "__name__", "__qualname__", "__doc__"), ()
        )
        # core's signature and annotations (typing.get_type_hints reads them in core's module)
        functools.update_wrapper(verb, core, ("__annotations__",), ())
        return verb

    return derived


def in_clear_beyond_loopback(url: str) -> bool:
    """Whether ``url`` is plain ``http://`` to a host other than this machine: anyone on the way
    can read the API key a request carries there."""
    parts = httpx.URL(url)
    return parts.scheme == "http" and not is_loopback(parts.host)


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
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = (url or os.environ.get("GRAPHMEM_URL") or DEFAULT_URL).rstrip("/")
        key = api_key if api_key is not None else os.environ.get("GRAPHMEM_API_KEY")
        name = namespace if namespace is not None else os.environ.get("GRAPHMEM_NAMESPACE")
        headers = {"accept": "application/json"}
        if key:
            headers["authorization"] = f"Bearer {key}"
            if in_clear_beyond_loopback(self.url):
                _log.warning(
                    "the API key goes in clear text to %s: use https:// beyond this machine",
                    shown_url(self.url),
                )
        if name:
            headers[NAMESPACE_HEADER] = name
        self.retries = retries
        #: The most seconds one call takes in all, its retries included: long enough for a
        #: model request the service makes for it (reflect, consolidate).
        self.timeout = timeout
        self.max_answer_bytes = max_answer_bytes
        # A service that does not take the connection fails in seconds.
        limits = httpx.Timeout(timeout, connect=min(CONNECT_TIMEOUT_S, timeout))
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=limits,
            transport=BoundedTransport(transport),
        )

    def close(self) -> None:
        """Close the client's connections to the service."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------- writes

    @remote(Memory.store)
    def store(self, a: Arguments) -> StoreResult:
        """See ``Memory.store``: one fact through the service's write rules."""
        [result] = self.store_many([{k: v for k, v in a.items() if v is not None}])
        return result

    @remote(Memory.store_many)
    def store_many(self, a: Arguments) -> list[StoreResult]:
        """See ``Memory.store_many``: the facts in order, one request."""
        inputs = fact_inputs(a["items"], a["autolink"])
        given = None if a["episode"] is None else episode_input(a["episode"])
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

    @remote(Memory.forget)
    def forget(self, a: Arguments) -> Fact:
        """See ``Memory.forget``: the fact as it was before."""
        return self._fact_mutation("forgetFact(id: $id)", a["fact_id"])

    @remote(Memory.link)
    def link(self, a: Arguments) -> Link:
        """See ``Memory.link``: ``source -[type]-> target``."""
        given = {
            "sourceId": a["source_id"],
            "targetId": a["target_id"],
            "type": check_types(a["type"])[0],
            "strength": check_strength(a["strength"], "strength"),
            "validFrom": time_text(a["valid_from"]),
            "validUntil": time_text(a["valid_until"]),
            "metadata": check_metadata(None if a["metadata"] is None else dict(a["metadata"])),
        }
        data = self._mutate(
            f"""mutation($input: LinkInput!) {{ linkFacts(input: $input) {{
              link {{ {LINK_FIELDS} }} error {{ code message field }} }} }}""",
            {"input": {k: v for k, v in given.items() if v is not None}},
            "linkFacts",
        )
        return link_of(data["link"])

    @remote(Memory.unlink)
    def unlink(self, a: Arguments) -> Link:
        """See ``Memory.unlink``: the link as it was before."""
        data = self._mutate(
            f"""mutation($id: ID!) {{ unlink(id: $id) {{
              link {{ {LINK_FIELDS} }} error {{ code message field }} }} }}""",
            {"id": a["link_id"]},
            "unlink",
        )
        return link_of(data["link"])

    @remote(Memory.alias)
    def alias(self, a: Arguments) -> Entity:
        """See ``Memory.alias``: the entity ``name`` now names too."""
        return self._entity_mutation("alias", {"name": a["name"], "of": a["of"]})

    @remote(Memory.merge_entities)
    def merge_entities(self, a: Arguments) -> Entity:
        """See ``Memory.merge_entities``: the merged entity, under ``a``'s name."""
        return self._entity_mutation("mergeEntities", {"a": a["a"], "b": a["b"]})

    @remote(Memory.split_alias)
    def split_alias(self, a: Arguments) -> Entity:
        """See ``Memory.split_alias``: the entity the name left."""
        return self._entity_mutation("splitAlias", {"alias": a["alias"]})

    def _entity_mutation(self, field: str, names: Mapping[str, str]) -> Entity:
        """The entity that the mutation ``field`` of entity names (its arguments ``names``,
        each sent as the variable of its name) answers."""
        declared = ", ".join(f"${n}: String!" for n in names)
        given = ", ".join(f"{n}: ${n}" for n in names)
        data = self._mutate(
            f"""mutation({declared}) {{ {field}({given}) {{
              entity {{ {ENTITY_FIELDS} }} error {{ code message field }} }} }}""",
            names,
            field,
        )
        return entity_of(data["entity"])

    # ----------------------------------------------------------------------------- reads

    @remote(Memory.get)
    def get(self, a: Arguments) -> Fact | None:
        """See ``Memory.get``: the fact visible at the time scope, else None."""
        data = self._query(
            f"""query($id: ID!, $asOf: DateTime, $knownAt: DateTime) {{
              fact(id: $id, asOf: $asOf, knownAt: $knownAt) {{ {FACT_FIELDS} }} }}""",
            {"id": a["fact_id"], **scope(a["as_of"], a["known_at"])},
        )
        return None if data["fact"] is None else fact_of(data["fact"])

    @remote(Memory.search)
    def search(self, a: Arguments) -> list[SearchHit]:
        """See ``Memory.search``: the best facts first, reranked as ``rerank`` names (a name:
        a ``Reranker`` object runs in Python only), else as the service's setting says."""
        data = self._query(
            f"""query($query: String!, $limit: Int!, $mode: SearchMode!, $tag: String,
                      $category: String, $entity: String, $source: String, $asOf: DateTime,
                      $knownAt: DateTime, $includeSuperseded: Boolean!, $graphDepth: Int!,
                      $timeHints: Boolean!, $episodeLinks: Boolean!, $rerank: Rerank) {{
              search(query: $query, limit: $limit, mode: $mode, tag: $tag, category: $category,
                     entity: $entity, source: $source, asOf: $asOf, knownAt: $knownAt,
                     includeSuperseded: $includeSuperseded, graphDepth: $graphDepth,
                     timeHints: $timeHints, episodeLinks: $episodeLinks, rerank: $rerank) {{
                score ftsScore vectorScore depth via timeMatched entityMatched
                timeHint {{ text start end month event }}
                reranked {{ by fusedRank score fallback }}
                fact {{ {FACT_FIELDS} }}
              }}
            }}""",
            {
                "query": a["query"],
                "limit": a["limit"],
                "mode": a["mode"].upper() if isinstance(a["mode"], str) else a["mode"],
                "tag": a["tag"],
                "category": a["category"],
                "entity": a["entity"],
                "source": a["source"],
                **scope(a["as_of"], a["known_at"]),
                "includeSuperseded": a["include_superseded"],
                "graphDepth": a["graph_depth"],
                "timeHints": a["time_hints"],
                "episodeLinks": a["episode_links"],
                "rerank": rerank_name(a["rerank"]),
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
                hint_of(h["timeHint"]),
                None if h["timeMatched"] is None else h["timeMatched"].lower(),
                h["entityMatched"],
                reranked_of(h["reranked"]),
            )
            for h in data["search"]
        ]

    @remote(Memory.lookup)
    def lookup(self, a: Arguments) -> list[Fact]:
        """See ``Memory.lookup``: the facts about ``entity`` (and ``key``), no ranking."""
        data = self._query(
            f"""query($entity: String!, $key: String, $tag: String, $asOf: DateTime,
                      $knownAt: DateTime, $includeSuperseded: Boolean!, $limit: Int!) {{
              lookup(entity: $entity, key: $key, tag: $tag, asOf: $asOf, knownAt: $knownAt,
                     includeSuperseded: $includeSuperseded, limit: $limit) {{ {FACT_FIELDS} }}
            }}""",
            {
                "entity": a["entity"],
                "key": a["key"],
                "tag": a["tag"],
                **scope(a["as_of"], a["known_at"]),
                "includeSuperseded": a["include_superseded"],
                "limit": a["limit"],
            },
        )
        return [fact_of(f) for f in data["lookup"]]

    @remote(Memory.entities)
    def entities(self, a: Arguments) -> list[Entity]:
        """See ``Memory.entities``: the entities, the most facts first."""
        data = self._query(
            f"""query($knownAt: DateTime, $limit: Int!) {{
              entities(knownAt: $knownAt, limit: $limit) {{ {ENTITY_FIELDS} }} }}""",
            {"knownAt": time_text(a["known_at"]), "limit": a["limit"]},
        )
        return [entity_of(e) for e in data["entities"]]

    @remote(Memory.entity)
    def entity(self, a: Arguments) -> Entity:
        """See ``Memory.entity``: the entity ``name`` reaches; NotFound when none."""
        data = self._query(
            f"""query($name: String!, $knownAt: DateTime) {{
              entity(name: $name, knownAt: $knownAt) {{ {ENTITY_FIELDS} }} }}""",
            {"name": a["name"], "knownAt": time_text(a["known_at"])},
        )
        return entity_of(data["entity"])

    @remote(Memory.profile)
    def profile(self, a: Arguments) -> Profile:
        """See ``Memory.profile``: who or what the entity ``entity`` reaches is."""
        data = self._query(
            f"""query($entity: String!, $asOf: DateTime, $knownAt: DateTime,
                      $summary: Boolean!) {{
              profile(entity: $entity, asOf: $asOf, knownAt: $knownAt, summary: $summary) {{
                {PROFILE_FIELDS} }} }}""",
            {
                "entity": a["entity"],
                **scope(a["as_of"], a["known_at"]),
                "summary": a["summary"],
            },
        )
        return profile_of(data["profile"])

    @remote(Memory.history)
    def history(self, a: Arguments) -> list[Fact]:
        """See ``Memory.history``: every version of the fact, oldest first."""
        data = self._query(
            f"""query($id: ID!, $asOf: DateTime, $knownAt: DateTime) {{
              history(id: $id, asOf: $asOf, knownAt: $knownAt) {{ {FACT_FIELDS} }} }}""",
            {"id": a["fact_id"], **scope(a["as_of"], a["known_at"])},
        )
        return [fact_of(f) for f in data["history"]]

    @remote(Memory.get_many)
    def get_many(self, a: Arguments) -> dict[str, Fact]:
        """See ``Memory.get_many``: the facts of ``ids`` visible at the time scope (superseded
        versions too with ``include_superseded``), by id; ``ALIASES_PER_REQUEST`` a request."""
        wanted = list(dict.fromkeys(a["ids"]))
        when = scope(a["as_of"], a["known_at"])
        field = "history" if a["include_superseded"] else "fact"
        out: dict[str, Fact] = {}
        for start in range(0, len(wanted), ALIASES_PER_REQUEST):
            chunk = wanted[start : start + ALIASES_PER_REQUEST]
            names = ", ".join(f"$i{n}: ID!" for n in range(len(chunk)))
            fields_ = " ".join(
                f"f{n}: {field}(id: $i{n}, asOf: $asOf, knownAt: $knownAt) {{ {FACT_FIELDS} }}"
                for n in range(len(chunk))
            )
            variables = {**when, **{f"i{n}": i for n, i in enumerate(chunk)}}
            if a["include_superseded"]:  # a version chain may not hold the id (NOT_FOUND: unknown)
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

    @remote(Memory.links)
    def links(self, a: Arguments) -> list[Link]:
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
                    "id": a["fact_id"],
                    **link_filter(a["types"], a["direction"]),
                    **scope(a["as_of"], a["known_at"]),
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

    @remote(Memory.traverse)
    def traverse(self, a: Arguments) -> Subgraph:
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
                "from": [a["ids"]] if isinstance(a["ids"], str) else list(a["ids"]),
                "depth": a["depth"],
                **link_filter(a["types"], a["direction"]),
                **scope(a["as_of"], a["known_at"]),
                "maxNodes": a["max_nodes"],
                "minStrength": check_strength(a["min_strength"], "min_strength"),
            },
        )
        sub = data["traverse"]
        return Subgraph(
            [Node(fact_of(n["fact"]), n["depth"], tuple(n["parentIds"])) for n in sub["nodes"]],
            [link_of(e) for e in sub["edges"]],
            tuple(sub["truncatedBy"]),
        )

    @remote(Memory.path)
    def path(self, a: Arguments) -> Path | None:
        """See ``Memory.path``: a shortest path between two facts, or None."""
        data = self._query(
            f"""query($from: ID!, $to: ID!, $types: [LinkType!], $direction: Direction!,
                      $asOf: DateTime, $knownAt: DateTime, $maxDepth: Int!) {{
              path(from: $from, to: $to, types: $types, direction: $direction, asOf: $asOf,
                   knownAt: $knownAt, maxDepth: $maxDepth) {{
                facts {{ {FACT_FIELDS} }} links {{ {LINK_FIELDS} }}
              }}
            }}""",
            {
                "from": a["source_id"],
                "to": a["target_id"],
                **link_filter(a["types"], a["direction"]),
                **scope(a["as_of"], a["known_at"]),
                "maxDepth": a["max_depth"],
            },
        )
        found = data["path"]
        if found is None:
            return None
        return Path([fact_of(f) for f in found["facts"]], [link_of(k) for k in found["links"]])

    @remote(Memory.recall)
    def recall(self, a: Arguments) -> RecallResult:
        """See ``Memory.recall``: the ``<memory-context>`` block for ``prompt``."""
        data = self._query(
            f"""query($prompt: String!, $maxTokens: Int!, $format: RecallFormat!,
                      $graphDepth: Int!, $asOf: DateTime, $knownAt: DateTime,
                      $timeHints: Boolean!, $episodeLinks: Boolean!, $includeCold: Boolean!,
                      $profile: Boolean) {{
              recall(prompt: $prompt, maxTokens: $maxTokens, format: $format,
                     graphDepth: $graphDepth, asOf: $asOf, knownAt: $knownAt,
                     timeHints: $timeHints, episodeLinks: $episodeLinks,
                     includeCold: $includeCold, profile: $profile) {{
                context tokens omitted
                items {{ score source line summarized fact {{ {FACT_FIELDS} }} }}
                profiles {{ {PROFILE_FIELDS} }}
              }}
            }}""",
            {
                "prompt": a["prompt"],
                "maxTokens": a["max_tokens"],
                "format": a["format"].upper(),
                "graphDepth": a["graph_depth"],
                **scope(a["as_of"], a["known_at"]),
                "timeHints": a["time_hints"],
                "episodeLinks": a["episode_links"],
                "includeCold": a["include_cold"],
                "profile": a["profile"],
            },
        )
        found = data["recall"]
        items = [
            RecallItem(
                fact_of(i["fact"]),
                i["score"],
                FORMER_SOURCES.get(source := i["source"].lower(), source),
                i["line"],
                i["summarized"],
            )
            for i in found["items"]
        ]
        profiles = tuple(profile_of(p) for p in found["profiles"])
        return RecallResult(found["context"], items, found["tokens"], found["omitted"], profiles)

    @remote(Memory.episode)
    def episode(self, a: Arguments) -> Episode | None:
        """See ``Memory.episode``: the episode with this id, or None."""
        data = self._query(
            f"query($id: String!) {{ episode(id: $id) {{ {EPISODE_FIELDS} }} }}",
            {"id": a["episode_id"]},
        )
        return None if data["episode"] is None else episode_of(data["episode"])

    @remote(Memory.episodes)
    def episodes(self, a: Arguments) -> list[Episode]:
        """See ``Memory.episodes``: episodes by time, oldest first."""
        data = self._query(
            f"""query($source: String, $after: DateTime, $before: DateTime, $limit: Int!) {{
              episodes(source: $source, after: $after, before: $before, limit: $limit) {{
                {EPISODE_FIELDS} }} }}""",
            {
                "source": a["source"],
                "after": time_text(a["after"]),
                "before": time_text(a["before"]),
                "limit": a["limit"],
            },
        )
        return [episode_of(e) for e in data["episodes"]]

    @remote(Memory.episode_facts)
    def episode_facts(self, a: Arguments) -> list[Fact]:
        """See ``Memory.episode_facts``: its facts, in the order they were written; NotFound
        for an unknown episode."""
        data = self._query(
            f"""query($id: String!, $asOf: DateTime, $knownAt: DateTime) {{
              episode(id: $id, asOf: $asOf, knownAt: $knownAt) {{ facts {{ {FACT_FIELDS} }} }}
            }}""",
            {"id": a["episode_id"], **scope(a["as_of"], a["known_at"])},
        )
        if data["episode"] is None:
            raise NotFound(f"no episode with id {a['episode_id']!r}")
        return [fact_of(f) for f in data["episode"]["facts"]]

    @remote(Memory.purge)
    def purge(self, a: Arguments) -> PurgeReport:
        """See ``Memory.purge``: erase for good what the filter matches."""
        fact_id, ids, entity, source, episode = (
            a[name] for name in ("fact_id", "ids", "entity", "source", "episode")
        )
        if fact_id is not None:
            if ids is not None:
                raise InvalidInput("give fact_id or ids, not both", field="ids")
            ids = [fact_id]
        chosen = None if ids is None else list(ids)
        given = {"ids": chosen, "entity": entity, "source": source, "episode": episode}
        data = self._mutate(
            """mutation($filter: PurgeFilter!, $dryRun: Boolean!) {
              purgeFacts(filter: $filter, dryRun: $dryRun) {
                facts links vectors episodes dryRun names error { code message field }
              }
            }""",
            {"filter": {k: v for k, v in given.items() if v is not None}, "dryRun": a["dry_run"]},
            "purgeFacts",
        )
        if fact_id is not None and data["facts"] == 0 and not (entity or source or episode):
            # a fact in any state matches its own id: none means no fact has it
            raise NotFound(f"no fact with id {fact_id!r}")
        return PurgeReport(
            data["facts"],
            data["links"],
            data["vectors"],
            data["episodes"],
            data["dryRun"],
            tuple(data["names"]),
        )

    @remote(Memory.capture)
    def capture(self, a: Arguments) -> list[CaptureResult]:
        """See ``Memory.capture``: the messages kept as turns of ``episode``, and the facts they
        state drawn on top (``keep="facts"``: the facts alone)."""
        given = [{"role": m.role, "content": m.content} for m in parse_messages(a["messages"])]
        if a["keep"] not in KEEPS:  # as Memory refuses it, before anything is sent
            raise InvalidInput(
                f"unknown keep {a['keep']!r}; use conversation or facts", field="keep"
            )
        data = self._mutate(
            f"""mutation($messages: [MessageInput!]!, $episode: EpisodeInput,
                         $keep: CaptureKeep!) {{
              captureMessages(messages: $messages, episode: $episode, keep: $keep) {{
                results {{
                  action kind reason message role text targetIds turnId
                  fact {{ {FACT_FIELDS} }}
                }}
                error {{ code message field }}
              }}
            }}""",
            {
                "messages": given,
                "episode": None if a["episode"] is None else episode_input(a["episode"]),
                "keep": a["keep"].upper(),
            },
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
                kind=r["kind"].lower(),
                turn_id=r["turnId"],
            )
            for r in data["results"]
        ]

    @remote(Memory.facts)
    def facts(self, a: Arguments) -> FactPage:
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
                    "tag": a["tag"],
                    "category": a["category"],
                    "entity": a["entity"],
                    "source": a["source"],
                    "includeSuperseded": a["include_superseded"],
                },
                "first": a["first"],
                "after": None if a["after"] is None else fact_cursor(a["after"]),
                **scope(a["as_of"], a["known_at"]),
            },
        )
        page = data["facts"]
        items = [(fact_position(e["cursor"]), fact_of(e["node"])) for e in page["edges"]]
        return FactPage(items, page["pageInfo"]["hasNextPage"])

    @remote(Memory.documents)
    def documents(self, a: Arguments) -> list[DocumentFile]:
        """See ``Memory.documents``: the synced files (at or under ``under``), by path."""
        data = self._query(
            """query($under: String) { documents(under: $under) {
              path hash mtime size chunks syncedAt imported } }""",
            {"under": None if a["under"] is None else os.fspath(a["under"])},
        )
        return [
            DocumentFile(
                d["path"],
                d["hash"],
                epoch(d["mtime"]),
                d["size"],
                d["chunks"],
                epoch(d["syncedAt"]),
                d["imported"],
            )
            for d in data["documents"]
        ]

    @remote(Memory.read_lines)
    def read_lines(self, a: Arguments) -> str:
        """See ``Memory.read_lines``: lines of a synced file as it is on the service's disk."""
        data = self._query(
            """query($path: String!, $start: Int!, $end: Int) {
              documentLines(path: $path, start: $start, end: $end) }""",
            {"path": os.fspath(a["path"]), "start": a["start"], "end": a["end"]},
        )
        text: str = data["documentLines"]
        return text

    @remote(Memory.erasures)
    def erasures(self, a: Arguments) -> list[Erasure]:
        """See ``Memory.erasures``: the erasure records, newest first (an admin key)."""
        data = self._query(
            """query($limit: Int!) { erasures(limit: $limit) {
              at filter facts links vectors episodes } }""",
            {"limit": a["limit"]},
        )
        return [
            Erasure(
                parsed(e["at"], datetime),
                e["filter"],
                e["facts"],
                e["links"],
                e["vectors"],
                e["episodes"],
            )
            for e in data["erasures"]
        ]

    # ----------------------------------------------------------------------------- upkeep

    @remote(Memory.pin)
    def pin(self, a: Arguments) -> Fact:
        """See ``Memory.pin``: the fact, pinned."""
        return self._fact_mutation("pinFact(id: $id)", a["fact_id"])

    @remote(Memory.unpin)
    def unpin(self, a: Arguments) -> Fact:
        """See ``Memory.unpin``."""
        return self._fact_mutation("unpinFact(id: $id)", a["fact_id"])

    @remote(Memory.set_cold)
    def set_cold(self, a: Arguments) -> Fact:
        """See ``Memory.set_cold``."""
        return self._fact_mutation(
            "setCold(id: $id, cold: " + ("true" if a["cold"] else "false") + ")", a["fact_id"]
        )

    def _fact_mutation(self, call: str, fact_id: str) -> Fact:
        """The fact a mutation of one fact's id (``call``) answers."""
        field = call.partition("(")[0]
        data = self._mutate(
            f"""mutation($id: ID!) {{ {call} {{
              fact {{ {FACT_FIELDS} }} error {{ code message field }} }} }}""",
            {"id": fact_id},
            field,
        )
        return fact_of(data["fact"])

    @remote(Memory.checkpoint)
    def checkpoint(self, a: Arguments) -> Fact:
        """See ``Memory.checkpoint``: the checkpoint's fact."""
        # checked as Memory checks it, so bad input fails alike before any request
        checkpoints.fact_input(
            a["intent"], a["state"], a["expected_outcome"], a["working_files"], time.time()
        )
        data = self._mutate(
            f"""mutation($input: CheckpointInput!) {{ saveCheckpoint(input: $input) {{
              checkpoint {{ {CHECKPOINT_FIELDS} }} error {{ code message field }} }} }}""",
            {
                "input": {
                    "intent": a["intent"],
                    "state": a["state"],
                    "expectedOutcome": a["expected_outcome"],
                    "workingFiles": list(a["working_files"]),
                }
            },
            "saveCheckpoint",
        )
        return checkpoint_of(data["checkpoint"]).fact

    @remote(Memory.restore_checkpoint)
    def restore_checkpoint(self, a: Arguments) -> Checkpoint | None:
        """See ``Memory.restore_checkpoint``: the newest unexpired checkpoint, or None."""
        data = self._query(f"{{ checkpoint {{ {CHECKPOINT_FIELDS} }} }}", {})
        return None if data["checkpoint"] is None else checkpoint_of(data["checkpoint"])

    @remote(Memory.prune)
    def prune(self, a: Arguments) -> PruneReport:
        """See ``Memory.prune``."""
        data = self._mutate(
            """mutation($dryRun: Boolean!, $soft: Boolean!) { prune(dryRun: $dryRun, soft: $soft) {
              expired decayed lowConfidence dryRun error { code message field } } }""",
            {"dryRun": a["dry_run"], "soft": a["soft"]},
            "prune",
        )
        return PruneReport(data["expired"], data["decayed"], data["lowConfidence"], data["dryRun"])

    @remote(Memory.maintain)
    def maintain(self, a: Arguments) -> list[MaintenanceRun]:
        """See ``Memory.maintain``: the runs, in the jobs' order."""
        data = self._mutate(
            f"""mutation($jobs: [MaintenanceJob!], $force: Boolean!) {{
              maintain(jobs: $jobs, force: $force) {{
                runs {{ {RUN_FIELDS} }} error {{ code message field }} }} }}""",
            {
                "jobs": None if a["jobs"] is None else [j.upper() for j in checked_jobs(a["jobs"])],
                "force": a["force"],
            },
            "maintain",
        )
        return [run_of(r) for r in data["runs"]]

    @remote(Memory.maintenance_runs)
    def maintenance_runs(self, a: Arguments) -> list[MaintenanceRun]:
        """See ``Memory.maintenance_runs``: newest first."""
        data = self._query(
            f"""query($job: MaintenanceJob, $limit: Int!) {{
              maintenanceRuns(job: $job, limit: $limit) {{ {RUN_FIELDS} }} }}""",
            {
                "job": None if a["job"] is None else checked_jobs([a["job"]])[0].upper(),
                "limit": a["limit"],
            },
        )
        return [run_of(r) for r in data["maintenanceRuns"]]

    @remote(Memory.reflect)
    def reflect(self, a: Arguments) -> ReflectReport:
        """See ``Memory.reflect``: the patterns and rules stored, and the requests made."""
        data = self._mutate(
            f"""mutation($windowDays: Float) {{ reflect(windowDays: $windowDays) {{
              patterns {{ {FACT_FIELDS} }} rules {{ {FACT_FIELDS} }} requests ignored problem
              error {{ code message field }} }} }}""",
            {"windowDays": a["window_days"]},
            "reflect",
        )
        return ReflectReport(
            [fact_of(f) for f in data["patterns"]],
            [fact_of(f) for f in data["rules"]],
            data["requests"],
            data["ignored"],
            data["problem"],
        )

    @remote(Memory.consolidate)
    def consolidate(self, a: Arguments) -> ConsolidateReport:
        """See ``Memory.consolidate``: the clusters found and the facts they were merged into."""
        data = self._mutate(
            f"""mutation($dryRun: Boolean!) {{ consolidate(dryRun: $dryRun) {{
              clusters merged {{ {FACT_FIELDS} }} superseded requests dryRun problem
              error {{ code message field }} }} }}""",
            {"dryRun": a["dry_run"]},
            "consolidate",
        )
        return ConsolidateReport(
            [list(c) for c in data["clusters"]],
            [fact_of(f) for f in data["merged"]],
            data["superseded"],
            data["requests"],
            data["dryRun"],
            data["problem"],
        )

    @remote(Memory.auto_classify)
    def auto_classify(self, a: Arguments) -> ClassifyReport:
        """See ``Memory.auto_classify``: the facts relabelled, by category, and the categories
        discovered."""
        data = self._mutate(
            """mutation { autoClassify {
              relabelled { category count } discovered requests problem
              error { code message field } } }""",
            {},
            "autoClassify",
        )
        return ClassifyReport(
            {r["category"]: r["count"] for r in data["relabelled"]},
            list(data["discovered"]),
            data["requests"],
            data["problem"],
        )

    @remote(Memory.rebuild_entities)
    def rebuild_entities(self, a: Arguments) -> int:
        """See ``Memory.rebuild_entities``: how many entity names the facts carry."""
        data = self._mutate(
            "mutation { rebuildEntities { names error { code message field } } }",
            {},
            "rebuildEntities",
        )
        names: int = data["names"]
        return names

    @remote(Memory.categories)
    def categories(self, a: Arguments) -> list[CategoryInfo]:
        """See ``Memory.categories``: the built-in categories, then the discovered ones."""
        data = self._query("{ categories { name description discoveredAt } }", {})
        return [
            CategoryInfo(c["name"], c["description"], parsed(c["discoveredAt"], datetime))
            for c in data["categories"]
        ]

    @remote(Memory.stats)
    def stats(self, a: Arguments) -> Stats:
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
        feed = self._feed(kinds)
        try:
            socket = connect(
                feed.url,
                subprotocols=[Subprotocol(ChangeFeed.SUBPROTOCOL)],
                additional_headers=feed.headers,
                proxy=None,
                open_timeout=min(CONNECT_TIMEOUT_S, self.timeout),
            )
        except (OSError, WebSocketException) as exc:
            raise ServiceError(
                Code.UNAVAILABLE, f"cannot reach {shown_url(feed.url)}: {exc}"
            ) from exc
        with socket:
            socket.send(feed.opening)
            for raw in socket:
                replies, change, ended = feed.receive(raw)
                for reply in replies:
                    socket.send(reply)
                if change is not None:
                    yield change
                if ended:
                    return

    def _feed(self, kinds: Iterable[str] | None) -> ChangeFeed:
        """The conversation of a subscription to this client's namespace."""
        namespace = self._query("{ namespace }", {})["namespace"]
        headers = {
            k: v
            for k, v in self._http.headers.items()
            if k.lower() in ("authorization", NAMESPACE_HEADER.lower())
        }
        return ChangeFeed(self.url, headers, namespace, kinds)

    # ----------------------------------------------------------------------------- transport

    def _query(self, document: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        return self._execute(document, variables, retry=True)

    def _mutate(self, document: str, variables: Mapping[str, Any], field: str) -> dict[str, Any]:
        """A mutation's payload; its ``error``, when set, raised as its exception."""
        payload: dict[str, Any] = self._execute(document, variables, retry=False)[field]
        error = payload.get("error")
        if error:
            raise exception(error["code"], error["message"], error.get("field"))
        return payload

    def _explained(self, error: ServiceError) -> ServiceError:
        """A document the service's schema does not know usually means a service of another
        version: the error then names both versions, which the validation message does not."""
        if error.code != Code.INVALID_QUERY or not UNKNOWN_TO_SERVICE.search(error.message):
            return error
        try:
            server = self._execute("{ version }", {}, retry=False)["version"]
        except GraphmemError:
            return error
        if server == __version__:
            return error
        return ServiceError(
            Code.INVALID_QUERY,
            f"graphmem server {server}, client {__version__}: the server does not know what "
            f"this client asks ({error.message}); use the client of graphmem {server}, or "
            "upgrade the server",
        )

    def _execute(
        self, document: str, variables: Mapping[str, Any], *, retry: bool
    ) -> dict[str, Any]:
        """``data`` of one GraphQL request; errors raised as their exceptions. A read is
        retried after any answer of 429 or 503 or a failed connection; a write only when the
        service did not run it (429, 503, a connection refused). All of it, retries and their
        waits included, within ``timeout``; each answer at most ``max_answer_bytes``."""
        body = {"query": document, "variables": dict(variables)}
        wait = BACKOFF_S
        with bounds(seconds=self.timeout, max_bytes=self.max_answer_bytes) as limit:
            for attempt in range(self.retries + 1):
                try:
                    response = self._http.post("/graphql", json=body)
                except AnswerTooLarge:
                    raise ServiceError(
                        Code.TOO_COSTLY,
                        f"the service's answer is larger than max_answer_bytes "
                        f"({self.max_answer_bytes:,}): ask for smaller pages or fewer fields",
                    ) from None
                except BadAnswer as exc:
                    raise malformed(f"the service's answer is {exc}") from None
                except httpx.TransportError as exc:
                    if limit.left() <= 0:
                        raise ServiceError(
                            Code.UNAVAILABLE,
                            f"{shown_url(self.url)}: no complete answer within the client's "
                            f"timeout ({self.timeout:g} s)",
                        ) from exc
                    if isinstance(exc, httpx.ConnectError):
                        problem: GraphmemError = ServiceError(
                            Code.UNAVAILABLE, f"cannot reach {shown_url(self.url)}: {exc}"
                        )
                    elif not retry:  # sent, perhaps run: a write is not repeated
                        raise ServiceError(
                            Code.UNAVAILABLE, f"{shown_url(self.url)}: {exc}"
                        ) from exc
                    else:
                        problem = ServiceError(Code.UNAVAILABLE, f"{shown_url(self.url)}: {exc}")
                else:
                    if response.status_code not in (429, 503):
                        try:
                            data = data_of(response)
                        except ServiceError as exc:
                            raise self._explained(exc) from None
                        if _ANSWERED.get() is False:  # inside a verb
                            _ANSWERED.set(True)
                        return data
                    problem = refused(response)
                    wait = retry_after(response, wait)
                if attempt == self.retries or wait >= limit.left():  # no wait past the deadline
                    raise problem
                time.sleep(wait)
                wait *= 2
        raise AssertionError("unreachable")


#: Set while a verb runs: whether the service has answered it yet, so that an AttributeError,
#: KeyError, TypeError or ValueError raised after that is known to come from reading the answer.
_ANSWERED: ContextVar[bool | None] = ContextVar("graphmem_client_answered", default=None)
_Verb = TypeVar("_Verb", bound=Callable[..., Any])


def _reading_answers(verb: _Verb) -> _Verb:
    """``verb``, raising ServiceError (INTERNAL_ERROR) instead of the exception that reading an
    answer of the wrong shape gives (a field missing, a list where an object was due…)."""

    @functools.wraps(verb)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if _ANSWERED.get() is not None:  # a verb run by another (store by store_many)
            return verb(*args, **kwargs)
        token = _ANSWERED.set(False)
        try:
            return verb(*args, **kwargs)
        except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, GraphmemError) or not _ANSWERED.get():
                raise  # the caller's arguments, or the service's own error
            raise malformed(f"the service's answer lacks what it should hold ({exc!r})") from exc
        finally:
            _ANSWERED.reset(token)

    return cast(_Verb, checked)


# Every verb but ``changes`` (a generator: its ChangeFeed reads each message itself).
for _name, _verb in list(vars(Client).items()):
    if (
        inspect.isfunction(_verb)
        and not _name.startswith("_")
        and _name not in ("close", "changes")
    ):
        setattr(Client, _name, _reading_answers(_verb))
