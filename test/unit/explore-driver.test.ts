/**
 * The explorer's one driver (lib/testing/world.ts runWorld): every world runs under a turn limit, so a loop that
 * takes no virtual time ends the schedule with a violation and its trace, instead of hanging the run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ELECTION_WORLD } from '../../verify/explore/election-world';
import { Actor } from '../../lib/testing/scheduler';
import { NIGHT_WORLD } from '../../verify/explore/night-world';
import { explore } from '../../verify/explore/explore';
import { runWorld, SEEN_DURING_RUN, TURN_LIMIT, type ScheduleResult } from '../../lib/testing/world';

type ElectionState = Parameters<typeof ELECTION_WORLD.actors>[0];

/**
 * The election world with one more actor planted: it reads the ledger store through the scheduler again and again,
 * each answer starting the next read, so virtual time never has to pass. A crashed looper is replaced at once, so
 * the fault injection cannot end the loop either.
 */
const LOOPING = {
  ...ELECTION_WORLD,
  actors: (w: ElectionState) => {
    ELECTION_WORLD.actors(w);
    const start = (n: number): void => {
      const looper = new Actor(`looper-${n}`, w.clock);
      w.restarts.set(looper, () => (start(n + 1), 0));
      const ledgers = w.scheduler.wrap(w.ledgers, looper);
      const read = (): void => void ledgers.head('loop').then(read, read);
      read();
    };
    start(1);
  },
};

// Without the limit this schedule never ends: the timeout fails the test instead of hanging it.
test(
  "a loop that takes no virtual time, planted in the election world, stops at the world's turn limit as a violation",
  { timeout: 60_000 },
  async () => {
    const r = await runWorld(LOOPING, 2);
    const limit = ELECTION_WORLD.maxTurns;
    assert.match(r.violations[0] ?? '', new RegExp(`^the schedule hit its turn limit \\(${limit} turns\\) at \\d+ ms`));
    assert.match(r.trace.at(-2) ?? '', new RegExp(`stopped after ${limit} turns: the actors loop without time passing$`));
    assert.ok(r.caughtBy.includes(TURN_LIMIT), `caught by: ${r.caughtBy.join('; ')}`);
    // The violation comes with its trace, and the seed replays it exactly.
    assert.deepEqual((await runWorld(LOOPING, 2)).trace, r.trace);
  },
);

// Which check caught each schedule: every violating schedule names at least one (a world's check, what the harness saw
// during the run, or the turn limit), a passing one none; the summary's tallies are those of the schedules themselves.
test('each violating schedule says which checks caught it, and the summary counts each check and where it was alone', async () => {
  const results: ScheduleResult[] = [];
  const summary = await explore(1001, 120, { world: 'night', mutation: 'fence-below', onSchedule: (r) => void results.push(r) });
  const names = new Set([SEEN_DURING_RUN, TURN_LIMIT, ...NIGHT_WORLD.checks.map((c) => c.name)]);
  assert.ok(summary.violations.length > 0);
  for (const r of results) {
    assert.equal(r.caughtBy.length > 0, r.violations.length > 0, `seed ${r.seed}`);
    for (const c of r.caughtBy) assert.ok(names.has(c), c);
  }
  const tally: Record<string, { schedules: number; alone: number }> = {};
  for (const r of results)
    for (const c of r.caughtBy) {
      const t = (tally[`night: ${c}`] ??= { schedules: 0, alone: 0 });
      t.schedules++;
      if (r.caughtBy.length === 1) t.alone++;
    }
  assert.deepEqual({ ...summary.caughtBy }, tally);
  assert.deepEqual((await explore(1001, 40, { world: 'night' })).caughtBy, {});
});
