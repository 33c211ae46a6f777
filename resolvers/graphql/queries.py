"""The Query root: reads. Every field takes an optional time scope (``asOf``, ``knownAt``) that
applies to everything beneath it. A failure (bad argument, unknown id) is a GraphQL error whose
``extensions.code`` says which, and ``extensions.field`` the argument at fault (docs/graphql.md)."""

from enum import Enum
from typing import Annotated, Any, Final, cast

import strawberry
from strawberry.tools import merge_types
from strawberry.types import Info, get_object_definition

import graphmem
from graphmem import entities
from graphmem import recall as recalls
from graphmem.graph import TraverseInput
from graphmem.limits import MAX_DEPTH, MAX_LIMIT, MAX_READ_LINES, MAX_RECALL_TOKENS

from ..context import Context
from .arguments import TIMES, core, scope_of, takes, time_scope
from .types import (
    JSON,
    Category,
    Checkpoint,
    DateTime,
    Direction,
    Document,
    Entity,
    Episode,
    Erasure,
    Fact,
    FactConnection,
    FactEdge,
    Link,
    LinkType,
    MaintenanceJob,
    MaintenanceRun,
    PageInfo,
    Path,
    Profile,
    Recall,
    RecallFormat,
    Rerank,
    SearchHit,
    SearchMode,
    Stats,
    Subgraph,
    decode_fact_cursor,
    encode_cursor,
)

#: The GraphQL types of a search's and a walk's arguments where they are not the core's.
SEARCH_TYPES: Final = {**TIMES, "mode": SearchMode, "rerank": Rerank | None}
TRAVERSE_TYPES: Final = {
    **TIMES,
    "ids": list[strawberry.ID],
    "types": list[LinkType] | None,
    "direction": Direction,
}
#: A walk starts ``from`` its ids (a Python keyword).
FROM: Final = {"ids": "from"}
Types = Annotated[
    list[LinkType] | None,
    strawberry.argument(description="Link types to follow (default: all but SUPERSEDES)."),
]


@strawberry.input(description="Which facts `facts` lists.")
class FactFilter:
    tag: str | None = strawberry.field(default=None, description="Only facts with this tag.")
    category: str | None = strawberry.field(default=None, description="Only this category.")
    entity: str | None = strawberry.field(
        default=None, description="Only facts about this entity (case-insensitive)."
    )
    source: str | None = strawberry.field(default=None, description="Only facts from this source.")
    include_superseded: bool = strawberry.field(
        default=False, description="Also list versions replaced by newer ones."
    )


@strawberry.type(
    description="The service: its version, the caller's namespace and whether it may write."
)
class ServiceReads:
    @strawberry.field(description="The version of graphmem serving this request.")
    def version(self) -> str:
        return graphmem.__version__

    @strawberry.field(description="The namespace this request reads and writes.")
    def namespace(self, info: Info[Context, None]) -> str:
        return info.context.memory.namespace

    @strawberry.field(
        description="Whether this request may write: true without API keys (loopback) or with a "
        "read-write key, false with a read-only key (its mutations answer FORBIDDEN)."
    )
    def can_write(self, info: Info[Context, None]) -> bool:
        return info.context.may_write


@strawberry.type(description="Facts by id and by page.")
class FactReads:
    @strawberry.field(
        description="A fact by id as seen at the time scope; null if unknown or not visible then "
        "(a superseded version is visible at an `asOf` within its validity)."
    )
    @time_scope
    async def fact(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="The fact's id.")],
        **scope: Any,
    ) -> Fact | None:
        found = await info.context.run(info.context.memory.get, str(id), **scope)
        return None if found is None else Fact.of(found, scope_of(scope))

    @strawberry.field(
        description="Facts in the order memory recorded them, a page at a time. The cursor is a "
        "position, so facts written while paging join the end: no fact is repeated or skipped."
    )
    @time_scope
    async def facts(
        self,
        info: Info[Context, None],
        filter: Annotated[
            FactFilter | None, strawberry.argument(description="Which facts to list.")
        ] = None,
        first: Annotated[
            int, strawberry.argument(description=f"Page size (1 to {MAX_LIMIT:,}).")
        ] = 50,
        after: Annotated[
            str | None, strawberry.argument(description="The `cursor` to continue after.")
        ] = None,
        **scope: Any,
    ) -> FactConnection:
        wanted = filter or FactFilter()
        page = await info.context.run(
            info.context.memory.facts,
            first=first,
            after=None if after is None else decode_fact_cursor(after),
            tag=wanted.tag,
            category=wanted.category,
            entity=wanted.entity,
            source=wanted.source,
            include_superseded=wanted.include_superseded,
            **scope,
        )
        edges = [
            FactEdge(cursor=encode_cursor("fact", str(pos)), node=Fact.of(f, scope_of(scope)))
            for pos, f in page.items
        ]
        return FactConnection(
            edges=edges,
            page_info=PageInfo(
                has_next_page=page.has_more, end_cursor=edges[-1].cursor if edges else None
            ),
        )


