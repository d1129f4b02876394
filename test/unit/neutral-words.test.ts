/**
 * The library's source speaks of jobs, not of the billing reference app (issue 20, item 3; docs/DESIGN.md § Layout:
 * lib/core/ knows nothing of billing). Every TypeScript file of lib/core/, lib/election/, lib/testing/, lib/lambda/, lib/constructs/ and lib/postgres/ is read, comments included, so an
 * example or a reason written in the reference app's words fails here with its file and line. Left out: lib/sim/,
 * the simulator, which tells the reference text's billing night; and DynamoDB's own `BillingMode` (its API's word,
 * `billingMode` as CDK's prop).
 *
 * One word per idea (issue 26, item 4): what the billing app calls a night is, for any job, a run (of the job, for
 * its date). The package's commands and emulators (lib/cli/, lib/local/) may name the billing app, the repository's,
 * but not speak of nights either.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
const BILLING = /invoice|billing|billed/i;
/** The billing app's word for one run of a job ("midnight" is a time of day, not a run). */
const NIGHT = /\bnight(s|ly|'s)?\b/i;
/** Construct ids of stacks already deployed: renaming one replaces its resources (lib/constructs/fenced-job.ts). */
const DEPLOYED_IDS = /'Nightly'/g;
/** AWS's words, not ours. */
const AWS_WORDS = /\b[Bb]illingMode\b/g;

function sources(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))
    .map((f) => path.join(dir, f));
}

test('no billing word in the library source (the package but its simulator, lib/sim/, and its commands and emulators)', () => {
  const files = ['lib/core', 'lib/election', 'lib/testing', 'lib/lambda', 'lib/constructs', 'lib/postgres'].flatMap(sources);
  assert.ok(files.length > 20, `the checker sees the library's files: ${files.length}`);
  const found = files.flatMap((f) =>
    readFileSync(path.join(ROOT, f), 'utf8')
      .split('\n')
      .flatMap((line, i) => (BILLING.test(line.replace(AWS_WORDS, '')) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
  );
  assert.deepEqual(found, [], "lines in the billing app's words");
});

test("no 'night' in the package's source but its simulator: a job's run is a run, whatever its schedule", () => {
  const files = ['lib/core', 'lib/election', 'lib/testing', 'lib/lambda', 'lib/constructs', 'lib/postgres', 'lib/cli', 'lib/local'].flatMap(sources);
  const found = files.flatMap((f) =>
    readFileSync(path.join(ROOT, f), 'utf8')
      .split('\n')
      .flatMap((line, i) => (NIGHT.test(line.replace(DEPLOYED_IDS, '')) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
  );
  assert.deepEqual(found, [], 'lines that call a run a night');
});

test('no code comment sends its reader to a Part of the reference text: it says the reason itself (docs/DESIGN.md may cite the Parts)', () => {
  const files = ['lib', 'apps', 'cli', 'bin', 'verify'].flatMap(sources);
  assert.ok(files.length > 100, `the checker sees the code: ${files.length} files`);
  const found = files.flatMap((f) =>
    readFileSync(path.join(ROOT, f), 'utf8')
      .split('\n')
      .flatMap((line, i) => (/\bPart \d+\b/.test(line) ? [`${f}:${i + 1}: ${line.trim()}`] : [])),
  );
  assert.deepEqual(found, [], 'lines that cite a Part instead of its reason');
});
