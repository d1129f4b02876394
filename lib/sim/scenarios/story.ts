/**
 * The reference's main story on its lock service, S1–S6, on the models: the
 * project implements no lock service (its lease is a lock item, and its main story runs on the real code in
 * night.ts), so the tokens that are the service's revisions (7, 12, 15) and the leader's failover (59.1 against 56.2)
 * are checked here. A holds the billing job on a 3-node lock service,
 * freezes, B takes over with a higher token and raises the fence first, A's late chunk is refused, B dies, the
 * sweeper re-queues the orphan, C takes over and bills the rest of the night's 10 chunks of 5,000, the lock service's
 * leader dies while C holds the job, C releases.
 *
 * The inputs (`MainStoryInputs`) are the schedule the reference assumes, each stated with where it comes from; the
 * models compute tokens, stop times, deadlines, refusals and takeovers; every check computes the number it expects
 * from the inputs by the reference's own formulas, so a changed input moves both sides.
 */
import { Sim } from '../engine';
import { Holder, type LeaseTiming } from '../holder';
import { ConsensusLockService, LockClient } from '../lock-service';
import { Checks, s, type Scenario, type ScenarioInput, type ScenarioResult } from '../scenario';
import { FencedStore, Manifest } from '../store';
import { SimSweeper } from '../sweeper';
import { Network, Worker } from '../worker';

const JOB = 'billing:2026-09-28';
/** The story's settings: a 10 s lease renewed every 3 s, a 2 s margin. */
export const STORY_TIMING: LeaseTiming = { leaseMs: 10_000, renewMs: 3_000, marginMs: 2_000 };

/** What the main story assumes. Durations and times in ms of true time. */
export interface MainStoryInputs extends LeaseTiming {
  /** Chunks in the night (10). */
  readonly chunks: number;
  /** Invoices in a chunk (5,000). */
  readonly chunkSize: number;
  /** The lock service's revision before A's acquire (other keys were written before): A's token is the next. */
  readonly revisionBefore: number;
  /** Other jobs' keys created on the same service: each moves the revision counter on, nothing else. */
  readonly otherKeysAt: readonly number[];
  /** A freezes at (right after its check for chunk 2, 0.1 s earlier) and for how long. */
  readonly pauseAt: number;
  readonly pauseMs: number;
  /** B tries to acquire every (on its own clock, from this time on). */
  readonly bTriesEveryMs: number;
  /** B dies holding the job at this time. */
  readonly bDiesAt: number;
  /** The sweeper sweeps every, and re-queues on a second sighting at least this long after the first. */
  readonly sweepEveryMs: number;
  readonly sweepConfirmMs: number;
  /** C takes the re-queued job this long after the re-queue. */
  readonly cStartsAfterMs: number;
  /** C sends one chunk every (its pace). */
  readonly cChunkMs: number;
  /** The lock service's leader dies at this time. */
  readonly leaderDiesAt: number;
  /** The failover's delay: a new leader leads this long after the old one died. */
  readonly electionMs: number;
  /** One way to the store, and a worker's local step between an answer and its next request. */
  readonly storeDelayMs: number;
  readonly stepMs: number;
}

/** The reference's story. */
const MAIN_STORY_INPUTS: MainStoryInputs = {
  ...STORY_TIMING,
  chunks: 10,
  chunkSize: 5_000,
  revisionBefore: 6,
  otherKeysAt: [5_000, 8_000, 11_000, 35_000],
  pauseAt: 4_000,
  pauseMs: 15_000,
  bTriesEveryMs: 1_500,
  bDiesAt: 21_000,
  sweepEveryMs: 10_000,
  sweepConfirmMs: 5_000,
  cStartsAfterMs: 200,
  cChunkMs: 1_437.5,
  leaderDiesAt: 47_000,
  electionMs: 2_100,
  storeDelayMs: 50,
  stepMs: 50,
};

