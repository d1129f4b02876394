/**
 * `exploreFencedJob` (fencepost/testing) explores a user's FencedJob chunk function under the workflow FencedJob
 * synthesizes, with its real handlers and the workflow world's faults, and finds the bugs users write in it: each
 * planted bug below is caught within a few hundred schedules from a fixed seed, with the seed that replays it, and its
 * correct twin passes the same schedules. The work is test/package/fixtures/planted-chunk-bugs.ts's, which the
 * packed-tarball test also runs from the installed package.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFenced } from '../../lib/core/batch';
import { exploreFencedJob } from '../../lib/testing/index';
import type { PlacedFault } from '../../lib/testing/scheduler';
import { CHUNK_BUGS, PretendMail, READ_MS, statementsCheck, statementsWork, type ChunkBug } from '../package/fixtures/planted-chunk-bugs';

const SCHEDULES = 300;
const CHUNKS = 3;
/** The statements job with `bug` planted, explored from `seed` (with `placed` faults, if any, instead of drawn ones). */
const explore = (bug: ChunkBug, seed = 1, schedules = SCHEDULES, placed?: readonly PlacedFault[]) =>
  exploreFencedJob({
    work: statementsWork({ writeFenced }, bug),
    chunks: CHUNKS,
    chunkWorkMs: READ_MS,
    fakes: () => new PretendMail(),
    check: statementsCheck(CHUNKS),
    seed,
    schedules,
    ...(placed ? { placed } : {}),
  });

test(`the correct statements job passes ${SCHEDULES} schedules; the same seed gives the same digest`, async () => {
  const [a, b] = [await explore('none'), await explore('none')];
  assert.deepEqual(a.violations, [], JSON.stringify(a.violations[0]?.violations));
  assert.equal(b.digest, a.digest);
  // The store calls' faults and the workflow's own: a crashed or timed-out Lambda, a trigger delivered twice.
  const kinds = new Set(Object.keys(a.faults).map((f) => f.split(' ')[0]));
  for (const kind of ['pause', 'crash', 'lost', 'late', 'start-twice', 'invoke-timed-out', 'invoke-sandbox-timedout'])
    assert.ok(kinds.has(kind), `${kind} faults were injected: ${[...kinds].join(', ')}`);
  // Faults land on the user's own acts too: its fake's calls and its plain tables' writes are steps.
  assert.ok(
    Object.keys(a.faults).some((f) => f.includes('fakes.send')),
    `a fault landed on fakes.send: ${Object.keys(a.faults).join(', ')}`,
  );
  console.log(`correct twin: 0 violations in ${SCHEDULES} schedules; faults: ${JSON.stringify(a.faults)}`);
});

for (const [bug, caughtBy] of Object.entries(CHUNK_BUGS) as [keyof typeof CHUNK_BUGS, RegExp][]) {
  test(`planted bug ${bug}: caught, with a seed that replays it`, async () => {
    const r = await explore(bug);
    assert.ok(r.violations.length >= SCHEDULES / 5, `${bug} is caught in at least 1 schedule in 5: ${r.violations.length}`);
    assert.ok(
      r.violations.every((v) => v.violations.some((line) => caughtBy.test(line))),
      JSON.stringify(r.violations.find((v) => !v.violations.some((line) => caughtBy.test(line)))?.violations),
    );
    const first = r.violations[0];
    assert.match(first.replay, new RegExp(`^exploreFencedJob\\(\\{ \\.\\.\\.options, seed: ${first.seed}, schedules: 1 \\}\\)$`));
    const again = await explore(bug, first.seed, 1);
    assert.deepEqual(again.violations[0]?.trace, first.trace, 'the seed replays the schedule exactly');
    console.log(`${bug}: caught in ${r.violations.length} of ${SCHEDULES} schedules from seed 1 (first seed ${first.seed})`);
  });
}

test("the user's own check is given the night's state, its items and its fakes, and what it says is a violation", async () => {
  const seen: { state: string | undefined; statements: number; mails: number }[] = [];
  const r = await exploreFencedJob({
    work: statementsWork({ writeFenced }, 'none'),
    chunks: CHUNKS,
    chunkWorkMs: READ_MS,
    fakes: () => new PretendMail(),
    check: ({ state, items, fakes }) => (seen.push({ state, statements: items('statements').length, mails: fakes.deliveries.length }), ['mine']),
    seed: 1,
    schedules: 5,
  });
  assert.equal(r.violations.length, 5);
  assert.ok(r.violations.every((v) => v.violations.includes('mine')));
  // A DONE night has every statement, and every customer was emailed (the correct job, every schedule).
  assert.deepEqual(seen, Array(5).fill({ state: 'DONE', statements: CHUNKS * 2, mails: CHUNKS * 2 }));
});

// Each act placed, on one schedule: the first chunk invocation paused 200 s at its act, right after a passed check
// (longer than the 10 s lease, so the sweeper re-queues the night and a new execution claims it meanwhile). The same
// pause lands on the correct twin's fenced write, or on its send inside sendOnce, which the fence or the key covers.
const placedAt = (bug: ChunkBug, method: string, nth = 1) => explore(bug, 1, 1, [{ actor: /RunChunk/, method, nth, kind: 'pause', ms: 200_000 }]);

test('placed: a plain write past its stop time is caught; the twin paused at the same write, fenced, is refused', async () => {
  const bug = await placedAt('plain-put', 'tables.put');
  assert.match(
    bug.violations[0]?.violations[0] ?? '',
    /acted past its stop time: exec-a\/RunChunk#\d+ sent tables\.put at 204000 ms .*after requeue-/,
  );
  assert.deepEqual(bug.faults, { 'pause tables.put': 1 });
  // The twin's run row is its invocation's second fenced batch: the same pause there, and the fence refuses the write.
  const twin = await placedAt('none', 'recordBatch', 2);
  assert.deepEqual(twin.violations, []);
  assert.deepEqual(twin.faults, { 'pause recordBatch': 1 });
});

test('placed: an email past its stop time is caught; the twin paused at its send inside sendOnce is covered by its key', async () => {
  const bug = await placedAt('effect-before-check', 'fakes.send');
  assert.match(bug.violations[0]?.violations[0] ?? '', /acted past its stop time: exec-a\/RunChunk#\d+ sent fakes\.send .*an effect with no intent/);
  const twin = await placedAt('none', 'fakes.send');
  assert.deepEqual(twin.violations, []);
  assert.deepEqual(twin.faults, { 'pause fakes.send': 1 });
});
