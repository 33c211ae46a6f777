"""The MCP tools, each in one place: its arguments (a pydantic model, from which its JSON
schema is generated), then its handler, named after the ``Memory`` verb it calls, under the
:func:`tool` decorator that holds its name, title, description and hints. The catalogue
(:data:`TOOLS`) is the tools in the order they are written here, which is the order clients
list them in.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, get_type_hints

from mcp_types import Tool as ToolSpec
from mcp_types import (
    ToolAnnotations,
)
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    WithJsonSchema,
    create_model,
)

from graphmem import InvalidInput, Memory
from graphmem.entities import KNOWN_AT as ENTITIES_KNOWN_AT
from graphmem.graph import TraverseInput
from graphmem.limits import (
    MAX_CHECKPOINT_FILES,
    MAX_DEPTH,
    MAX_FIELD_LENGTH,
    MAX_LIMIT,
    MAX_NOTE_LENGTH,
    MAX_READ_LINES,
    MAX_RECALL_TOKENS,
    MAX_TEXT_LENGTH,
)
from graphmem.maintenance import REGISTRY, checked_jobs
from graphmem.models import (
    CaptureInput,
    FactInput,
    Keep,
    LinkInput,
    MessageInput,
    SearchInput,
    Tier,
    field_of,
)
from graphmem.recall import FORMATS

from .rendering import (
    VERDICT_TARGETS,
    attribute_line,
    entity_line,
    fact_line,
    moment_text,
    plural,
    scope_text,
)

#: A time argument: text in one of the accepted forms, or epoch seconds as a number. Its schema
#: says so as ``anyOf`` branches of one type each, not as a ``type`` array: clients that map tool
#: schemas onto a single-type dialect (the OpenAPI subset of Gemini's function declarations)
#: reject or drop a ``type`` array, and the MCP Inspector's ``--strict`` warns of it.
Time = Annotated[
    str | StrictInt | StrictFloat | None,
    WithJsonSchema({"anyOf": [{"type": "string"}, {"type": "number"}]}),
]
#: Any JSON value (a checkpoint's state), spelled with a type on each branch: a schema with no
#: type at all is one that clients cannot map, and ``--strict`` warns of it too. ``null`` is
#: left out, as it means the same as leaving the argument out.
JsonValue = Annotated[
    Any,
    WithJsonSchema(
        {"anyOf": [{"type": t} for t in ("object", "array", "string", "number", "boolean")]}
    ),
]


Result = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """One tool: its name, what the model reads about it, its arguments and what it does."""

    name: str
    title: str
    description: str
    args: type[BaseModel]
    run: Callable[[Memory, Any], Result]
    read_only: bool = True
    #: Whether it may take back earlier writes (a hint for clients that ask before such calls).
    destructive: bool = False
    #: For a tool that writes only for some arguments: whether these arguments write.
    writes_when: Callable[[Any], bool] | None = None

    def writes(self, args: BaseModel) -> bool:
        """Whether a call with ``args`` writes (a read-only key may not make it)."""
        if self.read_only:
            return False
        return True if self.writes_when is None else self.writes_when(args)

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=_schema(self.args),
            annotations=ToolAnnotations(
                title=self.title,
                read_only_hint=self.read_only,
                destructive_hint=None if self.read_only else self.destructive,
                idempotent_hint=True if self.read_only else None,
                open_world_hint=False,
            ),
        )


#: The tools as :func:`tool` registers them, in the order they are written.
_CATALOGUE: list[Tool] = []


def tool(
    name: str,
    title: str,
    description: str,
    *,
    read_only: bool = True,
    destructive: bool = False,
    writes_when: Callable[[Any], bool] | None = None,
    args: type[BaseModel] | None = None,
) -> Callable[[Callable[[Memory, Any], Result]], Callable[[Memory, Any], Result]]:
    """Register the decorated handler as the tool ``name``, whose arguments are the model
    ``args`` (a :func:`picked` one), else the model its ``args`` parameter is annotated with."""

    def register(run: Callable[[Memory, Any], Result]) -> Callable[[Memory, Any], Result]:
        model = get_type_hints(run)["args"] if args is None else args
        _CATALOGUE.append(
            Tool(name, title, description, model, run, read_only, destructive, writes_when)
        )
        return run

    return register


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: The fields of the core's input models that hold a time, which a tool takes as text or a number.
_TIMES: Final = frozenset(
    {"valid_from", "valid_until", "source_date", "expires_at", "as_of", "known_at"}
)


def picked(name: str, model: type[BaseModel], names: str, **own: Any) -> type[BaseModel]:
    """A tool's arguments ``name``: the fields of the core's ``model`` that ``names`` lists
    (separated by spaces), bounded, defaulted and described as the core does (a time as
    ``Time``), then the tool's ``own`` (each a type and its ``Field``)."""
    fields: dict[str, Any] = {
        field: (
            Time if field in _TIMES else model.model_fields[field].annotation,
            field_of(model, field),
        )
        for field in names.split()
    }
    created: type[BaseModel] = create_model(name, __base__=_Args, **fields, **own)
    return created


