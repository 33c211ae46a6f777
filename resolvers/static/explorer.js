// The relationship explorer: search memory, draw a fact's neighbourhood, expand it node by node,
// move through valid time (asOf) and transaction time (knownAt), read a fact's history, and link
// or forget facts when the key may write. Every read and write is a GraphQL call (api.js).

import { ApiError, Unauthenticated, checkPayload, credentials, gql, saveCredentials } from "./api.js";
import { CATEGORY_COLOURS, GraphView } from "./graph.js";

const FACT = `id text category importance entity key value source tags summary why context
  decayClass expiresAt confidence lastConfirmedAt accessCount lastAccessedAt sourceDate
  validFrom validUntil validUntilRecordedAt recordedAt retractedAt supersededById supersedesId episodeId
  statedTime { start end text } knownNow { retractedAt supersededById validUntil }`;
const LINK = "id type sourceId targetId strength origin validFrom validUntil recordedAt retractedAt";
const SCOPE = "$asOf: DateTime, $knownAt: DateTime";
const WALK = `$types: [LinkType!], $direction: Direction!, ${SCOPE}`;
const RESULTS = 25; // search results shown
const MAX_NODES = 200; // facts in one neighbourhood
const EXPAND_PAGE = 50; // links added by expanding one node (strongest first)
const EXPAND_BATCH = 20; // expansions per request (the service limits aliases)
const SLIDER_STEP = 3600; // seconds
const NOTICE_SECONDS = 10; // how long a confirmation stays
const DAY = 86400;

const state = {
  connected: false, // the service answered, with the key in use (if any)
  canWrite: false,
  root: null, // the fact the neighbourhood is drawn around, as picked
  shown: null, // the version of root's chain drawn at the current moment
  selected: null, // the fact whose details are shown
  selectedLink: null,
  expanded: new Set(), // facts whose neighbours were added by a click
  asOf: null, // epoch seconds; null = now
  knownAt: null,
  facts: new Map(), // the facts drawn, by id
  links: [], // the links drawn
  chain: [], // root's versions, oldest first
  rangesSet: false,
  draws: 0,
  searched: false,
};

const $ = (id) => document.getElementById(id);
const graph = new GraphView($("graph"), {
  onNode: (id) => attempt(() => clickNode(id)),
  onNodeTwice: (id) => attempt(() => focus(id)),
  onEdge: (id) => selectLink(id),
});
// For the browser console: the Cytoscape instance and the page's state.
window.explorer = { cy: graph.cy, state };

wire();
renderLegend();
setRanges();
attempt(start);

// ------------------------------------------------------------------------------ connecting

async function start() {
  if (!(await connect())) return;
  $("search-input").focus();
  const linked = new URLSearchParams(location.hash.slice(1)).get("fact");
  if (linked) await focus(linked);
}

/** Ask the service who we are; false (and a key prompt) when it answers 401. */
async function connect() {
  const data = await guarded(() => gql("{ namespace canWrite }"));
  state.connected = Boolean(data);
  if (!data) return false;
  state.canWrite = data.canWrite;
  $("namespace").textContent = `namespace: ${data.namespace}`;
  $("access").textContent = data.canWrite ? "read-write" : "read-only";
  $("access").className = `badge ${data.canWrite ? "rw" : "ro"}`;
  renderDetails();
  return true;
}

function askForKey(message) {
  const dialog = $("key-dialog");
  const { key, namespace } = credentials();
  $("key-message").textContent = message;
  $("namespace-input").value = namespace;
  $("key-input").value = "";
  $("key-input").placeholder = key ? "(keep the key in use)" : "gm_…";
  $("key-clear").hidden = !key;
  if (!dialog.open) dialog.showModal();
  $("key-input").focus();
}

/** Save: a new key (or keep the one in use when left empty) and namespace; clear: no key. */
async function keyDialogClosed() {
  const answer = $("key-dialog").returnValue;
  const entered = $("key-input").value.trim();
  $("key-input").value = "";
  if (answer !== "save" && answer !== "clear") {
    if (!state.connected) report(new ApiError("this server needs an API key: enter one with “API key…”", "UNAUTHENTICATED"));
    return;
  }
  const key = answer === "clear" ? "" : entered || credentials().key;
  saveCredentials({ key, namespace: $("namespace-input").value.trim() });
  hideAlert();
  if (!(await connect())) return;
  if (state.searched) await search();
  if (state.root) await redraw();
}

