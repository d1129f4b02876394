// Test your job the way Fencepost tests itself: two workers run it on in-memory stores and one virtual clock, under a
// seeded scheduler that pauses, crashes and loses answers at every store call. No DynamoDB, no Java, no real time:
// `npx tsx --test digests.test.ts` (node:test here; vitest and jest run it the same way).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fenceOn, withLease, writeFenced } from 'fencepost';
import { exploreJob, type JobWorker } from 'fencepost/testing';

/** A pretend mail API that deduplicates by idempotency key, as a real one would, and counts what it delivered. */
class PretendMail {
  readonly delivered = new Map<string, string>(); // idempotency key -> recipient
  async send(to: string, idempotencyKey: string): Promise<string> {
    if (!this.delivered.has(idempotencyKey)) this.delivered.set(idempotencyKey, to);
    return `msg-${this.delivered.size}`;
  }
}

const USERS = ['ana', 'bo', 'cy'];

/** The job under test: claim the week's lease, raise its fence, record each digest and send it once. */
async function weeklyDigest({ name, stores, clock, random, fakes: mail }: JobWorker<PretendMail>): Promise<void> {
  const job = 'digest#2026-W49';
  await withLease({ locks: stores.locks, clock, random }, job, name, { leaseMs: 10_000, renewMs: 3_000, marginMs: 2_000 }, async (lease) => {
    const held = lease.fenced(fenceOn({ fences: stores.jobs, table: 'jobs', key: { pk: job }, clock, random }));
    await lease.act(() => held.raise());
    const rows = USERS.map((user) => ({ pk: `${job}#${user}`, user, token: lease.token })); // derived from the key
    await writeFenced(held, rows, { table: 'digests', check: () => lease.check() });
    for (const user of USERS) await held.sendOnce(`digest#${user}`, (key) => mail.send(user, key));
  });
}

test('the weekly digest: each digest recorded once and delivered once, whatever pauses or dies where', async () => {
  const result = await exploreJob({
    job: weeklyDigest,
    fakes: () => new PretendMail(),
    // Yours, over the end of each schedule: never a digest twice; once the job finished, every digest, recorded once.
    check: ({ fakes: mail, items, finished }) => {
      const got = (user: string) => [...mail.delivered.values()].filter((to) => to === user).length;
      const due = finished > 0 ? 1 : undefined;
      return [
        ...USERS.filter((u) => got(u) > 1 || (due !== undefined && got(u) !== due)).map((u) => `${u} got the digest ${got(u)} times`),
        ...(due === undefined || items('digests').length === USERS.length ? [] : [`${items('digests').length} digests recorded`]),
      ];
    },
    workers: 2,
    seed: 1,
    schedules: 200,
  });
  assert.deepEqual(result.violations, [], JSON.stringify(result.violations[0], null, 1));
});
