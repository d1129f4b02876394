/**
 * Command-line parsing: every option is declared here, unknown options are refused, and every value is validated
 * before anything starts or is written; each bad option is reported in one line that names it.
 */
import { hostname } from 'node:os';
import { parseArgs } from 'node:util';
import { validateDate, validateLeaseConfig, type LeaseConfig } from '../core/config';
import { nameProblems } from '../core/election';
import { HANDOVER_DEFAULTS, handoverProblems, type HandoverConfig } from '../core/handover';
import { DEFAULTS, validateBillingConfig, type BillingConfig } from '../apps/billing/settings';
import { ConfigError } from '../core/errors';
import { DEFAULT_BUMP } from '../core/restore';
import { DEFAULT_BUCKET, DEFAULT_TABLE_PREFIX } from '../core/schema';
import type { Endpoints } from '../core/aws/clients';
import { SWEEPER_DEFAULTS, type SweeperConfig } from '../core/sweeper';
import { DEFAULT_ENGINE, ENGINES, type Engine } from './engines';
import { CHAOS_DEFAULTS, KINDS, type Kind } from '../harness/chaos';
import { STORY_DEFAULTS } from '../harness/story';

export const EXIT = {
  ok: 0,
  /** Infrastructure or unexpected failure. */
  failure: 1,
  /** Bad input: nothing was written. */
  usage: 2,
  /** Another holder owns the job: this worker lost the lease, was fenced out, or outwaited its claim budget on a live holder of the RUNNING night. */
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
  'bump-epochs': {
    ...storeOptions,
    by: { type: 'string' },
    'run-id': { type: 'string' },
    'dry-run': { type: 'boolean' },
    aws: { type: 'boolean' },
    'lock-table': { type: 'string' },
  },
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
  local: {
    'data-dir': { type: 'string' },
    'dynamodb-port': { type: 'string' },
    's3-port': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
} as const;

export type CommandName = keyof typeof commandOptions;

type Options<C extends CommandName> = (typeof commandOptions)[C];
/** Every option that takes a value, across all commands (the compiler checks EXPECTS names each one). */
type ValueOption = {
  [C in CommandName]: { [K in keyof Options<C>]: Options<C>[K] extends { type: 'string' } ? K : never }[keyof Options<C>];
}[CommandName];

/** What each value option expects, for the one-line message when its value is missing or looks like an option. */
const EXPECTS: Record<ValueOption, string> = {
  'dynamodb-endpoint': 'a URL like http://127.0.0.1:8000',
  's3-endpoint': 'a URL like http://127.0.0.1:9000',
  'table-prefix': 'a table-name prefix like fencepost-',
  bucket: 'an S3 bucket name',
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
  'run-invoices': 'a positive integer',
  'run-chunk-size': 'a positive integer',
  'run-engine': `one of ${ENGINES.join(', ')}`,
  'run-renew-ms': 'milliseconds, a positive integer',
  'run-margin-ms': 'milliseconds, 0 or more',
  by: 'a positive integer',
  'run-id': 'an ID',
  'lock-table': 'a DynamoDB table name',
  schedules: 'a positive integer',
  mutation: 'the name of a broken rule; docs/TESTING.md lists each world\'s (simulate explore)',
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
  'data-dir': 'a folder',
  'dynamodb-port': 'a port number 1-65535',
  's3-port': 'a port number 1-65535',
};

/** The closest option name, for "did you mean": a typo (edit distance <= 2) or a prefix either way. */
function closest(name: string, known: readonly string[]): string | undefined {
  const distance = (a: string, b: string): number => {
    let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
    for (let i = 1; i <= a.length; i++) {
      const row = [i];
      for (let j = 1; j <= b.length; j++) row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = row;
    }
    return prev[b.length];
  };
  const scored = known.map((k) => ({ k, d: k.startsWith(name) || name.startsWith(k) ? 1 : distance(name, k) })).filter((x) => x.d <= 2);
  return scored.sort((a, b) => a.d - b.d)[0]?.k;
}

/** The commands that take words besides options, and what the words are: `positionals` in the parsed values, one per line. */
const POSITIONALS: Partial<Record<CommandName, string>> = {
  simulate: 'a scenario name (fencepost simulate --list), and name=range words after --sweep',
};

/** A repeatable option's values are joined with this in the parsed values. */
export const REPEATED_SEPARATOR = '\n';

/**
 * Parse a command's arguments. Node's strict parseArgs explains a bad option in up to three lines that suggest
 * `--opt=-XYZ` (and refuses `--invoices -5` as "ambiguous"), so the tokens are checked here instead: one line per
 * bad option, naming it and what it expects. A value starting with '-' is taken when it is a number (so
 * `--invoices -5` reaches the range check and `--seed -5` works), refused when it looks like an option.
 */
export function parseCommand<C extends CommandName>(command: C, args: string[]): Record<string, string | boolean | undefined> {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = commandOptions[command];
  const positionals: string[] = [];
  const expects = EXPECTS as Record<string, string>;
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
  const values: Record<string, string | boolean | undefined> = {};
  const problems: string[] = [];
  const help = `fencepost ${command} --help`;
  let afterUnknown = false;
  for (const t of tokens) {
    if (t.kind === 'option-terminator') continue;
    if (t.kind === 'positional') {
      if (POSITIONALS[command] !== undefined && !afterUnknown) {
        positionals.push(t.value);
        continue;
      }
      // The value of an unknown option is not a second problem.
      if (!afterUnknown) problems.push(`unexpected argument ${JSON.stringify(t.value)}: ${command} takes only options (see ${help})`);
      afterUnknown = false;
      continue;
    }
    afterUnknown = false;
    const spec = Object.hasOwn(options, t.name) ? options[t.name] : undefined;
    if (!spec) {
      const guess = t.rawName.startsWith('--') ? closest(t.name, Object.keys(options)) : undefined;
      problems.push(`unknown option '${t.rawName}'${guess ? `; did you mean --${guess}?` : ''} (see ${help})`);
      afterUnknown = t.value === undefined;
      continue;
    }
    if (spec.type === 'boolean') {
      if (t.value !== undefined) problems.push(`${t.rawName} takes no value, got ${JSON.stringify(t.value)}`);
      else values[t.name] = true;
      continue;
    }
    const what = expects[t.name];
    if (t.value === undefined) {
      problems.push(`${t.rawName} needs a value: ${what}`);
    } else if (!t.inlineValue && t.value.startsWith('-') && !/^-[\d.]/.test(t.value)) {
      const name = t.value.replace(/^-+/, '').split('=')[0];
      const known = Object.hasOwn(options, name) || Object.values(options).some((o) => t.value === `-${o.short}`);
      problems.push(
        known || t.value === '--'
          ? `${t.rawName} needs a value (${what}), got the option ${t.value} instead`
          : `${t.rawName} needs a value (${what}), got ${JSON.stringify(t.value)}, which looks like an option (write ${t.rawName}=${t.value} if it is the value)`,
      );
    } else if (spec.multiple && values[t.name] !== undefined) {
      values[t.name] = `${String(values[t.name])}${REPEATED_SEPARATOR}${t.value}`;
    } else if (values[t.name] !== undefined && values[t.name] !== t.value) {
      problems.push(`${t.rawName} given twice (${JSON.stringify(values[t.name])} and ${JSON.stringify(t.value)}): give it once`);
    } else {
      values[t.name] = t.value;
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
  if (positionals.length > 0) values.positionals = positionals.join(REPEATED_SEPARATOR);
  return values;
}

/** An integer option, or undefined if absent; a bad value becomes a problem in the list. */
function intOption(values: Record<string, unknown>, name: string, problems: string[]): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^-?\d+$/.test(raw.replace(/_/g, ''))) {
    problems.push(`--${name} must be an integer, got ${JSON.stringify(raw)}`);
    return undefined;
  }
  const n = Number(raw.replace(/_/g, ''));
  if (!Number.isSafeInteger(n)) {
    problems.push(`--${name} is too large, got ${raw}`);
    return undefined;
  }
  return n;
}

/** A decimal number option, or undefined if absent; Number() alone would take '', '0x1' and 'Infinity'. */
function numberOption(values: Record<string, unknown>, name: string, problems: string[]): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^-?(\d+\.?\d*|\.\d+)$/.test(raw)) {
    problems.push(`--${name} must be a number, got ${JSON.stringify(raw)}`);
    return undefined;
  }
  return Number(raw);
}

