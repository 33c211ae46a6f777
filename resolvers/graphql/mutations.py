"""The Mutation root: writes. Each returns a payload whose ``error`` carries an expected failure
(invalid input, not found, conflict, forbidden) as data; nothing is written when it is set."""

from collections.abc import Awaitable, Callable
from enum import Enum
from typing import Annotated, Any, Final, TypeVar, cast

import strawberry
from strawberry.tools import merge_types
from strawberry.types import Info, get_object_definition

import graphmem
from graphmem.capture import TURN_PART_CHARS
from graphmem.episodes import DEFAULT_KIND, EPISODE_KINDS
from graphmem.limits import (
    MAX_BATCH,
    MAX_CHECKPOINT_FILES,
    MAX_FIELD_LENGTH,
    MAX_NOTE_LENGTH,
)
from graphmem.models import CaptureInput, Keep

from ..context import Context
from .arguments import takes
from .types import (
    JSON,
    NOW,
    CaptureAction,
    CaptureKeep,
    Checkpoint,
    DateTime,
    Entity,
    Fact,
    FactKind,
    Link,
    LinkType,
    MaintenanceJob,
    MaintenanceRun,
    StoreAction,
    UserError,
)

P = TypeVar("P")


@strawberry.input(description="A checkpoint to save (`saveCheckpoint`).")
class CheckpointInput:
    intent: str = strawberry.field(
        description=f"What the agent sets out to do (at most {MAX_FIELD_LENGTH:,} characters)."
    )
    state: JSON | None = strawberry.field(
        default=None,
        description=f"The working state, any JSON value (the whole checkpoint at most "
        f"{MAX_NOTE_LENGTH:,} characters as JSON).",
    )
    expected_outcome: str | None = strawberry.field(
        default=None, description="What should come of it."
    )
    working_files: list[str] | None = strawberry.field(
        default=None, description=f"The files being worked on (at most {MAX_CHECKPOINT_FILES})."
    )


@strawberry.type(description="The result of `saveCheckpoint`.")
class CheckpointPayload:
    checkpoint: Checkpoint | None = strawberry.field(description="What was saved.")
    error: UserError | None = strawberry.field(description="Set when nothing was saved.")


@strawberry.experimental.pydantic.input(
    model=graphmem.FactInput,
    all_fields=True,
    description="A fact to store. Only `text` is required.",
)
class FactInput:
    """``graphmem.FactInput`` as GraphQL reads it: its fields, defaults and descriptions, with
    GraphQL's own types for times and the id it supersedes."""

    valid_from: DateTime | None = None
    source_date: DateTime | None = None
    expires_at: DateTime | None = None
    supersedes: strawberry.ID | None = None


def _fact(given: FactInput) -> dict[str, Any]:
    """The fields ``given`` sets, as ``Memory.store_many`` takes them."""
    values = {name: getattr(given, name) for name in graphmem.FactInput.model_fields}
    return {
        k: str(v) if k == "supersedes" and v is not None else v
        for k, v in values.items()
        if v is not None
    }


@strawberry.experimental.pydantic.input(
    model=graphmem.LinkInput,
    all_fields=True,
    description="A link to make: `source -[type]-> target`.",
)
class LinkInput:
    """``graphmem.LinkInput`` as GraphQL reads it, with GraphQL's own types for ids, the link
    type, times and the metadata."""

    source_id: strawberry.ID
    target_id: strawberry.ID
    type: LinkType
    strength: strawberry.auto
    valid_from: DateTime | None = None
    valid_until: DateTime | None = None
    metadata: JSON | None = None


