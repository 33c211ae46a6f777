// API keys and namespaces against a real `graphmem serve` that requires keys: GRAPHMEM_URL,
// GRAPHMEM_API_KEY (a live key), and GRAPHMEM_OTHER_NAMESPACE, a second namespace of that key.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import WebSocket from 'ws';
import { GraphmemClient, GraphmemError, type Change } from '@graphmem/client';
import { NO_SERVICE, unique } from './support.js';

const KEY = process.env.GRAPHMEM_API_KEY ?? null;
const OTHER = process.env.GRAPHMEM_OTHER_NAMESPACE ?? null;
const NO_KEY = NO_SERVICE || (KEY ? false : 'set GRAPHMEM_API_KEY to a live key of the service');
const NO_OTHER =
  NO_KEY || (OTHER ? false : 'set GRAPHMEM_OTHER_NAMESPACE to a second namespace of the key');

function isError(code: string, status: number | null) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof GraphmemError, `a GraphmemError, not ${String(error)}`);
    assert.equal(error.code, code, error.message);
    assert.equal(error.status, status);
    return true;
  };
}

describe('API keys', { skip: NO_KEY }, () => {
  test('no key, or a wrong one, is UNAUTHENTICATED', async () => {
    await assert.rejects(
      new GraphmemClient({ apiKey: null }).version(),
      isError('UNAUTHENTICATED', 401),
    );
    const wrong = new GraphmemClient({ apiKey: 'gm_not_a_key', webSocketImpl: WebSocket });
    await assert.rejects(wrong.store('Ana moved to Lisbon'), isError('UNAUTHENTICATED', 401));
    await assert.rejects(
      (async () => {
        for await (const _ of wrong.changes()) break;
      })(),
      isError('UNAUTHENTICATED', 401),
    );
  });

  test('a namespace the key does not hold is FORBIDDEN', async () => {
    const elsewhere = new GraphmemClient({ namespace: unique('not-mine-') });
    await assert.rejects(elsewhere.search('Lisbon'), isError('FORBIDDEN', 403));
  });
});

describe('namespaces', { skip: NO_OTHER }, () => {
  test("X-Graphmem-Namespace picks the key's other namespace, changes included", async () => {
    const mine = new GraphmemClient();
    const other = new GraphmemClient({ namespace: OTHER, webSocketImpl: WebSocket });
    assert.equal(await other.namespace(), OTHER);
    assert.notEqual(await mine.namespace(), OTHER);

    const stream = other.changes({ kinds: ['FACT_STORED'] });
    const first = (async (): Promise<Change | undefined> => {
      for await (const change of stream) return change;
      return undefined;
    })();
    const word = unique('elsewhere');
    let arrived = false;
    void first.finally(() => (arrived = true)).catch(() => {});
    const deadline = Date.now() + 10_000;
    for (let n = 0; !arrived && Date.now() < deadline; n++) {
      await other.store(`Stored ${n} in the other namespace ${word}`);
      await Promise.race([first, new Promise((resolve) => setTimeout(resolve, 200))]);
    }
    assert.equal((await first)?.namespace, OTHER);

    assert.equal((await other.search(word, { mode: 'FTS' })).length > 0, true);
    assert.deepEqual(await mine.search(word, { mode: 'FTS' }), []);
  });
});