/** A duration option (10s, 500ms, 1m; a bare number is seconds) in milliseconds, at least `minMs`; undefined if absent. */
function durationOption(values: Record<string, unknown>, name: string, minMs: number, problems: string[]): number | undefined {
  if (values[name] === undefined) return undefined;
  const m = /^(\d+)(ms|s|m)?$/.exec(String(values[name]));
  if (!m) {
    problems.push(`--${name} must be a duration like 10s, 500ms or 1m, got ${JSON.stringify(values[name])}`);
    return undefined;
  }
  const ms = Number(m[1]) * ({ ms: 1, s: 1000, m: 60_000 }[m[2] ?? 's'] as number);
  if (ms < minMs) problems.push(`--${name} must be at least ${minMs}ms`);
  return ms;
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
  if ((ddb === undefined) !== (s3 === undefined))
    problems.push('give both --dynamodb-endpoint and --s3-endpoint, or neither (to start the embedded stack)');
  for (const [name, url] of [
    ['dynamodb-endpoint', ddb],
    ['s3-endpoint', s3],
  ] as const) {
    if (url !== undefined && !/^https?:\/\/[^/\s]+\/?$/.test(url))
      problems.push(`--${name} must be a URL like http://127.0.0.1:8000, got ${JSON.stringify(url)}`);
  }
  const tablePrefix = (values['table-prefix'] as string | undefined) ?? DEFAULT_TABLE_PREFIX;
  if (!/^[A-Za-z0-9_.-]{0,200}$/.test(tablePrefix))
    problems.push(`--table-prefix may hold only letters, digits, '_', '-' and '.', got ${JSON.stringify(tablePrefix)}`);
  const bucket = (values.bucket as string | undefined) ?? DEFAULT_BUCKET;
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
    problems.push(`--bucket must be a valid S3 bucket name (3-63 lowercase letters, digits, '.', '-'), got ${JSON.stringify(bucket)}`);
  return { endpoints: ddb && s3 ? { dynamodb: ddb.replace(/\/$/, ''), s3: s3.replace(/\/$/, '') } : undefined, tablePrefix, bucket };
}