def _scope(given: dict[str, Any]) -> str:
    """The time scope of a call's arguments ``given``, as its answer's first line says it."""
    return scope_text(given["as_of"], given["known_at"])


def _default(method: Callable[..., Any], parameter: str) -> Any:
    """The default of ``Memory.<method>``'s ``parameter``: the schema states the core's own."""
    return inspect.signature(method).parameters[parameter].default


EPISODE = (
    "The id of the conversation session (or document) this comes from, e.g. 'chat-42/3': "
    "recorded on first use; each fact stored belongs to it and is linked to the one before it."
)


AS_OF: Final = SearchInput.model_fields["as_of"].description
KNOWN_AT: Final = SearchInput.model_fields["known_at"].description


FACT_ID = "A fact's id, as earlier tool results show it."


EPISODE_LINKS: Final = SearchInput.model_fields["episode_links"].description
TIME_HINTS: Final = SearchInput.model_fields["time_hints"].description


# The fields of graphmem.FactInput a model gives, as the core describes and bounds them.
StoreArgs = picked(
    "StoreArgs",
    FactInput,
    "text entity key value category tags importance decay_class valid_from supersedes",
    episode=(
        str | None,
        Field(None, min_length=1, max_length=MAX_FIELD_LENGTH, description=EPISODE),
    ),
)


@tool(
    "memory_store",
    "Store a fact",
    "Store one fact in long-term memory so that later conversations can use it. Write one "
    "self-contained statement per call, not a transcript. For an attribute that can change, "
    "give entity, key and value (entity 'alice', key 'city', value 'Paris'): a new value for "
    "the same entity and key supersedes the old fact (action UPDATE), which stays readable "
    "as history. A fact memory already holds is not stored twice (NOOP). Returns the action "
    "(ADD, UPDATE, NOOP or DELETE), the fact with its id, and why.",
    read_only=False,
    args=StoreArgs,
)
def store(memory: Memory, args: BaseModel) -> Result:
    given = args.model_dump(exclude_none=True)
    [result] = memory.store_many([given], episode=given.pop("episode", None))
    lines = [f"{result.action}: {fact_line(result.fact)}" if result.fact else result.action]
    if result.reason:
        lines.append(f"reason: {result.reason}")
    if result.target_ids:
        lines.append(f"{VERDICT_TARGETS[result.action]}: {', '.join(result.target_ids)}")
    return "\n".join(lines), result.to_dict()


# The arguments of graphmem.SearchInput a model gives, as the core describes and bounds them.
SearchArgs = picked(
    "SearchArgs",
    SearchInput,
    "query limit tag as_of known_at include_superseded graph_depth time_hints episode_links rerank",
)


@tool(
    "memory_recall",
    "Search memory",
    "Search long-term memory for the facts relevant to a query (keywords and meaning "
    "combined), best first. Use it when what you were given from memory does not answer the "
    "question. By default only facts true and known now are returned; set as_of to ask what "
    "was true at an earlier date (e.g. where someone lived in 2021, a version since "
    "replaced), known_at to ask what memory believed at an earlier moment. One line per "
    "fact: id, text, [entity.key=value], (category; validity).",
    args=SearchArgs,
)
def search(memory: Memory, args: BaseModel) -> Result:
    given = args.model_dump()
    hits = memory.search(**given)
    lines = [f"{len(hits)} {plural(len(hits), 'fact')}{_scope(given)}, best first:"]
    named = list(dict.fromkeys(h.entity_matched for h in hits if h.entity_matched))
    if named:
        lines.insert(0, f"Entities named: {', '.join(named)}.")
    if hits and hits[0].time_hint is not None:
        lines.insert(0, f"Time words understood: {hits[0].time_hint.describe()}.")
    if memory.degraded:
        lines.insert(0, f"Degraded: {memory.degraded}.")
    lines += [fact_line(h.fact) for h in hits]
    return "\n".join(lines), {"hits": [h.to_dict() for h in hits]}