/** Each input, with where it comes from: what `fencepost simulate lock-service-story` prints before its checks. */
function inputsOf(i: MainStoryInputs): ScenarioInput[] {
  return [
    { name: 'lease', value: i.leaseMs, unit: 'ms', note: "the story's: a holder that stops renewing loses it this long after" },
    { name: 'renewal period', value: i.renewMs, unit: 'ms', note: "the story's: a third of the lease, so two renewals can fail" },
    {
      name: 'margin',
      value: i.marginMs,
      unit: 'ms',
      note: 'stop time = sent_at + lease − margin: the holder stops this long before its lease could lapse',
    },
    { name: 'chunks', value: i.chunks, unit: 'count', note: "the story's night: 10 chunks" },
    { name: 'invoices a chunk', value: i.chunkSize, unit: 'count', note: "the story's 5,000" },
    { name: 'revision before A', value: i.revisionBefore, unit: 'count', note: "other keys written before: A gets the next (the story's 7)" },
    {
      name: "other jobs' keys",
      value: i.otherKeysAt.length,
      unit: 'count',
      note: `created at ${i.otherKeysAt.map((t) => s(t)).join(', ')} s: they move the revision on`,
    },
    { name: 'A freezes at', value: i.pauseAt, unit: 'ms', note: "the story's, right after its check 0.1 s earlier" },
    { name: "A's pause", value: i.pauseMs, unit: 'ms', note: "the story's 15 s, an assumption: any pause past the lease makes a zombie" },
    { name: 'B tries every', value: i.bTriesEveryMs, unit: 'ms', note: "an assumption: B acquires on its first try after A's deadline" },
    { name: 'B dies at', value: i.bDiesAt, unit: 'ms', note: "the story's: B dies holding the night, so only the sweeper can re-queue it" },
    { name: 'sweep every', value: i.sweepEveryMs, unit: 'ms', note: "the story's: every 10 s" },
    {
      name: 'second sighting after',
      value: i.sweepConfirmMs,
      unit: 'ms',
      note: "the story's: at least 5 s, so a live holder has renewed in between",
    },
    { name: 'C starts after the re-queue', value: i.cStartsAfterMs, unit: 'ms', note: "an assumption (the story's C at 40.2)" },
    { name: "C's pace, a chunk every", value: i.cChunkMs, unit: 'ms', note: "an assumption: the reference gives only C's release at 52.0" },
    { name: 'the leader dies at', value: i.leaderDiesAt, unit: 'ms', note: "the story's: the lock service's leader fails over during the night" },
    {
      name: "the failover's delay",
      value: i.electionMs,
      unit: 'ms',
      note: 'an assumption: the new leader leads this long after the old one died; with a full lease it makes 59.1 (a failover rebuilds a full lease)',
    },
    {
      name: 'to the store, one way',
      value: i.storeDelayMs,
      unit: 'ms',
      note: "an assumption (the story's: A's write sent at 19.0 meets the store at 19.05)",
    },
    { name: 'a local step', value: i.stepMs, unit: 'ms', note: 'an assumption (B raises the fence at 13.6)' },
  ];
}

interface Variant {
  /** Whether the lock service's leader dies (at inputs.leaderDiesAt). */
  readonly failover: boolean;
  /** C dies at the leader's death time too (the "had C died at 47.0" what-if). */
  readonly cDies?: boolean;
}

