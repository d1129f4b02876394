/**
 * The orphan sweeper (reference Part 6): two sightings a lease apart, no clock comparison. Every test whose point is
 * an order or a lease's window (the sightings, a takeover, a re-queue, the crash answers) runs on virtual time and the
 * in-memory stores, each sweep at an instant computed from the declared lease; what the sparse index reads and the
 * re-queue's condition run on DynamoDB Local too.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BatchWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { writeInvoices, type InvoiceWriteDeps } from '../../apps/billing/night';
import { writeBatch } from '../../lib/core/batch';
import { systemClock, VirtualClock } from '../../lib/core/clock';
import { runJob, type RunSummary } from '../../lib/core/job';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { type LeaseConfig } from '../../lib/core/config';
import { DEFAULTS } from '../../apps/billing/settings';
import { FencedOutError } from '../../lib/core/errors';
import { Events, type FencepostEvent } from '../../lib/core/events';
import * as fence from '../../lib/core/fence';
import { chunkBatches } from '../../apps/billing/invoices';
import { claim, pollMsOf, type Lease, type LeaseDeps } from '../../lib/core/lease';
import { Keys } from '../../apps/billing/keys';
import { jobKeys } from '../../lib/core/job-keys';
import { Sweeper, isOrphan, requeue, sightClaimed, type SweeperConfig } from '../../lib/core/sweeper';
import { namespace, type Namespace } from '../support/stack';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoJobStore } from '../../lib/core/aws/job-store';

const lease: LeaseConfig = { ...DEFAULTS, leaseMs: 600, renewMs: 150, marginMs: 150 };
const sweeperConfig: SweeperConfig = { leaseMs: 600, stormShare: 0.5, stormMinimum: 3, maxRequeuesPerSweep: 10, maxRequeuesPerRun: 3 };

/** The sweeper and holders on DynamoDB Local, in real time. */
function deps(ns: Namespace, worker = 'W') {
  const events = new Events(worker, systemClock);
  const leaseDeps: LeaseDeps = { locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks), clock: systemClock, events };
  const fenceDeps: InvoiceWriteDeps = { jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs), invoices: ns.tables.invoices, clock: systemClock };
  const sweeper = new Sweeper(
    {
      job: Keys.keys.name,
      jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs),
      locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks),
      clock: systemClock,
    },
    sweeperConfig,
  );
  return { leaseDeps, fenceDeps, sweeper };
}

/** A holder on DynamoDB Local that claims and raises the fence for a night, and never renews (it died). */
async function holder(ns: Namespace, date: string, name: string) {
  const { leaseDeps, fenceDeps } = deps(ns, name);
  const l = await claim(leaseDeps, Keys.lock(date), name, lease);
  await fence.raise(fenceDeps, Keys.job(date), l.token, name, 1);
  return l;
}

/** The table the memory world's nights write their items to. */
const ITEMS = 'invoices';

/**
 * One world on virtual time and the in-memory job and lock stores: sweepers, holders and runs share the clock and the
 * stores. Store calls take no virtual time, so every sighting and claim happens at an instant the test computes.
 */
