/**
 * The main story on the REAL code (issue 19, item 5): the billing night as
 * Fencepost implements it, run by lib/core/job.ts `runJob` and lib/core/sweeper.ts's `Sweeper` on the in-memory stores and
 * virtual time (real.ts). The lease is the project's lock item with the clock-free claim, the fence is
 * raised first on the job row and every chunk's fence item, each batch is one fenced transaction of up to 99 puts.
 *
 *   A claims the free lock at 0 and bills chunk 1; it passes its check for chunk 2's first batch and freezes (15 s);
 *   B watches A's rvn for a full lease on its own clock, claims with the next epoch, raises the fences, bills on;
 *   A wakes and sends its batch: the chunk's fence refuses it; B dies holding the job; the sweeper sees B's rvn
 *   unchanged for a full lease and starts C, which watches it a full lease more, claims, bills the rest and completes.
 *
 * The world sets only the schedule (the inputs); tokens, stop times, claims, refusals, the re-queue and the night's
 * totals come out of the code, and its events make the table and the timeline. The reference's lock-service story
 * (revisions 7, 12, 15, the leader's failover) is `lock-service-story`: the project implements no lock service.
 */
import { LEASE_DEFAULTS, MAX_PUTS_PER_TRANSACTION, type LeaseConfig } from '../../core/config';
import { writeBatch } from '../../core/batch';
import { FencedOutError } from '../../core/errors';
import type { FencepostEvent } from '../../core/events';
import { jobKeys } from '../../core/job-keys';
import { runJob, type ChunkWork, type RunSummary } from '../../core/job';
import { pollMsOf } from '../../core/lease';
import type { SimRow } from '../engine';
import { RealWorld, sweeperOn, type RealWorker } from '../real';
import { Checks, s, type Scenario, type ScenarioInput, type ScenarioResult } from '../scenario';

/** What the story assumes. Times and durations in ms of virtual time. */
export interface NightInputs {
  readonly leaseMs: number;
  readonly renewMs: number;
  readonly marginMs: number;
  /** Chunks in the night and invoices in a chunk (10 of 5,000). */
  readonly chunks: number;
  readonly chunkSize: number;
  /** A holder builds each chunk for this long before its first batch (the batches then go out back to back). */
  readonly buildMs: number;
  /** A freezes right after its passed check for this chunk's first batch (0-based: 1 is the reference's chunk 2)… */
  readonly pauseChunk: number;
  /** …for this long (15 s). */
  readonly pauseMs: number;
  /** B starts (and begins watching the lock item) at. */
  readonly bStartsAt: number;
  /** B dies holding the job at this time. */
  readonly bDiesAt: number;
  /** The sweeper sweeps every. */
  readonly sweepEveryMs: number;
}

const NIGHT_INPUTS: NightInputs = {
  leaseMs: LEASE_DEFAULTS.leaseMs,
  renewMs: LEASE_DEFAULTS.renewMs,
  marginMs: LEASE_DEFAULTS.marginMs,
  chunks: 10,
  chunkSize: 5_000,
  buildMs: 2_000,
  pauseChunk: 1,
  pauseMs: 15_000,
  bStartsAt: 1_500,
  bDiesAt: 20_500,
  sweepEveryMs: 5_000,
};

function inputsOf(i: NightInputs): ScenarioInput[] {
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
    {
      name: 'invoices a chunk',
      value: i.chunkSize,
      unit: 'count',
      note: `the story's 5,000, in batches of ${MAX_PUTS_PER_TRANSACTION} (a transaction's 100 items, one of them the fence check)`,
    },
    { name: 'building a chunk takes', value: i.buildMs, unit: 'ms', note: "an assumption: A's check for chunk 2 comes at 4.0, as in the story" },
    { name: 'A freezes after its check for chunk', value: i.pauseChunk + 1, unit: 'count', note: "the story's: chunk 2, built in its buffers" },
    { name: "A's pause", value: i.pauseMs, unit: 'ms', note: "the story's 15 s, an assumption: any pause past the lease makes a zombie" },
    { name: 'B starts watching at', value: i.bStartsAt, unit: 'ms', note: 'an assumption' },
    { name: 'B dies at', value: i.bDiesAt, unit: 'ms', note: 'an assumption: after its third chunk, so the sweeper must find an orphan' },
    { name: 'the sweeper sweeps every', value: i.sweepEveryMs, unit: 'ms', note: 'an assumption (an orphan takes two sightings a lease apart)' },
  ];
}

