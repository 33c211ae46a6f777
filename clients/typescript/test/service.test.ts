// The client against a real `graphmem serve` (GRAPHMEM_URL, and GRAPHMEM_API_KEY when it
// needs one): what a user of each verb sees.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import WebSocket from 'ws';
import {
  GraphmemClient,
  GraphmemError,
  type Change,
  type Fact,
  type MaintenanceJob,
  type MaintenanceRun,
  type Profile,
} from '@graphmem/client';
import { NO_SERVICE, unique } from './support.js';

function client(): GraphmemClient {
  return new GraphmemClient({ webSocketImpl: WebSocket });
}

/** Whether `promise` rejects with a GraphmemError of `code` (and `field`, when given). */
async function rejectsWith(promise: Promise<unknown>, code: string, field?: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof GraphmemError, `a GraphmemError, not ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (field !== undefined) assert.equal(error.field, field);
    return true;
  });
}

describe('facts', { skip: NO_SERVICE }, () => {
  test('a stored fact is found by get and search, with its typed fields', async () => {
    const memory = client();
    const word = unique('marzipan');
    const stored = await memory.store(`Ana bakes ${word} on Sundays`, {
      entity: unique('ana'),
      tags: ['baking'],
      importance: 0.8,
    });
    assert.equal(stored.action, 'ADD');
    const fact = stored.fact;
    assert.ok(fact !== null);
    assert.deepEqual(fact.tags, ['baking']);
    assert.equal(fact.importance, 0.8);
    assert.ok(!Number.isNaN(Date.parse(fact.recordedAt)), 'times are ISO-8601 text');

    const again = await memory.get(fact.id);
    assert.equal(again?.text, `Ana bakes ${word} on Sundays`);
    const [hit] = await memory.search(word, { limit: 1, mode: 'FTS' });
    assert.equal(hit?.fact.id, fact.id);
    assert.ok(typeof hit.score === 'number' && hit.depth === 0);
    const many = await memory.getMany([fact.id, fact.id, 'no-such-id']);
    assert.deepEqual([...many.keys()], [fact.id]);
  });

  test('a new value of the same entity and key is an UPDATE; history keeps both', async () => {
    const memory = client();
    const entity = unique('ana');
    const first = await memory.store(`${entity} lives in Porto`, {
      entity,
      key: 'city',
      value: 'Porto',
    });
    const second = await memory.store(`${entity} lives in Lisbon`, {
      entity,
      key: 'city',
      value: 'Lisbon',
    });
    assert.equal(first.action, 'ADD');
    assert.equal(second.action, 'UPDATE');
    assert.deepEqual(second.targetIds, [first.fact?.id]);

    const history = await memory.history(second.fact!.id);
    assert.deepEqual(
      history.map((f: Fact) => f.value),
      ['Porto', 'Lisbon'],
    );
    assert.equal(history[0]?.supersededById, second.fact?.id);
    const current = await memory.lookup(entity, { key: 'city' });
    assert.deepEqual(
      current.map((f) => f.value),
      ['Lisbon'],
    );
    const versions = await memory.getMany([first.fact!.id], { includeSuperseded: true });
    assert.equal(versions.get(first.fact!.id)?.value, 'Porto');
  });

  test('facts come in pages: endCursor leads to the next page', async () => {
    const memory = client();
    const entity = unique('pages');
    await memory.storeMany(
      [1, 2, 3].map((n) => ({ text: `Page item number ${n} of ${entity}`, entity })),
    );
    const page = await memory.facts({ entity, first: 2 });
    assert.equal(page.facts.length, 2);
    assert.ok(page.hasNextPage && page.endCursor !== null);
    const next = await memory.facts({ entity, first: 2, after: page.endCursor });
    assert.deepEqual(
      next.facts.map((f) => f.text),
      [`Page item number 3 of ${entity}`],
    );
    assert.equal(next.hasNextPage, false);
  });

  test('an episode groups the facts stored with it, in order', async () => {
    const memory = client();
    const episode = unique('session-');
    await memory.storeMany(
      [{ text: `First turn of ${episode}` }, { text: `Second turn of ${episode}` }],
      { episode: { id: episode, source: 'chat' } },
    );
    assert.equal((await memory.episode(episode))?.source, 'chat');
    const facts = await memory.episodeFacts(episode);
    assert.deepEqual(
      facts.map((f) => f.text),
      [`First turn of ${episode}`, `Second turn of ${episode}`],
    );
    assert.equal(await memory.episode(unique('none-')), null);
    await rejectsWith(memory.episodeFacts(unique('none-')), 'NOT_FOUND');
  });

  test('forget retracts; purge erases for good', async () => {
    const memory = client();
    const entity = unique('gone');
    const { fact } = await memory.store(`A fact about ${entity} to forget`, { entity });
    const forgotten = await memory.forget(fact!.id);
    assert.equal(forgotten.id, fact!.id);
    assert.equal(await memory.get(fact!.id), null);
    await rejectsWith(memory.forget(fact!.id), 'CONFLICT');

    await memory.store(`A fact about ${entity} to purge`, { entity });
    const planned = await memory.purge({ entity }, { dryRun: true });
    assert.equal(planned.dryRun, true);
    assert.equal(planned.facts, 2);
    assert.equal((await memory.purge({ entity })).facts, 2);
    assert.deepEqual(await memory.lookup(entity, { includeSuperseded: true }), []);
  });

  test('recall, stats and version answer', async () => {
    const memory = client();
    const word = unique('quince');
    await memory.store(`Ana's favourite jam is ${word}`);
    const recalled = await memory.recall(`what jam does Ana like ${word}`, { maxTokens: 200 });
    assert.match(recalled.context, new RegExp(word));
    assert.ok(recalled.items.some((item) => item.fact.text.includes(word)));
    const stats = await memory.stats();
    assert.equal(typeof stats.data.facts, 'number');
    assert.match(await memory.version(), /^\d+\.\d+\.\d+/);
  });

  test('capture keeps each message as a turn, facts drawn on top; keep FACTS the facts alone', async () => {
    const memory = client();
    const word = unique('medlar');
    const [turn, fact, answer] = await memory.capture(
      [
        { role: 'user', content: `Thanks. My favourite jam is ${word}. What is yours?` },
        { role: 'assistant', content: 'Mine is apricot, today at least.' },
      ],
      { episode: unique('chat') },
    );
    assert.deepEqual([turn?.kind, fact?.kind, answer?.kind], ['TURN', 'FACT', 'TURN']);
    assert.equal(turn?.fact?.kind, 'TURN');
    assert.equal(fact?.turnId, turn?.fact?.id);
    assert.equal(fact?.text, `My favourite jam is ${word}.`);
    const recalled = await memory.recall(`favourite jam ${word}`, { maxTokens: 200 });
    assert.ok(
      recalled.items.some((item) => item.kind === 'TURN' && item.fact.id === turn?.fact?.id),
    );
    const only = await memory.capture(
      [{ role: 'user', content: `I always use ${unique('black')} for formatting. Thanks!` }],
      { keep: 'FACTS' },
    );
    assert.deepEqual(
      only.map((r) => [r.action, r.kind, r.turnId]),
      [['ADD', 'FACT', null]],
    );
  });
});

