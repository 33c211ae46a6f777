import { ChangeStream, type WebSocketImpl } from './changes.js';
import { GraphmemError } from './errors.js';
import {
  AliasDocument,
  AutoClassifyDocument,
  CaptureMessagesDocument,
  CategoriesDocument,
  CheckpointDocument,
  ConsolidateDocument,
  DocumentLinesDocument,
  DocumentsDocument,
  EntitiesDocument,
  EntityDocument,
  EpisodeDocument,
  EpisodeFactsDocument,
  EpisodesDocument,
  ErasuresDocument,
  FactFieldsFragmentDoc,
  FactsDocument,
  ForgetFactDocument,
  GetFactDocument,
  HistoryDocument,
  LinkFactsDocument,
  LinksDocument,
  LookupDocument,
  MaintainDocument,
  MaintenanceRunsDocument,
  MergeEntitiesDocument,
  NamespaceDocument,
  PathDocument,
  PinFactDocument,
  ProfileDocument,
  PruneDocument,
  PurgeFactsDocument,
  RebuildEntitiesDocument,
  RecallDocument,
  ReflectDocument,
  SaveCheckpointDocument,
  SearchDocument,
  SetColdDocument,
  SplitAliasDocument,
  StatsDocument,
  StoreFactsDocument,
  TraverseDocument,
  UnlinkDocument,
  UnpinFactDocument,
  VersionDocument,
  type AutoClassifyMutation,
  type CaptureKeep,
  type CaptureMessagesMutation,
  type CategoriesQuery,
  type ChangeKind,
  type CheckpointFieldsFragment,
  type CheckpointInput,
  type ConsolidateMutation,
  type DocumentsQuery,
  type EntitiesQueryVariables,
  type EntityFieldsFragment,
  type EntityQueryVariables,
  type EpisodeFieldsFragment,
  type EpisodeInput,
  type EpisodesQueryVariables,
  type ErasuresQuery,
  type FactFieldsFragment,
  type FactFilter,
  type FactInput,
  type FactsQueryVariables,
  type GetFactQueryVariables,
  type LinkFieldsFragment,
  type LinkInput,
  type LinkType,
  type LinksQuery,
  type LinksQueryVariables,
  type LookupQueryVariables,
  type MaintenanceJob,
  type MaintenanceRunFieldsFragment,
  type MessageInput,
  type PathQuery,
  type PathQueryVariables,
  type ProfileFieldsFragment,
  type ProfileQueryVariables,
  type PruneMutation,
  type PurgeFactsMutation,
  type PurgeFilter,
  type RecallQuery,
  type RecallQueryVariables,
  type ReflectMutation,
  type SearchQuery,
  type SearchQueryVariables,
  type StoreFactsMutation,
  type TraverseQuery,
  type TraverseQueryVariables,
  type UserErrorFieldsFragment,
} from './generated/graphql.js';
import { HttpTransport } from './transport.js';

/** Where the client looks for the service without `url` or GRAPHMEM_URL. */
export const DEFAULT_URL = 'http://127.0.0.1:8420';
/** Facts one `getMany` request asks for (aliases; the service bounds a document's cost). */
export const IDS_PER_REQUEST = 25;
/** Links one `links` request asks for: the service's largest page. */
const LINKS_PER_PAGE = 1000;

export type Fact = FactFieldsFragment;
export type Link = LinkFieldsFragment;
export type Episode = EpisodeFieldsFragment;
/** An entity: its `name`, every name its facts carry (`names`, `name` first), the `aliases`
 * declared for it, and how many `facts` carry one of its names. */
export type Entity = EntityFieldsFragment;
/** Who or what an entity is at a time scope: the `entity`, its current values by key
 * (`attributes`, each value with its valid time and fact, several for a multi-valued key), its
 * `facts` without a key, the entities `linked` to it, whether a bound left something out
 * (`truncated`), and the chat model's `summary` when one was asked for (`summaryError`: why
 * there is none). A recall's `profiles` hold only the attributes their lines show. */
