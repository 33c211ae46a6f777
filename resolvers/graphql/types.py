"""The GraphQL object, input and enum types, and how graphmem values become them.

A ``Fact`` carries the time scope of the top-level field that produced it (``scope``), so every
nested field (``links``, ``supersedes``, ``history``…) reads memory at that same moment. Its
``viewId`` (a ``Link``'s and an ``Episode``'s too) names the object and that scope: the key a
client cache normalises by, so that a view of the past is never overwritten by today's.
"""

import base64
import binascii
from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum, EnumMeta
from typing import Annotated, Any, ClassVar, Final, NewType

import strawberry
from strawberry.types import Info

import graphmem
from graphmem import graph, profiles
from graphmem import recall as recalls
from graphmem.decay import DECAY_CLASSES
from graphmem.errors import CODES, Code
from graphmem.limits import MAX_LIMIT
from graphmem.maintenance import REGISTRY
from graphmem.models import LINK_ORIGINS, LINK_TYPE_MEANINGS
from graphmem.tagging import CATEGORY_LIST
from graphmem.temporal import ACCEPTED_TIMES, parse_time

from ..context import Context, Scope

# ------------------------------------------------------------------------------------ scalars


def _parse_datetime(value: Any) -> datetime:
    seconds = parse_time(value, field="DateTime")
    assert seconds is not None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (ValueError, OverflowError, OSError):  # epoch seconds beyond the years 1-9999
        raise graphmem.InvalidInput(
            f"{value!r} is outside the years a time can name (1 to 9999)", field="DateTime"
        ) from None


#: Times are UTC datetimes, as the engine returns and accepts them; an output time becomes text
#: only when a query asks for it.
def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")  # always UTC: the engine's times are


DateTime = NewType("DateTime", datetime)
JSON = NewType("JSON", object)

#: The custom scalars, for the schema's ``scalar_map``.
SCALARS: dict[object, Any] = {
    DateTime: strawberry.scalar(
        name="DateTime",
        description="An instant. Output: ISO-8601 text in UTC (`2024-05-01T12:00:00Z`). Input: "
        f"{ACCEPTED_TIMES}; a year or a month means its first instant, a date its midnight.",
        serialize=_iso,
        parse_value=_parse_datetime,
    ),
    JSON: strawberry.scalar(
        name="JSON", description="Any JSON value.", serialize=lambda v: v, parse_value=lambda v: v
    ),
}


# ------------------------------------------------------------------------------------ enums


def _link_type(name: str) -> Any:
    """A value of the ``LinkType`` enum, described as graphmem describes that type."""
    return strawberry.enum_value(name, description=LINK_TYPE_MEANINGS[name])


# The core's link types (graphmem.models.LinkType), which a test holds this enum to.
@strawberry.enum(description="The kind of a link. Every link reads `source -[TYPE]-> target`.")
class LinkType(Enum):
    SUPERSEDES = _link_type("SUPERSEDES")
    CAUSED_BY = _link_type("CAUSED_BY")
    PART_OF = _link_type("PART_OF")
    RELATED_TO = _link_type("RELATED_TO")
    DEPENDS_ON = _link_type("DEPENDS_ON")


#: Each link type by its name, which is its value (faster than the Enum's lookup by value).
_LINK_TYPES: Final = {t.name: t for t in LinkType}


@strawberry.enum(description="Which links of a fact to follow.")
class Direction(Enum):
    OUT = strawberry.enum_value("OUT", description="Links whose source is the fact.")
    IN = strawberry.enum_value("IN", description="Links whose target is the fact.")
    BOTH = strawberry.enum_value("BOTH", description="Both.")


@strawberry.enum(description="How search ranks facts.")
class SearchMode(Enum):
    HYBRID = strawberry.enum_value("hybrid", description="Keywords and meaning, fused (default).")
    FTS = strawberry.enum_value("fts", description="Keywords only (SQLite FTS5, bm25).")
    VECTOR = strawberry.enum_value("vector", description="Meaning only (embedding cosine).")


@strawberry.enum(
    description="What reorders the best candidates of a search's fused order "
    "(docs/search.md#the-rerank-stage)."
)
class Rerank(Enum):
    NONE = strawberry.enum_value("none", description="Nothing: the fused order stands.")
    FEATURES = strawberry.enum_value(
        "features", description="A small model over the scores the search has (no request)."
    )
    HTTP = strawberry.enum_value(
        "http", description="The server's reranker service (`rerank_url`): one request."
    )
    LLM = strawberry.enum_value("llm", description="The server's chat model: one request.")


@strawberry.enum(description="What a write did.")
class StoreAction(Enum):
    ADD = strawberry.enum_value("ADD", description="Stored as a new fact.")
    UPDATE = strawberry.enum_value(
        "UPDATE", description="Stored as the new version of the facts in `targetIds` (superseded)."
    )
    DELETE = strawberry.enum_value("DELETE", description="Retracted the facts in `targetIds`.")
    NOOP = strawberry.enum_value(
        "NOOP", description="Nothing written: it repeats the fact in `targetIds`."
    )


@strawberry.enum(description="What capture did with a turn, a sentence or a message.")
class CaptureAction(Enum):
    ADD = strawberry.enum_value("ADD", description="Stored as a new turn or fact.")
    UPDATE = strawberry.enum_value(
        "UPDATE", description="Stored as the new version of the facts in `targetIds`."
    )
    DELETE = strawberry.enum_value("DELETE", description="Retracted the facts in `targetIds`.")
    NOOP = strawberry.enum_value(
        "NOOP", description="Nothing written: it repeats the fact in `targetIds`."
    )
    SKIP = strawberry.enum_value(
        "SKIP",
        description="Not stored: a message holding a secret, of a role not captured or without "
        "text; with `keep: FACTS`, also one too short or long, or with nothing memorable.",
    )


