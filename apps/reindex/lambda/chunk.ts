/**
 * The reindex job's chunk function: FencedJob's workflow invokes it once per chunk with `{ jobDate, holder, token,
 * chunk }`, after its RaiseFence step raised the job row and every chunk fence to `token`. The library's
 * fencedChunkHandler does FencedJob's contract (resume the lease renewing first, renew from this process, record the
 * chunk done on its fence item, map errors for the workflow's Catch and Retry); the work here checks the stop time
 * before each update and sends each with its chunk fence's guard. It writes nothing to S3: the run's manifest only
 * gets marked DONE by Complete.
 */
import { ConfigError } from '../../../lib/core/internal';
import { chunkHandlerOn, fromEnvironment, required, type Runtime, type RuntimeChunkContext } from '../../../lib/lambda/internal';
import { chunkCount, reindexChunk, type ChunkResult, type ReindexPlan } from '../job';
import { JOB_NAME, MAX_ITEMS, ReindexEnv } from '../schema';

/**
 * The night's plan from this function's environment, every problem at once before anything is written: the plan
 * must make as many chunks as FencedJob gave the workflow (the handler has checked the chunk is one of them).
 */
function planOf(rt: Runtime, date: string): ReindexPlan {
  const plan = { date, items: Number(required(rt.environment, ReindexEnv.items)), chunkSize: Number(required(rt.environment, ReindexEnv.chunkSize)) };
  const problems: string[] = [];
  if (rt.job.name !== JOB_NAME) problems.push(`this chunk function serves the job named ${JOB_NAME}, not ${rt.job.name}`);
  if (!Number.isSafeInteger(plan.items) || plan.items < 1 || plan.items > MAX_ITEMS) problems.push(`${ReindexEnv.items} must be 1..${MAX_ITEMS}`);
  if (!Number.isSafeInteger(plan.chunkSize) || plan.chunkSize < 1) problems.push(`${ReindexEnv.chunkSize} must be a positive integer`);
  else if (chunkCount(plan) !== rt.chunks)
    problems.push(`${plan.items} items in chunks of ${plan.chunkSize} make ${chunkCount(plan)} chunks, not ${rt.chunks}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return plan;
}

/** The reindex work on one chunk: each update checked, then sent with the chunk fence's guard. */
function reindex({ runtime: rt, env, lease, fence, date, chunk }: RuntimeChunkContext): Promise<ChunkResult> {
  const plan = planOf(rt, date);
  const tables = {
    source: required(env, ReindexEnv.sourceTable),
    index: required(env, ReindexEnv.indexTable),
  };
  return reindexChunk({ ddb: rt.clients.ddb, tables, clock: rt.clock, events: rt.events }, lease, fence, plan, chunk);
}

/** The deployed function's handler: resume, renew, the work, the done mark, errors mapped (fencedChunkHandler). */
export const handler = chunkHandlerOn(fromEnvironment(), reindex);