// ------------------------------------------------------------------------------ search

async function search() {
  const query = $("search-input").value.trim();
  const variables = { ...scope(), includeSuperseded: $("include-superseded").checked };
  let facts;
  let more = false;
  if (query) {
    const data = await gql(
      `query($q: String!, $includeSuperseded: Boolean!, ${SCOPE}) {
        search(query: $q, limit: ${RESULTS}, includeSuperseded: $includeSuperseded,
               asOf: $asOf, knownAt: $knownAt) { score fact { ${FACT} } } }`,
      { q: query, ...variables },
    );
    facts = data.search.map((hit) => hit.fact);
  } else {
    const data = await gql(
      `query($includeSuperseded: Boolean!, ${SCOPE}) {
        facts(filter: {includeSuperseded: $includeSuperseded}, first: ${RESULTS},
              asOf: $asOf, knownAt: $knownAt) { edges { node { ${FACT} } } pageInfo { hasNextPage } } }`,
      variables,
    );
    facts = data.facts.edges.map((edge) => edge.node);
    more = data.facts.pageInfo.hasNextPage;
  }
  state.searched = true;
  renderResults(facts, query, more);
}

function renderResults(facts, query, more) {
  const when = momentText();
  $("results-summary").textContent = !facts.length
    ? `Nothing found${query ? ` for “${query}”` : ""}${when}.`
    : query
      ? `${facts.length} ${plural(facts.length, "fact")} for “${query}”${when}, best first.`
      : `${facts.length}${more ? "+" : ""} ${plural(facts.length, "fact")}${when}, in the order memory recorded them.`;
  $("results").replaceChildren(
    ...facts.map((fact) =>
      el("li", {},
        el("button", { type: "button", class: "result", "data-id": fact.id, onclick: () => attempt(() => focus(fact.id)) },
          el("span", { class: "text" }, fact.text),
          el("span", { class: "meta" },
            chip(fact.category),
            ` ${validity(fact)}`,
            statusOf(fact) !== "current" ? el("span", { class: `badge ${statusOf(fact)}` }, statusLabel(fact)) : null,
          ),
        ),
      ),
    ),
  );
}

// ------------------------------------------------------------------------------ the graph

/** Draw the neighbourhood of ``id`` afresh. */
async function focus(id) {
  state.root = id;
  state.selected = id;
  state.selectedLink = null;
  state.expanded.clear();
  state.rangesSet = false;
  history.replaceState(null, "", `#fact=${encodeURIComponent(id)}`);
  await redraw();
}

async function clickNode(id) {
  state.selected = id;
  state.selectedLink = null;
  graph.select(id);
  renderDetails();
  if (id !== state.shown && !state.expanded.has(id)) {
    state.expanded.add(id);
    await redraw();
  }
}

/**
 * Fetch and draw what the controls ask for: the neighbourhood of the root (or, when the root is
 * not visible at the moment, of the version of its chain that is), the neighbours of every
 * expanded fact, then every fact among these with the links between them.
 */
