/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
import type { DocumentTypeDecoration } from '@graphql-typed-document-node/core';
/** What capture did with a turn, a sentence or a message. */
export type CaptureAction =
  /** Stored as a new turn or fact. */
  | 'ADD'
  /** Retracted the facts in `targetIds`. */
  | 'DELETE'
  /** Nothing written: it repeats the fact in `targetIds`. */
  | 'NOOP'
  /** Not stored: a message holding a secret, of a role not captured or without text; with `keep: FACTS`, also one too short or long, or with nothing memorable. */
  | 'SKIP'
  /** Stored as the new version of the facts in `targetIds`. */
  | 'UPDATE';

/** What `captureMessages` keeps of a conversation: its turns (each message as it was said) with facts drawn on top, or the facts alone. */
export type CaptureKeep =
  /** Every user and assistant message without a secret is kept as a turn of the episode (a long one in parts), and the memorable sentences are drawn from it as facts, each linked PART_OF its turn (origin `capture`). */
  | 'CONVERSATION'
  /** Only the memorable sentences, as facts; the rest of each message is not kept. */
  | 'FACTS';

/** The kind of a change to memory. */
export type ChangeKind =
  /** A fact was retracted. */
  | 'FACT_FORGOTTEN'
  /** A fact was deleted for good (purge or prune). */
  | 'FACT_PURGED'
  /** A new fact (or version). */
  | 'FACT_STORED'
  /** A fact was replaced by a new version. */
  | 'FACT_SUPERSEDED'
  /** A link was made or re-weighted. */
  | 'LINK_MADE'
  /** A link was retracted. */
  | 'LINK_REMOVED';

/** A checkpoint to save (`saveCheckpoint`). */
export type CheckpointInput = {
  /** What should come of it. */
  expectedOutcome?: string | null | undefined;
  /** What the agent sets out to do (at most 1,000 characters). */
  intent: string;
  /** The working state, any JSON value (the whole checkpoint at most 10,000 characters as JSON). */
  state?: unknown;
  /** The files being worked on (at most 100). */
  workingFiles?: Array<string> | null | undefined;
};

/** Which links of a fact to follow. */
export type Direction =
  /** Both. */
  | 'BOTH'
  /** Links whose target is the fact. */
  | 'IN'
  /** Links whose source is the fact. */
  | 'OUT';

/** The unit a batch of facts comes from (a conversation session, a document), recorded on first use; naming it again with other attributes is a CONFLICT. */
export type EpisodeInput = {
  /** The episode's id, chosen by the caller. */
  id: string;
  /** One of conversation, document, other (default conversation). */
  kind?: string | null | undefined;
  /** A JSON object kept with the episode. */
  metadata?: unknown;
  /** Where it came from (a channel, a file path). */
  source?: string | null | undefined;
  /** When it happened or was written (default: now). */
  time?: string | number | Date | null | undefined;
};

/** The code of an expected error that a mutation returns as data (every code: docs/graphql.md). */
export type ErrorCode =
  /** The request contradicts the stored state (forgetting a forgotten fact, superseding a replaced one, linking a forgotten fact, splitting an entity's only name). */
  | 'CONFLICT'
  /** The key is read-only (mutations and writing tools answer it), or has no access to the namespace asked for; HTTP 403 for that, and for a request to a loopback server that names another host or comes from a page elsewhere. */
  | 'FORBIDDEN'
  /** An argument was refused (empty text, a number out of range, a time in none of the accepted forms, a bad cursor, an unknown tool or tool argument…); the message names it and nothing was written. HTTP 400 when `X-Graphmem-Namespace` is not a valid name. */
  | 'INVALID_INPUT'
  /** No fact or link with that id, or no entity a name reaches, in this namespace. */
  | 'NOT_FOUND';

/** Which facts `facts` lists. */
export type FactFilter = {
  /** Only this category. */
  category?: string | null | undefined;
  /** Only facts about this entity (case-insensitive). */
  entity?: string | null | undefined;
  /** Also list versions replaced by newer ones. */
  includeSuperseded?: boolean;
  /** Only facts from this source. */
  source?: string | null | undefined;
  /** Only facts with this tag. */
  tag?: string | null | undefined;
};

/** A fact to store. Only `text` is required. */
export type FactInput = {
  /** Make automatic similarity links for it. Default: the server's setting. */
  autolink?: boolean | null | undefined;
  /** The kind of fact: preference, fact, decision, entity, other, pattern, rule or one discovered in the namespace. Default: detected from the text. */
  category?: string | null | undefined;
  /** Let the classifier decide: the rules (UPDATE for the same entity and key with a new value, NOOP for a repeat) or, when the server uses one, an LLM (also DELETE); false always adds. */
  classify?: boolean;
  /** How sure memory is of it, 0 to 1. Default 1. */
  confidence?: number | null | undefined;
  /** Surrounding context. */
  context?: string | null | undefined;
  /** How long it stays relevant: permanent never expires, durable 90 days, normal 14 days, short 2 days, ephemeral 4 hours, stable 90 days, active 14 days, session 1 day, checkpoint 4 hours, turn 180 days. Default: detected from the key, entity and text (docs/concepts.md#decay). */
  decayClass?: string | null | undefined;
  /** false: stored even when a live fact has the same text (a document's chunk belongs to its file, an item of another entity may say the same). */
  dedup?: boolean;
  /** Who or what it is about, e.g. 'user', 'alice', 'project-x'. */
  entity?: string | null | undefined;
  /** Link it to recent facts about the same entity. Default: the server's setting. */
  entityLinks?: boolean | null | undefined;
  /** When it expires, in the same forms. Default: by its decay class. */
  expiresAt?: string | number | Date | null | undefined;
  /** How much it matters, 0 to 1. Default 0.5. */
  importance?: number | null | undefined;
  /** The attribute it states, e.g. 'city', 'email', 'editor'. With an entity, a later fact with the same entity and key and another value supersedes this one. */
  key?: string | null | undefined;
  /** Where it came from. */
  source?: string | null | undefined;
  /** When it was stated, in the same forms. Default: unknown. */
  sourceDate?: string | number | Date | null | undefined;
  /** With no valid time given: valid from the start of the time the text states ("in 2019"), if it states one (docs/concepts.md#the-time-the-text-states). */
  statedValidFrom?: boolean;
  /** A short form of the text. */
  summary?: string | null | undefined;
  /** The id of a live fact this one replaces (it becomes history). */
  supersedes?: string | number | null | undefined;
  /** Tags to find it by. Default: found in the text. */
  tags?: Array<string> | null | undefined;
  /** What the fact says, as one self-contained statement, e.g. 'Alice moved to Paris in June 2023' (at most 10,000 characters). */
  text: string;
  /** When it became true in the world: ISO-8601 in full or reduced precision (2024, 2024-05, 2024-05-01, 2024-05-01T12:00:00, 2024-05-01T14:00:00+02:00; UTC when no zone is given) or epoch seconds (1714564800). Default: now. */
  validFrom?: string | number | Date | null | undefined;
  /** The attribute's value, e.g. 'Paris'. */
  value?: string | null | undefined;
  /** Why it is stored. */
  why?: string | null | undefined;
};

