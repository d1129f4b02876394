/**
 * The explorer's Step Functions interpreter (lib/testing/workflow/sfn.ts) on its own, on virtual time, each rule pinned to the
 * Step Functions documentation it follows:
 * - Retry and Catch: https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html (retriers and
 *   catchers are tried in order, the first whose ErrorEquals names the error or States.ALL wins; IntervalSeconds 1,
 *   BackoffRate 2.0 and MaxAttempts 3 by default, each retrier counting its own attempts; MaxDelaySeconds caps a wait;
 *   JitterStrategy FULL waits a random time between 0 and the computed backoff; a catcher's ResultPath places the
 *   error output, { Error, Cause }, on the input).
 * - ResultPath: https://docs.aws.amazon.com/step-functions/latest/dg/input-output-resultpath.html (absent or `$`: the
 *   result replaces the input; `null`: the input passes on, the result is discarded; `$.a`: the result is added there).
 * - Inline Map: https://docs.aws.amazon.com/step-functions/latest/dg/state-map-inline.html (ItemsPath, ItemSelector with
 *   `$$.Map.Item.Value`, MaxConcurrency; a failed iteration fails the Map state).
 * - Distributed Map: https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html (ProcessorConfig
 *   Mode DISTRIBUTED: each item a child execution with its own history and context, MaxConcurrency absent: 10,000),
 *   https://docs.aws.amazon.com/step-functions/latest/dg/maprun-fail-threshold.html (the Map Run fails with
 *   States.ExceedToleratedFailureThreshold once the failed children exceed ToleratedFailureCount or
 *   ToleratedFailurePercentage, either when both are set, default 0), and
 *   https://docs.aws.amazon.com/step-functions/latest/apireference/API_MapRunExecutionCounts.html (a failed Map Run
 *   aborts its running children).
 * What it does not emulate: every state type and field the synthesized FencedJob does not use (Parallel, InputPath,
 * the intrinsic functions, JSONata, a Distributed Map's ItemReader, ItemBatcher, ResultWriter, *Path forms and Express
 * children); an unknown one is an error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import { MAP_RUN_FAILED } from '../../lib/constructs/task-errors';
import { interpreter, StateError, type Context, type MachineDef, type StateDef } from '../../lib/testing/workflow/sfn';

const exec = { name: 'run-1' };
const context = (input: unknown = {}): Context => ({ Execution: { Name: exec.name, Input: input } });

/** A world on a virtual clock whose task attempts answer by `answer`; every attempt recorded with its time. */
function worldOf(
  answer: (state: string, payload: unknown, n: number, clock: VirtualClock) => unknown,
  random = () => 0.5,
  skipWaits = false,
  mapRunMs?: (phase: 'start-up' | 'wind-down') => number,
) {
  const clock = new VirtualClock();
  const attempts: { state: string; at: number; payload: unknown; exec: string }[] = [];
  const log: string[] = [];
  const sfn = interpreter<undefined>({
    attempt: async (execution, state, _st: StateDef, payload) => {
      attempts.push({ state, at: clock.monotonicMs(), payload, exec: execution.name });
      const out = answer(state, payload, attempts.filter((a) => a.state === state).length, clock);
      if (out instanceof StateError) throw out;
      return out;
    },
    sleep: (ms) => clock.sleep(ms),
    random,
    log: (line) => log.push(line),
    skipWaits,
    mapRunMs,
  });
  const run = async (machine: MachineDef, input: unknown = {}) => {
    const out = sfn.run(exec, machine, input, context(input), undefined);
    out.catch(() => undefined); // a failure is the caller's to assert, once the clock ran
    await clock.runUntilIdle();
    return out;
  };
  return { clock, attempts, log, run };
}

const task = (extra: Partial<StateDef> = {}): StateDef => ({ Type: 'Task', Resource: 'fn', End: true, ...extra });

test('a Task retries under the first retrier that names its error, IntervalSeconds × BackoffRate^n apart, MaxAttempts times, then fails', async () => {
  const w = worldOf(() => new StateError('Boom', 'no'));
  const machine: MachineDef = {
    StartAt: 'T',
    States: {
      T: task({
        Retry: [
          { ErrorEquals: ['Other'], MaxAttempts: 9 },
          { ErrorEquals: ['Boom'], IntervalSeconds: 2, BackoffRate: 3, MaxAttempts: 2 },
        ],
      }),
    },
  };
  await assert.rejects(w.run(machine), (err) => err instanceof StateError && err.error === 'Boom');
  // The first attempt, then 2 retries: 2 s, then 2 × 3 = 6 s later.
  assert.deepEqual(
    w.attempts.map((a) => a.at),
    [0, 2_000, 8_000],
  );
});