const DATE = '2026-09-28';
const INVOICES = 'invoices';
const invoiceKey = (n: number) => `inv#${DATE}#${String(n).padStart(6, '0')}`;

/** The event table's row for each of the code's events (the sweeper's quiet sweeps and most sightings are left out). */
function describe(e: FencepostEvent): Omit<SimRow, 't' | 'actor'> | undefined {
  switch (e.event) {
    case 'sighted':
      return e.holder === undefined
        ? { event: 'sees the lock free' }
        : {
            event: `sees the lock item held by ${e.holder}: watches its rvn`,
            token: e.epoch,
            note: `a new rvn: waits ${e.waitMs / 1000} s unchanged`,
          };
    case 'claim':
      return {
        event: 'claims the lock item (clock-free): epoch + 1',
        token: e.token,
        note: `rvn watched unchanged ${e.waitedMs / 1000} s; stop time ${s(e.stopAtMs)}`,
      };
    case 'renew':
      return { event: 'renews', token: e.token, note: `stop time ${s(e.stopAtMs)}` };
    case 'lease-lost':
      return { event: 'renewal refused: the lease is lost', token: e.token, note: `the item names ${e.holderNow ?? 'nobody'}` };
    case 'fence-raised':
      return {
        event: `raises the fences first: the job row and ${e.chunkFences} chunk fences`,
        token: e.token,
        fence: e.token,
        note: `was ${e.previousFence ?? 'unset'}; chunks done before: ${e.chunksDone?.length ? e.chunksDone.map((c) => c + 1).join(', ') : 'none'}`,
      };
    case 'chunk-committed':
      return { event: `writes chunk ${e.chunk + 1}`, token: e.token, fence: e.token, note: `${e.recorded} invoices, ${e.key}` };
    case 'batch-rejected':
      return { event: `chunk ${e.chunk + 1} batch ${e.batch + 1} REFUSED by the fence`, token: e.token, fence: e.fence, note: 'nothing written' };
    case 'completed':
      return { event: 'sets DONE, leaves the sparse index', token: e.token, fence: e.token };
    case 'released':
      return { event: 'releases: clears holder, keeps the item', token: e.token };
    case 'requeued':
      return { event: 're-queues the orphan (conditional write)', fence: e.fence, note: `its rvn unchanged a full lease; owner ${e.ownerToken}` };
    default:
      return undefined;
  }
}

