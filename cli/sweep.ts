/**
 * `fencepost sweep`: a thin adapter over lib/core/sweeper.ts (`bump-epochs`, the package's too, is in lib/cli/user.ts).
 *
 * A sweep needs two sightings a lease apart, so `sweep` without --every sights, waits one lease on its own
 * monotonic clock, sights again, re-queues the orphans and exits; `--every 10s` keeps sweeping until Ctrl-C.
 * For each orphan it starts a billing run (a `fencepost run` child process on the same stores) BEFORE it records
 * the re-queue (lib/core/sweeper.ts), and waits for the runs before exiting. Each sweep starts its own process, so a
 * later sweep that finds the row unchanged (that run died before its raise) starts a new one.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import path from 'node:path';
import type { Clients } from '../lib/core/aws/clients';
import { awsStores } from '../lib/core/aws/stores';
import { systemClock } from '../lib/core/clock';
import { Events } from '../lib/core/events';
import { tableNames } from '../lib/core/schema';
import { Keys } from '../apps/billing/keys';
import { Sweeper, type SweepReport } from '../lib/core/sweeper';
import type { SweepOptions } from './options';

const CLI = path.resolve(__dirname, '../bin/fencepost.ts');

interface SweepRun {
  readonly jobId: string;
  readonly exitCode: number | null;
  readonly summary?: unknown;
}

/** Start a billing run for a re-queued job, as its own process (as the cloud starts a new execution). */
function startRun(o: SweepOptions, jobId: string, n: number, forward: (line: string) => void): Promise<SweepRun> {
  const date = jobId.slice(Keys.job('').length);
  const e = o.endpoints!;
  const args = [
    '--import',
    'tsx',
    CLI,
    'run',
    '--date',
    date,
    '--dynamodb-endpoint',
    e.dynamodb,
    '--s3-endpoint',
    e.s3,
    '--table-prefix',
    o.tablePrefix,
    '--bucket',
    o.bucket,
    '--worker',
    `sweeper-run-${process.pid}-${n}`,
    ...o.runArgs,
    o.events ? '--events' : '--json',
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NODE_NO_WARNINGS: '1' } });
  let last: string | undefined;
  createInterface({ input: child.stdout! }).on('line', (line) => {
    last = line;
    if (o.events) forward(line);
  });
  return new Promise((resolve) =>
    child.on('exit', (code) => {
      let summary: unknown;
      try {
        summary = o.events ? undefined : JSON.parse(last ?? '');
      } catch {
        summary = undefined;
      }
      resolve({ jobId, exitCode: code, summary });
    }),
  );
}

export async function sweepCommand(o: SweepOptions, clients: Clients, out: (t: string) => void, err: (t: string) => void): Promise<number> {
  const tables = tableNames(o.tablePrefix);
  const events = new Events(`sweeper-${process.pid}`, systemClock);
  if (o.events) events.on((e) => out(JSON.stringify(e)));
  const sweeper = new Sweeper({ job: Keys.keys.name, ...awsStores(clients, tables), clock: systemClock, events }, o.sweeper);
  const runs: Promise<SweepRun>[] = [];
  // Called before the re-queue record: a sweep that dies after it leaves the row as it was, for the next sweep.
  const start = (jobId: string) => {
    if (o.startRuns) runs.push(startRun(o, jobId, runs.length + 1, out));
  };
  const reports: SweepReport[] = [];
  const describe = (r: SweepReport) =>
    `claimed ${r.claimed}, orphans ${r.orphans}, re-queued ${r.requeued.length}${r.requeued.length ? ` (${r.requeued.join(', ')})` : ''}, alive ${r.skippedAlive}, first sightings ${r.pending}, items read ${r.itemsRead}${r.storm ? ', STORM: re-queued none' : ''}${r.deferred ? `, ${r.deferred} deferred` : ''}${r.givenUp.length ? `, GIVEN UP (re-queued too often; re-arm by hand): ${r.givenUp.join(', ')}` : ''}`;

  if (o.everyMs === undefined) {
    reports.push(await sweeper.sweep(start));
    await systemClock.sleep(o.sweeper.leaseMs); // a full lease on our own clock before the second sighting
    reports.push(await sweeper.sweep(start));
  } else {
    let stopping = false;
    const stop = () => {
      stopping = true;
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    while (!stopping) {
      const r = await sweeper.sweep(start);
      reports.push(r);
      if (!o.json && !o.events) err(`sweep: ${describe(r)}`);
      for (let waited = 0; waited < o.everyMs && !stopping; waited += 100) await systemClock.sleep(Math.min(100, o.everyMs - waited));
    }
  }
  const finished = await Promise.all(runs);
  const total = {
    sweeps: reports.length,
    orphans: reports.reduce((n, r) => n + r.orphans, 0),
    requeued: reports.flatMap((r) => r.requeued),
    skippedAlive: reports.reduce((n, r) => n + r.skippedAlive, 0),
    storms: reports.filter((r) => r.storm).length,
    itemsRead: reports.reduce((n, r) => n + r.itemsRead, 0),
    runs: finished,
  };
  if (o.json) out(JSON.stringify(total));
  else if (!o.events) {
    if (o.everyMs === undefined) err(`sweep: ${describe(reports.at(-1)!)}`);
    for (const r of finished)
      err(`billing run for ${r.jobId}: exit ${r.exitCode}${r.summary ? ` (${(r.summary as { outcome?: string }).outcome})` : ''}`);
  }
  return total.storms > 0 ? 5 : finished.some((r) => r.exitCode !== 0) ? 1 : 0;
}
