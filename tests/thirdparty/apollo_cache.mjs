// Apollo Client's InMemoryCache against a live graphmem service: a watched query of a fact at a
// past knownAt, then a read of its history now (the same fact among today's versions). Prints,
// as JSON, what the watched query shows before and after the second read.
//
//   node apollo_cache.mjs <graphql url> <fact id> <knownAt> <viewId|id>
//
// `viewId` configures the cache as docs/graphql.md#caching says; `id` leaves Apollo's default
// (normalising every Fact by `__typename` and `id`).
import { ApolloClient, HttpLink, InMemoryCache, gql } from '@apollo/client';

const [url, id, knownAt, keyedBy] = process.argv.slice(2);

const FACT = gql`
  fragment Seen on Fact {
    viewId
    id
    text
    validUntil
    supersededById
  }
`;
const THEN = gql`
  query Then($id: ID!, $knownAt: DateTime) {
    fact(id: $id, knownAt: $knownAt) {
      ...Seen
    }
  }
  ${FACT}
`;
const NOW = gql`
  query Now($id: ID!) {
    history(id: $id) {
      ...Seen
    }
  }
  ${FACT}
`;

const typePolicies =
  keyedBy === 'viewId'
    ? {
        Fact: { keyFields: ['viewId'] },
        Link: { keyFields: ['viewId'] },
        Episode: { keyFields: ['viewId'] },
        MemoryChange: { keyFields: false },
      }
    : {};
const client = new ApolloClient({
  link: new HttpLink({ uri: url }),
  cache: new InMemoryCache({ typePolicies }),
});

const watched = client.watchQuery({ query: THEN, variables: { id, knownAt } });
const shown = [];
const first = new Promise((resolve, reject) => {
  const subscription = watched.subscribe({
    next: (result) => {
      if (result.data?.fact) {
        shown.push(result.data.fact);
        resolve(subscription);
      }
    },
    error: reject,
  });
});
const subscription = await first;
const now = await client.query({ query: NOW, variables: { id }, fetchPolicy: 'network-only' });
// The cache broadcasts to watchers after the write; give it its turn of the event loop.
await new Promise((resolve) => setTimeout(resolve, 50));
const after = watched.getCurrentResult().data?.fact ?? null;
subscription.unsubscribe();
console.log(
  JSON.stringify({
    before: shown[0],
    now: now.data.history,
    after,
    cached: Object.keys(client.cache.extract()).filter((key) => key.startsWith('Fact:')),
  }),
);