/** One run of the night on the real code. */
async function playNight(i: NightInputs) {
  const world = new RealWorld(0, i.leaseMs, describe);
  const keys = jobKeys('billing');
  const config: LeaseConfig = { leaseMs: i.leaseMs, renewMs: i.renewMs, marginMs: i.marginMs, claimBudget: LEASE_DEFAULTS.claimBudget };
  const summaries = new Map<string, RunSummary<number>>();
  let done = false;

  /** The night's work on one chunk: build it, then its batches, each checked, then written through the chunk's fence. */
  const work =
    (w: RealWorker, pauseAt?: { chunk: number; ms: number }): ChunkWork<number> =>
    async ({ lease, fence, chunk }) => {
      await w.sleep(i.buildMs);
      let recorded = 0;
      for (let batch = 0, from = 0; from < i.chunkSize; batch++, from += MAX_PUTS_PER_TRANSACTION) {
        lease.check();
        if (pauseAt?.chunk === chunk && batch === 0) w.pause(pauseAt.ms, "right after a passed check: chunk's first batch built, not yet sent");
        const puts = Array.from({ length: Math.min(MAX_PUTS_PER_TRANSACTION, i.chunkSize - from) }, (_, k) => ({
          table: INVOICES,
          item: { pk: { S: invoiceKey(chunk * i.chunkSize + from + k) }, token: { N: String(lease.token) } },
        }));
        try {
          const out = await writeBatch(fence, puts);
          recorded += out.recorded.length;
          w.events.emit('batch-committed', {
            token: lease.token,
            chunk,
            batch,
            recorded: out.recorded.length,
            alreadyRecorded: out.alreadyRecorded.length,
            transactions: out.transactions,
            first: from,
          });
        } catch (err) {
          if (err instanceof FencedOutError) w.events.emit('batch-rejected', { token: lease.token, chunk, batch, fence: err.fence });
          throw err;
        }
      }
      w.events.emit('chunk-committed', {
        token: lease.token,
        chunk,
        key: `${invoiceKey(chunk * i.chunkSize)}..${invoiceKey((chunk + 1) * i.chunkSize - 1)}`,
        recorded,
        alreadyRecorded: 0,
      });
      return recorded;
    };

  const start = (w: RealWorker, pauseAt?: { chunk: number; ms: number }) => {
    world.log(w.name, 'starts the night');
    void runJob({ ...w.deps, random: () => 0.5 }, { keys, date: DATE, chunks: i.chunks, holder: w.name, config }, work(w, pauseAt)).then(
      (summary) => {
        summaries.set(w.name, summary);
        if (summary.outcome === 'completed') done = true;
        world.log(w.name, `ends: ${summary.outcome}`, { token: summary.token, note: summary.reason });
      },
    );
  };

  const [A, B, C, sweeperWorker] = ['A', 'B', 'C', 'sweeper'].map((n) => world.worker(n));
  start(A, { chunk: i.pauseChunk, ms: i.pauseMs });
  world.at(i.bStartsAt, () => start(B));
  world.at(i.bDiesAt, () => B.crash());
  const sweeper = sweeperOn(sweeperWorker!, i.leaseMs, keys.name);
  let cStarted = false;
  const sweepLoop = () => {
    if (done) return;
    void sweeper
      .sweep(() => {
        if (cStarted) return;
        cStarted = true;
        start(C);
      })
      .then(() => sweeperWorker.after(i.sweepEveryMs, sweepLoop));
  };
  sweeperWorker.after(i.sweepEveryMs, sweepLoop);
  await world.clock.runUntilIdle();
  return { world, summaries, keys };
}

/** ms → seconds to the hundredth, for an expectation computed from the inputs. */
const sec = (ms: number): number => Math.round(ms / 10) / 100;

/**
 * Run the main story on the real code with the reference's inputs, or some of them changed. Each check's expected
 * number is computed from the inputs by the reference's rules (stop time = sent_at + lease − margin; a claimant
 * claims once the rvn it watches stayed unchanged a full lease; the sweeper re-queues on a second sighting a full
 * lease after the first; every claim adds 1 to the epoch); the actual number is the code's.
 */
