"""The Query root: reads. Every field takes an optional time scope (``asOf``, ``knownAt``) that
applies to everything beneath it. A failure (bad argument, unknown id) is a GraphQL error whose
``extensions.code`` says which, and ``extensions.field`` the argument at fault (docs/graphql.md)."""

from enum import Enum
from typing import Annotated, Any, cast

import strawberry
from pydantic import BaseModel
from strawberry.tools import merge_types
from strawberry.types import Info, get_object_definition

import graphmem
from graphmem import graph
from graphmem import recall as recalls
from graphmem.graph import TraverseInput
from graphmem.limits import MAX_DEPTH, MAX_LIMIT, MAX_READ_LINES, MAX_RECALL_TOKENS

from ..context import Context, Scope
from .types import (
    JSON,
    Category,
    Checkpoint,
    DateTime,
    Direction,
    Document,
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
    Recall,
    RecallFormat,
    SearchHit,
    SearchMode,
    Stats,
    Subgraph,
    TimeHint,
    TimeKind,
    decode_fact_cursor,
    encode_cursor,
)


def described(
    field: str, model: type[BaseModel] = graphmem.SearchInput, **options: Any
) -> strawberry.types.arguments.StrawberryArgumentAnnotation:
    """The argument that sets ``field`` (of a search, unless another ``model`` is named),
    described as the core's input model describes it."""
    return strawberry.argument(description=model.model_fields[field].description, **options)


AsOf = Annotated[DateTime | None, described("as_of")]
KnownAt = Annotated[DateTime | None, described("known_at")]
EpisodeLinks = Annotated[bool, described("episode_links")]
TimeHints = Annotated[bool, described("time_hints")]
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
    async def fact(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="The fact's id.")],
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> Fact | None:
        found = await info.context.run(
            info.context.memory.get, str(id), as_of=as_of, known_at=known_at
        )
        return None if found is None else Fact.of(found, (as_of, known_at))

    @strawberry.field(
        description="Facts in the order memory recorded them, a page at a time. The cursor is a "
        "position, so facts written while paging join the end: no fact is repeated or skipped."
    )
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
        as_of: AsOf = None,
        known_at: KnownAt = None,
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
            as_of=as_of,
            known_at=known_at,
            include_superseded=wanted.include_superseded,
        )
        scope = (as_of, known_at)
        edges = [
            FactEdge(cursor=encode_cursor("fact", str(pos)), node=Fact.of(f, scope))
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
    async def search(
        self,
        info: Info[Context, None],
        query: Annotated[str, described("query")],
        limit: Annotated[int, described("limit")] = 10,
        tag: Annotated[str | None, described("tag")] = None,
        category: Annotated[str | None, described("category")] = None,
        entity: Annotated[str | None, described("entity")] = None,
        source: Annotated[str | None, described("source")] = None,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        include_superseded: Annotated[bool, described("include_superseded")] = False,
        mode: Annotated[SearchMode, described("mode")] = SearchMode.HYBRID,
        graph_depth: Annotated[int, described("graph_depth")] = 0,
        time_hints: TimeHints = True,
        episode_links: EpisodeLinks = True,
    ) -> list[SearchHit]:
        hits = await info.context.run(
            info.context.memory.search,
            query,
            limit=limit,
            tag=tag,
            category=category,
            entity=entity,
            as_of=as_of,
            known_at=known_at,
            include_superseded=include_superseded,
            mode=mode.name.lower(),
            source=source,
            graph_depth=graph_depth,
            time_hints=time_hints,
            episode_links=episode_links,
        )
        scope = (as_of, known_at)
        return [
            SearchHit(
                score=h.score,
                fact=Fact.of(h.fact, scope),
                fts_score=h.fts_score,
                vector_score=h.vector_score,
                depth=h.depth,
                via=None if h.via is None else strawberry.ID(h.via),
                time_hint=TimeHint.of(h.time_hint),
                time_matched=None if h.time_matched is None else TimeKind(h.time_matched),
                entity_matched=h.entity_matched,
            )
            for h in hits
        ]

    @strawberry.field(
        description="The `<memory-context>` block to put before an agent's turn (auto-recall): "
        "hybrid search on the prompt, the facts of entities it names, optionally linked facts; "
        "best first, long facts as summaries, within a token budget (docs/agents.md)."
    )
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
        as_of: AsOf = None,
        known_at: KnownAt = None,
        time_hints: TimeHints = True,
        episode_links: EpisodeLinks = True,
        include_cold: Annotated[
            bool,
            strawberry.argument(description="Also cold facts (`setCold`), left out by default."),
        ] = False,
    ) -> Recall:
        result = await info.context.run(
            info.context.memory.recall,
            prompt,
            max_tokens=max_tokens,
            format=cast(recalls.Format, format.value),
            graph_depth=graph_depth,
            as_of=as_of,
            known_at=known_at,
            time_hints=time_hints,
            episode_links=episode_links,
            include_cold=include_cold,
        )
        return Recall.of(result, (as_of, known_at))

    @strawberry.field(
        description="Facts about an entity (and key), by exact match, most confident and newest "
        "first; no embedding involved."
    )
    async def lookup(
        self,
        info: Info[Context, None],
        entity: Annotated[str, strawberry.argument(description="The entity (case-insensitive).")],
        key: Annotated[str | None, strawberry.argument(description="Only this key.")] = None,
        tag: Annotated[str | None, strawberry.argument(description="Only this tag.")] = None,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        include_superseded: Annotated[
            bool, strawberry.argument(description="Also list replaced versions.")
        ] = False,
        limit: Annotated[
            int, strawberry.argument(description=f"Most facts (1 to {MAX_LIMIT:,}).")
        ] = 100,
    ) -> list[Fact]:
        facts = await info.context.run(
            info.context.memory.lookup,
            entity,
            key=key,
            tag=tag,
            as_of=as_of,
            known_at=known_at,
            include_superseded=include_superseded,
            limit=limit,
        )
        return [Fact.of(f, (as_of, known_at)) for f in facts]