@strawberry.enum(
    description="What `captureMessages` keeps of a conversation: its turns (each message as "
    "it was said) with facts drawn on top, or the facts alone."
)
class CaptureKeep(Enum):
    CONVERSATION = strawberry.enum_value(
        "conversation",
        description="Every user and assistant message without a secret is kept as a turn of "
        "the episode (a long one in parts), and the memorable sentences are drawn from it as "
        "facts, each linked PART_OF its turn (origin `capture`).",
    )
    FACTS = strawberry.enum_value(
        "facts",
        description="Only the memorable sentences, as facts; the rest of each message is not kept.",
    )


@strawberry.enum(
    description="What a stored fact is: a turn of a conversation kept as it was said, or a fact."
)
class FactKind(Enum):
    FACT = strawberry.enum_value(
        "fact",
        description="A fact: stored, synced from a note, or drawn by `captureMessages` from a "
        "sentence of a message.",
    )
    TURN = strawberry.enum_value(
        "turn",
        description="A message (or a part of a long one) `captureMessages` kept as it was said, "
        "its `source` `turn:<role>`: an event of its episode, never deduplicated nor "
        "superseded by other facts.",
    )


@strawberry.enum(description="How `recall` writes each fact's line.")
class RecallFormat(Enum):
    FULL = strawberry.enum_value(
        "full", description="`[source/category] text`, e.g. `[keyword/preference] …`."
    )
    SHORT = strawberry.enum_value("short", description="`category: text`.")
    MINIMAL = strawberry.enum_value("minimal", description="The text alone.")


@strawberry.enum(description="How a recalled fact was found.")
class RecallSource(Enum):
    PINNED = strawberry.enum_value("pinned", description="Pinned: it leads every block.")
    KEYWORD = strawberry.enum_value(
        "keyword", description="By keywords (full-text search) or by the entity the prompt names."
    )
    VECTOR = strawberry.enum_value("vector", description="By meaning alone (vector similarity).")
    GRAPH = strawberry.enum_value("graph", description="Through a link from another fact.")


def _code(code: Code) -> Any:
    """The enum value of an error code, described as the registry describes it."""
    return strawberry.enum_value(code.value, description=_sentence(CODES[code].meaning))


def _sentence(text: str) -> str:
    """``text`` as a sentence: capitalised, with a full stop."""
    return text[0].upper() + text[1:].rstrip(".") + "."


@strawberry.enum(
    description="The code of an expected error that a mutation returns as data (every code: "
    "docs/graphql.md)."
)
class ErrorCode(Enum):
    INVALID_INPUT = _code(Code.INVALID_INPUT)
    NOT_FOUND = _code(Code.NOT_FOUND)
    CONFLICT = _code(Code.CONFLICT)
    FORBIDDEN = _code(Code.FORBIDDEN)


@strawberry.enum(description="The kind of a change to memory.")
class ChangeKind(Enum):
    FACT_STORED = strawberry.enum_value("FACT_STORED", description="A new fact (or version).")
    FACT_SUPERSEDED = strawberry.enum_value(
        "FACT_SUPERSEDED", description="A fact was replaced by a new version."
    )
    FACT_FORGOTTEN = strawberry.enum_value("FACT_FORGOTTEN", description="A fact was retracted.")
    FACT_PURGED = strawberry.enum_value(
        "FACT_PURGED", description="A fact was deleted for good (purge or prune)."
    )
    LINK_MADE = strawberry.enum_value("LINK_MADE", description="A link was made or re-weighted.")
    LINK_REMOVED = strawberry.enum_value("LINK_REMOVED", description="A link was retracted.")


# ------------------------------------------------------------------------------------ views


def view_id_of(item_id: str, scope: Scope) -> strawberry.ID:
    """The id of one view of a fact, link or episode: its id and the time scope it was read
    at, each axis as the instant it was resolved to (UTC, so "2024" and "2024-01-01T00:00:00Z"
    are one scope) or ``now``: ``<id>@<asOf>/<knownAt>``. Every read at the present shares
    ``<id>@now/now``, the view that writes' answers update."""
    as_of, known_at = scope
    return strawberry.ID(f"{item_id}@{_instant(as_of)}/{_instant(known_at)}")


def _instant(moment: datetime | None) -> str:
    return "now" if moment is None else _iso(moment)


def _view_id(kind: str) -> Any:
    """The ``viewId`` field of a fact, link or episode (``kind``) read at ``scope``."""

    def view_id(self: Any) -> strawberry.ID:
        return view_id_of(self.id, self.scope)

    return strawberry.field(resolver=view_id, description=_view_id_description(kind))


def _view_id_description(kind: str) -> str:
    return (
        f"This view of the {kind}: its id and the time scope it was read at (`asOf` and "
        "`knownAt`, each the instant it means in UTC, or `now`), as `<id>@<asOf>/<knownAt>`. "
        "Reads at the same scope give the same viewId, reads at another scope another: the key "
        f"for a client cache that normalises {kind}s (docs/graphql.md#caching)."
    )


# ------------------------------------------------------------------------------------ objects


@strawberry.type(description="An expected failure, returned as data in a mutation's payload.")
class UserError:
    code: ErrorCode = strawberry.field(description="What went wrong, as a stable code.")
    message: str = strawberry.field(description="What went wrong, for a person to read.")
    field: str | None = strawberry.field(
        default=None, description="The input field at fault, when one is."
    )

    @classmethod
    def of(cls, error: graphmem.GraphmemError) -> "UserError":
        return cls(
            code=ErrorCode[error.code], message=error.message, field=getattr(error, "field", None)
        )

    @staticmethod
    def carries(error: graphmem.GraphmemError) -> bool:
        """Whether a mutation returns ``error`` as data rather than as a GraphQL error."""
        use = CODES.get(error.code)
        return use is not None and use.payload


