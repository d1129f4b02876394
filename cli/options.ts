/**
 * Command-line parsing of the repository's command: every option is declared here, unknown options are refused, and
 * every value is validated before anything starts or is written; each bad option is reported in one line that names
 * it. The token and value checkers, and the options of the commands the package ships too, are lib/cli/parse.ts.
 */
import { hostname } from 'node:os';
import { inWords, validateDate, validateLeaseConfig, type LeaseConfig } from '../lib/core/config';
import { nameProblems } from '../lib/election/election';
import { HANDOVER_DEFAULTS, handoverProblems, type HandoverConfig } from '../lib/election/handover';
import { DEFAULTS, validateBillingConfig, type BillingConfig } from '../apps/billing/settings';
import { ConfigError } from '../lib/core/errors';
import { SWEEPER_DEFAULTS, type SweeperConfig } from '../lib/core/sweeper';
import { DEFAULT_ENGINE, ENGINES, type Engine } from './engines';
import { CHAOS_DEFAULTS, KINDS, type Kind } from '../verify/chaos/chaos';
import { STORY_DEFAULTS } from '../verify/story';
import {
  USER_EXPECTS,
  durationOption,
  intOption,
  numberOption,
  parseOptions,
  positiveInt,
  storeOptions,
  storeTarget,
  today,
  userCommandOptions,
  type StoreTarget,
} from '../lib/cli/parse';

export { EXIT, REPEATED_SEPARATOR, type StoreTarget } from '../lib/cli/parse';

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
    'max-requeues-per-night': { type: 'string' },
    'no-start-runs': { type: 'boolean' },
    events: { type: 'boolean' },
    'run-invoices': { type: 'string' },
    'run-chunk-size': { type: 'string' },
    'run-engine': { type: 'string' },
    'run-renew-ms': { type: 'string' },
    'run-margin-ms': { type: 'string' },
  },
  'bump-epochs': userCommandOptions['bump-epochs'],
  chaos: {
    ...storeOptions,
    schedules: { type: 'string' },
    seed: { type: 'string' },
    kinds: { type: 'string' },
    'workflow-share': { type: 'string' },
  },
  story: { ...storeOptions, 'time-scale': { type: 'string' } },
  // simulate takes a scenario name as its first word (POSITIONALS), and repeats --pause, --crash, --clock and --sweep.
  simulate: {
    list: { type: 'boolean' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
    svg: { type: 'string' },
    png: { type: 'string' },
    lease: { type: 'string' },
    renew: { type: 'string' },
    margin: { type: 'string' },
    rule: { type: 'string' },
    poll: { type: 'string' },
    pause: { type: 'string', multiple: true },
    crash: { type: 'string', multiple: true },
    clock: { type: 'string', multiple: true },
    sweep: { type: 'string', multiple: true },
    // simulate explore
    seed: { type: 'string' },
    schedules: { type: 'string' },
    mutation: { type: 'string' },
    world: { type: 'string' },
  },
  elect: {
    ...storeOptions,
    role: { type: 'string' },
    candidate: { type: 'string' },
    'lease-ms': { type: 'string' },
    'renew-ms': { type: 'string' },
    'margin-ms': { type: 'string' },
    entries: { type: 'string' },
    every: { type: 'string' },
    events: { type: 'boolean' },
  },
  leader: { ...storeOptions, role: { type: 'string' } },
  handover: {
    ...storeOptions,
    role: { type: 'string' },
    writer: { type: 'string' },
    'lease-ms': { type: 'string' },
    'renew-ms': { type: 'string' },
    'margin-ms': { type: 'string' },
    'wait-margin-ms': { type: 'string' },
    entries: { type: 'string' },
    every: { type: 'string' },
    events: { type: 'boolean' },
  },
  local: userCommandOptions.local,
} as const;

export type CommandName = keyof typeof commandOptions;

type Options<C extends CommandName> = (typeof commandOptions)[C];
/** Every option that takes a value, across all commands (the compiler checks EXPECTS names each one). */
type ValueOption = {
  [C in CommandName]: { [K in keyof Options<C>]: Options<C>[K] extends { type: 'string' } ? K : never }[keyof Options<C>];
}[CommandName];