async function redraw() {
  if (!state.root) return;
  const draw = ++state.draws;
  const box = $("graph");
  box.dataset.state = "loading";
  try {
    const walk = { ...scope(), types: linkTypes(), direction: $("direction").value };
    const depth = Number($("depth").value);
    let shown = state.root;
    let base = await neighbourhood(shown, depth, walk);
    if (!base.nodes.some((node) => node.fact.id === shown)) {
      const then = await gql(
        `query($id: ID!, ${SCOPE}) { history(id: $id, asOf: $asOf, knownAt: $knownAt) { id } }`,
        { id: state.root, ...scope() },
      );
      shown = then.history.at(-1)?.id ?? null;
      base = shown && shown !== state.root ? await neighbourhood(shown, depth, walk) : { nodes: [], truncatedBy: [] };
      if (!base.nodes.length) shown = null;
    }
    // Expanded facts add their neighbours while they are in the drawing (a narrower direction
    // or fewer link types may leave them out), in rounds, as one expansion can reach another.
    const ids = new Set(base.nodes.map((node) => node.fact.id));
    const partial = [];
    const done = new Set();
    for (;;) {
      const round = [...state.expanded].filter((id) => ids.has(id) && !done.has(id));
      if (!round.length) break;
      for (const [id, links] of await expansions(round, walk)) {
        done.add(id);
        for (const edge of links?.edges ?? []) if (edge.neighbour) ids.add(edge.neighbour.id);
        if (links?.pageInfo.hasNextPage) partial.push(id);
      }
    }
    const [drawing, chain] = await Promise.all([
      ids.size
        ? gql(
            `query($ids: [ID!]!, $types: [LinkType!], $max: Int!, ${SCOPE}) {
              traverse(from: $ids, depth: 0, types: $types, maxNodes: $max, asOf: $asOf,
                       knownAt: $knownAt) { nodes { fact { ${FACT} } } edges { ${LINK} } } }`,
            { ids: [...ids], types: walk.types, max: ids.size, ...scope() },
          )
        : null,
      gql(`query($id: ID!, $knownAt: DateTime) { history(id: $id, knownAt: $knownAt) { ${FACT} } }`, {
        id: shown ?? state.root,
        knownAt: scope().knownAt,
      }),
    ]);
    if (draw !== state.draws) return; // a newer drawing is on its way
    // Details follow the picked fact through its versions as time moves.
    if (state.selected === state.shown) state.selected = shown;
    state.shown = shown;
    state.facts = new Map((drawing?.traverse.nodes ?? []).map((node) => [node.fact.id, node.fact]));
    state.links = drawing?.traverse.edges ?? [];
    state.chain = chain.history;
    if (!state.facts.has(state.selected)) state.selected = shown;
    if (state.selectedLink && !state.links.some((link) => link.id === state.selectedLink)) state.selectedLink = null;
    graph.draw({ facts: [...state.facts.values()], links: state.links, root: shown, status: statusOf });
    graph.select(state.selectedLink ?? state.selected);
    if (!state.rangesSet) setRanges();
    box.dataset.nodes = String(state.facts.size);
    box.dataset.edges = String(state.links.length);
    box.dataset.state = "ready";
    $("graph-summary").textContent = summary(base.truncatedBy, partial);
    renderDetails();
    renderTimeline();
  } catch (error) {
    if (draw === state.draws) box.dataset.state = "error";
    throw error;
  }
}

async function neighbourhood(id, depth, walk) {
  const data = await gql(
    `query($id: ID!, $depth: Int!, $max: Int!, ${WALK}) {
      traverse(from: [$id], depth: $depth, types: $types, direction: $direction, maxNodes: $max,
               asOf: $asOf, knownAt: $knownAt) { nodes { fact { id } } truncatedBy } }`,
    { id, depth, max: MAX_NODES, ...walk },
  );
  return data.traverse;
}

/** [id, a page of its links (null if not visible)] for each of ``ids``: one hop each. */
async function expansions(ids, walk) {
  const found = [];
  for (let i = 0; i < ids.length; i += EXPAND_BATCH) {
    const batch = ids.slice(i, i + EXPAND_BATCH);
    const fields = batch.map(
      (_, j) => `e${j}: fact(id: $e${j}, asOf: $asOf, knownAt: $knownAt) {
        links(direction: $direction, types: $types, first: ${EXPAND_PAGE}) {
          edges { neighbour { id } } pageInfo { hasNextPage } } }`,
    );
    const names = batch.map((_, j) => `$e${j}: ID!`).join(", ");
    const data = await gql(`query(${names}, ${WALK}) { ${fields.join("\n")} }`, {
      ...Object.fromEntries(batch.map((id, j) => [`e${j}`, id])),
      ...walk,
    });
    batch.forEach((id, j) => found.push([id, data[`e${j}`]?.links ?? null]));
  }
  return found;
}

