/**
 * What every function of a fenced job shares: the job's settings from its environment (read and validated once),
 * the AWS clients (built once, reused while the function stays warm, with the clock-offset middleware), and
 * Powertools' Logger, Metrics and Tracer. Handlers are thin: parse the input, call the core, map errors.
 *
 * There is no module state to attach to: each handler is made from a RuntimeSource (lib/lambda/index.ts
 * makeHandlers). A deployed function's entry file builds the default source from its own environment
 * (`fromEnvironment`); the local runner's source mode (lib/local/workflow.ts) builds a runtime with its own clients,
 * event listener and fault hooks, and makes the same handlers from it.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, Metrics } from '@aws-lambda-powertools/metrics';
import { Tracer } from '@aws-lambda-powertools/tracer';
import { SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { type Clock, systemClock } from '../core/clock';
import { ClockOffsetEstimator, offsetBeyondErrorMs } from '../core/clock-offset';
import { isTransient } from '../core/conditions';
import { inWords, validateDate, validateLeaseConfig, type LeaseConfig } from '../core/config';
import { ConfigError, FencepostError } from '../core/errors';
import { Events, type EventListener, type EventName } from '../core/events';
import { outcomeOf, type RunDeps, type RunHooks } from '../core/job';
import { jobKeys, type JobKeys } from '../core/job-keys';
import type { Stores } from '../core/store/stores';
import type { SweeperDeps } from '../core/sweeper';
import { awsClients, measureClockOffset, type Clients } from '../core/aws/clients';
import { awsStores } from '../core/aws/stores';
import { METRICS_NAMESPACE, Metric } from '../core/observability';
import { Env } from './env';
import { withSourceStack } from './source-stack';

// Powertools' own: one per process, as its documentation places them (they read POWERTOOLS_* at load). The service
// is the job's, from POWERTOOLS_SERVICE_NAME (FencedJob sets `fencepost-<job>`): no name here, since one given in
// code would win over the environment and every job would publish as the same service.
/** The function's Powertools Logger: milestones at INFO, the per-batch stream at DEBUG. */
export const logger = new Logger();
/** The function's Powertools Metrics (EMF), flushed after every invocation; the job's alarms read them. */
export const metrics = new Metrics({ namespace: METRICS_NAMESPACE });
/** The function's Powertools Tracer (X-Ray), wrapping the AWS clients in the cloud. */
export const tracer = new Tracer();

/** A function's environment: `process.env` in AWS, the template's variables in the local runner. */
export type Environment = Readonly<Record<string, string | undefined>>;

/** What a runtime is built from. */
export interface RuntimeOptions {
  /** The function's environment (lib/lambda/env.ts names). */
  readonly environment: Environment;
  /** The store clients. @default AWS's (lib/core/aws/clients.ts awsClients), traced by X-Ray */
  readonly clients?: Clients;
  /** Hears every event as well as the log. @default - the log only */
  readonly onEvent?: EventListener;
  /** Fault hooks between a stop-time check and the write it guards (tests only). @default - none */
  readonly hooks?: RunHooks;
  /** The Step Functions client the sweeper starts runs with. @default a new SFNClient, traced by X-Ray */
  readonly sfn?: SFNClient;
  /**
   * The stores to run on instead of the AWS ones on `clients` (the exploration runs the handlers on the in-memory
   * stores: lib/testing/workflow/workflow-world.ts). No clock offset is measured then: no AWS response carries a Date.
   * @default - DynamoDB and S3 through `clients`
   * @internal
   */
  readonly stores?: Stores;
  /** Times every duration and backoff. @default systemClock */
  readonly clock?: Clock;
  /** Jitter source for the retry backoffs. @default Math.random */
  readonly random?: () => number;
}

