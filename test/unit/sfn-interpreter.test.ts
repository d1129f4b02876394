/**
 * The explorer's Step Functions interpreter (verify/explore/sfn.ts) on its own, on virtual time, each rule pinned to the
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
 * What it does not emulate: every state type and field the synthesized FencedJob does not use (Parallel, InputPath,
 * the intrinsic functions, JSONata, the distributed Map); an unknown one is an error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VirtualClock } from '../../lib/core/clock';
import { interpreter, StateError, type Context, type MachineDef, type StateDef } from '../../verify/explore/sfn';

const exec = { name: 'run-1' };
const context = (input: unknown = {}): Context => ({ Execution: { Name: exec.name, Input: input } });

/** A world on a virtual clock whose task attempts answer by `answer`; every attempt recorded with its time. */
function worldOf(answer: (state: string, payload: unknown, n: number) => unknown, random = () => 0.5, skipWaits = false) {
  const clock = new VirtualClock();
  const attempts: { state: string; at: number; payload: unknown }[] = [];
  const log: string[] = [];
  const sfn = interpreter<undefined>({
    attempt: async (_exec, state, _st: StateDef, payload) => {
      attempts.push({ state, at: clock.monotonicMs(), payload });
      const out = answer(state, payload, attempts.filter((a) => a.state === state).length);
      if (out instanceof StateError) throw out;
      return out;
    },
    sleep: (ms) => clock.sleep(ms),
    random,
    log: (line) => log.push(line),
    skipWaits,
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