function summary(truncatedBy, partial) {
  const when = momentText();
  if (!state.facts.size) return `No version of this fact is visible${when || " now"}.`;
  const parts = [`${state.facts.size} ${plural(state.facts.size, "fact")}, ${state.links.length} ${plural(state.links.length, "link")}${when}.`];
  if (state.shown !== state.root) parts.push("Showing the version of the picked fact that was valid then.");
  if (truncatedBy.includes("depth")) parts.push(`More lie beyond depth ${$("depth").value}: click a node to expand it.`);
  if (truncatedBy.includes("max_nodes")) parts.push(`Only the first ${MAX_NODES} facts are drawn.`);
  if (truncatedBy.includes("fan_out")) parts.push("Some crowded facts show only their strongest links.");
  if (partial.length) parts.push(`Expanded facts show their ${EXPAND_PAGE} strongest links.`);
  return parts.join(" ");
}

// ------------------------------------------------------------------------------ details

function renderDetails() {
  const fact = state.facts.get(state.selected);
  const link = state.links.find((l) => l.id === state.selectedLink);
  $("details").hidden = !fact || Boolean(link);
  $("link-details").hidden = !link;
  $("details-empty").hidden = Boolean(fact || link);
  $("details-empty").textContent = state.root ? "The picked fact is not visible at this moment." : "No fact selected.";
  if (link) renderLink(link);
  if (!fact) return;
  $("details-text").textContent = fact.text;
  $("details-status").replaceChildren(chip(fact.category), " ", statusSentence(fact));
  $("details-fields").replaceChildren(
    ...FIELDS.flatMap(([name, label, kind]) => field(label, fact[name], kind)),
    ...documentField(fact),
  );
  $("details-links").replaceChildren(...linksOf(fact.id));
  $("expand-button").disabled = fact.id === state.shown || state.expanded.has(fact.id);
  $("centre-button").disabled = fact.id === state.root;
  const writable = state.canWrite && statusOf(fact) !== "forgotten";
  $("write-actions").hidden = !writable;
  if (writable) {
    const others = [...state.facts.values()].filter((other) => other.id !== fact.id);
    $("link-target").replaceChildren(
      el("option", { value: "" }, others.length ? "a fact in view…" : "no other fact in view"),
      ...others.map((other) => el("option", { value: other.id }, short(other.text, 50))),
    );
  }
}

const FIELDS = [
  ["id", "Id"],
  ["category", "Category"],
  ["entity", "Entity"],
  ["key", "Key"],
  ["value", "Value"],
  ["tags", "Tags", "list"],
  ["importance", "Importance"],
  ["confidence", "Confidence"],
  ["decayClass", "Decay class"],
  ["source", "Source"],
  ["summary", "Summary"],
  ["why", "Why"],
  ["context", "Context"],
  ["validFrom", "Valid from", "time"],
  ["validUntil", "Valid until", "time"],
  ["validUntilRecordedAt", "End recorded at", "time"],
  ["recordedAt", "Recorded at", "time"],
  ["retractedAt", "Forgotten at", "time"],
  ["expiresAt", "Expires at", "time"],
  ["lastConfirmedAt", "Last confirmed", "time"],
  ["sourceDate", "Source date", "time"],
  ["statedTime", "Says", "stated"],
  ["accessCount", "Times found"],
  ["lastAccessedAt", "Last found", "time"],
  ["supersedesId", "Replaces", "fact"],
  ["supersededById", "Replaced by", "fact"],
];

function field(label, value, kind) {
  let shown;
  if (value === null || value === undefined || value === "" || (kind === "list" && !value.length)) {
    shown = el("span", { class: "muted" }, "—");
  } else if (kind === "time") {
    shown = el("time", { datetime: value }, formatTime(value));
  } else if (kind === "list") {
    shown = value.join(", ");
  } else if (kind === "stated") {
    // The time the text states: its words, and the period they were read as.
    shown = `“${value.text}”: ${formatTime(value.start)} → ${formatTime(value.end)}`;
  } else if (kind === "fact") {
    shown = el("button", { type: "button", class: "ref", onclick: () => attempt(() => focus(value)) }, short(value, 13));
  } else {
    shown = String(value);
  }
  return [el("dt", {}, label), el("dd", { "data-field": label }, shown)];
}

