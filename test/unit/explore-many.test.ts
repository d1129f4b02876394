/**
 * The explorer at scale, in every CI run: 10,000 schedules over all four worlds (the seed picks each schedule's
 * world) on the real code, from a fixed seed, so a red run is the same on any machine and any day. A failure prints
 * each failing schedule's replay command.
 *
 * `fencepost simulate explore` runs in a process of its own, as a user runs it: in this file's process node:test's
 * async hooks see every promise, and the schedules run about three times slower.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ExploreSummary } from '../../verify/explore/explore';

const SCHEDULES = 10_000;
/** Seeds no other test or doc uses. */
const FROM = 100_001;
const CLI = path.join(__dirname, '../../bin/fencepost.ts');

test(`${SCHEDULES.toLocaleString('en-US')} schedules over all worlds from seed ${FROM}: no violation`, { timeout: 600_000 }, async () => {
  const args = ['--import', 'tsx', CLI, 'simulate', 'explore', '--seed', String(FROM), '--schedules', String(SCHEDULES), '--json'];
  const run = await promisify(execFile)(process.execPath, args, { maxBuffer: 1 << 28 }).catch((err: { stdout?: string; stderr?: string }) => err);
  const last = String(run.stdout).trim().split('\n').at(-1) ?? '';
  assert.ok(last.startsWith('{'), `simulate explore printed no summary: ${String(run.stderr)}`);
  const summary = JSON.parse(last) as ExploreSummary;
  assert.equal(summary.schedules, SCHEDULES);
  assert.deepEqual(
    summary.violations.map((v) => `${v.replay}: ${v.violations.join('; ')}`),
    [],
  );
  // For the log: the rate on a machine shared with the other test files (bench/explorer.ts measures it idle).
  console.log(`${JSON.stringify(summary.worlds)}; ${String(run.stderr).trim()}`);
});
