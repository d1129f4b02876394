/**
 * `fencepost story`: the five beats with real processes, and the table built from the events they emitted; and the
 * simulator's prediction of the same schedule (verify/sim-reality.ts), compared with what the processes did.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { localClients } from '../../lib/core/aws/clients';
import { predictStory } from '../../verify/sim-reality';
import { playStory, storyTable } from '../../verify/story';
import { endpoints } from '../support/stack';

/**
 * The time scale the story plays at here. A's and B's leases are the reference's scaled by it (their running out is
 * their beats: B waits out A's, the sweeper and C wait out B's), so it sets both the story's length and how late a
 * renewal may come before a holder's stop time: lease - margin - renew, 10 - 2 - 3 = 5 s at scale 1. At 0.25 that is
 * 1.25 s, and on a 2-core machine at load 17 A's first renewal, in its cold process, came 0.95 s late (C, at load 15,
 * lost its lease that way once); 0.5 leaves 2.5 s. C has the reference's own lease whatever the scale (takeoverLease).
 */
const TIME_SCALE = 0.5;

test(
  'the story: A freezes, B fences A out, B dies, the sweeper re-queues, C completes; every row from a real event',
  { timeout: 300_000 },
  async () => {
    const ep = await endpoints();
    const clients = localClients(ep);
    try {
      const result = await playStory(ep, clients, TIME_SCALE);
      const find = (actor: string, event: RegExp) => result.rows.find((r) => r.actor === actor && event.test(r.event));
      const order = [
        find('A', /claims the lease/),
        find('A', /freezes/),
        find('B', /claims the lease/),
        find('B', /raises the fence/),
        find('A', /late batch REFUSED/),
        find('story', /SIGKILL B/),
        find('sweeper', /re-queues/),
        find('C', /claims the lease/),
        find('C', /completes the night/),
        find('C', /releases the lock/),
      ];
      assert.ok(order.every(Boolean), `every beat happened:\n${storyTable(result)}`);
      const times = order.map((r) => r!.t);
      assert.deepEqual(
        times,
        [...times].sort((x, y) => x - y),
        "in the story's order",
      );
      assert.deepEqual([order[0]!.token, order[2]!.token, order[7]!.token], [1, 2, 3], 'each takeover has a higher token');
      assert.equal(order[4]!.fence, 2, "A's late batch met the fence B raised");
      assert.equal(order[6]!.state, 'RUNNING', 'a re-queue leaves the row RUNNING in the index until the next raise');
      assert.equal(order[8]!.state, 'DONE');
      assert.ok(result.audit.ok, storyTable(result));
      assert.equal(result.audit.invoicesFound, 2000);
      assert.match(storyTable(result), /t \(s\)\s+actor\s+event\s+token\s+fence\s+state/);
      // The check against reality (docs/SIMULATOR.md): the same code on virtual time and the in-memory stores, given
      // the story's schedule at the same time scale, predicts the same token order, the fence A's late batch met, the
      // state right after the re-queue (RUNNING: the project's sweeper leaves the row in the index) and at the end.
      const predicted = await predictStory(TIME_SCALE);
      assert.deepEqual(
        result.rows.filter((r) => /claims the lease/.test(r.event)).map((r) => `${r.actor}:${String(r.token)}`),
        predicted.tokens.map((t) => `${t.actor}:${t.token}`),
        'the same claims, in the same order, with the same tokens',
      );
      assert.equal(
        result.rows.filter((r) => /re-queues/.test(r.event)).length,
        predicted.requeues,
        `the sweeper re-queues as often as predicted (each re-queue starts another C):\n${storyTable(result)}`,
      );
      assert.equal(order[4]!.fence, predicted.lateBatchFence);
      assert.equal(order[6]!.state, predicted.requeuedState);
      assert.equal(result.audit.state, predicted.finalState);
    } finally {
      clients.destroy();
    }
  },
);
