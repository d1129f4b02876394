/**
 * The gap between one holder's renewals (docs/DESIGN.md "The gap between renewals"): a RaiseFence of many chunks
 * renews while it raises, and stops at its stop time when it cannot; a raise that stays past its stop time through
 * every retry fails the execution loudly; a lease that cannot cover the workflow's worst gap is refused at synth.
 *
 * The raises run on the in-memory stores and a virtual clock on which every chunk fence write takes time, so the
 * case happens the same way on any machine; the checks read the stores' write history (when each chunk fence write
 * and each renewal was sent), not the code's verdict.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import { LEASE_DEFAULTS } from '../../lib/core/config';
import { MemoryJobStore } from '../../lib/testing/job-store';
import { MemoryLockStore } from '../../lib/testing/lock-store';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';
import { claim } from '../../lib/core/lease';
import type { Clients } from '../../lib/core/aws/clients';
import type { FenceItem } from '../../lib/core/store/jobs';
import { Env } from '../../lib/lambda/env';
import { raiseStep } from '../../lib/lambda/raise';
import { createRuntime, lazily } from '../../lib/lambda/runtime';
import { noDynamo } from '../support/no-dynamo';
import { resolveJoin } from '../../lib/local/workflow';
import { App, Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { FencedJob } from '../../lib/constructs/index';
import { LOCAL_RUN_CONTEXT, START_UP_MS } from '../../lib/constructs/renewal-gap';

const DATE = '2026-03-14';
/** Chunks of one night: at 50 ms a chunk fence write, 10 in flight, the raise takes 10 s, past the 8 s stop time. */
const CHUNKS = 2000;
const WRITE_MS = 50;

/** A job store on which every chunk fence write takes WRITE_MS of virtual time; it notes when each was sent. */
class SlowJobStore extends MemoryJobStore {
  readonly chunkWritesSentAt: number[] = [];
  constructor(private readonly clock: VirtualClock) {
    super({ clock, jobs: 'jobs' });
  }
  override async raiseFence(item: FenceItem, token: number, set?: Readonly<Record<string, unknown>>) {
    this.chunkWritesSentAt.push(this.clock.monotonicMs());
    await this.clock.sleep(WRITE_MS);
    return super.raiseFence(item, token, set);
  }
}

/** A lock store that notes when each renewal that landed was sent, and can refuse renewals as throttled. */
class NotedLockStore extends MemoryLockStore {
  readonly renewalsSentAt: number[] = [];
  throttled = false;
  constructor(private readonly clock: VirtualClock) {
    super();
  }
  override async renew(...args: Parameters<MemoryLockStore['renew']>) {
    const sentAt = this.clock.monotonicMs();
    if (this.throttled) throw Object.assign(new Error('injected throttle'), { name: 'ThrottlingException', $retryable: { throttling: true } });
    const out = await super.renew(...args);
    if (out.ok) this.renewalsSentAt.push(sentAt);
    return out;
  }
}

async function raiseOnVirtualTime(options: { throttleAfterResume?: boolean } = {}) {
  const clock = new VirtualClock();
  const jobs = new SlowJobStore(clock);
  const locks = new NotedLockStore(clock);
  const environment = {
    [Env.jobName]: 'digests',
    [Env.chunks]: String(CHUNKS),
    [Env.lockTable]: 'locks',
    [Env.jobTable]: 'jobs',
    [Env.bucket]: 'bucket',
    [Env.worker]: 'test',
  };
  const source = lazily(() =>
    createRuntime({
      environment,
      clients: { ddb: noDynamo } as unknown as Clients,
      stores: { locks, jobs, manifests: new MemoryManifestStore() },
      clock,
    }),
  );
  const rt = source();
  const lease = await claim(rt.deps, rt.job.lock(DATE), 'holder-a', rt.lease);
  // The raise in its own process (RaiseFence), as the workflow starts it: it renews first, then raises.
  if (options.throttleAfterResume) {
    const renew = locks.renew.bind(locks);
    let first = true;
    locks.renew = async (...args) => {
      const out = await renew(...args);
      if (first) [first, locks.throttled] = [false, true];
      return out;
    };
  }
  const outcome = raiseStep(source)({ jobDate: DATE, holder: 'holder-a', token: lease.token }).then(
    (value) => ({ value }),
    (error: Error) => ({ error }),
  );
  await clock.runUntilIdle(100_000);
  return { out: await outcome, jobs, locks, clock };
}

/** The stop time in force when `t` was sent: the latest renewal sent at or before it, plus lease - margin. */
function stopTimeAt(renewals: readonly number[], t: number): number {
  const last = Math.max(...renewals.filter((s) => s <= t));
  return last + LEASE_DEFAULTS.leaseMs - LEASE_DEFAULTS.marginMs;
}