@strawberry.input(
    description="The unit a batch of facts comes from (a conversation session, a document), "
    "recorded on first use; naming it again with other attributes is a CONFLICT."
)
class EpisodeInput:
    id: str = strawberry.field(description="The episode's id, chosen by the caller.")
    kind: str | None = strawberry.field(
        default=None,
        description=f"One of {', '.join(EPISODE_KINDS)} (default {DEFAULT_KIND}).",
    )
    source: str | None = strawberry.field(
        default=None, description="Where it came from (a channel, a file path)."
    )
    time: DateTime | None = strawberry.field(
        default=None, description="When it happened or was written (default: now)."
    )
    metadata: JSON | None = strawberry.field(
        default=None, description="A JSON object kept with the episode."
    )

    def to_core(self) -> dict[str, Any]:
        given = {
            "id": self.id,
            "kind": self.kind,
            "source": self.source,
            "time": self.time,
            "metadata": self.metadata,
        }
        return {k: v for k, v in given.items() if v is not None}


def _episode(episode: EpisodeInput | None) -> dict[str, Any] | None:
    return None if episode is None else episode.to_core()


@strawberry.experimental.pydantic.input(
    model=graphmem.models.MessageInput,
    all_fields=True,
    description=graphmem.models.MessageInput.__doc__,
)
class MessageInput:
    """``graphmem.models.MessageInput`` as GraphQL reads it."""

    role: strawberry.auto
    content: strawberry.auto


#: The GraphQL types of ``captureMessages``' arguments.
CAPTURE_TYPES: Final = {
    "messages": list[MessageInput],
    "episode": EpisodeInput | None,
    "keep": CaptureKeep,
}


@strawberry.type(
    description="What capture did with one turn (a message, or a part of a long one, kept as "
    "it was said), one fact drawn from a sentence, or one skipped message."
)
class CaptureResult:
    action: CaptureAction = strawberry.field(description="ADD, UPDATE, DELETE, NOOP or SKIP.")
    kind: FactKind = strawberry.field(
        description="TURN for a message kept as it was said, or the SKIP of a message nothing "
        "of which is kept (a secret, a role not captured, no text); FACT for a sentence drawn "
        "from a message, or the SKIP of a message no fact is drawn from (`keep: FACTS`)."
    )
    fact: Fact | None = strawberry.field(
        description="The turn or fact stored, repeated (NOOP) or retracted (DELETE)."
    )
    reason: str = strawberry.field(description="Why: the write rules' reason, or why skipped.")
    message: int = strawberry.field(description="The index of the message it came from.")
    role: str = strawberry.field(description="That message's role.")
    text: str | None = strawberry.field(
        description="The turn's or the sentence's text; null when a whole message was skipped "
        "(a secret is never repeated)."
    )
    target_ids: list[strawberry.ID] = strawberry.field(
        description="Facts superseded (UPDATE), retracted (DELETE) or repeated (NOOP)."
    )
    turn_id: strawberry.ID | None = strawberry.field(
        description="For a fact, the turn it was drawn from (linked `fact -PART_OF-> turn`); "
        "null for a turn, for a fact that is the whole message (it stands for the turn), and "
        "with `keep: FACTS`."
    )


@strawberry.type(description="The result of `captureMessages`.")
class CapturePayload:
    results: list[CaptureResult] = strawberry.field(
        description="Per message, in order: its turn (its parts, when long) or a SKIP saying "
        "why nothing of it was kept, then the facts drawn from it."
    )
    error: UserError | None = strawberry.field(
        description="Set when the messages were refused (then nothing was stored)."
    )


@strawberry.type(description="What storing one fact did.")
class StoreResult:
    action: StoreAction | None = strawberry.field(description="ADD, UPDATE, DELETE or NOOP.")
    fact: Fact | None = strawberry.field(description="The fact stored, or the one it repeats.")
    reason: str | None = strawberry.field(description="Why the write rules chose the action.")
    target_ids: list[strawberry.ID] = strawberry.field(
        description="Facts superseded (UPDATE), retracted (DELETE) or repeated (NOOP)."
    )


@strawberry.type(description="The result of `storeFact`.")
class StoreFactPayload(StoreResult):
    error: UserError | None = strawberry.field(description="Set when nothing was stored.")