function memoryWorld() {
  const clock = new VirtualClock();
  const store = new MemoryJobStore({ clock, jobs: 'jobs' });
  const lockStore = new MemoryLockStore();
  const leaseDeps = (worker: string): LeaseDeps => ({ locks: lockStore, clock, events: new Events(worker, clock) });
  const fenceDeps: InvoiceWriteDeps = { jobs: store, invoices: ITEMS, clock };
  /** A new sweeper process: no sightings in memory. */
  const sweeper = () => new Sweeper({ job: Keys.keys.name, jobs: store, locks: lockStore, clock }, sweeperConfig);
  /** A claim that may wait out a lease: the clock runs until it lands (nothing else may keep timers set). */
  const claimNow = async (date: string, name: string): Promise<Lease> => {
    const claiming = claim(leaseDeps(name), Keys.lock(date), name, lease);
    await clock.runUntilIdle(1_000);
    return claiming;
  };
  /** A holder that claims and raises the fence for a night (`chunks` chunk fences), and renews only if told. */
  const holder = async (date: string, name: string, renewing: boolean, chunks = 1): Promise<Lease> => {
    const l = await claimNow(date, name);
    await fence.raise(fenceDeps, Keys.job(date), l.token, name, chunks);
    if (renewing) l.startHeartbeat();
    return l;
  };
  /** Two sightings a full lease (the one the lock item declares) apart, as one `fencepost sweep` without --every does. */
  const sweepTwice = async (s: Sweeper, start?: (jobId: string) => Promise<void> | void) => {
    await s.sweep(start);
    await clock.advance(lease.leaseMs);
    return s.sweep(start);
  };
  /**
   * A night run by the real engine (lib/core/job.ts runJob): one chunk of `items`, written in one fenced batch under its
   * chunk fence, the stop time checked before it. The clock runs until the run is over.
   */
  const runNight = async (date: string, worker: string, items = 99): Promise<RunSummary<number>> => {
    const running = runJob(
      { locks: lockStore, jobs: store, clock, events: new Events(worker, clock) },
      { keys: Keys.keys, date, chunks: 1, holder: worker, config: lease },
      async ({ lease: l, fence: f, chunk }) => {
        const puts = Array.from({ length: items }, (_, i) => ({
          table: ITEMS,
          item: { pk: { S: `item#${date}#${chunk}#${i}` }, token: { N: String(l.token) } },
        }));
        const r = await l.act(() => writeBatch(f, puts));
        return r.recorded.length;
      },
    );
    await clock.runUntilIdle(1_000);
    return running;
  };
  /** What a finished night must show: DONE, and every item recorded exactly once. */
  const assertDone = async (date: string, items = 99) => {
    assert.equal((await fence.readJob(fenceDeps, Keys.job(date)))?.state, 'DONE');
    const keys = store.dump(ITEMS).map((i) => String(i.pk));
    assert.equal(keys.length, items, 'every item recorded');
    assert.equal(new Set(keys).size, items, 'each once');
  };
  /**
   * A run of a poison night: the real engine claims (waiting out the last lease), raises the fence, and its chunk
   * fails every time (a missing grant, a bug): runJob releases the lease and the run ends failed.
   */
  const poisonRun = async (date: string, worker: string): Promise<void> => {
    const running = runJob(
      { locks: lockStore, jobs: store, clock, events: new Events(worker, clock) },
      { keys: Keys.keys, date, chunks: 1, holder: worker, config: lease },
      () => Promise.reject(new Error('AccessDeniedException: the chunk may not write its table')),
    ).then(
      () => assert.fail('a poison run never completes'),
      (err: Error) => err,
    );
    await clock.runUntilIdle(1_000);
    assert.match((await running).message, /AccessDeniedException/);
  };
  return { clock, store, lockStore, leaseDeps, fenceDeps, sweeper, claimNow, holder, sweepTwice, runNight, poisonRun, assertDone };
}

test("a dead holder's row is an orphan only on a second sighting a full lease later; the re-queue counts it and leaves it RUNNING in the index", async () => {
  const w = memoryWorld();
  const sweeper = w.sweeper();
  await w.holder('2026-09-28', 'B', false); // B "dies": no renewals
  const first = await sweeper.sweep();
  assert.deepEqual([first.claimed, first.orphans, first.pending], [1, 0, 1], 'first sighting only notes the rvn');
  await w.clock.advance(lease.leaseMs - 1);
  const early = await sweeper.sweep();
  assert.deepEqual([early.orphans, early.pending, early.requeued], [0, 1, []], "1 ms short of a full lease on the sweeper's own clock: not yet");
  await w.clock.advance(1);
  const second = await sweeper.sweep();
  assert.deepEqual(second.requeued, [Keys.job('2026-09-28')], 'a full lease of the same rvn: re-queued');
  const row = await fence.readJob(w.fenceDeps, Keys.job('2026-09-28'));
  assert.deepEqual([row?.state, row?.requeues], ['RUNNING', 1]);
  assert.notEqual(row?.claim_shard, undefined, 'the re-queue leaves the row in the sparse index, for the next sweeps');
  const next = await sweeper.sweep();
  assert.deepEqual([next.claimed, next.orphans, next.pending], [1, 0, 1], 'a re-queued row starts over: a first sighting');
});