/** What each value option expects, for the one-line message when its value is missing or looks like an option. */
const EXPECTS: Record<ValueOption, string> = {
  ...USER_EXPECTS,
  date: 'a date YYYY-MM-DD',
  worker: 'a worker ID',
  invoices: 'a positive integer',
  'chunk-size': 'a positive integer',
  'puts-per-transaction': 'an integer from 1 to 99',
  'lease-ms': 'milliseconds, a positive integer',
  'renew-ms': 'milliseconds, a positive integer',
  'margin-ms': 'milliseconds, 0 or more',
  'claim-budget': 'a positive integer',
  'chunk-concurrency': 'an integer from 1 to 40',
  engine: `one of ${ENGINES.join(', ')}`,
  every: 'a duration like 10s, 500ms or 1m',
  'storm-share': 'a fraction in (0, 1]',
  'storm-minimum': 'a positive integer',
  'max-requeues': 'a positive integer',
  'max-requeues-per-night': 'a positive integer',
  'run-invoices': 'a positive integer',
  'run-chunk-size': 'a positive integer',
  'run-engine': `one of ${ENGINES.join(', ')}`,
  'run-renew-ms': 'milliseconds, a positive integer',
  'run-margin-ms': 'milliseconds, 0 or more',
  schedules: 'a positive integer',
  mutation: "the name of a broken rule; docs/TESTING.md lists each world's (simulate explore)",
  world: 'all, night, workflow or election (simulate explore)',
  seed: 'an integer',
  kinds: `a comma-separated list of ${KINDS.join(', ')}`,
  'workflow-share': 'a fraction in [0, 1]',
  'time-scale': 'a number from 0.05 to 10',
  svg: 'a file to write the timeline SVG to',
  png: 'a file to write the timeline PNG to',
  lease: 'a duration like 10s',
  renew: 'a duration like 3s',
  margin: 'a duration like 2s',
  rule: 'one of no-margin, margin, clock-free',
  poll: 'a duration like 500ms',
  pause: '[WORKER:]START+LENGTH like 4s+15s',
  crash: 'WORKER@TIME like B@25s',
  clock: 'WORKER:+OFFSET like D:+3s, or WORKER:rate=R',
  sweep: 'axes like lease=5..30 margin=0..5',
  role: 'a role name (A-Z a-z 0-9 . _ -)',
  candidate: 'a candidate name (A-Z a-z 0-9 . _ -)',
  writer: 'a writer name (A-Z a-z 0-9 . _ -)',
  entries: 'a non-negative integer',
  'wait-margin-ms': 'milliseconds, 0 or more',
};

/** The commands that take words besides options, and what the words are: `positionals` in the parsed values, one per line. */
const POSITIONALS: Partial<Record<CommandName, string>> = {
  simulate: 'a scenario name (fencepost simulate --list), and name=range words after --sweep',
};

/** Parse one of the repository command's commands (lib/cli/parse.ts checks the tokens). */
export function parseCommand<C extends CommandName>(command: C, args: string[]): Record<string, string | boolean | undefined> {
  return parseOptions(command, commandOptions[command], EXPECTS, args, POSITIONALS[command]);
}

/** Chunk tasks in flight at once when `run` is not told otherwise: one, as the stack's default (apps/billing/config.ts). */
export const DEFAULT_CHUNK_CONCURRENCY = 1;

/** The flag that sets each setting the library, the billing app and the handover check name in their problems. */
const FLAGS: Readonly<Record<string, string>> = {
  leaseMs: '--lease-ms',
  renewMs: '--renew-ms',
  marginMs: '--margin-ms',
  claimBudget: '--claim-budget',
  invoices: '--invoices',
  chunkSize: '--chunk-size',
  putsPerTransaction: '--puts-per-transaction',
  waitMarginMs: '--wait-margin-ms',
};

