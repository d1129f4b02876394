/**
 * The two ways `fencepost run` bills a night:
 *   stepfunctions  (default) the synthesized state machine, run locally by aws-local-stepfunctions, each task
 *                  calling the same Lambda handler the cloud runs (lib/local/workflow.ts);
 *   direct         the core's runBilling in this process, for tests and benchmarks.
 * Both report the same summary; for the workflow it is gathered from the holders' events.
 */
import { runBilling, type BillingDeps, type BillingSummary, type Outcome } from '../apps/billing/night';
import type { BillingConfig } from '../apps/billing/settings';
import type { BillingTables } from '../apps/billing/schema';
import { ClaimBudgetExhaustedError, InfrastructureError } from '../lib/core/errors';
import type { FencepostEvent } from '../lib/core/events';
import { Keys } from '../apps/billing/keys';
import type { Clients, Endpoints } from '../lib/core/aws/clients';
import { runWorkflowLocally, type LambdaCode } from '../lib/local/workflow';
import { callLogSink } from '../verify/proofs/call-log';
import { billingApp } from '../apps/billing/app';
import type { RunHooks } from './instrumentation';

export type Engine = 'stepfunctions' | 'direct';
export const ENGINES: readonly Engine[] = ['stepfunctions', 'direct'];
/** What `run` uses unless told otherwise: the state machine that deploys. */
export const DEFAULT_ENGINE: Engine = 'stepfunctions';

export interface EngineRun {
  readonly date: string;
  readonly worker: string;
  readonly config: BillingConfig;
  readonly chunkConcurrency: number;
  /** The clients the engine's holders use (source-mode handlers get them injected). */
  readonly clients: Clients;
  /** The stores' endpoints (the workflow's bundled functions are pointed at them). */
  readonly endpoints: Endpoints;
  /** The tables and the bucket, by name: the workflow's functions are given the names, and build their own stores. */
  readonly tables: BillingTables;
  readonly bucket: string;
  /** Hooks at the instrumented points, from outside the product only (cli/instrumentation.ts). */
  readonly hooks?: RunHooks;
  /** The workflow's task code (cli/instrumentation.ts). @default 'bundle' */
  readonly lambdaCode?: LambdaCode;
}

/** Count what the holders reported: the summary of a run we only see through its events. */
function summaryFromEvents(jobId: string, worker: string): { listener: (e: FencepostEvent) => void; summary: BillingSummary } {
  const summary: BillingSummary = {
    jobId,
    worker,
    token: undefined,
    outcome: 'completed',
    invoicesRecorded: 0,
    invoicesAlreadyRecorded: 0,
    transactions: 0,
    fencedRejections: 0,
    chunksCommitted: 0,
    seconds: 0,
  };
  const listener = (e: FencepostEvent) => {
    if (e.event === 'claim') summary.token = e.token;
    if (e.event === 'batch-committed') {
      summary.invoicesRecorded += Number(e.recorded);
      summary.invoicesAlreadyRecorded += Number(e.alreadyRecorded);
      summary.transactions += Number(e.transactions);
    }
    if (e.event === 'chunk-committed') summary.chunksCommitted++;
    if (e.event === 'batch-rejected' || e.event === 'commit-rejected') summary.fencedRejections++;
  };
  return { listener, summary };
}

export async function runDirect(deps: BillingDeps, run: EngineRun): Promise<BillingSummary> {
  return runBilling(deps, { date: run.date, worker: run.worker, config: run.config, hooks: run.hooks });
}

export async function runStepFunctions(deps: Pick<BillingDeps, 'clock' | 'events'>, run: EngineRun): Promise<BillingSummary> {
  const started = deps.clock.monotonicMs();
  const { listener, summary } = summaryFromEvents(Keys.job(run.date), run.worker);
  const result = await runWorkflowLocally({
    app: billingApp,
    clients: run.clients,
    endpoints: run.endpoints,
    tables: run.tables,
    bucket: run.bucket,
    name: run.worker,
    lambdaCode: run.lambdaCode ?? 'bundle',
    // The repository's test run keeps a call log for the IAM proof; the workflow's Invokes go to it too.
    onCall: callLogSink(),
    input: { jobDate: run.date },
    settings: {
      leaseMs: run.config.leaseMs,
      renewMs: run.config.renewMs,
      marginMs: run.config.marginMs,
      claimBudget: run.config.claimBudget,
      invoices: run.config.invoices,
      chunkSize: run.config.chunkSize,
      chunkConcurrency: run.chunkConcurrency,
      // The stack insists its clock-offset alarm sits below the margin; no alarm exists locally, so keep the
      // synth valid for any margin the run was given instead of refusing a short test lease.
      clockOffsetAlarmMs: Math.max(1, Math.min(500, Math.floor(run.config.marginMs / 4))),
    },
    onEvent: (e) => {
      listener(e);
      deps.events.forward(e);
    },
    hooks: run.hooks,
  });
  summary.seconds = Math.round(deps.clock.monotonicMs() - started) / 1000;
  if (result.status === 'FAILED') {
    if (result.endState === 'ClaimBudgetExhausted') throw new ClaimBudgetExhaustedError(Keys.lock(run.date), run.config.claimBudget, undefined);
    throw new InfrastructureError(`the billing workflow failed at ${result.endState ?? 'an unknown state'}: ${result.error}: ${result.cause}`);
  }
  const lostError = (result.output?.lost ?? {}) as { Error?: string; Cause?: string };
  const outcomes: Record<string, Outcome> = {
    Completed: 'completed',
    AlreadyDone: 'already-done',
    AlreadyRunning: 'another-holder',
    Lost: lostError.Error === 'FencedOutError' ? 'fenced-out' : 'lost-lease',
  };
  summary.outcome = outcomes[result.endState ?? ''] ?? 'completed';
  if (summary.outcome === 'another-holder') summary.reason = 'another holder stayed alive through the whole claim budget, billing the night';
  if (summary.outcome === 'fenced-out' || summary.outcome === 'lost-lease') {
    summary.reason = `${lostError.Error}: ${safeMessage(lostError.Cause)}`;
    if (summary.outcome === 'fenced-out' && summary.fencedRejections === 0) summary.fencedRejections = 1;
  }
  return summary;
}

/** Step Functions carries a Lambda error's Cause as a JSON string ({ errorMessage, ... }). */
function safeMessage(cause: string | undefined): string {
  try {
    return (JSON.parse(cause ?? '') as { errorMessage?: string }).errorMessage ?? String(cause);
  } catch {
    return String(cause);
  }
}