@strawberry.type(description="A typed, directed, bi-temporal link between two facts.")
class Link:
    id: strawberry.ID = strawberry.field(description="The link's id.")
    source_id: strawberry.ID = strawberry.field(description="The fact the link starts from.")
    target_id: strawberry.ID = strawberry.field(description="The fact the link points to.")
    type: LinkType = strawberry.field(description="The kind of link.")
    strength: float = strawberry.field(description="How strong the link is, 0 to 1.")
    origin: str = strawberry.field(
        description="Who made it. "
        + " ".join(f"`{origin}`: {meaning}." for origin, meaning in LINK_ORIGINS.items())
    )
    recorded_at: DateTime = strawberry.field(description="When memory learnt of the link.")
    valid_from: DateTime = strawberry.field(description="When the link started to hold.")
    valid_until: DateTime | None = strawberry.field(description="When it stopped holding.")
    retracted_at: DateTime | None = strawberry.field(description="When it was unlinked.")
    metadata: JSON = strawberry.field(description="Free-form data given when linking.")
    scope: strawberry.Private[Scope]

    @classmethod
    def of(cls, link: graphmem.Link, scope: Scope) -> "Link":
        return _LinkView(link, scope)

    view_id: strawberry.ID = _view_id("link")

    @strawberry.field(description="The source fact, as seen at the same time scope.")
    async def source(self, info: Info[Context, None]) -> "Fact | None":
        return await _fact(info, self.source_id, self.scope)

    @strawberry.field(description="The target fact, as seen at the same time scope.")
    async def target(self, info: Info[Context, None]) -> "Fact | None":
        return await _fact(info, self.target_id, self.scope)


@strawberry.type(description="A link of a fact, with the fact at its other end.")
class LinkEdge:
    cursor: str = strawberry.field(description="Pass as `after` to continue after this edge.")
    link: Link = strawberry.field(description="The link.")
    outgoing: bool = strawberry.field(description="True when the fact is the link's source.")
    neighbour_id: strawberry.ID = strawberry.field(description="The fact at the other end.")
    scope: strawberry.Private[Scope]

    @strawberry.field(
        description="The fact at the other end, at the same time scope (superseded versions "
        "included; null if it was forgotten or not yet recorded then)."
    )
    async def neighbour(self, info: Info[Context, None]) -> "Fact | None":
        return await _fact(info, self.neighbour_id, self.scope)


@strawberry.type(description="Where a page ends and whether another follows.")
class PageInfo:
    has_next_page: bool = strawberry.field(description="Whether more items follow this page.")
    end_cursor: str | None = strawberry.field(description="The cursor of the page's last item.")


@strawberry.type(description="A page of a fact's links, strongest first.")
class LinkConnection:
    edges: list[LinkEdge] = strawberry.field(description="The links of this page.")
    page_info: PageInfo = strawberry.field(description="How to fetch the next page.")