@strawberry.type(description="The result of `storeFacts`: all stored, or none.")
class StoreFactsPayload:
    results: list[StoreResult] = strawberry.field(description="One per input, in input order.")
    error: UserError | None = strawberry.field(
        description="Set when nothing was stored (then `results` is empty)."
    )


@strawberry.type(description="The result of `linkFacts` or `unlink`.")
class LinkPayload:
    link: Link | None = strawberry.field(description="The link made or retracted.")
    error: UserError | None = strawberry.field(description="Set when nothing changed.")


@strawberry.type(description="The result of `alias`, `mergeEntities` and `splitAlias`.")
class EntityPayload:
    entity: Entity | None = strawberry.field(
        description="The entity as it is now: the one aliased or merged into, or the one a "
        "split name left."
    )
    error: UserError | None = strawberry.field(description="Set when nothing was declared.")


@strawberry.type(description="The result of `rebuildEntities`.")
class RebuildEntitiesPayload:
    names: int = strawberry.field(description="How many entity names the facts carry.")
    error: UserError | None = strawberry.field(description="Set when nothing was rebuilt.")


@strawberry.type(description="The result of `pinFact`, `unpinFact` and `setCold`.")
class TierPayload:
    fact: Fact | None = strawberry.field(description="The fact as it is now.")
    error: UserError | None = strawberry.field(description="Set when nothing changed.")


@strawberry.type(description="The result of `forgetFact`.")
class ForgetPayload:
    fact: Fact | None = strawberry.field(description="The fact as it was before it was forgotten.")
    error: UserError | None = strawberry.field(description="Set when nothing changed.")


@strawberry.type(description="The result of `purgeFact`.")
class PurgePayload:
    purged_id: strawberry.ID | None = strawberry.field(description="The id deleted for good.")
    error: UserError | None = strawberry.field(description="Set when nothing was deleted.")


@strawberry.input(
    description="Which facts `purgeFacts` erases: every fact all the given filters match (at "
    "least one is required)."
)
class PurgeFilter:
    ids: list[strawberry.ID] | None = strawberry.field(default=None, description="These facts.")
    entity: str | None = strawberry.field(
        default=None, description="Every fact about this entity (case-insensitive)."
    )
    source: str | None = strawberry.field(default=None, description="Every fact from this source.")
    episode: str | None = strawberry.field(default=None, description="Every fact of this episode.")


@strawberry.type(description="The result of `purgeFacts`: how much was (or would be) erased.")
class PurgeFactsPayload:
    facts: int = strawberry.field(description="Facts erased.")
    links: int = strawberry.field(description="Links erased with them.")
    vectors: int = strawberry.field(description="Vectors erased with them.")
    episodes: int = strawberry.field(description="Episodes erased because they were left empty.")
    dry_run: bool = strawberry.field(description="True when only counted.")
    names: list[str] = strawberry.field(
        description="With an entity filter, the names it covered (erased with its facts when "
        "none of them is left): the names the entity's facts carry and the aliases declared "
        "for it, its first name first. Empty without an entity filter."
    )
    error: UserError | None = strawberry.field(description="Set when nothing was erased.")


@strawberry.type(description="The result of `prune`.")
class PrunePayload:
    expired: int = strawberry.field(description="Expired facts deleted.")
    decayed: int = strawberry.field(description="Ageing facts whose confidence was lowered.")
    low_confidence: int = strawberry.field(description="Faded facts deleted.")
    dry_run: bool = strawberry.field(description="True when only counted, nothing changed.")
    error: UserError | None = strawberry.field(description="Set when nothing was done.")


@strawberry.type(description="The result of `maintain`.")
class MaintainPayload:
    runs: list[MaintenanceRun] = strawberry.field(
        description="The runs, in the order they ran (none when nothing was due)."
    )
    error: UserError | None = strawberry.field(description="Set when nothing ran.")


@strawberry.type(description="How many facts took one category.")
class Relabelled:
    category: str = strawberry.field(description="The category they took.")
    count: int = strawberry.field(description="How many.")


