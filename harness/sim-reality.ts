/**
 * The check against reality (issue 13, item 5): the simulator, given the schedule of `fencepost story`
 * (harness/story.ts), predicts the outcome and the token order; test/story.test.ts runs the real processes
 * too and compares.
 *
 * The schedule, as story.ts plays it: the lease, renewal and margin of storyLease(timeScale) on a DynamoDB lock item
 * with the clock-free claim rule (core/lease.ts); A claims, raises the fence, commits chunk 0, and freezes right
 * after a passed check for chunk 1's first batch; B starts once A is frozen and claims after watching A's rvn for a
 * full lease; A is continued once B has raised the fence; B is killed after committing one chunk; the sweeper (every
 * lease/2, two sightings a lease apart with the same rvn) re-queues the orphan and starts C, which claims, completes
 * and releases. Chunk and batch times are rough (50 ms a transaction): the prediction is the order and the numbers.
 */
import { LEASE_DEFAULTS, MAX_PUTS_PER_TRANSACTION } from '../core/config';
import { pollMsOf } from '../core/lease';
import { Sim, type SimRow } from '../core/sim/engine';
import { Holder } from '../core/sim/holder';
import { DynamoLockItem, ItemClaimant } from '../core/sim/lock-item';
import { FencedStore } from '../core/sim/store';
import { SimSweeper } from '../core/sim/sweeper';
import { Worker } from '../core/sim/worker';
import { STORY_NIGHT, storyLease } from './story';

const CHUNKS = Math.ceil(STORY_NIGHT.invoices / STORY_NIGHT.chunkSize);
const TX_PER_CHUNK = Math.ceil(STORY_NIGHT.chunkSize / MAX_PUTS_PER_TRANSACTION);
const TX_MS = 50;

export interface StoryPrediction {
  readonly rows: readonly SimRow[];
  /** The token each actor claimed with, in the order they claimed. */
  readonly tokens: readonly { readonly actor: string; readonly token: number }[];
  /** The fence A's late batch met. */
  readonly lateBatchFence?: number;
  /** The job row's state at the end. */
  readonly finalState: string;
}

export function predictStory(timeScale: number): StoryPrediction {
  const timing = storyLease(timeScale);
  const poll = pollMsOf(timing);
  const sim = new Sim(1);
  const item = new DynamoLockItem(sim);
  const store = new FencedStore(sim);
  const tokens: { actor: string; token: number }[] = [];
  let lateBatchFence: number | undefined;
  const workers = new Map<string, Worker>();

  /** Claim by the clock-free rule (polling every lease/20), raise the fence first, then work the chunks. */
  const runWorker = (
    name: string,
    at: number,
    onChunk: (h: Holder, chunk: number, tx: number) => 'go' | 'freeze' | 'stop',
    onRaised?: () => void,
  ) => {
    const w = new Worker(sim, name);
    workers.set(name, w);
    const claimant = new ItemClaimant('clock-free', timing.leaseMs, timing.marginMs);
    const tryClaim = () => {
      const step = claimant.decide(item.read(), w.monotonicNow(), w.wallNow());
      const sent = w.monotonicNow();
      const epoch = step.claim
        ? item.claim(name, 'clock-free', { claimantWallMs: w.wallNow(), leaseMs: timing.leaseMs, marginMs: timing.marginMs, seenRvn: step.seenRvn })
        : undefined;
      if (epoch === undefined) return w.afterMonotonic(poll, tryClaim);
      tokens.push({ actor: name, token: epoch });
      const h = new Holder(w, epoch, { ...timing }, sent, (done) => done(item.renew(name, epoch, w.wallNow())));
      h.logRenewals = false;
      if (store.raise(name, epoch) === undefined) return;
      onRaised?.();
      const next = (chunk: number, tx: number) => {
        if (chunk >= CHUNKS) {
          if (store.complete(name, epoch) && item.release(name, epoch)) h.end('completes the night and releases');
          return;
        }
        if (!h.mayAct()) return h.end('stop time passed');
        const what = onChunk(h, chunk, tx);
        if (what === 'stop') return;
        if (what === 'freeze') w.freeze('SIGSTOP right after a passed check');
        w.act(sim.now + TX_MS, () => {
          if (!store.write(name, epoch, `chunk ${chunk} tx ${tx}`, 99)) {
            if (name === 'A') lateBatchFence = store.row.fence;
            return h.end('late batch refused by the fence');
          }
          if (tx + 1 < TX_PER_CHUNK) return next(chunk, tx + 1);
          sim.log(name, `commits chunk ${chunk}`, { token: epoch });
          next(chunk + 1, 0);
        });
      };
      next(store.written.size === 0 ? 0 : Math.floor(store.written.size / TX_PER_CHUNK), 0);
    };
    w.act(at, tryClaim);
    return w;
  };

  // 1.–2. A works until its check for chunk 1, batch 0 passes, then freezes; B starts once A is frozen.
  runWorker('A', 0, (_h, chunk, tx) => {
    if (chunk === 1 && tx === 0 && !workers.has('B')) {
      // 3. B takes over; A is continued once B has raised the fence.
      runWorker(
        'B',
        sim.now,
        (_hb, c) => (c >= 2 ? (killB(), 'stop') : 'go'), // 4. killed after committing one chunk
        () => workers.get('A')!.wake(),
      );
      return 'freeze';
    }
    return 'go';
  });
  // 5. Once B is dead the sweeper starts: every lease/2, two sightings a lease apart with the same rvn; the re-queue starts C.
  const killB = () => {
    workers.get('B')!.crash(sim.now);
    startSweeper();
  };
  const startSweeper = () =>
    new SimSweeper(
      sim,
      store,
      () => {
        const it = item.read();
        return it?.holder === undefined ? 'free' : (it.rvn ?? 'free');
      },
      () => runWorker('C', sim.now, () => 'go'),
      { everyMs: Math.max(100, Math.round(timing.leaseMs / 2)), confirmMs: timing.leaseMs, firstAt: sim.now },
    );
  sim.run(60 * LEASE_DEFAULTS.leaseMs);
  return { rows: sim.rows, tokens, lateBatchFence, finalState: store.row.state };
}