test("two jobs on one job table: each job's sweeper sights and re-queues its own claimed rows, never the other job's", async () => {
  const w = memoryWorld();
  const date = '2026-09-28';
  const jobs = ['reminders', 'exports'].map(jobKeys);
  for (const k of jobs) {
    // Each job's holder claims its night and raises its row, then dies (no renewals).
    const claiming = claim(w.leaseDeps(k.name), k.lock(date), `${k.name}-holder`, lease);
    await w.clock.runUntilIdle(1_000);
    const l = await claiming;
    await fence.raise(w.fenceDeps, k.job(date), l.token, l.holder, 1);
  }
  for (const k of jobs) {
    const sweeper = new Sweeper({ jobs: w.store, locks: w.lockStore, clock: w.clock, job: k.name }, sweeperConfig);
    const report = await w.sweepTwice(sweeper);
    assert.deepEqual([report.claimed, report.requeued], [1, [k.job(date)]], `${k.name}'s sweeper: its one claimed row, re-queued`);
  }
});

test("the re-queued event names the dead holder's token as the row does (ownerToken), never as the sweeper's own token", async () => {
  const w = memoryWorld();
  const date = '2026-09-28';
  const dead = await w.holder(date, 'B', false);
  const heard: FencepostEvent[] = [];
  const events = new Events('sweeper', w.clock).on((e) => void heard.push(e));
  const sweeper = new Sweeper({ job: Keys.keys.name, jobs: w.store, locks: w.lockStore, clock: w.clock, events }, sweeperConfig);
  await w.sweepTwice(sweeper);
  const requeued = heard.filter((e) => e.event === 'requeued');
  assert.deepEqual(
    requeued.map(({ jobId, ownerToken, fence: f }) => ({ jobId, ownerToken, fence: f })),
    [{ jobId: Keys.job(date), ownerToken: dead.token, fence: dead.token }],
  );
  assert.equal('token' in requeued[0], false, "`token` is, in every other event, the emitter's own");
});

test('a live holder is never swept: its renewals change the rvn between sightings; once it stops, it is swept a lease after the last one', async () => {
  // Virtual time on the in-memory stores: every sweep lands a full lease after the previous one, exactly.
  const clock = new VirtualClock();
  const store = new MemoryJobStore({ clock, jobs: 'jobs' });
  const lockStore = new MemoryLockStore();
  const sweeper = new Sweeper({ job: Keys.keys.name, jobs: store, locks: lockStore, clock }, sweeperConfig);
  const date = '2026-09-28';
  const a = await claim({ locks: lockStore, clock }, Keys.lock(date), 'A', lease);
  await fence.raise({ jobs: store, clock }, Keys.job(date), a.token, 'A', 1);
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
  const w = memoryWorld();
  const sweeper = w.sweeper();
  const date = '2026-09-28';
  const b = await w.holder(date, 'B', false); // B dies holding token 1 at 0; the row says RUNNING by 1
  await sweeper.sweep(); // the first sighting, at 0
  const c = await w.claimNow(date, 'C'); // C waits out B's lease, claims token 2 ...
  const poll = pollMsOf(lease);
  assert.deepEqual([w.clock.monotonicMs(), c.token], [Math.ceil(lease.leaseMs / poll) * poll, b.token + 1], "C claims a lease after B's last rvn");
  c.startHeartbeat(); // ... and renews, but has not raised the fence yet
  // Sweeps a full lease apart, off C's renewal grid: each finds the rvn changed since the last one, never an orphan.
  for (const at of [lease.leaseMs + poll / 2, 2 * lease.leaseMs + poll / 2]) {
    await w.clock.advance(at - w.clock.monotonicMs());
    const r = await sweeper.sweep();
    assert.deepEqual(
      { requeued: r.requeued, orphans: r.orphans, skippedAlive: r.skippedAlive, pending: r.pending },
      { requeued: [], orphans: 0, skippedAlive: 1, pending: 1 },
      `the sweep at ${at} ms: the lock is alive, whoever holds it`,
    );
  }
  const row = await fence.readJob(w.fenceDeps, Keys.job(date));
  assert.deepEqual([row?.state, row?.owner_token, row?.requeues ?? 0], ['RUNNING', b.token, 0], "the old owner's row, untouched");
  await c.release();
  assert.equal(w.clock.timers, 0);
});

