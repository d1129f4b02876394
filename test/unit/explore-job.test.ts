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
import { exploreJob } from '../../lib/testing/explore-job';
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
    assert.ok(r.violations.length > 0, `${bug} is caught`);
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