/** One process's view of the job: its settings, keys and clients. */
export interface Runtime {
  readonly clients: Clients;
  readonly clock: Clock;
  readonly events: Events;
  /** The job's keys (FENCEPOST_JOB_NAME). */
  readonly job: JobKeys;
  /** Chunks in one run (FENCEPOST_CHUNKS). */
  readonly chunks: number;
  readonly lease: LeaseConfig;
  /**
   * What core's lease, fence and run functions take: the stores (the lock table's, the job table's, the manifest
   * bucket's, absent without FENCEPOST_BUCKET), the clock, the events.
   */
  readonly deps: RunDeps;
  /** What the sweeper's looks and re-queues take (lib/core/sweeper.ts): the sparse index and the lock items. */
  readonly sweeperDeps: SweeperDeps;
  /** The time zone a scheduled start's date is read in. */
  readonly scheduleTimeZone: string;
  /** The whole environment, for what only one function reads (the sweeper's storm rule, a chunk function's own tables). */
  readonly environment: Environment;
  readonly offset: ClockOffsetEstimator;
  readonly hooks?: RunHooks;
  /**
   * Start an execution of the job's state machine for a run, named `name` (the sweeper, for a re-queue: lib/lambda/sweep-verify.ts
   * names it per run, fence and sweep). A name already taken is this sweep's own earlier start: no second run.
   */
  startRun(jobDate: string, name: string): Promise<string>;
}

/** Builds the runtime on first use: a bad environment then fails an invocation (logged, mapped), not the module load. */
export type RuntimeSource = () => Runtime;

/** Milestones go to the log at INFO; the per-batch stream only at DEBUG. */
const quiet = new Set<EventName>(['batch-committed', 'renew', 'sighted']);

/** A variable the function cannot run without. */
export function required(environment: Environment, name: string): string {
  const v = environment[name];
  if (!v) throw new ConfigError([`environment variable ${name} is not set`]);
  return v;
}

/** A number variable, or undefined when absent (the caller's validation supplies the default). */
export function optionalNumber(environment: Environment, name: string): number | undefined {
  return environment[name] === undefined ? undefined : Number(environment[name]);
}

/** The variable that sets each lease setting: a problem with one names the variable. */
const LEASE_VARIABLES = { leaseMs: Env.leaseMs, renewMs: Env.renewMs, marginMs: Env.marginMs, claimBudget: Env.claimBudget } as const;

/** The lease settings from the environment, defaults for those not set. @throws ConfigError naming the variables */
function leaseFromEnvironment(env: Environment): LeaseConfig {
  try {
    return validateLeaseConfig(
      Object.fromEntries(Object.entries(LEASE_VARIABLES).map(([setting, variable]) => [setting, optionalNumber(env, variable)])),
    );
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(err.problems.map((p) => inWords(p, LEASE_VARIABLES)));
    throw err;
  }
}

/** The runtime for one process. @throws ConfigError for a missing or invalid variable */
export function createRuntime(options: RuntimeOptions): Runtime {
  const env = options.environment;
  const lease = leaseFromEnvironment(env);
  const chunks = Number(required(env, Env.chunks));
  if (!Number.isSafeInteger(chunks) || chunks < 1) throw new ConfigError([`${Env.chunks} must be a positive integer, got ${env[Env.chunks]}`]);
  const job = jobKeys(required(env, Env.jobName));
  const tables = { locks: required(env, Env.lockTable), jobs: required(env, Env.jobTable) };
  // No bucket: a job whose chunks write no manifest (FencedJob creates none); its run is recorded in DynamoDB alone.
  const bucket = env[Env.bucket];

  const clients = options.clients ?? traced(awsClients());
  const clock = options.clock ?? systemClock;
  const { random } = options;
  const offset = new ClockOffsetEstimator();
  if (!options.stores) {
    measureClockOffset(clients.raw, clock, offset);
    measureClockOffset(clients.s3, clock, offset);
  }
  const events = new Events(env[Env.worker] ?? env.AWS_LAMBDA_FUNCTION_NAME ?? 'lambda', clock).on((e) => {
    if (quiet.has(e.event)) logger.debug(e.event, { ...e });
    else logger.info(e.event, { ...e });
  });
  if (options.onEvent) events.on(options.onEvent);
  const stores = options.stores ?? awsStores(clients, { ...tables, bucket });
  let sfn = options.sfn;
  return {
    clients,
    clock,
    events,
    job,
    chunks,
    lease,
    deps: { ...stores, clock, events, random },
    sweeperDeps: { job: job.name, locks: stores.locks, jobs: stores.jobs, clock },
    scheduleTimeZone: env[Env.scheduleTimeZone] ?? 'UTC',
    environment: env,
    offset,
    hooks: options.hooks,
    async startRun(jobDate, name) {
      const arn = required(env, Env.jobStateMachineArn);
      sfn ??= tracer.captureAWSv3Client(new SFNClient({}));
      try {
        await sfn.send(new StartExecutionCommand({ stateMachineArn: arn, name, input: JSON.stringify({ jobDate }) }));
      } catch (err) {
        if ((err as Error).name !== 'ExecutionAlreadyExists') throw err;
      }
      return name;
    },
  };
}

