/**
 * The benchmark suite (`npm run bench`): every measurement of docs/PERFORMANCE.md, one after the other, each printing
 * its tables with the target and the ratio, then one summary of the verdicts. Progress goes to stderr, tables to
 * stdout. Not part of `npm test`.
 *
 *   npx tsx bench/run.ts                         the full suite (about an hour on a 2-core machine)
 *   npx tsx bench/run.ts --quick                 smaller sizes, 1 round: a smoke check in a few minutes
 *   npx tsx bench/run.ts --only takeover,memory  just those (names below)
 *   npx tsx bench/run.ts --rounds 5              more rounds for every comparison
 *   npx tsx bench/run.ts --out results.json      also write the raw figures as JSON
 *
 * One embedded stack (DynamoDB Local + local S3) is shared by the measurements that need a running stack; its
 * start-up is timed once. `memory` and `growth` start their own stacks per run so that each process's resident
 * memory belongs to one night. Only loopback endpoints are ever used.
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { awsModel } from './aws-model';
import { coldStart } from './cold-start';
import { concurrency } from './concurrency';
import { consumerSynth } from './consumer-synth';
import { election } from './election';
import { explorer } from './explorer';
import { SharedStack, fmt, machine, table, type BenchContext, type Measurement, type Report, type Verdict } from './common';
import { growth } from './growth';
import { leaseOps } from './lease-ops';
import { memory } from './memory';
import { night } from './night';
import { postgres } from './postgres';
import { simulator } from './simulator';
import { sweeper } from './sweeper';
import { takeover } from './takeover';
import { waste } from './waste';
import { writePath } from './write-path';

export const MEASUREMENTS: readonly Measurement[] = [
  writePath,
  night,
  takeover,
  sweeper,
  leaseOps,
  memory,
  growth,
  waste,
  concurrency,
  awsModel,
  election,
  simulator,
  coldStart,
  consumerSynth,
  explorer,
  postgres,
];

const HELP = `npx tsx bench/run.ts [--quick] [--only ${MEASUREMENTS.map((m) => m.name).join(',')}] [--rounds N] [--invoices N (write-path, concurrency)] [--out FILE]`;

export async function cli(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean' },
      only: { type: 'string' },
      rounds: { type: 'string' },
      out: { type: 'string' },
      invoices: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${HELP}\n\n${MEASUREMENTS.map((m) => `  ${m.name.padEnd(11)} ${m.title}`).join('\n')}\n`);
    return 0;
  }
  const quick = Boolean(values.quick);
  const rounds = values.rounds !== undefined ? Number(values.rounds) : quick ? 1 : 3;
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a positive integer, got ${values.rounds}`);
  const only = values.only
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = only?.filter((o) => !MEASUREMENTS.some((m) => m.name === o)) ?? [];
  if (unknown.length > 0) throw new Error(`unknown measurement(s) ${unknown.join(', ')}; known: ${MEASUREMENTS.map((m) => m.name).join(', ')}`);
  const selected = MEASUREMENTS.filter((m) => !only || only.includes(m.name));

  let shared: Promise<SharedStack> | undefined;
  const log = (line: string) => process.stderr.write(`[${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  const ctx: BenchContext = {
    quick,
    rounds,
    log,
    options: { invoices: values.invoices },
    results: new Map(),
    stack: () =>
      (shared ??= SharedStack.start().then((s) => {
        log(`shared stack up in ${s.startupSeconds.toFixed(1)} s: ${s.endpoints.dynamodb} ${s.endpoints.s3}`);
        return s;
      })),
  };

  const out = (text: string) => process.stdout.write(`${text}\n`);
  const command = `npx tsx bench/run.ts ${argv.join(' ')}`.trim();
  out(`Fencepost benchmarks — ${new Date().toISOString()}`);
  out(`machine: ${machine()}`);
  out(`command: ${command}  (mode: ${quick ? 'quick' : 'full'}, rounds: ${rounds})`);
  out(`plan: ${selected.map((m) => m.name).join(', ')}${quick ? '' : ` (about ${selected.reduce((s, m) => s + m.fullMinutes, 0)} min)`}`);

  const reports: Report[] = [];
  const verdicts: Verdict[] = [];
  let failed = false;
  const onSignal = () => void shared?.then((s) => s.stop()).finally(() => process.exit(130));
  process.once('SIGINT', onSignal);
  try {
    for (const m of selected) {
      const t0 = performance.now();
      log(`== ${m.name} ==`);
      out(`\n## ${m.title}\n`);
      try {
        const report = await m.run(ctx);
        reports.push(report);
        ctx.results.set(m.name, report);
        verdicts.push(...report.verdicts);
        for (const b of report.blocks) out(`${b}\n`);
        for (const v of report.verdicts) out(`${mark(v)} ${v.what}: ${v.figure}   target ${v.target}`);
      } catch (err) {
        failed = true;
        const msg = (err as Error).stack ?? String(err);
        out(`ERROR in ${m.name}: ${msg}`);
        verdicts.push({
          measurement: m.name,
          what: 'the measurement itself',
          figure: `error: ${(err as Error).message.split('\n')[0]}`,
          target: 'runs',
          met: false,
        });
      }
      log(`${m.name} took ${fmt((performance.now() - t0) / 60_000, 1)} min`);
    }
  } finally {
    process.removeListener('SIGINT', onSignal);
    if (shared) await (await shared).stop();
  }

  out('\n## Summary\n');
  out(
    table(
      ['measurement', 'what', 'figure', 'target', 'verdict'],
      verdicts.map((v) => [v.measurement, v.what, v.figure, v.target, verdictWord(v)]),
      [0, 1, 2, 3, 4],
    ),
  );
  if (values.out) {
    fs.writeFileSync(values.out, JSON.stringify({ at: new Date().toISOString(), machine: machine(), command, quick, rounds, reports }, null, 1));
    out(`\nraw figures: ${values.out}`);
  }
  return failed ? 1 : 0;
}

const verdictWord = (v: Verdict) => (v.met === undefined ? 'info' : v.met ? 'met' : 'NOT MET');
const mark = (v: Verdict) => (v.met === undefined ? '  ·' : v.met ? '  ✓' : '  ✗');

if (require.main === module) {
  cli(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err) => {
      process.stderr.write(`${(err as Error).message}\n${HELP}\n`);
      process.exitCode = 2;
    },
  );
}