class RecallArgs(_Args):
    prompt: str = Field(
        min_length=1,
        description="The user's message or the task at hand (its first "
        f"{MAX_TEXT_LENGTH:,} characters are used).",
    )
    max_tokens: int = Field(
        _default(Memory.recall, "max_tokens"),
        ge=1,
        le=MAX_RECALL_TOKENS,
        description="The block's budget in tokens.",
    )
    format: str = Field(
        _default(Memory.recall, "format"),
        json_schema_extra={"enum": list(FORMATS)},
        description="Line format: full '[source/category] text', short 'category: text', "
        "minimal 'text'.",
    )
    graph_depth: int = Field(
        _default(Memory.recall, "graph_depth"),
        ge=0,
        le=MAX_DEPTH,
        description="Also consider facts linked to the best matches, up to this many links away.",
    )
    as_of: Time = Field(None, description=AS_OF)
    known_at: Time = Field(None, description=KNOWN_AT)
    time_hints: bool = Field(_default(Memory.recall, "time_hints"), description=TIME_HINTS)
    episode_links: bool = Field(_default(Memory.recall, "episode_links"), description=EPISODE_LINKS)
    include_cold: bool = Field(
        _default(Memory.recall, "include_cold"),
        description="Also facts made cold (memory_tier), left out by default.",
    )
    profile: bool | None = Field(
        _default(Memory.recall, "profile"),
        description="Lead the block with the profile of each entity the prompt names (a line "
        "of its current values by key, as memory_profile reads them); default: the server's "
        "recall_profile setting.",
    )


@tool(
    "memory_context",
    "Memory for a prompt",
    "Build the <memory-context> block for a prompt: the facts most relevant to it, best "
    "first, one line each, within max_tokens. Use it at the start of a task to load what "
    "memory knows about it; use memory_recall for a targeted search that shows fact ids.",
)
def recall(memory: Memory, args: RecallArgs) -> Result:
    result = memory.recall(**args.model_dump())
    return result.context or "Memory holds nothing relevant to this prompt.", result.to_dict()


class LookupArgs(_Args):
    entity: str = Field(
        min_length=1,
        max_length=MAX_FIELD_LENGTH,
        description="Who or what the facts are about (case-insensitive), e.g. 'user'.",
    )
    key: str | None = Field(
        None, max_length=MAX_FIELD_LENGTH, description="Only facts stating this attribute."
    )
    as_of: Time = Field(None, description=AS_OF)
    known_at: Time = Field(None, description=KNOWN_AT)


@tool(
    "memory_lookup",
    "Look up an entity",
    "Exact lookup of the facts about one entity, optionally one attribute (entity 'user', "
    "key 'email'), most confident and newest first; no search ranking. Use it when you know "
    "what the fact is about; memory_recall otherwise.",
)
def lookup(memory: Memory, args: LookupArgs) -> Result:
    facts = memory.lookup(**args.model_dump())
    about = f"{args.entity}.{args.key}" if args.key else args.entity
    lines = [
        f"{len(facts)} {plural(len(facts), 'fact')} about {about}"
        f"{scope_text(args.as_of, args.known_at)}:"
    ]
    lines += [fact_line(f) for f in facts]
    return "\n".join(lines), {"facts": [f.to_dict() for f in facts]}


def _name(description: str) -> Any:
    """A name an entity tool requires, bounded as the core bounds an entity's."""
    return Field(min_length=1, max_length=MAX_FIELD_LENGTH, description=description)


class EntitiesArgs(_Args):
    name: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_FIELD_LENGTH,
        description="Only the entity this name reaches (a name, an alias, a short form or "
        "nickname such as 'Mel'). Default: list them all, the most facts first.",
    )
    limit: int = Field(
        _default(Memory.entities, "limit"),
        ge=1,
        le=MAX_LIMIT,
        description=f"Most entities to list (1 to {MAX_LIMIT:,}).",
    )
    known_at: Time = Field(None, description=ENTITIES_KNOWN_AT)