/** What a stored fact is: a turn of a conversation kept as it was said, or a fact. */
export type FactKind =
  /** A fact: stored, synced from a note, or drawn by `captureMessages` from a sentence of a message. */
  | 'FACT'
  /** A message (or a part of a long one) `captureMessages` kept as it was said, its `source` `turn:<role>`: an event of its episode, never deduplicated nor superseded by other facts. */
  | 'TURN';

/** A link to make: `source -[type]-> target`. */
export type LinkInput = {
  /** A JSON object kept with the link (at most 16 KiB). */
  metadata?: unknown;
  /** The id of the fact the link starts from. */
  sourceId: string | number;
  /** How strong the relationship is, 0 to 1; relinking updates it. */
  strength?: number;
  /** The id of the fact it points to. */
  targetId: string | number;
  /** CAUSED_BY: the source was caused by the target; PART_OF: the source is a part of the target; RELATED_TO: the two are related (automatic links are of this type); DEPENDS_ON: the source requires the target. SUPERSEDES comes from storing a new version. */
  type: LinkType;
  /** When the relationship began in the world: ISO-8601 in full or reduced precision (2024, 2024-05, 2024-05-01, 2024-05-01T12:00:00, 2024-05-01T14:00:00+02:00; UTC when no zone is given) or epoch seconds (1714564800). Default: when both facts hold (the later of their valid time). */
  validFrom?: string | number | Date | null | undefined;
  /** When it stopped holding, in the same forms. Default: open. Relinking with another validity replaces the live link. */
  validUntil?: string | number | Date | null | undefined;
};

/** The kind of a link. Every link reads `source -[TYPE]-> target`. */
export type LinkType =
  /** The source was caused by the target. */
  | 'CAUSED_BY'
  /** The source requires the target. */
  | 'DEPENDS_ON'
  /** The source is a part of the target. */
  | 'PART_OF'
  /** The two are related (automatic links are of this type). */
  | 'RELATED_TO'
  /** The source is a newer version of the target. */
  | 'SUPERSEDES';

/** A scheduled maintenance job (`graphmem.maintenance.REGISTRY`). */
export type MaintenanceJob =
  /** It relabels facts of category `other` by the chat model and discovers categories (`Memory.auto_classify`; with `classifier = llm`, else it changes nothing). */
  | 'CLASSIFY'
  /** It merges clusters of near-duplicate live facts into one that supersedes them (`Memory.consolidate`). */
  | 'CONSOLIDATE'
  /** It deletes expired facts, soft-decays ageing ones and deletes the faded (`Memory.prune`). */
  | 'PRUNE'
  /** It asks the chat model for patterns among recent facts, and rules from them (`Memory.reflect`). */
  | 'REFLECT';

/** A chat message, as agents exchange them (OpenAI format). */
export type MessageInput = {
  /** What was said: the message's text. */
  content: string;
  /** Who said it: system, developer, user, assistant or tool (only user and assistant messages are read). */
  role: string;
};

/** Which facts `purgeFacts` erases: every fact all the given filters match (at least one is required). */
export type PurgeFilter = {
  /** Every fact about this entity (case-insensitive). */
  entity?: string | null | undefined;
  /** Every fact of this episode. */
  episode?: string | null | undefined;
  /** These facts. */
  ids?: Array<string | number> | null | undefined;
  /** Every fact from this source. */
  source?: string | null | undefined;
};

/** How `recall` writes each fact's line. */
export type RecallFormat =
  /** `[source/category] text`, e.g. `[keyword/preference] …`. */
  | 'FULL'
  /** The text alone. */
  | 'MINIMAL'
  /** `category: text`. */
  | 'SHORT';

/** How a recalled fact was found. */
export type RecallSource =
  /** Through a link from another fact. */
  | 'GRAPH'
  /** By keywords (full-text search) or by the entity the prompt names. */
  | 'KEYWORD'
  /** Pinned: it leads every block. */
  | 'PINNED'
  /** By meaning alone (vector similarity). */
  | 'VECTOR';

/** How search ranks facts. */
export type SearchMode =
  /** Keywords only (SQLite FTS5, bm25). */
  | 'FTS'
  /** Keywords and meaning, fused (default). */
  | 'HYBRID'
  /** Meaning only (embedding cosine). */
  | 'VECTOR';

/** What a write did. */
export type StoreAction =
  /** Stored as a new fact. */
  | 'ADD'
  /** Retracted the facts in `targetIds`. */
  | 'DELETE'
  /** Nothing written: it repeats the fact in `targetIds`. */
  | 'NOOP'
  /** Stored as the new version of the facts in `targetIds` (superseded). */
  | 'UPDATE';

/** Which of a fact's times a query's period met. */
export type TimeKind =
  /** The time its text states. */
  | 'STATED'
  /** Its date: its source date, else its valid time's start. */
  | 'VALID';

export type FactFieldsFragment = { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null };

export type LinkFieldsFragment = { id: string, sourceId: string, targetId: string, type: LinkType, strength: number, origin: string, recordedAt: string, validFrom: string, validUntil: string | null, retractedAt: string | null, metadata: unknown };