@strawberry.type(description="Walks and paths over links.")
class GraphReads:
    @strawberry.field(
        description="Breadth-first from the given facts: each fact reached once, at its shortest "
        "depth, with the facts it was reached from, and every visible link among them."
    )
    async def traverse(
        self,
        info: Info[Context, None],
        from_: Annotated[list[strawberry.ID], described("ids", TraverseInput, name="from")],
        depth: Annotated[int, described("depth", TraverseInput)] = 2,
        types: Annotated[list[LinkType] | None, described("types", TraverseInput)] = None,
        direction: Annotated[Direction, described("direction", TraverseInput)] = Direction.BOTH,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        max_nodes: Annotated[int, described("max_nodes", TraverseInput)] = graph.DEFAULT_MAX_NODES,
        min_strength: Annotated[float, described("min_strength", TraverseInput)] = 0.0,
    ) -> Subgraph:
        sub = await info.context.run(
            info.context.memory.traverse,
            [str(i) for i in from_],
            depth=depth,
            types=_types(types),
            direction=direction.name,
            as_of=as_of,
            known_at=known_at,
            max_nodes=max_nodes,
            min_strength=min_strength,
        )
        return Subgraph.of(sub, (as_of, known_at))

    @strawberry.field(description="A shortest path between two facts over visible links, or null.")
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
        as_of: AsOf = None,
        known_at: KnownAt = None,
        max_depth: Annotated[
            int,
            strawberry.argument(
                description=f"The most links the path may have (1 to {MAX_DEPTH}); no path "
                "that short is null."
            ),
        ] = MAX_DEPTH,
    ) -> Path | None:
        found = await info.context.run(
            info.context.memory.path,
            str(from_),
            str(to),
            types=_types(types),
            direction=direction.name,
            as_of=as_of,
            known_at=known_at,
            max_depth=max_depth,
        )
        if found is None:
            return None
        scope: Scope = (as_of, known_at)
        return Path(
            facts=[Fact.of(f, scope) for f in found], links=[Link.of(k, scope) for k in found.links]
        )


@strawberry.type(description="A fact's versions.")
class HistoryReads:
    @strawberry.field(
        description="Every version in a fact's supersession chain, oldest first (those recorded "
        "after `knownAt`, or starting after `asOf`, left out)."
    )
    async def history(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="Any version's id.")],
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> list[Fact]:
        facts = await info.context.run(
            info.context.memory.history, str(id), as_of=as_of, known_at=known_at
        )
        return [Fact.of(f, (as_of, known_at)) for f in facts]


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
    async def episode(
        self,
        info: Info[Context, None],
        id: Annotated[str, strawberry.argument(description="The episode's id.")],
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> Episode | None:
        found = await info.context.run(info.context.memory.episode, id)
        return None if found is None else Episode.of(found, (as_of, known_at))

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
    (ServiceReads, FactReads, SearchReads, GraphReads, HistoryReads, EpisodeReads, UpkeepReads),
)
get_object_definition(
    Query, strict=True
).description = "Reads: search, lookup, traversal, history, listing."


def _types(types: list[LinkType] | None) -> list[str] | None:
    return None if types is None else [t.name for t in types]