export async function night(changed: Partial<NightInputs> = {}): Promise<ScenarioResult> {
  const i: NightInputs = { ...NIGHT_INPUTS, ...changed };
  const { world, summaries } = await playNight(i);
  const ev = (worker: string, name: FencepostEvent['event']) => world.events.filter((x) => x.e.worker === worker && x.e.event === name);
  const first = <N extends FencepostEvent['event']>(worker: string, name: N) =>
    ev(worker, name)[0] as { t: number; e: Extract<FencepostEvent, { event: N }> } | undefined;
  const poll = pollMsOf(i);
  const life = i.leaseMs - i.marginMs;
  const txPerChunk = Math.ceil(i.chunkSize / MAX_PUTS_PER_TRANSACTION);

  // What the rules give for these inputs.
  const freezeAt = (i.pauseChunk + 1) * i.buildMs; // A raises at 0 and builds each chunk for buildMs
  const aLastRenewal = Math.floor((freezeAt - 1) / i.renewMs) * i.renewMs;
  const bSeesIt = i.bStartsAt + Math.ceil((aLastRenewal - i.bStartsAt) / poll) * poll; // its first poll at or after the renewal
  const bClaim = bSeesIt + i.leaseMs;
  const bChunks = Math.min(Math.floor((i.bDiesAt - bClaim) / i.buildMs), i.chunks - i.pauseChunk);
  const bLastRenewal = bClaim + Math.floor((i.bDiesAt - bClaim - 1) / i.renewMs) * i.renewMs;
  const sweptAfter = (Math.floor(bLastRenewal / i.sweepEveryMs) + 1) * i.sweepEveryMs;
  const requeueAt = Math.ceil((sweptAfter + i.leaseMs) / i.sweepEveryMs) * i.sweepEveryMs;
  const cClaim = requeueAt + i.leaseMs; // it watches B's rvn, unchanged since B died, for a full lease
  const cChunks = i.chunks - i.pauseChunk - bChunks;
  const cDone = cClaim + cChunks * i.buildMs;

  const aClaim = first('A', 'claim');
  const aRenew = first('A', 'renew');
  const bClaimed = first('B', 'claim');
  const cClaimed = first('C', 'claim');
  const refused = first('A', 'batch-rejected');
  const bRaise = first('B', 'fence-raised');
  const requeued = first('sweeper', 'requeued');
  const completed = first('C', 'completed');
  const committed = world.events.filter((x) => x.e.event === 'batch-committed') as {
    t: number;
    e: Extract<FencepostEvent, { event: 'batch-committed' }>;
  }[];
  const stored = world.jobs.dump(INVOICES);
  const chunksBy = (w: string) => ev(w, 'chunk-committed').length;
  const row = await world.jobs.readJob(jobKeys('billing').job(DATE));
  const lock = await world.locks.read(jobKeys('billing').lock(DATE));

  const checks = new Checks()
    .eq('A claims the free lock at (s), epoch', '0,1', `${s(aClaim?.t)},${aClaim?.e.token}`)
    .eq(`A's first stop time: 0.0 + ${s(i.leaseMs)} - ${s(i.marginMs)}`, sec(life), s(aClaim?.e.stopAtMs))
    .eq('A renews at (s)', sec(i.renewMs), s(aRenew?.t))
    .eq(`A's stop time after the renewal sent at ${s(aLastRenewal)}`, sec(aLastRenewal + life), s(ev('A', 'renew').at(-1)?.e.stopAtMs as number))
    .eq(`A freezes right after its check for chunk ${i.pauseChunk + 1} at (s)`, sec(freezeAt), s(world.marks.find((m) => m.kind === 'pause')?.from))
    .eq(`B claims once A's rvn stayed unchanged a full lease: ${s(bSeesIt)} + ${s(i.leaseMs)} (s)`, sec(bClaim), s(bClaimed?.t))
    .eq("B's token: A's epoch + 1", 2, bClaimed?.e.token)
    .that(
      `B claims after A's right to act ended (A's stop time ${sec(aLastRenewal + life)} s): gap (s)`,
      s((bClaimed?.t ?? 0) - (aLastRenewal + life)),
      (g) => g >= 0,
      '>= 0',
    )
    .eq(`B's stop time: ${s(bClaim)} + ${s(i.leaseMs)} - ${s(i.marginMs)}`, sec(bClaim + life), s(bClaimed?.e.stopAtMs))
    .eq('B raises the fences first, at its claim (s)', sec(bClaim), s(bRaise?.t))
    .eq("B learns A's chunks done from the old fence items", String(Array.from({ length: i.pauseChunk }, (_, c) => c)), String(bRaise?.e.chunksDone))
    .eq("A's late batch meets the store when A wakes (s)", sec(freezeAt + i.pauseMs), s(refused?.t))
    .eq("A's late batch carries token", 1, refused?.e.token)
    .eq("and meets B's fence", 2, refused?.e.fence)
    .eq('A ends fenced out', 'fenced-out', summaries.get('A')?.outcome)
    .eq('chunks B bills before it dies', bChunks, chunksBy('B'))
    .eq("B's last renewal (s)", sec(bLastRenewal), s(ev('B', 'renew').at(-1)?.t))
    .eq(`the sweeper re-queues: first sighting ${s(sweptAfter)}, then a full lease later (s)`, sec(requeueAt), s(requeued?.t))
    .eq(`C claims a full lease after its first sighting: ${s(requeueAt)} + ${s(i.leaseMs)} (s)`, sec(cClaim), s(cClaimed?.t))
    .that(
      `C claims after the earliest safe takeover ${s(bLastRenewal)} + ${s(i.leaseMs)}: gap (s)`,
      s((cClaimed?.t ?? 0) - (bLastRenewal + i.leaseMs)),
      (g) => g >= 0,
      '>= 0',
    )
    .eq("C's token", 3, cClaimed?.e.token)
    .eq('chunks C bills', cChunks, chunksBy('C'))
    .eq('C completes at (s)', sec(cDone), s(completed?.t))
    .eq(`invoices recorded: ${i.chunks} chunks of ${i.chunkSize}`, i.chunks * i.chunkSize, stored.length)
    .eq(
      'invoices recorded by the batches (none twice)',
      i.chunks * i.chunkSize,
      committed.reduce((n, x) => n + x.e.recorded, 0),
    )
    .eq(
      `transactions: ${i.chunks} × ${txPerChunk}`,
      i.chunks * txPerChunk,
      committed.reduce((n, x) => n + x.e.transactions, 0),
    )
    .eq('S6: the row is DONE', 'DONE', row?.state)
    .eq('S6: the fence is', 3, row?.fence)
    .eq('the lock item: no holder, epoch kept', 'none,3', `${lock?.holder ?? 'none'},${String(lock?.epoch)}`);
  return {
    name: nightScenario.name,
    title: nightScenario.title,
    claim: nightScenario.claim,
    rows: world.rows,
    marks: marksOf(world),
    checks: checks.list,
    inputs: inputsOf(i),
  };
}

