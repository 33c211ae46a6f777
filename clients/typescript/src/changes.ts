import { createClient, type Client as SocketClient, type ClientOptions } from 'graphql-ws/client';
import { GraphmemError, graphqlError, type GraphQLErrorEntry } from './errors.js';
import {
  MemoryChangedDocument,
  type ChangeKind,
  type MemoryChangedSubscription,
} from './generated/graphql.js';
import { NAMESPACE_HEADER } from './transport.js';

/** One change committed in the namespace, as the service announces it. */
export interface Change {
  kind: ChangeKind;
  /** The fact's or link's id. */
  id: string;
  /** When it was committed (ISO-8601, UTC). */
  at: string;
  namespace: string;
}

export type WebSocketImpl = ClientOptions['webSocketImpl'];

export interface ChangeSocket {
  /** ws:// or wss:// URL of the service's /graphql. */
  url: string;
  apiKey: string | null;
  namespace: string | null;
  webSocketImpl: WebSocketImpl;
}

/**
 * The changes of a namespace from now on (`memoryChanged` over graphql-transport-ws): iterate
 * with `for await`; leaving the loop, or `close()`, ends the subscription and its socket. A
 * subscription the service ends (a key revoked, a subscriber too slow) throws its error from
 * the loop.
 */
export class ChangeStream implements AsyncIterable<Change> {
  readonly #arrived: Change[] = [];
  #failure: GraphmemError | null = null;
  #ended = false;
  #wake: () => void = () => {};
  readonly #started: Promise<SocketClient | null>;

  /** `namespace`: the namespace's name, which the events do not carry; asked first, so a
   * wrong key or an unreachable service fails as it does for any request. */
  constructor(
    socket: ChangeSocket,
    kinds: readonly ChangeKind[] | null,
    namespace: Promise<string>,
  ) {
    this.#started = namespace.then(
      (name) => (this.#ended ? null : this.#subscribe(socket, kinds, name)),
      (error: unknown) => {
        this.#end(error instanceof GraphmemError ? error : socketError(error, socket.url));
        return null;
      },
    );
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Change> {
    try {
      for (;;) {
        const change = this.#arrived.shift();
        if (change !== undefined) {
          yield change;
        } else if (this.#failure !== null) {
          throw this.#failure;
        } else if (this.#ended) {
          return;
        } else {
          await new Promise<void>((resolve) => (this.#wake = resolve));
        }
      }
    } finally {
      await this.close();
    }
  }

  /** End the subscription and close its socket (again: nothing more). */
  async close(): Promise<void> {
    this.#end(null);
    const client = await this.#started;
    await client?.dispose();
  }

  #subscribe(
    socket: ChangeSocket,
    kinds: readonly ChangeKind[] | null,
    namespace: string,
  ): SocketClient {
    const client = createClient({
      url: socket.url,
      webSocketImpl: withHeaders(socket.webSocketImpl, socket.namespace),
      // Browsers cannot send headers on a WebSocket: the service reads the key here too.
      connectionParams: socket.apiKey ? { Authorization: `Bearer ${socket.apiKey}` } : {},
      lazy: true,
      // A lost socket ends the stream with an error: a silent reconnect would miss changes.
      retryAttempts: 0,
    });
    client.subscribe<MemoryChangedSubscription>(
      { query: MemoryChangedDocument.toString(), variables: { kinds } },
      {
        next: (result) => {
          if (result.errors?.length) {
            this.#end(graphqlError(result.errors as readonly GraphQLErrorEntry[]));
          } else if (result.data) {
            this.#arrived.push({ ...result.data.memoryChanged, namespace });
            this.#wake();
          }
        },
        error: (error) => this.#end(socketError(error, socket.url)),
        complete: () => this.#end(null),
      },
    );
    return client;
  }

  #end(failure: GraphmemError | null): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#failure = failure;
    this.#wake();
  }
}

/**
 * `impl` sending the namespace header: ws (node) takes headers as its third argument; a
 * browser's WebSocket cannot send headers, and there the key's default namespace applies.
 */
function withHeaders(impl: WebSocketImpl, namespace: string | null): WebSocketImpl {
  if (!namespace || typeof impl !== 'function') return impl;
  const Base = impl as new (
    url: string,
    protocols?: string | string[],
    options?: unknown,
  ) => object;
  return class extends Base {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols, { headers: { [NAMESPACE_HEADER]: namespace } });
    }
  };
}

/** What ended a socket, as a GraphmemError (graphql-ws hands over a CloseEvent, the
 * errors of an `error` message, or an Error). */
function socketError(error: unknown, url: string): GraphmemError {
  if (error instanceof GraphmemError) return error;
  if (Array.isArray(error)) return graphqlError(error as GraphQLErrorEntry[]);
  const close = error as { code?: unknown; reason?: unknown } | null;
  if (typeof close?.code === 'number') {
    const reason = typeof close.reason === 'string' && close.reason ? close.reason : 'closed';
    const code =
      close.code === 4403 ? 'FORBIDDEN' : close.code === 4429 ? 'RATE_LIMITED' : 'UNAVAILABLE';
    return new GraphmemError(code, `${url}: ${reason} (${close.code})`);
  }
  return new GraphmemError('UNAVAILABLE', `cannot reach ${url}: ${String(error)}`, {
    cause: error,
  });
}
