/**
 * The faults AWS really has (issue 27), in the workflow world (verify/explore/workflow-world.ts) and its Step Functions
 * interpreter (lib/testing/workflow/sfn.ts): each placed, so it happens on every seed, with what the real code does with it.
 * - Lambda errors as Step Functions reports them (Lambda.Unknown for a sandbox that died, Sandbox.Timedout for a
 *   function past its timeout, Lambda.ServiceException): https://docs.aws.amazon.com/step-functions/latest/dg/bp-lambda-serviceexception.html
 * - Retry and Catch, States.TaskFailed: https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
 * - A failed inline Map iteration stops the others: https://docs.aws.amazon.com/step-functions/latest/dg/state-map-inline.html
 * - Scheduler's retries of a start that failed: https://docs.aws.amazon.com/scheduler/latest/APIReference/API_RetryPolicy.html
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import { interpreter, matches, StateError, type MachineDef, type StateDef } from '../../lib/testing/workflow/sfn';
import { runWorkflowSchedule, type WorkflowPlaced } from '../../verify/explore/workflow-world';
import type { PlacedFault } from '../../lib/testing/scheduler';

const SEEDS = [1, 2, 3];
const nightA = (state: string) => new RegExp(`^exec-a/${state}#`);
const sweep1 = (state: string) => new RegExp(`^sweep-1/${state}#`);
/** The lines of the trace an actor wrote after line `from`. */
const linesOf = (trace: readonly string[], actor: string, from = 0) => trace.slice(from).filter((l) => l.includes(` ${actor} `));
const at = (line: string) => Number(line.split(' ')[0]);

// ---------------------------------------------------------------------------------------------------------------
// The interpreter.

test('States.TaskFailed matches every error but States.Timeout, States.ALL every one; neither matches States.Runtime', () => {
  assert.ok(matches(['States.TaskFailed'], 'Lambda.Unknown'));
  assert.ok(matches(['States.TaskFailed'], 'Sandbox.Timedout'));
  assert.ok(!matches(['States.TaskFailed'], 'States.Timeout'));
  assert.ok(matches(['States.ALL'], 'States.Timeout'));
  assert.ok(!matches(['States.ALL'], 'States.Runtime'));
  assert.ok(!matches(['States.TaskFailed', 'States.ALL'], 'States.DataLimitExceeded'));
  assert.ok(matches(['States.Runtime'], 'States.Runtime'), 'named, it matches');
  assert.ok(!matches(['Lambda.ServiceException'], 'Lambda.Unknown'));
});

test('a failed Map iteration fails the Map at once and stops the others: no retry, no next state, their answers discarded', async () => {
  const clock = new VirtualClock();
  const attempts: string[] = [];
  const log: string[] = [];
  // Item 1 fails at 1 s; items 0 and 2 answer at 5 s (0 with an error its Retry names, 2 with a result); item 3 waits
  // for a lane. The Map's Catch moves on at 1 s.
  const sfn = interpreter<undefined>({
    attempt: async (_exec, state, _st: StateDef, payload) => {
      const item = (payload as { item: number }).item;
      attempts.push(`${state} ${item} at ${clock.monotonicMs()}`);
      await clock.sleep(item === 1 ? 1_000 : 5_000);
      if (item === 1) throw new StateError('Boom', 'iteration 1');
      if (item === 0) throw new StateError('Again', 'retry me');
      return { item };
    },
    sleep: (ms) => clock.sleep(ms),
    random: () => 0.5,
    log: (line) => log.push(`${clock.monotonicMs()} ${line}`),
  });
  const machine: MachineDef = {
    StartAt: 'Chunks',
    States: {
      Chunks: {
        Type: 'Map',
        ItemsPath: '$.items',
        MaxConcurrency: 3,
        ItemSelector: { 'item.$': '$$.Map.Item.Value' },
        ItemProcessor: {
          StartAt: 'Work',
          States: {
            Work: { Type: 'Task', Resource: 'fn', Next: 'After', Retry: [{ ErrorEquals: ['Again'] }] },
            After: { Type: 'Task', Resource: 'fn', End: true },
          },
        },
        Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'Failed' }],
        Next: 'Done',
      },
      Failed: { Type: 'Fail', Error: 'MapFailed' },
      Done: { Type: 'Succeed' },
    },
  };
  const out = sfn.run({ name: 'run-1' }, machine, { items: [0, 1, 2, 3] }, { Execution: { Name: 'run-1', Input: {} } }, undefined);
  let endedAt: number | undefined;
  void out.then(() => (endedAt = clock.monotonicMs()));
  await clock.runUntilIdle();
  assert.deepEqual(await out, {
    end: 'Failed',
    failed: 'MapFailed',
    output: { items: [0, 1, 2, 3], error: { Error: 'Boom', Cause: 'iteration 1' } },
  });
  assert.equal(endedAt, 1_000, 'the Map fails when its iteration does, without waiting for the others');
  assert.deepEqual(attempts, ['Work 0 at 0', 'Work 1 at 0', 'Work 2 at 0'], 'no retry of item 0, no After for item 2, no item 3');
  assert.ok(log.includes('1000 run-1 Chunks fails on iteration 1 (Boom): the others stop'), log.join('\n'));
  assert.equal(log.filter((l) => / run-1 Work answered after its Map failed: discarded$/.test(l)).length, 2, log.join('\n'));
});

