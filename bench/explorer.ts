/**
 * 14. The explorer's throughput (issue 27: "at least 20,000 schedules a minute over all worlds on 2 idle cores, the
 * DynamoDB Local tier apart"): `fencepost simulate explore` over all three worlds, and each world alone, in the same
 * rounds (a world's share of the cost), each run a process of its own as a user runs it (the explorer keeps the
 * handlers' logs and tracing off in its process: this suite's other measurements keep them on in this one); the
 * figure is the one the command prints, the schedules' wall time. Then each world on DynamoDB Local and the local S3
 * against the same seeds on the memory stores, in this process (what a real store costs a schedule).
 */
import { runElectionOnDynamo, runNightOnDynamo, runWorkflowOnDynamo, type DynamoClients } from '../verify/explore/dynamo';
import { ELECTION_WORLD } from '../verify/explore/election-world';
import { WORLD_NAMES } from '../verify/explore/worlds';
import { NIGHT_WORLD } from '../verify/explore/night-world';
import { WORKFLOW_WORLD } from '../verify/explore/workflow-world';
import { runWorld, type ScheduleResult } from '../lib/testing/world';
import { fmt, newReport, runToEnd, spawnCli, stat, table, type BenchContext, type Measurement } from './common';

const TARGET_PER_MINUTE = 20_000;
/** Seeds no test or doc names. */
const FROM = 30_001;

const perMinute = (schedules: number, ms: number) => (schedules / ms) * 60_000;

/** One `simulate explore` run in a process of its own: how long its schedules took, as it reports it. */
async function exploreMs(seed: number, schedules: number, world: string): Promise<number> {
  const run = spawnCli(['simulate', 'explore', '--world', world, '--seed', String(seed), '--schedules', String(schedules), '--json']);
  await runToEnd(run, 'simulate explore');
  const stderr = run.stderr.join('\n');
  const m = /throughput: \d+ schedules\/minute \((\d+) in ([\d.]+) s\)/.exec(stderr);
  if (!m || Number(m[1]) !== schedules) throw new Error(`simulate explore printed no throughput for ${schedules} schedules: ${stderr}`);
  return Number(m[2]) * 1000;
}

/** The worlds on the AWS stores (dynamo.ts), each beside its memory tier. */
const ON_DYNAMO: readonly {
  readonly world: string;
  readonly dynamo: (clients: DynamoClients, prefix: string, seed: number) => Promise<ScheduleResult>;
  readonly memory: (seed: number) => Promise<ScheduleResult>;
}[] = [
  { world: 'night', dynamo: runNightOnDynamo, memory: (seed) => runWorld(NIGHT_WORLD, seed) },
  { world: 'workflow', dynamo: runWorkflowOnDynamo, memory: (seed) => runWorld(WORKFLOW_WORLD, seed) },
  { world: 'election', dynamo: runElectionOnDynamo, memory: (seed) => runWorld(ELECTION_WORLD, seed) },
];

async function timed(run: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await run();
  return performance.now() - t0;
}

export const explorer: Measurement = {
  name: 'explorer',
  title: '14. The explorer: schedules a minute over all worlds, each world alone, and each on DynamoDB Local',
  fullMinutes: 3,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const rounds = ctx.quick ? 1 : Math.max(3, ctx.rounds);
    const all = ctx.quick ? 600 : 3_000;
    const each = all / WORLD_NAMES.length;
    const allMs: number[] = [];
    const worldMs = new Map<string, number[]>(WORLD_NAMES.map((w) => [w, []]));
    for (let r = 0; r < rounds; r++) {
      ctx.log(`explorer: round ${r + 1} of ${rounds}`);
      allMs.push(await exploreMs(FROM, all, 'all'));
      for (const w of WORLD_NAMES) worldMs.get(w)!.push(await exploreMs(FROM, each, w));
    }
    const a = stat(allMs);
    const rows = [['all worlds', String(all), fmt(perMinute(all, a.median), 0), fmt(perMinute(all, a.max), 0), fmt(perMinute(all, a.min), 0)]];
    for (const [w, ms] of worldMs) {
      const s = stat(ms);
      rows.push([w, String(each), fmt(perMinute(each, s.median), 0), fmt(perMinute(each, s.max), 0), fmt(perMinute(each, s.min), 0)]);
    }
    report.blocks.push(table(['worlds', 'schedules', 'a minute (median)', 'slowest round', 'fastest round'], rows));

    // The DynamoDB Local tier: the same seeds of each world, on the AWS stores and on the memory stores, side by side.
    const stack = await ctx.stack();
    const dynamoSchedules = ctx.quick ? 10 : 40;
    const dynamoRows: string[][] = [];
    const dynamoData: Record<string, { schedules: number; dynamoMs: number; memoryMs: number }> = {};
    for (const { world, dynamo, memory } of ON_DYNAMO) {
      ctx.log(`explorer: the ${world} world on DynamoDB Local`);
      let dynamoMs = 0;
      let memoryMs = 0;
      for (let seed = FROM; seed < FROM + dynamoSchedules; seed++) {
        dynamoMs += await timed(() => dynamo(stack.clients, `bench${world[0]}${seed}-`, seed));
        memoryMs += await timed(() => memory(seed));
      }
      dynamoRows.push(
        [
          world,
          'on DynamoDB Local (tables made and dropped per schedule)',
          String(dynamoSchedules),
          fmt(dynamoMs / dynamoSchedules, 1),
          fmt(perMinute(dynamoSchedules, dynamoMs), 0),
        ],
        [world, 'on the memory stores', String(dynamoSchedules), fmt(memoryMs / dynamoSchedules, 2), fmt(perMinute(dynamoSchedules, memoryMs), 0)],
        [world, 'DynamoDB Local / memory', '', fmt(dynamoMs / memoryMs, 0), ''],
      );
      dynamoData[world] = { schedules: dynamoSchedules, dynamoMs, memoryMs };
    }
    report.blocks.push(table(['world', 'stores', 'schedules', 'ms a schedule', 'a minute'], dynamoRows));
    report.verdicts.push({
      measurement: this.name,
      what: 'schedules a minute over all worlds (median round)',
      figure: fmt(perMinute(all, a.median), 0),
      target: `at least ${TARGET_PER_MINUTE.toLocaleString('en-US')} on 2 idle cores`,
      met: perMinute(all, a.median) >= TARGET_PER_MINUTE,
    });
    report.data.allMs = allMs;
    report.data.worldMs = Object.fromEntries(worldMs);
    report.data.dynamo = dynamoData;
    return report;
  },
};