/** Today's date for the nightly run: the calendar date on the wall clock (a date, not a duration). */
function today(): string {
  return new Date().toISOString().slice(0, 10);
}

/** Chunk tasks in flight at once when `run` is not told otherwise: one, as the stack's default (apps/billing/config.ts). */
export const DEFAULT_CHUNK_CONCURRENCY = 1;

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
    problems.push(...(err as ConfigError).problems.map((p) => `--${p}`));
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
  if (values['data-dir'] === '') problems.push('--data-dir needs a folder, got ""');
  if (ports.dynamodbPort !== undefined && ports.dynamodbPort === ports.s3Port)
    problems.push(`--dynamodb-port and --s3-port must differ, both are ${ports.s3Port}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { dataDir: values['data-dir'] as string | undefined, ...ports };
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
    sweeper: { leaseMs, stormShare, stormMinimum, maxRequeuesPerSweep },
    startRuns: !values['no-start-runs'],
    json: Boolean(values.json),
    events: Boolean(values.events),
    runArgs,
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
  const by = positiveInt(values, 'by', DEFAULT_BUMP, problems);
  const runId = (values['run-id'] as string | undefined) ?? `bump-${today()}-${process.pid}`;
  if (!/^[\w.:-]{1,100}$/.test(runId)) problems.push(`--run-id must be 1-100 letters, digits, '_', '-', '.', ':', got ${JSON.stringify(runId)}`);
  const aws = Boolean(values.aws);
  const lockTable = values['lock-table'] as string | undefined;
  if (aws && !lockTable) problems.push('--aws needs --lock-table NAME: the restored lock table to bump');
  if (aws && target.endpoints) problems.push('--aws and --dynamodb-endpoint/--s3-endpoint exclude each other');
  if (lockTable !== undefined && !/^[A-Za-z0-9_.-]{3,255}$/.test(lockTable))
    problems.push(`--lock-table must be a DynamoDB table name, got ${JSON.stringify(lockTable)}`);
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
    problems.push(...(err as ConfigError).problems.map((p) => `--${p}`));
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
  if (problems.length === unparsed) problems.push(...handoverProblems(config).map((p) => `--${p}`));
  const work = ledgerWork(values, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, ...work, role, writer, config };
}
