/**
 * The workflow's explored world (harness/explore/workflow-world.ts): the real handlers of FencedJob's state machine and
 * sweeper, on the in-memory stores and virtual time, run by the states of the synthesized definitions (Retry, Catch,
 * TimeoutSeconds), with faults at every store call, at every invocation and at StartExecution. No endpoint, no sleep.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { WORKFLOW_WORLD_MUTATIONS, runWorkflowSchedule } from '../harness/explore/workflow-world';

const digest = (traces: readonly (readonly string[])[]) => {
  const h = createHash('sha256');
  for (const t of traces) h.update(t.join('\n')).update('\n--\n');
  return h.digest('hex');
};

async function schedules(from: number, count: number, mutation?: string) {
  const out = [];
  for (let seed = from; seed < from + count; seed++) out.push(await runWorkflowSchedule(seed, mutation));
  return out;
}

test('the same seed gives the same trace: 20 schedules from seed 1, run twice, have equal traces and digest', async () => {
  const first = await schedules(1, 20);
  const second = await schedules(1, 20);
  assert.deepEqual(
    second.map((r) => r.trace),
    first.map((r) => r.trace),
  );
  assert.equal(digest(second.map((r) => r.trace)), digest(first.map((r) => r.trace)));
  assert.notDeepEqual(first[0].trace, first[1].trace, 'two seeds, two schedules');
});

test('100 schedules from seed 1 on the real code: no violation, and faults at every level were injected', async () => {
  const results = await schedules(1, 100);
  assert.deepEqual(
    results.filter((r) => r.violations.length > 0).map((r) => [r.seed, r.violations]),
    [],
  );
  const points = new Set(results.flatMap((r) => r.crashPoints.map((p) => p.split(' ')[0])));
  for (const kind of ['crash', 'pause', 'lost', 'throttle', 'invoke-throttled', 'invoke-timed-out', 'invoke-no-answer'])
    assert.ok(points.has(kind), `no ${kind} in 100 schedules: ${[...points].join(', ')}`);
});

// Each broken variant, applied by the harness only, is caught within `within` schedules from `from` (the first
// catch from seed 1 is in docs/TESTING.md; fence-below needs a zombie write to land in a chunk the new holder has
// raised but not yet written, which seed 243 is the first to reach).
const CAUGHT: Record<(typeof WORKFLOW_WORLD_MUTATIONS)[number], { from: number; within: number }> = {
  'wait-skipped': { from: 1, within: 30 },
  'no-task-timeout': { from: 1, within: 10 },
  'fence-below': { from: 230, within: 20 },
  'no-stop-check': { from: 1, within: 10 },
  'epoch-deleted': { from: 1, within: 10 },
  'raise-after': { from: 1, within: 10 },
  'fence-lt': { from: 1, within: 10 },
};
for (const mutation of WORKFLOW_WORLD_MUTATIONS) {
  const { from, within } = CAUGHT[mutation];
  test(`the broken variant ${mutation} is caught from seed ${from} within ${within} schedules, and that schedule passes on the real code`, async () => {
    let caught: number | undefined;
    for (let seed = from; seed < from + within && caught === undefined; seed++) {
      if ((await runWorkflowSchedule(seed, mutation)).violations.length > 0) caught = seed;
    }
    assert.notEqual(caught, undefined, `${mutation} not caught in ${within} schedules from seed ${from}`);
    const honest = await runWorkflowSchedule(caught!);
    assert.deepEqual(honest.violations, [], `seed ${caught} on the real code must pass`);
  });
}

test('the workflow variants are caught for their own reason: the Wait that is the claim rule timer, the task timeout', async () => {
  const skipped = await runWorkflowSchedule(13, 'wait-skipped');
  assert.ok(
    skipped.violations.some((v) => /claimed .* while night-a's lease ran to/.test(v)),
    `a claimant whose Wait states do not wait takes over a live holder:\n${skipped.violations.join('\n')}`,
  );
  const untimed = await runWorkflowSchedule(2, 'no-task-timeout');
  assert.ok(
    untimed.violations.some((v) => /execution night-a still RUNNING/.test(v)),
    `without TimeoutSeconds, a task whose Lambda never answers waits for ever:\n${untimed.violations.join('\n')}`,
  );
  assert.ok(
    (await runWorkflowSchedule(2)).trace.some((l) => / night-a\/\w+#\d+ task TIMEOUT after \d+ s/.test(l)),
    'the same schedule on the real definition: the task times out',
  );
});

// Seed 35: a chunk's write is in flight (paused) past its task's TimeoutSeconds; Step Functions moves on while the
// Lambda runs, a re-queued run takes the night with a higher token, and the zombie's write lands below its fence.
const ZOMBIE = 35;

test(`a task timeout leaves a zombie holder whose write lands later, and the fence refuses it (seed ${ZOMBIE})`, async () => {
  const r = await runWorkflowSchedule(ZOMBIE);
  const timeout = r.trace.findIndex((l) => / (night-\w)\/RunChunk#\d+ task TIMEOUT after \d+ s; its Lambda runs on$/.test(l));
  assert.ok(timeout >= 0, `seed ${ZOMBIE} no longer times a chunk task out:\n${r.trace.join('\n')}`);
  const zombie = / (\S+) task TIMEOUT/.exec(r.trace[timeout])![1];
  const execution = zombie.split('/')[0];
  const ended = r.trace.findIndex((l, i) => i > timeout && l.includes(` ${execution} ends `));
  assert.ok(ended > timeout, `the execution moves on after its task's timeout:\n${r.trace.join('\n')}`);
  const refused = r.trace.findIndex((l, i) => i > ended && l.includes(` ${zombie} batch REFUSED `));
  assert.ok(refused > ended, `the zombie's write lands after its execution ended, and is refused:\n${r.trace.join('\n')}`);
  const [, token, fence] = / token (\d+) below fence (\d+) /.exec(r.trace[refused])!;
  assert.ok(Number(token) < Number(fence), r.trace[refused]);
  assert.ok(
    r.trace.slice(0, refused).some((l) => l.endsWith(` claimed epoch ${fence}`)),
    'the fence it met is a later holder token',
  );
  assert.deepEqual(r.violations, []);
  assert.equal(r.state, 'DONE');
  // The fence is what refused it: with the fence comparison broken, the same schedule refuses nothing.
  const broken = await runWorkflowSchedule(ZOMBIE, 'fence-below');
  assert.ok(!broken.trace.some((l) => l.includes(` ${zombie} batch REFUSED `)));
});

test("StartExecution delivered twice, or retried after its answer was lost, is AWS's same execution: one run per name (seeds 34, 153)", async () => {
  const twice = await runWorkflowSchedule(34);
  const at = twice.trace.findIndex((l) => / StartExecution (\S+) delivered twice$/.test(l));
  assert.ok(at >= 0, `seed 34 no longer delivers a StartExecution twice:\n${twice.trace.join('\n')}`);
  const name = / StartExecution (\S+) delivered twice/.exec(twice.trace[at])![1];
  assert.match(twice.trace[at + 1], new RegExp(`StartExecution ${name}: the same execution \\(open, same input\\)$`));
  assert.equal(twice.trace.filter((l) => l.endsWith(`starts execution ${name}`)).length, 1);

  const lost = await runWorkflowSchedule(153);
  const send = lost.trace.findIndex((l) => /\/VerifyAndRequeue#\d+ send LOST /.test(l));
  assert.ok(send >= 0, `seed 153 no longer loses a StartExecution's answer:\n${lost.trace.join('\n')}`);
  const started = / starts execution (\S+)$/.exec(lost.trace[send + 1])![1];
  assert.ok(
    lost.trace.slice(send + 2).some((l) => l.endsWith(`StartExecution ${started}: the same execution (open, same input)`)),
    "the retried step's StartExecution meets the execution its lost one started",
  );
  assert.equal(lost.trace.filter((l) => l.endsWith(`starts execution ${started}`)).length, 1);
  for (const r of [twice, lost]) assert.deepEqual(r.violations, []);
});

test('a StartExecution for a name whose execution has closed is ExecutionAlreadyExists, taken as its own earlier start; a later sweep starts another (seed 626)', async () => {
  const r = await runWorkflowSchedule(626);
  const exists = r.trace.findIndex((l) => / StartExecution (\S+): ExecutionAlreadyExists \(FAILED\)$/.test(l));
  assert.ok(exists >= 0, `seed 626 no longer meets a closed execution's name:\n${r.trace.join('\n')}`);
  const name = / StartExecution (\S+): /.exec(r.trace[exists])![1];
  assert.equal(r.trace.filter((l) => l.endsWith(`starts execution ${name}`)).length, 1, 'no second run under that name');
  assert.ok(
    r.trace.findIndex((l) => l.endsWith(`${name} ends FAILED: Runtime.ExitError`)) < exists,
    'the execution it names had closed (its first task died)',
  );
  const by = / (sweep-\d+)\//.exec(r.trace[exists])![1];
  assert.ok(
    r.trace.slice(exists).some((l) => l.endsWith(`${by} ends at Swept`)),
    'the retried step went on to its end',
  );
  assert.ok(
    r.trace.slice(exists).some((l) => / starts execution requeue-/.test(l) && !l.endsWith(name)),
    'a later sweep starts the night under a new name',
  );
  assert.deepEqual(r.violations, []);
  assert.equal(r.state, 'DONE');
});
