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
  /** `field`: the argument the error is about, as a path (`maxDepth`, `input.validFrom`). */
  extensions?: { code?: string; field?: string } & Record<string, unknown>;
}

/** A variable the service could not read ("Variable '$inputs' has invalid value at
 * [0].validFrom: …"): the variable, and the path inside it. */
const INVALID_VARIABLE = /^Variable '\$(\w+)' has invalid value(?: at ([^:]*))?:/;

/**
 * The error of a GraphQL answer's first error (its `extensions.code`), with `field` the
 * innermost name of the argument path its `extensions.field` gives, as the service names the
 * fields a mutation refuses. A variable the service could not read is the caller's input, not
 * the client's query: INVALID_INPUT, with `field` the innermost name of its path.
 */
export function graphqlError(
  errors: readonly GraphQLErrorEntry[],
  status: number | null = null,
): GraphmemError {
  const first = errors[0] ?? {};
  const message = first.message ?? 'the service answered an error';
  const invalid = INVALID_VARIABLE.exec(message);
  if (invalid) {
    return new GraphmemError('INVALID_INPUT', message, {
      field: innermost(invalid[2] ?? '') ?? invalid[1] ?? null,
      status,
    });
  }
  const field = first.extensions?.field;
  return new GraphmemError(first.extensions?.code ?? 'INTERNAL_ERROR', message, {
    field: typeof field === 'string' ? innermost(field) : null,
    status,
  });
}

/** The last name of a path such as `inputs[1].validFrom`, or null when it has none. */
function innermost(path: string): string | null {
  return path.match(/[A-Za-z_]\w*/g)?.at(-1) ?? null;
}
