/**
 * Command-line parsing: every option is declared here, unknown options are refused (util.parseArgs strict mode),
 * and every value is validated before anything starts or is written.
 */
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { validateBillingConfig, validateDate, type BillingConfig } from '../core/config';
import { ConfigError } from '../core/errors';
import { DEFAULT_BUCKET, DEFAULT_TABLE_PREFIX } from '../core/schema';
import type { Endpoints } from '../core/stores';
import { ENGINES, type Engine } from './engines';
import { KINDS, type Kind } from '../../local/chaos';

export const EXIT = {
  ok: 0,
  /** Infrastructure or unexpected failure. */
  failure: 1,
  /** Bad input: nothing was written. */
  usage: 2,
  /** This worker lost the lease or was fenced out; the data is safe, another holder owns the job. */
  lost: 3,
  /** The audit found a broken invariant. */
  auditFailed: 4,
} as const;

const storeOptions = {
  'dynamodb-endpoint': { type: 'string' },
  's3-endpoint': { type: 'string' },
  'table-prefix': { type: 'string' },
  bucket: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const commandOptions = {
  run: {
    ...storeOptions,
    date: { type: 'string' },
    worker: { type: 'string' },
    invoices: { type: 'string' },
    'chunk-size': { type: 'string' },
    'puts-per-transaction': { type: 'string' },
    'lease-ms': { type: 'string' },
    'renew-ms': { type: 'string' },
    'margin-ms': { type: 'string' },
    'claim-budget': { type: 'string' },
    'chunk-concurrency': { type: 'string' },
    engine: { type: 'string' },
    events: { type: 'boolean' },
    'no-audit': { type: 'boolean' },
  },
  audit: { ...storeOptions, date: { type: 'string' }, invoices: { type: 'string' } },
  sweep: {
    ...storeOptions,
    every: { type: 'string' },
    'lease-ms': { type: 'string' },
    'storm-share': { type: 'string' },
    'storm-minimum': { type: 'string' },
    'max-requeues': { type: 'string' },
    'no-start-runs': { type: 'boolean' },
    events: { type: 'boolean' },
    'run-invoices': { type: 'string' },
    'run-chunk-size': { type: 'string' },
    'run-engine': { type: 'string' },
    'run-renew-ms': { type: 'string' },
    'run-margin-ms': { type: 'string' },
  },
  'bump-epochs': { ...storeOptions, by: { type: 'string' }, 'run-id': { type: 'string' }, 'dry-run': { type: 'boolean' }, aws: { type: 'boolean' }, 'lock-table': { type: 'string' } },
  chaos: { ...storeOptions, schedules: { type: 'string' }, seed: { type: 'string' }, kinds: { type: 'string' }, 'workflow-share': { type: 'string' } },
  story: { ...storeOptions, 'time-scale': { type: 'string' } },
  local: { 'data-dir': { type: 'string' }, 'dynamodb-port': { type: 'string' }, 's3-port': { type: 'string' }, help: { type: 'boolean', short: 'h' } },
} as const;

export type CommandName = keyof typeof commandOptions;

export function parseCommand<C extends CommandName>(command: C, args: string[]) {
  try {
    return parseArgs({ args, options: commandOptions[command], strict: true, allowPositionals: false }).values as Record<string, string | boolean | undefined>;
  } catch (err) {
    throw new ConfigError([`${command}: ${(err as Error).message.replace(/\. To specify.*$/s, '')} (see fencepost ${command} --help)`]);
  }
}

/** An integer option, or undefined if absent; a bad value becomes a problem in the list. */
function intOption(values: Record<string, unknown>, name: string, problems: string[]): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^-?\d+$/.test(raw.replace(/_/g, ''))) {
    problems.push(`--${name} must be an integer, got ${JSON.stringify(raw)}`);
    return undefined;
  }
  return Number(raw.replace(/_/g, ''));
}