/** A settings problem said in the command's words: each setting by its flag. */
const inFlags = (problem: string) => inWords(problem, FLAGS);

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
    try {
      date = validateDate(values.date);
    } catch (err) {
      problems.push(...(err as ConfigError).problems.map((p) => `--${p}`));
    }
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
  try {
    config = validateBillingConfig(partial);
  } catch (err) {
    problems.push(...(err as ConfigError).problems.map(inFlags));
  }
  const engine = (values.engine as string | undefined) ?? DEFAULT_ENGINE;
  if (!ENGINES.includes(engine as Engine)) problems.push(`--engine must be one of ${ENGINES.join(', ')}, got ${JSON.stringify(engine)}`);
  const chunkConcurrency = intOption(values, 'chunk-concurrency', problems) ?? DEFAULT_CHUNK_CONCURRENCY;
  if (chunkConcurrency < 1 || chunkConcurrency > 40) problems.push(`--chunk-concurrency must be 1..40, got ${chunkConcurrency}`);
  if (engine === 'direct' && chunkConcurrency !== 1)
    problems.push('--chunk-concurrency needs --engine stepfunctions: the direct engine bills one chunk at a time');
  if (engine !== 'direct' && partial.putsPerTransaction !== undefined && partial.putsPerTransaction !== 99) {
    problems.push('--puts-per-transaction needs --engine direct: the deployed workflow always writes 99 puts per transaction');
  }
  const worker = (values.worker as string | undefined) ?? `${hostname()}-${process.pid}`;
  if (!/^[\w.:@-]{1,128}$/.test(worker))
    problems.push(`--worker must be 1-128 characters of letters, digits, '_', '-', '.', ':' or '@', got ${JSON.stringify(worker)}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    ...target,
    engine: engine as Engine,
    chunkConcurrency,
    date,
    worker,
    config: config!,
    json: Boolean(values.json),
    events: Boolean(values.events),
    audit: !values['no-audit'],
  };
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
    try {
      date = validateDate(values.date);
    } catch (err) {
      problems.push(...(err as ConfigError).problems.map((p) => `--${p}`));
    }
  }
  const target = storeTarget(values, problems);
  const invoices = positiveInt(values, 'invoices', DEFAULTS.invoices, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, date, invoices, json: Boolean(values.json) };
}

export interface SweepOptions extends StoreTarget {
  /** Undefined: one sweep (two sightings a lease apart), then exit. */
  readonly everyMs: number | undefined;
  readonly sweeper: SweeperConfig;
  readonly startRuns: boolean;
  readonly json: boolean;
  readonly events: boolean;
  /** Options for the billing runs the sweeper starts for re-queued jobs. */
  readonly runArgs: string[];
}

export function sweepOptions(values: Record<string, unknown>): SweepOptions {
  const problems: string[] = [];
  const target = storeTarget(values, problems);
  if (!target.endpoints)
    problems.push('sweep needs --dynamodb-endpoint and --s3-endpoint: it watches a stack that billing runs use (start one with fencepost local)');
  const everyMs = durationOption(values, 'every', 100, problems);
  const leaseMs = positiveInt(values, 'lease-ms', SWEEPER_DEFAULTS.leaseMs, problems);
  const stormShare = numberOption(values, 'storm-share', problems) ?? SWEEPER_DEFAULTS.stormShare;
  if (!(stormShare > 0 && stormShare <= 1)) problems.push(`--storm-share must be in (0, 1], got ${stormShare}`);
  const stormMinimum = positiveInt(values, 'storm-minimum', SWEEPER_DEFAULTS.stormMinimum, problems);
  const maxRequeuesPerSweep = positiveInt(values, 'max-requeues', SWEEPER_DEFAULTS.maxRequeuesPerSweep, problems);
  const maxRequeuesPerRun = positiveInt(values, 'max-requeues-per-night', SWEEPER_DEFAULTS.maxRequeuesPerRun, problems);
  const runArgs: string[] = [];
  const runValues: Record<string, unknown> = { 'lease-ms': String(leaseMs) };
  for (const name of ['invoices', 'chunk-size', 'engine', 'renew-ms', 'margin-ms']) {
    const v = values[`run-${name}`];
    if (v === undefined) continue;
    runArgs.push(`--${name}`, String(v));
    runValues[name] = v;
  }
  runArgs.push('--lease-ms', String(leaseMs));
  // The runs start only after a re-queue has been written: check their options now, as `run` would, so a bad
  // --run-* value is refused before anything is written (named as the sweep option it came from).
  try {
    runOptions(runValues);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    problems.push(...err.problems.map((p) => p.replace(/--(invoices|chunk-size|engine|renew-ms|margin-ms)\b/g, '--run-$1')));
  }
  if (problems.length > 0) throw new ConfigError([...new Set(problems)]); // --lease-ms is checked for the sweep and its runs
  return {
    ...target,
    everyMs,
    sweeper: { leaseMs, stormShare, stormMinimum, maxRequeuesPerSweep, maxRequeuesPerRun },
    startRuns: !values['no-start-runs'],
    json: Boolean(values.json),
    events: Boolean(values.events),
    runArgs,
  };
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
  const schedules = positiveInt(values, 'schedules', CHAOS_DEFAULTS.schedules, problems);
  const seed = intOption(values, 'seed', problems) ?? Math.floor(Math.random() * 1e9);
  const kinds = values.kinds === undefined ? [...KINDS] : String(values.kinds).split(',');
  for (const k of kinds) if (!KINDS.includes(k as Kind)) problems.push(`--kinds: ${JSON.stringify(k)} is not one of ${KINDS.join(', ')}`);
  const workflowShare = numberOption(values, 'workflow-share', problems) ?? CHAOS_DEFAULTS.workflowShare;
  if (!(workflowShare >= 0 && workflowShare <= 1)) problems.push(`--workflow-share must be in [0, 1], got ${workflowShare}`);
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
  const timeScale = numberOption(values, 'time-scale', problems) ?? STORY_DEFAULTS.timeScale;
  if (!(timeScale >= 0.05 && timeScale <= 10)) problems.push(`--time-scale must be a number from 0.05 to 10, got ${timeScale}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, timeScale, json: Boolean(values.json) };
}