test("a wrong re-queue cannot break safety: the paused holder's next write is refused by the fence", async () => {
  const w = memoryWorld();
  const sweeper = w.sweeper();
  const date = '2026-09-28';
  const a = await w.holder(date, 'A', false); // A is alive but paused: it renews nothing
  assert.deepEqual((await w.sweepTwice(sweeper)).requeued, [Keys.job(date)], "the sweeper re-queues A's job a lease later");
  const b = await w.claimNow(date, 'B');
  await fence.raise(w.fenceDeps, Keys.job(date), b.token, 'B', 1);
  const [batch] = chunkBatches({ date, invoices: 99, chunkSize: 99, putsPerTransaction: 99 }, 0);
  await assert.rejects(
    writeInvoices(w.fenceDeps, Keys.job(date), a.token, batch),
    (err: unknown) => err instanceof FencedOutError && err.fence === b.token && err.token === a.token,
    'A wakes and is fenced out',
  );
  assert.equal(w.store.dump(ITEMS).length, 0, "nothing of A's write landed");
  assert.equal((await writeInvoices(w.fenceDeps, Keys.job(date), b.token, batch)).recorded, 99, 'B records everything, once');
});

test('a re-queue racing a takeover does nothing: its condition names the owner and fence it saw', async () => {
  const w = memoryWorld();
  const date = '2026-09-28';
  await w.holder(date, 'B', false);
  const sweeperDeps = { job: Keys.keys.name, jobs: w.store, locks: w.lockStore, clock: w.clock };
  const { sightings } = await sightClaimed(sweeperDeps, sweeperConfig);
  const c = await w.claimNow(date, 'C'); // C takes over and raises in between
  await fence.raise(w.fenceDeps, Keys.job(date), c.token, 'C', 1);
  assert.equal(await requeue(sweeperDeps, sightings[0]), false);
  const row = await fence.readJob(w.fenceDeps, Keys.job(date));
  assert.deepEqual([row?.state, row?.owner_token, row?.requeues ?? 0], ['RUNNING', c.token, 0], "C's claim stands");
});

test('a storm (most claimed rows dead at once) re-queues nothing and says so', async () => {
  const w = memoryWorld();
  const sweeper = w.sweeper();
  const dates = ['2026-09-01', '2026-09-02', '2026-09-03', '2026-09-04'];
  for (const d of dates) await w.holder(d, `H${d}`, false);
  const r = await w.sweepTwice(sweeper);
  assert.equal(r.storm, true);
  assert.equal(r.orphans, 4);
  assert.deepEqual(r.requeued, []);
  for (const d of dates) {
    const row = await fence.readJob(w.fenceDeps, Keys.job(d));
    assert.deepEqual([row?.state, row?.requeues ?? 0], ['RUNNING', 0]);
  }
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
  await holder(ns, '2026-09-28', 'A');
  const r = await sweeper.sweep();
  assert.equal(r.claimed, 1);
  assert.equal(r.itemsRead, 2, 'one index row and its lock item, not 201 job rows');
});