// A chunk of a synced markdown note: its source is "path:first-last" and its episode the path.
function documentField(fact) {
  const found = /^(.*):(\d+)-(\d+)$/.exec(fact.source ?? "");
  if (!found || found[1] !== fact.episodeId) return [];
  const [, path, start, end] = found;
  const lines = el("pre", { id: "document-lines", hidden: "" });
  const show = () =>
    attempt(async () => {
      const data = await gql("query($path: String!, $start: Int!, $end: Int) { documentLines(path: $path, start: $start, end: $end) }", {
        path,
        start: Number(start),
        end: Number(end),
      });
      lines.textContent = data.documentLines;
      lines.hidden = false;
      read.hidden = true;
    });
  const read = el("button", { type: "button", id: "document-read", onclick: show }, "Show the lines");
  return [
    el("dt", {}, "Document"),
    el("dd", { "data-field": "Document" }, el("div", {}, `${path}, lines ${start}–${end}`), read, lines),
  ];
}

function linksOf(id) {
  const items = state.links
    .filter((link) => link.sourceId === id || link.targetId === id)
    .map((link) => {
      const out = link.sourceId === id;
      const other = state.facts.get(out ? link.targetId : link.sourceId);
      return el("li", {},
        el("button", { type: "button", class: "ref", onclick: () => attempt(() => clickNode(other.id)) },
          `${out ? "→" : "←"} ${link.type} `, el("span", { class: "text" }, short(other.text, 60))),
      );
    });
  return items.length ? items : [el("li", { class: "muted" }, "none in view")];
}

function selectLink(id) {
  state.selectedLink = id;
  graph.select(id);
  renderDetails();
}

function renderLink(link) {
  const source = state.facts.get(link.sourceId);
  const target = state.facts.get(link.targetId);
  $("link-title").textContent = `${short(source.text, 40)} —${link.type}→ ${short(target.text, 40)}`;
  const rows = [
    ["Id", link.id],
    ["Type", link.type],
    ["Strength", link.strength],
    ["Made by", link.origin],
    ["Valid from", link.validFrom, "time"],
    ["Valid until", link.validUntil, "time"],
    ["Recorded at", link.recordedAt, "time"],
    ["Unlinked at", link.retractedAt, "time"],
  ];
  $("link-fields").replaceChildren(...rows.flatMap(([label, value, kind]) => field(label, value, kind)));
}

// ------------------------------------------------------------------------------ history

/** The root's versions as rows of a timeline, each bar spanning its validity. */
function renderTimeline() {
  const box = $("timeline");
  const chain = state.chain;
  if (!chain.length) {
    box.replaceChildren(el("p", { class: "muted" }, `No version is known${momentText() || " now"}.`));
    return;
  }
  const now = nowSeconds();
  const known = state.knownAt ?? now;
  const ends = chain.map((version) => endOf(version, known));
  const first = toSeconds(chain[0].validFrom);
  const last = Math.max(now, state.asOf ?? 0, ...ends.filter((end) => end !== null));
  const span = Math.max(last - first, 1);
  const moment = state.asOf ?? now;
  const rows = chain.map((version, i) => {
    const from = toSeconds(version.validFrom);
    const until = ends[i] ?? last;
    const bar = el("span", { class: `bar ${statusOf(version)}` });
    bar.style.left = `${((from - first) / span) * 100}%`;
    bar.style.width = `${Math.max(((until - from) / span) * 100, 1)}%`;
    const marker = el("span", { class: "marker", title: "the moment shown" });
    marker.style.left = `${((moment - first) / span) * 100}%`;
    return el("li", { class: version.id === state.shown ? "version shown" : "version", "data-id": version.id },
      el("button", { type: "button", onclick: () => attempt(() => showVersion(version, ends[i])) },
        el("span", { class: "when" }, `${formatTime(version.validFrom)} → ${ends[i] === null ? "…" : formatTime(toIso(ends[i]))}`),
        el("span", { class: "text" }, version.text),
        el("span", { class: "track" }, bar, marker),
      ),
    );
  });
  box.replaceChildren(
    el("ol", { class: "versions", "aria-label": "Versions, oldest first" }, ...rows),
    el("p", { class: "muted axis" }, `${formatTime(toIso(first))} … ${last === now ? "now" : formatTime(toIso(last))}`),
  );
}

