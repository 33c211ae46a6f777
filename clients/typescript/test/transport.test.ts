// How the client meets a service that refuses, is slow, is gone, or is of another version:
// against local stand-ins, so each case is exact and needs no graphmem.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import { CLIENT_VERSION, GraphmemClient, GraphmemError } from '@graphmem/client';
import { fakeService, reply } from './support.js';

const FACT = {
  id: 'f1',
  text: 'Ana moved to Lisbon',
  category: 'fact',
  importance: 0.5,
  entity: 'ana',
  key: null,
  value: null,
  source: null,
  tags: [],
  summary: null,
  why: null,
  context: null,
  decayClass: 'normal',
  expiresAt: null,
  confidence: 1,
  lastConfirmedAt: null,
  accessCount: 0,
  lastAccessedAt: null,
  sourceDate: null,
  validFrom: '2024-05-01T12:00:00Z',
  validUntil: null,
  validUntilRecordedAt: null,
  recordedAt: '2024-05-01T12:00:00Z',
  retractedAt: null,
  supersededById: null,
  supersedesId: null,
  episodeId: null,
  pinnedAt: null,
  coldAt: null,
  statedTime: null,
};

const RATE_LIMITED = {
  errors: [{ message: 'rate limit: try again in 1 s', extensions: { code: 'RATE_LIMITED' } }],
};

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  assert.ok(address !== null && typeof address === 'object');
  return address.port;
}

describe('retries', () => {
  test('a 429 is retried after the Retry-After it names, and the answer returned', async () => {
    const service = await fakeService((_, count, res) =>
      count === 1
        ? reply(res, 429, RATE_LIMITED, { 'retry-after': '1' })
        : reply(res, 200, { data: { fact: FACT } }),
    );
    try {
      const client = new GraphmemClient({ url: service.url, apiKey: null });
      const started = performance.now();
      const fact = await client.get('f1');
      assert.ok(performance.now() - started >= 900, 'waited as Retry-After asked');
      assert.equal(fact?.text, 'Ana moved to Lisbon');
      assert.equal(service.received.length, 2);
    } finally {
      await service.close();
    }
  });

  test('a write refused with 429 or 503 is sent again: the service did not run it', async () => {
    const stored = {
      storeFacts: {
        results: [{ action: 'ADD', reason: null, targetIds: [], fact: FACT }],
        error: null,
      },
    };
    const service = await fakeService((_, count, res) =>
      count === 1
        ? reply(
            res,
            503,
            { errors: [{ message: 'starting', extensions: { code: 'UNAVAILABLE' } }] },
            { 'retry-after': '0' },
          )
        : reply(res, 200, { data: stored }),
    );
    try {
      const result = await new GraphmemClient({ url: service.url, apiKey: null }).store(
        'Ana moved to Lisbon',
      );
      assert.equal(result.action, 'ADD');
      assert.equal(service.received.length, 2);
    } finally {
      await service.close();
    }
  });

  test('retries end: the last refusal is thrown with its code and status', async () => {
    const service = await fakeService((_, __, res) =>
      reply(res, 429, RATE_LIMITED, { 'retry-after': '0' }),
    );
    try {
      const client = new GraphmemClient({ url: service.url, apiKey: null, retries: 2 });
      await assert.rejects(client.version(), (error: unknown) => {
        assert.ok(error instanceof GraphmemError);
        assert.equal(error.code, 'RATE_LIMITED');
        assert.equal(error.status, 429);
        return true;
      });
      assert.equal(service.received.length, 3);
    } finally {
      await service.close();
    }
  });
});

