"""mem0's REST API at ``/mem0`` (setting ``mem0_api``): the endpoints mem0's ``MemoryClient``
calls, answered in mem0's shapes by graphmem's verbs, so that a mem0 client or plugin works
against graphmem once its host and key are changed (docs/clients.md#mem0).

1. **Who**: every request passes the gate as ``/graphql`` does (``resolvers.auth``): its API key
   (``Authorization: Token <key>`` as mem0 sends it, or ``Bearer <key>``), checked on each
   request, a read-only key refused every write; the namespace the key admits (its first, or
   another of its own named by ``X-Graphmem-Namespace``).
2. **Whose memory**: a memory's owner is its ``user_id``, else its ``agent_id``, ``app_id`` or
   ``run_id``. Each owner has a namespace of its own next to the admitted one
   (``<namespace>.mem0.user.alice``: :func:`owner_namespace`), so one user's memories never
   meet another's: not in search, not in the write rules (a repeat, a supersession), not in a
   ``delete_all``. A memory's id names its owner (``user.alice.<fact id>``). The other ids an
   add names, and its metadata, are recorded on the add's episode, and filters on them narrow
   the owner's memories.
3. **Verbs**: ``add`` is ``capture`` (``infer``, the default: the facts drawn from the
   messages) or ``store_many`` (``infer=False``: each message whole); ``search`` is ``search``;
   ``get_all`` pages the owner's facts; ``get`` reads a memory's live version, ``update``
   writes a new version that supersedes it, ``delete`` forgets it, ``delete_all`` forgets
   every memory a filter matches, ``history`` reads its chain of versions, and deleting an
   entity (``delete_users``) purges its namespace. A memory keeps the id of its first version
   however often it changes.
4. **Bounds**: a body of at most ``max_body_bytes``, lists of at most ``TOP_K.most`` and
   ``PAGE_SIZE.most``, ``MAX_SCANNED`` facts read by one listing or deletion; each request is charged its
   key's cost points and server time and runs in its key's share of the threads, as an MCP tool
   call is (``resolvers.fairness``), within ``request_timeout``.

What mem0 offers and graphmem does not (listing entities, exports, webhooks, profiles…) is answered 501
with mem0's error shape, ``{"detail": …}``, which its client raises as ``MemoryError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import operator
import re
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final, NamedTuple

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from graphmem import Fact, GraphmemError, Memory, Settings
from graphmem.errors import CODES, Code
from graphmem.limits import MAX_CAPTURE_MESSAGES, MAX_LIMIT, MAX_NODES
from graphmem.temporal import to_iso

from ..cost import HEAVY_COST, CostError, capture_points, rerank_work
from ..fairness import Admission, Turns
from .auth import NAMESPACE_HEADER, Authenticator, Denied

MEM0_PATH: Final = "/mem0"
#: The ids that scope a mem0 memory, the owner's first (the first one given owns it).
SCOPE_IDS: Final[tuple[str, ...]] = ("user_id", "agent_id", "app_id", "run_id")


class Bound(NamedTuple):
    """A count a request may give: at most ``most``, ``default`` where it gives none."""

    most: int
    default: int


#: Results of one search (mem0's own range is 1 to 1,000).
TOP_K: Final = Bound(most=1_000, default=10)
#: Memories on one page of ``get_all`` (mem0's bound).
PAGE_SIZE: Final = Bound(most=200, default=100)
#: Most facts one ``get_all`` or ``delete_all`` reads to find the memories its filters match;
#: beyond them its ``count`` is a lower bound (``delete_all``: call it again).
MAX_SCANNED: Final = 10_000
#: Most versions of one memory read back (``history``, finding a memory's first version).
MAX_VERSIONS: Final = 100
#: A search asks graphmem for this many times ``top_k`` hits when filters beyond the owner may
#: drop some, so that ``top_k`` are left where that many match.
OVERFETCH: Final = 4
#: The episode source of what this API writes, and where in an episode's metadata it keeps
#: the add's ids and metadata.
SOURCE: Final = "mem0"
#: The decay class of what this API stores as given (``infer=False``, an update with an
#: ``expiration_date``): a mem0 memory lasts until deleted or its expiration date.
PERMANENT: Final = "permanent"
#: Roles of the messages ``infer=False`` stores (mem0 stores neither system nor tool messages).
STORED_ROLES: Final = ("user", "assistant")
#: Options mem0's client may send that graphmem accepts and leaves aside: ranking it does its
#: own way (``rerank``, ``threshold``, ``keyword_search``), and what it has no counterpart of.
IGNORED: Final = frozenset(
    {
        "rerank",
        "threshold",
        "keyword_search",
        "fields",
        "show_expired",
        "latest_only",
        "reference_date",
        "output_format",
        "version",
        "async_mode",
        "enable_graph",
        "timezone",
        "org_id",
        "project_id",
    }
)
#: An id's owner part: ``user.alice``, or ``user.<digest>.h`` for an id that is not plain.
_PLAIN = re.compile(r"^[a-z0-9_-]{1,40}$")
_OWNER = re.compile(r"^(user|agent|app|run)\.([a-z0-9_-]{1,40}|[0-9a-f]{24}\.h)$")
_NAME_LIMIT: Final = 64
_log = logging.getLogger("graphmem.server")


#: The methods the catch-all routes answer (with a refusal).
_ALL: Final = ["GET", "POST", "PUT", "DELETE", "PATCH"]


def mem0_routes(gate: Authenticator, admission: Admission, settings: Settings) -> list[BaseRoute]:
    """The mount at ``/mem0``: mem0's endpoints with ``mem0_api`` on, else one answer saying
    it is off (404, in mem0's error shape)."""
    if not settings.mem0_api:
        off = Denied(404, Code.NOT_FOUND, "the mem0 API is off on this server (setting mem0_api)")
        return [Mount(MEM0_PATH, routes=[Route("/{path:path}", _refusing(off), methods=_ALL)])]
    api = Mem0Api(gate, admission, settings)
    return [Mount(MEM0_PATH, routes=api.routes())]


def _refusing(error: Denied) -> Callable[[Request], Awaitable[Response]]:
    async def refuse(request: Request) -> Response:
        return _error_response(error.status, error.code, error.message)

    return refuse


@dataclass
class Call:
    """One request as an endpoint sees it: its JSON body, query and path parameters, the
    namespace the gate admitted, and what it read of the owners' namespaces it opened."""

    body: dict[str, Any]
    query: Mapping[str, str]
    path: Mapping[str, str]
    base: str
    api: Mem0Api
    _episodes: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    #: The time limits (``sql_time_limit``) of the owners' namespaces the request reads, held
    #: until it ends (``_limited``).
    limits: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _limited: set[str] = field(default_factory=set)

    def owner_memory(self, owner: Owner, *, create: bool) -> Memory | None:
        """The owner's namespace; None when it does not exist yet and ``create`` is False (a
        read never makes a namespace: its directory, made when a namespace is first opened,
        says whether it exists; with a PostgreSQL store another replica may have made it, so
        it is opened)."""
        name = owner_namespace(self.base, owner)
        namespaces = self.api.gate.namespaces
        memory = namespaces.if_open(name)
        settings = namespaces.settings
        if memory is None:
            if not (create or settings.store or (Path(settings.data_dir) / name).is_dir()):
                return None
            memory = self.api.open_owner(name)
        if name not in self._limited:
            self._limited.add(name)
            self.limits.enter_context(memory.time_limit())
        return memory

    def scope_of(self, memory: Memory, fact: Fact) -> dict[str, Any]:
        """What the add (or update) that wrote ``fact`` recorded: its ids and metadata."""
        if fact.episode_id is None:
            return {}
        cache_key = (memory.namespace, fact.episode_id)
        if cache_key not in self._episodes:
            episode = memory.episode(fact.episode_id)
            recorded = {} if episode is None else episode.metadata.get(SOURCE)
            self._episodes[cache_key] = recorded if isinstance(recorded, dict) else {}
        return self._episodes[cache_key]


Endpoint = Callable[[Call], Any]


@dataclass(frozen=True)
class Operation:
    """An endpoint, whether it writes, and what it costs in points (from its body and query)."""

    run: Endpoint
    writes: bool
    cost: Callable[[Mapping[str, Any], Mapping[str, str]], int] = lambda body, query: 1


class Mem0Api:
    """The endpoints, each run as ``_serve`` says (the module docstring's points 1 and 4)."""

    def __init__(self, gate: Authenticator, admission: Admission, settings: Settings) -> None:
        self.gate = gate
        self.admission = admission
        self.max_body_bytes = settings.max_body_bytes
        self.max_owners = settings.mem0_max_owners
        #: The owners' namespaces this process opened: each stays open (a Memory, its
        #: threads and files) until the server stops, so their number is bounded.
        self._owners: set[str] = set()
        self._owners_lock = threading.Lock()

    def _search_cost(self, body: Mapping[str, Any], query: Mapping[str, str]) -> int:
        """The hits a search reads, and its rerank stage's request if the server's reranker
        sends one (mem0's ``rerank`` option is left aside: graphmem reranks as it is set)."""
        top_k = body.get("top_k", TOP_K.default)
        read = min(MAX_LIMIT, OVERFETCH * top_k) if isinstance(top_k, int) else 1
        return read + rerank_work(None, self.admission.default_rerank)

    def open_owner(self, name: str) -> Memory:
        """The owner's namespace ``name``, opened; UNAVAILABLE once ``mem0_max_owners`` others
        are open in this process."""
        with self._owners_lock:
            if name not in self._owners and len(self._owners) >= self.max_owners:
                raise Denied(
                    503,
                    Code.UNAVAILABLE,
                    f"this server keeps at most {self.max_owners} mem0 owners open "
                    "(setting mem0_max_owners)",
                )
            self._owners.add(name)
        return self.gate.namespaces.get(name)

    def routes(self) -> list[BaseRoute]:
        memory_id = "/v1/memories/{memory_id}/"
        ops: list[tuple[str, str, Operation]] = [
            ("/v1/ping/", "GET", Operation(ping, writes=False)),
            ("/v3/memories/add/", "POST", Operation(add, writes=True, cost=_add_cost)),
            (
                "/v3/memories/search/",
                "POST",
                Operation(search, writes=False, cost=self._search_cost),
            ),
            ("/v3/memories/", "POST", Operation(get_all, writes=False, cost=_scan_cost)),
            ("/v1/memories/", "DELETE", Operation(delete_all, writes=True, cost=_scan_cost)),
            (memory_id, "GET", Operation(get, writes=False)),
            (memory_id, "PUT", Operation(update, writes=True)),
            (memory_id, "DELETE", Operation(delete, writes=True)),
            (memory_id + "history/", "GET", Operation(history, writes=False)),
            (
                "/v2/entities/{kind}/{name}/",
                "DELETE",
                Operation(delete_entity, writes=True, cost=_scan_cost),
            ),
        ]
        by_path: dict[str, dict[str, Operation]] = {}
        for path, method, op in ops:
            by_path.setdefault(path, {})[method] = op
        routes: list[BaseRoute] = [
            Route(path, self._endpoint(methods), methods=list(methods))
            for path, methods in by_path.items()
        ]
        routes.append(Route("/{path:path}", self._unsupported, methods=_ALL))
        return routes

    def _endpoint(self, ops: Mapping[str, Operation]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await self._serve(request, ops[request.method])

        return endpoint

    async def _unsupported(self, request: Request) -> Response:
        return _error_response(
            501,
            Code.INVALID_INPUT,
            f"graphmem's mem0 API does not offer {request.method} /{request.path_params['path']}"
            ": it answers ping, add, search, get_all, get, update, delete, delete_all, "
            "history and the deletion of one entity (docs/clients.md#mem0)",
        )

    async def _serve(self, request: Request, op: Operation) -> Response:
        try:
            body = await self._body(request)
            memory, key = await self.gate.admit(
                _as_bearer(request.headers.get("authorization")),
                request.headers.get(NAMESPACE_HEADER),
            )
            if op.writes and key is not None and key.read_only:
                raise Denied(403, Code.FORBIDDEN, f"API key {key.id} is read-only")
            query = dict(request.query_params)
            key_id = None if key is None else key.id
            cost = max(1, op.cost(body, query))
            self.admission.spend(key_id, cost)
            call = Call(body, query, dict(request.path_params), memory.namespace, self)
            pool = self._pool(op, cost)
            timeout = memory.settings.request_timeout
            try:
                async with self.admission.requests.held(key_id):
                    answer = await asyncio.wait_for(
                        pool.run(key_id, lambda: _limited(op.run, call)), timeout
                    )
            except TimeoutError:
                raise Denied(
                    504,
                    Code.TIMEOUT,
                    f"the request took longer than {timeout:g} s (setting request_timeout)",
                ) from None
        except Denied as exc:  # the gate's refusals and this API's
            return _error_response(exc.status, exc.code, exc.message)
        except CostError as exc:
            headers = {"Retry-After": str(exc.retry_after or 1)}
            status = 429 if exc.code == Code.RATE_LIMITED else 400
            return _error_response(status, exc.code, exc.message, headers)
        except GraphmemError as exc:
            return _error_response(_status(exc.code), exc.code, exc.message)
        except Exception:
            _log.exception("mem0 %s %s failed", request.method, request.url.path)
            return _error_response(
                500, Code.INTERNAL_ERROR, "the request failed; the server's log has the details"
            )
        return JSONResponse(answer)

    def _pool(self, op: Operation, cost: int) -> Turns:
        """Where a request runs, as an MCP call would: the lane when its worst case is heavy
        (a listing), else the pool of writes or of reads."""
        if cost >= HEAVY_COST:
            return self.admission.lane
        return self.admission.writes if op.writes else self.admission.reads

    async def _body(self, request: Request) -> dict[str, Any]:
        """The JSON object of a POST or PUT ({} for a request without a body); 413 beyond
        ``max_body_bytes``, 400 for anything that is not a JSON object."""
        declared = request.headers.get("content-length", "")
        too_large = Denied(
            413, Code.PAYLOAD_TOO_LARGE, f"request body larger than {self.max_body_bytes} bytes"
        )
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise too_large
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body_bytes:
                raise too_large
            chunks.append(chunk)
        raw = b"".join(chunks)
        if not raw.strip():
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise Denied(400, Code.INVALID_INPUT, "the request body is not JSON") from None
        if not isinstance(data, dict):
            raise Denied(400, Code.INVALID_INPUT, "the request body must be a JSON object")
        return data


def _limited(run: Endpoint, call: Call) -> Any:
    """``run(call)``, its reads stopped past ``sql_time_limit`` (TIMEOUT) in each namespace it
    opens (``Call.owner_memory``)."""
    with call.limits:
        return run(call)


# ------------------------------------------------------------------------------ endpoints


def ping(call: Call) -> Any:
    """What mem0's client asks as it starts: the key is good; its org and project (the
    namespace the key admits)."""
    return {"status": "ok", "org_id": call.base, "project_id": call.base, "user_email": None}


def add(call: Call) -> Any:
    """Remember messages for an owner: the facts drawn from them (``infer``) or each message
    whole. Answers mem0's event list: ADD, UPDATE (the memory's id, its new text) or DELETE."""
    body = call.body
    _only(
        body,
        {"messages", "metadata", "infer", "filters", "expiration_date", *SCOPE_IDS},
        "add",
    )
    ids = _ids({**_mapping(body.get("filters"), "filters"), **_present(body, SCOPE_IDS)})
    owner = Owner.of(ids, "add")
    messages = _messages(body.get("messages"))
    infer = body.get("infer", True)
    if not isinstance(infer, bool):
        raise _invalid("infer must be true or false")
    expires = _expiration(body.get("expiration_date"))
    if infer and expires is not None:
        raise _invalid(
            "expiration_date is kept only with infer=false (a capture's facts take "
            "the expiry of their decay class)"
        )
    recorded = {**ids, "metadata": _metadata(body.get("metadata"))}
    episode = {"id": str(uuid.uuid4()), "source": SOURCE, "metadata": {SOURCE: recorded}}
    memory = call.owner_memory(owner, create=True)
    assert memory is not None
    if infer:
        captured = memory.capture(messages, episode=episode, keep="facts")
        writes = [(r.action, r.fact, r.target_ids) for r in captured]
    else:
        items = [
            {
                "text": m["content"],
                "source": f"{SOURCE}:{m['role']}",
                "classify": False,
                "dedup": False,
                "decay_class": PERMANENT,
                **({} if expires is None else {"expires_at": expires}),
            }
            for m in messages
            if m["role"] in STORED_ROLES and m["content"].strip()
        ]
        stored = memory.store_many(items, episode=episode) if items else []
        writes = [(r.action, r.fact, r.target_ids) for r in stored]
    results = []
    for action, fact, targets in writes:
        if fact is None or action not in ("ADD", "UPDATE", "DELETE"):
            continue  # a repeat (NOOP) or a message skipped: mem0 lists neither
        first = _first_version(memory, targets[0] if action == "DELETE" and targets else fact.id)
        result: dict[str, Any] = {
            "id": memory_id(owner, first),
            "memory": fact.text,
            "data": {"memory": fact.text},
            "event": action,
        }
        if action == "UPDATE" and targets:
            previous = memory.known_now(targets[:1]).get(targets[0])
            result["previous_memory"] = None if previous is None else previous.text
        results.append(result)
    return {
        "status": "SUCCEEDED",
        "event_id": episode["id"],
        "message": "memories added (graphmem processes an add before answering it)",
        "results": results,
    }


def search(call: Call) -> Any:
    """The owner's memories that match ``query``, best first, each with its ``score``."""
    body = call.body
    _only(body, {"query", "filters", "top_k", "categories", "metadata", *IGNORED}, "search")
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise _invalid("query must be non-empty text")
    top_k = _whole(body.get("top_k", TOP_K.default), "top_k", 1, TOP_K.most)
    where = Where.parse(body)
    memory = call.owner_memory(where.owner, create=False)
    if memory is None:
        return {"results": []}
    limit = min(MAX_LIMIT, top_k * OVERFETCH) if where.narrows else min(MAX_LIMIT, top_k)
    hits = memory.search(query.strip(), limit=limit)
    facts = [h.fact for h in hits]
    firsts = _first_versions(memory, facts)
    results = []
    for hit in hits:
        shown = _shown(call, memory, where.owner, hit.fact, firsts[hit.fact.id])
        if where.matches(shown):
            results.append({**shown, "score": round(hit.score, 6)})
        if len(results) == top_k:
            break
    return {"results": results}


def get_all(call: Call) -> Any:
    """A page of the owner's memories (``page`` and ``page_size`` in the query), the oldest
    first, with how many the filters match in all (``count``)."""
    _only(
        call.body,
        {
            "filters",
            "categories",
            "metadata",
            "start_date",
            "end_date",
            "page",
            "page_size",
            *IGNORED,
        },
        "get_all",
    )
    page = _whole(call.query.get("page", call.body.get("page", 1)), "page", 1, MAX_SCANNED)
    size = _whole(
        call.query.get("page_size", call.body.get("page_size", PAGE_SIZE.default)),
        "page_size",
        1,
        PAGE_SIZE.most,
    )
    where = Where.parse(call.body)
    memory = call.owner_memory(where.owner, create=False)
    matched = [] if memory is None else [s for _, s in _scan(call, memory, where)]
    start = (page - 1) * size
    return {
        "count": len(matched),
        "next": None if start + size >= len(matched) else f"?page={page + 1}&page_size={size}",
        "previous": None if page == 1 else f"?page={page - 1}&page_size={size}",
        "results": matched[start : start + size],
    }


def get(call: Call) -> Any:
    """The memory as it is now: its live version. 404 once deleted or unknown."""
    owner, memory, chain = _memory_chain(call, live=True)
    return _shown(call, memory, owner, chain[-1], chain[0])


def update(call: Call) -> Any:
    """A new version of the memory, superseding the live one: its new ``text`` (or the same),
    ``metadata`` (or the same), ``expiration_date`` (``null``: none)."""
    body = call.body
    _only(body, {"text", "metadata", "expiration_date"}, "update")
    if not body.keys() & {"text", "metadata", "expiration_date"}:
        raise _invalid("give text, metadata or expiration_date to update")
    owner, memory, chain = _memory_chain(call, live=True)
    head = chain[-1]
    text = body.get("text", head.text)
    if not isinstance(text, str) or not text.strip():
        raise _invalid("text must be non-empty text")
    recorded = dict(call.scope_of(memory, head))
    if "metadata" in body:
        recorded["metadata"] = _metadata(body["metadata"])
    item: dict[str, Any] = {
        "text": text,
        "supersedes": head.id,
        "source": head.source,
        "category": head.category,
        "classify": False,
        "dedup": False,
    }
    if "expiration_date" in body:
        expires = _expiration(body["expiration_date"])
        item["decay_class"] = PERMANENT
        if expires is not None:
            item["expires_at"] = expires
    else:  # the new version lasts as the old one did, counted from now
        item["decay_class"] = head.decay_class
    episode = {"id": str(uuid.uuid4()), "source": SOURCE, "metadata": {SOURCE: recorded}}
    [result] = memory.store_many([item], episode=episode)
    assert result.fact is not None
    return _shown(call, memory, owner, result.fact, chain[0])


def delete(call: Call) -> Any:
    """Forget the memory: reads stop seeing it, its history keeps it (``history``)."""
    _, memory, chain = _memory_chain(call, live=True)
    memory.forget(chain[-1].id)
    return {"message": "Memory deleted successfully!"}


def delete_all(call: Call) -> Any:
    """Forget every memory of the owner the query's ids name (the other ids narrowing it)."""
    unknown = set(call.query) - set(SCOPE_IDS)
    if unknown:
        raise _invalid(f"delete_all takes {', '.join(SCOPE_IDS)}, not {', '.join(sorted(unknown))}")
    where = Where.parse({"filters": dict(call.query)})
    memory = call.owner_memory(where.owner, create=False)
    if memory is None:
        return {"message": "Memories deleted successfully!", "deleted": 0}
    found = [fact for fact, _ in _scan(call, memory, where)]
    for fact in found:
        memory.forget(fact.id)
    return {"message": "Memories deleted successfully!", "deleted": len(found)}


def delete_entity(call: Call) -> Any:
    """Erase an owner (mem0's ``delete_users(user_id=…)``): every fact of its namespace, in any
    state, purged for good with their history (``Memory.purge``), at most MAX_SCANNED a
    request (call it again for the rest)."""
    kind, name = call.path["kind"], call.path["name"]
    if kind not in ("user", "agent", "app", "run"):
        raise _invalid(f"an entity is a user, agent, app or run, not {kind!r}")
    memory = call.owner_memory(Owner(kind, name), create=False)
    ids = [] if memory is None else memory.fact_ids()[:MAX_SCANNED]
    if memory is None or not ids:
        raise Denied(404, Code.NOT_FOUND, f"no memories of {kind} {name!r}")
    for start in range(0, len(ids), MAX_NODES):
        memory.purge(ids=ids[start : start + MAX_NODES])
    return {"message": "Entity deleted successfully!", "deleted": len(ids)}


def history(call: Call) -> Any:
    """The memory's versions, oldest first, as mem0's events: ADD, then an UPDATE per new
    version, and DELETE once it was deleted."""
    owner, memory, chain = _memory_chain(call)
    mid = memory_id(owner, chain[0].id)
    entries = []
    previous: Fact | None = None
    for version in chain:
        scope = call.scope_of(memory, version)
        entries.append(
            _event(
                mid,
                version.id,
                "ADD" if previous is None else "UPDATE",
                None if previous is None else previous.text,
                version.text,
                version.recorded_at,
                scope,
                owner,
            )
        )
        previous = version
    head = chain[-1]
    if head.retracted_at is not None:
        entries.append(
            _event(
                mid,
                head.id,
                "DELETE",
                head.text,
                None,
                head.retracted_at,
                call.scope_of(memory, head),
                owner,
            )
        )
    return entries


# ------------------------------------------------------------------------------ owners


@dataclass(frozen=True)
class Owner:
    """Whose memories: ``kind`` (user, agent, app or run) and the id."""

    kind: str
    value: str

    @classmethod
    def of(cls, ids: Mapping[str, Any], verb: str) -> Owner:
        """The owner the ids name: the first of SCOPE_IDS given an exact value."""
        for name in SCOPE_IDS:
            value = ids.get(name)
            if isinstance(value, str) and value != "*":
                return cls(name.removesuffix("_id"), value)
        raise _invalid(
            f"{verb} needs a user_id (or an agent_id, app_id or run_id) with an exact value: "
            "each owner's memories are kept apart"
        )

    @property
    def segment(self) -> str:
        """The owner's part of its namespace's name and of its memories' ids."""
        if _PLAIN.match(self.value):
            return f"{self.kind}.{self.value}"
        digest = hashlib.sha256(self.value.encode()).hexdigest()[:24]
        return f"{self.kind}.{digest}.h"


def owner_namespace(base: str, owner: Owner) -> str:
    """The namespace of ``owner``'s memories beside ``base`` (the namespace the key admits):
    ``<base>.mem0.<kind>.<id>``, the id as a digest when it is not plain lower-case text or
    the name would be too long."""
    name = f"{base}.mem0.{owner.segment}"
    if len(name) <= _NAME_LIMIT:
        return name
    return f"mem0.{hashlib.sha256(name.encode()).hexdigest()[:32]}"


def memory_id(owner: Owner, fact_id: str) -> str:
    """The id mem0 clients see: the owner's segment, then the memory's first version's id."""
    return f"{owner.segment}.{fact_id}"


def _parse_memory_id(text: str) -> tuple[str, str]:
    """(the owner segment, the fact id) of an id from ``memory_id``; 400 for another."""
    segment, _, fact_id = text.rpartition(".")
    if not _OWNER.match(segment) or not fact_id:
        raise _invalid(
            f"{text!r} is not a memory id of this API (ids look like user.alice.<fact id>)"
        )
    return segment, fact_id


def _memory_chain(call: Call, *, live: bool = False) -> tuple[Owner, Memory, list[Fact]]:
    """The owner, its namespace and the versions (oldest first) of the path's memory id; 404
    for one that does not exist (with ``live``, also for one deleted)."""
    text = call.path["memory_id"]
    segment, fact_id = _parse_memory_id(text)
    kind, _, value = segment.partition(".")
    owner = Owner(kind, value) if _PLAIN.match(value) else _SegmentOwner(kind, value, segment)
    memory = call.owner_memory(owner, create=False)
    chain = [] if memory is None else _chain(memory, fact_id)
    if memory is None or not chain:
        raise Denied(404, Code.NOT_FOUND, f"no memory with id {text!r}")
    if live and memory.get(chain[-1].id) is None:
        raise Denied(404, Code.NOT_FOUND, f"memory {text!r} was deleted")
    return owner, memory, chain


@dataclass(frozen=True)
class _SegmentOwner(Owner):
    """An owner known by its segment only (from a memory id: the id may be a digest)."""

    known_segment: str = ""

    @property
    def segment(self) -> str:
        return self.known_segment


def _chain(memory: Memory, fact_id: str) -> list[Fact]:
    """Every version of the memory ``fact_id`` is a version of, oldest first, whatever their
    state (forgotten ones too), at most MAX_VERSIONS each way."""
    found = memory.known_now([fact_id]).get(fact_id)
    if found is None:
        return []
    chain = [found]
    while chain[0].supersedes_id is not None and len(chain) < MAX_VERSIONS:
        older = memory.known_now([chain[0].supersedes_id]).get(chain[0].supersedes_id)
        if older is None:
            break
        chain.insert(0, older)
    while chain[-1].superseded_by is not None and len(chain) < 2 * MAX_VERSIONS:
        newer = memory.known_now([chain[-1].superseded_by]).get(chain[-1].superseded_by)
        if newer is None:
            break
        chain.append(newer)
    return chain


def _first_version(memory: Memory, fact_id: str) -> str:
    found = memory.known_now([fact_id]).get(fact_id)
    return fact_id if found is None else _first_versions(memory, [found])[fact_id].id


def _first_versions(memory: Memory, facts: Iterable[Fact]) -> dict[str, Fact]:
    """Each fact's first version (itself when it supersedes none), by fact id: one read per
    step back, for all the facts at once."""
    firsts = {f.id: f for f in facts}
    pending = {i: f for i, f in firsts.items() if f.supersedes_id is not None}
    for _ in range(MAX_VERSIONS):
        if not pending:
            break
        older = memory.known_now({f.supersedes_id for f in pending.values() if f.supersedes_id})
        step = {}
        for fact_id, fact in pending.items():
            previous = older.get(fact.supersedes_id or "")
            if previous is not None:
                firsts[fact_id] = previous
                if previous.supersedes_id is not None:
                    step[fact_id] = previous
        pending = step
    return firsts


# ------------------------------------------------------------------------------ filters


@dataclass(frozen=True)
class Where:
    """What a search, listing or delete_all keeps: the owner, and the conditions on the other
    ids, the metadata, the categories and the creation time that narrow its memories."""

    owner: Owner
    ids: dict[str, Any]
    metadata: dict[str, Any]
    categories: frozenset[str] | None = None
    created: tuple[tuple[str, float], ...] = ()

    @property
    def narrows(self) -> bool:
        return bool(self.ids or self.metadata or self.categories or self.created)

    @classmethod
    def parse(cls, body: Mapping[str, Any]) -> Where:
        """The filters of a body: ``filters`` (an object of conditions, or ``{"AND": […]}``),
        with its ``categories`` and ``metadata`` beside it. 400 for an operator graphmem does
        not apply (``OR``, ``NOT``, a condition on an unknown field)."""
        conditions: dict[str, Any] = {}
        for part in _conjuncts(_mapping(body.get("filters"), "filters")):
            for name, value in part.items():
                if name in conditions and conditions[name] != value:
                    raise _invalid(f"filters give {name} twice, with different values")
                conditions[name] = value
        ids = {name: conditions.pop(name) for name in SCOPE_IDS if name in conditions}
        for name, value in ids.items():
            if not (isinstance(value, str) or _is_in(value)):
                raise _invalid(f"filters.{name} must be an id, '*' or {{\"in\": [ids]}}")
        owner = Owner.of(ids, "this request")
        rest = {k: v for k, v in ids.items() if k != f"{owner.kind}_id"}
        metadata = {
            **_mapping(conditions.pop("metadata", None), "filters.metadata"),
            **_mapping(body.get("metadata"), "metadata"),
        }
        categories = _categories(conditions.pop("categories", body.get("categories")))
        created = _created(conditions.pop("created_at", None), body)
        if conditions:
            raise _invalid(
                f"graphmem's mem0 API does not filter on {', '.join(sorted(conditions))}: it "
                "filters on user_id, agent_id, app_id, run_id, metadata, categories and "
                "created_at, joined by AND"
            )
        return cls(owner, rest, metadata, categories, created)

    def matches(self, shown: Mapping[str, Any]) -> bool:
        """Whether a memory (as ``_shown`` answers it) meets every condition."""
        for name, wanted in self.ids.items():
            value = shown.get(name)
            if wanted == "*":
                if value is None:
                    return False
            elif _is_in(wanted):
                if value not in wanted["in"]:
                    return False
            elif value != wanted:
                return False
        metadata = shown.get("metadata") or {}
        if any(metadata.get(k) != v for k, v in self.metadata.items()):
            return False
        if self.categories is not None and not self.categories & set(shown["categories"]):
            return False
        if not self.created:
            return True
        created = datetime.fromisoformat(shown["created_at"]).timestamp()
        return all(_COMPARED[op](created, bound) for op, bound in self.created)


def _conjuncts(filters: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The objects ``filters`` joins by AND (itself, or those under its ``AND``, nested)."""
    for logical in ("OR", "NOT"):
        if logical in filters:
            raise _invalid(
                f"graphmem's mem0 API does not apply {logical} filters: each owner's "
                "memories are kept apart, so a request reads one owner's, narrowed by AND"
            )
    if "AND" not in filters:
        return [filters]
    parts = filters["AND"]
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise _invalid("filters.AND must be a list of objects")
    rest = {k: v for k, v in filters.items() if k != "AND"}
    return [rest, *(c for p in parts for c in _conjuncts(p))]


def _is_in(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and value.keys() == {"in"}
        and isinstance(value["in"], list)
        and all(isinstance(v, str) for v in value["in"])
    )


def _categories(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, dict) and len(value) == 1:
        [(op, given)] = value.items()
        if op in ("in", "contains"):
            value = given
    listed = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) for v in listed):
        raise _invalid('categories must be a category, a list of them or {"in": [...]}')
    return frozenset(listed)


def _created(value: Any, body: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    """The bounds on a memory's creation time: ``created_at``'s operators, ``start_date`` and
    ``end_date`` (a date alone bounds by its whole day, UTC)."""
    bounds: dict[str, Any] = dict(_mapping(value, "filters.created_at"))
    if body.get("start_date") is not None:
        bounds["gte"] = body["start_date"]
    if body.get("end_date") is not None:
        bounds["lte"] = body["end_date"]
    out = []
    for op, bound in bounds.items():
        if op not in ("gte", "gt", "lte", "lt") or not isinstance(bound, str):
            raise _invalid("created_at takes gte, gt, lte and lt, each an ISO date or time")
        try:
            moment = datetime.fromisoformat(bound.replace("Z", "+00:00"))
        except ValueError:
            raise _invalid(f"created_at.{op} is not an ISO date or time: {bound!r}") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        if op == "lte" and len(bound) == 10:  # a date: through its end
            moment += timedelta(days=1) - timedelta(microseconds=1)
        out.append((op, moment.timestamp()))
    return tuple(out)


_COMPARED: Final[Mapping[str, Callable[[float, float], bool]]] = {
    "gte": operator.ge,
    "gt": operator.gt,
    "lte": operator.le,
    "lt": operator.lt,
}


def _scan(call: Call, memory: Memory, where: Where) -> list[tuple[Fact, dict[str, Any]]]:
    """The owner's live facts the filters match, oldest first, with their mem0 shape: at most
    MAX_SCANNED facts read."""
    out: list[tuple[Fact, dict[str, Any]]] = []
    after, read = None, 0
    while read < MAX_SCANNED:
        page = memory.facts(first=min(MAX_LIMIT, MAX_SCANNED - read), after=after)
        facts = [f for _, f in page.items]
        firsts = _first_versions(memory, facts)
        for fact in facts:
            shown = _shown(call, memory, where.owner, fact, firsts[fact.id])
            if where.matches(shown):
                out.append((fact, shown))
        read += len(page.items)
        if not page.has_more or not page.items:
            break
        after = page.items[-1][0]
    return out


# ------------------------------------------------------------------------------ shapes


def _shown(call: Call, memory: Memory, owner: Owner, fact: Fact, first: Fact) -> dict[str, Any]:
    """A fact as mem0 answers a memory: its id (its first version's), text, ids, metadata,
    categories and times."""
    scope = call.scope_of(memory, fact)
    return {
        "id": memory_id(owner, first.id),
        "memory": fact.text,
        "hash": hashlib.md5(fact.text.encode(), usedforsecurity=False).hexdigest(),
        **_ids_of(scope, owner),
        "metadata": scope.get("metadata"),
        "categories": [fact.category],
        "created_at": to_iso(first.recorded_at.timestamp()),
        "updated_at": to_iso(fact.recorded_at.timestamp()),
        "expiration_date": _date_of(fact.expires_at),
    }


def _event(
    mid: str,
    version_id: str,
    event: str,
    old: str | None,
    new: str | None,
    at: datetime,
    scope: Mapping[str, Any],
    owner: Owner,
) -> dict[str, Any]:
    return {
        "id": version_id,
        "memory_id": mid,
        "input": [],
        "old_memory": old,
        "new_memory": new,
        "event": event,
        **_ids_of(scope, owner),
        "metadata": scope.get("metadata"),
        "created_at": to_iso(at.timestamp()),
        "updated_at": to_iso(at.timestamp()),
    }


def _ids_of(scope: Mapping[str, Any], owner: Owner) -> dict[str, Any]:
    """A memory's ``user_id``, ``agent_id``, ``app_id`` and ``run_id``: as its add recorded
    them, the owner's as the request names it."""
    ids = {name: scope.get(name) for name in SCOPE_IDS}
    if not isinstance(owner, _SegmentOwner):
        ids[f"{owner.kind}_id"] = owner.value
    return ids


def _date_of(expires: datetime | None) -> str | None:
    """An expiry as mem0's ``expiration_date``: the last day the memory is visible."""
    if expires is None:
        return None
    return (expires - timedelta(microseconds=1)).date().isoformat()


# ------------------------------------------------------------------------------ input


def _messages(value: Any) -> list[dict[str, str]]:
    """mem0's messages: a list of ``{role, content}`` with text content (a single message or a
    text is made a list by mem0's client itself)."""
    if not isinstance(value, list) or not value:
        raise _invalid("messages must be a non-empty list of {role, content} objects")
    if len(value) > MAX_CAPTURE_MESSAGES:
        raise _invalid(f"at most {MAX_CAPTURE_MESSAGES} messages per add, got {len(value)}")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            raise _invalid(f"messages[{i}] must be an object with text content")
        role = m.get("role")
        if role not in ("user", "assistant", "system"):
            raise _invalid(f"messages[{i}].role must be user, assistant or system, not {role!r}")
        out.append({"role": role, "content": m["content"]})
    return out


def _ids(given: Mapping[str, Any]) -> dict[str, str]:
    """The scope ids an add names (each text), every other key refused."""
    unknown = set(given) - set(SCOPE_IDS)
    if unknown:
        raise _invalid(f"an add's filters name only {', '.join(SCOPE_IDS)}")
    out = {}
    for name, value in given.items():
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip() or value == "*":
            raise _invalid(f"{name} must be a non-empty id")
        out[name] = value
    return out


def _present(body: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    return {name: body[name] for name in names if body.get(name) is not None}


def _metadata(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _invalid("metadata must be a JSON object")
    return value


def _expiration(value: Any) -> float | None:
    """``expiration_date`` (``YYYY-MM-DD``, visible through that day) as an expiry time."""
    if value is None:
        return None
    try:
        day = date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        day = None
    if day is None:
        raise _invalid(f"expiration_date must be a date, YYYY-MM-DD, not {value!r}")
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() + 86_400


def _mapping(value: Any, name: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _invalid(f"{name} must be a JSON object")
    return value


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _invalid(f"{name} must be a whole number from {low} to {high:,}")
    return value


def _only(body: Mapping[str, Any], allowed: Iterable[str], verb: str) -> None:
    unknown = set(body) - set(allowed) - IGNORED
    if unknown:
        raise _invalid(
            f"graphmem's mem0 API does not offer {', '.join(sorted(unknown))} on {verb} "
            "(docs/clients.md#mem0)"
        )


def _invalid(message: str) -> Denied:
    return Denied(400, Code.INVALID_INPUT, message)


def _as_bearer(authorization: str | None) -> str | None:
    """mem0's ``Token <key>`` as the gate reads a key (``Bearer <key>``); others unchanged."""
    if authorization is None:
        return None
    scheme, _, token = authorization.partition(" ")
    return f"Bearer {token}" if scheme.lower() == "token" else authorization


# ------------------------------------------------------------------------------ cost


def _add_cost(body: Mapping[str, Any], query: Mapping[str, str]) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 1
    return capture_points(m.get("content") if isinstance(m, dict) else m for m in messages)


def _scan_cost(body: Mapping[str, Any], query: Mapping[str, str]) -> int:
    return MAX_SCANNED


def _status(code: str) -> int:
    use = CODES.get(code)
    if code == Code.NOT_FOUND:
        return 404
    if code == Code.CONFLICT:
        return 409
    if code == Code.TIMEOUT:
        return 504
    return use.http_status if use is not None and use.http_status else 500


def _error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """mem0's error shape: ``detail`` (what its client raises with), ``error`` as its API's
    reference writes it, and graphmem's ``code``."""
    return JSONResponse(
        {"detail": message, "error": message, "code": str(code)},
        status_code=status,
        headers=dict(headers) if headers else None,
    )
