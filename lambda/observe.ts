/**
 * Observe: a strongly consistent read of the job row and the lock item. Says whether the night is DONE, and if
 * someone holds the lease, the rvn seen and how long to wait (a full lease) before a claim may be tried.
 * The wait itself is a Step Functions Wait state: the claimant's own timer (design §4).
 */
import { readJob } from '../lib/core/fence';
import { sight } from '../lib/core/lease';
import { Keys } from '../lib/core/schema';
import { invoke, nightInput } from './runtime';

export interface Observation {
  readonly done: boolean;
  readonly free: boolean;
  readonly holder?: string;
  readonly seenRvn?: string;
  readonly seenEpoch?: number;
  /** Whole seconds, rounded up: a Wait state never waits less than the lease. */
  readonly waitSeconds: number;
  readonly attempt: number;
  /** The claim budget is spent: the holder stayed alive through every wait. */
  readonly exhausted: boolean;
}

export const handler = (event: { jobDate?: unknown; holder?: unknown; attempt?: unknown }) =>
  invoke('observe', async (rt): Promise<Observation> => {
    const { jobDate } = nightInput(event);
    const attempt = (Number(event.attempt) || 0) + 1;
    const job = await readJob({ ddb: rt.deps.ddb, jobs: rt.deps.tables.jobs }, Keys.job(jobDate));
    const s = await sight(rt.leaseDeps, Keys.lock(jobDate), rt.config);
    rt.deps.events.emit('observe', { key: Keys.lock(jobDate), holder: s.holder, epoch: s.epoch, rvn: s.seenRvn, waitMs: s.waitMs, attempt });
    return {
      done: job?.state === 'DONE', free: s.holder === undefined, holder: s.holder, seenRvn: s.seenRvn, seenEpoch: s.epoch,
      waitSeconds: Math.ceil(s.waitMs / 1000), attempt, exhausted: attempt > rt.config.claimBudget,
    };
  });