describe('links', { skip: NO_SERVICE }, () => {
  test('link, links, traverse and path follow the graph; unlink retracts', async () => {
    const memory = client();
    const entity = unique('graph');
    const [cause, effect, other] = await memory.storeMany([
      { text: `The ${entity} oven broke`, entity },
      { text: `The ${entity} bakery closed for a week`, entity },
      { text: `The ${entity} bakery reopened`, entity },
    ]);
    const [a, b, c] = [cause!.fact!.id, effect!.fact!.id, other!.fact!.id];
    const link = await memory.link(b, a, 'CAUSED_BY', { strength: 0.9 });
    assert.deepEqual(
      [link.sourceId, link.targetId, link.type, link.strength],
      [b, a, 'CAUSED_BY', 0.9],
    );
    await memory.link(c, b, 'RELATED_TO');

    assert.deepEqual(
      (await memory.links(a)).map((l) => l.id),
      [link.id],
    );
    assert.deepEqual(await memory.links(a, { direction: 'OUT' }), []);
    const graph = await memory.traverse(a, { depth: 2 });
    assert.deepEqual(
      graph.nodes.map((n) => [n.fact.id, n.depth]),
      [
        [a, 0],
        [b, 1],
        [c, 2],
      ],
    );
    assert.equal(graph.edges.length, 2);
    const path = await memory.path(a, c);
    assert.deepEqual(
      path?.facts.map((f) => f.id),
      [a, b, c],
    );

    const removed = await memory.unlink(link.id);
    assert.equal(removed.id, link.id);
    assert.deepEqual(await memory.links(a), []);
    assert.equal(await memory.path(a, c), null);
  });

  test('linking an unknown fact is NOT_FOUND', async () => {
    const memory = client();
    const { fact } = await memory.store(`A lonely fact ${unique('x')}`);
    await rejectsWith(
      memory.link(fact!.id, '01a220ea-0000-7000-8000-000000000000', 'RELATED_TO'),
      'NOT_FOUND',
    );
  });
});

