/**
 * The repository's workflow world: lib/testing/workflow/workflow-world.ts (the world of a FencedJob, which ships in
 * `fencepost/testing`) running the repository's own job, a night of 3 chunks × 4 items written 2 at a time through
 * the chunk's fence, each batch taking 1.5 s of the invocation's clock (so renewals and takeovers happen during a
 * night), with the broken variants of mutations.ts that this world takes.
 */
import { writeBatch } from '../../lib/core/batch';
import { LEASE_DEFAULTS, type LeaseConfig } from '../../lib/core/config';
import { itemsChecks } from '../../lib/testing/checks';
import { runWorld, type ScheduleResult } from '../../lib/testing/world';
import {
  everyState,
  fencedJobWorld,
  memoryWorkflowStores,
  type JobRun,
  type WorkflowJob,
  type WorkflowPlaced,
  type WorkflowStoresOf,
  type WorkflowVariant,
} from '../../lib/testing/workflow/workflow-world';
import type { MachineDef, StateDef } from '../../lib/testing/workflow/sfn';
import type { JobStore } from '../../lib/core/store/jobs';
import type { LockStore } from '../../lib/core/store/lock';
import { MUTATIONS, NIGHT_MUTATIONS, WORKFLOW_MUTATIONS, applyMutation, type Mutation, type NightMutation, type WorkflowMutation } from './mutations';

export type { WorkflowPlaced, WorkflowStores, WorkflowStoresOf } from '../../lib/testing/workflow/workflow-world';

/** A night's size and pace: its chunks, each chunk's items, written `batch` at a time, each batch taking `batchWorkMs`. */
interface NightSize {
  readonly chunks: number;
  readonly items: number;
  readonly batch: number;
  readonly batchWorkMs: number;
}

/** The night the workflow world explores. */
const NIGHT: NightSize = { chunks: 3, items: 4, batch: 2, batchWorkMs: 1_500 };

/**
 * A large night: 12 chunks of 198 items, each batch a full transaction (the fence's check and 99 puts), explored in
 * a tier of its own (test/unit/explore-workflow-large.test.ts).
 */
export const LARGE_NIGHT: NightSize = { chunks: 12, items: 198, batch: 99, batchWorkMs: 1_500 };

/**
 * Every mutation this world takes: its own, and the core's (mutations.ts) but the sweeper's order (the local Sweeper
 * class's; sweep-verify starts, then records) and the claim on the wall clock (with this world's wall faults it is
 * caught, by the overlap check alone, in 35 and 29 of 1,000 from seeds 1001 and 9001: below the bar of 1 in 20).
 */
const NOT_HERE = ['requeue-before-start', 'claim-on-wall-clock'] as const;
type NotHere = (typeof NOT_HERE)[number];
export const WORKFLOW_WORLD_MUTATIONS = [
  ...(Object.keys(WORKFLOW_MUTATIONS) as WorkflowMutation[]),
  ...MUTATIONS.filter((m): m is Exclude<Mutation, NotHere> => !(NOT_HERE as readonly Mutation[]).includes(m)),
  // The night world's two that each one check alone catches: a chunk marked done as its work starts ("a DONE run is
  // whole"), and a claim that declares its lease in seconds ("never two holders at once": it needs a claimant
  // watching a live holder, which the trigger's duplicate steered right after a renewal makes).
  'done-mark-first',
  'lease-in-seconds',
  // And a batch whose puts overwrite: "batches: none below its fence or a newer one, each item once" alone.
  'puts-unconditional',
] as const;

/** The repository's job: each chunk's items a batch at a time through the fence; a DONE night holds all of them. */
const nightJob = (night: NightSize): WorkflowJob => ({
  chunks: night.chunks,
  lease: { ...LEASE_DEFAULTS, claimBudget: 4 } satisfies LeaseConfig,
  // The construct requires lease − margin to cover a Map Run's start-up too (11 s); the margin covers a rate error of
  // 3 / 25 = 12 %, above the 5.6 % this world draws.
  distributedLease: { ...LEASE_DEFAULTS, leaseMs: 14_000, marginMs: 3_000, claimBudget: 4 } satisfies LeaseConfig,
  chunkTimeoutS: 60,
  environment: {},
  chunkWorkMs: Math.ceil(night.items / night.batch) * night.batchWorkMs,
  run: ({ items, jobs }): JobRun => ({
    work: async (c) => {
      for (let from = 0; from < night.items; from += night.batch) {
        await c.runtime.clock.sleep(night.batchWorkMs);
        c.lease.check();
        const puts = Array.from({ length: Math.min(night.batch, night.items - from) }, (_, i) => ({
          table: items,
          item: { pk: { S: `item#${c.chunk}#${from + i}` }, token: { N: String(c.lease.token) } },
        }));
        await writeBatch(c.fence, puts);
      }
      return { items: night.items };
    },
    whole: () => itemsChecks(jobs, { count: night.chunks * night.items, itemsTable: items }),
  }),
});

/** A definition with `field` removed from every state (the no-task-timeout mutation). */
const without = (machine: MachineDef, field: keyof StateDef): MachineDef => everyState(machine, (st) => delete st[field]);

/** One schedule's broken variant: the stores' (mutations.ts), or the definitions' (WORKFLOW_MUTATIONS). */
function variant(mutation: string, stores: { readonly locks: LockStore; readonly jobs: JobStore }): WorkflowVariant {
  const core = ([...MUTATIONS, ...NIGHT_MUTATIONS] as readonly string[]).includes(mutation) ? (mutation as Mutation | NightMutation) : undefined;
  return {
    broken: applyMutation(core, stores),
    ...(mutation === 'no-task-timeout' ? { machine: (m: MachineDef) => without(m, 'TimeoutSeconds') } : {}),
    skipWaits: mutation === 'wait-skipped',
  };
}

/** The repository's workflow world on the stores `storesOf` builds: in memory (WORKFLOW_WORLD), or on DynamoDB Local (dynamo.ts). */
export const workflowWorld = (storesOf: WorkflowStoresOf, night: NightSize = NIGHT) =>
  fencedJobWorld<JobRun>(storesOf, { job: nightJob(night), variants: WORKFLOW_WORLD_MUTATIONS, variant });

export const WORKFLOW_WORLD = workflowWorld(memoryWorkflowStores());

/**
 * Run one schedule of the workflow world from its seed, optionally with a broken variant, and check it.
 * @param mutation - one of WORKFLOW_WORLD_MUTATIONS
 */
export const runWorkflowSchedule = (seed: number, mutation?: string, placed?: WorkflowPlaced): Promise<ScheduleResult> =>
  runWorld(WORKFLOW_WORLD, seed, mutation, placed);
