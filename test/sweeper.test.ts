/** The orphan sweeper on real DynamoDB Local (reference Part 6): two sightings a lease apart, no clock comparison. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import { runBilling, writeInvoices, type InvoiceWriteDeps } from '../apps/billing/night';
import { audit } from '../apps/billing/audit';
import { systemClock, VirtualClock } from '../core/clock';
import { MemoryJobStore } from '../core/memory/job-store';
import { MemoryLockStore } from '../core/memory/lock-store';
import { type LeaseConfig } from '../core/config';
import { DEFAULTS } from '../apps/billing/settings';
import { FencedOutError } from '../core/errors';
import { Events } from '../core/events';
import * as fence from '../core/fence';
import { chunkBatches } from '../apps/billing/invoices';
import { claim, type LeaseDeps } from '../core/lease';
import { Keys } from '../apps/billing/keys';
import { Sweeper, isOrphan, requeue, sightClaimed, type SweeperConfig } from '../core/sweeper';
import { namespace, type Namespace } from './support/stack';
import { noDynamo } from './support/no-dynamo';

const lease: LeaseConfig = { ...DEFAULTS, leaseMs: 600, renewMs: 150, marginMs: 150 };
const sweeperConfig: SweeperConfig = { leaseMs: 600, stormShare: 0.5, stormMinimum: 3, maxRequeuesPerSweep: 10 };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function deps(ns: Namespace, worker = 'W') {
  const events = new Events(worker, systemClock);
  const leaseDeps: LeaseDeps = { ddb: ns.clients.ddb, table: ns.tables.locks, clock: systemClock, events };
  const fenceDeps: InvoiceWriteDeps = { ddb: ns.clients.ddb, jobs: ns.tables.jobs, invoices: ns.tables.invoices, clock: systemClock };
  const sweeper = new Sweeper({ ddb: ns.clients.ddb, jobs: ns.tables.jobs, locks: ns.tables.locks, clock: systemClock }, sweeperConfig);
  return { leaseDeps, fenceDeps, sweeper };
}

/** A holder that claims and raises the fence for a night, optionally renewing. */
async function holder(ns: Namespace, date: string, name: string, renewing: boolean) {
  const { leaseDeps, fenceDeps } = deps(ns, name);
  const l = await claim(leaseDeps, Keys.lock(date), name, lease);
  await fence.raise(fenceDeps, Keys.job(date), l.token, name, 1);
  if (renewing) l.startHeartbeat();
  return l;
}

test("a dead holder's row is an orphan only on a second sighting a full lease later; the re-queue counts it and leaves it RUNNING in the index", async () => {
  const ns = await namespace();
  const { sweeper, fenceDeps } = deps(ns);
  await holder(ns, '2026-09-28', 'B', false); // B "dies": no renewals
  const first = await sweeper.sweep();
  assert.deepEqual([first.claimed, first.orphans, first.pending], [1, 0, 1], 'first sighting only notes the rvn');
  const early = await sweeper.sweep();
  assert.equal(early.orphans, 0, "not before a full lease has passed on the sweeper's own clock");
  await sleep(sweeperConfig.leaseMs + 50);
  const second = await sweeper.sweep();
  assert.deepEqual(second.requeued, [Keys.job('2026-09-28')]);
  const row = await fence.readJob(fenceDeps, Keys.job('2026-09-28'));
  assert.deepEqual([row?.state, row?.requeues], ['RUNNING', 1]);
  assert.notEqual(row?.claim_shard, undefined, 'the re-queue leaves the row in the sparse index, for the next sweeps');
  const next = await sweeper.sweep();
  assert.deepEqual([next.claimed, next.orphans, next.pending], [1, 0, 1], 'a re-queued row starts over: a first sighting');
});

