import { GraphmemError, graphqlError, type GraphQLErrorEntry } from './errors.js';
import type { TypedDocumentString } from './generated/graphql.js';
import { CLIENT_VERSION } from './version.js';

/** The header that names the namespace (the service's resolvers/auth.py reads it). */
export const NAMESPACE_HEADER = 'X-Graphmem-Namespace';
/** The first wait before a retry, doubled each time unless the answer says how long. */
export const BACKOFF_MS = 500;
/** The longest wait before a retry, whatever Retry-After asks: a call must not stall. */
export const MAX_RETRY_WAIT_MS = 30_000;

export interface HttpSettings {
  url: string;
  apiKey: string | null;
  namespace: string | null;
  timeoutMs: number;
  retries: number;
}

/** Network failures after which the request certainly never reached the service. */
const NOT_SENT = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);
/** Validation errors of a document that asks for what the service's schema lacks. */
const UNKNOWN_TO_SERVICE = new RegExp(
  [
    'Cannot query field',
    'Unknown argument',
    'Unknown type',
    'is not defined by type',
    'does not exist in',
    'unknown field',
  ].join('|'),
);

/** GraphQL over HTTP POST: headers, time limit, retries, and errors as GraphmemError. */
export class HttpTransport {
  readonly endpoint: string;
  readonly #settings: HttpSettings;
  readonly #headers: Record<string, string>;

  constructor(settings: HttpSettings) {
    this.#settings = settings;
    this.endpoint = `${settings.url}/graphql`;
    this.#headers = { accept: 'application/json', 'content-type': 'application/json' };
    if (settings.apiKey) this.#headers.authorization = `Bearer ${settings.apiKey}`;
    if (settings.namespace) this.#headers[NAMESPACE_HEADER] = settings.namespace;
  }

  /**
   * The `data` of one request. A read is retried after a 429 or 503 answer or a failed
   * connection; a write only when the service certainly did not run it (429, 503, a
   * connection refused before anything was sent).
   */
  async execute<TResult, TVariables>(
    document: TypedDocumentString<TResult, TVariables>,
    variables: TVariables,
    { write }: { write: boolean },
  ): Promise<TResult> {
    // The answer's shape is the document's: the service validated it against its schema.
    return (await this.executeText(document.toString(), variables, { write })) as TResult;
  }

  /** `execute` for a document built at run time (its answer unchecked: `unknown`). */
  async executeText(
    query: string,
    variables: unknown,
    { write }: { write: boolean },
  ): Promise<unknown> {
    try {
      return await this.#send(query, withoutNulls(variables), write);
    } catch (error) {
      throw await this.#explained(error);
    }
  }

  async #send(query: string, variables: unknown, write: boolean): Promise<unknown> {
    const { url, timeoutMs, retries } = this.#settings;
    const body = JSON.stringify({ query, variables });
    let wait = BACKOFF_MS;
    for (let attempt = 0; ; attempt++) {
      let problem: GraphmemError;
      try {
        const response = await fetch(this.endpoint, {
          method: 'POST',
          headers: this.#headers,
          body,
          signal: AbortSignal.timeout(timeoutMs),
        });
        const text = await response.text();
        if (response.status !== 429 && response.status !== 503) {
          return dataOf(response.status, text);
        }
        problem = refusal(response.status, text);
        wait = retryAfter(response.headers.get('retry-after'), wait);
      } catch (error) {
        if (error instanceof GraphmemError) throw error;
        if (isTimeout(error)) {
          // Not retried: the service may be running it still, and a call must not stall.
          throw new GraphmemError('UNAVAILABLE', `${url} did not answer within ${timeoutMs} ms`, {
            cause: error,
          });
        }
        const code = networkCode(error);
        problem = new GraphmemError('UNAVAILABLE', `cannot reach ${url}: ${code ?? error}`, {
          cause: error,
        });
        if (write && !(code !== null && NOT_SENT.has(code))) throw problem;
      }
      if (attempt >= retries) throw problem;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait *= 2;
    }
  }

  /**
   * A document the service's schema does not know usually means a service of another
   * version: say which two versions met, which the validation message alone does not.
   */
  async #explained(error: unknown): Promise<unknown> {
    if (
      !(error instanceof GraphmemError) ||
      (error.code !== 'INVALID_QUERY' && error.code !== 'INVALID_INPUT') ||
      !UNKNOWN_TO_SERVICE.test(error.message)
    ) {
      return error;
    }
    let server: unknown;
    try {
      server = ((await this.#send('query Version { version }', {}, false)) as { version?: unknown })
        .version;
    } catch {
      return error;
    }
    if (typeof server !== 'string' || server === CLIENT_VERSION) return error;
    return new GraphmemError(
      error.code,
      `graphmem server ${server}, client ${CLIENT_VERSION}: the server does not know what this ` +
        `client asks (${error.message}); use a client made for graphmem ${server}, or upgrade ` +
        'the server',
      { status: error.status, cause: error },
    );
  }
}

/**
 * `variables` without their null values: the same request, as every nullable argument of the
 * API defaults to null, and one of type `Int! = 10` refuses null but takes its default.
 */
function withoutNulls(variables: unknown): unknown {
  if (typeof variables !== 'object' || variables === null) return variables;
  return Object.fromEntries(Object.entries(variables).filter(([, value]) => value !== null));
}

/** The `data` of an answer; its errors raised as GraphmemError. */
function dataOf(status: number, text: string): unknown {
  let body: { data?: unknown; errors?: GraphQLErrorEntry[] } | null;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // A proxy's page in front of a service that is down or starting.
    const code =
      status === 502 || status === 503 || status === 504 ? 'UNAVAILABLE' : 'INTERNAL_ERROR';
    throw new GraphmemError(code, `HTTP ${status}: ${text.slice(0, 200)}`, { status });
  }
  if (body?.errors?.length) {
    throw graphqlError(body.errors, status >= 400 ? status : null);
  }
  if (status >= 400 || typeof body?.data !== 'object' || body.data === null) {
    throw new GraphmemError('INTERNAL_ERROR', `HTTP ${status}: ${text.slice(0, 200)}`, { status });
  }
  return body.data;
}

/** The error of a 429 or 503 answer: its GraphQL error's code, when it has one. */
function refusal(status: number, text: string): GraphmemError {
  try {
    dataOf(status, text);
  } catch (error) {
    if (error instanceof GraphmemError) return error;
  }
  return new GraphmemError(status === 429 ? 'RATE_LIMITED' : 'UNAVAILABLE', `HTTP ${status}`, {
    status,
  });
}

/** Milliseconds to wait as a Retry-After header (seconds, or an HTTP date) asks. */
export function retryAfter(header: string | null, fallbackMs: number): number {
  if (header === null || header.trim() === '') return fallbackMs;
  const seconds = Number(header);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(header) - Date.now();
  if (Number.isNaN(ms)) return fallbackMs;
  return Math.min(Math.max(ms, 0), MAX_RETRY_WAIT_MS);
}

function isTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
}

/** The system error code (ECONNREFUSED…) under a failed fetch, if any. */
function networkCode(error: unknown): string | null {
  for (let cause = error; cause instanceof Error; cause = cause.cause) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return null;
}
