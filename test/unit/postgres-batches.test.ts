/**
 * How the PostgreSQL fence's batched writer cuts (lib/postgres/batches.ts): by rows on PostgreSQL, by Aurora DSQL's
 * limits when told it writes there (a transaction changes at most 3,000 rows, the fence row one of them, and 10 MiB),
 * and a row too large for any transaction refused before anything is sent. The limits are DSQL_LIMITS' (Aurora DSQL
 * User Guide, "Cluster quotas and database limits"); the cuts, written through the fence, are
 * test/store/postgres-fence-conformance.test.ts's.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError } from '../../lib/core/errors';
import { cutBatches } from '../../lib/postgres/batches';
import { DSQL_LIMITS } from '../../lib/postgres/dsql';

const lengths = (cuts: readonly unknown[][]) => cuts.map((c) => c.length);
const rows = (n: number) => Array.from({ length: n }, (_, i) => i);

test('PostgreSQL: 1,000 rows a transaction unless told otherwise; order kept, nothing dropped', () => {
  const cuts = cutBatches(rows(2_345));
  assert.deepEqual(lengths(cuts), [1_000, 1_000, 345]);
  assert.deepEqual(cuts.flat(), rows(2_345));
  assert.deepEqual(lengths(cutBatches(rows(10), { maxRows: 4 })), [4, 4, 2]);
  assert.deepEqual(cutBatches([]), []);
});

test('Aurora DSQL: at most 2,999 rows a cut (the fence row is the 3,000th), and at most 10 MiB less the headroom', () => {
  const perCut = DSQL_LIMITS.rowsPerTransaction - 1;
  assert.deepEqual(lengths(cutBatches(rows(7_000), { dsql: true })), [perCut, perCut, 7_000 - 2 * perCut]);
  // Rows of 3 MiB each: three fit under 10 MiB - 1 MiB = 9 MiB, a fourth does not.
  const mib = 1_048_576;
  const big = rows(7);
  assert.deepEqual(lengths(cutBatches(big, { dsql: true, sizeOf: () => 3 * mib })), [3, 3, 1]);
  assert.deepEqual(lengths(cutBatches(big, { dsql: true, sizeOf: () => 3 * mib, headroomBytes: 0 })), [3, 3, 1]);
  assert.deepEqual(lengths(cutBatches(big, { dsql: true, sizeOf: () => 3 * mib + 1, headroomBytes: 0 })), [3, 3, 1]);
  assert.deepEqual(lengths(cutBatches(big, { dsql: true, sizeOf: () => 3 * mib + 1 })), [2, 2, 2, 1]);
  // By default a row's size is its JSON's: strings of 1 MiB, eight a cut under 9 MiB.
  const strings = Array.from({ length: 10 }, () => 'x'.repeat(mib - 2));
  assert.deepEqual(lengths(cutBatches(strings, { dsql: true })), [9, 1]);
});

test('refused before anything is sent: a row larger than a DSQL transaction may hold, maxRows above DSQL limit or below 1; every problem at once', () => {
  const tooBig = (err: unknown) =>
    err instanceof ConfigError &&
    err.problems.length === 2 &&
    /^maxRows 3000 is above Aurora DSQL's 2999 rows/.test(err.problems[0]) &&
    /^row 1 is 10485761 bytes, more than a fenced transaction on Aurora DSQL may hold/.test(err.problems[1]);
  assert.throws(() => cutBatches([1, 2], { dsql: true, maxRows: 3_000, sizeOf: (r) => (r === 2 ? DSQL_LIMITS.bytesPerTransaction + 1 : 1) }), tooBig);
  assert.throws(() => cutBatches([1], { maxRows: 0 }), /maxRows must be a whole number of at least 1, got 0/);
  assert.throws(() => cutBatches([1], { dsql: true, headroomBytes: DSQL_LIMITS.bytesPerTransaction }), /leaves nothing/);
});