@strawberry.type(description="The result of `autoClassify`.")
class AutoClassifyPayload:
    relabelled: list[Relabelled] = strawberry.field(description="Facts relabelled, by category.")
    discovered: list[str] = strawberry.field(description="Categories discovered by this run.")
    requests: int = strawberry.field(description="Chat model requests made.")
    problem: str | None = strawberry.field(
        description="Why an answer of the model was not used (its facts left as they were)."
    )
    error: UserError | None = strawberry.field(description="Set when nothing was asked.")


@strawberry.type(description="The result of `reflect`.")
class ReflectPayload:
    patterns: list[Fact] = strawberry.field(description="The patterns stored.")
    rules: list[Fact] = strawberry.field(description="The rules stored.")
    requests: int = strawberry.field(description="Chat model requests made.")
    ignored: int = strawberry.field(
        description="Answer entries passed over (too little evidence, no text, a repeat)."
    )
    problem: str | None = strawberry.field(
        description="Why an answer of the model was not used (nothing of it stored)."
    )
    error: UserError | None = strawberry.field(description="Set when nothing was asked.")


@strawberry.type(description="The result of `consolidate`.")
class ConsolidatePayload:
    clusters: list[list[strawberry.ID]] = strawberry.field(
        description="The clusters of near-duplicates found, as fact ids."
    )
    merged: list[Fact] = strawberry.field(
        description="The facts that replaced clusters (none on a dry run)."
    )
    superseded: int = strawberry.field(description="Facts the merged facts superseded.")
    requests: int = strawberry.field(description="Chat model requests made.")
    dry_run: bool = strawberry.field(description="True when only listed.")
    problem: str | None = strawberry.field(
        description="Why an answer of the model was not used (its clusters left as they are)."
    )
    error: UserError | None = strawberry.field(description="Set when nothing was done.")


@strawberry.type(description="Facts stored and captured.")
class FactWrites:
    @strawberry.mutation(description="Store one fact through the write rules (dedup, update).")
    async def store_fact(
        self,
        info: Info[Context, None],
        input: Annotated[FactInput, strawberry.argument(description="The fact.")],
    ) -> StoreFactPayload:
        async def store() -> StoreFactPayload:
            [result] = await info.context.write(info.context.memory.store_many, [_fact(input)])
            return StoreFactPayload(**_result(result), error=None)

        return await _guarded(info, store, _failed_store)

    @strawberry.mutation(
        description=f"Store a batch in one transaction (at most {MAX_BATCH:,}): all stored, or none."
    )
    async def store_facts(
        self,
        info: Info[Context, None],
        inputs: Annotated[list[FactInput], strawberry.argument(description="The facts.")],
        episode: Annotated[
            EpisodeInput | None,
            strawberry.argument(
                description="The episode the facts come from: each added fact belongs to it and "
                "is linked to the one before it there."
            ),
        ] = None,
    ) -> StoreFactsPayload:
        async def store() -> StoreFactsPayload:
            results = await info.context.write(
                info.context.memory.store_many,
                [_fact(i) for i in inputs],
                episode=_episode(episode),
            )
            return StoreFactsPayload(
                results=[StoreResult(**_result(r)) for r in results], error=None
            )

        return await _guarded(info, store, lambda e: StoreFactsPayload(results=[], error=e))

    @strawberry.mutation(
        description="Keep a conversation's messages, and the facts they state (auto-capture): "
        "each user and assistant message without sensitive content is kept as a turn of the "
        f"episode (a long one in parts of at most {TURN_PART_CHARS:,} characters), and its "
        "memorable sentences are drawn from it as facts through the write rules, each linked to "
        "its turn; `keep: FACTS` keeps the facts alone. One batch (docs/agents.md)."
    )
    @takes(CaptureInput, *CaptureInput.model_fields, types=CAPTURE_TYPES)
    async def capture_messages(self, info: Info[Context, None], **given: Any) -> CapturePayload:
        async def capture() -> CapturePayload:
            results = await info.context.write(
                info.context.memory.capture,
                [{"role": m.role, "content": m.content} for m in given["messages"]],
                episode=_episode(given["episode"]),
                keep=cast(Keep, given["keep"].value),
            )
            return CapturePayload(
                results=[
                    CaptureResult(
                        action=CaptureAction(r.action),
                        kind=FactKind(r.kind),
                        fact=None if r.fact is None else Fact.of(r.fact, NOW),
                        reason=r.reason,
                        message=r.message,
                        role=r.role,
                        text=r.text,
                        target_ids=[strawberry.ID(i) for i in r.target_ids],
                        turn_id=None if r.turn_id is None else strawberry.ID(r.turn_id),
                    )
                    for r in results
                ],
                error=None,
            )

        return await _guarded(info, capture, lambda e: CapturePayload(results=[], error=e))


