// Runs every audit of graphql-http's serverAudits (the GraphQL-over-HTTP spec's checks) against
// the URL given as the first argument, one after another, and prints their results as JSON:
// [{id, name, status: "ok" | "notice" | "warn" | "error", reason, response}], where response is
// the status, content type and start of the body of the answer that failed the audit. A second
// argument is an API key, sent with every request (Authorization: Bearer).
import { serverAudits } from 'graphql-http';

const [url, key] = process.argv.slice(2);
const fetchFn = key
  ? (input, init = {}) =>
      fetch(input, {
        ...init,
        headers: { ...(init.headers || {}), authorization: `Bearer ${key}` },
      })
  : fetch;
const results = [];
for (const { fn } of serverAudits({ url, fetchFn })) {
  const { id, name, status, reason, response } = await fn();
  let answer;
  if (response) {
    const body = await response.text().catch(() => '');
    answer = {
      status: response.status,
      contentType: response.headers.get('content-type'),
      body: body.slice(0, 300),
    };
  }
  results.push({ id, name, status, reason, response: answer });
}
process.stdout.write(JSON.stringify(results));