/** A first name no other test gives, of letters (names that differ in a digit are other
 * entities), and its short form: `{ mel: 'Mel…', melanie: 'Mel…anie' }`. */
function names(): { mel: string; melanie: string } {
  const mel = uniqueWord('Mel');
  return { mel, melanie: `${mel}anie` };
}

describe('entities', { skip: NO_SERVICE }, () => {
  test('a name and its short form are one entity; an alias is seen only by reads known after it', async () => {
    const memory = client();
    const { mel, melanie } = names();
    await memory.storeMany([
      { text: `${melanie} paints sunsets by the lake`, entity: melanie },
      { text: `${melanie} keeps bees on the roof`, entity: melanie },
      { text: `${mel} ran a charity race in June`, entity: mel },
    ]);
    const grouped = await memory.entity(`${mel.toLowerCase()}'s`);
    assert.deepEqual(grouped, { name: melanie, names: [melanie, mel], aliases: [], facts: 3 });
    const listed = await memory.entities({ limit: 1000 });
    assert.deepEqual(
      listed.find((entity) => entity.names.includes(mel)),
      grouped,
    );
    assert.equal((await memory.entities({ limit: 1 })).length, 1);

    await pause(50);
    const before = new Date();
    await pause(50);
    const teacher = uniqueWord('Teacher');
    const aliased = await memory.alias(teacher, mel);
    assert.deepEqual(aliased, { ...grouped, aliases: [teacher] });
    assert.deepEqual(await memory.entity(teacher), aliased);
    assert.deepEqual((await memory.entity(melanie, { knownAt: before })).aliases, []);
    await rejectsWith(memory.entity(teacher, { knownAt: before }), 'NOT_FOUND');
    assert.ok((await memory.rebuildEntities()) >= 2, 'rebuilding counts the names again');
    assert.deepEqual(await memory.entity(mel), aliased);
  });

  test('a merge joins two entities under the name of the first; a split takes a name out', async () => {
    const memory = client();
    const { mel, melanie } = names();
    const painter = uniqueWord('Painter');
    await memory.storeMany([
      { text: `${melanie} paints sunsets by the lake`, entity: melanie },
      { text: `${mel} ran a charity race in June`, entity: mel },
      { text: `${painter} sold a canvas at the fair`, entity: painter },
    ]);
    const merged = await memory.mergeEntities(melanie, painter);
    assert.equal(merged.name, melanie);
    assert.deepEqual([...merged.names].sort(), [mel, melanie, painter].sort());
    assert.equal(merged.facts, 3);
    assert.equal((await memory.lookup(painter)).length, 3, 'every name reaches every fact');

    const left = await memory.splitAlias(mel);
    assert.deepEqual(
      { ...left, names: [...left.names].sort() },
      { name: melanie, names: [melanie, painter].sort(), aliases: [], facts: 2 },
    );
    assert.deepEqual(
      (await memory.lookup(mel)).map((f) => f.text),
      [`${mel} ran a charity race in June`],
    );
    await rejectsWith(memory.splitAlias(mel), 'CONFLICT');
  });

  test('a name that reaches no entity is NOT_FOUND; an empty one INVALID_INPUT', async () => {
    const memory = client();
    const { melanie } = names();
    await memory.store(`${melanie} paints sunsets by the lake`, { entity: melanie });
    const nobody = uniqueWord('Nobody');
    await rejectsWith(memory.entity(nobody), 'NOT_FOUND');
    await rejectsWith(memory.alias(uniqueWord('Prof'), nobody), 'NOT_FOUND');
    await rejectsWith(memory.mergeEntities(melanie, nobody), 'NOT_FOUND');
    await rejectsWith(memory.splitAlias(nobody), 'NOT_FOUND');
    await rejectsWith(memory.entity('!!'), 'INVALID_INPUT', 'name');
    await rejectsWith(memory.alias('', melanie), 'INVALID_INPUT', 'name');
    await rejectsWith(memory.entities({ limit: 0 }), 'INVALID_INPUT', 'limit');
  });
});