test("a retrier's defaults are IntervalSeconds 1, BackoffRate 2 and MaxAttempts 3; States.ALL matches any error; MaxDelaySeconds caps a wait", async () => {
  const w = worldOf((_s, _p, n) => (n < 4 ? new StateError('Anything', 'x') : 'done'));
  const out = await w.run({ StartAt: 'T', States: { T: task({ Retry: [{ ErrorEquals: ['States.ALL'] }] }) } });
  assert.equal(out.output, 'done');
  assert.deepEqual(
    w.attempts.map((a) => a.at),
    [0, 1_000, 3_000, 7_000],
  );
  const capped = worldOf((_s, _p, n) => (n < 4 ? new StateError('E', 'x') : 'done'));
  await capped.run({ StartAt: 'T', States: { T: task({ Retry: [{ ErrorEquals: ['E'], MaxDelaySeconds: 3 }] }) } });
  assert.deepEqual(
    capped.attempts.map((a) => a.at),
    [0, 1_000, 3_000, 6_000],
    'the third wait (4 s) is capped at 3 s',
  );
});

test('JitterStrategy FULL waits a random share of the computed backoff, drawn from the world', async () => {
  const w = worldOf(
    (_s, _p, n) => (n < 2 ? new StateError('E', 'x') : 'ok'),
    () => 0.25,
  );
  await w.run({ StartAt: 'T', States: { T: task({ Retry: [{ ErrorEquals: ['E'], IntervalSeconds: 4, JitterStrategy: 'FULL' }] }) } });
  assert.deepEqual(
    w.attempts.map((a) => a.at),
    [0, 1_000],
  );
});

test('a Catch moves to its Next with { Error, Cause } at its ResultPath; an error no catcher names fails the run', async () => {
  const w = worldOf((state) => (state === 'T' ? new StateError('Boom', 'the cause') : 'x'));
  const machine: MachineDef = {
    StartAt: 'T',
    States: {
      T: task({
        End: undefined,
        Next: 'Never',
        Catch: [
          { ErrorEquals: ['Other'], Next: 'Never' },
          { ErrorEquals: ['Boom'], ResultPath: '$.error', Next: 'Failed' },
        ],
      }),
      Never: { Type: 'Succeed' },
      Failed: { Type: 'Fail', Error: 'Caught' },
    },
  };
  const out = await w.run(machine, { night: '2026-09-28' });
  assert.deepEqual(out, { end: 'Failed', failed: 'Caught', output: { night: '2026-09-28', error: { Error: 'Boom', Cause: 'the cause' } } });
  const uncaught = worldOf(() => new StateError('Boom', 'x'));
  await assert.rejects(uncaught.run({ StartAt: 'T', States: { T: task({ Catch: [{ ErrorEquals: ['Other'], Next: 'T' }] }) } }));
});

test('ResultPath: absent replaces the input, null keeps it, $.a adds the result there; Parameters read $ and $$', async () => {
  const w = worldOf((state, payload) => ({ state, payload }));
  const machine: MachineDef = {
    StartAt: 'Keep',
    States: {
      Keep: task({ End: undefined, Next: 'Add', ResultPath: null }),
      Add: task({
        End: undefined,
        Next: 'Replace',
        ResultPath: '$.added',
        Parameters: { 'date.$': '$.date', 'run.$': '$$.Execution.Name', fixed: 1 },
      }),
      Replace: task(),
    },
  };
  const out = await w.run(machine, { date: 'd' });
  assert.deepEqual(w.attempts[1].payload, { date: 'd', run: 'run-1', fixed: 1 });
  assert.deepEqual(out.output, {
    state: 'Replace',
    payload: { date: 'd', added: { state: 'Add', payload: { date: 'd', run: 'run-1', fixed: 1 } } },
  });
});

test('a Wait waits its Seconds (or SecondsPath) on the virtual clock; a Choice goes by its first matching rule, else Default', async () => {
  const w = worldOf(() => 'ok');
  const machine: MachineDef = {
    StartAt: 'Wait',
    States: {
      Wait: { Type: 'Wait', SecondsPath: '$.wait', Next: 'Choose' },
      Choose: { Type: 'Choice', Choices: [{ Variable: '$.done', BooleanEquals: true, Next: 'Done' }], Default: 'Work' },
      Work: task(),
      Done: { Type: 'Succeed' },
    },
  };
  const out = await w.run(machine, { wait: 7, done: false });
  assert.equal(out.end, 'Work');
  assert.deepEqual(
    w.attempts.map((a) => a.at),
    [7_000],
  );
  const skipping = worldOf(() => 'ok', undefined, true);
  await skipping.run(machine, { wait: 7, done: false });
  assert.equal(skipping.attempts[0].at, 0, 'the broken variant wait-skipped: no wait');
});