@strawberry.type(
    description="A fact: one piece of memory (a preference, a decision, an event…), bi-temporal: "
    "valid from `validFrom` until `validUntil`, known to memory from `recordedAt` until "
    "`retractedAt`."
)
class Fact:
    id: strawberry.ID = strawberry.field(description="The fact's id.")
    text: str = strawberry.field(description="What the fact says.")
    kind: FactKind = strawberry.field(
        description="TURN for a message `captureMessages` kept as it was said (`source` "
        "`turn:<role>`), else FACT."
    )
    category: str = strawberry.field(description=f"{CATEGORY_LIST}.")
    importance: float = strawberry.field(description="How much it matters, 0 to 1.")
    entity: str | None = strawberry.field(description="What the fact is about.")
    key: str | None = strawberry.field(description="The attribute of the entity it states.")
    value: str | None = strawberry.field(description="The attribute's value.")
    source: str | None = strawberry.field(description="Where the fact came from.")
    tags: list[str] = strawberry.field(description="Tags (given, or found in the text).")
    summary: str | None = strawberry.field(description="A short form of a long text.")
    why: str | None = strawberry.field(description="Why the fact was stored or changed.")
    context: str | None = strawberry.field(description="Surrounding context of the fact.")
    decay_class: str = strawberry.field(
        description=f"How fast it fades: {', '.join(DECAY_CLASSES)} (docs/concepts.md#decay)."
    )
    expires_at: DateTime | None = strawberry.field(description="When it expires, if it does.")
    confidence: float = strawberry.field(description="How sure memory is of it, 0 to 1.")
    last_confirmed_at: DateTime | None = strawberry.field(
        description="When it was last confirmed (refreshes its expiry)."
    )
    access_count: int = strawberry.field(description="How often searches returned it.")
    last_accessed_at: DateTime | None = strawberry.field(description="When it was last returned.")
    source_date: DateTime | None = strawberry.field(description="When it was stated, if given.")
    valid_from: DateTime = strawberry.field(description="When it became true.")
    valid_until: DateTime | None = strawberry.field(
        description="When it stopped being true (set when a newer version supersedes it)."
    )
    valid_until_recorded_at: DateTime | None = strawberry.field(
        description="When memory learnt that it stopped being true."
    )
    recorded_at: DateTime = strawberry.field(description="When memory recorded it.")
    retracted_at: DateTime | None = strawberry.field(description="When it was forgotten.")
    superseded_by_id: strawberry.ID | None = strawberry.field(
        description="The id of the version that replaced it."
    )
    supersedes_id: strawberry.ID | None = strawberry.field(
        description="The id of the version it replaced."
    )
    episode_id: str | None = strawberry.field(
        description="The id of the episode (conversation session, document) it came from."
    )
    pinned_at: DateTime | None = strawberry.field(
        description="When it was pinned (`pinFact`: it leads every recall block), or null."
    )
    cold_at: DateTime | None = strawberry.field(
        description="When it was made cold (`setCold`: recall leaves it out), or null."
    )
    stated_time: "StatedTime | None" = strawberry.field(
        description='The time its text states ("yesterday", "in 2019", "from 2006 to 2009"), '
        "resolved against its own date when it was written; null when it states none. Not "
        "valid time: it ranks facts for a query's time words and never changes what a read sees."
    )
    scope: strawberry.Private[Scope]

    @classmethod
    def of(cls, fact: graphmem.Fact, scope: Scope) -> "Fact":
        return _FactView(fact, scope)

    view_id: strawberry.ID = _view_id("fact")

    @strawberry.field(description="The episode it came from, if any.")
    async def episode(self, info: Info[Context, None]) -> "Episode | None":
        if self.episode_id is None:
            return None
        found = await info.context.run(info.context.memory.episode, self.episode_id)
        return None if found is None else Episode.of(found, self.scope)

    @strawberry.field(
        description="The fact's links visible at the time scope, strongest first, a page at a "
        "time; each edge carries the fact at its other end."
    )
    async def links(
        self,
        info: Info[Context, None],
        direction: Annotated[
            Direction, strawberry.argument(description="Which links: OUT, IN or BOTH.")
        ] = Direction.BOTH,
        types: Annotated[
            list[LinkType] | None,
            strawberry.argument(
                description="Only these link types (default: all, SUPERSEDES too)."
            ),
        ] = None,
        first: Annotated[
            int, strawberry.argument(description=f"Page size (0 to {MAX_LIMIT:,}).")
        ] = 50,
        after: Annotated[
            str | None,
            strawberry.argument(description="The `cursor` of the edge to continue after."),
        ] = None,
    ) -> LinkConnection:
        kinds = None if types is None else tuple(t.name for t in types)
        position = None if after is None else decode_link_cursor(after)
        items, more = await info.context.links(
            self.id, self.scope, direction.name, kinds, first, position
        )
        edges = [
            LinkEdge(
                cursor=encode_cursor("link", f"{pos.strength!r}:{pos.seq}"),
                link=Link.of(link, self.scope),
                outgoing=link.source_id == self.id,
                neighbour_id=strawberry.ID(
                    link.target_id if link.source_id == self.id else link.source_id
                ),
                scope=self.scope,
            )
            for pos, link in items
        ]
        return LinkConnection(
            edges=edges,
            page_info=PageInfo(has_next_page=more, end_cursor=edges[-1].cursor if edges else None),
        )

    @strawberry.field(description="The version this fact replaced, if any.")
    async def supersedes(self, info: Info[Context, None]) -> "Fact | None":
        if self.supersedes_id is None:
            return None
        return await _fact(info, self.supersedes_id, self.scope)

    @strawberry.field(description="The version that replaced this fact, if memory knew of it then.")
    async def superseded_by(self, info: Info[Context, None]) -> "Fact | None":
        if self.superseded_by_id is None:
            return None
        return await _fact(info, self.superseded_by_id, self.scope)

    @strawberry.field(
        description="Every version of this fact's supersession chain visible at the time scope, "
        "oldest first."
    )
    async def history(self, info: Info[Context, None]) -> "list[Fact]":
        versions = await info.context.history(self.id, self.scope)
        return [Fact.of(version, self.scope) for version in versions]

    @strawberry.field(
        description="This fact as memory knows it now, whatever the time scope of the read and "
        "whatever its state now (forgotten, replaced, expired): at a past `knownAt` every field "
        "reads as memory knew it then, so an end, a successor or a forgetting recorded later "
        "shows here only (`knownNow { retractedAt supersededById validUntil }`). Its own nested "
        "fields read at the present. Null only once the fact has been purged."
    )
    async def known_now(self, info: Info[Context, None]) -> "Fact | None":
        found = await info.context.known_now(self.id)
        return None if found is None else Fact.of(found, NOW)


@strawberry.type(
    description="A markdown file synced as a document (`graphmem sync`): what it was at its last "
    "sync. Its chunks are the facts of the episode whose id is its path, each with `source` = "
    "`path:first-last` line; `documentLines` reads those lines back."
)
class Document:
    path: str = strawberry.field(description="The file's absolute path (the episode's id).")
    hash: str = strawberry.field(description="SHA-256 of its content at the last sync.")
    mtime: DateTime = strawberry.field(description="Its modification time at the last sync.")
    size: int = strawberry.field(description="Its size in bytes at the last sync.")
    chunks: int = strawberry.field(description="How many chunks the last sync wrote.")
    synced_at: DateTime = strawberry.field(description="When it was last written to memory.")
    imported: bool = strawberry.field(
        description="Whether the record came with an import (not read back until a sync on "
        "this machine finds the file)."
    )

    @classmethod
    def of(cls, document: graphmem.DocumentFile) -> "Document":
        return cls(
            path=document.path,
            hash=document.hash,
            mtime=_at(document.mtime),
            size=document.size,
            chunks=document.chunks,
            synced_at=_at(document.synced_at),
            imported=document.imported,
        )


@strawberry.type(
    description="The unit facts came from: a conversation session or a document, recorded once."
)
class Episode:
    id: str = strawberry.field(description="The id the writer gave it.")
    kind: str = strawberry.field(description="conversation, document or other.")
    source: str | None = strawberry.field(description="Where it came from.")
    time: DateTime = strawberry.field(description="When it happened or was written.")
    metadata: JSON = strawberry.field(description="The JSON object kept with it.")
    recorded_at: DateTime | None = strawberry.field(description="When memory recorded it.")
    scope: strawberry.Private[Scope]

    @classmethod
    def of(cls, episode: graphmem.Episode, scope: Scope) -> "Episode":
        return cls(
            id=episode.id,
            kind=episode.kind,
            source=episode.source,
            time=_time(episode.time),
            metadata=JSON(episode.metadata),
            recorded_at=_maybe_time(episode.recorded_at),
            scope=scope,
        )

    view_id: str = _view_id("episode")

    @strawberry.field(
        description="Its facts visible at the time scope (replaced versions included), in the "
        "order they were written."
    )
    async def facts(self, info: Info[Context, None]) -> list[Fact]:
        as_of, known_at = self.scope
        found = await info.context.run(
            info.context.memory.episode_facts, self.id, as_of=as_of, known_at=known_at
        )
        return [Fact.of(f, self.scope) for f in found]