/** One run of the story; the variants answer the reference's "had C died at 47.0" with and without the failover. */
function playMainStory(i: MainStoryInputs, v: Variant = { failover: true }) {
  const T: LeaseTiming = { leaseMs: i.leaseMs, renewMs: i.renewMs, marginMs: i.marginMs };
  const half = i.chunkSize / 2;
  const sim = new Sim(1);
  const svc = new ConsensusLockService(sim, { revision: i.revisionBefore, electionMs: i.electionMs });
  const lockNet = new Network(sim);
  const storeNet = new Network(sim, { delayMs: i.storeDelayMs });
  const store = new FencedStore(sim);
  const manifest = new Manifest(sim);
  const [A, B, C] = ['A', 'B', 'C'].map((n) => new Worker(sim, n));
  A.pause(i.pauseAt, i.pauseMs, 'a GC pause, or a VM paused for live migration');
  B.crash(i.bDiesAt);
  if (v.cDies) C.crash(i.leaderDiesAt);
  if (v.failover) svc.crashNode(0, i.leaderDiesAt);
  for (const t of i.otherKeysAt) sim.at(t, () => svc.put(`other-job-${t / 1000}s`));

  const holders = new Map<string, Holder>();
  const leaseIds = new Map<string, number>();
  const keyDeletedAt: number[] = [];
  const etags = new Map<string, string>();
  let releasedRevision: number | undefined;

  /** ACQUIRE, then, one step later, raise the fence first: on the job row and on the manifest. */
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
      w.afterMonotonic(i.stepMs, () => {
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
  const write = (w: Worker, h: Holder, batch: string, invoices: number, commitChunk?: string) => {
    storeNet.call(
      w,
      store.name,
      () => store.write(w.name, h.token, batch, invoices),
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
  /** BEFORE EVERY ACTION: the holder's own check, logged. */
  const check = (h: Holder) => {
    const ok = h.mayAct();
    sim.log(h.worker.name, `checks its stop time: ${ok ? 'passes' : 'passed: stops'}`, { token: h.token, note: `stop time ${s(h.stopAtTrue())}` });
    return ok;
  };

  // S1: A acquires at 0.0, writes chunk 1 in two batches, builds chunk 2, checks 0.1 s before it sends: the pause
  // lands in between, and chunk 2's two batches go out when A wakes.
  const clientA = new LockClient(svc, lockNet, A);
  A.act(0, () =>
    take(
      A,
      clientA,
      () => undefined,
      (h) => {
        A.act(450, () => write(A, h, 'chunk 1 batch 1', half));
        A.act(950, () => write(A, h, 'chunk 1 batch 2', half, 'chunk 1'));
        A.act(
          i.pauseAt - 100,
          () => check(h) && A.act(i.pauseAt, () => (write(A, h, 'chunk 2 batch 1', half), write(A, h, 'chunk 2 batch 2', half, 'chunk 2'))),
        );
      },
    ),
  );

  // S2–S3: B tries on its own clock; its first act is the raise; it writes chunk 2, then dies.
  const clientB = new LockClient(svc, lockNet, B);
  const tryB = () =>
    take(
      B,
      clientB,
      () => B.afterMonotonic(i.bTriesEveryMs, tryB),
      (h) => {
        B.afterMonotonic(300, () => write(B, h, 'chunk 2 batch 1', half));
        B.afterMonotonic(6_300, () => check(h) && write(B, h, 'chunk 2 batch 2', half, 'chunk 2'));
      },
    );
  B.act(i.bTriesEveryMs, tryB);

  // S4–S6: the sweeper finds the orphan; C takes the re-queued job, bills chunks 3 to the last, completes, releases.
  const clientC = new LockClient(svc, lockNet, C);
  new SimSweeper(
    sim,
    store,
    () => {
      const live = svc.isLive(JOB);
      return live === undefined ? undefined : live ? 'live' : 'no live key';
    },
    () =>
      C.act(sim.now + i.cStartsAfterMs, () =>
        take(
          C,
          clientC,
          () => undefined,
          (h) => {
            const left = i.chunks - 2;
            for (let k = 1; k <= left; k++)
              C.afterMonotonic(k * i.cChunkMs, () => check(h) && write(C, h, `chunk ${k + 2}`, i.chunkSize, `chunk ${k + 2}`));
            C.afterMonotonic(left * i.cChunkMs + i.stepMs, () => {
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
    { everyMs: i.sweepEveryMs, confirmMs: i.sweepConfirmMs },
  );

  sim.run(Math.max(75_000, i.leaderDiesAt + i.electionMs + 2 * i.leaseMs + i.chunks * i.cChunkMs));
  for (const h of holders.values()) h.markHeld();
  return { sim, svc, store, manifest, holders, keyDeletedAt, releasedRevision };
}

/** ms → seconds to the hundredth, for an expectation computed from the inputs (always a number). */
const sec = (ms: number): number => Math.round(ms / 10) / 100;
/** The first time at or after t that a schedule every `every` from 0 reaches (the sweeper's sweeps, B's tries). */
const tick = (t: number, every: number) => Math.ceil(t / every) * every;
/** The last renewal sent strictly before t by a holder that acquired at `from` and renews every `renew`. */
const lastRenewalBefore = (from: number, t: number, renew: number) => from + Math.floor((t - from - 1) / renew) * renew;

/**
 * Run the main story with the reference's inputs, or some of them changed. Every check's expected number is computed
 * here from the inputs, by the reference's formulas (stop time = sent_at + lease − margin, earliest safe takeover =
 * last renewal applied + lease, a failover rebuilds a full lease); its actual number is the models'.
 */
export function mainStory(changed: Partial<MainStoryInputs> = {}): ScenarioResult {
  const i: MainStoryInputs = { ...MAIN_STORY_INPUTS, ...changed };
  const run = playMainStory(i);
  const { sim, holders, store, manifest } = run;
  const [a, b, c] = ['A', 'B', 'C'].map((n) => holders.get(n));
  const row = (actor: string, re: RegExp) => sim.rows.find((r) => r.actor === actor && re.test(r.event));
  const refused = row('A', /REFUSED by the fence/);
  const raiseB = row('B', /raises the fence/);
  const aRenew = row('A', /^renews$/);
  const late412 = row('A', /412/);
  // The two what-ifs: C dies with the leader, with and without the failover.
  const withFailover = playMainStory(i, { failover: true, cDies: true });
  const noFailover = playMainStory(i, { failover: false, cDies: true });

  // What the reference's formulas give for these inputs.
  const life = i.leaseMs - i.marginMs;
  const keysIn = (from: number, to: number) => i.otherKeysAt.filter((t) => t > from && t <= to).length;
  const aToken = i.revisionBefore + 1;
  const aRenewedAt = lastRenewalBefore(0, i.pauseAt, i.renewMs);
  const aDeadline = aRenewedAt + i.leaseMs;
  const bAt = tick(aDeadline, i.bTriesEveryMs);
  const bToken = aToken + keysIn(0, bAt) + 2; // A's key's expiry delete, then B's key
  const bLastRenewal = lastRenewalBefore(bAt, i.bDiesAt, i.renewMs);
  const safeTakeover = bLastRenewal + i.leaseMs;
  const firstSighting = tick(safeTakeover, i.sweepEveryMs);
  const requeueAt = tick(firstSighting + i.sweepConfirmMs, i.sweepEveryMs);
  const cAt = requeueAt + i.cStartsAfterMs;
  const cToken = bToken + keysIn(bAt, cAt) + 2; // B's key's expiry delete, then C's key
  const cFailedAt = cAt + Math.ceil((i.leaderDiesAt - cAt) / i.renewMs) * i.renewMs;
  const cStopWhenFailed = cFailedAt - i.renewMs + life;
  const cReleaseAt = cAt + i.stepMs + 2 * i.storeDelayMs + (i.chunks - 2) * i.cChunkMs + i.stepMs + 2 * i.storeDelayMs;
  const failed = c?.failedRenewals[0];

  const checks = new Checks()
    .eq('A acquires at (s)', 0, s(a?.since))
    .eq("A's token (the key's revision)", aToken, a?.token)
    .eq(`A's first stop time: 0.0 + ${s(i.leaseMs)} - ${s(i.marginMs)}`, sec(life), s(a?.stops[0]?.stopAt))
    .eq('A renews at (s)', sec(i.renewMs), s(aRenew?.t))
    .eq(`A's stop time after the renewal sent at ${s(aRenewedAt)}`, sec(aRenewedAt + life), s(a?.stopAtTrue()))
    .eq('B acquires at (s)', sec(bAt), s(b?.since))
    .eq("B's token", bToken, b?.token)
    .eq(`B's stop time: ${s(bAt)} + ${s(i.leaseMs)} - ${s(i.marginMs)}`, sec(bAt + life), s(b?.stops[0]?.stopAt))
    .eq('B raises the fence at (s)', sec(bAt + i.stepMs + i.storeDelayMs), s(raiseB?.t))
    .eq("A's late write meets the store at (s)", sec(i.pauseAt + i.pauseMs + i.storeDelayMs), s(refused?.t))
    .eq("A's late write carries token", aToken, refused?.token)
    .eq("A's late write meets fence", bToken, refused?.fence)
    .eq("A's manifest commit names the ETag it last saw", true, /If-Match "E2"/.test(late412?.event ?? ''))
    .eq('and S3 answers 412 at (s)', sec(i.pauseAt + i.pauseMs + i.storeDelayMs), s(late412?.t))
    .eq("B's last renewal the service applied (s)", sec(bLastRenewal), s(b?.renewals.at(-1)))
    .eq(`earliest safe takeover: ${s(bLastRenewal)} + ${s(i.leaseMs)}`, sec(safeTakeover), s(run.keyDeletedAt[1]))
    .eq('the sweeper re-queues with a conditional write at (s)', sec(requeueAt), s(row('sweeper', /re-queues/)?.t))
    .eq('C acquires at (s)', sec(cAt), s(c?.since))
    .eq("C's token", cToken, c?.token)
    .eq("C's renewal that fails was sent at (s)", sec(cFailedAt), s(failed))
    .eq("C's stop time when it failed (s)", sec(cStopWhenFailed), s(failed === undefined ? undefined : c?.stopAtTrueAt(failed)))
    .eq('C was still inside its stop time', true, failed !== undefined && failed < (c?.stopAtTrueAt(failed) ?? 0))
    .eq(
      `had C died at ${s(i.leaderDiesAt)} with the leader: its key lasts until ${s(i.leaderDiesAt)} + ${s(i.electionMs)} (the failover) + ${s(i.leaseMs)}`,
      sec(i.leaderDiesAt + i.electionMs + i.leaseMs),
      s(withFailover.keyDeletedAt.at(-1)),
    )
    .eq(
      `had C died at ${s(i.leaderDiesAt)}, no failover: its key lasts until its last renewal + ${s(i.leaseMs)}`,
      sec(lastRenewalBefore(cAt, i.leaderDiesAt, i.renewMs) + i.leaseMs),
      s(noFailover.keyDeletedAt.at(-1)),
    )
    .eq('C releases at (s)', sec(cReleaseAt), s(c?.ended?.at))
    .eq('the release deletes the key at revision', cToken + keysIn(cAt, cReleaseAt) + 1, run.releasedRevision)
    .eq('S6: the row is DONE', 'DONE', store.row.state)
    .eq('S6: the fence is', cToken, store.row.fence)
    .eq(`invoices recorded: ${i.chunks} chunks of ${i.chunkSize}`, i.chunks * i.chunkSize, store.invoices)
    .eq('chunks the manifest names', i.chunks, Object.keys(manifest.body.chunks).length)
    .eq('invoices written twice', 0, store.writtenTwice().length);
  return {
    name: mainStoryScenario.name,
    title: mainStoryScenario.title,
    claim: mainStoryScenario.claim,
    rows: sim.rows,
    marks: sim.marks,
    checks: checks.list,
    inputs: inputsOf(i),
  };
}

export const mainStoryScenario: Scenario = {
  name: 'lock-service-story',
  title:
    "The main story S1–S6 on the reference's lock service: A freezes, B fences it out, B dies, the sweeper re-queues, C survives a leader failover",
  claim: 'the fence, not the lease, stops the zombie (a pause can come after any check); a failover only ever lengthens a lease, never shortens it',
  run: () => mainStory(),
};