/** When a version stopped being valid, as memory knew it at ``known`` (null: still valid). */
function endOf(version, known) {
  const until = toSeconds(version.validUntil);
  const learnt = toSeconds(version.validUntilRecordedAt);
  return until !== null && (learnt === null || learnt <= known) ? until : null;
}

async function showVersion(version, end) {
  state.asOf = end === null ? null : toSeconds(version.validFrom);
  renderTime();
  await focus(version.id);
  await refreshResults();
}

// ------------------------------------------------------------------------------ time

function scope() {
  return {
    asOf: state.asOf === null ? null : toIso(state.asOf),
    knownAt: state.knownAt === null ? null : toIso(state.knownAt),
  };
}

/**
 * The sliders span the picked fact's life: from its first version (at least a day, and the
 * moment set, if earlier) to now.
 */
function setRanges() {
  const now = Math.ceil(nowSeconds() / SLIDER_STEP) * SLIDER_STEP;
  for (const [slider, name, field] of [["as-of-slider", "asOf", "validFrom"], ["known-at-slider", "knownAt", "recordedAt"]]) {
    const times = [now - DAY, state[name] ?? now, ...state.chain.map((fact) => toSeconds(fact[field]))];
    $(slider).min = String(Math.min(...times));
    $(slider).max = String(now);
    $(slider).step = String(SLIDER_STEP);
  }
  state.rangesSet = true;
  renderTime();
}

function renderTime() {
  for (const [name, input, slider, shown] of [
    ["asOf", "as-of", "as-of-slider", "as-of-shown"],
    ["knownAt", "known-at", "known-at-slider", "known-at-shown"],
  ]) {
    const value = state[name];
    $(input).value = value === null ? "" : toIso(value).slice(0, 19);
    $(slider).value = String(value === null ? $(slider).max : value);
    $(shown).textContent = value === null ? "now" : formatTime(toIso(value));
  }
}

function sliderMoved(slider, shown) {
  const value = Number(slider.value);
  const now = value > Number(slider.max) - SLIDER_STEP;
  $(shown).textContent = now ? "now" : formatTime(toIso(value));
  return now ? null : value;
}

async function moveTo(name, value) {
  state[name] = value;
  renderTime();
  await redraw();
  await refreshResults();
}

async function refreshResults() {
  if (state.searched) await search();
}

function momentText() {
  const parts = [];
  if (state.asOf !== null) parts.push(`as of ${formatTime(toIso(state.asOf))}`);
  if (state.knownAt !== null) parts.push(`known at ${formatTime(toIso(state.knownAt))}`);
  return parts.length ? ` ${parts.join(", ")}` : "";
}

// ------------------------------------------------------------------------------ writing

async function link(event) {
  event.preventDefault();
  const source = state.selected;
  const target = $("link-target-id").value.trim() || $("link-target").value;
  const strength = $("link-strength").valueAsNumber;
  if (!target) throw new ApiError("choose a fact in view, or paste a fact's id", "INVALID_INPUT");
  if (Number.isNaN(strength)) throw new ApiError("strength must be a number from 0 to 1", "INVALID_INPUT");
  const type = $("link-type").value;
  const data = await gql(
    `mutation($input: LinkInput!) { linkFacts(input: $input) {
      link { id } error { code message field } } }`,
    { input: { sourceId: source, targetId: target, type, strength } },
  );
  checkPayload(data.linkFacts);
  $("link-target-id").value = "";
  notify(`Linked: this fact ${type} ${state.facts.get(target)?.text ?? target}.`);
  if (source !== state.shown) state.expanded.add(source);
  await redraw();
}