@strawberry.type(
    description="An agent's working state saved before a risky step (`saveCheckpoint`); kept as "
    "a fact of entity `system` that expires like decay class `checkpoint`."
)
class Checkpoint:
    intent: str = strawberry.field(description="What the agent set out to do.")
    state: JSON | None = strawberry.field(
        description="The working state, as saved (any JSON value; null when saved without one)."
    )
    expected_outcome: str | None = strawberry.field(description="What should come of it.")
    working_files: list[str] = strawberry.field(description="The files being worked on.")
    fact: Fact = strawberry.field(description="The fact that holds it.")

    @classmethod
    def of(cls, checkpoint: graphmem.Checkpoint) -> "Checkpoint":
        return cls(
            intent=checkpoint.intent,
            state=None if checkpoint.state is None else JSON(checkpoint.state),
            expected_outcome=checkpoint.expected_outcome,
            working_files=list(checkpoint.working_files),
            fact=Fact.of(checkpoint.fact, NOW),
        )


@strawberry.type(
    description="The record a purge left: when, which filter (values as SHA-256 digests, ids as "
    "a count) and how many of each kind it erased; never the content."
)
class Erasure:
    at: DateTime = strawberry.field(description="When the purge ran.")
    filter: JSON = strawberry.field(description="The filter, without its values.")
    facts: int = strawberry.field(description="Facts erased.")
    links: int = strawberry.field(description="Links erased.")
    vectors: int = strawberry.field(description="Vectors erased.")
    episodes: int = strawberry.field(description="Emptied episodes erased.")

    @classmethod
    def of(cls, erasure: graphmem.Erasure) -> "Erasure":
        return cls(
            at=_time(erasure.at),
            filter=JSON(erasure.filter),
            facts=erasure.facts,
            links=erasure.links,
            vectors=erasure.vectors,
            episodes=erasure.episodes,
        )


def _job_enum() -> EnumMeta:
    """The maintenance jobs as a GraphQL enum, one value a job of the registry: its name in
    capitals, holding the name."""
    values = {
        name.upper(): strawberry.enum_value(name, description=f"It {job.description}.")
        for name, job in REGISTRY.items()
    }
    # Called through the metaclass, whose signature says it makes a class (mypy reads
    # ``Enum(name, values)`` as an enum member unless the values are literals).
    jobs = EnumMeta.__call__(Enum, "MaintenanceJob", values)
    return strawberry.enum(
        jobs, description="A scheduled maintenance job (`graphmem.maintenance.REGISTRY`)."
    )


#: Built from the registry, so every job registered there is offered. An argument of this
#: type is declared with ``graphql_type=``: its Python value is a member, whose value is the
#: job's name.
MaintenanceJob: Final = _job_enum()


@strawberry.type(
    description="A category a fact may have: built in, or discovered in the namespace's facts "
    "(the maintenance job `classify`)."
)
class Category:
    name: str = strawberry.field(description="What `Fact.category` holds.")
    description: str = strawberry.field(description="What it holds.")
    discovered_at: DateTime | None = strawberry.field(
        description="When it was discovered (null: built in)."
    )

    @classmethod
    def of(cls, category: graphmem.CategoryInfo) -> "Category":
        at = category.discovered_at
        return cls(
            name=category.name,
            description=category.description,
            discovered_at=None if at is None else _time(at),
        )


@strawberry.type(
    description="An entity of the namespace: the names its facts give who or what they are "
    "about, grouped so that every name reaches the same facts (docs/concepts.md#entities)."
)
class Entity:
    name: str = strawberry.field(
        description="Its name: the first memory recorded, of those the most facts carry, then "
        "the longest; or the one a merge kept."
    )
    names: list[str] = strawberry.field(
        description="Every name its facts carry, `name` first (what `lookup` reaches)."
    )
    aliases: list[str] = strawberry.field(description="The names declared for it (`alias`).")
    facts: int = strawberry.field(description="How many facts carry one of its names (any state).")

    @classmethod
    def of(cls, entity: graphmem.Entity) -> "Entity":
        return cls(
            name=entity.name,
            names=list(entity.names),
            aliases=list(entity.aliases),
            facts=entity.facts,
        )


@strawberry.type(description="One current value of a key, when it holds, and the fact saying it.")
class AttributeValue:
    value: str | None = strawberry.field(
        description="The value, or null when the fact gives none (its text says it)."
    )
    valid_from: DateTime = strawberry.field(description="When it holds from (valid time).")
    valid_until: DateTime | None = strawberry.field(
        description="When it stops holding, as memory knew at `knownAt`; null: open."
    )
    fact: Fact = strawberry.field(description="The fact that says it.")


@strawberry.type(description="A key of an entity and its current values, the latest valid first.")
class ProfileAttribute:
    key: str = strawberry.field(description="The key, as its latest value's fact spells it.")
    values: list[AttributeValue] = strawberry.field(
        description="Every value current at the time scope (several for a multi-valued key), "
        f"at most {profiles.VALUES_PER_KEY}."
    )


@strawberry.type(description="An entity whose facts are linked to the profiled entity's facts.")
class LinkedEntity:
    entity: Entity = strawberry.field(description="The entity.")
    links: int = strawberry.field(description="How many visible links join their facts.")
    types: list[LinkType] = strawberry.field(description="Their types, the most links first.")