@tool(
    "memory_entities",
    "List or find entities",
    "The entities memory knows, the most facts first, or the one a name reaches: each with "
    "every name its facts carry (spellings, short forms, nicknames found to be the same "
    "entity) and the aliases declared for it. Use it to see which names memory_lookup "
    "treats as one, before declaring an alias or a merge.",
)
def entities(memory: Memory, args: EntitiesArgs) -> Result:
    if args.name is None:
        found = memory.entities(known_at=args.known_at, limit=args.limit)
    else:
        found = [memory.entity(args.name, known_at=args.known_at)]
    head = (
        f"{len(found)} {plural(len(found), 'entity', 'entities')}{scope_text(None, args.known_at)}:"
    )
    return "\n".join([head, *map(entity_line, found)]), {"entities": [e.to_dict() for e in found]}


class ProfileArgs(_Args):
    entity: str = _name("A name of the entity (a name, an alias, a short form such as 'Mel').")
    as_of: Time = Field(None, description=AS_OF)
    known_at: Time = Field(None, description=KNOWN_AT)
    summary: bool = Field(
        _default(Memory.profile, "summary"),
        description="Also a summary by the server's chat model, citing the facts it rests on "
        "(one request when they changed since the last; none without a chat model).",
    )


@tool(
    "memory_profile",
    "Who an entity is",
    "What memory knows of one entity now (or as_of / known_at a time): its current value of "
    "each attribute (several for a multi-valued one), its other facts, and the entities its "
    "facts are linked to. Use it to answer 'who is X' or before writing about X; "
    "memory_lookup lists every fact instead.",
)
def profile(memory: Memory, args: ProfileArgs) -> Result:
    found = memory.profile(**args.model_dump())
    head = f"{entity_line(found.entity)}{scope_text(args.as_of, args.known_at)}"
    lines = [head, *map(attribute_line, found.attributes), *map(fact_line, found.facts)]
    if found.linked:
        lines.append(
            "linked: " + "; ".join(f"{e.entity.name} ({', '.join(e.types)})" for e in found.linked)
        )
    if found.summary is not None:
        lines.append(f"summary: {found.summary.text}")
    elif found.summary_error is not None:
        lines.append(f"no summary: {found.summary_error}")
    if found.truncated:
        lines.append("(more than shown: the lists are bounded)")
    return "\n".join(lines), found.to_dict()


class AliasArgs(_Args):
    name: str = _name("The other name, e.g. 'Teacher' or 'Mum'.")
    of: str = _name("A name of the entity it names, e.g. 'Mrs Lopez'.")


@tool(
    "memory_alias",
    "Declare another name of an entity",
    "Declare that a name stands for an entity memory knows (the user calls Mrs Lopez "
    "'Teacher'), from now on: memory_lookup, memory_recall and memory_context then reach "
    "the entity's facts by that name too. Returns the entity.",
    read_only=False,
)
def alias(memory: Memory, args: AliasArgs) -> Result:
    entity = memory.alias(args.name, of=args.of)
    return f"{args.name} now names {entity_line(entity)}", {"entity": entity.to_dict()}


class MergeArgs(_Args):
    a: str = _name("A name of the entity kept: its name stays.")
    b: str = _name("A name of the entity merged into it.")


@tool(
    "memory_merge_entities",
    "Merge two entities",
    "Declare that two entities memory keeps apart are one (the user's 'Caroline' is the "
    "'Caroline Lopez' of other facts), from now on, under a's name: every name of either "
    "then reaches the facts of both. Returns the merged entity.",
    read_only=False,
)
def merge_entities(memory: Memory, args: MergeArgs) -> Result:
    entity = memory.merge_entities(args.a, args.b)
    return f"Merged: {entity_line(entity)}", {"entity": entity.to_dict()}


class SplitArgs(_Args):
    alias: str = _name("The name to take out of its entity.")


@tool(
    "memory_split_alias",
    "Split a name off its entity",
    "Take a name out of the entity it was declared or found to be part of, from now on (two "
    "people called 'Mel' are not one): it stands on its own again. Reads with an earlier "
    "known_at still group it as before. Returns the entity it left.",
    read_only=False,
    destructive=True,
)
def split_alias(memory: Memory, args: SplitArgs) -> Result:
    entity = memory.split_alias(args.alias)
    return f"{args.alias} no longer names {entity_line(entity)}", {"entity": entity.to_dict()}


# The fields of graphmem.LinkInput a model gives, as the core describes and bounds them.
LinkArgs = picked("LinkArgs", LinkInput, "source_id target_id type strength valid_from valid_until")