test('a RaiseFence of 2,000 chunks whose writes take time renews as it goes: every chunk fence write is sent before its stop time, and the raise finishes', async () => {
  const { out, jobs, locks } = await raiseOnVirtualTime();
  const sentAt = jobs.chunkWritesSentAt;
  assert.equal(sentAt.length, CHUNKS, 'one write per chunk fence');
  const last = sentAt[sentAt.length - 1];
  assert.ok(last >= LEASE_DEFAULTS.leaseMs - LEASE_DEFAULTS.marginMs, `the raise outlasts one stop time (its last write at ${last} ms)`);
  const late = sentAt.filter((t) => t >= stopTimeAt(locks.renewalsSentAt, t));
  assert.deepEqual(
    late.slice(0, 3),
    [],
    `${late.length} chunk fence writes sent past the stop time (renewals at ${locks.renewalsSentAt.join(', ')} ms)`,
  );
  assert.ok(!('error' in out), `the raise finishes: ${'error' in out ? `${out.error.name}: ${out.error.message}` : ''}`);
  assert.equal((out as { value: { chunks: number[] } }).value.chunks.length, CHUNKS);
});

test('a RaiseFence whose renewals fail stops at its stop time: no chunk fence write is sent after it, and it throws StopTimePassedError', async () => {
  const { out, jobs, locks } = await raiseOnVirtualTime({ throttleAfterResume: true });
  assert.equal(locks.renewalsSentAt.length, 1, 'the raise’s first renewal landed, none after');
  const stopAt = locks.renewalsSentAt[0] + LEASE_DEFAULTS.leaseMs - LEASE_DEFAULTS.marginMs;
  const late = jobs.chunkWritesSentAt.filter((t) => t >= stopAt);
  assert.deepEqual(
    late.slice(0, 3),
    [],
    `${late.length} of ${jobs.chunkWritesSentAt.length} chunk fence writes sent at or after the stop time (${stopAt} ms)`,
  );
  assert.ok('error' in out, 'the raise does not return');
  assert.equal(out.error.name, 'StopTimePassedError');
});

// ─── The definition: where a raise past its retries goes ──────────────────────────────────────────────────────────

type State = { Type: string; Next?: string; Catch?: { ErrorEquals: string[]; Next: string }[]; Retry?: { ErrorEquals: string[] }[] };

function definitionOf(job: FencedJob, stack: Stack): { States: Record<string, State> } {
  const template = Template.fromStack(stack).toJSON() as { Resources: Record<string, { Properties: { DefinitionString: unknown } }> };
  const id = stack.getLogicalId(job.stateMachine.node.defaultChild as never);
  return JSON.parse(resolveJoin(template.Resources[id].Properties.DefinitionString)) as { States: Record<string, State> };
}

function smallJob(
  props: Partial<ConstructorParameters<typeof FencedJob>[2]> = {},
  context: Record<string, unknown> = {},
): { job: FencedJob; stack: Stack } {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [], ...context }, builtinCloudFormationValidation: false });
  const stack = new Stack(app, 'Digests');
  const fn = new lambda.Function(stack, 'DigestChunk', {
    runtime: lambda.Runtime.NODEJS_22_X,
    handler: 'index.handler',
    code: lambda.Code.fromInline('exports.handler = async (e) => ({ chunk: e.chunk });'),
    timeout: Duration.seconds(30),
  });
  const job = new FencedJob(stack, 'Digests', { name: 'digests', chunkFunction: fn, chunks: 3, ...props });
  return { job, stack };
}

/** The state an error thrown in `state` ends in: its retries spent, the first Catch that matches, followed to the end. */
function endOf(states: Record<string, State>, state: string, error: string): { retried: boolean; end: State & { name: string } } {
  const s = states[state];
  const matches = (names: string[]) => names.includes(error) || names.includes('States.ALL');
  const retried = (s.Retry ?? []).some((r) => matches(r.ErrorEquals));
  let name = s.Catch!.find((c) => matches(c.ErrorEquals))!.Next;
  // Through the release (a Task whose own Next is the end), to a terminal state.
  for (let hops = 0; states[name].Next !== undefined && hops < 10; hops++) name = states[name].Next!;
  return { retried, end: { ...states[name], name } };
}

test('a RaiseFence still past its stop time after every retry fails the execution (loud), not Succeed Lost', () => {
  const { job, stack } = smallJob();
  const { States } = definitionOf(job, stack);
  const stop = endOf(States, 'RaiseFence', 'StopTimePassedError');
  assert.equal(stop.retried, true, 'retried first: a pause, not another holder');
  assert.equal(stop.end.Type, 'Fail', `a StopTimePassedError past RaiseFence's retries ends in ${stop.end.name} (${stop.end.Type})`);
  // Another holder's lease or fence still ends quietly.
  for (const quiet of ['LeaseLostError', 'FencedOutError']) assert.equal(endOf(States, 'RaiseFence', quiet).end.Type, 'Succeed', quiet);
});