test('a live holder is never swept: its renewals change the rvn between sightings; once it stops, it is swept a lease after the last one', async () => {
  // Virtual time on the in-memory stores: every sweep lands a full lease after the previous one, exactly.
  const clock = new VirtualClock();
  const store = new MemoryJobStore({ clock, jobs: 'jobs' });
  const lockStore = new MemoryLockStore();
  const sweeper = new Sweeper({ ddb: noDynamo, jobs: 'jobs', locks: 'locks', clock, store, lockStore }, sweeperConfig);
  const date = '2026-09-28';
  const a = await claim({ ddb: noDynamo, table: 'locks', store: lockStore, clock }, Keys.lock(date), 'A', lease);
  await fence.raise({ ddb: noDynamo, jobs: 'jobs', clock, store }, Keys.job(date), a.token, 'A', 1);
  a.startHeartbeat(); // A renews every renewMs, several times a lease
  const first = await sweeper.sweep();
  assert.deepEqual([first.claimed, first.pending, first.skippedAlive], [1, 1, 0], 'the first sighting only notes the rvn');
  const waitMs = lease.leaseMs; // what the lock item declares: the sweeper waits that long between sightings
  for (let i = 1; i <= 3; i++) {
    await clock.advance(waitMs); // a full lease: the row is due, and A renewed in between
    const r = await sweeper.sweep();
    assert.deepEqual(
      { requeued: r.requeued, orphans: r.orphans, skippedAlive: r.skippedAlive, pending: r.pending },
      { requeued: [], orphans: 0, skippedAlive: 1, pending: 1 },
      `sweep ${i}, a lease after the last: the rvn changed, so A is alive and seen afresh`,
    );
  }
  // The same row once A stops renewing: unchanged for a full lease since the last sighting is an orphan, not before.
  await a.stopHeartbeat();
  await clock.advance(waitMs - 1);
  const early = await sweeper.sweep();
  assert.deepEqual([early.orphans, early.pending, early.skippedAlive], [0, 1, 0], '1 ms short of a lease: not yet');
  await clock.advance(1);
  assert.deepEqual((await sweeper.sweep()).requeued, [Keys.job(date)], 'a full lease of the same rvn: re-queued');
  assert.equal(clock.timers, 0);
});

test("a holder caught between its claim and its fence raise is not swept (the old owner's row, the new holder's live lease)", async () => {
  const ns = await namespace();
  const { sweeper, leaseDeps, fenceDeps } = deps(ns);
  const date = '2026-09-28';
  await holder(ns, date, 'B', false); // B dies holding token 1; the row says RUNNING by 1
  await sweeper.sweep();
  const c = await claim(leaseDeps, Keys.lock(date), 'C', lease); // C waits out B's lease, claims token 2 ...
  c.startHeartbeat(); // ... and renews, but has not raised the fence yet
  await sleep(sweeperConfig.leaseMs + 50);
  await sweeper.sweep();
  await sleep(sweeperConfig.leaseMs + 50);
  const r = await sweeper.sweep();
  assert.deepEqual(r.requeued, [], 'the lock is alive, whoever holds it');
  assert.equal((await fence.readJob(fenceDeps, Keys.job(date)))?.state, 'RUNNING');
  await c.release();
});

test("a wrong re-queue cannot break safety: the paused holder's next write is refused by the fence", async () => {
  const ns = await namespace();
  const { sweeper, leaseDeps, fenceDeps } = deps(ns);
  const date = '2026-09-28';
  const a = await holder(ns, date, 'A', false); // A is alive but paused: it renews nothing
  await sweeper.sweep();
  await sleep(sweeperConfig.leaseMs + 50);
  assert.equal((await sweeper.sweep()).requeued.length, 1, "the sweeper re-queues A's job");
  const b = await claim(leaseDeps, Keys.lock(date), 'B', lease);
  await fence.raise(fenceDeps, Keys.job(date), b.token, 'B', 1);
  const [batch] = chunkBatches({ date, invoices: 99, chunkSize: 99, putsPerTransaction: 99 }, 0);
  await assert.rejects(writeInvoices(fenceDeps, Keys.job(date), a.token, batch), FencedOutError, 'A wakes and is fenced out');
  assert.equal((await writeInvoices(fenceDeps, Keys.job(date), b.token, batch)).recorded, 99, 'B records everything, once');
});

