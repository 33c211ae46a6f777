// GraphiQL at /graphql, from the service's own files: strawberry's GraphiQL page (React,
// GraphiQL and its explorer plugin as globals), with every script served here instead of by
// unpkg.com. Queries and mutations are POSTed to this page's address, subscriptions run over a
// WebSocket to it (graphql-transport-ws), and the Headers tab's headers (an API key's
// Authorization) go with both: as HTTP headers, and as the socket's connection parameters.
"use strict";

const DEFAULT_QUERY = `# GraphiQL for graphmem. Run a query with Ctrl-Enter (or the play button);
# the schema is under Docs, the query builder under Explorer (on the left).
# With API keys, present one under Headers below: {"Authorization": "Bearer <key>"}
{
  namespace
  canWrite
}
`;

// The page's address, without its query string: the API answers there (the page is served to
// a browser that asks for text/html). Not document.baseURI: that is the page's files.
const endpoint = new URL(window.location.pathname, window.location.href);
const socketEndpoint = new URL(endpoint);
socketEndpoint.protocol = endpoint.protocol === "https:" ? "wss:" : "ws:";

// The editors' contents are kept in the page's URL, to share a query: ?q=…&variables=…, as on
// strawberry's page (not the headers, which may hold a key).
const parameters = Object.fromEntries(new URLSearchParams(window.location.search));

function updateURL(changed) {
  Object.assign(parameters, changed);
  const kept = Object.entries(parameters).filter(([, value]) => Boolean(value));
  const search = kept.length ? "?" + new URLSearchParams(kept).toString() : "";
  history.replaceState(null, "", window.location.pathname + search);
}

const fetcher = GraphiQL.createFetcher({
  url: endpoint.href,
  subscriptionUrl: socketEndpoint.href,
});
const explorer = GraphiQLPluginExplorer.explorerPlugin();

function GraphiQLWithExplorer() {
  const [query, setQuery] = React.useState(parameters.q || DEFAULT_QUERY);
  const [variables, setVariables] = React.useState(parameters.variables);
  return React.createElement(GraphiQL, {
    fetcher,
    plugins: [explorer],
    query,
    variables,
    headers: parameters.headers,
    onEditQuery(value) {
      setQuery(value);
      updateURL({ q: value });
    },
    onEditVariables(value) {
      setVariables(value);
      updateURL({ variables: value });
    },
    defaultEditorToolsVisibility: true,
    inputValueDeprecation: true,
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: true,
  });
}

ReactDOM.createRoot(document.getElementById("graphiql")).render(
  React.createElement(GraphiQLWithExplorer),
);