@tool(
    "memory_link",
    "Link two facts",
    "Record a typed, directed relationship between two stored facts: source -[type]-> "
    "target (e.g. a decision CAUSED_BY an incident, a task PART_OF a project). Linking the "
    "same pair with the same type again updates its strength. Versions are linked "
    "(SUPERSEDES) by memory_store itself.",
    read_only=False,
    args=LinkArgs,
)
def link(memory: Memory, args: BaseModel) -> Result:
    made = memory.link(**args.model_dump())
    return (
        f"Linked {made.source_id} -[{made.type}]-> {made.target_id} "
        f"(strength {made.strength:g}; link {made.id})",
        {"link": made.to_dict()},
    )


# The arguments of graphmem.graph.TraverseInput a model gives, as the core describes them.
TraverseArgs = picked(
    "TraverseArgs",
    TraverseInput,
    "ids depth types direction as_of known_at max_nodes",
)


@tool(
    "memory_traverse",
    "Follow links",
    "Walk the links from one or more facts, breadth-first, and return the facts reached "
    "(with their depth) and the links among them. Use it to gather what surrounds a fact: "
    "its causes, parts, dependencies and related facts.",
    args=TraverseArgs,
)
def traverse(memory: Memory, args: BaseModel) -> Result:
    given = args.model_dump()
    found = memory.traverse(**given)
    stopped = f", stopped by {' and '.join(found.truncated_by)}" if found.truncated else ""
    lines = [
        f"{len(found.nodes)} {plural(len(found.nodes), 'fact')} and {len(found.edges)} "
        f"{plural(len(found.edges), 'link')}{_scope(given)}{stopped}:"
    ]
    lines += [f"depth {node.depth}  {fact_line(node.fact)}" for node in found.nodes]
    lines += [
        f"{e.source_id} -[{e.type}]-> {e.target_id} (strength {e.strength:g})" for e in found.edges
    ]
    return "\n".join(lines), found.to_dict()


class IdArgs(_Args):
    id: str = Field(min_length=1, description=FACT_ID)


@tool(
    "memory_history",
    "History of a fact",
    "Every version of a fact, oldest first: the facts it replaced and those that replaced "
    "it, each with the period it was valid. Use it to see how something changed over time.",
)
def history(memory: Memory, args: IdArgs) -> Result:
    versions = memory.history(args.id)
    lines = [f"{len(versions)} {plural(len(versions), 'version')}, oldest first:"]
    lines += [fact_line(f) for f in versions]
    return "\n".join(lines), {"versions": [f.to_dict() for f in versions]}


@tool(
    "memory_forget",
    "Forget a fact",
    "Forget a fact that is wrong, or that the user wants forgotten: current reads stop "
    "returning it (reads with an earlier known_at still see it). When something changed in "
    "the world instead, store the new fact with memory_store, which keeps the old one as "
    "history.",
    read_only=False,
    destructive=True,
)
def forget(memory: Memory, args: IdArgs) -> Result:
    fact = memory.forget(args.id)
    return (
        f"Forgot {fact_line(fact)}\nCurrent reads no longer return it; reads with an earlier "
        "known_at still do.",
        {"fact": fact.to_dict()},
    )


class TierArgs(_Args):
    id: str = Field(min_length=1, description=FACT_ID)
    tier: Tier = Field(
        description="pinned: in every memory context, first; cold: left out of memory contexts "
        "(memory_recall still finds it); normal: neither."
    )


@tool(
    "memory_tier",
    "Pin a fact, or make it cold",
    "Pin a fact that must be in every memory context (a blocker, a standing instruction): "
    "memory_context puts pinned facts first, whatever the prompt; a newer version of it "
    "stays pinned. Make a fact cold when it should stay out of memory contexts unless "
    "asked (a closed task); memory_recall still finds it. normal undoes either.",
    read_only=False,
)
def tier(memory: Memory, args: TierArgs) -> Result:
    fact = memory.set_tier(args.id, args.tier)
    return f"Now {args.tier}: {fact_line(fact)}", {"fact": fact.to_dict()}


class CheckpointArgs(_Args):
    action: Literal["save", "restore"] = Field(
        description="save: record the working state now; restore: the newest saved one."
    )
    intent: str | None = Field(
        None,
        max_length=MAX_FIELD_LENGTH,
        description="For save (required): what you are about to do, e.g. 'migrate the billing "
        "table'.",
    )
    state: JsonValue = Field(
        None,
        description="For save: the working state to come back to, any JSON value (the whole "
        f"checkpoint at most {MAX_NOTE_LENGTH:,} characters as JSON).",
    )
    expected_outcome: str | None = Field(
        None, max_length=MAX_FIELD_LENGTH, description="For save: what should come of it."
    )
    working_files: list[str] = Field(
        default_factory=list,
        max_length=MAX_CHECKPOINT_FILES,
        description="For save: the files you are working on.",
    )


