/**
 * A duplicate start of a night while its holder is alive (EventBridge Scheduler delivers at least once): the second
 * execution watches the holder's rvn change through its whole claim budget. On a RUNNING night owned by that live
 * holder, that is a normal event: the waiter ends quietly, outcome `another-holder` (Succeed `AlreadyRunning`, exit 3),
 * not through the ClaimBudgetExhausted Fail state the failure alarm pages on. A holder alive on a night that is NOT
 * RUNNING (a lock held, no job row raised) is not a night being billed: that still fails loudly.
 *
 * The first holder lives in this process (the core Lease API). In the workflow tests it renews right after every
 * observation the waiter makes, so every observation sees a new rvn and the waiter can never claim, however slow the
 * machine: the budget runs out on a live holder by construction, not by timing. The direct engine's waiter runs on
 * virtual time and the in-memory stores, where the holder's own heartbeat does the same at exact instants.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { App, Duration, Stack } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { billingApp } from '../../apps/billing/app';
import { STACK_DEFAULTS, billingChunks, parseStackConfig } from '../../apps/billing/config';
import { Keys } from '../../apps/billing/keys';
import { DEFAULTS } from '../../apps/billing/settings';
import { systemClock, VirtualClock } from '../../lib/core/clock';
import { ConfigError } from '../../lib/core/errors';
import { Events, type FencepostEvent } from '../../lib/core/events';
import { raise as raiseFence } from '../../lib/core/fence';
import { runJob } from '../../lib/core/job';
import { claim, pollMsOf, resume, type Lease } from '../../lib/core/lease';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { Attr } from '../../lib/core/schema';
import { FENCED_JOB_DEFAULTS, FencedJob, type FencedJobProps } from '../../lib/constructs/index';
import { runWorkflowLocally } from '../../lib/local/workflow';
import { namespace, type Namespace } from '../support/stack';
import { startWorker } from '../support/worker';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { DynamoJobStore } from '../../lib/core/aws/job-store';

const DATE = '2026-10-02';
const CHUNKS = 4;
const settings = { leaseMs: 3000, renewMs: 1000, marginMs: 1000, claimBudget: 2, invoices: 2000, chunkSize: 500, clockOffsetAlarmMs: 250 };
const budgetSeconds = (settings.claimBudget * settings.leaseMs) / 1000;

/** The first holder: claims the night's lease in this process and, when `running`, raises the night's fences (RUNNING). */
async function firstHolder(ns: Namespace, running: boolean): Promise<Lease> {
  const events = new Events('first', systemClock);
  const config = { ...DEFAULTS, ...settings };
  const lease = await claim(
    { locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks), clock: systemClock, events },
    Keys.lock(DATE),
    'first',
    config,
  );
  if (running)
    await raiseFence({ jobs: new DynamoJobStore(ns.clients.ddb, ns.tables.jobs), clock: systemClock }, Keys.job(DATE), lease.token, 'first', CHUNKS);
  return lease;
}

/**
 * One renewal of the first holder's lease as the store sees it (holder and epoch unchanged, a new rvn). Taken up anew
 * each time (resume), so a gap longer than the stop time on a loaded machine cannot end it locally: the point is what
 * the waiter observes, a live holder, not this process's own stop-time rule.
 */
async function renewFirst(ns: Namespace, first: Lease): Promise<void> {
  await resume({ locks: new DynamoLockStore(ns.clients.ddb, ns.tables.locks), clock: systemClock }, first.key, first.holder, first.token, {
    ...DEFAULTS,
    ...settings,
  });
}

async function lockItem(ns: Namespace): Promise<Record<string, unknown>> {
  const out = await ns.clients.ddb.send(new GetCommand({ TableName: ns.tables.locks, Key: { [Attr.pk]: Keys.lock(DATE) }, ConsistentRead: true }));
  return out.Item ?? {};
}

/** The synthesized workflow as the second execution, the first holder renewing after each of its observations. */
async function secondExecution(ns: Namespace, first: Lease) {
  return runWorkflowLocally({
    app: billingApp,
    clients: ns.clients,
    endpoints: ns.endpoints,
    onCall: ns.onCall,
    tables: ns.tables,
    bucket: ns.bucket,
    name: 'second',
    input: { jobDate: DATE },
    settings,
    hooks: {
      // Before the Wait that follows this observation: the next one sees another rvn (the holder is alive).
      afterTask: async (state) => {
        if (state === 'Observe') await renewFirst(ns, first);
      },
    },
  });
}

