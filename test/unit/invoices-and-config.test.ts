/** Pure unit tests: the chunking arithmetic of Part 5, the generator's determinism, and configuration checks. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chunkBatches, chunkCount, invoiceAt, transactionsPerChunk, transactionsPerNight, type NightPlan } from '../../apps/billing/invoices';
import { dateProblem, inWords, validateLeaseConfig } from '../../lib/core/config';
import { createRuntime } from '../../lib/lambda/runtime';
import { runOptions } from '../../cli/options';
import { DEFAULTS, validateBillingConfig } from '../../apps/billing/settings';
import { ConfigError } from '../../lib/core/errors';

const night: NightPlan = { date: '2026-09-28', invoices: 50_000, chunkSize: 5_000, putsPerTransaction: 99 };

test('Part 5 arithmetic: a chunk of 5,000 is 51 transactions, a night of 10 chunks is 510', () => {
  assert.equal(chunkCount(night), 10);
  assert.equal(transactionsPerChunk(night, 0), 51);
  assert.equal(transactionsPerNight(night), 510);
  const batches = [...chunkBatches(night, 3)];
  assert.equal(batches.length, 51);
  assert.deepEqual(batches.map((b) => b.length).slice(-2), [99, 5_000 - 50 * 99]);
  assert.equal(batches[0][0].index, 15_000);
  assert.equal(batches.at(-1)!.at(-1)!.index, 19_999);
});

test('the generator is deterministic: the same date gives the same ids, customers and amounts', () => {
  assert.deepEqual(invoiceAt('2026-09-28', 5001, 5), invoiceAt('2026-09-28', 5001, 5));
  assert.equal(invoiceAt('2026-09-28', 5001, 5).pk, 'inv#2026-09-28#05001');
  assert.notEqual(invoiceAt('2026-09-28', 5001, 5).pk, invoiceAt('2026-09-29', 5001, 5).pk);
  const amounts = new Set(Array.from({ length: 1000 }, (_, i) => invoiceAt('2026-09-28', i, 5).amount));
  assert.ok(amounts.size > 900, 'amounts vary');
});

test('an uneven night: the last chunk and the last batch are short', () => {
  const plan = { ...night, invoices: 1_234, chunkSize: 500 };
  assert.equal(chunkCount(plan), 3);
  assert.deepEqual(
    [0, 1, 2].map((c) => transactionsPerChunk(plan, c)),
    [6, 6, 3],
  );
  assert.equal([...chunkBatches(plan, 2)].flat().length, 234);
});

test('defaults are the reference numbers', () => {
  assert.deepEqual(validateBillingConfig({}), DEFAULTS);
  assert.equal(DEFAULTS.leaseMs, 10_000);
  assert.equal(DEFAULTS.renewMs, 3_000);
  assert.equal(DEFAULTS.marginMs, 2_000);
});

test('bad configuration is refused with every problem listed at once', () => {
  let problems: readonly string[] = [];
  assert.throws(
    () => validateBillingConfig({ putsPerTransaction: 100, chunkSize: 0, renewMs: 5_000 }),
    (err) => {
      assert.ok(err instanceof ConfigError);
      problems = err.problems;
      return true;
    },
  );
  assert.equal(problems.length, 3, problems.join('\n'));
  assert.match(problems.join('\n'), /putsPerTransaction \(100\) must be at most 99/);
  assert.match(problems.join('\n'), /chunkSize must be a positive integer/);
  assert.match(problems.join('\n'), /renewMs \(5000\) must be at most leaseMs \/ 3/);
  assert.throws(() => validateBillingConfig({ marginMs: 10_000 }), /marginMs \(10000\) must be less than leaseMs/);
});

test('dates: only real calendar dates in YYYY-MM-DD', () => {
  assert.equal(dateProblem('2026-09-28'), undefined);
  assert.equal(dateProblem('2028-02-29'), undefined);
  for (const bad of ['2026-9-28', '2026-02-30', '2026-13-01', '28-09-2026', '', 'tomorrow']) assert.ok(dateProblem(bad), bad);
});

test('one rule, each layer in its own words: the library names LeaseConfig’s fields, the command its flags, the functions their variables', () => {
  const problemsOf = (f: () => unknown): readonly string[] => {
    try {
      f();
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      return err.problems;
    }
    assert.fail('refused');
  };
  const relation = (renew: string, lease: string) => new RegExp(`^${renew} \\(5000\\) must be at most ${lease} / 3 \\(3333\\)`);
  const library = problemsOf(() => validateLeaseConfig({ leaseMs: 10_000, renewMs: 5_000 }));
  assert.match(library.join('\n'), relation('renewMs', 'leaseMs'));
  const command = problemsOf(() => runOptions({ 'lease-ms': '10000', 'renew-ms': '5000' }));
  assert.equal(command.filter((p) => relation('--renew-ms', '--lease-ms').test(p)).length, 1, command.join('\n'));
  const functions = problemsOf(() => createRuntime({ environment: { FENCEPOST_LEASE_MS: '10000', FENCEPOST_RENEW_MS: '5000' } }));
  assert.match(functions.join('\n'), relation('FENCEPOST_RENEW_MS', 'FENCEPOST_LEASE_MS'));
  // A word the layer has no other word for is left as it is, and only whole words are replaced.
  assert.equal(inWords('leaseMs - marginMs (1) must exceed renewMs (2)', { leaseMs: 'L', marginMs: 'M' }), 'L - M (1) must exceed renewMs (2)');
  assert.equal(inWords('leaseMsX and xleaseMs', { leaseMs: 'L' }), 'leaseMsX and xleaseMs');
});