describe('profiles', { skip: NO_SERVICE }, () => {
  test("a profile shows each key's current values, the older one as known before the newest", async () => {
    const memory = client();
    const { mel, melanie } = names();
    await memory.storeMany([
      { text: `${melanie} lives in Berlin`, entity: melanie, key: 'city', value: 'Berlin' },
      { text: `${melanie} has a cat`, entity: melanie, key: 'pets', value: 'cat' },
      { text: `${mel} has a dog`, entity: mel, key: 'pets', value: 'dog' },
      { text: `${melanie} likes green tea`, entity: melanie },
    ]);
    await pause(50);
    const before = new Date();
    await pause(50);
    const moved = await memory.store(`${melanie} lives in Paris`, {
      entity: melanie,
      key: 'city',
      value: 'Paris',
    });
    assert.equal(moved.action, 'UPDATE');

    const profile = await memory.profile(`${mel.toLowerCase()}'s`);
    assert.equal(profile.entity.name, melanie);
    assert.deepEqual(values(profile), { city: ['Paris'], pets: ['cat', 'dog'] });
    const [paris] = profile.attributes.find((a) => a.key === 'city')!.values;
    assert.equal(paris?.fact.id, moved.fact?.id);
    assert.ok(!Number.isNaN(Date.parse(paris!.validFrom)) && paris!.validUntil === null);
    assert.deepEqual(
      profile.facts.map((f) => f.text),
      [`${melanie} likes green tea`],
    );
    assert.equal(profile.truncated, false);
    assert.equal(profile.summary, null);
    assert.equal(profile.summaryError, null);
    const then = await memory.profile(melanie, { knownAt: before });
    assert.deepEqual(values(then).city, ['Berlin']);
    await rejectsWith(memory.profile(uniqueWord('Nobody')), 'NOT_FOUND');
    await rejectsWith(memory.profile('!!'), 'INVALID_INPUT', 'entity');
  });

  test('recall with profile leads the block with the profile the prompt names', async () => {
    const memory = client();
    const { melanie } = names();
    await memory.store(`${melanie} lives in Lisbon`, {
      entity: melanie,
      key: 'city',
      value: 'Lisbon',
    });
    const prompt = `Where does ${melanie} live?`;
    const led = await memory.recall(prompt, { profile: true });
    assert.ok(led.context.split('\n')[1]?.startsWith(`[profile/${melanie}] `), led.context);
    assert.deepEqual(
      led.profiles.map((p) => [p.entity.name, values(p)]),
      [[melanie, { city: ['Lisbon'] }]],
    );
    const plain = await memory.recall(prompt, { profile: false });
    assert.deepEqual(plain.profiles, []);
  });
});

