// Fails when src/generated/graphql.ts is not what `npm run codegen` makes now from
// ../../schema.graphql and src/operations.graphql: the committed types must never drift from
// the schema. Generates in memory, so the committed file is never touched.
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { generate, loadCodegenConfig } from '@graphql-codegen/cli';

const { config } = await loadCodegenConfig({ configFilePath: 'codegen.yml' });
const outputs = await generate({ ...config, silent: true }, false);
const stale = [];
for (const { filename, content } of outputs) {
  const committed = await readFile(resolve(filename), 'utf8').catch(() => null);
  if (committed !== content) stale.push(filename);
}
if (stale.length > 0) {
  console.error(
    `${stale.join(', ')}: not what codegen makes from the current schema and operations; ` +
      'run `npm run codegen` and commit the result',
  );
  process.exit(1);
}
console.log(`codegen: ${outputs.map((o) => o.filename).join(', ')} up to date`);