test('chunk fences: the sweeper sees only the job row, its re-queue leaves the chunk fence items alone, and the next holder learns the progress from them', async () => {
  const w = memoryWorld();
  const sweeper = w.sweeper();
  const date = '2026-09-28';
  const job = Keys.job(date);
  const a = await w.holder(date, 'A', false, 3); // A raises 3 chunk fences, finishes chunk 1, dies
  await fence.markChunkDone(w.fenceDeps, job, a.token, 1);
  const first = await sweeper.sweep();
  assert.equal(first.claimed, 1, 'three chunk fence items beside the row, none in the index');
  await w.clock.advance(lease.leaseMs);
  assert.deepEqual((await sweeper.sweep()).requeued, [job]);
  assert.deepEqual(
    (await fence.readChunkFences(w.fenceDeps, job, 3)).map((c) => [c?.fence, c?.done_by]),
    [
      [a.token, undefined],
      [a.token, a.token],
      [a.token, undefined],
    ],
  );
  const b = await w.claimNow(date, 'B');
  const raised = await fence.raise(w.fenceDeps, job, b.token, 'B', 3);
  assert.deepEqual([raised.job?.state, raised.job?.requeues], ['RUNNING', 1], "B raises over the dead holder's re-queued row");
  assert.deepEqual([...raised.chunksDone], [1], 'B skips the chunk A finished');
  const [batch] = chunkBatches({ date, invoices: 99, chunkSize: 99, putsPerTransaction: 99 }, 0);
  await assert.rejects(
    writeInvoices(w.fenceDeps, Keys.chunkFence(job, 0), a.token, batch),
    FencedOutError,
    'A, if it was only paused, is refused on every chunk',
  );
  await b.release();
});

test('crash answer: a sweeper that dies at its start (before or instead of it) strands nothing: a restarted sweeper starts the night, and it completes', async () => {
  const w = memoryWorld();
  const date = '2026-09-28';
  await w.holder(date, 'B', false); // B raised and died
  const died = new Error('the sweeper died at its start');
  await assert.rejects(
    w.sweepTwice(w.sweeper(), () => {
      throw died;
    }),
    (err) => err === died,
  );
  const starts: string[] = [];
  const restarted = w.sweeper(); // a new `fencepost sweep` (a new process: no sightings in memory)
  const r = await w.sweepTwice(restarted, (jobId) => void starts.push(jobId));
  assert.deepEqual(starts, [Keys.job(date)], 'a restarted sweeper still finds the night in the sparse index and starts it');
  assert.deepEqual(r.requeued, [Keys.job(date)]);
  const row = await fence.readJob(w.fenceDeps, Keys.job(date));
  assert.deepEqual([row?.state, row?.requeues], ['RUNNING', 1]);
  const summary = await w.runNight(date, 'requeued-run');
  assert.equal(summary.outcome, 'completed');
  await w.assertDone(date);
});

test('crash answer: a sweeper that dies after its start landed and before its re-queue record: the retried sweep starts it again (the same execution in AWS) and the night completes', async () => {
  const w = memoryWorld();
  const date = '2026-09-28';
  const b = await w.holder(date, 'B', false);
  const starts: string[] = [];
  const died = new Error('the sweeper died after its start');
  await assert.rejects(
    w.sweepTwice(w.sweeper(), (jobId) => {
      starts.push(jobId);
      throw died;
    }),
    (err) => err === died,
  );
  const row = await fence.readJob(w.fenceDeps, Keys.job(date));
  assert.deepEqual(
    [row?.state, row?.owner_token, row?.claim_shard !== undefined, row?.requeues ?? 0],
    ['RUNNING', b.token, true, 0],
    'still RUNNING, still in the index, no re-queue recorded',
  );
  // The retried sweep comes before the started run raised: it starts the night again and its record lands.
  const r = await w.sweepTwice(w.sweeper(), (jobId) => void starts.push(jobId));
  assert.deepEqual(starts, [Keys.job(date), Keys.job(date)]);
  assert.deepEqual(r.requeued, [Keys.job(date)]);
  // One run: in AWS the second StartExecution (same name, same input, the first still open) is the same execution.
  // It raises over the re-queued row (the other order, its raise before the record, is 'a re-queue racing a takeover does nothing').
  const summary = await w.runNight(date, `requeue-${date}-f${b.token}`);
  assert.equal(summary.outcome, 'completed');
  await w.assertDone(date);
});

