/**
 * What every billing Lambda shares: configuration from its environment (read and validated once per process),
 * the AWS clients (built once, reused while the function stays warm, with the clock-offset middleware), and
 * Powertools' Logger, Metrics and Tracer. Handlers are thin: parse the input, call the core, map errors.
 *
 * The local runner (local/workflow.ts) runs these same handlers in-process against the embedded stack: it attaches
 * its own clients (and may add an event listener and fault hooks) before the first invocation.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, Metrics } from '@aws-lambda-powertools/metrics';
import { Tracer } from '@aws-lambda-powertools/tracer';
import { SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import type { BillingDeps, BillingHooks } from '../core/billing';
import { outcomeOf } from '../core/billing';
import { systemClock } from '../core/clock';
import { ClockOffsetEstimator, offsetBeyondErrorMs } from '../core/clock-offset';
import { isTransient } from '../core/conditions';
import { validateBillingConfig, validateDate, type BillingConfig } from '../core/config';
import { ConfigError, FencepostError } from '../core/errors';
import { Events, type EventListener, type FencepostEvent } from '../core/events';
import type { LeaseDeps } from '../core/lease';
import { awsClients, observeClockOffset, type Clients } from '../core/stores';
import { METRICS_NAMESPACE, Metric, SERVICE_NAME } from '../core/observability';
import { Env } from './env';

export { Env };

export const logger = new Logger({ serviceName: SERVICE_NAME });
export const metrics = new Metrics({ namespace: METRICS_NAMESPACE, serviceName: SERVICE_NAME });
export const tracer = new Tracer({ serviceName: SERVICE_NAME });

export interface Runtime {
  readonly deps: BillingDeps;
  readonly leaseDeps: LeaseDeps;
  readonly config: BillingConfig;
  readonly scheduleTimeZone: string;
  readonly offset: ClockOffsetEstimator;
  readonly hooks?: BillingHooks;
}

let current: Runtime | undefined;

/** What the local runner injects (local/workflow.ts): its clients for the embedded stack, a listener, fault hooks. */
export interface LocalAttachment {
  readonly clients: Clients;
  readonly onEvent?: EventListener;
  readonly hooks?: BillingHooks;
}
let local: LocalAttachment | undefined;

/** Local runner only: call before the first invocation. In AWS nothing is attached and the clients are AWS's. */
export function attachLocal(attachment: LocalAttachment): void {
  local = attachment;
}

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new ConfigError([`environment variable ${name} is not set`]);
  return v;
}

const optionalInt = (name: string) => (process.env[name] === undefined ? undefined : Number(process.env[name]));

/** Milestones go to the log at INFO; the per-batch stream only at DEBUG. */
const quiet = new Set<FencepostEvent['event']>(['batch-committed', 'renew', 'observe']);

export function runtime(): Runtime {
  if (current) return current;
  const config = validateBillingConfig({
    leaseMs: optionalInt(Env.leaseMs),
    renewMs: optionalInt(Env.renewMs),
    marginMs: optionalInt(Env.marginMs),
    invoices: optionalInt(Env.invoices),
    chunkSize: optionalInt(Env.chunkSize),
    claimBudget: optionalInt(Env.claimBudget),
  });
  const clients = local?.clients ?? awsClients();
  if (!local) {
    tracer.captureAWSv3Client(clients.raw);
    tracer.captureAWSv3Client(clients.s3);
  }
  const offset = new ClockOffsetEstimator();
  observeClockOffset(clients.raw, systemClock, offset);
  observeClockOffset(clients.s3, systemClock, offset);
  const events = new Events(process.env[Env.worker] ?? process.env.AWS_LAMBDA_FUNCTION_NAME ?? 'lambda', systemClock).on((e) => {
    if (quiet.has(e.event)) logger.debug(e.event, { ...e });
    else logger.info(e.event, { ...e });
  });
  if (local?.onEvent) events.on(local.onEvent);
  const deps: BillingDeps = {
    ddb: clients.ddb,
    s3: clients.s3,
    clock: systemClock,
    events,
    bucket: required(Env.bucket),
    tables: { locks: required(Env.lockTable), jobs: required(Env.jobTable), invoices: required(Env.invoiceTable) },
  };
  current = {
    deps,
    config,
    offset,
    hooks: local?.hooks,
    leaseDeps: { ddb: deps.ddb, table: deps.tables.locks, clock: systemClock, events },
    scheduleTimeZone: process.env[Env.scheduleTimeZone] ?? 'UTC',
  };
  return current;
}