@tool(
    "memory_checkpoint",
    "Save or restore a checkpoint",
    "Save your working state before a risky or long step (action 'save': intent, state as "
    "any JSON value, expected_outcome, working_files), and get the newest one back after a "
    "failure, a restart or a new session (action 'restore'). A checkpoint expires after a "
    "few hours (decay class checkpoint); restore returns nothing when none is left.",
    read_only=False,
    writes_when=lambda args: args.action == "save",
)
def checkpoint(memory: Memory, args: CheckpointArgs) -> Result:
    if args.action == "save":
        if args.intent is None:
            raise InvalidInput("intent is required to save a checkpoint", field="intent")
        fact = memory.checkpoint(
            args.intent,
            state=args.state,
            expected_outcome=args.expected_outcome,
            working_files=args.working_files,
        )
        return (
            f"Saved checkpoint {fact_line(fact)}\nRestore it with action 'restore' (it expires "
            f"{moment_text(fact.expires_at) if fact.expires_at else 'never'}).",
            {"fact": fact.to_dict()},
        )
    found = memory.restore_checkpoint()
    if found is None:
        return "No checkpoint saved (or every one has expired).", {"checkpoint": None}
    lines = [
        f"Newest checkpoint, saved {moment_text(found.fact.recorded_at)}: {found.intent}",
        f"expected outcome: {found.expected_outcome or '(not given)'}",
        f"working files: {', '.join(found.working_files) or '(none)'}",
        f"state: {json.dumps(found.state, sort_keys=True)}",
    ]
    return "\n".join(lines), {"checkpoint": found.to_dict()}


class PruneArgs(_Args):
    dry_run: bool = Field(False, description="Only count what would be removed.")
    soft: bool = Field(
        False, description="Skip deleting expired facts; only lower ageing ones' confidence."
    )


@tool(
    "memory_prune",
    "Prune memory",
    "Tidy memory by its decay rules: delete facts past their expiry, lower the confidence of "
    "ageing ones, and delete those whose confidence has faded. dry_run only counts. The "
    "server also does this on its own schedule; call it after a large clean-up.",
    read_only=False,
    destructive=True,
    writes_when=lambda args: not args.dry_run,
)
def prune(memory: Memory, args: PruneArgs) -> Result:
    report = memory.prune(dry_run=args.dry_run, soft=args.soft)
    verb = "Would remove" if args.dry_run else "Removed"
    return (
        f"{verb} {report.expired} expired and {report.low_confidence} faded "
        f"{plural(report.expired + report.low_confidence, 'fact')}; "
        f"{report.decayed} ageing {plural(report.decayed, 'fact')} lost confidence.",
        report.to_dict(),
    )


class MaintainArgs(_Args):
    jobs: list[str] | None = Field(
        None,
        max_length=len(REGISTRY),
        json_schema_extra={"items": {"type": "string", "enum": list(REGISTRY)}},
        description=f"Which jobs: {', '.join(REGISTRY)}. Default: every job that is due.",
    )
    force: bool = Field(False, description="Run them even if they are not due.")
    list_runs: bool = Field(
        False, description="Only list the newest recorded runs (of the jobs given); run nothing."
    )


@tool(
    "memory_maintain",
    "Run or list memory maintenance",
    "Run the maintenance jobs that are due (or those named, with force): "
    f"{', '.join(REGISTRY)}; the server runs them on its own schedule, so call this only "
    "after a large change. list_runs shows the newest recorded runs: what each changed and "
    "why one failed.",
    read_only=False,
    writes_when=lambda args: not args.list_runs,
)
def maintain(memory: Memory, args: MaintainArgs) -> Result:
    jobs = None if args.jobs is None else checked_jobs(args.jobs)
    if args.list_runs:
        job = jobs[0] if jobs and len(jobs) == 1 else None
        runs = memory.maintenance_runs(job=job, limit=20)
        head = f"{len(runs)} recorded {plural(len(runs), 'run')}, newest first."
    else:
        runs = memory.maintain(jobs, force=args.force)
        head = f"Ran {len(runs)} {plural(len(runs), 'job')}." if runs else "Nothing was due."
    lines = []
    for run in runs:
        changed = ", ".join(f"{n} {kind}" for kind, n in sorted(run.changed.items()))
        line = f"{run.job}: {run.status} at {run.started_at:%Y-%m-%d %H:%M:%S}"
        line += f"; {changed}" if changed else ""
        line += f"; {run.requests} {plural(run.requests, 'model request')}" if run.requests else ""
        lines.append(line + (f"; {run.error}" if run.error else ""))
    return "\n".join([head, *lines]), {"runs": [r.to_dict() for r in runs]}


