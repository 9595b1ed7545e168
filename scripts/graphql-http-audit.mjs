// The graphql-http server audit (GraphQL over HTTP conformance) against a running Cairn, with a
// passport: `cairn passport --role R` (JSON) on stdin, the /graphql URL as the argument.
// graphql-http is resolved from the current directory (npm install graphql-http graphql there).
// Prints every audit that is not ok, then the counts; exits 1 if any audit is a warning or an error.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const { auditServer } = createRequire(join(process.cwd(), 'noop.js'))('graphql-http');
const url = process.argv[2] ?? 'http://127.0.0.1:8000/graphql';
const passport = JSON.parse(readFileSync(0, 'utf8'));
const fetchFn = (input, init = {}) => {
  const headers = new Headers(init.headers);
  for (const [name, value] of Object.entries(passport)) headers.set(name, value);
  return fetch(input, { ...init, headers });
};
const counts = { ok: 0, notice: 0, warn: 0, error: 0 };
for (const result of await auditServer({ url, fetchFn })) {
  counts[result.status] += 1;
  if (result.status !== 'ok') {
    const body = await result.response.clone().text().catch(() => '');
    console.log(`${result.status} ${result.id} ${result.name}: ${result.reason}\n    ${body.slice(0, 160)}`);
  }
}
console.log(JSON.stringify(counts));
process.exit(counts.warn + counts.error > 0 ? 1 : 0);