@strawberry.type(description="Links made and retracted.")
class LinkWrites:
    @strawberry.mutation(description="Link two facts, or update the strength of their live link.")
    async def link_facts(
        self,
        info: Info[Context, None],
        input: Annotated[LinkInput, strawberry.argument(description="The link.")],
    ) -> LinkPayload:
        async def link() -> LinkPayload:
            made = await info.context.write(
                info.context.memory.link,
                str(input.source_id),
                str(input.target_id),
                input.type.name,
                strength=input.strength,
                valid_from=input.valid_from,
                valid_until=input.valid_until,
                # a JSON object, or InvalidInput from link: checked there
                metadata=cast("dict[str, Any] | None", input.metadata),
            )
            return LinkPayload(link=Link.of(made, NOW), error=None)

        return await _guarded(info, link, lambda e: LinkPayload(link=None, error=e))

    @strawberry.mutation(
        description="Retract a link: current reads stop following it; reads known at an earlier "
        "time still see it."
    )
    async def unlink(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="The link's id.")],
    ) -> LinkPayload:
        async def unlink() -> LinkPayload:
            removed = await info.context.write(info.context.memory.unlink, str(id))
            return LinkPayload(link=Link.of(removed, NOW), error=None)

        return await _guarded(info, unlink, lambda e: LinkPayload(link=None, error=e))


@strawberry.type(description="Entity names declared, and counted again.")
class EntityWrites:
    @strawberry.mutation(
        description="Declare `name` another name of the entity `of` reaches, from now on (a "
        "read known at an earlier time does not see it); NOT_FOUND when `of` reaches none."
    )
    async def alias(
        self,
        info: Info[Context, None],
        name: Annotated[str, strawberry.argument(description="The name to declare.")],
        of: Annotated[str, strawberry.argument(description="A name of the entity it names.")],
    ) -> EntityPayload:
        return await _entity(info, lambda: info.context.memory.alias(name, of=of))

    @strawberry.mutation(
        description="Declare the entity `b` reaches to be the one `a` reaches, from now on, "
        "under `a`'s name; NOT_FOUND when either reaches none."
    )
    async def merge_entities(
        self,
        info: Info[Context, None],
        a: Annotated[str, strawberry.argument(description="A name of the entity kept.")],
        b: Annotated[str, strawberry.argument(description="A name of the entity merged in.")],
    ) -> EntityPayload:
        return await _entity(info, lambda: info.context.memory.merge_entities(a, b))

    @strawberry.mutation(
        description="Take a name out of its entity from now on, whether it was declared or "
        "found by the rules; the answer is the entity it left. NOT_FOUND for a name no entity "
        "has, CONFLICT for an entity's only name or a name others are declared on."
    )
    async def split_alias(
        self,
        info: Info[Context, None],
        alias: Annotated[str, strawberry.argument(description="The name to take out.")],
    ) -> EntityPayload:
        return await _entity(info, lambda: info.context.memory.split_alias(alias))

    @strawberry.mutation(
        description="Count the entity names again from the facts (they are derived, like the "
        "vector index: counted as facts are written, so this is needed only to repair them)."
    )
    async def rebuild_entities(self, info: Info[Context, None]) -> RebuildEntitiesPayload:
        async def rebuild() -> RebuildEntitiesPayload:
            names = await info.context.write(info.context.memory.rebuild_entities)
            return RebuildEntitiesPayload(names=names, error=None)

        return await _guarded(info, rebuild, lambda e: RebuildEntitiesPayload(names=0, error=e))


