/**
 * `exploreJob` (fencepost/testing) finds the bugs users write in their own jobs: each planted bug below is caught
 * within a few hundred schedules from a fixed seed, and its correct twin passes the same schedules. The jobs are
 * test/package/fixtures/planted-bugs.ts's (the README's digest job, each bug one changed line), which the
 * packed-tarball test also runs from the installed package.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fenceOn } from '../../lib/core/fence';
import { withLease } from '../../lib/core/with-lease';
import { writeFenced } from '../../lib/core/batch';
import { exploreJob, type ExploreJobResult } from '../../lib/testing/explore-job';
import type { PlacedFault } from '../../lib/testing/scheduler';
import { BUGS, PretendMail, check, digestJob, type Bug } from '../package/fixtures/planted-bugs';

const lib = { fenceOn, withLease, writeFenced };

const SCHEDULES = 300;
const explore = (bug: Bug) => exploreJob({ job: digestJob(lib, bug), fakes: () => new PretendMail(), check, seed: 1, schedules: SCHEDULES });

test(`the correct digest job passes ${SCHEDULES} schedules; the same seed gives the same digest`, async () => {
  const [a, b] = [await explore('none'), await explore('none')];
  assert.deepEqual(a.violations, [], JSON.stringify(a.violations[0]?.violations));
  assert.equal(b.digest, a.digest);
  const kinds = new Set(Object.keys(a.faults).map((f) => f.split(' ')[0]));
  for (const kind of ['pause', 'crash', 'lost']) assert.ok(kinds.has(kind), `${kind} faults were injected: ${[...kinds].join(', ')}`);
  console.log(`correct twin: 0 violations in ${SCHEDULES} schedules; faults: ${JSON.stringify(a.faults)}`);
});

for (const [bug, caughtBy] of Object.entries(BUGS) as [keyof typeof BUGS, RegExp][]) {
  test(`planted bug ${bug}: caught, with a seed that replays it`, async () => {
    const r = await explore(bug);
    assert.ok(r.violations.length > SCHEDULES / 2, `${bug} is caught in most schedules: ${r.violations.length}`);
    assert.ok(
      r.violations.every((v) => v.violations.some((line) => caughtBy.test(line))),
      JSON.stringify(r.violations[0].violations),
    );
    const first = r.violations[0];
    const again = await exploreJob({ job: digestJob(lib, bug), fakes: () => new PretendMail(), check, seed: first.seed, schedules: 1 });
    assert.deepEqual(again.violations[0]?.trace, first.trace, 'the seed replays the schedule exactly');
    console.log(`${bug}: caught in ${r.violations.length} of ${SCHEDULES} schedules from seed 1 (first seed ${first.seed})`);
  });
}

// The check "no holder acts past its stop time", each case placed: a pause right after a passed check, on worker-1's
// act, longer than its 10 s lease, so worker-2 takes over meanwhile. The same placed faults run on the correct twin.
const placed = (bug: Bug, faults: readonly PlacedFault[]) =>
  exploreJob({ job: digestJob(lib, bug), fakes: () => new PretendMail(), check, seed: 1, schedules: 1, placed: faults });
const pauseAt = (method: string, nth = 1): PlacedFault => ({ actor: 'worker-1', method, nth, kind: 'pause', ms: 20_000 });
const builtIn = (r: ExploreJobResult) => (r.violations[0]?.violations ?? []).filter((line) => line.startsWith('acted past its stop time'));

test('a fake call past its stop time is caught; the twin, paused at the same send inside sendOnce, is covered by its key', async () => {
  const faults = [pauseAt('fakes.send')];
  const bug = await placed('effect-before-check', faults);
  assert.match(builtIn(bug)[0] ?? '', /worker-1 sent fakes\.send at 20000 ms on its clock .*after worker-2 claimed/);
  const twin = await placed('none', faults);
  assert.deepEqual(twin.violations, []);
  // The twin's send did go out past its stop time, after worker-2's claim: what covers it is the intent its key has.
  const trace = (
    await exploreJob({ job: digestJob(lib, 'none'), fakes: () => new PretendMail(), check: () => ['show'], seed: 1, schedules: 1, placed: faults })
  ).violations[0].trace;
  const claimed = trace.findIndex((l) => / worker-2 claim$/.test(l));
  const sent = trace.findIndex((l) => / worker-1 sends fakes\.send at 20000 ms on its clock$/.test(l));
  assert.ok(claimed >= 0 && sent > claimed, trace.join('\n'));
});

test('a plain write past its stop time is caught, and it overwrites the newer holder; the twin writes it through the fence', async () => {
  // The status write, right after its check: a plain put in the bug, the fenced batch (worker-1's 2nd) in the twin.
  const faults = [pauseAt('tables.put'), pauseAt('recordBatch', 2)];
  const bug = await placed('plain-put', faults);
  assert.match(builtIn(bug)[0] ?? '', /worker-1 sent tables\.put at 20000 ms on its clock .*after worker-2 claimed/);
  // With no retry after it (one attempt each), the row left at the end is the stale holder's, written over worker-2's.
  const seen: Record<string, unknown>[] = [];
  await exploreJob({
    attempts: 1,
    job: digestJob(lib, 'plain-put'),
    fakes: () => new PretendMail(),
    check: ({ items }) => (seen.push(...items('digest-status')), []),
    seed: 1,
    schedules: 1,
    placed: faults,
  });
  assert.equal(seen[0]?.by, 'worker-1', 'the stale holder wrote the status row last');
  assert.deepEqual((await placed('none', faults)).violations, []);
});