/** A profile's values by key, each key's sorted. */
function values(profile: Profile): Record<string, (string | null)[]> {
  return Object.fromEntries(
    profile.attributes.map((a) => [a.key, a.values.map((v) => v.value).sort()]),
  );
}

describe('errors', { skip: NO_SERVICE }, () => {
  test('bad input is INVALID_INPUT naming the field', async () => {
    const memory = client();
    await rejectsWith(memory.store(''), 'INVALID_INPUT', 'text');
    await rejectsWith(
      memory.store('Ana is tall', { importance: 7 }),
      'INVALID_INPUT',
      'importance',
    );
    await rejectsWith(
      memory.store('Ana is tall', { validFrom: 'whenever' }),
      'INVALID_INPUT',
      'validFrom',
    );
    await rejectsWith(memory.get('f1', { asOf: 'the day before' }), 'INVALID_INPUT', 'asOf');
  });

  test('a read the service refuses is INVALID_INPUT naming the argument', async () => {
    const memory = client();
    await rejectsWith(memory.search('Ana', { graphDepth: 9 }), 'INVALID_INPUT', 'graphDepth');
    await rejectsWith(memory.search('x'.repeat(10_001)), 'INVALID_INPUT', 'query');
    await rejectsWith(memory.lookup('ana', { limit: 0 }), 'INVALID_INPUT', 'limit');
    await rejectsWith(memory.traverse([]), 'INVALID_INPUT', 'from');
  });

  test('an unknown id: null from get, NOT_FOUND from history and forget', async () => {
    const memory = client();
    const id = '01a220ea-0000-7000-8000-000000000000';
    assert.equal(await memory.get(id), null);
    await rejectsWith(memory.history(id), 'NOT_FOUND');
    await rejectsWith(memory.forget(id), 'NOT_FOUND');
  });
});

describe('changes', { skip: NO_SERVICE }, () => {
  test('a stored fact arrives as FACT_STORED; leaving the loop closes the stream', async () => {
    const memory = client();
    const stream = memory.changes({ kinds: ['FACT_STORED'] });
    const first = (async (): Promise<Change | undefined> => {
      for await (const change of stream) return change;
      return undefined;
    })();
    let arrived: Change | undefined;
    first.then(
      (change) => (arrived = change),
      () => {},
    );
    const stored: string[] = [];
    const deadline = Date.now() + 10_000;
    // Stored until one arrives: the subscription starts a moment after changes() returns.
    while (arrived === undefined && Date.now() < deadline) {
      const { fact } = await memory.store(`Change number ${stored.length} ${unique('c')}`);
      stored.push(fact!.id);
      await Promise.race([first, new Promise((resolve) => setTimeout(resolve, 200))]);
    }
    const change = await first;
    assert.equal(change?.kind, 'FACT_STORED');
    assert.ok(stored.includes(change.id));
    assert.equal(change.namespace, await memory.namespace());
    const after: Change[] = [];
    for await (const more of stream) after.push(more);
    assert.deepEqual(after, [], 'a closed stream yields nothing more');
  });

  test('close() ends a loop waiting for changes', async () => {
    const stream = client().changes({ kinds: ['FACT_PURGED'] });
    const loop = (async () => {
      const seen: Change[] = [];
      for await (const change of stream) seen.push(change);
      return seen;
    })();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await stream.close();
    assert.deepEqual(await loop, []);
  });
});

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `unique` with letters for digits: consolidation leaves alone any text with a digit. */
function uniqueWord(prefix: string): string {
  return unique(prefix).replace(/\d/g, (d) => 'ghijklmnop'[Number(d)]!);
}

/** `job` run now by `maintain`, tried again while the server's own run of it makes it
 * `skipped`. */