test('a re-queue racing a takeover does nothing: its condition names the owner and fence it saw', async () => {
  const ns = await namespace();
  const { leaseDeps, fenceDeps } = deps(ns);
  const date = '2026-09-28';
  await holder(ns, date, 'B', false);
  const { sightings } = await sightClaimed({ ddb: ns.clients.ddb, jobs: ns.tables.jobs, locks: ns.tables.locks, clock: systemClock }, sweeperConfig);
  const c = await claim(leaseDeps, Keys.lock(date), 'C', lease); // C takes over and raises in between
  await fence.raise(fenceDeps, Keys.job(date), c.token, 'C', 1);
  assert.equal(await requeue({ ddb: ns.clients.ddb, jobs: ns.tables.jobs }, sightings[0]), false);
  const row = await fence.readJob(fenceDeps, Keys.job(date));
  assert.equal(row?.state, 'RUNNING');
  assert.equal(row?.owner_token, c.token, "C's claim stands");
});

test('a storm (most claimed rows dead at once) re-queues nothing and says so', async () => {
  const ns = await namespace();
  const { sweeper, fenceDeps } = deps(ns);
  const dates = ['2026-09-01', '2026-09-02', '2026-09-03', '2026-09-04'];
  for (const d of dates) await holder(ns, d, `H${d}`, false);
  await sweeper.sweep();
  await sleep(sweeperConfig.leaseMs + 50);
  const r = await sweeper.sweep();
  assert.equal(r.storm, true);
  assert.equal(r.orphans, 4);
  assert.deepEqual(r.requeued, []);
  for (const d of dates) assert.equal((await fence.readJob(fenceDeps, Keys.job(d)))?.state, 'RUNNING');
});

test('the sweeper reads the sparse index only: items read grow with claimed rows, not with DONE rows', async () => {
  const ns = await namespace();
  const { sweeper } = deps(ns);
  for (let i = 0; i < 200; i += 25) {
    await ns.clients.ddb.send(
      new BatchWriteCommand({
        RequestItems: {
          [ns.tables.jobs]: Array.from({ length: 25 }, (_, j) => ({
            PutRequest: { Item: { pk: `billing#2020-${String(i + j).padStart(4, '0')}`, state: 'DONE', fence: 1, owner_token: 1 } },
          })),
        },
      }),
    );
  }
  await holder(ns, '2026-09-28', 'A', false);
  const r = await sweeper.sweep();
  assert.equal(r.claimed, 1);
  assert.equal(r.itemsRead, 2, 'one index row and its lock item, not 201 job rows');
});

test('chunk fences: the sweeper sees only the job row, its re-queue leaves the chunk fence items alone, and the next holder learns the progress from them', async () => {
  const ns = await namespace();
  const { sweeper, leaseDeps, fenceDeps } = deps(ns);
  const date = '2026-09-28';
  const job = Keys.job(date);
  const a = await claim(leaseDeps, Keys.lock(date), 'A', lease); // A raises 3 chunk fences, finishes chunk 1, dies
  await fence.raise(fenceDeps, job, a.token, 'A', 3);
  await fence.markChunkDone(fenceDeps, job, a.token, 1);
  const first = await sweeper.sweep();
  assert.equal(first.claimed, 1, 'three chunk fence items beside the row, none in the index');
  await sleep(sweeperConfig.leaseMs + 50);
  assert.deepEqual((await sweeper.sweep()).requeued, [job]);
  assert.deepEqual(
    (await fence.readChunkFences(fenceDeps, job, 3)).map((c) => [c?.fence, c?.done_by]),
    [
      [a.token, undefined],
      [a.token, a.token],
      [a.token, undefined],
    ],
  );
  const b = await claim(leaseDeps, Keys.lock(date), 'B', lease);
  const raised = await fence.raise(fenceDeps, job, b.token, 'B', 3);
  assert.deepEqual([raised.job?.state, raised.job?.requeues], ['RUNNING', 1], "B raises over the dead holder's re-queued row");
  assert.deepEqual([...raised.chunksDone], [1], 'B skips the chunk A finished');
  const [batch] = chunkBatches({ date, invoices: 99, chunkSize: 99, putsPerTransaction: 99 }, 0);
  await assert.rejects(
    writeInvoices(fenceDeps, Keys.chunkFence(job, 0), a.token, batch),
    FencedOutError,
    'A, if it was only paused, is refused on every chunk',
  );
  await b.release();
});