@strawberry.type(description="Checkpoints saved.")
class CheckpointWrites:
    @strawberry.mutation(
        description="Save the agent's working state before a risky step; `checkpoint` gives "
        "back the newest one."
    )
    async def save_checkpoint(
        self,
        info: Info[Context, None],
        input: Annotated[CheckpointInput, strawberry.argument(description="What to save.")],
    ) -> CheckpointPayload:
        async def save() -> CheckpointPayload:
            memory = info.context.memory
            fact = await info.context.write(
                memory.checkpoint,
                input.intent,
                state=input.state,
                expected_outcome=input.expected_outcome,
                working_files=input.working_files or (),
            )
            saved = graphmem.checkpoints.from_fact(fact)
            assert saved is not None
            return CheckpointPayload(checkpoint=Checkpoint.of(saved), error=None)

        return await _guarded(info, save, lambda e: CheckpointPayload(checkpoint=None, error=e))


@strawberry.type(description="Facts pinned and made cold.")
class TierWrites:
    @strawberry.mutation(
        description="Pin a live fact: it leads every recall block, whatever the prompt, until "
        "unpinned (a version that supersedes it stays pinned)."
    )
    async def pin_fact(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="The fact's id.")],
    ) -> TierPayload:
        return await _tier(info, "pin", str(id))

    @strawberry.mutation(description="Unpin a fact (see `pinFact`).")
    async def unpin_fact(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="The fact's id.")],
    ) -> TierPayload:
        return await _tier(info, "unpin", str(id))

    @strawberry.mutation(
        description="Make a live fact cold (recall leaves it out unless `includeCold`; search "
        "still finds it), or with `cold: false` no longer cold. A pinned fact made cold is "
        "unpinned."
    )
    async def set_cold(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="The fact's id.")],
        cold: Annotated[bool, strawberry.argument(description="false: no longer cold.")] = True,
    ) -> TierPayload:
        return await _tier(info, "cold" if cold else "warm", str(id))


@strawberry.type(description="Facts forgotten and erased.")
class ErasureWrites:
    @strawberry.mutation(
        description="Retract a fact: current reads stop seeing it; reads known at an earlier "
        "time still do (nothing is deleted)."
    )
    async def forget_fact(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="The fact's id.")],
    ) -> ForgetPayload:
        async def forget() -> ForgetPayload:
            fact = await info.context.write(info.context.memory.forget, str(id))
            return ForgetPayload(fact=Fact.of(fact, NOW), error=None)

        return await _guarded(info, forget, lambda e: ForgetPayload(fact=None, error=e))

    @strawberry.mutation(
        description="Delete a fact for good, with its links and vector (for privacy requests)."
    )
    async def purge_fact(
        self,
        info: Info[Context, None],
        id: Annotated[strawberry.ID, strawberry.argument(description="The fact's id.")],
    ) -> PurgePayload:
        async def purge() -> PurgePayload:
            await info.context.write(info.context.memory.purge, str(id))
            return PurgePayload(purged_id=id, error=None)

        return await _guarded(info, purge, lambda e: PurgePayload(purged_id=None, error=e))

    @strawberry.mutation(
        description="Erase for good every fact the filter matches, in any state, with its links, "
        "vectors and cached embeddings, and the episodes left empty; no file of the namespace "
        "keeps a copy, and the erasure is recorded (never its content). At least one filter."
    )
    async def purge_facts(
        self,
        info: Info[Context, None],
        filter: Annotated[PurgeFilter, strawberry.argument(description="What to erase.")],
        dry_run: Annotated[
            bool, strawberry.argument(description="Only count what would be erased.")
        ] = False,
    ) -> PurgeFactsPayload:
        async def purge() -> PurgeFactsPayload:
            report = await info.context.write(
                info.context.memory.purge,
                ids=None if filter.ids is None else [str(i) for i in filter.ids],
                entity=filter.entity,
                source=filter.source,
                episode=filter.episode,
                dry_run=dry_run,
            )
            return PurgeFactsPayload(**report.to_dict(), error=None)

        return await _guarded(
            info,
            purge,
            lambda e: PurgeFactsPayload(
                facts=0, links=0, vectors=0, episodes=0, dry_run=dry_run, names=[], error=e
            ),
        )