test('an inline Map runs at most MaxConcurrency iterations at once, each item through ItemSelector; a failed iteration fails it and starts no more', async () => {
  const w = worldOf((_s, payload) => {
    const item = (payload as { item: number }).item;
    return item === 3 ? new StateError('Bad', `item ${item}`) : item * 10;
  });
  const body: MachineDef = { StartAt: 'Each', States: { Each: task() } };
  const map = (): MachineDef => ({
    StartAt: 'M',
    States: {
      M: {
        Type: 'Map',
        ItemsPath: '$.items',
        MaxConcurrency: 2,
        ItemSelector: { 'item.$': '$$.Map.Item.Value', 'date.$': '$.date' },
        ItemProcessor: body,
        ResultPath: '$.results',
        End: true,
      },
    },
  });
  const ok = await w.run(map(), { items: [0, 1, 2], date: 'd' });
  assert.deepEqual((ok.output as { results: unknown }).results, [0, 10, 20]);
  assert.deepEqual(w.attempts[0].payload, { item: 0, date: 'd' });
  const failing = worldOf((_s, payload) => {
    const item = (payload as { item: number }).item;
    return item === 1 ? new StateError('Bad', 'x') : item;
  });
  await assert.rejects(failing.run(map(), { items: [0, 1, 2, 3, 4], date: 'd' }), (err) => err instanceof StateError);
  const started = failing.attempts.map((a) => (a.payload as { item: number }).item);
  assert.deepEqual(started.slice(0, 2), [0, 1], 'two lanes: items 0 and 1 start together');
  assert.ok(!started.includes(3) && !started.includes(4), `no iteration starts once one failed (started: ${started.join(', ')})`);
});

test('a state type or a Choice rule it does not know is an error, never a guess', async () => {
  const w = worldOf(() => 'ok');
  await assert.rejects(w.run({ StartAt: 'P', States: { P: { Type: 'Parallel', End: true } } }), /does not know: Parallel/);
  await assert.rejects(
    w.run({ StartAt: 'C', States: { C: { Type: 'Choice', Choices: [{ Variable: '$.x', StringEquals: 'a', Next: 'C' }] } } }, { x: 'a' }),
    /a Choice rule this interpreter does not know/,
  );
});

/** A task answer that comes `ms` later on the world's clock: the value, or the StateError thrown. */
const after = (clock: VirtualClock, ms: number, value: unknown) =>
  clock.sleep(ms).then(() => {
    if (value instanceof StateError) throw value;
    return value;
  });

/** A Distributed Map over $.items, its child reading its own $$.Execution.Name. */
const distributedMap = (extra: Partial<StateDef> = {}): MachineDef => ({
  StartAt: 'M',
  States: {
    M: {
      Type: 'Map',
      ItemsPath: '$.items',
      ItemSelector: { 'item.$': '$$.Map.Item.Value' },
      ItemProcessor: {
        ProcessorConfig: { Mode: 'DISTRIBUTED', ExecutionType: 'STANDARD' },
        StartAt: 'Each',
        States: { Each: task({ Parameters: { 'item.$': '$.item', 'child.$': '$$.Execution.Name' } }) },
      },
      ResultPath: '$.results',
      End: true,
      ...extra,
    },
  },
});
const itemOf = (payload: unknown) => (payload as { item: number }).item;

test('a Distributed Map runs each item as a child execution with its own context, at most MaxConcurrency at once (absent: all), results in order', async () => {
  const w = worldOf((_s, payload, _n, clock) => after(clock, 1_000, itemOf(payload) * 10));
  const out = await w.run(distributedMap({ MaxConcurrency: 2 }), { items: [0, 1, 2, 3] });
  assert.deepEqual((out.output as { results: unknown }).results, [0, 10, 20, 30]);
  assert.deepEqual(
    w.attempts.map((a) => [itemOf(a.payload), a.at, a.exec, (a.payload as { child: string }).child]),
    [
      [0, 0, 'run-1/M:0', 'run-1/M:0'],
      [1, 0, 'run-1/M:1', 'run-1/M:1'],
      [2, 1_000, 'run-1/M:2', 'run-1/M:2'],
      [3, 1_000, 'run-1/M:3', 'run-1/M:3'],
    ],
    "two children at once; each child's $$.Execution is its own",
  );
  assert.ok(w.log.includes('run-1/M:3 ends SUCCEEDED'), w.log.join('\n'));
  const all = worldOf((_s, payload, _n, clock) => after(clock, 1_000, itemOf(payload)));
  await all.run(distributedMap(), { items: [0, 1, 2, 3, 4] });
  assert.deepEqual(
    all.attempts.map((a) => a.at),
    [0, 0, 0, 0, 0],
    'no MaxConcurrency: up to 10,000 children at once',
  );
});

