/**
 * Observe: a strongly consistent read of the job row and the lock item, and one step of the claim rule
 * (lib/core/lease.ts nextClaimStep): claim now, or wait a poll period and observe again, or give up. Giving up on a
 * live holder that is running the run (lib/core/job.ts runningUnder) is a duplicate start, ended quietly as
 * AlreadyRunning; giving up on any other live holder fails the run (docs/DESIGN.md "A duplicate start on a long run").
 * The claimant's timer is Step Functions' Wait state: the seconds of the Wait that ran since the previous
 * observation are what this execution has watched the rvn for (a Wait never waits less), design §4.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { readJob } from '../core/fence';
import type { LeaseConfig } from '../core/config';
import { runningUnder } from '../core/job';
import { nextClaimStep, sight, type Sighting, type Watch } from '../core/lease';
import { Metric } from '../core/observability';
import { fromEnvironment, invoke, metrics, runInput, type RuntimeSource } from './runtime';

/** One observation of the lock: what the Observe step saw, and the claim rule's next step (claim, wait, give up). */
export interface Observation {
  readonly done: boolean;
  readonly free: boolean;
  readonly holder?: string;
  readonly seenRvn?: string;
  readonly seenEpoch?: number;
  /** The rvn watched and for how long, carried to the next observation. */
  readonly watch?: Watch;
  /** The rvn has stayed unchanged for a full lease (or the lock is free): claim now. */
  readonly claimNow: boolean;
  /** Whole seconds, rounded up, for the Wait state before the next observation; 0 when claiming. */
  readonly waitSeconds: number;
  readonly attempt: number;
  /** The claim budget is spent: the holder stayed alive through that many leases of waiting. */
  readonly exhausted: boolean;
  /** The budget is spent on a live holder whose run is RUNNING under its token: a duplicate start. */
  readonly anotherHolder: boolean;
}

/**
 * The pure part: one observation from the previous one and what was just read (also used by bench/aws-model.ts).
 * `running`: the job row is RUNNING under the sighted holder's token (lib/core/job.ts runningUnder).
 */
export function observation(
  previous: Partial<Observation> | undefined,
  done: boolean,
  s: Sighting,
  config: Pick<LeaseConfig, 'leaseMs' | 'claimBudget'>,
  running = false,
): Observation & { newRvn: boolean } {
  const step = nextClaimStep(previous?.watch, s, (Number(previous?.waitSeconds) || 0) * 1000, config);
  return {
    done,
    free: s.holder === undefined,
    holder: s.holder,
    seenRvn: s.seenRvn,
    seenEpoch: s.epoch,
    watch: step.watch,
    claimNow: step.action === 'claim',
    exhausted: step.action === 'give-up',
    anotherHolder: step.action === 'give-up' && running,
    waitSeconds: step.action === 'wait' ? Math.max(1, Math.ceil(step.waitMs / 1000)) : 0,
    attempt: (Number(previous?.attempt) || 0) + 1,
    newRvn: step.newRvn,
  };
}

/** The Observe step, made from a runtime source. */
export const observeStep = (runtime: RuntimeSource) => (event: { jobDate?: unknown; holder?: unknown; previous?: Partial<Observation> }) =>
  invoke('observe', runtime, async (rt): Promise<Observation> => {
    const { jobDate } = runInput(event);
    const key = rt.job.lock(jobDate);
    const job = await readJob(rt.deps, rt.job.job(jobDate));
    const s = await sight(rt.deps, key, rt.lease);
    const { newRvn, ...o } = observation(event.previous, job?.state === 'DONE', s, rt.lease, runningUnder(job, s.epoch));
    if (newRvn) rt.events.emit('sighted', { key, holder: s.holder, epoch: s.epoch, rvn: s.seenRvn, waitMs: s.waitMs, attempt: o.attempt });
    if (o.anotherHolder) {
      metrics.addMetric(Metric.runsAnotherHolder, MetricUnit.Count, 1);
      rt.events.emit('another-holder', { jobId: rt.job.job(jobDate), holder: s.holder, epoch: s.epoch });
    }
    return o;
  });

export const handler = observeStep(fromEnvironment());
