/**
 * Run one reindex night in this process, as one holder:
 *
 *   npx tsx apps/reindex/worker.ts --date 2026-09-28 --holder A [--items 200] [--chunk-size 50]
 *     [--lease-ms 10000] [--renew-ms 3000] [--margin-ms 2000] [--claim-budget 30]
 *     [--table-prefix reindex-] [--dynamodb-endpoint http://127.0.0.1:8000]
 *
 * The endpoint is --dynamodb-endpoint, else FENCEPOST_TEST_DYNAMODB; the tables are apps/reindex/provision.ts's.
 * stdout: one JSON line, the night's summary. stderr: progress, one JSON line per event (claims, raises, each
 * update, each chunk done), for whoever watches the holder.
 *
 * Exit codes: 0 completed (or already done); 3 fenced out or lost the lease (another holder owns the night; nothing
 * of the refused write landed); 2 bad input (one line on stderr, nothing written); 1 anything else.
 */
import { parseArgs } from 'node:util';
import {
  ConfigError,
  awsStores,
  Events,
  LEASE_DEFAULTS,
  dateProblem,
  inWords,
  leaseProblems,
  localClients,
  systemClock,
  type LeaseConfig,
} from '../../lib/core/internal';
import { runNight, type ReindexPlan } from './job';
import { MAX_ITEMS, reindexTables } from './schema';

/** The worker's exit codes. */
const EXIT = { ok: 0, failure: 1, usage: 2, lost: 3 } as const;

const OPTIONS = {
  date: { type: 'string' },
  holder: { type: 'string' },
  items: { type: 'string', default: '200' },
  'chunk-size': { type: 'string', default: '50' },
  'lease-ms': { type: 'string', default: String(LEASE_DEFAULTS.leaseMs) },
  'renew-ms': { type: 'string', default: String(LEASE_DEFAULTS.renewMs) },
  'margin-ms': { type: 'string', default: String(LEASE_DEFAULTS.marginMs) },
  'claim-budget': { type: 'string', default: String(LEASE_DEFAULTS.claimBudget) },
  'table-prefix': { type: 'string', default: 'reindex-' },
  'dynamodb-endpoint': { type: 'string' },
} as const;

/** What a run needs, validated. */
interface Run {
  readonly plan: ReindexPlan;
  readonly holder: string;
  readonly lease: LeaseConfig;
  readonly prefix: string;
  readonly endpoint: string;
}

/** The options as given; an unknown option or a missing value is bad input. @throws ConfigError */
function options(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, strict: true, allowPositionals: false }).values;
  } catch (err) {
    throw new ConfigError([(err as Error).message]);
  }
}

/** Every option checked before anything is written; all problems at once. @throws ConfigError */
function parse(argv: string[]): Run {
  const values = options(argv);
  const problems: string[] = [];
  const integer = (flag: keyof typeof OPTIONS, min: number, max = Number.MAX_SAFE_INTEGER): number => {
    const n = Number(values[flag]);
    if (!Number.isSafeInteger(n) || n < min || n > max) problems.push(`--${flag} must be an integer from ${min} to ${max}, got ${values[flag]}`);
    return n;
  };
  // The library's date check (2026-02-30 is refused as well as 2026-9-28), in the worker's words.
  if (values.date === undefined) problems.push('--date is required (YYYY-MM-DD)');
  else if (dateProblem(values.date)) problems.push(`--date must be a calendar date YYYY-MM-DD, got ${JSON.stringify(values.date)}`);
  if (!values.holder) problems.push('--holder is required: the name this process holds the lease under');
  const items = integer('items', 1, MAX_ITEMS);
  const chunkSize = integer('chunk-size', 1);
  const lease: LeaseConfig = {
    leaseMs: integer('lease-ms', 1),
    renewMs: integer('renew-ms', 1),
    marginMs: integer('margin-ms', 0),
    claimBudget: integer('claim-budget', 1),
  };
  // Their relations (renew <= lease / 3, …), each setting said as its flag.
  const flags = { leaseMs: '--lease-ms', renewMs: '--renew-ms', marginMs: '--margin-ms', claimBudget: '--claim-budget' };
  if (problems.length === 0) problems.push(...leaseProblems(lease).map((p) => inWords(p, flags)));
  const endpoint = values['dynamodb-endpoint'] ?? process.env.FENCEPOST_TEST_DYNAMODB;
  if (!endpoint) problems.push('no DynamoDB endpoint: pass --dynamodb-endpoint or set FENCEPOST_TEST_DYNAMODB');
  if (problems.length > 0) throw new ConfigError(problems);
  return { plan: { date: values.date!, items, chunkSize }, holder: values.holder!, lease, prefix: values['table-prefix'], endpoint: endpoint! };
}

/** One JSON line on stderr: progress is for whoever watches the holder; stdout carries only the summary. */
const report = (line: object) => process.stderr.write(`${JSON.stringify(line)}\n`);

async function main(argv: string[]): Promise<number> {
  let run: Run;
  try {
    run = parse(argv);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`reindex: ${err.problems.join('; ')}\n`); // one line: bad input, nothing written
    return EXIT.usage;
  }
  // This job reads and writes DynamoDB only: no S3 endpoint, and no manifest.
  const clients = localClients({ dynamodb: run.endpoint });
  // Renewals are routine; claims, sightings, losses and releases say what the holder is doing.
  const events = new Events(run.holder, systemClock).on((e) => e.event !== 'renew' && report(e));
  try {
    const tables = reindexTables(run.prefix);
    const stores = awsStores(clients, tables);
    const deps = { ddb: clients.ddb, tables, clock: systemClock, events, progress: report };
    const summary = await runNight(stores, deps, run.holder, run.plan, run.lease);
    process.stdout.write(`${JSON.stringify(summary)}\n`);
    return summary.outcome === 'completed' || summary.outcome === 'already-done' ? EXIT.ok : EXIT.lost;
  } catch (err) {
    process.stderr.write(`reindex: ${(err as Error).name}: ${(err as Error).message}\n`);
    return EXIT.failure;
  } finally {
    clients.destroy();
  }
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`reindex: ${String(err)}\n`);
    process.exitCode = EXIT.failure;
  },
);