@strawberry.type(description="Search, recall and exact lookup.")
class SearchReads:
    @strawberry.field(
        description="Facts matching a query, best first: keywords and meaning fused, optionally "
        "with linked facts (`graphDepth`)."
    )
    @takes(graphmem.SearchInput, *graphmem.SearchInput.model_fields, types=SEARCH_TYPES)
    async def search(self, info: Info[Context, None], **given: Any) -> list[SearchHit]:
        hits = await info.context.run(info.context.memory.search, **core(given))
        return [SearchHit.of(h, scope_of(given)) for h in hits]

    @strawberry.field(
        description="The `<memory-context>` block to put before an agent's turn (auto-recall): "
        "hybrid search on the prompt, the facts of entities it names, optionally linked facts; "
        "best first, long facts as summaries, within a token budget (docs/agents.md)."
    )
    @takes(graphmem.SearchInput, "as_of", "known_at", "time_hints", "episode_links")
    async def recall(
        self,
        info: Info[Context, None],
        prompt: Annotated[str, strawberry.argument(description="The user's message.")],
        max_tokens: Annotated[
            int,
            strawberry.argument(
                description=f"The block's budget in tokens (1 to {MAX_RECALL_TOKENS:,}; about 4 "
                "characters each unless the server has a tokenizer)."
            ),
        ] = recalls.DEFAULT_MAX_TOKENS,
        format: Annotated[
            RecallFormat, strawberry.argument(description="How each fact's line is written.")
        ] = RecallFormat.FULL,
        graph_depth: Annotated[
            int,
            strawberry.argument(
                description=f"Also bring facts up to this many links away (0 to {MAX_DEPTH})."
            ),
        ] = 0,
        include_cold: Annotated[
            bool,
            strawberry.argument(description="Also cold facts (`setCold`), left out by default."),
        ] = False,
        profile: Annotated[
            bool | None,
            strawberry.argument(
                description="Lead the block with the profile of each entity the prompt names "
                "(its current values by key; default: the server's `recall_profile` setting)."
            ),
        ] = None,
        **given: Any,
    ) -> Recall:
        result = await info.context.run(
            info.context.memory.recall,
            prompt,
            max_tokens=max_tokens,
            format=cast(recalls.Format, format.value),
            graph_depth=graph_depth,
            include_cold=include_cold,
            profile=profile,
            **given,
        )
        return Recall.of(result, scope_of(given))

    @strawberry.field(
        description="Facts about an entity (and key), by exact match, most confident and newest "
        "first; no embedding involved."
    )
    @takes(graphmem.SearchInput, "as_of", "known_at", "include_superseded")
    async def lookup(
        self,
        info: Info[Context, None],
        entity: Annotated[str, strawberry.argument(description="The entity (case-insensitive).")],
        key: Annotated[str | None, strawberry.argument(description="Only this key.")] = None,
        tag: Annotated[str | None, strawberry.argument(description="Only this tag.")] = None,
        limit: Annotated[
            int, strawberry.argument(description=f"Most facts (1 to {MAX_LIMIT:,}).")
        ] = 100,
        **given: Any,
    ) -> list[Fact]:
        facts = await info.context.run(
            info.context.memory.lookup, entity, key=key, tag=tag, limit=limit, **given
        )
        return [Fact.of(f, scope_of(given)) for f in facts]


#: An entity read's ``knownAt``, which groups names as memory had them then.
KnownNames = Annotated[DateTime | None, strawberry.argument(description=entities.KNOWN_AT)]


