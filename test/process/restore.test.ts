/** The restore bump (reference Part 8 "Restores"): a restored lock table would repeat tokens until it is bumped. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { systemClock } from '../../lib/core/clock';
import { DEFAULTS } from '../../apps/billing/settings';
import { FencedOutError } from '../../lib/core/errors';
import { Events } from '../../lib/core/events';
import * as fence from '../../lib/core/fence';
import { claim } from '../../lib/core/lease';
import { bumpEpochs } from '../../lib/core/restore';
import { Keys } from '../../apps/billing/keys';
import { namespace } from '../support/stack';
import { exitedAfterOutput, runCli, storeArgs } from '../support/worker';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoJobStore } from '../../lib/core/aws/job-store';

const lease = { ...DEFAULTS, leaseMs: 300, renewMs: 100, marginMs: 100 };

test('a restored lock item repeats an old token; after bump-epochs no token can repeat', async () => {
  const ns = await namespace();
  const date = '2026-09-28';
  const key = Keys.lock(date);
  const leaseDeps = { locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks), clock: systemClock, events: new Events('T', systemClock) };
  const fenceDeps = { jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs), clock: systemClock };
  const take = async (who: string) => {
    const l = await claim(leaseDeps, key, who, lease);
    await fence.raise(fenceDeps, Keys.job(date), l.token, who, 1);
    await l.release();
    return l.token;
  };
  assert.deepEqual([await take('A'), await take('B')], [1, 2]);
  const backup = (await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.locks, Key: { pk: key }, ConsistentRead: true }))).Item!;
  assert.deepEqual([await take('C'), await take('D')], [3, 4]);

  // "Restore" the lock table from the backup: the item goes back to epoch 2.
  await ns.clients.ddb.send(new PutCommand({ TableName: ns.tables.locks, Item: backup }));
  const e = await claim(leaseDeps, key, 'E', lease);
  assert.equal(e.token, 3, 'the next claim repeats token 3, which C already used');
  await assert.rejects(
    fence.raise(fenceDeps, Keys.job(date), e.token, 'E', 1),
    FencedOutError,
    'the fence (at 4) refuses it: safe, but the night is stuck',
  );
  await e.release();

  const dry = await bumpEpochs({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, { by: 1_000_000, runId: 'r1', dryRun: true });
  assert.deepEqual(dry.changed, [{ key, from: 3, to: 1_000_003 }]);
  assert.deepEqual(dry.floor, { from: 0, to: 1_000_000, alreadyRaised: false }, 'the floor it would raise (never raised: from 0)');
  const unchanged = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.locks, Key: { pk: key }, ConsistentRead: true }));
  assert.equal(unchanged.Item!.epoch, 3, 'a dry run writes nothing');

  const bumped = await bumpEpochs({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, { by: 1_000_000, runId: 'r1', dryRun: false });
  assert.deepEqual(bumped.changed, [{ key, from: 3, to: 1_000_003 }]);
  assert.deepEqual(bumped.floor, dry.floor, 'the floor raised as the dry run said');
  const again = await bumpEpochs({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, { by: 1_000_000, runId: 'r1', dryRun: false });
  assert.deepEqual([again.changed.length, again.alreadyBumped], [0, [key]], 'the same run id never bumps twice (resumable)');
  assert.deepEqual(again.floor, { from: bumped.floor.to, to: bumped.floor.to, alreadyRaised: true });
  const dryAgain = await bumpEpochs({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks) }, { by: 1_000_000, runId: 'r1', dryRun: true });
  assert.deepEqual(dryAgain.floor, again.floor, 'a dry run finds the floor this run raised');

  const f = await claim(leaseDeps, key, 'F', lease);
  assert.equal(f.token, 1_000_004, 'every future token is above every token used before the restore');
  await fence.raise(fenceDeps, Keys.job(date), f.token, 'F', 1);
  await f.release();
  // A night first locked after the backup has no item in the restored table: its first claim starts above the floor.
  const later = await claim(leaseDeps, Keys.lock('2026-09-29'), 'G', lease);
  assert.equal(later.token, bumped.floor.to + 1, 'a key the restored table lacks starts above the floor, not at 1');
  await later.release();
});

test('fencepost bump-epochs --dry-run then for real, on the CLI', async () => {
  const ns = await namespace();
  const leaseDeps = { locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks), clock: systemClock, events: new Events('T', systemClock) };
  for (const d of ['2026-09-27', '2026-09-28']) await (await claim(leaseDeps, Keys.lock(d), 'A', lease)).release();
  const cli = async (args: string[]) => {
    const child = runCli(['bump-epochs', ...storeArgs(ns), ...args]);
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const code = await exitedAfterOutput(child);
    return { code, out };
  };
  const dry = await cli(['--dry-run', '--run-id', 'restore-1']);
  assert.equal(dry.code, 0);
  assert.match(dry.out, /dry run: would bump 2 of 2 lock items in \S+locks by 1,000,000/);
  const real = await cli(['--run-id', 'restore-1', '--json']);
  const report = JSON.parse(real.out);
  assert.deepEqual(report.changed.map((c: { to: number }) => c.to).sort(), [1_000_001, 1_000_001]);
  const repeat = await cli(['--run-id', 'restore-1']);
  assert.match(repeat.out, /bumped 0 of 2[\s\S]*already bumped by this run id: 2/);
});

test('bump-epochs with no target is refused before any call: it would bump empty tables of its own', async () => {
  const child = runCli(['bump-epochs']);
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const code = await exitedAfterOutput(child);
  assert.equal(code, 2);
  assert.match(err, /bump-epochs needs the restored table: --aws --lock-table NAME, or --dynamodb-endpoint URL --s3-endpoint URL/);
  assert.doesNotMatch(err, /run id/, 'nothing started');
});

test('bump-epochs --aws needs the restored table named explicitly (refused before any call)', async () => {
  const child = runCli(['bump-epochs', '--aws', '--dry-run']);
  let err = '';
  child.stderr!.on('data', (d) => (err += d));
  const code = await exitedAfterOutput(child);
  assert.equal(code, 2);
  assert.match(err, /--aws needs --lock-table NAME/);
});