describe('a service out of reach', () => {
  test('an address nothing listens on is UNAVAILABLE within seconds, naming the URL', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const started = performance.now();
    await assert.rejects(
      new GraphmemClient({ url, apiKey: null }).search('anything'),
      (error: unknown) => {
        assert.ok(error instanceof GraphmemError);
        assert.equal(error.code, 'UNAVAILABLE');
        assert.match(error.message, new RegExp(url.replaceAll('.', '\\.')));
        return true;
      },
    );
    assert.ok(performance.now() - started < 5000);
  });

  test('a service that does not answer is UNAVAILABLE after timeoutMs, not a hang', async () => {
    const service = await fakeService(() => {}); // never answers
    try {
      const client = new GraphmemClient({ url: service.url, apiKey: null, timeoutMs: 300 });
      const started = performance.now();
      await assert.rejects(client.store('Ana moved to Lisbon'), (error: unknown) => {
        assert.ok(error instanceof GraphmemError);
        assert.equal(error.code, 'UNAVAILABLE');
        assert.match(error.message, /did not answer within 300 ms/);
        return true;
      });
      assert.ok(performance.now() - started < 2000);
      assert.equal(service.received.length, 1, 'a write that may have run is not sent again');
    } finally {
      await service.close();
    }
  });
});

describe('what the client sends', () => {
  test('the key as a bearer token and the namespace as X-Graphmem-Namespace', async () => {
    const service = await fakeService((_, __, res) =>
      reply(res, 200, { data: { version: CLIENT_VERSION } }),
    );
    try {
      await new GraphmemClient({
        url: `${service.url}/`,
        apiKey: 'gm_secret',
        namespace: 'alice',
      }).version();
      const [request] = service.received;
      assert.equal(request?.headers.authorization, 'Bearer gm_secret');
      assert.equal(request?.headers['x-graphmem-namespace'], 'alice');
    } finally {
      await service.close();
    }
  });

  test('unset options are left out, so the service applies its defaults', async () => {
    const service = await fakeService((_, __, res) => reply(res, 200, { data: { search: [] } }));
    try {
      await new GraphmemClient({ url: service.url, apiKey: null }).search('Lisbon', {
        limit: null,
        tag: 'home',
      });
      assert.deepEqual(service.received[0]?.variables, { query: 'Lisbon', tag: 'home' });
    } finally {
      await service.close();
    }
  });
});

describe('a service of another version', () => {
  test('a field it lacks is an error naming both versions', async () => {
    const service = await fakeService((request, _, res) =>
      request.query.includes('version')
        ? reply(res, 200, { data: { version: '0.1.0' } })
        : reply(res, 200, {
            data: null,
            errors: [
              {
                message: "Cannot query field 'pinnedAt' on type 'Fact'.",
                extensions: { code: 'INVALID_QUERY' },
              },
            ],
          }),
    );
    try {
      await assert.rejects(
        new GraphmemClient({ url: service.url, apiKey: null }).get('f1'),
        (error: unknown) => {
          assert.ok(error instanceof GraphmemError);
          assert.equal(error.code, 'INVALID_QUERY');
          assert.match(
            error.message,
            new RegExp(
              `graphmem server 0\\.1\\.0, client ${CLIENT_VERSION.replaceAll('.', '\\.')}`,
            ),
          );
          assert.match(error.message, /pinnedAt/);
          return true;
        },
      );
    } finally {
      await service.close();
    }
  });
});

describe('setting up', () => {
  test('a URL that is not http(s) is INVALID_INPUT naming url, before any request', () => {
    assert.throws(
      () => new GraphmemClient({ url: 'localhost:8420' }),
      (error: unknown) => error instanceof GraphmemError && error.field === 'url',
    );
  });

  test(
    'changes() without a WebSocket class says to pass webSocketImpl',
    {
      skip: 'WebSocket' in globalThis ? 'this node has a WebSocket of its own' : false,
    },
    () => {
      const memory = new GraphmemClient({ url: 'http://127.0.0.1:8420', apiKey: null });
      assert.throws(
        () => memory.changes(),
        (error: unknown) =>
          error instanceof GraphmemError &&
          error.code === 'INVALID_INPUT' &&
          error.field === 'webSocketImpl',
      );
    },
  );
});
