/**
 * 2. A whole night through the synthesized workflow vs the direct engine, on one shared stack; and the workflow's
 *    functions as deployed (bundles, each in its own Node 24 process) vs their sources in the runner's process.
 *
 * Each night runs in its own `fencepost run` child process (the workflow's Lambda runtime is cached per process with
 * its table environment), with --json --events against the shared stack's endpoints and a fresh set of tables:
 *
 *   end to end   spawn → exit, as a user waits for it (Node start-up, module loading, and for the workflow the
 *                in-process CDK synth of the state machine, then the night);
 *   night        the first `observe` event → the `completed` event, as they arrive here: the work;
 *   start-up     spawn → the first event's arrival here;
 *   + stack      end to end plus the shared stack's start-up (DynamoDB Local's JVM + local S3), timed once.
 *
 * Target: workflow overhead (end to end, workflow / direct − 1) ≤ 15%.
 */
import {
  freshDate,
  fmt,
  fmtStat,
  newReport,
  rotate,
  runToEnd,
  spawnCli,
  stat,
  table,
  type BenchContext,
  type Measurement,
  type SharedStack,
} from './common';
import { faultArgs } from '../verify/chaos/faults';

/** `stepfunctions-source`: the workflow with the handlers' sources in-process (the harness's preload: verify/chaos/faults.ts). */
type Engine = 'direct' | 'stepfunctions' | 'stepfunctions-source';
const ENGINES: Engine[] = ['direct', 'stepfunctions', 'stepfunctions-source'];

export interface NightFigures {
  readonly e2e: number;
  readonly night: number;
  readonly startup: number;
  readonly engineSeconds: number;
  readonly transactions: number;
  readonly events: number;
}

export async function nightOnStack(stack: SharedStack, engine: Engine, invoices: number, extra: string[] = []): Promise<NightFigures> {
  const ns = await stack.namespace(engine === 'direct' ? 'nd' : 'ns');
  try {
    const source = engine === 'stepfunctions-source';
    const sources = faultArgs(source ? { lambdaCode: 'source' } : undefined);
    const c = spawnCli(
      [
        'run',
        '--engine',
        source ? 'stepfunctions' : engine,
        '--json',
        '--events',
        '--invoices',
        String(invoices),
        '--date',
        freshDate(),
        '--worker',
        `bench-${engine}`,
        ...ns.storeArgs(),
        ...extra,
      ],
      sources.env,
      sources.nodeArgs,
    );
    const { atMs: exitAt } = await runToEnd(c, `fencepost run --engine ${engine}`);
    const first = c.events[0];
    const observe = c.events.find((e) => e.event === 'sighted');
    const completed = c.events.find((e) => e.event === 'completed');
    const summary = c.summary();
    if (!first || !observe || !completed || summary?.outcome !== 'completed' || summary.invoicesRecorded !== invoices) {
      throw new Error(`night did not complete cleanly: ${JSON.stringify(summary)}; ${c.stderr.slice(-5).join(' | ')}`);
    }
    return {
      e2e: (exitAt - c.spawnedAt) / 1000,
      // On this process's clock: a workflow's events come from several processes (one per function environment),
      // whose monotonic clocks are not comparable.
      night: (completed.seenAtMs - observe.seenAtMs) / 1000,
      startup: (first.seenAtMs - c.spawnedAt) / 1000,
      engineSeconds: Number(summary.seconds),
      transactions: Number(summary.transactions),
      events: c.events.length,
    };
  } finally {
    await stack.drop(ns);
  }
}