@strawberry.type(description="What the chat model wrote of an entity from its profile.")
class ProfileSummary:
    text: str = strawberry.field(description="The summary.")
    facts: list[strawberry.ID] = strawberry.field(
        description="The ids of the facts it cites (each shown to the model)."
    )
    cached: bool = strawberry.field(
        description="Kept from an earlier profile of the same facts: no request was made."
    )


@strawberry.type(
    description="Who or what an entity is at the time scope, from its current facts "
    "(docs/concepts.md#profiles)."
)
class Profile:
    entity: Entity = strawberry.field(description="The entity: its names and aliases.")
    attributes: list[ProfileAttribute] = strawberry.field(
        description="Its current values by key, the keys whose most important value is the most "
        f"important first, at most {profiles.KEYS}."
    )
    facts: list[Fact] = strawberry.field(
        description="Its facts without a key, the most important then the newest first, at most "
        f"{profiles.FACTS}."
    )
    linked: list[LinkedEntity] = strawberry.field(
        description="The entities its facts are linked to (not by SUPERSEDES), the most links "
        f"first, at most {profiles.LINKED}."
    )
    truncated: bool = strawberry.field(description="Whether a bound left something out.")
    summary: ProfileSummary | None = strawberry.field(
        description="The chat model's summary, when `summary` asked for one and it was written."
    )
    summary_error: str | None = strawberry.field(
        description="Why there is no summary when one was asked for (no chat model, a failed "
        "request, an unusable answer)."
    )

    @classmethod
    def of(cls, profile: graphmem.Profile, scope: Scope) -> "Profile":
        summary = profile.summary
        return cls(
            entity=Entity.of(profile.entity),
            attributes=[
                ProfileAttribute(
                    key=a.key,
                    values=[
                        AttributeValue(
                            value=v.value,
                            valid_from=_time(v.valid_from),
                            valid_until=_maybe_time(v.valid_until),
                            fact=Fact.of(v.fact, scope),
                        )
                        for v in a.values
                    ],
                )
                for a in profile.attributes
            ],
            facts=[Fact.of(f, scope) for f in profile.facts],
            linked=[
                LinkedEntity(
                    entity=Entity.of(e.entity),
                    links=e.links,
                    types=[_LINK_TYPES[t] for t in e.types],
                )
                for e in profile.linked
            ],
            truncated=profile.truncated,
            summary=None
            if summary is None
            else ProfileSummary(
                text=summary.text,
                facts=[strawberry.ID(i) for i in summary.facts],
                cached=summary.cached,
            ),
            summary_error=profile.summary_error,
        )


@strawberry.type(description="How many of one kind a maintenance run changed.")
class ChangedCount:
    kind: str = strawberry.field(description="What changed (e.g. `expired`, `patterns`).")
    count: int = strawberry.field(description="How many.")


@strawberry.type(
    description="A run of a maintenance job (scheduled by the server, `graphmem maintain` or "
    "`maintain`): when it ran, how it ended, what it changed and the model requests it made."
)
class MaintenanceRun:
    job: str = strawberry.field(description="prune, classify, reflect or consolidate.")
    started_at: DateTime = strawberry.field(description="When it started.")
    finished_at: DateTime | None = strawberry.field(description="When it ended (null: running).")
    status: str = strawberry.field(
        description="`running`, `done`, `failed` (what it changed: nothing), or `skipped` (another "
        "process was running it; never recorded)."
    )
    changed: list[ChangedCount] = strawberry.field(description="What it changed, by kind.")
    requests: int = strawberry.field(description="Chat model requests it made.")
    error: str | None = strawberry.field(description="Why it failed.")
    id: int = strawberry.field(
        description="The record's number in its namespace (0: a `skipped` run, not recorded)."
    )

    @classmethod
    def of(cls, run: graphmem.MaintenanceRun) -> "MaintenanceRun":
        return cls(
            id=run.id,
            job=run.job,
            started_at=_time(run.started_at),
            finished_at=None if run.finished_at is None else _time(run.finished_at),
            status=run.status,
            changed=[ChangedCount(kind=k, count=v) for k, v in sorted(run.changed.items())],
            requests=run.requests,
            error=run.error,
        )


@strawberry.type(description="How the rerank stage placed a search hit.")
class Reranked:
    by: str = strawberry.field(description="The reranker: features, http or llm.")
    fused_rank: int = strawberry.field(description="The hit's place in the fused order, from 1.")
    score: float | None = strawberry.field(
        description="The reranker's score for it; null when it gave none (the hit follows those "
        "it scored, in their fused order) or failed."
    )
    fallback: str | None = strawberry.field(
        description="Why the fused order stands: the reranker failed (then `score` is null)."
    )


