// The explorer's GraphQL client: one POST to the service's /graphql per call, with the API key
// and namespace the person entered (kept in this tab's sessionStorage, never in the URL).

const KEY = "graphmem.key";
const NAMESPACE = "graphmem.namespace";

// The page is served at <prefix>/explore/, the API at <prefix>/graphql.
export const ENDPOINT = new URL("../graphql", document.baseURI).href;

/** HTTP 401: keys are configured and this request had none, or a wrong one. */
export class Unauthenticated extends Error {}

/** Any other failure: `code` is the service's error code (docs/graphql.md) when it gave one. */
export class ApiError extends Error {
  constructor(message, code = null, status = null) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

export function credentials() {
  return {
    key: sessionStorage.getItem(KEY) || "",
    namespace: sessionStorage.getItem(NAMESPACE) || "",
  };
}

export function saveCredentials({ key, namespace }) {
  for (const [name, value] of [[KEY, key], [NAMESPACE, namespace]]) {
    if (value) sessionStorage.setItem(name, value);
    else sessionStorage.removeItem(name);
  }
}

/** The `data` of a GraphQL operation; throws Unauthenticated or ApiError. */
export async function gql(query, variables = {}) {
  const { key, namespace } = credentials();
  const headers = { "content-type": "application/json", accept: "application/json" };
  if (key) headers.authorization = `Bearer ${key}`;
  if (namespace) headers["x-graphmem-namespace"] = namespace;
  let response;
  try {
    response = await fetch(ENDPOINT, {
      method: "POST",
      headers,
      body: JSON.stringify({ query, variables }),
    });
  } catch (error) {
    throw new ApiError(`the server cannot be reached (${error.message})`, "UNREACHABLE");
  }
  let body = null;
  try {
    body = await response.json();
  } catch {
    // Not JSON (a proxy's error page): reported by status below.
  }
  const first = body?.errors?.[0];
  if (response.status === 401) {
    throw new Unauthenticated(first?.message || "an API key is required");
  }
  if (first) {
    const where = first.path ? ` (at ${first.path.join(".")})` : "";
    throw new ApiError(first.message + where, first.extensions?.code || null, response.status);
  }
  if (!response.ok || !body?.data) {
    throw new ApiError(`the server answered HTTP ${response.status}`, null, response.status);
  }
  return body.data;
}

/** Throws the `error` of a mutation payload, when it has one. */
export function checkPayload(payload) {
  if (payload?.error) {
    const { code, message, field } = payload.error;
    throw new ApiError(field ? `${message} (${field})` : message, code);
  }
  return payload;
}