/** A positive integer option with a default; a bad value becomes a problem in the list. */
function positiveInt(values: Record<string, unknown>, name: string, fallback: number, problems: string[]): number {
  const v = intOption(values, name, problems) ?? fallback;
  if (v < 1) problems.push(`--${name} must be a positive integer, got ${v}`);
  return v;
}

export interface StoreTarget {
  /** Undefined: start the embedded local stack. */
  readonly endpoints: Endpoints | undefined;
  readonly tablePrefix: string;
  readonly bucket: string;
}

function storeTarget(values: Record<string, unknown>, problems: string[]): StoreTarget {
  const ddb = values['dynamodb-endpoint'] as string | undefined;
  const s3 = values['s3-endpoint'] as string | undefined;
  if ((ddb === undefined) !== (s3 === undefined)) problems.push('give both --dynamodb-endpoint and --s3-endpoint, or neither (to start the embedded stack)');
  for (const [name, url] of [['dynamodb-endpoint', ddb], ['s3-endpoint', s3]] as const) {
    if (url !== undefined && !/^https?:\/\/[^/\s]+\/?$/.test(url)) problems.push(`--${name} must be a URL like http://127.0.0.1:8000, got ${JSON.stringify(url)}`);
  }
  const tablePrefix = (values['table-prefix'] as string | undefined) ?? DEFAULT_TABLE_PREFIX;
  if (!/^[A-Za-z0-9_.-]{0,200}$/.test(tablePrefix)) problems.push(`--table-prefix may hold only letters, digits, '_', '-' and '.', got ${JSON.stringify(tablePrefix)}`);
  const bucket = (values.bucket as string | undefined) ?? DEFAULT_BUCKET;
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) problems.push(`--bucket must be a valid S3 bucket name (3-63 lowercase letters, digits, '.', '-'), got ${JSON.stringify(bucket)}`);
  return { endpoints: ddb && s3 ? { dynamodb: ddb.replace(/\/$/, ''), s3: s3.replace(/\/$/, '') } : undefined, tablePrefix, bucket };
}

/** Today's date for the nightly run: the calendar date on the wall clock (a date, not a duration). */
export function today(): string {
  return new Date().toISOString().slice(0, 10);
}

export interface RunOptions extends StoreTarget {
  readonly engine: Engine;
  readonly chunkConcurrency: number;
  readonly date: string;
  readonly worker: string;
  readonly config: BillingConfig;
  readonly json: boolean;
  readonly events: boolean;
  readonly audit: boolean;
}

