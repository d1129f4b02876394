/**
 * The reindex job's chunk function: FencedJob's workflow invokes it once per chunk with `{ jobDate, holder, token,
 * chunk }`, after its RaiseFence step raised the job row and every chunk fence to `token`. It follows FencedJob's
 * contract: resume the lease (renew first; this process computes its own stop time), renew from this process while
 * it works, check the stop time before each update, send each update with its chunk fence's guard, and record the
 * chunk done on its fence item. It writes nothing to S3: the run's manifest only gets marked DONE by Complete.
 *
 * Errors keep their names for the workflow's Catch: FencedOutError, LeaseLostError and StopTimePassedError end the
 * run quietly (another holder owns it); a transient store error is retried by the workflow (the adapter's invoke).
 */
import { ConfigError, resume } from '../../../core/index';
import { fromEnvironment, invoke, nightInput, required, type Runtime, type RuntimeSource } from '../../../lambda/runtime';
import { chunkCount, reindexChunk, type ChunkResult, type ReindexPlan } from '../job';
import { JOB_NAME, MAX_ITEMS, ReindexEnv } from '../schema';

/** What the workflow's chunk task sends (lib/fenced-workflow.ts). */
interface ChunkEvent {
  readonly jobDate?: unknown;
  readonly holder?: unknown;
  readonly token?: unknown;
  readonly chunk?: unknown;
}

/**
 * The night's plan from this function's environment, and the chunk asked for, every problem at once before anything
 * is written: the plan must make as many chunks as FencedJob gave the workflow.
 */
function planOf(rt: Runtime, date: string, chunk: unknown): { plan: ReindexPlan; n: number } {
  const plan = { date, items: Number(required(rt.environment, ReindexEnv.items)), chunkSize: Number(required(rt.environment, ReindexEnv.chunkSize)) };
  const n = Number(chunk);
  const problems: string[] = [];
  if (rt.job.name !== JOB_NAME) problems.push(`this chunk function serves the job named ${JOB_NAME}, not ${rt.job.name}`);
  if (!Number.isSafeInteger(plan.items) || plan.items < 1 || plan.items > MAX_ITEMS) problems.push(`${ReindexEnv.items} must be 1..${MAX_ITEMS}`);
  if (!Number.isSafeInteger(plan.chunkSize) || plan.chunkSize < 1) problems.push(`${ReindexEnv.chunkSize} must be a positive integer`);
  else if (chunkCount(plan) !== rt.chunks)
    problems.push(`${plan.items} items in chunks of ${plan.chunkSize} make ${chunkCount(plan)} chunks, not ${rt.chunks}`);
  if (!Number.isInteger(n) || n < 0 || n >= rt.chunks) problems.push(`chunk must be 0..${rt.chunks - 1}, got ${JSON.stringify(chunk)}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { plan, n };
}

/** The chunk function, made from a runtime source (the deployed one reads its own environment). */
const chunk = (runtime: RuntimeSource) => (event: ChunkEvent) =>
  invoke('reindex-chunk', runtime, async (rt): Promise<ChunkResult> => {
    const { jobDate, holder, token } = nightInput(event, { token: true });
    const { plan, n } = planOf(rt, jobDate, event.chunk);
    const tables = {
      locks: rt.leaseDeps.table,
      jobs: rt.fenceDeps.jobs,
      source: required(rt.environment, ReindexEnv.sourceTable),
      index: required(rt.environment, ReindexEnv.indexTable),
    };

    // 1. Renew first: the stop time is this process's own, never carried over from the step that claimed.
    const lease = await resume(rt.leaseDeps, rt.job.lock(jobDate), holder, token, rt.lease);
    // 2. Renew from the process doing the work: a frozen function stops renewing, and its lease runs out.
    lease.startHeartbeat();
    try {
      // 3. The chunk: each update checked, then guarded; then done on the chunk's fence item.
      return await reindexChunk({ ddb: rt.clients.ddb, tables, clock: rt.clock, events: rt.events }, lease, plan, n);
    } finally {
      await lease.stopHeartbeat();
    }
  });

/** The deployed function's handler: its runtime is built from its own environment, once per warm environment. */
export const handler = chunk(fromEnvironment());