@strawberry.type(
    description="Maintenance: pruning, scheduled jobs, classification, reflection, consolidation."
)
class UpkeepWrites:
    @strawberry.mutation(
        description="Delete expired facts, lower the confidence of ageing ones, delete the faded."
    )
    async def prune(
        self,
        info: Info[Context, None],
        dry_run: Annotated[
            bool, strawberry.argument(description="Only count what would change.")
        ] = False,
        soft: Annotated[
            bool, strawberry.argument(description="Skip deleting expired facts.")
        ] = False,
    ) -> PrunePayload:
        async def prune() -> PrunePayload:
            report = await info.context.write(info.context.memory.prune, dry_run=dry_run, soft=soft)
            return PrunePayload(
                expired=report.expired,
                decayed=report.decayed,
                low_confidence=report.low_confidence,
                dry_run=report.dry_run,
                error=None,
            )

        return await _guarded(
            info,
            prune,
            lambda e: PrunePayload(
                expired=0, decayed=0, low_confidence=0, dry_run=dry_run, error=e
            ),
        )

    @strawberry.mutation(
        description="Run the maintenance jobs that are due now (or the `jobs` given, whatever "
        "their period, with `force`); each run is recorded (`maintenanceRuns`). A job another "
        "process is running is `skipped`."
    )
    async def maintain(
        self,
        info: Info[Context, None],
        jobs: Annotated[
            list[Enum] | None,
            strawberry.argument(
                description="Which (default: all).", graphql_type=list[MaintenanceJob] | None
            ),
        ] = None,
        force: Annotated[
            bool, strawberry.argument(description="Run them even if not due.")
        ] = False,
    ) -> MaintainPayload:
        async def maintain() -> MaintainPayload:
            chosen = None if jobs is None else [j.value for j in jobs]
            runs = await info.context.write(info.context.memory.maintain, chosen, force=force)
            return MaintainPayload(runs=[MaintenanceRun.of(r) for r in runs], error=None)

        return await _guarded(info, maintain, lambda e: MaintainPayload(runs=[], error=e))

    @strawberry.mutation(
        description="Relabel facts of category `other` with the chat model and discover "
        "categories from the labels it gives (with `classifier = llm`; otherwise nothing "
        "changes)."
    )
    async def auto_classify(self, info: Info[Context, None]) -> AutoClassifyPayload:
        async def run() -> AutoClassifyPayload:
            report = await info.context.write(info.context.memory.auto_classify)
            return AutoClassifyPayload(
                relabelled=[
                    Relabelled(category=c, count=n) for c, n in sorted(report.relabelled.items())
                ],
                discovered=report.discovered,
                requests=report.requests,
                problem=report.error,
                error=None,
            )

        return await _guarded(
            info,
            run,
            lambda e: AutoClassifyPayload(
                relabelled=[], discovered=[], requests=0, problem=None, error=e
            ),
        )

    @strawberry.mutation(
        description="Ask the chat model for patterns among the recent facts (each backed by at "
        "least two), then rules from them; each stored as a fact linked DEPENDS_ON to what it "
        "was drawn from. Needs a chat endpoint (the `llm_*` settings)."
    )
    async def reflect(
        self,
        info: Info[Context, None],
        window_days: Annotated[
            float | None,
            strawberry.argument(description="Days of facts to read (default: the setting)."),
        ] = None,
    ) -> ReflectPayload:
        async def reflect() -> ReflectPayload:
            report = await info.context.write(info.context.memory.reflect, window_days=window_days)
            return ReflectPayload(
                patterns=[Fact.of(f, NOW) for f in report.patterns],
                rules=[Fact.of(f, NOW) for f in report.rules],
                requests=report.requests,
                ignored=report.ignored,
                problem=report.error,
                error=None,
            )

        return await _guarded(
            info,
            reflect,
            lambda e: ReflectPayload(
                patterns=[], rules=[], requests=0, ignored=0, problem=None, error=e
            ),
        )

    @strawberry.mutation(
        description="Merge clusters of near-duplicate live facts into one fact each that "
        "supersedes every source (history keeps them); contact details, ids and numbers are "
        "left alone."
    )
    async def consolidate(
        self,
        info: Info[Context, None],
        dry_run: Annotated[
            bool, strawberry.argument(description="Only list the clusters.")
        ] = False,
    ) -> ConsolidatePayload:
        async def consolidate() -> ConsolidatePayload:
            report = await info.context.write(info.context.memory.consolidate, dry_run=dry_run)
            return ConsolidatePayload(
                clusters=[[strawberry.ID(i) for i in c] for c in report.clusters],
                merged=[Fact.of(f, NOW) for f in report.merged],
                superseded=report.superseded,
                requests=report.requests,
                dry_run=report.dry_run,
                problem=report.error,
                error=None,
            )

        return await _guarded(
            info,
            consolidate,
            lambda e: ConsolidatePayload(
                clusters=[],
                merged=[],
                superseded=0,
                requests=0,
                dry_run=dry_run,
                problem=None,
                error=e,
            ),
        )