export function runOptions(values: Record<string, unknown>): RunOptions {
  const problems: string[] = [];
  let date = today();
  if (values.date !== undefined) {
    try { date = validateDate(values.date); } catch (err) { problems.push(...(err as ConfigError).problems.map((p) => `--${p}`)); }
  }
  const target = storeTarget(values, problems);
  const partial = {
    invoices: intOption(values, 'invoices', problems),
    chunkSize: intOption(values, 'chunk-size', problems),
    putsPerTransaction: intOption(values, 'puts-per-transaction', problems),
    leaseMs: intOption(values, 'lease-ms', problems),
    renewMs: intOption(values, 'renew-ms', problems),
    marginMs: intOption(values, 'margin-ms', problems),
    claimBudget: intOption(values, 'claim-budget', problems),
  };
  let config: BillingConfig | undefined;
  try { config = validateBillingConfig(partial); } catch (err) { problems.push(...(err as ConfigError).problems.map((p) => `--${p}`)); }
  const engine = (values.engine as string | undefined) ?? 'stepfunctions';
  if (!ENGINES.includes(engine as Engine)) problems.push(`--engine must be one of ${ENGINES.join(', ')}, got ${JSON.stringify(engine)}`);
  const chunkConcurrency = intOption(values, 'chunk-concurrency', problems) ?? 1;
  if (chunkConcurrency < 1 || chunkConcurrency > 40) problems.push(`--chunk-concurrency must be 1..40, got ${chunkConcurrency}`);
  if (engine === 'direct' && chunkConcurrency !== 1) problems.push('--chunk-concurrency needs --engine stepfunctions: the direct engine bills one chunk at a time');
  if (engine !== 'direct' && partial.putsPerTransaction !== undefined && partial.putsPerTransaction !== 99) {
    problems.push('--puts-per-transaction needs --engine direct: the deployed workflow always writes 99 puts per transaction');
  }
  const worker = (values.worker as string | undefined) ?? `${hostname()}-${process.pid}`;
  if (!/^[\w.:@-]{1,128}$/.test(worker)) problems.push(`--worker must be 1-128 characters of letters, digits, '_', '-', '.', ':' or '@', got ${JSON.stringify(worker)}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, engine: engine as Engine, chunkConcurrency, date, worker, config: config!, json: Boolean(values.json), events: Boolean(values.events), audit: !values['no-audit'] };
}

export interface AuditOptions extends StoreTarget {
  readonly date: string;
  readonly invoices: number;
  readonly json: boolean;
}

export function auditOptions(values: Record<string, unknown>): AuditOptions {
  const problems: string[] = [];
  let date = '';
  if (values.date === undefined) problems.push('--date is required: the night to audit (YYYY-MM-DD)');
  else {
    try { date = validateDate(values.date); } catch (err) { problems.push(...(err as ConfigError).problems.map((p) => `--${p}`)); }
  }
  const target = storeTarget(values, problems);
  const invoices = positiveInt(values, 'invoices', 50_000, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, date, invoices, json: Boolean(values.json) };
}

export interface LocalOptions {
  readonly dataDir?: string;
  readonly dynamodbPort?: number;
  readonly s3Port?: number;
}

export function localOptions(values: Record<string, unknown>): LocalOptions {
  const problems: string[] = [];
  const port = (name: string) => {
    const p = intOption(values, name, problems);
    if (p !== undefined && (p < 1 || p > 65535)) problems.push(`--${name} must be 1-65535, got ${p}`);
    return p;
  };
  const ports = { dynamodbPort: port('dynamodb-port'), s3Port: port('s3-port') };
  if (problems.length > 0) throw new ConfigError(problems);
  return { dataDir: values['data-dir'] as string | undefined, ...ports };
}

export interface SweepOptions extends StoreTarget {
  /** Undefined: one sweep (two sightings a lease apart), then exit. */
  readonly everyMs: number | undefined;
  readonly sweeper: { leaseMs: number; stormShare: number; stormMinimum: number; maxRequeuesPerSweep: number };
  readonly startRuns: boolean;
  readonly json: boolean;
  readonly events: boolean;
  /** Options for the billing runs the sweeper starts for re-queued jobs. */
  readonly runArgs: string[];
}

export function sweepOptions(values: Record<string, unknown>): SweepOptions {
  const problems: string[] = [];
  const target = storeTarget(values, problems);
  if (!target.endpoints) problems.push('sweep needs --dynamodb-endpoint and --s3-endpoint: it watches a stack that billing runs use (start one with fencepost local)');
  let everyMs: number | undefined;
  if (values.every !== undefined) {
    const m = /^(\d+)(ms|s|m)?$/.exec(String(values.every));
    if (!m) problems.push(`--every must be a duration like 10s, 500ms or 1m, got ${JSON.stringify(values.every)}`);
    else everyMs = Number(m[1]) * ({ ms: 1, s: 1000, m: 60_000 }[m[2] ?? 's'] as number);
    if (everyMs !== undefined && everyMs < 100) problems.push('--every must be at least 100ms');
  }
  const leaseMs = positiveInt(values, 'lease-ms', 10_000, problems);
  const stormShare = values['storm-share'] === undefined ? 0.5 : Number(values['storm-share']);
  if (!(stormShare > 0 && stormShare <= 1)) problems.push(`--storm-share must be in (0, 1], got ${JSON.stringify(values['storm-share'])}`);
  const stormMinimum = positiveInt(values, 'storm-minimum', 3, problems);
  const maxRequeuesPerSweep = positiveInt(values, 'max-requeues', 10, problems);
  const runArgs: string[] = [];
  for (const name of ['invoices', 'chunk-size', 'engine', 'renew-ms', 'margin-ms']) {
    const v = values[`run-${name}`];
    if (v !== undefined) runArgs.push(`--${name}`, String(v));
  }
  runArgs.push('--lease-ms', String(leaseMs));
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    ...target, everyMs, sweeper: { leaseMs, stormShare, stormMinimum, maxRequeuesPerSweep },
    startRuns: !values['no-start-runs'], json: Boolean(values.json), events: Boolean(values.events), runArgs,
  };
}

export interface BumpOptions extends StoreTarget {
  /** Bump a table in AWS (credentials and Region from the environment) instead of a local stack. */
  readonly aws: boolean;
  /** The lock table's name; required with --aws (the restored table's name). */
  readonly lockTable: string | undefined;
  readonly by: number;
  readonly runId: string;
  readonly dryRun: boolean;
  readonly json: boolean;
}

export function bumpOptions(values: Record<string, unknown>): BumpOptions {
  const problems: string[] = [];
  const target = storeTarget(values, problems);
  const by = positiveInt(values, 'by', 1_000_000, problems);
  const runId = (values['run-id'] as string | undefined) ?? `bump-${today()}-${process.pid}`;
  if (!/^[\w.:-]{1,100}$/.test(runId)) problems.push(`--run-id must be 1-100 letters, digits, '_', '-', '.', ':', got ${JSON.stringify(runId)}`);
  const aws = Boolean(values.aws);
  const lockTable = values['lock-table'] as string | undefined;
  if (aws && !lockTable) problems.push('--aws needs --lock-table NAME: the restored lock table to bump');
  if (aws && target.endpoints) problems.push('--aws and --dynamodb-endpoint/--s3-endpoint exclude each other');
  if (lockTable !== undefined && !/^[A-Za-z0-9_.-]{3,255}$/.test(lockTable)) problems.push(`--lock-table must be a DynamoDB table name, got ${JSON.stringify(lockTable)}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, aws, lockTable, by, runId, dryRun: Boolean(values['dry-run']), json: Boolean(values.json) };
}