test('workflow: a second execution of a RUNNING night whose holder stays alive past the claim budget ends quietly as AlreadyRunning', async () => {
  const ns = await namespace();
  const first = await firstHolder(ns, true);
  try {
    const r = await secondExecution(ns, first);
    assert.equal(r.status, 'SUCCEEDED', `ended ${r.status} at ${r.endState}: ${r.error}: ${r.cause}`);
    assert.equal(r.endState, 'AlreadyRunning');
    const waits = r.history.filter((h) => h.type === 'StateEntered' && h.state === 'WatchTheLease').length;
    assert.ok(waits >= budgetSeconds, `it waited the whole budget (${budgetSeconds} one-second polls) first: ${waits}`);
    assert.ok(!r.history.some((h) => h.state === 'Claim'), 'it never tried to claim a live lease');
    const lock = await lockItem(ns);
    assert.deepEqual([lock[Attr.holder], lock[Attr.epoch]], ['first', first.token], 'the first holder still holds the night, same token');
  } finally {
    await first.release();
  }
});

test('workflow: a holder alive through the budget on a night that is NOT RUNNING (no job row) still fails loudly', async () => {
  const ns = await namespace();
  const first = await firstHolder(ns, false);
  try {
    const r = await secondExecution(ns, first);
    assert.equal(r.status, 'FAILED');
    assert.equal(r.endState, 'ClaimBudgetExhausted');
  } finally {
    await first.release();
  }
});

test("direct engine: runJob against a RUNNING night's live holder returns outcome another-holder instead of throwing (virtual time)", async () => {
  // Virtual time on the in-memory stores: the first holder renews on its heartbeat, and the waiter gives up at the
  // exact instant its budget runs out.
  const clock = new VirtualClock();
  const store = new MemoryJobStore({ clock, jobs: 'jobs' });
  const lockStore = new MemoryLockStore();
  const config = { ...DEFAULTS, ...settings };
  const first = await claim({ locks: lockStore, clock }, Keys.lock(DATE), 'first', config); // at 0
  await raiseFence({ jobs: store, clock }, Keys.job(DATE), first.token, 'first', CHUNKS);
  first.startHeartbeat(); // alive: a new rvn every renewMs
  const poll = pollMsOf(config);
  const startAt = poll / 2; // the waiter's sightings never fall at the instant of a renewal
  await clock.advance(startAt);
  let endedAt: number | undefined;
  const heard: FencepostEvent[] = [];
  const events = new Events('second', clock).on((e) => void heard.push(e));
  const second = runJob(
    { locks: lockStore, jobs: store, clock, events },
    { keys: Keys.keys, date: DATE, chunks: CHUNKS, holder: 'second', config },
    async () => assert.fail('the second holder must not work on a chunk'),
  ).finally(() => (endedAt = clock.monotonicMs()));
  // The rvn never stays a lease, so every wait is one poll; the budget is spent at the first sighting past it.
  const expectedAt = startAt + Math.ceil((settings.claimBudget * settings.leaseMs) / poll) * poll;
  await clock.advance(expectedAt - 1 - clock.monotonicMs());
  assert.equal(endedAt, undefined, `still watching 1 ms before ${expectedAt}`);
  await clock.advance(1);
  const summary = await second;
  assert.equal(summary.outcome, 'another-holder');
  assert.equal(summary.token, undefined, 'it never claimed');
  assert.equal(endedAt, expectedAt, 'it gave up when its whole budget was spent, not before');
  assert.ok(summary.seconds >= budgetSeconds, `it waited the whole budget first: ${summary.seconds} s`);
  const lock = await lockStore.read(Keys.lock(DATE));
  assert.deepEqual([lock?.holder, lock?.epoch], ['first', first.token]);
  // The event names the live holder and the lock's epoch it holds, as `sighted` does: `token` is, in every event, the emitter's own.
  const [another] = heard.filter((e) => e.event === 'another-holder');
  assert.deepEqual(another && { jobId: another.jobId, holder: another.holder, epoch: another.epoch }, {
    jobId: Keys.job(DATE),
    holder: 'first',
    epoch: first.token,
  });
  assert.equal(another && 'token' in another, false, 'the waiter holds no token');
  await first.release();
  assert.equal(clock.timers, 0);
});

