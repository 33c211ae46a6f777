/**
 * Every error code graphmem answers with (graphmem/errors.py). The first four also come as a
 * mutation payload's `error`; UNAUTHENTICATED, RATE_LIMITED, TOO_COSTLY, PAYLOAD_TOO_LARGE,
 * INVALID_QUERY and INTERNAL_ERROR only from a service; UNAVAILABLE also when the service
 * cannot be reached or does not answer in time.
 */
export const CODES = [
  'INVALID_INPUT',
  'NOT_FOUND',
  'CONFLICT',
  'FORBIDDEN',
  'EMBEDDER_MISMATCH',
  'EMBEDDER_ERROR',
  'LLM_ERROR',
  'STORAGE_ERROR',
  'TIMEOUT',
  'UNAVAILABLE',
  'INVALID_QUERY',
  'UNAUTHENTICATED',
  'PAYLOAD_TOO_LARGE',
  'TOO_COSTLY',
  'RATE_LIMITED',
  'INTERNAL_ERROR',
] as const;

/** A code of CODES; a newer service may answer one this client does not know yet. */
export type Code = (typeof CODES)[number] | (string & {});

/** What the service, or the way to it, refused: `code` says which kind of failure it is. */
export class GraphmemError extends Error {
  override readonly name = 'GraphmemError';
  /** The service's error code (see CODES). */
  readonly code: Code;
  /** The argument the service refused, when it names one (INVALID_INPUT). */
  readonly field: string | null;
  /** The HTTP status of a request refused as a whole (401, 429, 503…), else null. */
  readonly status: number | null;

  constructor(
    code: Code,
    message: string,
    options: { field?: string | null; status?: number | null; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.field = options.field ?? null;
    this.status = options.status ?? null;
  }
}

/** One entry of a GraphQL answer's `errors`. */
export interface GraphQLErrorEntry {
  message?: string;
  path?: ReadonlyArray<string | number>;
  extensions?: { code?: string } & Record<string, unknown>;
}

/** A variable the service could not read ("Variable '$inputs' has invalid value at
 * [0].validFrom: …"): the variable, and the path inside it. */
const INVALID_VARIABLE = /^Variable '\$(\w+)' has invalid value(?: at ([^:]*))?:/;

/**
 * The error of a GraphQL answer's first error (its `extensions.code`). A variable the
 * service could not read is the caller's input, not the client's query: INVALID_INPUT, with
 * `field` the innermost name of its path, as the service names the fields it refuses itself.
 */
export function graphqlError(
  errors: readonly GraphQLErrorEntry[],
  status: number | null = null,
): GraphmemError {
  const first = errors[0] ?? {};
  const message = first.message ?? 'the service answered an error';
  const invalid = INVALID_VARIABLE.exec(message);
  if (invalid) {
    const names = (invalid[2] ?? '').match(/[A-Za-z_]\w*/g) ?? [];
    return new GraphmemError('INVALID_INPUT', message, {
      field: names.at(-1) ?? invalid[1] ?? null,
      status,
    });
  }
  return new GraphmemError(first.extensions?.code ?? 'INTERNAL_ERROR', message, { status });
}