/** What a candidate or a writer does once it may write: append `entries` ledger entries (all: until stopped), one every `everyMs`. */
export interface LedgerWork {
  /** Undefined: append until SIGINT/SIGTERM. */
  readonly entries: number | undefined;
  readonly everyMs: number;
  readonly json: boolean;
  readonly events: boolean;
}

/** Appends one entry a second unless told otherwise. */
export const LEDGER_EVERY_MS = 1000;

function ledgerWork(values: Record<string, unknown>, problems: string[]): LedgerWork {
  const entries = intOption(values, 'entries', problems);
  if (entries !== undefined && entries < 0) problems.push(`--entries must be 0 or more, got ${entries}`);
  return {
    entries,
    everyMs: durationOption(values, 'every', 10, problems) ?? LEDGER_EVERY_MS,
    json: Boolean(values.json),
    events: Boolean(values.events),
  };
}

function requiredName(
  values: Record<string, unknown>,
  option: 'role' | 'candidate' | 'writer',
  fallback: string | undefined,
  problems: string[],
): string {
  const v = (values[option] as string | undefined) ?? fallback;
  if (v === undefined) {
    problems.push(`--${option} is required`);
    return '';
  }
  problems.push(...nameProblems(option === 'role' ? 'role' : 'candidate', v).map((p) => `--${p.replace('candidate', option)}`));
  return v;
}

const defaultName = () => `${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64);

export interface ElectOptions extends StoreTarget, LedgerWork {
  readonly role: string;
  readonly candidate: string;
  readonly config: LeaseConfig;
}

export function electOptions(values: Record<string, unknown>): ElectOptions {
  const problems: string[] = [];
  const target = storeTarget(values, problems);
  const role = requiredName(values, 'role', undefined, problems);
  const candidate = requiredName(values, 'candidate', defaultName(), problems);
  let config: LeaseConfig | undefined;
  try {
    config = validateLeaseConfig({
      leaseMs: intOption(values, 'lease-ms', problems),
      renewMs: intOption(values, 'renew-ms', problems),
      marginMs: intOption(values, 'margin-ms', problems),
    });
  } catch (err) {
    problems.push(...(err as ConfigError).problems.map(inFlags));
  }
  const work = ledgerWork(values, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, ...work, role, candidate, config: config! };
}

export interface LeaderOptions extends StoreTarget {
  readonly role: string;
  readonly json: boolean;
}

export function leaderOptions(values: Record<string, unknown>): LeaderOptions {
  const problems: string[] = [];
  const target = storeTarget(values, problems);
  const role = requiredName(values, 'role', undefined, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, role, json: Boolean(values.json) };
}

export interface HandoverOptions extends StoreTarget, LedgerWork {
  readonly role: string;
  readonly writer: string;
  readonly config: HandoverConfig;
}

export function handoverOptions(values: Record<string, unknown>): HandoverOptions {
  const problems: string[] = [];
  const target = storeTarget(values, problems);
  const role = requiredName(values, 'role', undefined, problems);
  const writer = requiredName(values, 'writer', defaultName(), problems);
  const unparsed = problems.length;
  const config: HandoverConfig = {
    leaseMs: intOption(values, 'lease-ms', problems) ?? HANDOVER_DEFAULTS.leaseMs,
    renewMs: intOption(values, 'renew-ms', problems) ?? HANDOVER_DEFAULTS.renewMs,
    marginMs: intOption(values, 'margin-ms', problems) ?? HANDOVER_DEFAULTS.marginMs,
    waitMarginMs: intOption(values, 'wait-margin-ms', problems) ?? HANDOVER_DEFAULTS.waitMarginMs,
    claimBudget: HANDOVER_DEFAULTS.claimBudget,
  };
  // Every bad option at once, as `run` lists them: the settings are checked whatever the names' problems; only a
  // number that did not parse is left out (its default would stand in for it and mislead).
  if (problems.length === unparsed) problems.push(...handoverProblems(config).map(inFlags));
  const work = ledgerWork(values, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, ...work, role, writer, config };
}