for (const engine of ['direct', 'stepfunctions']) {
  test(`fencepost run (${engine}): a duplicate run of a live night exits 3 with outcome another-holder in its summary`, async () => {
    const ns = await namespace();
    // A separate process cannot be hooked: here the first holder renews every 300 ms, ten times per 3 s lease, each
    // renewal taken up anew (renewFirst) so a slow tick on a loaded machine cannot end the holder locally.
    const first = await firstHolder(ns, true);
    const keepAlive = setInterval(() => void renewFirst(ns, first).catch(() => undefined), 300);
    try {
      const args = ['--date', DATE, '--invoices', '2000', '--chunk-size', '500', '--lease-ms', '3000', '--renew-ms', '1000', '--margin-ms', '1000'];
      const w = startWorker(ns, [...args, '--claim-budget', String(settings.claimBudget), '--engine', engine, '--worker', 'second', '--json']);
      const code = await w.exited;
      const summary = JSON.parse(w.other.at(-1)?.line ?? '{}') as { outcome?: string; token?: number };
      assert.equal(code, 3, w.stderr.join('\n'));
      assert.equal(summary.outcome, 'another-holder');
      assert.equal(summary.token, undefined);
    } finally {
      clearInterval(keepAlive);
      await first.release();
    }
  });
}

/** A FencedJob of the user's own (bundling skipped: the checks run at construction). */
function jobWith(props: Partial<FencedJobProps>): void {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'Long');
  const fn = new lambda.Function(stack, 'Chunk', {
    runtime: lambda.Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline('exports.handler = async () => ({});'),
    timeout: Duration.seconds(60),
  });
  new FencedJob(stack, 'Job', { name: 'long-night', chunkFunction: fn, chunks: 1, ...props });
}

test('FencedJob refuses at synth a claim budget shorter than its planned night, naming both numbers and the fix', () => {
  const night = { chunks: 200, chunkDuration: Duration.millis(2600), chunkConcurrency: 1 };
  const plannedS = (Math.ceil(night.chunks / night.chunkConcurrency) * night.chunkDuration.toMilliseconds()) / 1000;
  const budgetS = (FENCED_JOB_DEFAULTS.claimBudget * FENCED_JOB_DEFAULTS.leaseMs) / 1000;
  assert.ok(budgetS < plannedS, 'the case: the default budget is shorter than this night');
  const needed = Math.ceil((plannedS * 1000) / FENCED_JOB_DEFAULTS.leaseMs);
  assert.throws(
    () => jobWith(night),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError, String(err));
      const problem = err.problems.find((p) => p.startsWith('claimBudget'));
      assert.ok(problem, `a claimBudget problem among: ${err.problems.join(' | ')}`);
      assert.ok(problem.includes(`${budgetS} s`), `names the budget, ${budgetS} s: ${problem}`);
      assert.ok(problem.includes(`${plannedS} s`), `names the planned night, ${plannedS} s: ${problem}`);
      assert.ok(problem.includes(`claimBudget to at least ${needed}`), `says how to fix it: ${problem}`);
      return true;
    },
  );
  assert.doesNotThrow(() => jobWith({ ...night, claimBudget: needed }), 'a budget as long as the night is accepted');
  // Chunks run side by side shorten the night: 4 at a time is a quarter of it, within the default budget.
  assert.doesNotThrow(() => jobWith({ ...night, chunkConcurrency: 4 }));
});

test("billing's configuration refuses a night of 1,000,000 invoices on the default claim budget, naming both numbers", () => {
  const invoices = 1_000_000;
  const { chunks, chunkMs } = billingChunks({ invoices, chunkSize: STACK_DEFAULTS.chunkSize });
  const plannedS = (chunks * chunkMs) / 1000;
  const budgetS = (STACK_DEFAULTS.claimBudget * STACK_DEFAULTS.leaseMs) / 1000;
  assert.throws(
    () => parseStackConfig({ invoices }),
    (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, new RegExp(`claimBudget .*${budgetS} s.*${plannedS} s`));
      return true;
    },
  );
  const needed = Math.ceil((plannedS * 1000) / STACK_DEFAULTS.leaseMs);
  assert.doesNotThrow(() => parseStackConfig({ invoices, claimBudget: needed }));
});
