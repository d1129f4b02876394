/**
 * `exploreJob` (fencepost/testing) finds the bugs users write in their own jobs: each planted bug below is caught
 * within a few hundred schedules from a fixed seed, and its correct twin passes the same schedules. The correct job
 * is the README's (examples/readme/digests.test.ts); each bug changes one line of it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fenceOn } from '../../lib/core/fence';
import { withLease } from '../../lib/core/with-lease';
import { writeFenced } from '../../lib/core/batch';
import { exploreJob, type JobEnd, type JobWorker } from '../../lib/testing/explore-job';

/** A pretend mail API: a call with a key is delivered once per key; one without a key is delivered every time. */
class PretendMail {
  readonly deliveries: { to: string; key?: string }[] = [];
  async send(to: string, key?: string): Promise<string> {
    if (key === undefined || !this.deliveries.some((d) => d.key === key)) this.deliveries.push({ to, key });
    return `msg-${this.deliveries.length}`;
  }
  got(to: string): number {
    return this.deliveries.filter((d) => d.to === to).length;
  }
}

const USERS = ['ana', 'bo', 'cy'];
type Bug = 'none' | 'plain-send' | 'item-not-from-key' | 'retry-changes-data';

function digestJob(bug: Bug) {
  return async ({ name, stores, clock, random, fakes: mail }: JobWorker<PretendMail>): Promise<void> => {
    const job = 'digest#2026-W49';
    await withLease({ locks: stores.locks, clock, random }, job, name, { leaseMs: 10_000, renewMs: 3_000, marginMs: 2_000 }, async (lease) => {
      const held = lease.fenced(fenceOn({ fences: stores.jobs, table: 'jobs', key: { pk: job }, clock, random }));
      await lease.act(() => held.raise());
      const rows = USERS.map((user) => ({
        pk: `${job}#${user}`,
        user,
        token: lease.token,
        // BUG item-not-from-key: who wrote it is in the item, so the next holder's redo writes something else.
        ...(bug === 'item-not-from-key' ? { sentBy: name } : {}),
        // BUG retry-changes-data: the time of the attempt is in the item, so a retry changes what is recorded.
        ...(bug === 'retry-changes-data' ? { at: clock.wallMs() } : {}),
      }));
      await writeFenced(held, rows, { table: 'digests', check: () => lease.check() });
      for (const user of USERS) {
        if (bug === 'plain-send') {
          lease.check();
          await mail.send(user); // BUG plain-send: the call is not through sendOnce: a redo sends it again
        } else await held.sendOnce(`digest#${user}`, (key) => mail.send(user, key));
      }
    });
  };
}

const check = ({ fakes: mail, items, finished }: JobEnd<PretendMail>): string[] => [
  ...USERS.filter((u) => mail.got(u) > 1 || (finished > 0 && mail.got(u) !== 1)).map((u) => `${u} got the digest ${mail.got(u)} times`),
  ...(finished > 0 && items('digests').length !== USERS.length ? [`${items('digests').length} digests recorded`] : []),
];

const SCHEDULES = 300;
const explore = (bug: Bug) => exploreJob({ job: digestJob(bug), fakes: () => new PretendMail(), check, seed: 1, schedules: SCHEDULES });

test(`the correct digest job passes ${SCHEDULES} schedules; the same seed gives the same digest`, async () => {
  const [a, b] = [await explore('none'), await explore('none')];
  assert.deepEqual(a.violations, [], JSON.stringify(a.violations[0]?.violations));
  assert.equal(b.digest, a.digest);
  const kinds = new Set(Object.keys(a.faults).map((f) => f.split(' ')[0]));
  for (const kind of ['pause', 'crash', 'lost']) assert.ok(kinds.has(kind), `${kind} faults were injected: ${[...kinds].join(', ')}`);
  console.log(`correct twin: 0 violations in ${SCHEDULES} schedules; faults: ${JSON.stringify(a.faults)}`);
});

for (const [bug, caughtBy] of [
  ['plain-send', /got the digest [2-9] times/],
  ['item-not-from-key', /derive each item from its key/],
  ['retry-changes-data', /derive each item from its key/],
] as const) {
  test(`planted bug ${bug}: caught, with a seed that replays it`, async () => {
    const r = await explore(bug);
    assert.ok(r.violations.length > 0, `${bug} is caught`);
    assert.ok(
      r.violations.every((v) => v.violations.some((line) => caughtBy.test(line))),
      JSON.stringify(r.violations[0].violations),
    );
    const first = r.violations[0];
    const again = await exploreJob({ job: digestJob(bug), fakes: () => new PretendMail(), check, seed: first.seed, schedules: 1 });
    assert.deepEqual(again.violations[0]?.trace, first.trace, 'the seed replays the schedule exactly');
    console.log(`${bug}: caught in ${r.violations.length} of ${SCHEDULES} schedules from seed 1 (first seed ${first.seed})`);
  });
}