class ReflectArgs(_Args):
    window_days: float | None = Field(
        None,
        gt=0,
        le=3650,
        description="Days of recent facts to read (default: the server's setting, 14).",
    )


@tool(
    "memory_reflect",
    "Reflect on recent memory",
    "Look for patterns across the facts of the last days (habits, recurring problems, "
    "preferences shown several times), each backed by at least two facts, and rules to "
    "follow from them; they are stored as facts (categories pattern and rule) linked to "
    "their evidence, and memory_context shows them like any fact. Asks the server's chat "
    "model (one request for patterns, one for rules). Call it at the end of a long task "
    "or a session.",
    read_only=False,
)
def reflect(memory: Memory, args: ReflectArgs) -> Result:
    report = memory.reflect(window_days=args.window_days)
    lines = [f"Pattern: {fact_line(f)}" for f in report.patterns]
    lines += [f"Rule: {fact_line(f)}" for f in report.rules]
    head = (
        f"Found {len(report.patterns)} new {plural(len(report.patterns), 'pattern')} and "
        f"{len(report.rules)} new {plural(len(report.rules), 'rule')} ({report.requests} "
        f"{plural(report.requests, 'model request')})."
    )
    if report.error:
        head += f" An answer was not used: {report.error}."
    return "\n".join([head, *lines]), {
        "patterns": [f.to_dict() for f in report.patterns],
        "rules": [f.to_dict() for f in report.rules],
        "requests": report.requests,
        "ignored": report.ignored,
        "problem": report.error,
    }


class ConsolidateArgs(_Args):
    dry_run: bool = Field(False, description="Only list the clusters of near-duplicates.")


@tool(
    "memory_consolidate",
    "Merge near-duplicate facts",
    "Merge clusters of facts that say nearly the same thing (paraphrases stored over time) "
    "into one fact each, which replaces them; the old ones stay in history. Contact "
    "details, ids and numbers are never merged. dry_run only lists the clusters.",
    read_only=False,
    destructive=True,
    writes_when=lambda args: not args.dry_run,
)
def consolidate(memory: Memory, args: ConsolidateArgs) -> Result:
    report = memory.consolidate(dry_run=args.dry_run)
    if args.dry_run:
        n = len(report.clusters)
        head = f"Would merge {n} {plural(n, 'cluster')} of near-duplicates."
        lines = [", ".join(c) for c in report.clusters]
    else:
        head = (
            f"Merged {len(report.merged)} {plural(len(report.merged), 'cluster')}: {report.superseded} "
            f"{plural(report.superseded, 'fact')} superseded."
        )
        lines = [f"Merged: {fact_line(f)}" for f in report.merged]
    if report.error:
        head += f" An answer was not used: {report.error}."
    return "\n".join([head, *lines]), {
        "clusters": report.clusters,
        "merged": [f.to_dict() for f in report.merged],
        "superseded": report.superseded,
        "requests": report.requests,
        "dry_run": report.dry_run,
        "problem": report.error,
    }


class PurgeArgs(_Args):
    ids: list[str] | None = Field(None, min_length=1, description="Erase these facts. " + FACT_ID)
    entity: str | None = Field(
        None, min_length=1, max_length=MAX_FIELD_LENGTH, description="Erase every fact about it."
    )
    source: str | None = Field(
        None, min_length=1, max_length=MAX_FIELD_LENGTH, description="Erase every fact from it."
    )
    episode: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_FIELD_LENGTH,
        description="Erase every fact of this conversation session or document.",
    )
    dry_run: bool = Field(False, description="Only count what would be erased.")