/**
 * Start a billing execution for a night (the sweeper, after a re-queue). The name is derived from the job and the
 * fence it re-queued, so a retried sweep step gets ExecutionAlreadyExists instead of a second run.
 */
export async function startBillingRun(jobDate: string, fence: number): Promise<string> {
  const arn = required(Env.billingStateMachineArn);
  sfn ??= tracer.captureAWSv3Client(new SFNClient({}));
  const name = `requeue-${jobDate}-f${fence}`;
  try {
    await sfn.send(new StartExecutionCommand({ stateMachineArn: arn, name, input: JSON.stringify({ jobDate }) }));
  } catch (err) {
    if ((err as Error).name !== 'ExecutionAlreadyExists') throw err;
  }
  return name;
}
let sfn: SFNClient | undefined;

/** The error a Retry clause matches: a store that throttled, timed out or failed transiently. */
export class TransientStoreError extends FencepostError {}

/**
 * Run one invocation: the body, then the metrics (clock offset included) are flushed, whatever happened.
 * Errors keep their names, which the state machine's Catch and Retry match: LeaseLostError, StopTimePassedError
 * and FencedOutError end the run quietly as lost; TransientStoreError is retried; anything else fails it.
 */
export async function invoke<T>(name: string, body: (rt: Runtime) => Promise<T>): Promise<T> {
  logger.appendKeys({ step: name });
  try {
    return await body(runtime());
  } catch (err) {
    const outcome = outcomeOf(err);
    if (outcome === 'fenced-out') metrics.addMetric(Metric.fencedRejections, MetricUnit.Count, 1);
    if (outcome === 'lost-lease') metrics.addMetric(Metric.leaseLost, MetricUnit.Count, 1);
    if (outcome === 'fenced-out' || outcome === 'lost-lease') metrics.addMetric(Metric.runsLost, MetricUnit.Count, 1);
    if (outcome) logger.warn(`${name}: ${outcome}`, { error: (err as Error).message });
    else if (isTransient(err)) throw new TransientStoreError(`${name}: ${(err as Error).name}: ${(err as Error).message}`, { cause: err });
    else logger.error(`${name} failed`, err as Error);
    throw err;
  } finally {
    const est = current?.offset.estimate();
    if (est) {
      metrics.addMetric(Metric.clockOffsetMs, MetricUnit.Milliseconds, Math.abs(est.offsetMs));
      metrics.addMetric(Metric.clockOffsetErrorMs, MetricUnit.Milliseconds, est.errorMs);
      metrics.addMetric(Metric.clockOffsetBeyondErrorMs, MetricUnit.Milliseconds, offsetBeyondErrorMs(est)); // what the alarm reads
    }
    if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
  }
}

/** Input checks shared by the handlers: a clear ConfigError, never a TypeError deep in the core. */
export function nightInput(event: unknown, needs: { token?: boolean } = {}): { jobDate: string; holder: string; token: number } {
  const e = (event ?? {}) as Record<string, unknown>;
  const problems: string[] = [];
  let jobDate = '';
  try {
    jobDate = validateDate(e.jobDate);
  } catch (err) {
    problems.push(...(err as ConfigError).problems.map((p) => `job${p[0].toUpperCase()}${p.slice(1)}`));
  }
  if (typeof e.holder !== 'string' || e.holder.length === 0) problems.push('holder (the execution name) is required');
  const token = Number(e.token);
  if (needs.token && !(Number.isSafeInteger(token) && token > 0)) problems.push(`token must be a positive integer, got ${JSON.stringify(e.token)}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { jobDate, holder: e.holder as string, token };
}
