/**
 * 6. Memory: peak resident memory of a whole night of 50,000 invoices, as `npm start` runs it: one `fencepost run`
 * process with its embedded stack (DynamoDB Local's JVM as its child, the local S3 endpoint inside the Node process),
 * then the audit. Both engines, rotating order.
 *
 * /proc/<pid>/status VmRSS of the Node process and of the JVM is sampled every ~100 ms; "together" is the peak of
 * their simultaneous sum. VmHWM (the kernel's own per-process high-water mark) is kept as a cross-check. The `completed`
 * event splits the night from the audit that follows it.
 *
 * Target: ≤ 600 MB together during the night.
 */
import {
  childrenOf,
  freshDate,
  fmt,
  fmtStat,
  jvmChildOf,
  mb,
  MemorySampler,
  newReport,
  rotate,
  runToEnd,
  spawnCli,
  stat,
  table,
  type BenchContext,
  type Measurement,
} from './common';

type Engine = 'direct' | 'stepfunctions';
const ENGINES: Engine[] = ['direct', 'stepfunctions'];

interface MemRun {
  readonly nodeMb: number;
  readonly jvmMb: number;
  readonly togetherMb: number;
  readonly nodeNightMb: number;
  readonly jvmNightMb: number;
  readonly togetherNightMb: number;
  readonly nodeHwmMb: number;
  readonly jvmHwmMb: number;
  readonly seconds: number;
  readonly startupSeconds: number;
}

async function oneNight(engine: Engine, invoices: number): Promise<MemRun> {
  const c = spawnCli([
    'run',
    '--engine',
    engine,
    '--json',
    '--events',
    '--invoices',
    String(invoices),
    '--date',
    freshDate(),
    '--worker',
    `mem-${engine}`,
  ]);
  let jvm: number | undefined;
  const sampler = new MemorySampler(() => {
    jvm ??= jvmChildOf(c.pid);
    // The workflow's functions run in child processes of their own (lib/local/lambda-runner.ts): they count as the app.
    return { node: [c.pid, ...childrenOf(c.pid).filter((p) => p !== jvm)], jvm };
  }).start();
  c.onEvent((e) => {
    if (e.event === 'completed') sampler.mark('night');
  });
  try {
    await runToEnd(c, `fencepost run --engine ${engine} (embedded stack)`);
  } finally {
    sampler.stop();
  }
  const night = sampler.markOf('night');
  const summary = c.summary();
  const audit = summary?.audit as { ok?: boolean } | undefined;
  if (!night || summary?.outcome !== 'completed' || audit?.ok !== true)
    throw new Error(`the night did not complete with a clean audit: ${JSON.stringify(summary)}`);
  return {
    nodeMb: mb(sampler.peakRssKb.node ?? 0),
    jvmMb: mb(sampler.peakRssKb.jvm ?? 0),
    togetherMb: mb(sampler.peakSumKb),
    nodeNightMb: mb(night.peakRssKb.node ?? 0),
    jvmNightMb: mb(night.peakRssKb.jvm ?? 0),
    togetherNightMb: mb(night.peakSumKb),
    nodeHwmMb: mb(sampler.lastHwmKb.node ?? 0),
    jvmHwmMb: mb(sampler.lastHwmKb.jvm ?? 0),
    seconds: Number(summary.seconds),
    startupSeconds: (c.events[0].seenAtMs - c.spawnedAt) / 1000,
  };
}

export const memory: Measurement = {
  name: 'memory',
  title: '6. Memory: peak resident memory of the Node process and the DynamoDB Local JVM during a night (npm start)',
  fullMinutes: 6,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const invoices = ctx.quick ? 5_000 : 50_000;
    const runs: Record<Engine, MemRun[]> = { direct: [], stepfunctions: [] };
    for (let r = 1; r <= ctx.rounds; r++) {
      for (const e of rotate(ENGINES, r)) {
        const m = await oneNight(e, invoices);
        runs[e].push(m);
        ctx.log(
          `memory: round ${r}/${ctx.rounds} ${e.padEnd(13)} night: node ${fmt(m.nodeNightMb)} MB + JVM ${fmt(m.jvmNightMb)} MB = ${fmt(m.togetherNightMb)} MB; with the audit ${fmt(m.togetherMb)} MB`,
        );
      }
    }
    const s = (e: Engine, k: keyof MemRun) => stat(runs[e].map((m) => m[k]));
    report.blocks.push(
      `${fmt(invoices)} invoices, each night a fresh \`fencepost run\` with its own embedded stack (cold JVM, -Xmx256m), then its audit; ` +
        `${ctx.rounds} round(s); peak VmRSS sampled every 100 ms, MB, medians (min–max)\n` +
        table(
          ['engine', 'Node (night)', 'JVM (night)', 'together (night)', 'together incl. audit', 'Node VmHWM', 'JVM VmHWM', 'night s', 'start-up s'],
          ENGINES.map((e) => [
            e,
            fmtStat(s(e, 'nodeNightMb')),
            fmtStat(s(e, 'jvmNightMb')),
            fmtStat(s(e, 'togetherNightMb')),
            fmtStat(s(e, 'togetherMb')),
            fmtStat(s(e, 'nodeHwmMb')),
            fmtStat(s(e, 'jvmHwmMb')),
            fmtStat(s(e, 'seconds'), 1),
            fmtStat(s(e, 'startupSeconds'), 1),
          ]),
        ),
      'the Node process holds the local S3 endpoint (every chunk object and manifest version of the night) as well as the engine; ' +
        'the JVM holds every item written, in memory (-inMemory): both are local-only costs that AWS does not have.',
    );
    for (const e of ENGINES) {
      const t = s(e, 'togetherNightMb');
      report.verdicts.push({
        measurement: this.name,
        what: `${e}: Node + JVM peak during the night`,
        figure: `${fmt(t.median)} MB (max ${fmt(t.max)})`,
        target: '≤ 600 MB',
        met: t.max <= 600,
      });
    }
    Object.assign(report.data, { invoices, runs });
    return report;
  },
};
