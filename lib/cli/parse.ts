/**
 * Command-line parsing shared by the repository's command (cli/options.ts: every command's options) and the package's
 * (lib/cli/user.ts): the token checker, the value checkers, the store target, and the options of the commands the package
 * ships. Every bad option is reported in one line that names it, before anything starts or is written.
 */
import { parseArgs } from 'node:util';
import type { Endpoints } from '../core/aws/clients';
import { ConfigError } from '../core/errors';
import { DEFAULT_BUMP } from '../core/restore';
import { DEFAULT_BUCKET, DEFAULT_TABLE_PREFIX } from '../core/schema';

export const EXIT = {
  ok: 0,
  /** Infrastructure or unexpected failure. */
  failure: 1,
  /** Bad input: nothing was written. */
  usage: 2,
  /** Another holder owns the job: this worker lost the lease, was fenced out, or outwaited its claim budget on a live holder whose run is RUNNING. */
  lost: 3,
  /** The audit found a broken invariant. */
  auditFailed: 4,
} as const;

export const storeOptions = {
  'dynamodb-endpoint': { type: 'string' },
  's3-endpoint': { type: 'string' },
  'table-prefix': { type: 'string' },
  bucket: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/** The options of the commands the package ships (lib/cli/user.ts); the repository's command has them too. */
export const userCommandOptions = {
  'bump-epochs': {
    ...storeOptions,
    by: { type: 'string' },
    'run-id': { type: 'string' },
    'dry-run': { type: 'boolean' },
    aws: { type: 'boolean' },
    'lock-table': { type: 'string' },
  },
  local: {
    'data-dir': { type: 'string' },
    'dynamodb-port': { type: 'string' },
    's3-port': { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
} as const;

/** What each value option of the store target and the package's commands expects (the one-line messages). */
export const USER_EXPECTS = {
  'dynamodb-endpoint': 'a URL like http://127.0.0.1:8000',
  's3-endpoint': 'a URL like http://127.0.0.1:9000',
  'table-prefix': 'a table-name prefix like fencepost-',
  bucket: 'an S3 bucket name',
  by: 'a positive integer',
  'run-id': 'an ID',
  'lock-table': 'a DynamoDB table name',
  'data-dir': 'a folder',
  'dynamodb-port': 'a port number 1-65535',
  's3-port': 'a port number 1-65535',
} as const;

/** How one option is given: a value or a flag, its one-letter form, whether it repeats. */
export interface OptionSpec {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  readonly multiple?: boolean;
}

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

/** A repeatable option's values are joined with this in the parsed values. */
export const REPEATED_SEPARATOR = '\n';

/**
 * Parse a command's arguments against its `options`, with what each value option `expects` and, for a command that
 * takes words besides options, what they are (`words`). Node's strict parseArgs explains a bad option in up to three
 * lines that suggest `--opt=-XYZ` (and refuses `--lease-ms -5` as "ambiguous"), so the tokens are checked here
 * instead: one line per bad option, naming it and what it expects. A value starting with '-' is taken when it is a number (so
 * `--lease-ms -5` reaches the range check and `--seed -5` works), refused when it looks like an option.
 */
export function parseOptions(
  command: string,
  options: Readonly<Record<string, OptionSpec>>,
  expects: Readonly<Record<string, string>>,
  args: string[],
  words?: string,
): Record<string, string | boolean | undefined> {
  const positionals: string[] = [];
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
  const values: Record<string, string | boolean | undefined> = {};
  const problems: string[] = [];
  const help = `fencepost ${command} --help`;
  let afterUnknown = false;
  for (const t of tokens) {
    if (t.kind === 'option-terminator') continue;
    if (t.kind === 'positional') {
      if (words !== undefined && !afterUnknown) {
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
export function intOption(values: Record<string, unknown>, name: string, problems: string[]): number | undefined {
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
export function numberOption(values: Record<string, unknown>, name: string, problems: string[]): number | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !/^-?(\d+\.?\d*|\.\d+)$/.test(raw)) {
    problems.push(`--${name} must be a number, got ${JSON.stringify(raw)}`);
    return undefined;
  }
  return Number(raw);
}

/** A duration option (10s, 500ms, 1m; a bare number is seconds) in milliseconds, at least `minMs`; undefined if absent. */
export function durationOption(values: Record<string, unknown>, name: string, minMs: number, problems: string[]): number | undefined {
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
export function positiveInt(values: Record<string, unknown>, name: string, fallback: number, problems: string[]): number {
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

export function storeTarget(values: Record<string, unknown>, problems: string[]): StoreTarget {
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

/** Today's date for the scheduled run: the calendar date on the wall clock (a date, not a duration). */
export function today(): string {
  return new Date().toISOString().slice(0, 10);
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
  // Without a target the embedded stack would start with empty tables of its own, and the bump would "succeed" on them.
  if (!aws && values['dynamodb-endpoint'] === undefined && values['s3-endpoint'] === undefined)
    problems.push('bump-epochs needs the restored table: --aws --lock-table NAME, or --dynamodb-endpoint URL --s3-endpoint URL');
  if (lockTable !== undefined && !/^[A-Za-z0-9_.-]{3,255}$/.test(lockTable))
    problems.push(`--lock-table must be a DynamoDB table name, got ${JSON.stringify(lockTable)}`);
  if (problems.length > 0) throw new ConfigError(problems);
  return { ...target, aws, lockTable, by, runId, dryRun: Boolean(values['dry-run']), json: Boolean(values.json) };
}