// ─── At synth: the lease covers the worst gap between renewals ───────────────────────────────────────────────────

/** The longest wait of one ASL retrier, by the States Language's rule (defaults 1 s, rate 2, 3 attempts). */
function aslLongestWaitMs(r: { IntervalSeconds?: number; BackoffRate?: number; MaxAttempts?: number; MaxDelaySeconds?: number }): number {
  const attempts = r.MaxAttempts ?? 3;
  if (attempts === 0) return 0;
  return Math.min((r.IntervalSeconds ?? 1) * (r.BackoffRate ?? 2) ** (attempts - 1), r.MaxDelaySeconds ?? Infinity) * 1000;
}

/** From the template: the longest retry wait of the tasks that act for the holder (RaiseFence, the chunk task, Complete). */
function holderRetryWaitMs(job: FencedJob, stack: Stack): number {
  const { States } = definitionOf(job, stack);
  const chunkStates = (States.Chunks as unknown as { ItemProcessor: { States: Record<string, State> } }).ItemProcessor.States;
  const tasks = [States.RaiseFence, States.Complete, ...Object.values(chunkStates).filter((s) => s.Type === 'Task')];
  return Math.max(...tasks.flatMap((t) => (t.Retry ?? []).map((r) => aslLongestWaitMs(r as never))));
}

function refusal(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as Error).message;
  }
  return '(not refused)';
}

test('a 3 s lease is refused at synth, naming the props and the worst gap computed from the Retry blocks the workflow generates', () => {
  const reference = smallJob();
  const waitMs = holderRetryWaitMs(reference.job, reference.stack);
  const renewMs = 1000;
  const marginMs = 1000; // above the clock-offset alarm's default 500 ms
  const worst = renewMs + waitMs + START_UP_MS.lambda;
  const message = refusal(() =>
    smallJob({ leaseDuration: Duration.seconds(3), renewInterval: Duration.millis(renewMs), margin: Duration.millis(marginMs) }),
  );
  assert.match(message, /leaseDuration \(3000 ms\) - margin \(1000 ms\) = 2000 ms does not cover the worst gap/);
  assert.ok(message.includes(`${worst} ms = renewInterval ${renewMs} ms`), `the worst gap ${worst} ms in: ${message}`);
  assert.ok(message.includes(`${waitMs} ms (the longest retry wait`), message);
  // The smallest lease the message asks for is accepted; one ms less is not.
  const asked = Number(/at least (\d+) ms/.exec(message)?.[1]);
  assert.equal(asked, worst + marginMs);
  assert.doesNotThrow(() =>
    smallJob({ leaseDuration: Duration.millis(asked), renewInterval: Duration.millis(renewMs), margin: Duration.millis(marginMs) }),
  );
  assert.match(
    refusal(() =>
      smallJob({ leaseDuration: Duration.millis(asked - 1), renewInterval: Duration.millis(renewMs), margin: Duration.millis(marginMs) }),
    ),
    /does not cover the worst gap/,
  );
  // The local runner's synth (no cold start, no Map Run; short test leases on purpose) is not refused.
  const local = { [LOCAL_RUN_CONTEXT]: true };
  assert.doesNotThrow(() =>
    smallJob({ leaseDuration: Duration.seconds(3), renewInterval: Duration.millis(renewMs), margin: Duration.millis(marginMs) }, local),
  );
});

test("the holder's tasks wait at most one lease's allowance between retries: the defaults cover the worst gap, the Distributed Map's start-up included when it runs the chunks", () => {
  const { job, stack } = smallJob();
  const waitMs = holderRetryWaitMs(job, stack);
  const { leaseMs, renewMs, marginMs } = job.settings;
  assert.ok(
    renewMs + waitMs + START_UP_MS.lambda <= leaseMs - marginMs,
    `inline: ${renewMs} + ${waitMs} + ${START_UP_MS.lambda} ms within ${leaseMs - marginMs} ms`,
  );
  // Distributed (every night here: above 0 chunks), the Map Run's start-up sits in the gap before the first chunk.
  const distributed = renewMs + waitMs + START_UP_MS.lambda + START_UP_MS.mapRun;
  const message = refusal(() => smallJob({ distributedMapAboveChunks: 0 }));
  assert.ok(
    distributed > leaseMs - marginMs ? message.includes(`${distributed} ms`) && message.includes('Distributed Map') : message === '(not refused)',
    message,
  );
});