@strawberry.type(description="A search result.")
class SearchHit:
    score: float = strawberry.field(description="The final score; higher is better.")
    fact: Fact = strawberry.field(description="The fact found.")
    fts_score: float | None = strawberry.field(
        description="The keyword leg's score, if it found it."
    )
    vector_score: float | None = strawberry.field(
        description="The vector leg's cosine, if it found it."
    )
    depth: int = strawberry.field(
        description="0 for a direct hit; k for a fact added k links away by graph expansion."
    )
    via: strawberry.ID | None = strawberry.field(
        description="For an added neighbour, the fact it was reached from."
    )
    time_hint: "TimeHint | None" = strawberry.field(
        description="The query's time words and the period they were understood as (null: "
        "none, or `timeHints: false`); facts dated in it, or whose text states a time in it, "
        "rank higher."
    )
    time_matched: "TimeKind | None" = strawberry.field(
        description="Which of this fact's times fell in that period (null: neither)."
    )
    entity_matched: str | None = strawberry.field(
        default=None,
        description="This fact's entity, when the query names it (a word or run of words, a "
        "possessive, or the first word of a longer name); such facts rank higher.",
    )
    reranked: Reranked | None = strawberry.field(
        default=None,
        description="How the rerank stage placed it; null when no reranker ran (`rerank`, else "
        "the server's `reranker` setting) or the hit was beyond the candidates it reads.",
    )

    @classmethod
    def of(cls, hit: graphmem.SearchHit, scope: Scope) -> "SearchHit":
        placed = hit.reranked
        return cls(
            score=hit.score,
            fact=Fact.of(hit.fact, scope),
            fts_score=hit.fts_score,
            vector_score=hit.vector_score,
            depth=hit.depth,
            via=None if hit.via is None else strawberry.ID(hit.via),
            time_hint=TimeHint.of(hit.time_hint),
            time_matched=None if hit.time_matched is None else TimeKind(hit.time_matched),
            entity_matched=hit.entity_matched,
            reranked=None
            if placed is None
            else Reranked(
                by=placed.by,
                fused_rank=placed.fused_rank,
                score=placed.score,
                fallback=placed.fallback,
            ),
        )


@strawberry.type(
    description="The period a fact's text states: start to end (end excluded), and the words."
)
class StatedTime:
    start: DateTime = strawberry.field(description="Its start.")
    end: DateTime = strawberry.field(description="Its end (excluded).")
    text: str = strawberry.field(
        description='The words that gave it ("yesterday"; several joined by "; ").'
    )

    @classmethod
    def of(cls, stated: graphmem.StatedTime | None) -> "StatedTime | None":
        if stated is None:
            return None
        return cls(start=_time(stated.start), end=_time(stated.end), text=stated.text)


@strawberry.enum(description="Which of a fact's times a query's period met.")
class TimeKind(Enum):
    VALID = strawberry.enum_value(
        "valid", description="Its date: its source date, else its valid time's start."
    )
    STATED = strawberry.enum_value("stated", description="The time its text states.")


@strawberry.type(
    description='Time words of a query ("last week", "in May 2023", "before she moved") read as '
    "a period of the facts' dates (their source date, else valid from)."
)
class TimeHint:
    text: str = strawberry.field(description="The words, as they stand in the query.")
    start: DateTime | None = strawberry.field(description="The period's start (null: open).")
    end: DateTime | None = strawberry.field(description="Its end, excluded (null: open).")
    month: int | None = strawberry.field(
        description="For a month named without a year: that month (1-12) of any year."
    )
    event: strawberry.ID | None = strawberry.field(
        description='For a period before or after an event ("before she moved"): the fact '
        "whose date placed the event."
    )
    described: str = strawberry.field(description="The period in words.")

    @classmethod
    def of(cls, hint: graphmem.TimeHint | None) -> "TimeHint | None":
        if hint is None:
            return None
        return cls(
            text=hint.text,
            start=None if hint.start is None else _at(hint.start),
            end=None if hint.end is None else _at(hint.end),
            month=hint.month,
            event=None if hint.event is None else strawberry.ID(hint.event),
            described=hint.describe(),
        )


@strawberry.type(description="A fact or a turn in a recall block.")
class RecallItem:
    fact: Fact = strawberry.field(description="The fact.")
    kind: FactKind = strawberry.field(
        description="TURN when the line shows a turn of a conversation (speaker and date, e.g. "
        "`[keyword/turn] 2023-05-08 user: …`), FACT otherwise. A fact and the turn it was "
        "drawn from are never both in a block."
    )
    score: float = strawberry.field(description="Its rank score; higher is better.")
    source: RecallSource = strawberry.field(description="How it was found.")
    line: str = strawberry.field(description="Its line in the block.")
    summarized: bool = strawberry.field(
        description="True when the line shows a summary instead of the (long) text."
    )


@strawberry.type(description="The `<memory-context>` block for a prompt, and what is in it.")
class Recall:
    context: str = strawberry.field(
        description="The block to put before the agent's turn; empty when memory has nothing "
        "to say or the budget is too small for one line."
    )
    tokens: int = strawberry.field(description="The block's size in tokens (at most maxTokens).")
    omitted: int = strawberry.field(
        description="Candidates left out because they did not fit the budget."
    )
    items: list[RecallItem] = strawberry.field(description="The facts in the block, in order.")
    profiles: list[Profile] = strawberry.field(
        description="The profiles the block's first lines show, each with the attributes its "
        "line holds (no other facts, links or summary); empty unless `profile` or the "
        f"`recall_profile` setting asked for them, at most {recalls.PROFILES}."
    )

    @classmethod
    def of(cls, result: graphmem.RecallResult, scope: Scope) -> "Recall":
        return cls(
            context=result.context,
            tokens=result.tokens,
            omitted=result.omitted,
            profiles=[Profile.of(p, scope) for p in result.profiles],
            items=[
                RecallItem(
                    fact=Fact.of(item.fact, scope),
                    kind=FactKind(item.kind),
                    score=item.score,
                    source=RecallSource(item.source),
                    line=item.line,
                    summarized=item.summarized,
                )
                for item in result.items
            ],
        )

    @strawberry.field(description="The facts in the block, in order.")
    def facts(self) -> list[Fact]:
        return [item.fact for item in self.items]


class _View:
    """A GraphQL object that reads each field from the engine's object when first asked for it.

    A traversal answers about a hundred facts and links, of which a query usually selects a few
    fields: converting all 27 fields of each up front cost more than completing the answer.
    Values are those the dataclass constructor would have been given (the engine's times are
    already UTC datetimes, ids already text).
    """

    #: How a field is read from the engine's object; a field not named reads the same attribute.
    READS: ClassVar[dict[str, Callable[[Any], Any]]] = {}

    def __init__(self, source: Any, scope: Scope) -> None:
        self._source = source
        self.scope = scope

    def __getattr__(self, name: str) -> Any:  # only for a field not read yet
        if name not in type(self).__dataclass_fields__:  # type: ignore[attr-defined]
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        read = self.READS.get(name)
        value = getattr(self._source, name) if read is None else read(self._source)
        setattr(self, name, value)
        return value