export interface ChaosCliOptions extends StoreTarget {
  readonly schedules: number;
  readonly seed: number;
  readonly kinds: readonly Kind[];
  readonly workflowShare: number;
  readonly json: boolean;
}

export function chaosOptions(values: Record<string, unknown>): ChaosCliOptions {
  const problems: string[] = [];
  const target = storeTarget(values, problems);
  const schedules = positiveInt(values, 'schedules', 200, problems);
  const seed = intOption(values, 'seed', problems) ?? Math.floor(Math.random() * 1e9);
  const kinds = values.kinds === undefined ? [...KINDS] : String(values.kinds).split(',');
  for (const k of kinds) if (!KINDS.includes(k as Kind)) problems.push(`--kinds: ${JSON.stringify(k)} is not one of ${KINDS.join(', ')}`);
  const workflowShare = values['workflow-share'] === undefined ? 0.2 : Number(values['workflow-share']);
  if (!(workflowShare >= 0 && workflowShare <= 1)) problems.push(`--workflow-share must be in [0, 1], got ${JSON.stringify(values['workflow-share'])}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, schedules, seed, kinds: kinds as Kind[], workflowShare, json: Boolean(values.json) };
}

export interface StoryOptions extends StoreTarget {
  readonly timeScale: number;
  readonly json: boolean;
}

export function storyOptions(values: Record<string, unknown>): StoryOptions {
  const problems: string[] = [];
  const target = storeTarget(values, problems);
  const timeScale = values['time-scale'] === undefined ? 1 : Number(values['time-scale']);
  if (!(timeScale >= 0.05 && timeScale <= 10)) problems.push(`--time-scale must be a number from 0.05 to 10, got ${JSON.stringify(values['time-scale'])}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, timeScale, json: Boolean(values.json) };
}