export type EpisodeFieldsFragment = { id: string, kind: string, source: string | null, time: string, metadata: unknown, recordedAt: string | null };

export type CheckpointFieldsFragment = { intent: string, state: unknown, expectedOutcome: string | null, workingFiles: Array<string>, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } };

export type MaintenanceRunFieldsFragment = { id: number, job: string, startedAt: string, finishedAt: string | null, status: string, requests: number, error: string | null, changed: Array<{ kind: string, count: number }> };

export type EntityFieldsFragment = { name: string, names: Array<string>, aliases: Array<string>, facts: number };

export type ProfileFieldsFragment = { truncated: boolean, summaryError: string | null, entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number }, attributes: Array<{ key: string, values: Array<{ value: string | null, validFrom: string, validUntil: string | null, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } }> }>, facts: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }>, linked: Array<{ links: number, types: Array<LinkType>, entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number } }>, summary: { text: string, facts: Array<string>, cached: boolean } | null };

export type UserErrorFieldsFragment = { code: ErrorCode, message: string, field: string | null };

export type StoreFactsMutationVariables = Exact<{
  inputs: Array<FactInput> | FactInput;
  episode?: EpisodeInput | null | undefined;
}>;


export type StoreFactsMutation = { storeFacts: { results: Array<{ action: StoreAction | null, reason: string | null, targetIds: Array<string>, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } | null }>, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type CaptureMessagesMutationVariables = Exact<{
  messages: Array<MessageInput> | MessageInput;
  episode?: EpisodeInput | null | undefined;
  keep?: CaptureKeep | null | undefined;
}>;


export type CaptureMessagesMutation = { captureMessages: { results: Array<{ action: CaptureAction, kind: FactKind, reason: string, message: number, role: string, text: string | null, targetIds: Array<string>, turnId: string | null, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } | null }>, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type ForgetFactMutationVariables = Exact<{
  id: string | number;
}>;


export type ForgetFactMutation = { forgetFact: { fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type PurgeFactsMutationVariables = Exact<{
  filter: PurgeFilter;
  dryRun: boolean;
}>;


export type PurgeFactsMutation = { purgeFacts: { facts: number, links: number, vectors: number, episodes: number, dryRun: boolean, names: Array<string>, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type LinkFactsMutationVariables = Exact<{
  input: LinkInput;
}>;


export type LinkFactsMutation = { linkFacts: { link: { id: string, sourceId: string, targetId: string, type: LinkType, strength: number, origin: string, recordedAt: string, validFrom: string, validUntil: string | null, retractedAt: string | null, metadata: unknown } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type UnlinkMutationVariables = Exact<{
  id: string | number;
}>;


export type UnlinkMutation = { unlink: { link: { id: string, sourceId: string, targetId: string, type: LinkType, strength: number, origin: string, recordedAt: string, validFrom: string, validUntil: string | null, retractedAt: string | null, metadata: unknown } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type AliasMutationVariables = Exact<{
  name: string;
  of: string;
}>;


export type AliasMutation = { alias: { entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type MergeEntitiesMutationVariables = Exact<{
  a: string;
  b: string;
}>;


export type MergeEntitiesMutation = { mergeEntities: { entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type SplitAliasMutationVariables = Exact<{
  alias: string;
}>;


export type SplitAliasMutation = { splitAlias: { entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type PinFactMutationVariables = Exact<{
  id: string | number;
}>;


export type PinFactMutation = { pinFact: { fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type UnpinFactMutationVariables = Exact<{
  id: string | number;
}>;


export type UnpinFactMutation = { unpinFact: { fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type SetColdMutationVariables = Exact<{
  id: string | number;
  cold: boolean;
}>;


export type SetColdMutation = { setCold: { fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type SaveCheckpointMutationVariables = Exact<{
  input: CheckpointInput;
}>;


export type SaveCheckpointMutation = { saveCheckpoint: { checkpoint: { intent: string, state: unknown, expectedOutcome: string | null, workingFiles: Array<string>, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } } | null, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type PruneMutationVariables = Exact<{
  dryRun: boolean;
  soft: boolean;
}>;


export type PruneMutation = { prune: { expired: number, decayed: number, lowConfidence: number, dryRun: boolean, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type MaintainMutationVariables = Exact<{
  jobs?: Array<MaintenanceJob> | MaintenanceJob | null | undefined;
  force: boolean;
}>;


export type MaintainMutation = { maintain: { runs: Array<{ id: number, job: string, startedAt: string, finishedAt: string | null, status: string, requests: number, error: string | null, changed: Array<{ kind: string, count: number }> }>, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type ReflectMutationVariables = Exact<{
  windowDays?: number | null | undefined;
}>;


export type ReflectMutation = { reflect: { requests: number, ignored: number, problem: string | null, patterns: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }>, rules: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }>, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type ConsolidateMutationVariables = Exact<{
  dryRun: boolean;
}>;


export type ConsolidateMutation = { consolidate: { clusters: Array<Array<string>>, superseded: number, requests: number, dryRun: boolean, problem: string | null, merged: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }>, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type AutoClassifyMutationVariables = Exact<{ [key: string]: never; }>;


export type AutoClassifyMutation = { autoClassify: { discovered: Array<string>, requests: number, problem: string | null, relabelled: Array<{ category: string, count: number }>, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type RebuildEntitiesMutationVariables = Exact<{ [key: string]: never; }>;


export type RebuildEntitiesMutation = { rebuildEntities: { names: number, error: { code: ErrorCode, message: string, field: string | null } | null } };

export type VersionQueryVariables = Exact<{ [key: string]: never; }>;


export type VersionQuery = { version: string };

export type NamespaceQueryVariables = Exact<{ [key: string]: never; }>;


export type NamespaceQuery = { namespace: string };

export type GetFactQueryVariables = Exact<{
  id: string | number;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
}>;


export type GetFactQuery = { fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } | null };

export type HistoryQueryVariables = Exact<{
  id: string | number;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
}>;


export type HistoryQuery = { history: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }> };

export type FactsQueryVariables = Exact<{
  filter?: FactFilter | null | undefined;
  first?: number | null | undefined;
  after?: string | null | undefined;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
}>;


export type FactsQuery = { facts: { edges: Array<{ cursor: string, node: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } }>, pageInfo: { hasNextPage: boolean, endCursor: string | null } } };

export type SearchQueryVariables = Exact<{
  query: string;
  limit?: number | null | undefined;
  mode?: SearchMode | null | undefined;
  tag?: string | null | undefined;
  category?: string | null | undefined;
  entity?: string | null | undefined;
  source?: string | null | undefined;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
  includeSuperseded?: boolean | null | undefined;
  graphDepth?: number | null | undefined;
  timeHints?: boolean | null | undefined;
  episodeLinks?: boolean | null | undefined;
}>;


export type SearchQuery = { search: Array<{ score: number, ftsScore: number | null, vectorScore: number | null, depth: number, via: string | null, timeMatched: TimeKind | null, entityMatched: string | null, timeHint: { text: string, start: string | null, end: string | null, month: number | null, event: string | null } | null, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } }> };

export type RecallQueryVariables = Exact<{
  prompt: string;
  maxTokens?: number | null | undefined;
  format?: RecallFormat | null | undefined;
  graphDepth?: number | null | undefined;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
  timeHints?: boolean | null | undefined;
  episodeLinks?: boolean | null | undefined;
  includeCold?: boolean | null | undefined;
  profile?: boolean | null | undefined;
}>;


export type RecallQuery = { recall: { context: string, tokens: number, omitted: number, items: Array<{ kind: FactKind, score: number, source: RecallSource, line: string, summarized: boolean, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } }>, profiles: Array<{ truncated: boolean, summaryError: string | null, entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number }, attributes: Array<{ key: string, values: Array<{ value: string | null, validFrom: string, validUntil: string | null, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } }> }>, facts: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }>, linked: Array<{ links: number, types: Array<LinkType>, entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number } }>, summary: { text: string, facts: Array<string>, cached: boolean } | null }> } };

export type LookupQueryVariables = Exact<{
  entity: string;
  key?: string | null | undefined;
  tag?: string | null | undefined;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
  includeSuperseded?: boolean | null | undefined;
  limit?: number | null | undefined;
}>;


export type LookupQuery = { lookup: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }> };

export type EntitiesQueryVariables = Exact<{
  limit?: number | null | undefined;
  knownAt?: string | number | Date | null | undefined;
}>;


export type EntitiesQuery = { entities: Array<{ name: string, names: Array<string>, aliases: Array<string>, facts: number }> };

export type EntityQueryVariables = Exact<{
  name: string;
  knownAt?: string | number | Date | null | undefined;
}>;


export type EntityQuery = { entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number } };

export type ProfileQueryVariables = Exact<{
  entity: string;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
  summary?: boolean | null | undefined;
}>;


export type ProfileQuery = { profile: { truncated: boolean, summaryError: string | null, entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number }, attributes: Array<{ key: string, values: Array<{ value: string | null, validFrom: string, validUntil: string | null, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } }> }>, facts: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }>, linked: Array<{ links: number, types: Array<LinkType>, entity: { name: string, names: Array<string>, aliases: Array<string>, facts: number } }>, summary: { text: string, facts: Array<string>, cached: boolean } | null } };

export type LinksQueryVariables = Exact<{
  id: string | number;
  direction?: Direction | null | undefined;
  types?: Array<LinkType> | LinkType | null | undefined;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
  first?: number | null | undefined;
  after?: string | null | undefined;
}>;


export type LinksQuery = { fact: { links: { edges: Array<{ cursor: string, link: { id: string, sourceId: string, targetId: string, type: LinkType, strength: number, origin: string, recordedAt: string, validFrom: string, validUntil: string | null, retractedAt: string | null, metadata: unknown } }>, pageInfo: { hasNextPage: boolean, endCursor: string | null } } } | null };

export type TraverseQueryVariables = Exact<{
  from: Array<string | number> | string | number;
  depth?: number | null | undefined;
  types?: Array<LinkType> | LinkType | null | undefined;
  direction?: Direction | null | undefined;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
  maxNodes?: number | null | undefined;
  minStrength?: number | null | undefined;
}>;


export type TraverseQuery = { traverse: { truncated: boolean, truncatedBy: Array<string>, nodes: Array<{ depth: number, parentIds: Array<string>, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } }>, edges: Array<{ id: string, sourceId: string, targetId: string, type: LinkType, strength: number, origin: string, recordedAt: string, validFrom: string, validUntil: string | null, retractedAt: string | null, metadata: unknown }> } };

export type PathQueryVariables = Exact<{
  from: string | number;
  to: string | number;
  types?: Array<LinkType> | LinkType | null | undefined;
  direction?: Direction | null | undefined;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
  maxDepth?: number | null | undefined;
}>;


export type PathQuery = { path: { facts: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }>, links: Array<{ id: string, sourceId: string, targetId: string, type: LinkType, strength: number, origin: string, recordedAt: string, validFrom: string, validUntil: string | null, retractedAt: string | null, metadata: unknown }> } | null };

export type EpisodeQueryVariables = Exact<{
  id: string;
}>;


export type EpisodeQuery = { episode: { id: string, kind: string, source: string | null, time: string, metadata: unknown, recordedAt: string | null } | null };

export type EpisodesQueryVariables = Exact<{
  source?: string | null | undefined;
  after?: string | number | Date | null | undefined;
  before?: string | number | Date | null | undefined;
  limit?: number | null | undefined;
}>;


export type EpisodesQuery = { episodes: Array<{ id: string, kind: string, source: string | null, time: string, metadata: unknown, recordedAt: string | null }> };

export type EpisodeFactsQueryVariables = Exact<{
  id: string;
  asOf?: string | number | Date | null | undefined;
  knownAt?: string | number | Date | null | undefined;
}>;


export type EpisodeFactsQuery = { episode: { facts: Array<{ id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null }> } | null };

export type DocumentsQueryVariables = Exact<{
  under?: string | null | undefined;
}>;


export type DocumentsQuery = { documents: Array<{ path: string, hash: string, mtime: string, size: number, chunks: number, syncedAt: string, imported: boolean }> };

export type DocumentLinesQueryVariables = Exact<{
  path: string;
  start?: number | null | undefined;
  end?: number | null | undefined;
}>;


export type DocumentLinesQuery = { documentLines: string };

export type ErasuresQueryVariables = Exact<{
  limit?: number | null | undefined;
}>;


export type ErasuresQuery = { erasures: Array<{ at: string, filter: unknown, facts: number, links: number, vectors: number, episodes: number }> };

export type CheckpointQueryVariables = Exact<{ [key: string]: never; }>;


export type CheckpointQuery = { checkpoint: { intent: string, state: unknown, expectedOutcome: string | null, workingFiles: Array<string>, fact: { id: string, text: string, kind: FactKind, category: string, importance: number, entity: string | null, key: string | null, value: string | null, source: string | null, tags: Array<string>, summary: string | null, why: string | null, context: string | null, decayClass: string, expiresAt: string | null, confidence: number, lastConfirmedAt: string | null, accessCount: number, lastAccessedAt: string | null, sourceDate: string | null, validFrom: string, validUntil: string | null, validUntilRecordedAt: string | null, recordedAt: string, retractedAt: string | null, supersededById: string | null, supersedesId: string | null, episodeId: string | null, pinnedAt: string | null, coldAt: string | null, statedTime: { start: string, end: string, text: string } | null } } | null };

export type MaintenanceRunsQueryVariables = Exact<{
  job?: MaintenanceJob | null | undefined;
  limit?: number | null | undefined;
}>;


export type MaintenanceRunsQuery = { maintenanceRuns: Array<{ id: number, job: string, startedAt: string, finishedAt: string | null, status: string, requests: number, error: string | null, changed: Array<{ kind: string, count: number }> }> };

export type CategoriesQueryVariables = Exact<{ [key: string]: never; }>;


export type CategoriesQuery = { categories: Array<{ name: string, description: string, discoveredAt: string | null }> };

export type StatsQueryVariables = Exact<{ [key: string]: never; }>;


export type StatsQuery = { stats: { namespace: string, data: unknown } };

export type MemoryChangedSubscriptionVariables = Exact<{
  kinds?: Array<ChangeKind> | ChangeKind | null | undefined;
}>;


export type MemoryChangedSubscription = { memoryChanged: { kind: ChangeKind, id: string, at: string } };

export class TypedDocumentString<TResult, TVariables>
  extends String
  implements DocumentTypeDecoration<TResult, TVariables>
{
  __apiType?: NonNullable<DocumentTypeDecoration<TResult, TVariables>['__apiType']>;
  private value: string;
  public __meta__?: Record<string, any> | undefined;

  constructor(value: string, __meta__?: Record<string, any> | undefined) {
    super(value);
    this.value = value;
    this.__meta__ = __meta__;
  }

  override toString(): string & DocumentTypeDecoration<TResult, TVariables> {
    return this.value;
  }
}
export const LinkFieldsFragmentDoc = new TypedDocumentString(`
    fragment LinkFields on Link {
  id
  sourceId
  targetId
  type
  strength
  origin
  recordedAt
  validFrom
  validUntil
  retractedAt
  metadata
}
    `, {"fragmentName":"LinkFields"}) as unknown as TypedDocumentString<LinkFieldsFragment, unknown>;
export const EpisodeFieldsFragmentDoc = new TypedDocumentString(`
    fragment EpisodeFields on Episode {
  id
  kind
  source
  time
  metadata
  recordedAt
}
    `, {"fragmentName":"EpisodeFields"}) as unknown as TypedDocumentString<EpisodeFieldsFragment, unknown>;
export const FactFieldsFragmentDoc = new TypedDocumentString(`
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
    `, {"fragmentName":"FactFields"}) as unknown as TypedDocumentString<FactFieldsFragment, unknown>;
export const CheckpointFieldsFragmentDoc = new TypedDocumentString(`
    fragment CheckpointFields on Checkpoint {
  intent
  state
  expectedOutcome
  workingFiles
  fact {
    ...FactFields
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}`, {"fragmentName":"CheckpointFields"}) as unknown as TypedDocumentString<CheckpointFieldsFragment, unknown>;
export const MaintenanceRunFieldsFragmentDoc = new TypedDocumentString(`
    fragment MaintenanceRunFields on MaintenanceRun {
  id
  job
  startedAt
  finishedAt
  status
  changed {
    kind
    count
  }
  requests
  error
}
    `, {"fragmentName":"MaintenanceRunFields"}) as unknown as TypedDocumentString<MaintenanceRunFieldsFragment, unknown>;
export const EntityFieldsFragmentDoc = new TypedDocumentString(`
    fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}
    `, {"fragmentName":"EntityFields"}) as unknown as TypedDocumentString<EntityFieldsFragment, unknown>;
export const ProfileFieldsFragmentDoc = new TypedDocumentString(`
    fragment ProfileFields on Profile {
  entity {
    ...EntityFields
  }
  attributes {
    key
    values {
      value
      validFrom
      validUntil
      fact {
        ...FactFields
      }
    }
  }
  facts {
    ...FactFields
  }
  linked {
    entity {
      ...EntityFields
    }
    links
    types
  }
  truncated
  summary {
    text
    facts
    cached
  }
  summaryError
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}`, {"fragmentName":"ProfileFields"}) as unknown as TypedDocumentString<ProfileFieldsFragment, unknown>;
export const UserErrorFieldsFragmentDoc = new TypedDocumentString(`
    fragment UserErrorFields on UserError {
  code
  message
  field
}
    `, {"fragmentName":"UserErrorFields"}) as unknown as TypedDocumentString<UserErrorFieldsFragment, unknown>;
export const StoreFactsDocument = new TypedDocumentString(`
    mutation StoreFacts($inputs: [FactInput!]!, $episode: EpisodeInput) {
  storeFacts(inputs: $inputs, episode: $episode) {
    results {
      action
      reason
      targetIds
      fact {
        ...FactFields
      }
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<StoreFactsMutation, StoreFactsMutationVariables>;
export const CaptureMessagesDocument = new TypedDocumentString(`
    mutation CaptureMessages($messages: [MessageInput!]!, $episode: EpisodeInput, $keep: CaptureKeep) {
  captureMessages(messages: $messages, episode: $episode, keep: $keep) {
    results {
      action
      kind
      reason
      message
      role
      text
      targetIds
      turnId
      fact {
        ...FactFields
      }
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<CaptureMessagesMutation, CaptureMessagesMutationVariables>;
export const ForgetFactDocument = new TypedDocumentString(`
    mutation ForgetFact($id: ID!) {
  forgetFact(id: $id) {
    fact {
      ...FactFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<ForgetFactMutation, ForgetFactMutationVariables>;
export const PurgeFactsDocument = new TypedDocumentString(`
    mutation PurgeFacts($filter: PurgeFilter!, $dryRun: Boolean!) {
  purgeFacts(filter: $filter, dryRun: $dryRun) {
    facts
    links
    vectors
    episodes
    dryRun
    names
    error {
      ...UserErrorFields
    }
  }
}
    fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<PurgeFactsMutation, PurgeFactsMutationVariables>;
export const LinkFactsDocument = new TypedDocumentString(`
    mutation LinkFacts($input: LinkInput!) {
  linkFacts(input: $input) {
    link {
      ...LinkFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment LinkFields on Link {
  id
  sourceId
  targetId
  type
  strength
  origin
  recordedAt
  validFrom
  validUntil
  retractedAt
  metadata
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<LinkFactsMutation, LinkFactsMutationVariables>;
export const UnlinkDocument = new TypedDocumentString(`
    mutation Unlink($id: ID!) {
  unlink(id: $id) {
    link {
      ...LinkFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment LinkFields on Link {
  id
  sourceId
  targetId
  type
  strength
  origin
  recordedAt
  validFrom
  validUntil
  retractedAt
  metadata
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<UnlinkMutation, UnlinkMutationVariables>;
export const AliasDocument = new TypedDocumentString(`
    mutation Alias($name: String!, $of: String!) {
  alias(name: $name, of: $of) {
    entity {
      ...EntityFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<AliasMutation, AliasMutationVariables>;
export const MergeEntitiesDocument = new TypedDocumentString(`
    mutation MergeEntities($a: String!, $b: String!) {
  mergeEntities(a: $a, b: $b) {
    entity {
      ...EntityFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<MergeEntitiesMutation, MergeEntitiesMutationVariables>;
export const SplitAliasDocument = new TypedDocumentString(`
    mutation SplitAlias($alias: String!) {
  splitAlias(alias: $alias) {
    entity {
      ...EntityFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<SplitAliasMutation, SplitAliasMutationVariables>;
export const PinFactDocument = new TypedDocumentString(`
    mutation PinFact($id: ID!) {
  pinFact(id: $id) {
    fact {
      ...FactFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<PinFactMutation, PinFactMutationVariables>;
export const UnpinFactDocument = new TypedDocumentString(`
    mutation UnpinFact($id: ID!) {
  unpinFact(id: $id) {
    fact {
      ...FactFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<UnpinFactMutation, UnpinFactMutationVariables>;
export const SetColdDocument = new TypedDocumentString(`
    mutation SetCold($id: ID!, $cold: Boolean!) {
  setCold(id: $id, cold: $cold) {
    fact {
      ...FactFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<SetColdMutation, SetColdMutationVariables>;
export const SaveCheckpointDocument = new TypedDocumentString(`
    mutation SaveCheckpoint($input: CheckpointInput!) {
  saveCheckpoint(input: $input) {
    checkpoint {
      ...CheckpointFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment CheckpointFields on Checkpoint {
  intent
  state
  expectedOutcome
  workingFiles
  fact {
    ...FactFields
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<SaveCheckpointMutation, SaveCheckpointMutationVariables>;
export const PruneDocument = new TypedDocumentString(`
    mutation Prune($dryRun: Boolean!, $soft: Boolean!) {
  prune(dryRun: $dryRun, soft: $soft) {
    expired
    decayed
    lowConfidence
    dryRun
    error {
      ...UserErrorFields
    }
  }
}
    fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<PruneMutation, PruneMutationVariables>;
export const MaintainDocument = new TypedDocumentString(`
    mutation Maintain($jobs: [MaintenanceJob!], $force: Boolean!) {
  maintain(jobs: $jobs, force: $force) {
    runs {
      ...MaintenanceRunFields
    }
    error {
      ...UserErrorFields
    }
  }
}
    fragment MaintenanceRunFields on MaintenanceRun {
  id
  job
  startedAt
  finishedAt
  status
  changed {
    kind
    count
  }
  requests
  error
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<MaintainMutation, MaintainMutationVariables>;
export const ReflectDocument = new TypedDocumentString(`
    mutation Reflect($windowDays: Float) {
  reflect(windowDays: $windowDays) {
    patterns {
      ...FactFields
    }
    rules {
      ...FactFields
    }
    requests
    ignored
    problem
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<ReflectMutation, ReflectMutationVariables>;
export const ConsolidateDocument = new TypedDocumentString(`
    mutation Consolidate($dryRun: Boolean!) {
  consolidate(dryRun: $dryRun) {
    clusters
    merged {
      ...FactFields
    }
    superseded
    requests
    dryRun
    problem
    error {
      ...UserErrorFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<ConsolidateMutation, ConsolidateMutationVariables>;
export const AutoClassifyDocument = new TypedDocumentString(`
    mutation AutoClassify {
  autoClassify {
    relabelled {
      category
      count
    }
    discovered
    requests
    problem
    error {
      ...UserErrorFields
    }
  }
}
    fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<AutoClassifyMutation, AutoClassifyMutationVariables>;
export const RebuildEntitiesDocument = new TypedDocumentString(`
    mutation RebuildEntities {
  rebuildEntities {
    names
    error {
      ...UserErrorFields
    }
  }
}
    fragment UserErrorFields on UserError {
  code
  message
  field
}`) as unknown as TypedDocumentString<RebuildEntitiesMutation, RebuildEntitiesMutationVariables>;
export const VersionDocument = new TypedDocumentString(`
    query Version {
  version
}
    `) as unknown as TypedDocumentString<VersionQuery, VersionQueryVariables>;
export const NamespaceDocument = new TypedDocumentString(`
    query Namespace {
  namespace
}
    `) as unknown as TypedDocumentString<NamespaceQuery, NamespaceQueryVariables>;
export const GetFactDocument = new TypedDocumentString(`
    query GetFact($id: ID!, $asOf: DateTime, $knownAt: DateTime) {
  fact(id: $id, asOf: $asOf, knownAt: $knownAt) {
    ...FactFields
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}`) as unknown as TypedDocumentString<GetFactQuery, GetFactQueryVariables>;
export const HistoryDocument = new TypedDocumentString(`
    query History($id: ID!, $asOf: DateTime, $knownAt: DateTime) {
  history(id: $id, asOf: $asOf, knownAt: $knownAt) {
    ...FactFields
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}`) as unknown as TypedDocumentString<HistoryQuery, HistoryQueryVariables>;
export const FactsDocument = new TypedDocumentString(`
    query Facts($filter: FactFilter, $first: Int, $after: String, $asOf: DateTime, $knownAt: DateTime) {
  facts(
    filter: $filter
    first: $first
    after: $after
    asOf: $asOf
    knownAt: $knownAt
  ) {
    edges {
      cursor
      node {
        ...FactFields
      }
    }
    pageInfo {
      hasNextPage
      endCursor
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}`) as unknown as TypedDocumentString<FactsQuery, FactsQueryVariables>;
export const SearchDocument = new TypedDocumentString(`
    query Search($query: String!, $limit: Int, $mode: SearchMode, $tag: String, $category: String, $entity: String, $source: String, $asOf: DateTime, $knownAt: DateTime, $includeSuperseded: Boolean, $graphDepth: Int, $timeHints: Boolean, $episodeLinks: Boolean) {
  search(
    query: $query
    limit: $limit
    mode: $mode
    tag: $tag
    category: $category
    entity: $entity
    source: $source
    asOf: $asOf
    knownAt: $knownAt
    includeSuperseded: $includeSuperseded
    graphDepth: $graphDepth
    timeHints: $timeHints
    episodeLinks: $episodeLinks
  ) {
    score
    ftsScore
    vectorScore
    depth
    via
    timeMatched
    entityMatched
    timeHint {
      text
      start
      end
      month
      event
    }
    fact {
      ...FactFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}`) as unknown as TypedDocumentString<SearchQuery, SearchQueryVariables>;
export const RecallDocument = new TypedDocumentString(`
    query Recall($prompt: String!, $maxTokens: Int, $format: RecallFormat, $graphDepth: Int, $asOf: DateTime, $knownAt: DateTime, $timeHints: Boolean, $episodeLinks: Boolean, $includeCold: Boolean, $profile: Boolean) {
  recall(
    prompt: $prompt
    maxTokens: $maxTokens
    format: $format
    graphDepth: $graphDepth
    asOf: $asOf
    knownAt: $knownAt
    timeHints: $timeHints
    episodeLinks: $episodeLinks
    includeCold: $includeCold
    profile: $profile
  ) {
    context
    tokens
    omitted
    items {
      kind
      score
      source
      line
      summarized
      fact {
        ...FactFields
      }
    }
    profiles {
      ...ProfileFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}
fragment ProfileFields on Profile {
  entity {
    ...EntityFields
  }
  attributes {
    key
    values {
      value
      validFrom
      validUntil
      fact {
        ...FactFields
      }
    }
  }
  facts {
    ...FactFields
  }
  linked {
    entity {
      ...EntityFields
    }
    links
    types
  }
  truncated
  summary {
    text
    facts
    cached
  }
  summaryError
}`) as unknown as TypedDocumentString<RecallQuery, RecallQueryVariables>;
export const LookupDocument = new TypedDocumentString(`
    query Lookup($entity: String!, $key: String, $tag: String, $asOf: DateTime, $knownAt: DateTime, $includeSuperseded: Boolean, $limit: Int) {
  lookup(
    entity: $entity
    key: $key
    tag: $tag
    asOf: $asOf
    knownAt: $knownAt
    includeSuperseded: $includeSuperseded
    limit: $limit
  ) {
    ...FactFields
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}`) as unknown as TypedDocumentString<LookupQuery, LookupQueryVariables>;
export const EntitiesDocument = new TypedDocumentString(`
    query Entities($limit: Int, $knownAt: DateTime) {
  entities(limit: $limit, knownAt: $knownAt) {
    ...EntityFields
  }
}
    fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}`) as unknown as TypedDocumentString<EntitiesQuery, EntitiesQueryVariables>;
export const EntityDocument = new TypedDocumentString(`
    query Entity($name: String!, $knownAt: DateTime) {
  entity(name: $name, knownAt: $knownAt) {
    ...EntityFields
  }
}
    fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}`) as unknown as TypedDocumentString<EntityQuery, EntityQueryVariables>;
export const ProfileDocument = new TypedDocumentString(`
    query Profile($entity: String!, $asOf: DateTime, $knownAt: DateTime, $summary: Boolean) {
  profile(entity: $entity, asOf: $asOf, knownAt: $knownAt, summary: $summary) {
    ...ProfileFields
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment EntityFields on Entity {
  name
  names
  aliases
  facts
}
fragment ProfileFields on Profile {
  entity {
    ...EntityFields
  }
  attributes {
    key
    values {
      value
      validFrom
      validUntil
      fact {
        ...FactFields
      }
    }
  }
  facts {
    ...FactFields
  }
  linked {
    entity {
      ...EntityFields
    }
    links
    types
  }
  truncated
  summary {
    text
    facts
    cached
  }
  summaryError
}`) as unknown as TypedDocumentString<ProfileQuery, ProfileQueryVariables>;
export const LinksDocument = new TypedDocumentString(`
    query Links($id: ID!, $direction: Direction, $types: [LinkType!], $asOf: DateTime, $knownAt: DateTime, $first: Int, $after: String) {
  fact(id: $id, asOf: $asOf, knownAt: $knownAt) {
    links(direction: $direction, types: $types, first: $first, after: $after) {
      edges {
        cursor
        link {
          ...LinkFields
        }
      }
      pageInfo {
        hasNextPage
        endCursor
      }
    }
  }
}
    fragment LinkFields on Link {
  id
  sourceId
  targetId
  type
  strength
  origin
  recordedAt
  validFrom
  validUntil
  retractedAt
  metadata
}`) as unknown as TypedDocumentString<LinksQuery, LinksQueryVariables>;
export const TraverseDocument = new TypedDocumentString(`
    query Traverse($from: [ID!]!, $depth: Int, $types: [LinkType!], $direction: Direction, $asOf: DateTime, $knownAt: DateTime, $maxNodes: Int, $minStrength: Float) {
  traverse(
    from: $from
    depth: $depth
    types: $types
    direction: $direction
    asOf: $asOf
    knownAt: $knownAt
    maxNodes: $maxNodes
    minStrength: $minStrength
  ) {
    nodes {
      depth
      parentIds
      fact {
        ...FactFields
      }
    }
    edges {
      ...LinkFields
    }
    truncated
    truncatedBy
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment LinkFields on Link {
  id
  sourceId
  targetId
  type
  strength
  origin
  recordedAt
  validFrom
  validUntil
  retractedAt
  metadata
}`) as unknown as TypedDocumentString<TraverseQuery, TraverseQueryVariables>;
export const PathDocument = new TypedDocumentString(`
    query Path($from: ID!, $to: ID!, $types: [LinkType!], $direction: Direction, $asOf: DateTime, $knownAt: DateTime, $maxDepth: Int) {
  path(
    from: $from
    to: $to
    types: $types
    direction: $direction
    asOf: $asOf
    knownAt: $knownAt
    maxDepth: $maxDepth
  ) {
    facts {
      ...FactFields
    }
    links {
      ...LinkFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment LinkFields on Link {
  id
  sourceId
  targetId
  type
  strength
  origin
  recordedAt
  validFrom
  validUntil
  retractedAt
  metadata
}`) as unknown as TypedDocumentString<PathQuery, PathQueryVariables>;
export const EpisodeDocument = new TypedDocumentString(`
    query Episode($id: String!) {
  episode(id: $id) {
    ...EpisodeFields
  }
}
    fragment EpisodeFields on Episode {
  id
  kind
  source
  time
  metadata
  recordedAt
}`) as unknown as TypedDocumentString<EpisodeQuery, EpisodeQueryVariables>;
export const EpisodesDocument = new TypedDocumentString(`
    query Episodes($source: String, $after: DateTime, $before: DateTime, $limit: Int) {
  episodes(source: $source, after: $after, before: $before, limit: $limit) {
    ...EpisodeFields
  }
}
    fragment EpisodeFields on Episode {
  id
  kind
  source
  time
  metadata
  recordedAt
}`) as unknown as TypedDocumentString<EpisodesQuery, EpisodesQueryVariables>;
export const EpisodeFactsDocument = new TypedDocumentString(`
    query EpisodeFacts($id: String!, $asOf: DateTime, $knownAt: DateTime) {
  episode(id: $id, asOf: $asOf, knownAt: $knownAt) {
    facts {
      ...FactFields
    }
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}`) as unknown as TypedDocumentString<EpisodeFactsQuery, EpisodeFactsQueryVariables>;
export const DocumentsDocument = new TypedDocumentString(`
    query Documents($under: String) {
  documents(under: $under) {
    path
    hash
    mtime
    size
    chunks
    syncedAt
    imported
  }
}
    `) as unknown as TypedDocumentString<DocumentsQuery, DocumentsQueryVariables>;
export const DocumentLinesDocument = new TypedDocumentString(`
    query DocumentLines($path: String!, $start: Int, $end: Int) {
  documentLines(path: $path, start: $start, end: $end)
}
    `) as unknown as TypedDocumentString<DocumentLinesQuery, DocumentLinesQueryVariables>;
export const ErasuresDocument = new TypedDocumentString(`
    query Erasures($limit: Int) {
  erasures(limit: $limit) {
    at
    filter
    facts
    links
    vectors
    episodes
  }
}
    `) as unknown as TypedDocumentString<ErasuresQuery, ErasuresQueryVariables>;
export const CheckpointDocument = new TypedDocumentString(`
    query Checkpoint {
  checkpoint {
    ...CheckpointFields
  }
}
    fragment FactFields on Fact {
  id
  text
  kind
  category
  importance
  entity
  key
  value
  source
  tags
  summary
  why
  context
  decayClass
  expiresAt
  confidence
  lastConfirmedAt
  accessCount
  lastAccessedAt
  sourceDate
  validFrom
  validUntil
  validUntilRecordedAt
  recordedAt
  retractedAt
  supersededById
  supersedesId
  episodeId
  pinnedAt
  coldAt
  statedTime {
    start
    end
    text
  }
}
fragment CheckpointFields on Checkpoint {
  intent
  state
  expectedOutcome
  workingFiles
  fact {
    ...FactFields
  }
}`) as unknown as TypedDocumentString<CheckpointQuery, CheckpointQueryVariables>;
export const MaintenanceRunsDocument = new TypedDocumentString(`
    query MaintenanceRuns($job: MaintenanceJob, $limit: Int) {
  maintenanceRuns(job: $job, limit: $limit) {
    ...MaintenanceRunFields
  }
}
    fragment MaintenanceRunFields on MaintenanceRun {
  id
  job
  startedAt
  finishedAt
  status
  changed {
    kind
    count
  }
  requests
  error
}`) as unknown as TypedDocumentString<MaintenanceRunsQuery, MaintenanceRunsQueryVariables>;
export const CategoriesDocument = new TypedDocumentString(`
    query Categories {
  categories {
    name
    description
    discoveredAt
  }
}
    `) as unknown as TypedDocumentString<CategoriesQuery, CategoriesQueryVariables>;
export const StatsDocument = new TypedDocumentString(`
    query Stats {
  stats {
    namespace
    data
  }
}
    `) as unknown as TypedDocumentString<StatsQuery, StatsQueryVariables>;
export const MemoryChangedDocument = new TypedDocumentString(`
    subscription MemoryChanged($kinds: [ChangeKind!]) {
  memoryChanged(kinds: $kinds) {
    kind
    id
    at
  }
}
    `) as unknown as TypedDocumentString<MemoryChangedSubscription, MemoryChangedSubscriptionVariables>;