function askToForget() {
  const fact = state.facts.get(state.selected);
  $("forget-text").textContent = fact.text;
  $("forget-dialog").returnValue = "";
  $("forget-dialog").showModal();
}

async function forget() {
  const fact = state.facts.get(state.selected);
  const data = await gql(
    `mutation($id: ID!) { forgetFact(id: $id) { fact { id } error { code message field } } }`,
    { id: fact.id },
  );
  checkPayload(data.forgetFact);
  notify(`Forgot “${short(fact.text, 60)}”. Set “Known at” before now to see it again.`);
  state.expanded.delete(fact.id);
  await redraw();
  await refreshResults();
}

// ------------------------------------------------------------------------------ reporting

/** Run an action of the page; its failures are shown, never thrown at the person. */
async function attempt(action) {
  try {
    await action();
  } catch (error) {
    report(error);
  }
}

/** ``call()``'s result, or null after reporting its failure. */
async function guarded(call) {
  try {
    return await call();
  } catch (error) {
    report(error);
    return null;
  }
}

function report(error) {
  if (error instanceof Unauthenticated) {
    askForKey(credentials().key ? `The server refused the key: ${error.message}.` : `This server needs an API key: ${error.message}.`);
    return;
  }
  if (!(error instanceof ApiError)) console.error(error); // a bug of the page
  if (error instanceof ApiError && error.status === 403) askForKey(`${error.message}: use another key or namespace.`);
  $("alert-text").textContent = error.code ? `${error.code}: ${error.message}` : String(error.message ?? error);
  $("alert").hidden = false;
}

function hideAlert() {
  $("alert").hidden = true;
}

function notify(message) {
  hideAlert();
  $("notice").textContent = message;
  $("notice").hidden = false;
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => ($("notice").hidden = true), NOTICE_SECONDS * 1000);
}

// ------------------------------------------------------------------------------ wiring

function wire() {
  $("search-form").addEventListener("submit", (event) => {
    event.preventDefault();
    attempt(search);
  });
  $("include-superseded").addEventListener("change", () => attempt(refreshResults));
  $("types").addEventListener("change", (event) => {
    if (!linkTypes().length) {
      event.target.checked = true; // the service needs at least one type
      notify("Keep at least one link type.");
      return;
    }
    attempt(redraw);
  });
  $("direction").addEventListener("change", () => attempt(redraw));
  $("depth").addEventListener("change", () => attempt(redraw));
  $("reset").addEventListener("click", () => {
    state.expanded.clear();
    attempt(redraw);
  });
  for (const [name, input, slider, shown, now] of [
    ["asOf", "as-of", "as-of-slider", "as-of-shown", "as-of-now"],
    ["knownAt", "known-at", "known-at-slider", "known-at-shown", "known-at-now"],
  ]) {
    $(input).addEventListener("change", () => {
      const value = $(input).value;
      attempt(() => moveTo(name, value ? Date.parse(`${value}Z`) / 1000 : null));
    });
    $(slider).addEventListener("input", () => sliderMoved($(slider), shown));
    $(slider).addEventListener("change", () => attempt(() => moveTo(name, sliderMoved($(slider), shown))));
    $(now).addEventListener("click", () => attempt(() => moveTo(name, null)));
  }
  $("centre-button").addEventListener("click", () => attempt(() => focus(state.selected)));
  $("expand-button").addEventListener("click", () => {
    state.expanded.add(state.selected);
    attempt(redraw);
  });
  $("link-form").addEventListener("submit", (event) => attempt(() => link(event)));
  $("forget-button").addEventListener("click", askToForget);
  $("forget-dialog").addEventListener("close", () => {
    if ($("forget-dialog").returnValue === "forget") attempt(forget);
  });
  $("key-button").addEventListener("click", () =>
    askForKey("Enter an API key (leave it empty to use none: a server without keys on loopback)."),
  );
  $("key-cancel").addEventListener("click", () => $("key-dialog").close("cancel"));
  $("key-clear").addEventListener("click", () => $("key-dialog").close("clear"));
  $("key-dialog").addEventListener("close", () => attempt(keyDialogClosed));
  $("alert-close").addEventListener("click", hideAlert);
  $("notice").addEventListener("click", () => ($("notice").hidden = true));
  window.addEventListener("hashchange", () => {
    const id = new URLSearchParams(location.hash.slice(1)).get("fact");
    if (id && id !== state.root) attempt(() => focus(id));
  });
}