@strawberry.type(description="Entities: the names facts give who or what they are about.")
class EntityReads:
    @strawberry.field(
        description="The namespace's entities, the most facts first: each with every name its "
        "facts carry and the aliases declared for it (as memory knew them at `knownAt`)."
    )
    async def entities(
        self,
        info: Info[Context, None],
        limit: Annotated[
            int, strawberry.argument(description=f"Most entities (1 to {MAX_LIMIT:,}).")
        ] = 100,
        known_at: KnownNames = None,
    ) -> list[Entity]:
        found = await info.context.run(info.context.memory.entities, limit=limit, known_at=known_at)
        return [Entity.of(e) for e in found]

    @strawberry.field(
        description="The entity a name reaches: one of its names or aliases, whatever the "
        "case, spacing or possessive, or a short form or nickname that fits one entity "
        "(NOT_FOUND when it reaches none; INVALID_INPUT for an empty or overlong name)."
    )
    async def entity(
        self,
        info: Info[Context, None],
        name: Annotated[str, strawberry.argument(description="A name of the entity.")],
        known_at: KnownNames = None,
    ) -> Entity:
        found = await info.context.run(info.context.memory.entity, name, known_at=known_at)
        return Entity.of(found)

    @strawberry.field(
        description="Who or what the entity a name reaches is at the time scope: its current "
        "values by key (each with its valid time and fact), its facts without a key, the "
        "entities its facts are linked to; with `summary`, the chat model's summary citing its "
        "facts (docs/concepts.md#profiles). NOT_FOUND when the name reaches no entity."
    )
    @time_scope
    async def profile(
        self,
        info: Info[Context, None],
        entity: Annotated[str, strawberry.argument(description="A name of the entity.")],
        summary: Annotated[
            bool,
            strawberry.argument(
                description="Also the chat model's summary: one request when the facts changed "
                "since the last (charged as a heavy document), none when the server has no "
                "chat model (`summaryError` says why)."
            ),
        ] = False,
        **given: Any,
    ) -> Profile:
        found = await info.context.run(
            info.context.memory.profile, entity, summary=summary, **given
        )
        return Profile.of(found, scope_of(given))


@strawberry.type(description="Walks and paths over links.")
class GraphReads:
    @strawberry.field(
        description="Breadth-first from the given facts: each fact reached once, at its shortest "
        "depth, with the facts it was reached from, and every visible link among them."
    )
    @takes(TraverseInput, *TraverseInput.model_fields, types=TRAVERSE_TYPES, renamed=FROM)
    async def traverse(self, info: Info[Context, None], **given: Any) -> Subgraph:
        sub = await info.context.run(info.context.memory.traverse, **core(given))
        return Subgraph.of(sub, scope_of(given))

    @strawberry.field(description="A shortest path between two facts over visible links, or null.")
    @time_scope
    async def path(
        self,
        info: Info[Context, None],
        from_: Annotated[
            strawberry.ID, strawberry.argument(name="from", description="Where the path starts.")
        ],
        to: Annotated[strawberry.ID, strawberry.argument(description="Where it ends.")],
        types: Types = None,
        direction: Annotated[
            Direction, strawberry.argument(description="Follow links OUT, IN or BOTH ways.")
        ] = Direction.BOTH,
        max_depth: Annotated[
            int,
            strawberry.argument(
                description=f"The most links the path may have (1 to {MAX_DEPTH}); no path "
                "that short is null."
            ),
        ] = MAX_DEPTH,
        **scope: Any,
    ) -> Path | None:
        found = await info.context.run(
            info.context.memory.path,
            str(from_),
            str(to),
            **core({"types": types, "direction": direction, "max_depth": max_depth, **scope}),
        )
        if found is None:
            return None
        at = scope_of(scope)
        return Path(
            facts=[Fact.of(f, at) for f in found], links=[Link.of(k, at) for k in found.links]
        )


@strawberry.type(description="A fact's versions.")
class HistoryReads:
    @strawberry.field(
        description="Every version in a fact's supersession chain, oldest first (those recorded "
        "after `knownAt`, or starting after `asOf`, left out)."
    )
    @time_scope
    async def history(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="Any version's id.")],
        **scope: Any,
    ) -> list[Fact]:
        facts = await info.context.run(info.context.memory.history, str(id), **scope)
        return [Fact.of(f, scope_of(scope)) for f in facts]