#: The Mutation root: every domain's writes, in the order the schema lists them.
Mutation = merge_types(
    "Mutation",
    (
        FactWrites,
        LinkWrites,
        EntityWrites,
        CheckpointWrites,
        TierWrites,
        ErasureWrites,
        UpkeepWrites,
    ),
)
get_object_definition(
    Mutation, strict=True
).description = "Writes. Each needs a key that may write (or none, on loopback)."


async def _guarded(
    info: Info[Context, None],
    write: Callable[[], Awaitable[P]],
    failed: Callable[[UserError], P],
) -> P:
    """Run a write; an expected failure (or a read-only key) becomes the payload's error: those
    whose code the registry (``graphmem.errors.CODES``) marks as payload codes."""
    try:
        info.context.require_write()
        return await write()
    except graphmem.GraphmemError as e:
        if not UserError.carries(e):
            raise
        return failed(UserError.of(e))


async def _tier(info: Info[Context, None], change: str, fact_id: str) -> TierPayload:
    memory = info.context.memory
    calls = {
        "pin": lambda: memory.pin(fact_id),
        "unpin": lambda: memory.unpin(fact_id),
        "cold": lambda: memory.set_cold(fact_id),
        "warm": lambda: memory.set_cold(fact_id, False),
    }

    async def run() -> TierPayload:
        fact = await info.context.write(calls[change])
        return TierPayload(fact=Fact.of(fact, NOW), error=None)

    return await _guarded(info, run, lambda e: TierPayload(fact=None, error=e))


async def _entity(
    info: Info[Context, None], declare: Callable[[], graphmem.Entity]
) -> EntityPayload:
    async def run() -> EntityPayload:
        entity = await info.context.write(declare)
        return EntityPayload(entity=Entity.of(entity), error=None)

    return await _guarded(info, run, lambda e: EntityPayload(entity=None, error=e))


def _failed_store(error: UserError) -> StoreFactPayload:
    return StoreFactPayload(action=None, fact=None, reason=None, target_ids=[], error=error)


def _result(result: graphmem.StoreResult) -> dict[str, Any]:
    return {
        "action": StoreAction(result.action),
        "fact": None if result.fact is None else Fact.of(result.fact, NOW),
        "reason": result.reason,
        "target_ids": [strawberry.ID(i) for i in result.target_ids],
    }