/** The timeline from the code's events: each tenure (claim to stop time, release, loss or death), stops, fences, refusals. */
function marksOf(world: RealWorld) {
  const marks = [...world.marks];
  const byWorker = new Map<string, { t: number; e: FencepostEvent }[]>();
  for (const x of world.events) byWorker.set(x.e.worker, [...(byWorker.get(x.e.worker) ?? []), x]);
  for (const [worker, events] of byWorker) {
    const claim = events.find((x) => x.e.event === 'claim');
    if (!claim || claim.e.event !== 'claim') continue;
    const stops = events.flatMap((x) => (x.e.event === 'claim' || x.e.event === 'renew' ? [x.e.stopAtMs ?? Infinity] : []));
    const ended = events.find((x) => ['released', 'lease-lost', 'batch-rejected'].includes(x.e.event))?.t ?? Infinity;
    const died = world.marks.find((m) => m.kind === 'crash' && m.lane === worker)?.from ?? Infinity;
    const lastStop = stops.at(-1)!;
    marks.push({ lane: worker, kind: 'held', from: claim.t, to: Math.min(lastStop, ended, died), label: `token ${claim.e.token}` });
    marks.push({ lane: worker, kind: 'stop', from: stops[0], label: `stop ${s(stops[0])}` });
    if (stops.length > 1 && lastStop <= Math.min(ended, died))
      marks.push({ lane: worker, kind: 'stop', from: lastStop, label: `stop ${s(lastStop)}` });
  }
  for (const x of world.events) {
    if (x.e.event === 'fence-raised') marks.push({ lane: 'store', kind: 'fence', from: x.t, label: `fence ${x.e.token}` });
    if (x.e.event === 'batch-rejected') marks.push({ lane: 'store', kind: 'refused', from: x.t, label: `${x.e.worker} ${x.e.token} refused` });
    if (x.e.event === 'chunk-committed') marks.push({ lane: x.e.worker, kind: 'write', from: x.t, label: `chunk ${x.e.chunk + 1}` });
  }
  // Where each lost lease ran out by the rule: a full lease after the last write to its rvn (claim or renewal).
  for (const [worker, events] of byWorker) {
    const claim = events.find((x) => x.e.event === 'claim');
    if (!claim || events.some((x) => x.e.event === 'released')) continue;
    const last = events.filter((x) => x.e.event === 'claim' || x.e.event === 'renew').at(-1)!;
    const leaseMs = world.leaseMs;
    marks.push({ lane: 'lock item', kind: 'deadline', from: last.t + leaseMs, label: `${worker}'s rvn unchanged a lease` });
  }
  return marks;
}

export const nightScenario: Scenario = {
  name: 'main-story',
  title: 'The main story on the real code: A freezes, B takes over and fences it out, B dies, the sweeper re-queues, C bills the rest',
  claim:
    "Fencepost's own lease, fences and sweeper: the fence, not the lease, stops the zombie (a pause can come after any check); the sweeper restores liveness",
  run: () => night(),
};