function traced(clients: Clients): Clients {
  tracer.captureAWSv3Client(clients.raw);
  tracer.captureAWSv3Client(clients.s3);
  return clients;
}

/** A source that builds the runtime once, on first use, and hands the same one out after (a warm function's). */
export function lazily(build: () => Runtime): RuntimeSource {
  let built: Runtime | undefined;
  return () => (built ??= build());
}

/** The default source of a deployed function: its own environment and AWS's clients. */
export function fromEnvironment(): RuntimeSource {
  return lazily(() => createRuntime({ environment: process.env }));
}

/** The error a Retry clause matches: a store that throttled, timed out or failed transiently. */
export class TransientStoreError extends FencepostError {}

/**
 * Run one invocation: the body, then the metrics (clock offset included) are flushed, whatever happened.
 * Errors keep their names, which the state machine's Catch and Retry match: LeaseLostError, StopTimePassedError
 * and FencedOutError end the run quietly as lost; TransientStoreError is retried; anything else fails it.
 */
export async function invoke<T>(name: string, source: RuntimeSource, body: (rt: Runtime) => Promise<T>): Promise<T> {
  logger.appendKeys({ step: name });
  let rt: Runtime | undefined;
  try {
    rt = source();
    return await body(rt);
  } catch (err) {
    const outcome = outcomeOf(err);
    if (outcome === 'fenced-out') metrics.addMetric(Metric.fencedRejections, MetricUnit.Count, 1);
    if (outcome === 'lost-lease') metrics.addMetric(Metric.leaseLost, MetricUnit.Count, 1);
    if (outcome === 'fenced-out' || outcome === 'lost-lease') metrics.addMetric(Metric.runsLost, MetricUnit.Count, 1);
    if (outcome) logger.warn(`${name}: ${outcome}`, { error: (err as Error).message });
    else if (isTransient(err)) throw new TransientStoreError(`${name}: ${(err as Error).name}: ${(err as Error).message}`, { cause: err });
    else logger.error(`${name} failed`, withSourceStack(err) as Error);
    throw err;
  } finally {
    const est = rt?.offset.estimate();
    if (est) {
      metrics.addMetric(Metric.clockOffsetMs, MetricUnit.Milliseconds, Math.abs(est.offsetMs));
      metrics.addMetric(Metric.clockOffsetErrorMs, MetricUnit.Milliseconds, est.errorMs);
      metrics.addMetric(Metric.clockOffsetBeyondErrorMs, MetricUnit.Milliseconds, offsetBeyondErrorMs(est)); // what the alarm reads
    }
    if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
  }
}

/** Input checks shared by the handlers: a clear ConfigError, never a TypeError deep in the core. */
export function runInput(event: unknown, needs: { token?: boolean } = {}): { jobDate: string; holder: string; token: number } {
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
