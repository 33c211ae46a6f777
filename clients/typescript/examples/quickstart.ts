// Store two facts, search them, link them: run against a graphmem service at GRAPHMEM_URL,
// with GRAPHMEM_API_KEY when the service needs a key.
import { GraphmemClient } from '@graphmem/client';

const memory = new GraphmemClient({
  url: process.env.GRAPHMEM_URL ?? 'http://127.0.0.1:8420',
  apiKey: process.env.GRAPHMEM_API_KEY,
});

const home = await memory.store('Ana moved to Lisbon in 2019', { entity: 'ana', key: 'city' });
const work = await memory.store('Ana works at a bakery in Alfama', { entity: 'ana', key: 'job' });
console.log(`stored: ${home.action} ${home.fact?.id}`);
console.log(`stored: ${work.action} ${work.fact?.id}`);

const [hit] = await memory.search('which city does Ana live in', { limit: 1 });
console.log(`search: ${hit?.fact.text} (score ${hit?.score.toFixed(3)})`);

const link = await memory.link(home.fact!.id, work.fact!.id, 'RELATED_TO');
console.log(`linked: ${link.sourceId} -[${link.type}]-> ${link.targetId}`);

const graph = await memory.traverse(home.fact!.id, { depth: 1 });
for (const node of graph.nodes) {
  console.log(`  depth ${node.depth}: ${node.fact.text}`);
}