@strawberry.type(description="Checkpoints, episodes and synced notes.")
class EpisodeReads:
    @strawberry.field(
        description="The newest unexpired checkpoint (`saveCheckpoint`); null when there is none."
    )
    async def checkpoint(self, info: Info[Context, None]) -> Checkpoint | None:
        found = await info.context.run(info.context.memory.restore_checkpoint)
        return None if found is None else Checkpoint.of(found)

    @strawberry.field(
        description="An episode by id (its `facts` read at the given time scope); null if unknown."
    )
    @time_scope
    async def episode(
        self,
        info: Info[Context, None],
        id: Annotated[str, strawberry.argument(description="The episode's id.")],
        **scope: Any,
    ) -> Episode | None:
        found = await info.context.run(info.context.memory.episode, id)
        return None if found is None else Episode.of(found, scope_of(scope))

    @strawberry.field(description="Episodes by their time, oldest first.")
    async def episodes(
        self,
        info: Info[Context, None],
        source: Annotated[
            str | None, strawberry.argument(description="Only those from this source.")
        ] = None,
        after: Annotated[
            DateTime | None, strawberry.argument(description="Only those at or after this time.")
        ] = None,
        before: Annotated[
            DateTime | None, strawberry.argument(description="Only those before this time.")
        ] = None,
        limit: Annotated[
            int, strawberry.argument(description=f"Most episodes (1 to {MAX_LIMIT:,}).")
        ] = 100,
    ) -> list[Episode]:
        found = await info.context.run(
            info.context.memory.episodes, source=source, after=after, before=before, limit=limit
        )
        return [Episode.of(e, (None, None)) for e in found]

    @strawberry.field(description="The synced markdown files (`graphmem sync`), by path.")
    async def documents(
        self,
        info: Info[Context, None],
        under: Annotated[
            str | None,
            strawberry.argument(description="Only the file at, or the files under, this path."),
        ] = None,
    ) -> list[Document]:
        found = await info.context.run(info.context.memory.documents, under=under)
        return [Document.of(d) for d in found]

    @strawberry.field(
        description="Lines of a synced document as it is on disk now: what a chunk came from "
        "(its `source` is `path:start-end`). Only synced files can be read: NOT_FOUND for any "
        f"other path; INVALID_INPUT for a bad range or more than {MAX_READ_LINES:,} lines."
    )
    async def document_lines(
        self,
        info: Info[Context, None],
        path: Annotated[str, strawberry.argument(description="The document's path.")],
        start: Annotated[int, strawberry.argument(description="First line (from 1).")] = 1,
        end: Annotated[
            int | None,
            strawberry.argument(description="Last line, included (default: to the end)."),
        ] = None,
    ) -> str:
        return await info.context.run(info.context.memory.read_lines, path, start, end)


@strawberry.type(description="Erasures, maintenance, categories and counts.")
class UpkeepReads:
    @strawberry.field(
        description="The erasure records of this namespace, newest first (admin keys only: "
        "`graphmem create-key --admin`; FORBIDDEN for others)."
    )
    async def erasures(
        self,
        info: Info[Context, None],
        limit: Annotated[
            int, strawberry.argument(description=f"Most records (1 to {MAX_LIMIT:,}).")
        ] = 100,
    ) -> list[Erasure]:
        info.context.require_admin()
        found = await info.context.run(info.context.memory.erasures, limit=limit)
        return [Erasure.of(e) for e in found]

    @strawberry.field(
        description="The maintenance runs recorded in this namespace (scheduled by the server, "
        "`graphmem maintain` or `maintain`), newest first."
    )
    async def maintenance_runs(
        self,
        info: Info[Context, None],
        job: Annotated[
            Enum | None,
            strawberry.argument(
                description="Only this job's runs.", graphql_type=MaintenanceJob | None
            ),
        ] = None,
        limit: Annotated[
            int, strawberry.argument(description=f"Most records (1 to {MAX_LIMIT:,}).")
        ] = 100,
    ) -> list[MaintenanceRun]:
        found = await info.context.run(
            info.context.memory.maintenance_runs,
            job=None if job is None else job.value,
            limit=limit,
        )
        return [MaintenanceRun.of(r) for r in found]

    @strawberry.field(
        description="The categories a fact may have here: the built-in ones, then those "
        "discovered in this namespace's facts."
    )
    async def categories(self, info: Info[Context, None]) -> list[Category]:
        found = await info.context.run(info.context.memory.categories)
        return [Category.of(c) for c in found]

    @strawberry.field(description="Counts describing this namespace.")
    async def stats(self, info: Info[Context, None]) -> Stats:
        stats = await info.context.run(info.context.memory.stats)
        return Stats(namespace=stats.namespace, data=JSON(stats.to_dict()))


#: The Query root: every domain's reads, in the order the schema lists them.
Query = merge_types(
    "Query",
    (
        ServiceReads,
        FactReads,
        SearchReads,
        EntityReads,
        GraphReads,
        HistoryReads,
        EpisodeReads,
        UpkeepReads,
    ),
)
get_object_definition(
    Query, strict=True
).description = "Reads: search, lookup, entities, traversal, history, listing."
