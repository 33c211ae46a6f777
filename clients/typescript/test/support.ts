import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The running `graphmem serve` the service tests use (GRAPHMEM_URL), or why they skip. */
export const SERVICE_URL = process.env.GRAPHMEM_URL ?? null;
export const NO_SERVICE = SERVICE_URL
  ? false
  : 'set GRAPHMEM_URL to a running `graphmem serve` (GRAPHMEM_EMBEDDER=hash serves fastest)';

/** A word no other test uses: the test files run at once against one namespace. */
export function unique(prefix: string): string {
  return `${prefix}${randomUUID().slice(0, 8)}`;
}

export interface Received {
  query: string;
  variables: Record<string, unknown>;
  headers: IncomingMessage['headers'];
}

/** A local HTTP server answering each request as `answer` says, and what it received. */
export async function fakeService(
  answer: (request: Received, count: number, response: ServerResponse) => void,
): Promise<{ url: string; received: Received[]; close: () => Promise<void> }> {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      const parsed = JSON.parse(body || '{}') as Omit<Received, 'headers'>;
      const request = { ...parsed, headers: req.headers };
      received.push(request);
      answer(request, received.length, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Answer `body` as JSON with `status` and `headers`. */
export function reply(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(JSON.stringify(body));
}
