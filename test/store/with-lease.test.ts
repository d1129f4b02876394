/** withLease: claim, a heartbeat from this process, the work, release; and what it does not promise (the orders and instants on virtual time and the memory stores, the release paths on DynamoDB Local). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { systemClock, VirtualClock } from '../../lib/core/clock';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { ConfigError, FencedOutError, StopTimePassedError } from '../../lib/core/errors';
import { Events, type FencepostEvent } from '../../lib/core/events';
import { fenceOn } from '../../lib/core/fence';
import { pollMsOf, readLock, type LeaseDeps } from '../../lib/core/lease';
import { writeBatch } from '../../lib/core/batch';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { withLease } from '../../lib/core/with-lease';
import { namespace, type Namespace } from '../support/stack';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';

const fast = { leaseMs: 1500, renewMs: 500, marginMs: 300 };

function deps(ns: Namespace, worker: string, ddb: DynamoDBDocumentClient = ns.clients.ddb): LeaseDeps & { seen: FencepostEvent[] } {
  const seen: FencepostEvent[] = [];
  return {
    locks: new DynamoLockStore(ddb, ns.tables.locks),
    clock: systemClock,
    events: new Events(worker, systemClock).on((e) => seen.push(e)),
    seen,
  };
}

test('withLease claims, renews from this process while the work runs, releases, and returns what the work returned', async () => {
  // Virtual time on the in-memory lock store: the heartbeat's renewals are counted exactly, on any machine.
  const clock = new VirtualClock();
  const seen: FencepostEvent[] = [];
  const d = { locks: new MemoryLockStore(), clock, events: new Events('A', clock).on((e) => seen.push(e)) };
  const workMs = 3 * fast.renewMs + 100; // longer than the lease would last without renewals; not a multiple of renewMs
  let done = false;
  const running = withLease(d, 'job#1', 'A', fast, async (lease) => {
    assert.equal(lease.token, 1);
    await clock.sleep(workMs);
    return lease.act(() => `done by ${lease.token}`); // the stop time moved with the renewals: still ours
  }).finally(() => (done = true));
  await clock.runUntilIdle(100); // bounded: a heartbeat that never stops fails here
  assert.equal(done, true);
  assert.equal(await running, 'done by 1');
  // Claimed at 0, the heartbeat renews every renewMs while the work runs, each renewal moving the stop time to its
  // sent_at + lease − margin; the release at workMs stops it.
  const renewals = Math.floor(workMs / fast.renewMs);
  assert.deepEqual(
    seen.filter((e) => e.event === 'renew').map((e) => e.event === 'renew' && e.stopAtMs),
    Array.from({ length: renewals }, (_, i) => (i + 1) * fast.renewMs + fast.leaseMs - fast.marginMs),
    `${renewals} renewals, at renewMs, 2 × renewMs, ... before the work ended at ${workMs} ms`,
  );
  assert.deepEqual(
    seen.filter((e) => e.event !== 'renew').map((e) => e.event),
    ['sighted', 'claim', 'released'],
  );
  const item = await readLock(d, 'job#1');
  assert.equal(item?.holder, undefined, 'released');
  assert.equal(item?.epoch, 1, 'the epoch stays');
});

test('an error in the work releases the lease and is rethrown as it came', async () => {
  const ns = await namespace();
  const d = deps(ns, 'A');
  const boom = new Error('the work failed');
  await assert.rejects(
    withLease(d, 'job#1', 'A', fast, async () => {
      throw boom;
    }),
    (err) => err === boom,
  );
  assert.equal((await readLock(d, 'job#1'))?.holder, undefined, 'the next holder need not wait the lease out');
  assert.ok(d.seen.some((e) => e.event === 'released'));
});

test("a release that fails is reported (release-failed), never thrown over the work's error", async () => {
  const ns = await namespace();
  // A client whose release (the update that removes the holder) fails for good; everything else goes through.
  const failingRelease = {
    send: (cmd: unknown) => {
      const update = cmd instanceof UpdateCommand ? cmd.input.UpdateExpression : undefined;
      if (update?.startsWith('REMOVE holder')) return Promise.reject(Object.assign(new Error('no release today'), { name: 'ValidationException' }));
      return ns.clients.ddb.send(cmd as UpdateCommand);
    },
  } as unknown as DynamoDBDocumentClient;
  const d = deps(ns, 'A', failingRelease);
  const boom = new Error('the work failed');
  await assert.rejects(
    withLease(d, 'job#1', 'A', fast, async () => {
      throw boom;
    }),
    (err) => err === boom,
  );
  const failed = d.seen.find((e) => e.event === 'release-failed');
  assert.ok(failed?.event === 'release-failed' && failed.error === 'ValidationException' && failed.token === 1, JSON.stringify(failed));
  assert.equal(await withLease(d, 'job#2', 'A', fast, async () => 'finished'), 'finished', 'nor over a finished work');
});

test('bad settings are a ConfigError before anything is written', async () => {
  const ns = await namespace();
  const d = deps(ns, 'A');
  await assert.rejects(
    withLease(d, 'job#1', 'A', { leaseMs: 1000, renewMs: 600 }, async () => 'never'),
    (err) => err instanceof ConfigError && /renewMs \(600\) must be at most leaseMs \/ 3/.test(err.message),
  );
  assert.equal(await readLock(d, 'job#1'), undefined, 'no lock item was written');
});

test('what withLease does not promise: a paused holder still believes it holds the lease; its stop time and the fence stop it', async () => {
  // Virtual time on the in-memory lock and job stores: B's takeover instant and A's stop time are exact.
  const clock = new VirtualClock();
  const lockStore = new MemoryLockStore();
  const jobs = new MemoryJobStore({ clock, jobs: 'jobs' });
  const lockDeps = (worker: string): LeaseDeps => ({ locks: lockStore, clock, events: new Events(worker, clock) });
  const fenceOf = () => fenceOn({ fences: jobs, table: 'jobs', key: { pk: 'job#1' }, clock });
  const lateWrite = { table: 'invoices', item: { pk: { S: 'inv#1' } } };
  let resumeA!: () => void;
  let aFrozen!: () => void;
  const aPaused = new Promise<void>((r) => (resumeA = r));
  const aHasRaised = new Promise<void>((r) => (aFrozen = r));
  let aStopAt: number | undefined;
  const a = withLease(lockDeps('A'), 'job#1', 'A', fast, async (lease) => {
    await fenceOf().raise(lease.token);
    await lease.stopHeartbeat(); // A freezes at 0: no renewal goes out (as under SIGSTOP; takeover.test.ts sends a real one)
    aStopAt = lease.stopAtMs;
    aFrozen();
    await aPaused;
    // A wakes up after B took over. Its own check stops it ...
    await assert.rejects(
      lease.act(() => 'late write'),
      StopTimePassedError,
    );
    // ... and a write that skips the check is refused by the fence, whatever A believes.
    return writeBatch(lease.fenced(fenceOf()), [lateWrite]).catch((err: unknown) => err);
  });
  await aHasRaised; // B starts once A holds the lease and has raised the fence
  let bClaimedAt: number | undefined;
  const b = withLease(lockDeps('B'), 'job#1', 'B', fast, async (lease) => {
    bClaimedAt = clock.monotonicMs();
    await fenceOf().raise(lease.token);
    return lease.token;
  });
  await clock.runUntilIdle(1_000); // bounded: a claimant that never claims fails here
  assert.equal(await b, 2, 'B claimed once A had stopped renewing for a full lease');
  // A's last rvn is its claim at 0; B saw it at 0 and claims at the first poll a full lease later.
  const poll = pollMsOf({ leaseMs: fast.leaseMs });
  assert.equal(bClaimedAt, Math.ceil(fast.leaseMs / poll) * poll, "B's claim: A's claim + a lease, on B's poll grid");
  assert.equal(aStopAt, fast.leaseMs - fast.marginMs, "A's stop time (its claim's sent_at + lease − margin) ...");
  assert.ok(aStopAt < bClaimedAt!, "... falls before B's claim");
  resumeA();
  const refused = await a;
  assert.ok(refused instanceof FencedOutError && refused.fence === 2 && refused.token === 1, String(refused));
  assert.deepEqual(jobs.dump('invoices'), [], "nothing of A's late write landed");
});
