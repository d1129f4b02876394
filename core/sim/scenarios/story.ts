/**
 * The main story, S1–S6 (reference Parts 2, 3, 4, 6, 8 and 12): A holds the billing job on a 3-node lock service,
 * freezes, B takes over with a higher token and raises the fence first, A's late chunk is refused, B dies, the
 * sweeper re-queues the orphan, C takes over, the lock service's leader dies while C holds the job, C releases.
 *
 * The script sets only the schedule the reference assumes: A's 15 s pause at 4.0 (after its check at 3.9), B's
 * acquire attempts every 1.5 s, B's death at 21.0, other jobs' keys on the same service (they move the revision
 * counter on), the sweeper every 10 s, the leader's death at 47.0 and a 2.1 s election, a 50 ms network to the
 * store. Tokens, stop times, deadlines, refusals and takeover times come out of the models.
 */
import { Sim } from '../engine';
import { Holder, type LeaseTiming } from '../holder';
import { ConsensusLockService, LockClient } from '../lock-service';
import { Checks, s, type Scenario } from '../scenario';
import { FencedStore, Manifest } from '../store';
import { SimSweeper } from '../sweeper';
import { Network, Worker } from '../worker';

const JOB = 'billing:2026-09-28';
/** Part 0: a 10 s lease renewed every 3 s; Part 2: a 2 s margin. */
export const STORY_TIMING: LeaseTiming = { leaseMs: 10_000, renewMs: 3_000, marginMs: 2_000 };
/** A worker's local step between its grant and its first write (it records its stop time, builds the raise). */
const STEP_MS = 50;

interface Variant {
  /** The lock service's leader (n1) dies at. */
  readonly leaderDiesAt?: number;
  /** C dies at (the "had C died at 47.0" what-if). */
  readonly cDiesAt?: number;
  /** etcd's lease checkpoint, every ms. */
  readonly checkpointMs?: number;
}

