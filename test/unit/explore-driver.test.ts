/**
 * The explorer's one driver (verify/explore/world.ts runWorld): every world runs under a turn limit, so a loop that
 * takes no virtual time ends the schedule with a violation and its trace, instead of hanging the run.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ELECTION_WORLD } from '../../verify/explore/election-world';
import { Actor } from '../../lib/testing/scheduler';
import { runWorld } from '../../verify/explore/world';

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
    // The violation comes with its trace, and the seed replays it exactly.
    assert.deepEqual((await runWorld(LOOPING, 2)).trace, r.trace);
  },
);