/** The night the crash-answer tests run: one chunk, so the dead holder's raise and the new run's agree. */
const smallNight = { ...lease, invoices: 99, chunkSize: 99, putsPerTransaction: 99 };

/** Two sightings a full lease apart, as one `fencepost sweep` without --every does. */
async function sweepTwice(sweeper: Sweeper, start: (jobId: string) => void) {
  await sweeper.sweep(start);
  await sleep(sweeperConfig.leaseMs + 50);
  return sweeper.sweep(start);
}

/** The night run a start asked for, then the audit. */
async function runAndAudit(ns: Namespace, date: string, worker: string) {
  const events = new Events(worker, systemClock);
  const billing = { ddb: ns.clients.ddb, s3: ns.clients.s3, tables: ns.tables, bucket: ns.bucket, clock: systemClock, events };
  const summary = await runBilling(billing, { date, worker, config: smallNight });
  const report = await audit({ ddb: ns.clients.ddb, s3: ns.clients.s3, tables: ns.tables, bucket: ns.bucket }, date, smallNight.invoices);
  return { summary, report };
}

test('crash answer: a sweeper that dies at its start (before or instead of it) strands nothing: a restarted sweeper starts the night, and it completes', async () => {
  const ns = await namespace();
  const { fenceDeps } = deps(ns);
  const date = '2026-09-28';
  await holder(ns, date, 'B', false); // B raised and died
  const dying = deps(ns).sweeper;
  const died = new Error('the sweeper died at its start');
  await assert.rejects(
    sweepTwice(dying, () => {
      throw died;
    }),
    (err) => err === died,
  );
  const starts: string[] = [];
  const restarted = deps(ns).sweeper; // a new `fencepost sweep` (a new process: no sightings in memory)
  const r = await sweepTwice(restarted, (jobId) => void starts.push(jobId));
  assert.deepEqual(starts, [Keys.job(date)], 'a restarted sweeper still finds the night in the sparse index and starts it');
  assert.deepEqual(r.requeued, [Keys.job(date)]);
  assert.deepEqual(
    [(await fence.readJob(fenceDeps, Keys.job(date)))?.state, (await fence.readJob(fenceDeps, Keys.job(date)))?.requeues],
    ['RUNNING', 1],
  );
  const { summary, report } = await runAndAudit(ns, date, 'requeued-run');
  assert.equal(summary.outcome, 'completed');
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('crash answer: a sweeper that dies after its start landed and before its re-queue record: the retried sweep starts it again (the same execution in AWS) and the night completes', async () => {
  const ns = await namespace();
  const { fenceDeps } = deps(ns);
  const date = '2026-09-28';
  const b = await holder(ns, date, 'B', false);
  const starts: string[] = [];
  const died = new Error('the sweeper died after its start');
  await assert.rejects(
    sweepTwice(deps(ns).sweeper, (jobId) => {
      starts.push(jobId);
      throw died;
    }),
    (err) => err === died,
  );
  const row = await fence.readJob(fenceDeps, Keys.job(date));
  assert.deepEqual([row?.state, row?.owner_token, row?.claim_shard !== undefined], ['RUNNING', b.token, true], 'still RUNNING, still in the index');
  // The retried sweep comes before the started run raised: it starts the night again and its record lands.
  const r = await sweepTwice(deps(ns).sweeper, (jobId) => void starts.push(jobId));
  assert.deepEqual(starts, [Keys.job(date), Keys.job(date)]);
  assert.deepEqual(r.requeued, [Keys.job(date)]);
  // One run: in AWS the second StartExecution (same name, same input, the first still open) is the same execution.
  // It raises over the re-queued row (the other order, its raise before the record, is 'a re-queue racing a takeover does nothing').
  const { summary, report } = await runAndAudit(ns, date, `requeue-${date}-f${b.token}`);
  assert.equal(summary.outcome, 'completed');
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('crash answer: a re-queued run that dies before its raise (it claimed the lease, then nothing) leaves the night findable: the next sweeps start it again, and it completes', async () => {
  const ns = await namespace();
  const { fenceDeps, leaseDeps } = deps(ns);
  const date = '2026-09-28';
  const b = await holder(ns, date, 'B', false); // B raised and died
  // The first re-queued run waits out B's lease, claims it (epoch + 1) and dies before raising the job row's fence.
  let diedHolding: number | undefined;
  const first = await sweepTwice(deps(ns).sweeper, async () => {
    diedHolding = (await claim(leaseDeps, Keys.lock(date), 'requeued-1', lease)).token;
  });
  assert.deepEqual(first.requeued, [Keys.job(date)]);
  assert.ok(diedHolding !== undefined && diedHolding > b.token);
  const starts: string[] = [];
  const later = deps(ns).sweeper; // the next `fencepost sweep` (or the next scheduled sweeper execution)
  const r = await sweepTwice(later, (jobId) => void starts.push(jobId));
  assert.deepEqual(starts, [Keys.job(date)], "the next sweeps find the night again (the dead run's lease unchanged for a full lease) and start it");
  assert.deepEqual(r.requeued, [Keys.job(date)]);
  const row = await fence.readJob(fenceDeps, Keys.job(date));
  assert.deepEqual(
    [row?.state, row?.owner_token, row?.claim_shard !== undefined, row?.requeues],
    ['RUNNING', b.token, true, 2],
    "a re-queue leaves the row RUNNING, the dead holder's, in the index; it only counts the re-queues",
  );
  const { summary, report } = await runAndAudit(ns, date, 'requeued-2');
  assert.equal(summary.outcome, 'completed');
  assert.ok(summary.token! > diedHolding!, 'the run that finished claimed above the one that died');
  assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
});

test('a re-queue is recorded once per sighting: a retried record loses, and the recorded row is no longer the sighted one', async () => {
  const ns = await namespace();
  const { fenceDeps } = deps(ns);
  const date = '2026-09-28';
  await holder(ns, date, 'B', false);
  const sweeperDeps = { ddb: ns.clients.ddb, jobs: ns.tables.jobs, locks: ns.tables.locks, clock: systemClock };
  const [seen] = (await sightClaimed(sweeperDeps, sweeperConfig)).sightings;
  assert.equal(await requeue(sweeperDeps, seen), true);
  assert.equal(await requeue(sweeperDeps, seen), false, 'a retried step that re-uses its sighting records nothing more');
  const [after] = (await sightClaimed(sweeperDeps, sweeperConfig)).sightings;
  assert.equal(after.requeues, seen.requeues + 1);
  assert.equal(isOrphan(seen, after), false, 'a retried step that sights again finds a changed row: it starts nothing');
  assert.equal(await requeue(sweeperDeps, after), true, 'a later sweep can record the next one');
  assert.equal((await fence.readJob(fenceDeps, Keys.job(date)))?.requeues, seen.requeues + 2);
});