test('crash answer: a re-queued run that dies before its raise (it claimed the lease, then nothing) leaves the night findable: the next sweeps start it again, and it completes', async () => {
  const w = memoryWorld();
  const date = '2026-09-28';
  const b = await w.holder(date, 'B', false); // B raised and died at 0
  // The first re-queued run waits out B's lease, claims it (epoch + 1) and dies before raising the job row's fence.
  let dying: Promise<Lease> | undefined;
  const first = await w.sweepTwice(w.sweeper(), () => void (dying = claim(w.leaseDeps('requeued-1'), Keys.lock(date), 'requeued-1', lease)));
  assert.deepEqual(first.requeued, [Keys.job(date)]);
  await w.clock.runUntilIdle(1_000);
  const diedHolding = (await dying!).token;
  assert.equal(diedHolding, b.token + 1, 'it waited out B and claimed above it');
  const starts: string[] = [];
  const later = w.sweeper(); // the next `fencepost sweep` (or the next scheduled sweeper execution)
  const r = await w.sweepTwice(later, (jobId) => void starts.push(jobId));
  assert.deepEqual(starts, [Keys.job(date)], "the next sweeps find the night again (the dead run's lease unchanged for a full lease) and start it");
  assert.deepEqual(r.requeued, [Keys.job(date)]);
  const row = await fence.readJob(w.fenceDeps, Keys.job(date));
  assert.deepEqual(
    [row?.state, row?.owner_token, row?.claim_shard !== undefined, row?.requeues],
    ['RUNNING', b.token, true, 2],
    "a re-queue leaves the row RUNNING, the dead holder's, in the index; it only counts the re-queues",
  );
  const summary = await w.runNight(date, 'requeued-2');
  assert.equal(summary.outcome, 'completed');
  assert.ok(summary.token! > diedHolding, 'the run that finished claimed above the one that died');
  await w.assertDone(date);
});

test('a re-queue is recorded once per sighting: a retried record loses, and the recorded row is no longer the sighted one', async () => {
  const ns = await namespace();
  const { fenceDeps } = deps(ns);
  const date = '2026-09-28';
  await holder(ns, date, 'B');
  const sweeperDeps = {
    job: Keys.keys.name,
    jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs),
    locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks),
    clock: systemClock,
  };
  const [seen] = (await sightClaimed(sweeperDeps, sweeperConfig)).sightings;
  assert.equal(await requeue(sweeperDeps, seen), true);
  assert.equal(await requeue(sweeperDeps, seen), false, 'a retried step that re-uses its sighting records nothing more');
  const [after] = (await sightClaimed(sweeperDeps, sweeperConfig)).sightings;
  assert.equal(after.requeues, seen.requeues + 1);
  assert.equal(isOrphan(seen, after), false, 'a retried step that sights again finds a changed row: it starts nothing');
  assert.equal(await requeue(sweeperDeps, after), true, 'a later sweep can record the next one');
  assert.equal((await fence.readJob(fenceDeps, Keys.job(date)))?.requeues, seen.requeues + 2);
});

/**
 * A poison run, swept the way the cloud does it: each sweep (its own execution, no sightings kept) starts the run,
 * and the run takes the night after the sweep recorded the re-queue; every run fails.
 */
async function sweepPoisonNight(w: ReturnType<typeof memoryWorld>, date: string, sweeps: number, events?: Events) {
  const starts: string[] = [];
  const reports = [];
  for (let i = 0; i < sweeps; i++) {
    const started: string[] = [];
    const sweeper = new Sweeper({ job: Keys.keys.name, jobs: w.store, locks: w.lockStore, clock: w.clock, events }, sweeperConfig);
    reports.push(await w.sweepTwice(sweeper, (jobId) => void started.push(jobId)));
    for (const jobId of started) {
      starts.push(jobId);
      await w.poisonRun(date, `requeued-${starts.length}`);
    }
  }
  return { starts, reports };
}

