/**
 * The billing job's chunk function (its FencedJob's user function): one chunk of invoices, as billing's work under
 * the library's fencedChunkHandler (which resumes the lease, renews from this process, marks the chunk done and maps
 * errors). On top of the job's environment it reads its invoice table and the night's size (apps/billing/stack.ts
 * sets them).
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { ConfigError } from '../../../lib/core/internal';
import { BillingEnv, BillingMetric } from '../schema';
import {
  chunkHandlerOn,
  fromEnvironment,
  metrics,
  optionalNumber,
  required,
  type RuntimeChunkContext,
  type RuntimeSource,
} from '../../../lib/lambda/internal';
import { BILLING_JOB } from '../keys';
import { billWork, type ChunkResult } from '../night';
import { validateBillingConfig } from '../settings';

/** Billing's work on one chunk, with its settings from the function's environment. */
async function bill(c: RuntimeChunkContext): Promise<ChunkResult> {
  const rt = c.runtime;
  if (rt.job.name !== BILLING_JOB) throw new ConfigError([`the billing chunk function serves the job named ${BILLING_JOB}, not ${rt.job.name}`]);
  const config = validateBillingConfig({
    ...rt.lease,
    invoices: optionalNumber(c.env, BillingEnv.invoices),
    chunkSize: optionalNumber(c.env, BillingEnv.chunkSize),
  });
  const written = { recorded: 0, alreadyRecorded: 0, transactions: 0 };
  try {
    return await billWork(rt.events, required(c.env, BillingEnv.invoiceTable), c.date, config, written)(c);
  } finally {
    // What this invocation's own transactions wrote (lib/core/batch.ts), also when it fails after: its retry finds those
    // invoices already recorded and does not count them again (docs/ALARMS.md).
    metrics.addMetric(BillingMetric.invoicesRecorded, MetricUnit.Count, written.recorded);
    metrics.addMetric(BillingMetric.invoicesAlreadyRecorded, MetricUnit.Count, written.alreadyRecorded);
  }
}

/** The BillChunk step, made from a runtime source (the local runner's source mode makes it from its own). */
export const chunk = (runtime: RuntimeSource) => chunkHandlerOn(runtime, bill);

/** The deployed function's handler: its runtime is built from its own environment, once per warm environment. */
export const handler = chunk(fromEnvironment());