async function forcedRun(memory: GraphmemClient, job: MaintenanceJob): Promise<MaintenanceRun> {
  for (let attempt = 1; ; attempt++) {
    const runs = await memory.maintain({ jobs: [job], force: true });
    assert.equal(runs.length, 1);
    if (runs[0]!.status !== 'skipped' || attempt === 5) return runs[0]!;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

// Against a service without a chat model (no llm_* settings, no OPENAI_API_KEY), as
// tests/server/test_typescript_client.py starts it.
describe('upkeep', { skip: NO_SERVICE }, () => {
  test('a pinned fact leads every recall block until unpinned', async () => {
    const memory = client();
    const { fact } = await memory.store(`Ana's standing order is ${unique('rye')} bread`);
    const id = fact!.id;
    const pinned = await memory.pin(id);
    try {
      assert.equal(pinned.id, id);
      assert.ok(pinned.pinnedAt !== null, 'pinnedAt is set');
      const recalled = await memory.recall(`anything about ${unique('weather')}`);
      assert.equal(recalled.items[0]?.fact.id, id);
      assert.equal(recalled.items[0]?.source, 'PINNED');
    } finally {
      assert.equal((await memory.unpin(id)).pinnedAt, null);
    }
    const after = await memory.recall(`anything about ${unique('weather')}`);
    assert.ok(!after.items.some((item) => item.fact.id === id && item.source === 'PINNED'));
    await rejectsWith(memory.pin('01a220ea-0000-7000-8000-000000000000'), 'NOT_FOUND');
  });

  test('a cold fact leaves recall (unless includeCold) but not search; cold unpins', async () => {
    const memory = client();
    const word = unique('damson');
    const { fact } = await memory.store(`Ana once made ${word} gin`);
    const id = fact!.id;
    const recalledIds = async (includeCold = false): Promise<string[]> =>
      (await memory.recall(`what gin ${word}`, { includeCold })).items.map((i) => i.fact.id);
    assert.ok((await recalledIds()).includes(id));

    await memory.pin(id);
    const cold = await memory.setCold(id);
    assert.ok(cold.coldAt !== null, 'coldAt is set');
    assert.equal(cold.pinnedAt, null, 'a pinned fact made cold is unpinned');
    assert.ok(!(await recalledIds()).includes(id));
    assert.ok((await recalledIds(true)).includes(id));
    assert.deepEqual(
      (await memory.search(word, { mode: 'FTS' })).map((hit) => hit.fact.id),
      [id],
    );

    assert.equal((await memory.setCold(id, false)).coldAt, null);
    assert.ok((await recalledIds()).includes(id));
  });

  test('restoreCheckpoint gives back the newest checkpoint as saved', async () => {
    const memory = client();
    const intent = `Rename the ${unique('oven')} module`;
    const state = { step: 3, done: ['parse', 'plan'], next: { file: 'src/oven.ts', line: 42 } };
    const fact = await memory.checkpoint(intent, {
      state,
      expectedOutcome: 'every test green',
      workingFiles: ['src/oven.ts', 'test/oven.test.ts'],
    });
    assert.equal(fact.entity, 'system');
    assert.equal(fact.decayClass, 'checkpoint');

    const restored = await memory.restoreCheckpoint();
    assert.ok(restored !== null);
    assert.equal(restored.intent, intent);
    assert.deepEqual(restored.state, state);
    assert.equal(restored.expectedOutcome, 'every test green');
    assert.deepEqual(restored.workingFiles, ['src/oven.ts', 'test/oven.test.ts']);
    assert.equal(restored.fact.id, fact.id);
    await rejectsWith(memory.checkpoint(''), 'INVALID_INPUT', 'intent');
  });

  test('maintain runs the jobs asked for; maintenanceRuns lists the run', async () => {
    const memory = client();
    const run = await forcedRun(memory, 'PRUNE');
    assert.equal(run.job, 'prune');
    assert.equal(run.status, 'done');
    assert.ok(run.id > 0 && run.finishedAt !== null && run.error === null);
    assert.deepEqual(run.changed.map((c) => c.kind).sort(), ['decayed', 'expired', 'faded']);
    const listed = await memory.maintenanceRuns({ job: 'PRUNE', limit: 1000 });
    assert.deepEqual(
      listed.find((r) => r.id === run.id),
      run,
    );
    assert.ok(listed.every((r) => r.job === 'prune'));
  });

  test('prune with dryRun counts an expired fact; without, deletes it', async () => {
    const memory = client();
    // A prune run now: the server's own (hourly) is not due while this test runs.
    await forcedRun(memory, 'PRUNE');
    const entity = unique('expired');
    await memory.store(`The ${entity} gate code was valid until 2020`, {
      entity,
      expiresAt: '2020-01-01',
    });
    const planned = await memory.prune({ dryRun: true });
    assert.equal(planned.dryRun, true);
    assert.equal(planned.expired, 1);
    for (const count of [planned.decayed, planned.lowConfidence]) {
      assert.ok(Number.isInteger(count) && count >= 0, `a count, not ${count}`);
    }
    const done = await memory.prune();
    assert.deepEqual([done.dryRun, done.expired], [false, 1]);
    assert.equal((await memory.prune({ dryRun: true })).expired, 0);
  });

  test('categories include the built-in ones', async () => {
    const categories = await client().categories();
    const preference = categories.find((c) => c.name === 'preference');
    assert.ok(preference !== undefined, 'preference is a category');
    assert.equal(preference.discoveredAt, null, 'built in');
    assert.ok(preference.description.length > 0);
    for (const name of ['fact', 'decision', 'other']) {
      assert.ok(
        categories.some((c) => c.name === name),
        name,
      );
    }
  });

  test('path finds no path longer than maxDepth', async () => {
    const memory = client();
    const entity = unique('chain');
    const stored = await memory.storeMany([
      { text: `The ${entity} flour ran out`, entity },
      { text: `The ${entity} baker went to the mill`, entity },
      { text: `The ${entity} mill was closed`, entity },
    ]);
    const [a, b, c] = stored.map((s) => s.fact!.id) as [string, string, string];
    await memory.link(a, b, 'RELATED_TO');
    await memory.link(b, c, 'RELATED_TO');
    assert.equal(await memory.path(a, c, { maxDepth: 1 }), null);
    assert.deepEqual(
      (await memory.path(a, c))?.facts.map((f) => f.id),
      [a, b, c],
    );
    assert.deepEqual((await memory.path(a, c, { maxDepth: 2 }))?.links.length, 2);
    await rejectsWith(memory.path(a, c, { maxDepth: 7 }), 'INVALID_INPUT', 'maxDepth');
  });

  test('without a chat model reflect is INVALID_INPUT and its scheduled run fails', async () => {
    const memory = client();
    const entity = unique('reflect');
    await memory.storeMany([
      { text: `${entity} walks to work on Mondays`, entity },
      { text: `${entity} walks to work on Fridays`, entity },
    ]);
    await rejectsWith(memory.reflect({ windowDays: 1 }), 'INVALID_INPUT', 'llm_base_url');
    const run = await forcedRun(memory, 'REFLECT');
    assert.equal(run.status, 'failed');
    assert.match(run.error ?? '', /llm_base_url/);
  });

  test('without a chat model autoClassify changes nothing and asks nothing', async () => {
    assert.deepEqual(await client().autoClassify(), {
      relabelled: [],
      discovered: [],
      requests: 0,
      problem: null,
    });
  });

  test('consolidate with dryRun lists near-duplicates without a chat model', async () => {
    const memory = client();
    const entity = unique('dup');
    const word = uniqueWord('oolong');
    const [first, second] = await memory.storeMany([
      { text: `Ana likes ${word} tea in the morning`, entity, classify: false },
      { text: `In the morning Ana likes ${word} tea`, entity, classify: false },
    ]);
    const ids = [first!.fact!.id, second!.fact!.id];
    const report = await memory.consolidate({ dryRun: true });
    assert.equal(report.dryRun, true);
    assert.deepEqual(report.merged, []);
    assert.equal(report.superseded, 0);
    assert.equal(report.requests, 0);
    assert.equal(report.problem, null);
    assert.deepEqual(
      report.clusters.find((cluster) => cluster.includes(ids[0]!)),
      ids,
    );
    assert.equal((await memory.getMany(ids)).size, 2, 'a dry run changes nothing');
  });
});