export const night: Measurement = {
  name: 'night',
  title: '2. A whole night: the synthesized workflow (local Step Functions) vs the direct engine, same stack',
  fullMinutes: 6,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const stack = await ctx.stack();
    const invoices = ctx.quick ? 5_000 : 50_000;
    ctx.log(`night: warm-up (5,000 invoices, each engine) ...`);
    for (const e of ENGINES) await nightOnStack(stack, e, 5_000);
    const runs: Record<Engine, NightFigures[]> = { direct: [], stepfunctions: [], 'stepfunctions-source': [] };
    for (let r = 1; r <= ctx.rounds; r++) {
      for (const e of rotate(ENGINES, r)) {
        const f = await nightOnStack(stack, e, invoices);
        runs[e].push(f);
        ctx.log(
          `night: round ${r}/${ctx.rounds} ${e.padEnd(20)} end to end ${f.e2e.toFixed(1)} s, night ${f.night.toFixed(1)} s, start-up ${f.startup.toFixed(1)} s`,
        );
      }
    }
    const s = (e: Engine, k: keyof NightFigures) => stat(runs[e].map((f) => f[k]));
    const ips = (e: Engine, k: 'e2e' | 'night') => stat(runs[e].map((f) => invoices / f[k]));
    const withStack = (e: Engine) => stat(runs[e].map((f) => f.e2e + stack.startupSeconds));
    const ipsWithStack = (e: Engine) => stat(runs[e].map((f) => invoices / (f.e2e + stack.startupSeconds)));
    report.blocks.push(
      `${fmt(invoices)} invoices (${fmt(runs.direct[0].transactions)} fenced transactions), ${ctx.rounds} round(s), rotating order, after a warm-up; ` +
        `each night in its own child process; medians (min–max)\n` +
        table(
          ['engine', 'end to end s', 'invoices/s e2e', 'night s', 'invoices/s night', 'start-up s', `+ stack s`, 'invoices/s + stack'],
          ENGINES.map((e) => [
            e,
            fmtStat(s(e, 'e2e'), 1),
            fmtStat(ips(e, 'e2e')),
            fmtStat(s(e, 'night'), 1),
            fmtStat(ips(e, 'night')),
            fmtStat(s(e, 'startup'), 2),
            fmtStat(withStack(e), 1),
            fmtStat(ipsWithStack(e)),
          ]),
        ),
      `shared stack start-up (DynamoDB Local JVM + local S3), timed once: ${stack.startupSeconds.toFixed(1)} s`,
    );
    const overhead = s('stepfunctions', 'e2e').median / s('direct', 'e2e').median - 1;
    const perRound = runs.stepfunctions.map((f, i) => f.e2e / runs.direct[i].e2e - 1);
    const nightOverhead = s('stepfunctions', 'night').median / s('direct', 'night').median - 1;
    const stackOverhead = withStack('stepfunctions').median / withStack('direct').median - 1;
    const bundles = s('stepfunctions', 'e2e').median / s('stepfunctions-source', 'e2e').median - 1;
    const bundlesNight = s('stepfunctions', 'night').median / s('stepfunctions-source', 'night').median - 1;
    const bundlesPerRound = runs.stepfunctions.map((f, i) => f.e2e / runs['stepfunctions-source'][i].e2e - 1);
    report.verdicts.push(
      {
        measurement: this.name,
        what: 'workflow overhead, end to end',
        figure: `${pct(overhead)} (per-round ${perRound.map(pct).join(', ')})`,
        target: '≤ +15%',
        met: overhead <= 0.15,
      },
      {
        measurement: this.name,
        what: 'workflow overhead, the night only (first observe → completed)',
        figure: pct(nightOverhead),
        target: '≤ +15%',
        met: nightOverhead <= 0.15,
      },
      {
        measurement: this.name,
        what: 'workflow overhead including the stack start-up',
        figure: pct(stackOverhead),
        target: 'informational',
        met: undefined,
      },
      {
        measurement: this.name,
        what: 'bundles (as deployed, a process per function) vs sources in-process, end to end',
        figure: `${pct(bundles)} (per-round ${bundlesPerRound.map(pct).join(', ')})`,
        target: 'informational',
        met: undefined,
      },
      { measurement: this.name, what: 'bundles vs sources, the night only', figure: pct(bundlesNight), target: 'informational', met: undefined },
    );
    Object.assign(report.data, { invoices, stackStartupSeconds: stack.startupSeconds, runs });
    return report;
  },
};

export const pct = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
