/**
 * The PostgreSQL fence's world (verify/explore/postgres-world.ts): withLease and the real PostgresFence on the twin,
 * PostgreSQL's row locks or Aurora DSQL's optimistic commits, every lock call and statement a step of the seeded
 * scheduler. Its checks read the twin's committed history: a row committed below the fence, a fence that went down,
 * a batch split over commits, no holder finishing. Each of its mutations is caught by the check it was written for.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runWorld } from '../../lib/testing/world';
import { POSTGRES_MUTATIONS, POSTGRES_WORLD } from '../../verify/explore/postgres-world';
import type { Placed } from '../../lib/testing/scheduler';

const run = (seed: number, mutation?: string, placed?: Placed) => runWorld(POSTGRES_WORLD, seed, mutation, placed);

test('300 schedules from seed 1 on the real code: no violation, on PostgreSQL and on Aurora DSQL alike', async () => {
  const failed: { seed: number; violations: readonly string[] }[] = [];
  const kinds = new Set<string>();
  for (let seed = 1; seed <= 300; seed++) {
    const r = await run(seed);
    kinds.add(r.trace[0].replace(/^\d+ /, ''));
    if (r.violations.length > 0) failed.push({ seed, violations: r.violations });
  }
  assert.deepEqual(failed, []);
  assert.deepEqual([...kinds].sort(), ['postgres world: Aurora DSQL (optimistic)', 'postgres world: PostgreSQL (row locks)']);
});

// holder-1 pauses as its first fenced transaction takes its connection, right after its passed check, for longer
// than its lease: holder-2 (started 100 ms later) takes the lease over and raises the fence meanwhile.
const STALE: Placed = { faults: [{ actor: 'holder-1', method: 'connect', nth: 2, kind: 'pause', ms: 2_500 }] };

test('the stale holder, placed: its transaction after the pause is refused by the fence, and nothing of it commits', async () => {
  for (const seed of [1, 2, 3, 4]) {
    const r = await run(seed, undefined, STALE);
    assert.deepEqual(r.violations, [], `seed ${seed}`);
    assert.ok(
      r.trace.some((l) => / holder-1 ends with FencedOutError/.test(l)),
      `seed ${seed}: holder-1 is refused:\n${r.trace.join('\n')}`,
    );
    assert.ok(
      r.trace.some((l) => / holder-2 ends done/.test(l)),
      `seed ${seed}: holder-2 finishes`,
    );
  }
});

test("pg-count-unchecked (a fenced transaction that ignores the UPDATE's row count): caught by the history check, placed and explored", async () => {
  for (const seed of [1, 2, 3, 4]) {
    const r = await run(seed, 'pg-count-unchecked', STALE);
    assert.ok(
      r.violations.some((v) => /holder-1:1:0:0 committed with token 1 at commit \d+, the fence then at [2-9]/.test(v)),
      `seed ${seed}: ${r.violations.join('; ')}`,
    );
  }
  // Explored: the seeded scheduler finds it on its own, schedule after schedule (a fixed range: the same every run).
  let caught = 0;
  for (let seed = 1001; seed < 1201; seed++) if ((await run(seed, 'pg-count-unchecked')).violations.length > 0) caught++;
  assert.ok(caught >= 10, `caught in ${caught} of 200 schedules`);
});

// Each broken rule, applied by the harness only, must be caught from seed 42 within this many schedules.
const WITHIN = 100;
for (const mutation of POSTGRES_MUTATIONS) {
  test(`the broken variant ${mutation} is caught from seed 42 within ${WITHIN} schedules, and that schedule passes on the real code`, async () => {
    let caught: number | undefined;
    for (let seed = 42; seed < 42 + WITHIN && caught === undefined; seed++) if ((await run(seed, mutation)).violations.length > 0) caught = seed;
    assert.notEqual(caught, undefined, `${mutation} not caught in ${WITHIN} schedules from seed 42`);
    assert.deepEqual((await run(caught!)).violations, [], `the same schedule (seed ${caught}) on the real code must pass`);
  });
}

// holder-1 pauses as its raise takes its connection, for longer than its lease: holders 2 and 3 take the lease over
// in turn, raise the fence and finish; then holder-1's raise lands.
const LATE_RAISE: Placed = { faults: [{ actor: 'holder-1', method: 'connect', nth: 1, kind: 'pause', ms: 2_500 }] };

test('pg-raise-unguarded (the raise a plain upsert), placed: the late raise puts the fence down, and only that check sees it', async () => {
  for (const seed of [1, 2, 3, 4]) {
    assert.deepEqual((await run(seed, undefined, LATE_RAISE)).violations, [], `seed ${seed}: the real raise is refused`);
    const r = await run(seed, 'pg-raise-unguarded', LATE_RAISE);
    assert.deepEqual(r.caughtBy, ['the fence never goes down'], `seed ${seed}`);
    assert.match(r.violations[0], /^the fence went from 3 down to 1 at commit \d+$/);
  }
});

// holder-1's fenced UPDATE is applied (the fence row locked) and its answer lost: a transient error the fence does not
// retry, so holder-1 ends there.
const LOST_UPDATE: Placed = { faults: [{ actor: 'holder-1', method: 'query', nth: 3, kind: 'lost' }] };

test('pg-leak-on-error (no rollback, no release after a failed statement), placed: under row locks the leaked lock stops every holder, and only liveness sees it', async () => {
  const servers = new Set<string>();
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const honest = await run(seed, undefined, LOST_UPDATE);
    assert.deepEqual(honest.violations, [], `seed ${seed}: the real code rolls back and the others finish`);
    const r = await run(seed, 'pg-leak-on-error', LOST_UPDATE);
    const locking = r.trace[0].includes('row locks');
    servers.add(r.trace[0]);
    // Aurora DSQL takes no locks: the leaked transaction holds nothing, and the others finish.
    assert.deepEqual(r.caughtBy, locking ? ['once the faults end, a holder writes every batch'] : [], `seed ${seed}`);
  }
  assert.equal(servers.size, 2, 'both kinds of server among the seeds');
});

test('pg-begin-with-isolation-only (no BEGIN at the default isolation): every batch lands over several commits', async () => {
  const r = await run(1, 'pg-begin-with-isolation-only');
  assert.ok(r.caughtBy.includes('each batch commits whole'), r.violations.join('; '));
  assert.ok(
    r.violations.some((v) => /^batch holder-1:1:0: 2 rows over 2 commits$/.test(v)),
    r.violations.join('; '),
  );
});

// holder-1's first transaction slow on the wire for 1.5 s (its process runs on: its heartbeat renews every 300 ms)
// while holder-2, started at 100 ms, watches the lock's rvn. The real renewals change the rvn: holder-2 waits for
// holder-1's release. A renewal that keeps the rvn shows holder-2 a lease unchanged for a whole lease: it claims at
// 1.1 s while holder-1's lease runs, and only the lease check, read from the lock table's applied writes, sees it (the
// fence refuses holder-1 afterwards: the rows stay safe, the lease's promise does not).
const SLOW_FIRST_TRANSACTION: Placed = { faults: [{ actor: 'holder-1', method: 'connect', kind: 'slow', ms: 1_500 }] };

test('lease-renew-keeps-rvn, placed: a claimant takes a live lease over, and only "no claim while another lease runs" sees it', async () => {
  for (const seed of [1, 2, 3]) {
    const honest = await run(seed, undefined, SLOW_FIRST_TRANSACTION);
    assert.deepEqual(honest.violations, [], `seed ${seed}`);
    assert.ok(
      honest.trace.some((l) => / holder-1 connect SLOW 1500 ms /.test(l)),
      honest.trace.join('\n'),
    );
    const r = await run(seed, 'lease-renew-keeps-rvn', SLOW_FIRST_TRANSACTION);
    assert.deepEqual(r.caughtBy, ['no claim while another lease runs'], r.violations.join('; '));
    assert.match(r.violations[0], /^holder-2 claimed ship#2026-12-01 at 1100 ms while holder-1's lease ran to \d+(\.\d+)? ms$/);
  }
});