@tool(
    "memory_purge",
    "Erase facts for good",
    "Erase facts for good when the user asks that something be deleted, not just "
    "forgotten: every fact matching all the filters given (ids, entity, source, episode), "
    "in any state, with its links and vectors; nothing of it stays on disk, and no read, "
    "whatever its known_at, sees it again. At least one filter is required. Use dry_run "
    "first to see how much would go.",
    read_only=False,
    destructive=True,
)
def purge(memory: Memory, args: PurgeArgs) -> Result:
    report = memory.purge(**args.model_dump())
    verb = "Would erase" if report.dry_run else "Erased"
    covered = f" (names: {', '.join(report.names)})" if report.names else ""
    return (
        f"{verb} {report.facts} {plural(report.facts, 'fact')}, {report.links} "
        f"{plural(report.links, 'link')}, {report.vectors} {plural(report.vectors, 'vector')} "
        f"and {report.episodes} emptied {plural(report.episodes, 'episode')}{covered}",
        report.to_dict(),
    )


class ReadArgs(_Args):
    path: str = Field(
        min_length=1,
        max_length=MAX_FIELD_LENGTH,
        description="The document's path: the part of a fact's source before ':start-end'.",
    )
    start: int = Field(1, ge=1, description="First line to read (lines count from 1).")
    end: int | None = Field(
        None,
        ge=1,
        description=f"Last line, included (default: to the end, at most {MAX_READ_LINES:,} lines).",
    )


@tool(
    "memory_read",
    "Read a note's lines",
    "Read lines of a markdown note memory has indexed, as the file is now. A fact that "
    "came from a note has source 'path:start-end'; call this with that path and range (or "
    "a wider one) to see exactly what the note says around it.",
)
def read_lines(memory: Memory, args: ReadArgs) -> Result:
    text = memory.read_lines(args.path, args.start, args.end)
    last = args.start + text.count("\n") if text else args.start
    return text, {"path": args.path, "start": args.start, "end": last, "text": text}


# The arguments of graphmem.CaptureInput, as the core describes and bounds them.
class CaptureArgs(_Args):
    messages: list[MessageInput] = field_of(CaptureInput, "messages")
    episode: str | None = field_of(CaptureInput, "episode")
    keep: Keep = field_of(CaptureInput, "keep")


@tool(
    "memory_capture",
    "Capture a turn",
    "Keep a conversation turn's messages, and what they state that is worth remembering: "
    "each user and assistant message is kept as a turn of the episode (found again by "
    "memory_recall and memory_context with its speaker and date), and its memorable "
    "sentences (preferences, decisions, personal details, contacts, conventions) become "
    "facts through the same rules as memory_store, each linked to its turn; keep='facts' "
    "stores the facts alone. Messages holding secrets (passwords, keys, card numbers) are "
    "skipped whole. Pass the turn's messages in order, with the session as episode. "
    "Returns what was done with each turn and fact.",
    read_only=False,
)
def capture(memory: Memory, args: CaptureArgs) -> Result:
    results = memory.capture(args.model_dump()["messages"], episode=args.episode, keep=args.keep)
    written = [r for r in results if r.action in ("ADD", "UPDATE")]
    turns = sum(r.kind == "turn" for r in written)
    facts = len(written) - turns
    lines = [f"{turns} {plural(turns, 'turn')} kept, {facts} {plural(facts, 'fact')} stored:"]
    for r in results:
        if r.fact is None:
            lines.append(f"{r.action} {r.kind} of message {r.message} ({r.role}): {r.reason}")
        else:
            drawn = f" (from turn {r.turn_id})" if r.turn_id else ""
            lines.append(f"{r.action} {r.kind} ({r.role}): {fact_line(r.fact)}{drawn}")
    return "\n".join(lines), {"results": [r.to_dict() for r in results]}


#: Every tool, in the order clients list them.
TOOLS: Final = tuple(_CATALOGUE)


BY_NAME: Final = {spec.name: spec for spec in TOOLS}


def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema as clients and models read it best: no titles, nested models
    inlined (no $ref), and an optional field as its plain type rather than "X or null"."""
    raw = model.model_json_schema()
    definitions = raw.pop("$defs", {})

    def clean(node: Any) -> Any:
        if isinstance(node, list):
            return [clean(n) for n in node]
        if not isinstance(node, dict):
            return node
        node = dict(node)
        if "$ref" in node:
            node = {**definitions[node.pop("$ref").rsplit("/", 1)[1]], **node}
        options = node.get("anyOf", [])
        if len(options) == 2 and {"type": "null"} in options:
            del node["anyOf"]
            [plain] = [o for o in options if o != {"type": "null"}]
            node = {**plain, **node}  # the field's own description, enum or items win
        if "default" in node and node["default"] is None:
            del node["default"]
        return {k: clean(v) for k, v in node.items() if k != "title"}

    schema: dict[str, Any] = clean(raw)
    return schema