function linkTypes() {
  return [...$("types").querySelectorAll("input:checked")].map((box) => box.value);
}

function renderLegend() {
  const swatch = (colour, className = "swatch") => {
    const span = el("span", { class: className });
    if (colour) span.style.backgroundColor = colour;
    return span;
  };
  $("legend").replaceChildren(
    ...Object.entries(CATEGORY_COLOURS).map(([name, colour]) => el("li", {}, swatch(colour), name)),
    el("li", {}, swatch(null, "swatch root"), "picked fact"),
    el("li", {}, swatch(null, "swatch superseded"), "replaced by then"),
    el("li", {}, swatch(null, "swatch forgotten"), "forgotten later"),
    el("li", {}, el("span", { class: "dash" }), "SUPERSEDES: newer → older"),
  );
}

// ------------------------------------------------------------------------------ helpers

/**
 * "forgotten" (a fact the API returns only at a "Known at" before it was forgotten: the fields
 * read as known then, so the forgetting shows in ``knownNow`` alone), else "superseded"
 * (replaced, or no longer valid, at the moment shown, as known then), else "current".
 */
function statusOf(fact) {
  if (fact.knownNow?.retractedAt) return "forgotten";
  const now = nowSeconds();
  const known = state.knownAt ?? now;
  const end = endOf(fact, known);
  return end !== null && end <= (state.asOf ?? now) ? "superseded" : "current";
}

function statusLabel(fact) {
  return { current: "current", superseded: fact.supersededById ? "replaced" : "ended", forgotten: "forgotten" }[statusOf(fact)];
}

function statusSentence(fact) {
  const status = statusOf(fact);
  if (status === "forgotten") return `Forgotten on ${formatTime(fact.knownNow.retractedAt)}; shown because “Known at” is earlier.`;
  if (status === "superseded") {
    return fact.supersededById
      ? `Replaced by a newer version on ${formatTime(fact.validUntil)}.`
      : `No longer valid since ${formatTime(fact.validUntil)}.`;
  }
  const end = endOf(fact, state.knownAt ?? nowSeconds());
  const since = formatTime(fact.validFrom);
  const later = fact.knownNow?.supersededById && !fact.supersededById
    ? ` Replaced later, from ${formatTime(fact.knownNow.validUntil)}.`
    : "";
  return `${end === null ? `Valid since ${since}` : `Valid ${since} → ${formatTime(toIso(end))}`}${momentText()}.${later}`;
}

function validity(fact) {
  const end = endOf(fact, state.knownAt ?? nowSeconds());
  return `${formatTime(fact.validFrom)} → ${end === null ? "…" : formatTime(toIso(end))}`;
}

function chip(category) {
  const span = el("span", { class: "chip" }, category);
  span.style.backgroundColor = CATEGORY_COLOURS[category] || CATEGORY_COLOURS.other;
  return span;
}

function nowSeconds() {
  return Date.now() / 1000;
}

function toSeconds(iso) {
  return iso === null || iso === undefined ? null : Date.parse(iso) / 1000;
}

function toIso(seconds) {
  return new Date(Math.round(seconds) * 1000).toISOString().replace(".000Z", "Z");
}

/** "2023-06-01" at midnight UTC, else "2023-06-01 14:05 UTC". */
function formatTime(iso) {
  const text = new Date(iso).toISOString();
  return text.slice(11, 19) === "00:00:00" ? text.slice(0, 10) : `${text.slice(0, 10)} ${text.slice(11, 16)} UTC`;
}

function short(text, length) {
  return text.length > length ? `${text.slice(0, length - 1)}…` : text;
}

function plural(count, word) {
  return count === 1 ? word : `${word}s`;
}

/** An element with attributes (``on…`` ones are listeners) and children (text stays text). */
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}