test('a poison night (every run of it fails) is re-queued exactly maxRequeuesPerRun times, then given up: no more starts, each sweep names it, the row stays RUNNING in the index', async () => {
  const w = memoryWorld();
  const date = '2026-09-28';
  await w.holder(date, 'B', false); // the night's first run raised and died
  const given: FencepostEvent[] = [];
  const events = new Events('sweeper', w.clock).on((e) => void (e.event === 'given-up' && given.push(e)));
  const sweeps = 3 * sweeperConfig.maxRequeuesPerRun;
  const { starts, reports } = await sweepPoisonNight(w, date, sweeps, events);
  assert.equal(starts.length, sweeperConfig.maxRequeuesPerRun, `re-queued exactly maxRequeuesPerRun times in ${sweeps} sweeps`);
  const row = await fence.readJob(w.fenceDeps, Keys.job(date));
  assert.deepEqual(
    [row?.state, row?.requeues, row?.claim_shard !== undefined],
    ['RUNNING', sweeperConfig.maxRequeuesPerRun, true],
    'left RUNNING in the sparse index, the count at the bound: findable, and invariant 3 holds',
  );
  const after = reports.slice(sweeperConfig.maxRequeuesPerRun);
  assert.ok(after.length > 0);
  for (const r of after) {
    assert.deepEqual([r.requeued, r.givenUp, r.storm], [[], [Keys.job(date)], false], 'every later sweep names the night it gave up on');
  }
  assert.equal(given.length, after.length, 'one given-up event per sweep that saw it');
  assert.deepEqual(
    [given[0].event === 'given-up' && given[0].jobId, given[0].event === 'given-up' && given[0].requeues],
    [Keys.job(date), sweeperConfig.maxRequeuesPerRun],
  );
});

test('crash answer: giving up writes nothing, so a sweeper that dies before it reports leaves the row as it was and the next sweep reports it again', async () => {
  const w = memoryWorld();
  const date = '2026-09-28';
  await w.holder(date, 'B', false);
  await sweepPoisonNight(w, date, sweeperConfig.maxRequeuesPerRun);
  const before = JSON.stringify(w.store.dump('jobs'));
  const died = new Error('the sweeper died between its decision to give up and its report');
  const dying = new Events('sweeper', w.clock).on((e) => {
    if (e.event === 'given-up') throw died;
  });
  await assert.rejects(sweepPoisonNight(w, date, 1, dying), (err) => err === died);
  assert.equal(JSON.stringify(w.store.dump('jobs')), before, 'the job table is as it was: giving up is a read, not a write');
  const { starts, reports } = await sweepPoisonNight(w, date, 1);
  assert.deepEqual([starts, reports[0].givenUp], [[], [Keys.job(date)]], 'the next sweep (a new process) gives up on it again and says so');
});

test('a night given up is re-armed by removing its requeues (the documented update-item): the sweeper re-queues it again, on DynamoDB', async () => {
  const ns = await namespace();
  const { fenceDeps, sweeper } = deps(ns);
  const date = '2026-09-28';
  await holder(ns, date, 'B'); // raised and died
  const sweeperDeps = {
    job: Keys.keys.name,
    jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs),
    locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks),
    clock: systemClock,
  };
  for (let i = 0; i < sweeperConfig.maxRequeuesPerRun; i++) {
    const [seen] = (await sightClaimed(sweeperDeps, sweeperConfig)).sightings;
    assert.equal(await requeue(sweeperDeps, seen), true, 'the conditional record of each re-queue');
  }
  const starts: string[] = [];
  const sweepTwice = async () => {
    await sweeper.sweep((jobId) => void starts.push(jobId));
    await systemClock.sleep(sweeperConfig.leaseMs);
    return sweeper.sweep((jobId) => void starts.push(jobId));
  };
  const gaveUp = await sweepTwice();
  assert.deepEqual([starts, gaveUp.givenUp], [[], [Keys.job(date)]], 'at the bound: given up, nothing started');
  // docs/DESIGN.md "A poison run": the re-arm, as a person types it with the AWS CLI.
  await ns.clients.ddb.send(
    new UpdateCommand({
      TableName: ns.tables.jobs,
      Key: { pk: Keys.job(date) },
      UpdateExpression: 'REMOVE requeues',
      ConditionExpression: '#s = :running',
      ExpressionAttributeNames: { '#s': 'state' },
      ExpressionAttributeValues: { ':running': 'RUNNING' },
    }),
  );
  const rearmed = await sweepTwice();
  assert.deepEqual([starts, rearmed.requeued, rearmed.givenUp], [[Keys.job(date)], [Keys.job(date)], []], 're-armed: re-queued again');
  assert.equal((await fence.readJob(fenceDeps, Keys.job(date)))?.requeues, 1);
});