// ---------------------------------------------------------------------------------------------------------------
// Lambda errors: the sandbox died (Lambda.Unknown), the function ran past its timeout (Sandbox.Timedout), Lambda's 500.

test('Lambda.Unknown: a chunk whose sandbox dies right after its first batch landed never runs again; the sweeper re-queues the night', async () => {
  const placed: WorkflowPlaced = { faults: [], invoke: [{ execution: 'exec-a', state: 'RunChunk', kind: 'unknown', afterStep: 2 }] };
  for (const seed of SEEDS) {
    const r = await runWorkflowSchedule(seed, undefined, placed);
    const killed = r.trace.findIndex((l) =>
      / exec-a\/RunChunk#\d+ KILLED by Lambda \(the sandbox died after its call 2 landed\): Lambda\.Unknown$/.test(l),
    );
    assert.ok(killed >= 0, r.trace.join('\n'));
    const chunk = / (exec-a\/RunChunk#\d+) KILLED/.exec(r.trace[killed])![1];
    assert.match(r.trace[killed - 1], new RegExp(`${chunk} batch accepted token 1 `), 'its batch (its second call) landed');
    // It would renew every 3 s while it runs: killed, it never calls again and its heartbeat never fires.
    assert.deepEqual(linesOf(r.trace, chunk, killed + 1), [], 'nothing of the killed process runs again');
    assert.match(r.trace[killed + 1], / exec-a Chunks fails on iteration 0 \(Lambda\.Unknown\): the others stop$/);
    assert.match(r.trace[killed + 2], / exec-a Chunks caught Lambda\.Unknown → Failed$/, 'the chunk task does not retry it; nothing released');
    assert.ok(
      r.trace.some((l) => / requeue-\S+ claimed epoch 2$/.test(l)),
      "the sweeper's re-queued run takes the night",
    );
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
  }
});

test('Lambda.Unknown before the raise: the definition retries it; without that Retry the night is stranded, and the checks say so', async () => {
  const placed: WorkflowPlaced = { faults: [], invoke: [{ execution: 'exec-a', state: 'Observe', kind: 'unknown', afterStep: 1 }] };
  for (const seed of SEEDS) {
    const r = await runWorkflowSchedule(seed, undefined, placed);
    const killed = r.trace.findIndex((l) => / exec-a\/Observe#\d+ KILLED by Lambda .*: Lambda\.Unknown$/.test(l));
    assert.ok(killed >= 0, r.trace.join('\n'));
    assert.match(r.trace[killed + 1], / exec-a Observe retries Lambda\.Unknown in \d+ ms$/);
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
    const broken = await runWorkflowSchedule(seed, undefined, { ...placed, unretried: 'Lambda.Unknown' });
    assert.ok(broken.trace.some((l) => / exec-a ends FAILED: Lambda\.Unknown$/.test(l)));
    assert.deepEqual(broken.violations, ['the run is never raised at 0 ms, never DONE (faults ended at 0 ms)']);
  }
});

test("Sandbox.Timedout: a chunk hung at its batch renews on until Lambda kills it at the function's 60 s, before its task's 90 s", async () => {
  const placed: WorkflowPlaced = {
    faults: [],
    invoke: [{ execution: 'exec-a', state: 'RunChunk', kind: 'sandbox-timedout', afterStep: 2, applied: false }],
  };
  for (const seed of SEEDS) {
    const r = await runWorkflowSchedule(seed, undefined, placed);
    const hung = r.trace.findIndex((l) => / exec-a\/RunChunk#\d+ HUNG at its call 2, not sent$/.test(l));
    assert.ok(hung >= 0, r.trace.join('\n'));
    const chunk = / (exec-a\/RunChunk#\d+) HUNG/.exec(r.trace[hung])![1];
    const started = at(r.trace.find((l) => l.endsWith(` ${chunk} renew`))!);
    const killed = r.trace.findIndex((l) => l.includes(` ${chunk} KILLED by Lambda (it ran past its function's 60 s timeout): Sandbox.Timedout`));
    assert.ok(killed > hung, r.trace.join('\n'));
    assert.equal(at(r.trace[killed]), started + 60_000, "killed at the function's timeout, measured from its start");
    const renewals = linesOf(r.trace.slice(0, killed), chunk, hung).filter((l) => l.endsWith(' renew'));
    assert.ok(renewals.length >= 15, `its heartbeat renews on while it hangs (${renewals.length} renewals)`);
    assert.deepEqual(linesOf(r.trace, chunk, killed + 1), [], 'nothing of it runs after the kill');
    assert.ok(!r.trace.some((l) => l.includes(`${chunk} task TIMEOUT`)), "the task's TimeoutSeconds (90 s) never came");
    assert.ok(!r.trace.some((l) => l.includes(`${chunk} batch `)), 'the hung batch never reached the store');
    assert.match(r.trace[killed + 1], / exec-a Chunks fails on iteration 0 \(Sandbox\.Timedout\): the others stop$/);
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
  }
});

test('Sandbox.Timedout before the raise: an Observe hung after its read is killed at 20 s and retried; without that Retry the night is stranded', async () => {
  const placed: WorkflowPlaced = { faults: [], invoke: [{ execution: 'exec-a', state: 'Observe', kind: 'sandbox-timedout', afterStep: 1 }] };
  for (const seed of SEEDS) {
    const r = await runWorkflowSchedule(seed, undefined, placed);
    const killed = r.trace.findIndex((l) => / exec-a\/Observe#\d+ KILLED by Lambda .*: Sandbox\.Timedout$/.test(l));
    assert.ok(killed >= 0, r.trace.join('\n'));
    assert.ok(r.trace.some((l) => / exec-a\/Observe#\d+ HUNG after its call 1 landed$/.test(l)));
    assert.equal(at(r.trace[killed]), 20_000, "Observe's function timeout");
    assert.match(r.trace[killed + 1], / exec-a Observe retries Sandbox\.Timedout in \d+ ms$/);
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
    const broken = await runWorkflowSchedule(seed, undefined, { ...placed, unretried: 'Sandbox.Timedout' });
    assert.ok(
      broken.violations.some((v) => v.startsWith('the run is never raised')),
      JSON.stringify(broken.violations),
    );
  }
});

// Lambda's transient 500s, as Step Functions names them (bp-lambda-serviceexception.html): each either refused
// before the handler ran or answered while the handler runs on; the definitions retry all three.
for (const [kind, error] of [
  ['service-error', 'Lambda.ServiceException'],
  ['aws-lambda-exception', 'Lambda.AWSLambdaException'],
  ['sdk-client-exception', 'Lambda.SdkClientException'],
] as const) {
  test(`${error}: a Claim answered 500 runs on beside its retry, and the retry finds its own claim: one epoch`, async () => {
    const placed: WorkflowPlaced = { faults: [], invoke: [{ execution: 'exec-a', state: 'Claim', kind, ran: true }] };
    const escaped = error.replace('.', '\\.');
    for (const seed of SEEDS) {
      const r = await runWorkflowSchedule(seed, undefined, placed);
      const at = r.trace.findIndex((l) => new RegExp(` exec-a/Claim#\\d+ invoke ${escaped}; its Lambda runs on$`).test(l));
      assert.ok(at >= 0, r.trace.join('\n'));
      const first = / (exec-a\/Claim#\d+) /.exec(r.trace[at])![1];
      assert.match(r.trace[at + 1], new RegExp(` exec-a Claim retries ${escaped} in \\d+ ms$`));
      assert.ok(
        r.trace.slice(at).some((l) => l.endsWith(` ${first} claim`)),
        'the first invocation claims after its task was answered',
      );
      const claims = r.trace.filter((l) => / exec-a\/Claim#\d+ claim$/.test(l));
      assert.equal(claims.length, 2, 'both invocations claim');
      assert.deepEqual(
        r.trace.filter((l) => / claimed epoch \d+$/.test(l)).map((l) => l.split(' ').slice(1).join(' ')),
        ['exec-a claimed epoch 1'],
        'one epoch: the retry met the claim with its own rvn',
      );
      assert.deepEqual(r.violations, []);
      assert.equal(r.state, 'DONE');
      const refused = await runWorkflowSchedule(seed, undefined, { faults: [], invoke: [{ ...placed.invoke![0], ran: false }] });
      const before = refused.trace.findIndex((l) => new RegExp(` exec-a/Claim#\\d+ invoke ${escaped} before the handler ran$`).test(l));
      assert.ok(before >= 0, refused.trace.join('\n'));
      assert.match(refused.trace[before + 1], new RegExp(` exec-a Claim retries ${escaped} in \\d+ ms$`));
      assert.deepEqual(refused.violations, []);
      assert.equal(refused.state, 'DONE');
      // Without the Retry that names it, the same error ends the run before its claim: the run is never raised.
      const unretried = await runWorkflowSchedule(seed, undefined, { faults: [], invoke: [{ ...placed.invoke![0], ran: false }], unretried: error });
      assert.ok(
        unretried.violations.some((v) => v.startsWith('the run is never raised')),
        JSON.stringify(unretried.violations),
      );
    }
  });
}

// ---------------------------------------------------------------------------------------------------------------
// Step Functions' own errors at StartExecution: the sweeper's re-queue and the nightly trigger.

// A chunk's write paused 200 s past its task's timeout orphans the night; sweep-1 re-queues it.
const ZOMBIE_WRITE: PlacedFault = { actor: nightA('RunChunk'), method: 'recordBatch', kind: 'pause', ms: 200_000 };

// StartExecution refused with ExecutionLimitExceeded (HTTP 400: the account's open executions at their quota,
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html): not a transient error, so
// the sweep's step is not retried and the sweep fails; the next sweep sights the row afresh and re-queues it.
test("the sweeper's StartExecution refused with ExecutionLimitExceeded: that sweep fails, the next one re-queues the night", async () => {
  for (const seed of SEEDS) {
    const r = await runWorkflowSchedule(seed, undefined, { faults: [ZOMBIE_WRITE], startLimited: [{ actor: sweep1('VerifyAndRequeue') }] });
    const refused = r.trace.findIndex((l) => / sweep-1\/VerifyAndRequeue#\d+ StartExecution requeue-\S+ refused: ExecutionLimitExceeded$/.test(l));
    assert.ok(refused >= 0, r.trace.join('\n'));
    assert.match(r.trace[refused + 1], / sweep-1 ends FAILED: ExecutionLimitExceeded$/);
    assert.ok(!r.trace.some((l) => / sweep-1\/\S+ requeue$/.test(l)), 'sweep-1 records no re-queue');
    const started = r.trace.findIndex((l) => / sweep-2\/VerifyAndRequeue#\d+ starts execution requeue-\S+$/.test(l));
    assert.ok(started > refused, `sweep-2 re-queues the night:\n${r.trace.join('\n')}`);
    assert.ok(r.trace.some((l) => / requeue-\S+ claimed epoch 2$/.test(l)));
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
  }
});

test("the sweeper's StartExecution answered 500 (applied) or throttled: the step is retried, and one run per name takes the night", async () => {
  for (const seed of SEEDS) {
    const applied = await runWorkflowSchedule(seed, undefined, {
      faults: [ZOMBIE_WRITE, { actor: sweep1('VerifyAndRequeue'), method: 'send', kind: 'server-error', applied: true, status: 500 }],
    });
    const error = applied.trace.findIndex((l) => /\/VerifyAndRequeue#\d+ send SERVER-ERROR 500 \(applied\) /.test(l));
    assert.ok(error >= 0, applied.trace.join('\n'));
    const name = / starts execution (\S+)$/.exec(applied.trace[error + 1])![1];
    assert.match(applied.trace[error + 2], /\/VerifyAndRequeue#\d+ StartExecution answered InternalFailure \(500\)$/, "Step Functions' name");
    assert.match(applied.trace[error + 3], / sweep-1 VerifyAndRequeue retries TransientStoreError in \d+ ms$/, 'the handler takes it as transient');
    assert.ok(applied.trace.some((l) => l.endsWith(`StartExecution ${name}: the same execution (open, same input)`)));
    assert.equal(applied.trace.filter((l) => l.endsWith(`starts execution ${name}`)).length, 1);

    const throttled = await runWorkflowSchedule(seed, undefined, {
      faults: [ZOMBIE_WRITE, { actor: sweep1('VerifyAndRequeue'), method: 'send', kind: 'throttle' }],
    });
    const at429 = throttled.trace.findIndex((l) => /\/VerifyAndRequeue#\d+ send THROTTLE /.test(l));
    assert.ok(at429 >= 0, throttled.trace.join('\n'));
    assert.match(throttled.trace[at429 + 1], / sweep-1 VerifyAndRequeue retries TransientStoreError in \d+ ms$/);
    assert.ok(
      throttled.trace.slice(at429).some((l) => / sweep-1\/VerifyAndRequeue#\d+ starts execution requeue-/.test(l)),
      'the retry starts it',
    );
    for (const r of [applied, throttled]) {
      assert.deepEqual(r.violations, []);
      assert.equal(r.state, 'DONE');
    }
  }
});

test("the trigger's StartExecution throttled, or answered 503 applied or not: Scheduler retries it, a new execution each time", async () => {
  for (const seed of SEEDS) {
    const throttled = await runWorkflowSchedule(seed, undefined, { faults: [], startErrors: [{ kind: 'throttled' }] });
    assert.ok(throttled.trace.some((l) => l.endsWith("the schedule's StartExecution #1 (delivery a) answered ThrottlingException")));
    const retried = throttled.trace.find((l) => / the schedule retries delivery a in \d+ ms$/.test(l))!;
    const startedAt = at(throttled.trace.find((l) => l.endsWith('the schedule starts execution exec-a.2'))!);
    assert.equal(startedAt, Number(/ in (\d+) ms$/.exec(retried)![1]), 'the retry starts it, later');
    assert.ok(!throttled.trace.some((l) => l.endsWith('starts execution exec-a')), 'the throttled start started nothing');

    const applied = await runWorkflowSchedule(seed, undefined, { faults: [], startErrors: [{ kind: 'server-error', status: 503, applied: true }] });
    const started = applied.trace.filter((l) => / the schedule starts execution exec-a(\.2)?$/.test(l));
    assert.equal(started.length, 2, `the 503's start ran, and so does the retry's:\n${applied.trace.join('\n')}`);
    assert.equal(applied.trace.filter((l) => / claimed epoch \d+$/.test(l)).length, 1, 'one holder bills the night');

    const lost = await runWorkflowSchedule(seed, undefined, { faults: [], startErrors: [{ kind: 'server-error', status: 500, applied: false }] });
    assert.ok(lost.trace.some((l) => l.endsWith('(delivery a) answered 500 (not applied)')));
    assert.ok(lost.trace.some((l) => l.endsWith('the schedule starts execution exec-a.2')));
    for (const r of [throttled, applied, lost]) {
      assert.deepEqual(r.violations, []);
      assert.equal(r.state, 'DONE');
    }
  }
});

// ---------------------------------------------------------------------------------------------------------------
// The nightly trigger delivered a third time, or late.

test('the trigger delivered three times: the later executions wait on the holder and find DONE; with wait-skipped each takes over', async () => {
  const placed: WorkflowPlaced = { faults: [], again: [{ atMs: 2_000 }, { atMs: 4_000 }] };
  for (const seed of SEEDS) {
    const r = await runWorkflowSchedule(seed, undefined, placed);
    for (const name of ['exec-b', 'exec-c']) {
      assert.ok(
        r.trace.some((l) => l.endsWith(`the schedule starts execution ${name}`)),
        r.trace.join('\n'),
      );
      assert.ok(
        r.trace.some((l) => l.endsWith(`${name} ends SUCCEEDED at AlreadyDone`)),
        `${name} finds the night DONE`,
      );
    }
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
    const skipped = await runWorkflowSchedule(seed, 'wait-skipped', placed);
    for (const [by, from] of [
      ['exec-b', 'exec-a'],
      ['exec-c', 'exec-b'],
    ])
      assert.ok(
        skipped.violations.some((v) => new RegExp(`^${by} claimed .* while ${from}'s lease ran to`).test(v)),
        `${by} takes over ${from}, alive:\n${skipped.violations.join('\n')}`,
      );
  }
});

test('the trigger delivered late, after the first execution closed or 5 hours later: it finds the night DONE; no sweep runs meanwhile', async () => {
  for (const seed of SEEDS) {
    const afterEnd = await runWorkflowSchedule(seed, undefined, { faults: [], again: [{ afterEndMs: 5_000 }] });
    const closed = afterEnd.trace.find((l) => l.endsWith('exec-a ends SUCCEEDED at Completed'))!;
    const late = afterEnd.trace.find((l) => l.endsWith('the schedule starts execution exec-b'))!;
    assert.equal(at(late), at(closed) + 5_000, afterEnd.trace.join('\n'));

    const hours = await runWorkflowSchedule(seed, undefined, { faults: [], again: [{ atMs: 5 * 3_600_000 }] });
    assert.ok(
      hours.trace.some((l) => l === '18000000 the schedule starts execution exec-b'),
      hours.trace.join('\n'),
    );
    assert.ok(!hours.trace.some((l) => l.includes("the sweeper's schedule starts")), 'the idle sweeper runs no sweep for 5 hours');
    for (const r of [afterEnd, hours]) {
      assert.ok(r.trace.some((l) => l.endsWith('exec-b ends SUCCEEDED at AlreadyDone')));
      assert.equal(r.trace.filter((l) => / claimed epoch \d+$/.test(l)).length, 1, 'the late execution claims nothing');
      assert.deepEqual(r.violations, []);
      assert.equal(r.state, 'DONE');
    }
  }
});

// ---------------------------------------------------------------------------------------------------------------
// A Map whose iteration fails stops the others (every chunk at once: chunkConcurrency = chunks).

const CHUNK_DIES: PlacedFault = { actor: nightA('RunChunk'), method: 'recordBatch', kind: 'crash' };

test('every chunk at once: a chunk that dies fails the Map; the others run on, their writes land, their answers are discarded', async () => {
  for (const seed of SEEDS) {
    const r = await runWorkflowSchedule(seed, undefined, { faults: [CHUNK_DIES], allAtOnce: true });
    const failed = r.trace.findIndex((l) => / exec-a Chunks fails on iteration \d \(Runtime\.ExitError\): the others stop$/.test(l));
    assert.ok(failed >= 0, r.trace.join('\n'));
    const ended = r.trace.findIndex((l) => l.endsWith('exec-a ends FAILED at Failed'));
    assert.ok(ended > failed);
    assert.ok(
      r.trace.slice(ended).some((l) => / exec-a\/RunChunk#\d+ batch accepted token 1 /.test(l)),
      `a sibling's write lands after its execution ended:\n${r.trace.join('\n')}`,
    );
    assert.equal(r.trace.filter((l) => l.endsWith('exec-a RunChunk answered after its Map failed: discarded')).length, 2);
    assert.ok(
      r.trace.some((l) => / requeue-\S+ claimed epoch 2$/.test(l)),
      "the sweeper's re-queued run takes the night",
    );
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
  }
});

// A product finding: the Map's Catch released the lease while the failed Map's other chunks still ran (Step Functions
// does not stop their Lambdas), within their stop times; a duplicate start waiting on the lock claimed it at once, and
// both holders acted. With more than one chunk at a time the workflow now leaves the lease to lapse.
test('every chunk at once with a duplicate start: after the Map failed, the lease is left to lapse while the other chunks still act', async () => {
  const placed: WorkflowPlaced = { faults: [CHUNK_DIES], allAtOnce: true, againAtMs: 1_000 };
  for (const seed of SEEDS) {
    assert.deepEqual((await runWorkflowSchedule(seed, undefined, { ...placed, allAtOnce: false })).violations, []);
    const r = await runWorkflowSchedule(seed, undefined, placed);
    // The case happened: the Map failed with a chunk's Lambdas still running, and its Catch gave nothing back.
    assert.ok(
      r.trace.some((l) => / exec-a Chunks fails on iteration \d+ \(\S+\): the others stop$/.test(l)),
      r.trace.join('\n'),
    );
    assert.ok(r.trace.some((l) => / exec-a Chunks caught \S+ → Failed$/.test(l)));
    assert.ok(!r.trace.some((l) => / → ReleaseAfterFailure$/.test(l)));
    assert.deepEqual(r.violations, []);
  }
});

// The job built with a Distributed Map (a child execution per chunk, every chunk at once): a child whose Lambda dies
// fails the Map Run with States.ExceedToleratedFailureThreshold (not the child's own error), the running children are
// aborted while their Lambdas run on, and the Catch only looks at the lease (keep): a duplicate start claims it once it
// lapsed and bills the chunk left.
test('a Distributed Map: a child that dies fails the Map Run, the running children are aborted, their Lambdas run on, the lease lapses', async () => {
  const childDies: PlacedFault = { actor: /^exec-a\/Chunks:\d\/RunChunk#/, method: 'recordBatch', kind: 'crash' };
  for (const seed of SEEDS) {
    const r = await runWorkflowSchedule(seed, undefined, { faults: [childDies], distributed: true, againAtMs: 1_000 });
    const children = r.trace.filter((l) => / exec-a\/Chunks:\d starts: a child execution of exec-a's Map Run Chunks$/.test(l));
    assert.equal(children.length, 3, `a child execution per chunk:\n${r.trace.join('\n')}`);
    const failed = r.trace.findIndex((l) => / exec-a Chunks Map Run fails: 1 of 3 children failed, above the tolerated; ABORTED: /.test(l));
    assert.ok(failed >= 0, r.trace.join('\n'));
    assert.match(r.trace[failed + 1], / exec-a Chunks caught States\.ExceedToleratedFailureThreshold → CheckAfterChunkFailure$/);
    const ended = r.trace.findIndex((l) => l.endsWith('exec-a ends FAILED at Failed'));
    assert.ok(ended > failed);
    assert.ok(
      r.trace.slice(ended).some((l) => / exec-a\/Chunks:\d\/RunChunk#\d+ batch accepted token 1 /.test(l)),
      `an aborted child's write lands after its parent ended:\n${r.trace.join('\n')}`,
    );
    assert.equal(r.trace.filter((l) => / exec-a\/Chunks:\d RunChunk answered after its Map failed: discarded$/.test(l)).length, 2);
    assert.ok(!r.trace.some((l) => / → ReleaseAfterFailure$/.test(l)), 'no release under the running children');
    assert.ok(
      r.trace.some((l) => / exec-b claimed epoch 2$/.test(l)),
      'the duplicate start claims once the lease lapsed',
    );
    assert.deepEqual(r.violations, []);
    assert.equal(r.state, 'DONE');
  }
});

test('the drawn world injects each new fault: over 300 schedules every kind comes up, and no schedule has a violation', async () => {
  const seen = new Map<string, number>();
  for (let seed = 1; seed <= 300; seed++) {
    const r = await runWorkflowSchedule(seed);
    assert.deepEqual(r.violations, [], `seed ${seed}`);
    for (const p of r.crashPoints) seen.set(p.split(' ')[0], (seen.get(p.split(' ')[0]) ?? 0) + 1);
    const trace = r.trace.join('\n');
    if (/the daily trigger is delivered again \d+ ms after the first execution closed/.test(trace)) seen.set('late-after-end', 1);
    if (/the daily trigger is delivered again at \d{8,} ms/.test(trace)) seen.set('late-hours', 1);
    if (/starts execution exec-c/.test(trace)) seen.set('third', 1);
  }
  for (const kind of [
    'invoke-service-error',
    'invoke-aws-lambda-exception',
    'invoke-sdk-client-exception',
    'invoke-unknown',
    'invoke-sandbox-timedout',
    'trigger-throttled',
    'trigger-server-error',
    'late-after-end',
    'late-hours',
    'third',
  ])
    assert.ok(seen.has(kind), `${kind} never drawn in 300 schedules: ${JSON.stringify([...seen])}`);
});