test('a failed child fails the Map Run with States.ExceedToleratedFailureThreshold, not its own error; the running children are aborted, their answers discarded, no other starts', async () => {
  const w = worldOf((_s, payload, _n, clock) =>
    after(clock, itemOf(payload) === 1 ? 500 : 1_000, itemOf(payload) === 1 ? new StateError('LeaseLostError', 'x') : 'ok'),
  );
  const machine = distributedMap({
    MaxConcurrency: 3,
    Catch: [
      { ErrorEquals: ['LeaseLostError'], Next: 'Lost' }, // a child's own error never reaches the Map's Catch
      { ErrorEquals: [MAP_RUN_FAILED], ResultPath: '$.error', Next: 'Check' },
    ],
    End: undefined,
    Next: 'Lost',
  });
  const states = machine.States as Record<string, StateDef>;
  states.Lost = { Type: 'Succeed' };
  states.Check = { Type: 'Pass', End: true };
  const out = await w.run(machine, { items: [0, 1, 2, 3, 4] });
  assert.equal(out.end, 'Check');
  assert.deepEqual((out.output as { error: unknown }).error, {
    Error: MAP_RUN_FAILED,
    Cause: 'The specified tolerated failure threshold was exceeded',
  });
  assert.deepEqual(
    w.attempts.map((a) => itemOf(a.payload)),
    [0, 1, 2],
    'no child starts once the Map Run failed',
  );
  assert.ok(w.log.includes('run-1/M:1 ends FAILED (LeaseLostError)'), w.log.join('\n'));
  assert.ok(
    w.log.some((l) => l.endsWith('above the tolerated; ABORTED: run-1/M:0, run-1/M:2')),
    w.log.join('\n'),
  );
  assert.ok(w.log.includes('run-1/M:0 Each answered after its Map failed: discarded'), "the aborted child's Lambda ran on; its answer is discarded");
  assert.ok(!w.log.some((l) => / M:[02] ends SUCCEEDED/.test(l)), 'an aborted child never succeeds');
});

test('ToleratedFailureCount and ToleratedFailurePercentage: the Map Run fails only above them (either, when both are set); a tolerated failure is its output', async () => {
  const failing = (bad: number[]) =>
    worldOf((_s, payload) => (bad.includes(itemOf(payload)) ? new StateError('Bad', `item ${itemOf(payload)}`) : itemOf(payload)));
  const items = { items: [0, 1, 2, 3] };
  const tolerated = await failing([1]).run(distributedMap({ ToleratedFailureCount: 1 }), items);
  assert.deepEqual((tolerated.output as { results: unknown }).results, [0, { Error: 'Bad', Cause: 'item 1' }, 2, 3]);
  const isMapRunFailed = (err: unknown) => err instanceof StateError && err.error === MAP_RUN_FAILED;
  await assert.rejects(failing([1, 2]).run(distributedMap({ ToleratedFailureCount: 1 }), items), isMapRunFailed);
  // 2 of 4 is 50 %: not above 50; 3 of 4 is.
  await failing([1, 2]).run(distributedMap({ ToleratedFailurePercentage: 50 }), items);
  await assert.rejects(failing([0, 1, 2]).run(distributedMap({ ToleratedFailurePercentage: 50 }), items), isMapRunFailed);
  await assert.rejects(failing([1, 2]).run(distributedMap({ ToleratedFailurePercentage: 50, ToleratedFailureCount: 1 }), items), isMapRunFailed);
  // Neither set: none tolerated.
  await assert.rejects(failing([3]).run(distributedMap(), items), isMapRunFailed);
});

test("a Distributed Map Run's start-up and wind-down take what the world says; what it does not run is an error", async () => {
  const w = worldOf(
    (_s, payload, _n, clock) => after(clock, 1_000, itemOf(payload)),
    () => 0.5,
    false,
    (phase) => (phase === 'start-up' ? 2_500 : 1_500),
  );
  await w.run(distributedMap(), { items: [0] });
  assert.deepEqual(
    w.attempts.map((a) => a.at),
    [2_500],
    'the child starts after the start-up',
  );
  assert.equal(w.clock.monotonicMs(), 2_500 + 1_000 + 1_500, 'the Map ends after the wind-down');
  const plain = worldOf(() => 'ok');
  await assert.rejects(plain.run(distributedMap({ ItemReader: { Resource: 's3' } }), { items: [0] }), /does not run: ItemReader/);
  await assert.rejects(plain.run(distributedMap({ ToleratedFailureCountPath: '$.n' }), { items: [0] }), /does not run: ToleratedFailureCountPath/);
  const express = distributedMap();
  (express.States.M.ItemProcessor as { ProcessorConfig: unknown }).ProcessorConfig = { Mode: 'DISTRIBUTED', ExecutionType: 'EXPRESS' };
  await assert.rejects(plain.run(express, { items: [0] }), /does not run: ExecutionType EXPRESS/);
});