/** One run of the story; the variants answer the reference's "had C died at 47.0" with and without the failover. */
function playMainStory(v: Variant = { leaderDiesAt: 47_000 }) {
  const T = STORY_TIMING;
  const sim = new Sim(1);
  const svc = new ConsensusLockService(sim, { revision: 6, electionMs: 2_100, checkpointMs: v.checkpointMs });
  const lockNet = new Network(sim);
  const storeNet = new Network(sim, { delayMs: 50 });
  const store = new FencedStore(sim);
  const manifest = new Manifest(sim);
  const [A, B, C] = ['A', 'B', 'C'].map((n) => new Worker(sim, n));
  A.pause(4_000, 15_000, 'a GC pause, or a VM paused for live migration');
  B.crash(21_000);
  if (v.cDiesAt !== undefined) C.crash(v.cDiesAt);
  if (v.leaderDiesAt !== undefined) svc.crashNode(0, v.leaderDiesAt);
  // Other jobs' keys on the same service: each moves the revision counter on, nothing else.
  for (const t of [5_000, 8_000, 11_000, 35_000]) sim.at(t, () => svc.put(`other-job-${t / 1000}s`));

  const holders = new Map<string, Holder>();
  const leaseIds = new Map<string, number>();
  const keyDeletedAt: number[] = [];
  const etags = new Map<string, string>();
  let releasedRevision: number | undefined;

  /** ACQUIRE (Part 2), then, one step later, raise the fence first (Part 4): on the job row and on the manifest. */
  const take = (w: Worker, client: LockClient, onRefused: () => void, then: (h: Holder) => void) => {
    const sentAtMono = w.monotonicNow(); // read BEFORE sending
    client.acquire(JOB, T.leaseMs, (r) => {
      if (!r?.ok) return onRefused();
      const h = new Holder(w, r.revision, T, sentAtMono, client.keepAlive(r.leaseId));
      holders.set(w.name, h);
      leaseIds.set(w.name, r.leaseId);
      svc.watchDelete(JOB, () => keyDeletedAt.push(sim.now));
      sim.log(w.name, 'acquires the lock', {
        token: r.revision,
        note: `revision ${r.revision}; service deadline ${s(svc.deadlineOf(r.leaseId))}; own stop time ${s(h.stopAtTrue())}`,
      });
      w.afterMonotonic(STEP_MS, () => {
        storeNet.call(
          w,
          store.name,
          () => store.raise(w.name, h.token) ?? false,
          (old) => (old === false ? h.end('fenced out at the raise') : then(h)),
        );
        storeNet.call(
          w,
          'manifest',
          () => manifest.putIfMatch(w.name, manifest.read().etag, h.token) ?? '',
          (etag) => etag && etags.set(w.name, etag),
        );
      });
    });
  };
  /** A fenced write of one batch, and (for a chunk's last batch) its manifest commit with If-Match. */
  const write = (w: Worker, h: Holder, batch: string, commitChunk?: string) => {
    storeNet.call(
      w,
      store.name,
      () => store.write(w.name, h.token, batch, 2_500),
      (ok) => {
        if (ok === false) h.end('write refused: it has lost the lock; stops and discards local state');
      },
    );
    if (commitChunk)
      storeNet.call(
        w,
        'manifest',
        () => manifest.putIfMatch(w.name, etags.get(w.name) ?? 'none', h.token, commitChunk) ?? '',
        (etag) => etag && etags.set(w.name, etag),
      );
  };
  /** BEFORE EVERY ACTION (Part 2): the holder's own check, logged. */
  const check = (h: Holder) => {
    const ok = h.mayAct();
    sim.log(h.worker.name, `checks its stop time: ${ok ? 'passes' : 'passed: stops'}`, { token: h.token, note: `stop time ${s(h.stopAtTrue())}` });
    return ok;
  };

  // S1: A acquires at 0.0, writes chunk 1, builds chunk 2, checks at 3.9 and sends at 4.0: the pause lands in between.
  const clientA = new LockClient(svc, lockNet, A);
  A.act(0, () =>
    take(
      A,
      clientA,
      () => undefined,
      (h) => {
        A.act(450, () => write(A, h, 'chunk 1 batch 1'));
        A.act(950, () => write(A, h, 'chunk 1 batch 2', 'chunk 1'));
        A.act(3_900, () => check(h) && A.act(4_000, () => write(A, h, 'chunk 2', 'chunk 2')));
      },
    ),
  );

  // S2–S3: B tries every 1.5 s on its own clock; its first act is the raise; it writes, then dies at 21.0.
  const clientB = new LockClient(svc, lockNet, B);
  const tryB = () =>
    take(
      B,
      clientB,
      () => B.afterMonotonic(1_500, tryB),
      (h) => {
        B.afterMonotonic(300, () => write(B, h, 'chunk 2 batch 1 (B)'));
        B.afterMonotonic(6_300, () => check(h) && write(B, h, 'chunk 2 batch 2 (B)', 'chunk 2'));
      },
    );
  B.act(1_500, tryB);

  // S4–S6: the sweeper finds the orphan; C takes the re-queued job 0.2 s later, works, completes, releases.
  const clientC = new LockClient(svc, lockNet, C);
  new SimSweeper(
    sim,
    store,
    () => {
      const live = svc.isLive(JOB);
      return live === undefined ? undefined : live ? 'live' : 'no live key';
    },
    () =>
      C.act(sim.now + 200, () =>
        take(
          C,
          clientC,
          () => undefined,
          (h) => {
            for (let i = 3; i <= 6; i++) C.afterMonotonic(i * 2_500 - 6_800, () => check(h) && write(C, h, `chunk ${i} (C)`, `chunk ${i}`));
            C.act(51_900, () => {
              if (!check(h)) return;
              storeNet.call(
                C,
                store.name,
                () => store.complete('C', h.token),
                (ok) => {
                  if (!ok) return;
                  clientC.revoke(leaseIds.get('C')!, (rev) => {
                    releasedRevision = rev;
                    h.end('releases the lock: revokes its lease', `key deleted at once, revision ${rev}`);
                  });
                },
              );
            });
          },
        ),
      ),
  );

  sim.run(75_000);
  for (const h of holders.values()) h.markHeld();
  return { sim, svc, store, holders, keyDeletedAt, releasedRevision };
}