export type Profile = ProfileFieldsFragment;
export type StoreResult = StoreFactsMutation['storeFacts']['results'][number];
export type CaptureResult = CaptureMessagesMutation['captureMessages']['results'][number];
export type SearchHit = SearchQuery['search'][number];
export type RecallResult = RecallQuery['recall'];
export type Subgraph = TraverseQuery['traverse'];
export type Path = NonNullable<PathQuery['path']>;
export type PurgeReport = Omit<PurgeFactsMutation['purgeFacts'], 'error'>;
export type DocumentFile = DocumentsQuery['documents'][number];
export type Erasure = ErasuresQuery['erasures'][number];
/** An agent's working state saved by `checkpoint`, as `restoreCheckpoint` gives it back. */
export type Checkpoint = CheckpointFieldsFragment;
/** What `checkpoint` saves besides its `intent`. */
export type CheckpointOptions = Omit<CheckpointInput, 'intent'>;
export type PruneReport = Omit<PruneMutation['prune'], 'error'>;
/** A run of a maintenance job: `id` its record's number (0: `skipped`, not recorded). */
export type MaintenanceRun = MaintenanceRunFieldsFragment;
export type ReflectReport = Omit<ReflectMutation['reflect'], 'error'>;
export type ConsolidateReport = Omit<ConsolidateMutation['consolidate'], 'error'>;
export type ClassifyReport = Omit<AutoClassifyMutation['autoClassify'], 'error'>;
export type Category = CategoriesQuery['categories'][number];

/** A read's time scope: valid time `asOf`, transaction time `knownAt` (default: now). */
export type TimeScope = Pick<GetFactQueryVariables, 'asOf' | 'knownAt'>;

/** A page of `facts`, in the order recorded; `endCursor` is the next page's `after`. */
export interface FactPage {
  facts: Fact[];
  endCursor: string | null;
  hasNextPage: boolean;
}

/** The counts describing a namespace and its providers' usage (the service's `stats`). */
export interface Stats {
  namespace: string;
  data: Record<string, unknown>;
}

export interface ClientOptions {
  /** The service, e.g. http://127.0.0.1:8420 (default: GRAPHMEM_URL, else DEFAULT_URL). */
  url?: string | undefined;
  /** An API key (default: GRAPHMEM_API_KEY); none is needed on loopback while no key exists. */
  apiKey?: string | null | undefined;
  /** One of the key's namespaces (default: GRAPHMEM_NAMESPACE, else the key's first). */
  namespace?: string | null | undefined;
  /** Longest wait for one answer before UNAVAILABLE (default 10 s). */
  timeoutMs?: number;
  /** Retries after a 429 or 503 answer or a failed connection (default 2). */
  retries?: number;
  /** The WebSocket class `changes()` uses (default: globalThis.WebSocket; on node 20, ws's). */
  webSocketImpl?: WebSocketImpl;
}

/**
 * graphmem's verbs over its GraphQL API, named as the Python `graphmem.Client` names them.
 * Every failure is a GraphmemError whose `code` is the service's: INVALID_INPUT (with
 * `field`), NOT_FOUND, CONFLICT, FORBIDDEN, UNAUTHENTICATED, RATE_LIMITED…, and UNAVAILABLE
 * when the service cannot be reached or does not answer within `timeoutMs`.
 */
export class GraphmemClient {
  readonly url: string;
  readonly #http: HttpTransport;
  readonly #apiKey: string | null;
  readonly #namespace: string | null;
  readonly #webSocketImpl: WebSocketImpl;