class _FactView(_View, Fact):
    READS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "tags": lambda fact: list(fact.tags),
        "superseded_by_id": lambda fact: fact.superseded_by,
        "kind": lambda fact: FactKind(fact.kind),
        "stated_time": lambda fact: StatedTime.of(fact.stated_time),
    }


class _LinkView(_View, Link):
    READS: ClassVar[dict[str, Callable[[Any], Any]]] = {"type": lambda link: _LINK_TYPES[link.type]}


@strawberry.type(description="A fact reached by a traversal.")
class Node:
    fact: Fact = strawberry.field(description="The fact.")
    depth: int = strawberry.field(description="Its shortest distance, in links, from a start fact.")
    parent_ids: list[strawberry.ID] = strawberry.field(
        description="The facts one level up it was reached from."
    )


@strawberry.type(
    description="What a traversal found: a flat list of nodes and the edges among them."
)
class Subgraph:
    nodes: list[Node] = strawberry.field(description="Each fact once, at its shortest depth.")
    edges: list[Link] = strawberry.field(description="Every visible link among the nodes.")
    truncated: bool = strawberry.field(description="Whether the traversal stopped early.")
    truncated_by: list[str] = strawberry.field(
        description="Why: `depth` (more lay beyond), `max_nodes` or `fan_out`."
    )

    @classmethod
    def of(cls, sub: graph.Subgraph, scope: Scope) -> "Subgraph":
        return cls(
            nodes=[
                Node(
                    fact=Fact.of(n.fact, scope),
                    depth=n.depth,
                    parent_ids=[strawberry.ID(p) for p in n.parent_ids],
                )
                for n in sub.nodes
            ],
            edges=[Link.of(e, scope) for e in sub.edges],
            truncated=sub.truncated,
            truncated_by=list(sub.truncated_by),
        )


@strawberry.type(description="A shortest path between two facts.")
class Path:
    facts: list[Fact] = strawberry.field(description="The facts along the path, in order.")
    links: list[Link] = strawberry.field(description="The link joining each fact to the next.")


@strawberry.type(description="An edge of the `facts` connection.")
class FactEdge:
    cursor: str = strawberry.field(description="Pass as `after` to continue after this fact.")
    node: Fact = strawberry.field(description="The fact.")


@strawberry.type(description="A page of facts in the order memory recorded them.")
class FactConnection:
    edges: list[FactEdge] = strawberry.field(description="The facts of this page.")
    page_info: PageInfo = strawberry.field(description="How to fetch the next page.")


@strawberry.type(description="Counts describing the namespace.")
class Stats:
    namespace: str = strawberry.field(description="The namespace these counts are for.")
    data: JSON = strawberry.field(
        description="Facts (live, superseded, forgotten), links, vectors, by category and decay "
        "class, and the embedder, as `graphmem stats --json` prints them."
    )


@strawberry.type(description="A change to memory, sent to `memoryChanged` subscribers.")
class MemoryChange:
    kind: ChangeKind = strawberry.field(description="What happened.")
    id: strawberry.ID = strawberry.field(
        description="The fact's id, or the link's for LINK_MADE and LINK_REMOVED."
    )
    at: DateTime = strawberry.field(description="When it was committed.")

    @strawberry.field(
        description="The fact as it is now, for fact changes (null for links, and once purged)."
    )
    async def fact(self, info: Info[Context, None]) -> Fact | None:
        if self.kind in (ChangeKind.LINK_MADE, ChangeKind.LINK_REMOVED, ChangeKind.FACT_PURGED):
            return None
        return await _fact(info, self.id, (None, None))


# ------------------------------------------------------------------------------------ cursors


def encode_cursor(kind: str, position: str) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{position}".encode()).decode("ascii")


def decode_cursor(kind: str, cursor: str) -> str:
    """The position in ``cursor``; InvalidInput if it is not a ``kind`` cursor."""
    try:
        text = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("utf-8")
    except (ValueError, UnicodeError, binascii.Error):
        text = ""
    prefix, _, position = text.partition(":")
    if prefix != kind or not position:
        raise graphmem.InvalidInput(f"not a {kind} cursor: {cursor!r}", field="after")
    return position


def decode_fact_cursor(cursor: str) -> int:
    position = decode_cursor("fact", cursor)
    if not position.isdigit():
        raise graphmem.InvalidInput(f"not a fact cursor: {cursor!r}", field="after")
    return int(position)


def decode_link_cursor(cursor: str) -> graph.LinkPosition:
    strength, _, seq = decode_cursor("link", cursor).partition(":")
    try:
        return graph.LinkPosition(float(strength), int(seq))
    except ValueError:
        raise graphmem.InvalidInput(f"not a link cursor: {cursor!r}", field="after") from None


#: The time scope of a read at the present on both axes.
NOW: Scope = (None, None)


async def _fact(info: Info[Context, None], fact_id: str, scope: Scope) -> Fact | None:
    """The fact the context loads for ``fact_id`` at ``scope``, as a GraphQL ``Fact``."""
    found = await info.context.fact(fact_id, scope)
    return None if found is None else Fact.of(found, scope)


def _time(moment: datetime) -> DateTime:
    return DateTime(moment)


def _at(seconds: float) -> DateTime:
    """A time the engine keeps as epoch seconds (a synced file's, a time hint's)."""
    return DateTime(datetime.fromtimestamp(seconds, UTC))


def _maybe_time(moment: datetime | None) -> DateTime | None:
    return None if moment is None else DateTime(moment)