export const mainStoryScenario: Scenario = {
  name: 'main-story',
  title: 'The main story S1–S6: A freezes, B fences it out, B dies, the sweeper re-queues, C survives a leader failover',
  claim: 'Parts 2, 3, 4, 6, 8, 12: the fence, not the lease, stops the zombie; a failover only ever lengthens a lease',
  run() {
    const run = playMainStory();
    const { sim, holders, store } = run;
    const [a, b, c] = ['A', 'B', 'C'].map((n) => holders.get(n)!);
    const row = (actor: string, re: RegExp) => sim.rows.find((r) => r.actor === actor && re.test(r.event));
    const refused = row('A', /REFUSED by the fence/);
    const raiseB = row('B', /raises the fence/);
    const aRenew = row('A', /^renews$/);
    const late412 = row('A', /412/);
    // The two what-ifs of Part 8: C dies at 47.0, with and without the leader dying with it.
    const withFailover = playMainStory({ leaderDiesAt: 47_000, cDiesAt: 47_000 });
    const noFailover = playMainStory({ cDiesAt: 47_000 });
    const checks = new Checks()
      .eq('A acquires at (s)', 0, s(a.since))
      .eq("A's token (the key's revision)", 7, a.token)
      .eq("A's first stop time: 0.0 + 10 - 2", 8, s(a.worker.clock.trueAtMonotonic(0 + 10_000 - 2_000)))
      .eq('A renews at (s)', 3, s(aRenew?.t))
      .eq("A's stop time after the renewal sent at 3.0", 11, s(a.stopAtTrue()))
      .eq('B acquires at (s)', 13.5, s(b.since))
      .eq("B's token", 12, b.token)
      .eq("B's stop time: 13.5 + 10 - 2", 21.5, s(b.since + 10_000 - 2_000))
      .eq('B raises the fence at (s)', 13.6, s(raiseB?.t))
      .eq("A's late write meets the store at (s)", 19.05, s(refused?.t))
      .eq("A's late write carries token", 7, refused?.token)
      .eq("A's late write meets fence", 12, refused?.fence)
      .eq("A's manifest commit names the ETag it last saw", true, /If-Match "E2"/.test(late412?.event ?? ''))
      .eq('and S3 answers 412 at (s)', 19.05, s(late412?.t))
      .eq("B's last renewal the service applied (s)", 19.5, s(b.renewals.at(-1)))
      .eq('earliest safe takeover: 19.5 + 10', 29.5, s(b.renewals.at(-1)! + 10_000))
      .eq("B's key deleted by the service at (s)", 29.5, s(run.keyDeletedAt[1]))
      .eq('the sweeper re-queues with a conditional write at (s)', 40, s(row('sweeper', /re-queues/)?.t))
      .eq('C acquires at (s)', 40.2, s(c.since))
      .eq("C's token", 15, c.token)
      .eq("C's renewal that fails was sent at (s)", 49.2, s(c.failedRenewals[0]))
      .eq("C's stop time when it failed (s)", 54.2, s(c.renewals.filter((t) => t < 49_200).at(-1)! + 10_000 - 2_000))
      .eq('C was still inside its stop time', true, c.failedRenewals[0] < c.renewals.filter((t) => t < 49_200).at(-1)! + 8_000)
      .eq('had C died at 47.0 with the leader: its key lasts until (s)', 59.1, s(withFailover.keyDeletedAt.at(-1)))
      .eq('had C died at 47.0, no failover: its key lasts until (s)', 56.2, s(noFailover.keyDeletedAt.at(-1)))
      .eq('C releases at (s)', 52, s(c.ended?.at))
      .eq('the release deletes the key at revision', 16, run.releasedRevision)
      .eq('S6: the row is DONE', 'DONE', store.row.state)
      .eq('S6: the fence is', 15, store.row.fence)
      .eq('invoices written twice', 0, store.writtenTwice().length);
    return { name: this.name, title: this.title, claim: this.claim, rows: sim.rows, marks: sim.marks, checks: checks.list };
  },
};