  constructor(options: ClientOptions = {}) {
    this.url = serviceUrl(options.url ?? environment('GRAPHMEM_URL') ?? DEFAULT_URL);
    this.#apiKey = options.apiKey !== undefined ? options.apiKey : environment('GRAPHMEM_API_KEY');
    this.#namespace =
      options.namespace !== undefined ? options.namespace : environment('GRAPHMEM_NAMESPACE');
    this.#webSocketImpl =
      options.webSocketImpl ?? (globalThis as { WebSocket?: unknown }).WebSocket;
    this.#http = new HttpTransport({
      url: this.url,
      apiKey: this.#apiKey,
      namespace: this.#namespace,
      timeoutMs: options.timeoutMs ?? 10_000,
      retries: options.retries ?? 2,
    });
  }

  // ------------------------------------------------------------------------------- writes

  /** One fact through the service's write rules (dedup, supersession by entity and key). */
  async store(text: string, fields: Omit<FactInput, 'text'> = {}): Promise<StoreResult> {
    const [result] = await this.storeMany([{ ...fields, text }]);
    return result!;
  }

  /** Facts in order, one request; `episode` is the session or document they come from. */
  async storeMany(
    items: readonly FactInput[],
    options: { episode?: string | EpisodeInput } = {},
  ): Promise<StoreResult[]> {
    const data = await this.#http.execute(
      StoreFactsDocument,
      { inputs: [...items], episode: episodeInput(options.episode) },
      { write: true },
    );
    return payload(data.storeFacts).results;
  }

  /** A turn's messages kept as turns of the episode, and the facts they state drawn on top,
   * each with its `kind` (`TURN` or `FACT`) and a fact's `turnId`; `keep: 'FACTS'` stores the
   * facts alone. */
  async capture(
    messages: readonly MessageInput[],
    options: { episode?: string | EpisodeInput; keep?: CaptureKeep } = {},
  ): Promise<CaptureResult[]> {
    const data = await this.#http.execute(
      CaptureMessagesDocument,
      {
        messages: [...messages],
        episode: episodeInput(options.episode),
        keep: options.keep, // left out when not given: the service's default
      },
      { write: true },
    );
    return payload(data.captureMessages).results;
  }

  /** Retract a fact; the fact as it was before. */
  async forget(factId: string): Promise<Fact> {
    const data = await this.#http.execute(ForgetFactDocument, { id: factId }, { write: true });
    return payload(data.forgetFact).fact!;
  }

  /** Erase for good what `filter` matches (a fact's id, or ids, entity, source, episode). */
  async purge(
    filter: string | PurgeFilter,
    options: { dryRun?: boolean } = {},
  ): Promise<PurgeReport> {
    const data = await this.#http.execute(
      PurgeFactsDocument,
      {
        filter: typeof filter === 'string' ? { ids: [filter] } : filter,
        dryRun: options.dryRun ?? false,
      },
      { write: true },
    );
    const { error: _, ...report } = payload(data.purgeFacts);
    return report;
  }

  /** `source -[type]-> target`. */
  async link(
    sourceId: string,
    targetId: string,
    type: LinkType,
    options: Omit<LinkInput, 'sourceId' | 'targetId' | 'type'> = {},
  ): Promise<Link> {
    const data = await this.#http.execute(
      LinkFactsDocument,
      { input: { ...options, sourceId, targetId, type } },
      { write: true },
    );
    return payload(data.linkFacts).link!;
  }

  /** Retract a link; the link as it was before. */
  async unlink(linkId: string): Promise<Link> {
    const data = await this.#http.execute(UnlinkDocument, { id: linkId }, { write: true });
    return payload(data.unlink).link!;
  }

  /** Declare `name` another name of the entity `of` reaches, from now on (a read known at an
   * earlier time does not see it); the entity. NOT_FOUND when `of` reaches none. */
  async alias(name: string, of: string): Promise<Entity> {
    const data = await this.#http.execute(AliasDocument, { name, of }, { write: true });
    return payload(data.alias).entity!;
  }

  /** Declare the entity `b` reaches to be the one `a` reaches, from now on; the entity, under
   * `a`'s name. NOT_FOUND when either reaches none. */
  async mergeEntities(a: string, b: string): Promise<Entity> {
    const data = await this.#http.execute(MergeEntitiesDocument, { a, b }, { write: true });
    return payload(data.mergeEntities).entity!;
  }

  /** Take the name `alias` out of its entity from now on, whether it was declared or found by
   * the rules; the entity it left. NOT_FOUND for a name no entity has, CONFLICT for an
   * entity's only name or a name others are declared on. */
  async splitAlias(alias: string): Promise<Entity> {
    const data = await this.#http.execute(SplitAliasDocument, { alias }, { write: true });
    return payload(data.splitAlias).entity!;
  }

  // ------------------------------------------------------------------------------- upkeep

  /** Pin a live fact: it leads every recall block, whatever the prompt, until unpinned. */
  async pin(factId: string): Promise<Fact> {
    const data = await this.#http.execute(PinFactDocument, { id: factId }, { write: true });
    return payload(data.pinFact).fact!;
  }

  /** Unpin a fact (see `pin`). */
  async unpin(factId: string): Promise<Fact> {
    const data = await this.#http.execute(UnpinFactDocument, { id: factId }, { write: true });
    return payload(data.unpinFact).fact!;
  }

  /** Make a live fact cold (recall leaves it out unless `includeCold`; search still finds
   * it), or with `cold` false no longer cold. A pinned fact made cold is unpinned. */
  async setCold(factId: string, cold = true): Promise<Fact> {
    const data = await this.#http.execute(SetColdDocument, { id: factId, cold }, { write: true });
    return payload(data.setCold).fact!;
  }

  /** Save the agent's working state before a risky step; the checkpoint's fact. */
  async checkpoint(intent: string, options: CheckpointOptions = {}): Promise<Fact> {
    const data = await this.#http.execute(
      SaveCheckpointDocument,
      { input: { ...options, intent } },
      { write: true },
    );
    return payload(data.saveCheckpoint).checkpoint!.fact;
  }

  /** The newest unexpired checkpoint, or null. */
  async restoreCheckpoint(): Promise<Checkpoint | null> {
    return (await this.#http.execute(CheckpointDocument, {}, READ)).checkpoint;
  }

  /** Delete expired facts (not with `soft`), lower the confidence of ageing ones, delete the
   * faded; `dryRun` only counts. */
  async prune(options: { dryRun?: boolean; soft?: boolean } = {}): Promise<PruneReport> {
    const data = await this.#http.execute(
      PruneDocument,
      { dryRun: options.dryRun ?? false, soft: options.soft ?? false },
      { write: true },
    );
    const { error: _, ...report } = payload(data.prune);
    return report;
  }

  /** Run the maintenance jobs that are due (or `jobs`, whatever their period, with `force`);
   * the runs, in the order they ran (one another process is running is `skipped`). */
  async maintain(
    options: { jobs?: readonly MaintenanceJob[]; force?: boolean } = {},
  ): Promise<MaintenanceRun[]> {
    const data = await this.#http.execute(
      MaintainDocument,
      {
        jobs: options.jobs === undefined ? null : [...options.jobs],
        force: options.force ?? false,
      },
      { write: true },
    );
    return payload(data.maintain).runs;
  }

  /** The maintenance runs recorded in the namespace (only `job`'s), newest first. */
  async maintenanceRuns(
    options: { job?: MaintenanceJob; limit?: number } = {},
  ): Promise<MaintenanceRun[]> {
    return (await this.#http.execute(MaintenanceRunsDocument, options, READ)).maintenanceRuns;
  }

  /** Ask the chat model for patterns among the facts of the last `windowDays`, then rules
   * from them, each stored as a fact. INVALID_INPUT when the service has no chat model. */
  async reflect(options: { windowDays?: number } = {}): Promise<ReflectReport> {
    const data = await this.#http.execute(ReflectDocument, options, { write: true });
    const { error: _, ...report } = payload(data.reflect);
    return report;
  }

  /** Merge clusters of near-duplicate live facts into one fact each that supersedes them
   * (without a chat model, the newest most confident text is kept); `dryRun` only lists them. */
  async consolidate(options: { dryRun?: boolean } = {}): Promise<ConsolidateReport> {
    const data = await this.#http.execute(
      ConsolidateDocument,
      { dryRun: options.dryRun ?? false },
      { write: true },
    );
    const { error: _, ...report } = payload(data.consolidate);
    return report;
  }

  /** Relabel facts of category `other` with the chat model and discover categories (when the
   * service classifies with one; otherwise nothing changes). */
  async autoClassify(): Promise<ClassifyReport> {
    const data = await this.#http.execute(AutoClassifyDocument, {}, { write: true });
    const { error: _, ...report } = payload(data.autoClassify);
    return report;
  }

  /** Count the entity names again from the facts (they are derived, like the vector index,
   * so this only repairs them); how many there are. */
  async rebuildEntities(): Promise<number> {
    const data = await this.#http.execute(RebuildEntitiesDocument, {}, { write: true });
    return payload(data.rebuildEntities).names;
  }

  /** The categories a fact may have: the built-in ones, then those discovered here. */
  async categories(): Promise<Category[]> {
    return (await this.#http.execute(CategoriesDocument, {}, READ)).categories;
  }

  // -------------------------------------------------------------------------------- reads

  /** The fact visible at the time scope, else null. */
  async get(factId: string, scope: TimeScope = {}): Promise<Fact | null> {
    return (await this.#http.execute(GetFactDocument, { ...scope, id: factId }, READ)).fact;
  }

  /**
   * The facts of `ids` visible at the time scope (with `includeSuperseded`, replaced versions
   * too), by id; unknown ids are left out.
   */
  async getMany(
    ids: Iterable<string>,
    options: TimeScope & { includeSuperseded?: boolean } = {},
  ): Promise<Map<string, Fact>> {
    const { includeSuperseded = false, ...scope } = options;
    const wanted = [...new Set(ids)];
    const found = new Map<string, Fact>();
    for (let start = 0; start < wanted.length; start += IDS_PER_REQUEST) {
      const chunk = wanted.slice(start, start + IDS_PER_REQUEST);
      const answers = includeSuperseded
        ? await this.#versionsOf(chunk, scope)
        : await this.#aliased(chunk, 'fact', scope);
      chunk.forEach((id, n) => {
        const answer = answers[n];
        const facts = Array.isArray(answer) ? answer : answer ? [answer] : [];
        for (const fact of facts) if (fact.id === id) found.set(id, fact);
      });
    }
    return found;
  }

  /** The best facts for `query` first (hybrid search unless `mode` says otherwise). */
  async search(
    query: string,
    options: Omit<SearchQueryVariables, 'query'> = {},
  ): Promise<SearchHit[]> {
    return (await this.#http.execute(SearchDocument, { ...options, query }, READ)).search;
  }

  /** The `<memory-context>` block for `prompt`, within `maxTokens`. With `profile: true`
   * (default: the service's `recall_profile` setting) it leads with a line of the current
   * values of each entity the prompt names, which `profiles` lists. */
  async recall(
    prompt: string,
    options: Omit<RecallQueryVariables, 'prompt'> = {},
  ): Promise<RecallResult> {
    return (await this.#http.execute(RecallDocument, { ...options, prompt }, READ)).recall;
  }

  /** A page of facts in the order recorded (`after`: the previous page's `endCursor`). */
  async facts(options: Omit<FactsQueryVariables, 'filter'> & FactFilter = {}): Promise<FactPage> {
    const { first, after, asOf, knownAt, ...filter } = options;
    const data = await this.#http.execute(
      FactsDocument,
      { filter, first, after, asOf, knownAt },
      READ,
    );
    return {
      facts: data.facts.edges.map((edge) => edge.node),
      endCursor: data.facts.pageInfo.endCursor,
      hasNextPage: data.facts.pageInfo.hasNextPage,
    };
  }

  /** The facts about `entity` (and `key`), most recent first, no ranking. */
  async lookup(
    entity: string,
    options: Omit<LookupQueryVariables, 'entity'> = {},
  ): Promise<Fact[]> {
    return (await this.#http.execute(LookupDocument, { ...options, entity }, READ)).lookup;
  }

  /** The namespace's entities, the most facts first (at most `limit`, 1 to 1,000, default
   * 100), grouped as memory knew them at `knownAt` (default: now). */
  async entities(options: EntitiesQueryVariables = {}): Promise<Entity[]> {
    return (await this.#http.execute(EntitiesDocument, options, READ)).entities;
  }

  /** The entity `name` reaches (one of its names or aliases, whatever the case, spacing or
   * possessive, or a short form that fits one entity), as memory knew it at `knownAt`;
   * NOT_FOUND when it reaches none. */
  async entity(name: string, options: Omit<EntityQueryVariables, 'name'> = {}): Promise<Entity> {
    return (await this.#http.execute(EntityDocument, { ...options, name }, READ)).entity;
  }

  /** Who or what the entity `entity` names is at the time scope (`asOf`, `knownAt`): its
   * current values by key, its facts without a key and the entities its facts are linked to;
   * with `summary: true`, also the service's chat model's summary citing its facts (it waits
   * on that model: give it a longer `timeoutMs`). NOT_FOUND when the name reaches no entity. */
  async profile(
    entity: string,
    options: Omit<ProfileQueryVariables, 'entity'> = {},
  ): Promise<Profile> {
    return (await this.#http.execute(ProfileDocument, { ...options, entity }, READ)).profile;
  }

  /** Every version of the fact, oldest first; NOT_FOUND for an unknown id. */
  async history(factId: string, scope: TimeScope = {}): Promise<Fact[]> {
    return (await this.#http.execute(HistoryDocument, { ...scope, id: factId }, READ)).history;
  }

  /** The fact's links visible at the time scope, strongest first (every page). */
  async links(
    factId: string,
    options: Omit<LinksQueryVariables, 'id' | 'first' | 'after'> = {},
  ): Promise<Link[]> {
    const links: Link[] = [];
    let after: string | null = null;
    for (;;) {
      const data: LinksQuery = await this.#http.execute(
        LinksDocument,
        { ...options, id: factId, first: LINKS_PER_PAGE, after },
        READ,
      );
      const page = data.fact?.links;
      if (!page) return links;
      links.push(...page.edges.map((edge) => edge.link));
      const last = page.edges.at(-1);
      if (!page.pageInfo.hasNextPage || last === undefined) return links;
      after = last.cursor;
    }
  }

  /** The facts reached breadth-first from `from`, and the links among them. */
  async traverse(
    from: string | readonly string[],
    options: Omit<TraverseQueryVariables, 'from'> = {},
  ): Promise<Subgraph> {
    const ids = typeof from === 'string' ? [from] : [...from];
    return (await this.#http.execute(TraverseDocument, { ...options, from: ids }, READ)).traverse;
  }

  /** A shortest path between two facts of at most `maxDepth` links (1 to 6, default 6), or
   * null. */
  async path(
    sourceId: string,
    targetId: string,
    options: Omit<PathQueryVariables, 'from' | 'to'> = {},
  ): Promise<Path | null> {
    const variables = { ...options, from: sourceId, to: targetId };
    return (await this.#http.execute(PathDocument, variables, READ)).path;
  }

  /** The episode with this id, or null. */
  async episode(episodeId: string): Promise<Episode | null> {
    return (await this.#http.execute(EpisodeDocument, { id: episodeId }, READ)).episode;
  }

  /** Episodes by time, oldest first. */
  async episodes(options: EpisodesQueryVariables = {}): Promise<Episode[]> {
    return (await this.#http.execute(EpisodesDocument, options, READ)).episodes;
  }

  /** An episode's facts in the order written; NOT_FOUND for an unknown episode. */
  async episodeFacts(episodeId: string, scope: TimeScope = {}): Promise<Fact[]> {
    const data = await this.#http.execute(EpisodeFactsDocument, { ...scope, id: episodeId }, READ);
    if (data.episode === null) {
      throw new GraphmemError('NOT_FOUND', `no episode with id '${episodeId}'`);
    }
    return data.episode.facts;
  }

  /** The synced documents (at or under `under`), by path. */
  async documents(options: { under?: string } = {}): Promise<DocumentFile[]> {
    return (await this.#http.execute(DocumentsDocument, options, READ)).documents;
  }

  /** Lines `start` to `end` (1-based, inclusive; default: to the end) of a synced document. */
  async readLines(path: string, start = 1, end: number | null = null): Promise<string> {
    const variables = { path, start, end };
    return (await this.#http.execute(DocumentLinesDocument, variables, READ)).documentLines;
  }

  /** The erasure records, newest first (an admin key). */
  async erasures(options: { limit?: number } = {}): Promise<Erasure[]> {
    return (await this.#http.execute(ErasuresDocument, options, READ)).erasures;
  }

  /** Counts describing the namespace, and its providers' usage. */
  async stats(): Promise<Stats> {
    const { stats } = await this.#http.execute(StatsDocument, {}, READ);
    const data = typeof stats.data === 'object' && stats.data !== null ? stats.data : {};
    return { namespace: stats.namespace, data: data as Record<string, unknown> };
  }

  /** The graphmem version serving the requests. */
  async version(): Promise<string> {
    return (await this.#http.execute(VersionDocument, {}, READ)).version;
  }

  /** The namespace the requests use (the client's, else the key's first). */
  async namespace(): Promise<string> {
    return (await this.#http.execute(NamespaceDocument, {}, READ)).namespace;
  }

  /**
   * Every change committed in the namespace from now on (FACT_STORED, LINK_MADE…, or only
   * `kinds`): `for await (const change of client.changes())`; leaving the loop or `close()`
   * ends the subscription.
   */
  changes(options: { kinds?: readonly ChangeKind[] } = {}): ChangeStream {
    if (typeof this.#webSocketImpl !== 'function') {
      throw new GraphmemError(
        'INVALID_INPUT',
        "this runtime has no WebSocket: pass webSocketImpl (on node: import WebSocket from 'ws')",
        { field: 'webSocketImpl' },
      );
    }
    return new ChangeStream(
      {
        url: `${this.url.replace(/^http/, 'ws')}/graphql`,
        apiKey: this.#apiKey,
        namespace: this.#namespace,
        webSocketImpl: this.#webSocketImpl,
      },
      options.kinds ?? null,
      this.namespace(),
    );
  }

  // ------------------------------------------------------------------------------ helpers

  /** `field(id: …)` of each id, aliased in one request: per id, its fact(s) or null. */
  async #aliased(
    ids: readonly string[],
    field: 'fact' | 'history',
    scope: TimeScope,
  ): Promise<Array<Fact | Fact[] | null>> {
    const names = ids.map((_, n) => `$i${n}: ID!`).join(', ');
    const fields = ids
      .map(
        (_, n) => `f${n}: ${field}(id: $i${n}, asOf: $asOf, knownAt: $knownAt) { ...FactFields }`,
      )
      .join('\n  ');
    const query =
      `query GetMany(${names}, $asOf: DateTime, $knownAt: DateTime) {\n  ${fields}\n}\n` +
      FactFieldsFragmentDoc.toString();
    const variables: Record<string, unknown> = { ...scope };
    ids.forEach((id, n) => (variables[`i${n}`] = id));
    // Shaped as the aliases and the FactFields fragment it asked for.
    const data = (await this.#http.executeText(query, variables, READ)) as Record<
      string,
      Fact | Fact[] | null
    >;
    return ids.map((_, n) => data[`f${n}`] ?? null);
  }

  /** Every version of each id's chain; one unknown id fails the aliased request, so then
   * each is asked alone and the unknown ones answer null. */
  async #versionsOf(ids: readonly string[], scope: TimeScope): Promise<Array<Fact[] | null>> {
    try {
      return (await this.#aliased(ids, 'history', scope)) as Array<Fact[] | null>;
    } catch (error) {
      if (!(error instanceof GraphmemError) || error.code !== 'NOT_FOUND') throw error;
    }
    return Promise.all(
      ids.map((id) =>
        this.history(id, scope).catch((error: unknown) => {
          if (error instanceof GraphmemError && error.code === 'NOT_FOUND') return null;
          throw error;
        }),
      ),
    );
  }
}

const READ = { write: false } as const;

/** A mutation's payload; its `error`, when set, thrown as a GraphmemError. */
function payload<T extends { error?: UserErrorFieldsFragment | null }>(answer: T): T {
  if (answer.error) {
    throw new GraphmemError(answer.error.code, answer.error.message, {
      field: answer.error.field,
    });
  }
  return answer;
}

function episodeInput(episode: string | EpisodeInput | undefined): EpisodeInput | undefined {
  return typeof episode === 'string' ? { id: episode } : episode;
}

/** `url` without trailing slashes; INVALID_INPUT, before any request, for one that is not
 * http(s), which every request would fail on. */
function serviceUrl(url: string): string {
  let protocol: string | null = null;
  try {
    protocol = new URL(url).protocol;
  } catch {
    // not a URL at all: refused below
  }
  if (protocol !== 'http:' && protocol !== 'https:') {
    throw new GraphmemError(
      'INVALID_INPUT',
      `the service's URL must be http:// or https://, not '${url}'`,
      { field: 'url' },
    );
  }
  return url.replace(/\/+$/, '');
}

/** A GRAPHMEM_* variable where there is an environment (node), else null (a browser). */
function environment(name: string): string | null {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process
    ?.env;
  return env?.[name] || null;
}
