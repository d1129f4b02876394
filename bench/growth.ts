/**
 * 7. Growth: time and peak memory as the night grows (direct engine: 5,000 → 50,000 → 500,000 invoices) and as the
 * workflow's chunk concurrency grows (1, 2, 4 chunk tasks in flight at 50,000).
 *
 * Each run gets a fresh stack in its own process (`fencepost local`: the JVM and the S3 endpoint), warmed up with a
 * 5,000-invoice night on other tables (dropped), then the measured `fencepost run` against it. So three processes
 * are sampled separately: the app (the `run` process: the engine, and for the workflow its Lambda handlers), the JVM
 * (DynamoDB Local, which keeps every item in memory) and the S3 endpoint (which keeps every object in memory).
 *
 * Expectation: time linear in invoices (constant µs per invoice), the app's memory flat. The JVM and the S3 endpoint
 * grow with the data they store; that is the local stores', not the app's, and AWS has neither.
 * 500,000 runs only in the full mode (about 4 minutes a run).
 */
import { nightOnStack } from './night';
import {
  childrenOf,
  freshDate,
  fmt,
  fmtStat,
  mb,
  MemorySampler,
  newReport,
  rotate,
  runToEnd,
  spawnCli,
  stat,
  table,
  withLocalStack,
  type BenchContext,
  type Measurement,
} from './common';

interface GrowthRun {
  readonly seconds: number;
  readonly usPerInvoice: number;
  readonly ips: number;
  readonly appMb: number;
  readonly jvmMb: number;
  readonly s3Mb: number;
  /** `fencepost local` spawn → its endpoints line: a fresh stack's start-up, as a user waits for it. */
  readonly stackStartup: number;
  /** The app's V8 heap left after its largest full (mark-compact) GC, MB (--trace-gc): what is really live. */
  readonly liveHeapMb: number;
  readonly fullGcs: number;
}

/** `Mark-Compact 45.3 (62.1) -> 40.2 (63.0) MB` lines of --trace-gc: the heap after each full collection. */
function heapAfterFullGcs(lines: readonly string[]): number[] {
  const out: number[] = [];
  for (const l of lines) {
    const m = /Mark-Compact[^\d]*[\d.]+ \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB/.exec(l);
    if (m) out.push(Number(m[1]));
  }
  return out;
}

interface Case {
  readonly label: string;
  readonly engine: 'direct' | 'stepfunctions';
  readonly invoices: number;
  readonly concurrency: number;
}

async function oneRun(c: Case): Promise<GrowthRun> {
  return withLocalStack(async (stack, local) => {
    await nightOnStack(stack, 'direct', 5_000); // warm the JVM up (and drop those tables)
    const ns = await stack.namespace('gr');
    const args = [
      'run',
      '--engine',
      c.engine,
      '--json',
      '--events',
      '--invoices',
      String(c.invoices),
      '--date',
      freshDate(),
      '--worker',
      `growth-${c.engine}`,
      ...ns.storeArgs(),
    ];
    if (c.engine === 'stepfunctions') args.push('--chunk-concurrency', String(c.concurrency));
    const child = spawnCli(args, {}, ['--trace-gc']);
    // The workflow's functions run in child processes of their own (lib/local/lambda-runner.ts): they count as the app.
    const sampler = new MemorySampler(() => ({ app: [child.pid, ...childrenOf(child.pid)], jvm: stack.jvmPid, s3: local.pid })).start();
    try {
      await runToEnd(child, `fencepost run (${c.label})`);
    } finally {
      sampler.stop();
    }
    const observe = child.events.find((e) => e.event === 'sighted');
    const completed = child.events.find((e) => e.event === 'completed');
    const summary = child.summary();
    if (!observe || !completed || summary?.invoicesRecorded !== c.invoices)
      throw new Error(`${c.label} did not complete: ${JSON.stringify(summary)}`);
    const seconds = (completed.seenAtMs - observe.seenAtMs) / 1000; // arrival here: a workflow's events come from several processes
    return {
      seconds,
      usPerInvoice: (seconds * 1e6) / c.invoices,
      ips: c.invoices / seconds,
      appMb: mb(sampler.peakRssKb.app ?? 0),
      jvmMb: mb(sampler.peakRssKb.jvm ?? 0),
      s3Mb: mb(sampler.peakRssKb.s3 ?? 0),
      stackStartup: stack.startupSeconds,
      liveHeapMb: Math.max(0, ...heapAfterFullGcs(child.other.map((o) => o.line))),
      fullGcs: heapAfterFullGcs(child.other.map((o) => o.line)).length,
    };
  });
}

export const growth: Measurement = {
  name: 'growth',
  title: '7. Growth: 5,000 → 50,000 → 500,000 invoices (direct), and chunk concurrency 1/2/4 (workflow, 50,000)',
  fullMinutes: 32,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const sizes = ctx.quick ? [5_000, 20_000] : [5_000, 50_000, 500_000];
    const ccInvoices = ctx.quick ? 10_000 : 50_000;
    const sizeCases: Case[] = sizes.map((n) => ({ label: `direct ${fmt(n)}`, engine: 'direct', invoices: n, concurrency: 1 }));
    const ccCases: Case[] = [1, 2, 4].map((k) => ({
      label: `workflow ${fmt(ccInvoices)} cc=${k}`,
      engine: 'stepfunctions',
      invoices: ccInvoices,
      concurrency: k,
    }));
    const results = new Map<string, GrowthRun[]>();
    for (const group of [sizeCases, ccCases]) {
      for (let r = 1; r <= ctx.rounds; r++) {
        for (const c of rotate(group, r)) {
          const g = await oneRun(c);
          results.set(c.label, [...(results.get(c.label) ?? []), g]);
          ctx.log(
            `growth: round ${r}/${ctx.rounds} ${c.label}: ${g.seconds.toFixed(1)} s (${fmt(g.usPerInvoice)} µs/invoice), app ${fmt(g.appMb)} MB, JVM ${fmt(g.jvmMb)} MB, S3 ${fmt(g.s3Mb)} MB`,
          );
        }
      }
    }
    const row = (c: Case) => {
      const rs = results.get(c.label)!;
      const s = (k: keyof GrowthRun) => stat(rs.map((g) => g[k]));
      return [
        c.label,
        fmtStat(s('seconds'), 1),
        fmtStat(s('usPerInvoice')),
        fmtStat(s('ips')),
        fmtStat(s('appMb')),
        `${fmtStat(s('liveHeapMb'), 1)} / ${fmt(s('fullGcs').median)}`,
        fmtStat(s('jvmMb')),
        fmtStat(s('s3Mb')),
      ];
    };
    const headers = ['case', 'night s', 'µs / invoice', 'invoices/s', 'app MB (RSS)', 'app live heap MB / full GCs', 'JVM MB', 'S3 endpoint MB'];
    report.blocks.push(
      `each run: a fresh \`fencepost local\` stack, a 5,000-invoice warm-up night (dropped), then the measured night; ${ctx.rounds} round(s), rotating order; ` +
        `night = first observe → completed; peak VmRSS per process; live heap = the app's largest V8 heap left after a full GC (--trace-gc; 0 if none ran); medians (min–max)\n` +
        table(headers, sizeCases.map(row)),
      table(headers, ccCases.map(row)),
      `fresh stack start-up (\`fencepost local\`: Node, the JVM, the S3 endpoint, the default tables), over all ${fmt([...results.values()].flat().length)} runs: ` +
        `${fmtStat(stat([...results.values()].flat().map((g) => g.stackStartup)), 1)} s`,
    );
    const med = (label: string, k: keyof GrowthRun) => stat(results.get(label)!.map((g) => g[k])).median;
    const first = sizeCases[0].label,
      last = sizeCases[sizeCases.length - 1].label;
    const prev = sizeCases[sizeCases.length - 2].label;
    const invoicesOf = (label: string) => sizeCases.find((c) => c.label === label)!.invoices;
    /** Extra time per extra invoice between two sizes: the fixed per-night costs (claim, raise, complete) cancel out. */
    const marginal = (a: string, b: string) => ((med(b, 'seconds') - med(a, 'seconds')) * 1e6) / (invoicesOf(b) - invoicesOf(a));
    const usRatio = med(last, 'usPerInvoice') / med(prev, 'usPerInvoice');
    const appGrowth = med(last, 'appMb') - med(first, 'appMb');
    report.blocks.push(
      `marginal time per invoice (extra seconds ÷ extra invoices, medians): ` +
        sizeCases
          .slice(1)
          .map(
            (c, i) =>
              `${sizeCases[i].label.replace('direct ', '')} → ${c.label.replace('direct ', '')}: ${fmt(marginal(sizeCases[i].label, c.label))} µs`,
          )
          .join('; '),
    );
    report.verdicts.push(
      {
        measurement: this.name,
        what: `time per invoice, ${last.replace('direct ', '')} vs ${prev.replace('direct ', '')} invoices (linear = 1.00; below 1: cheaper per invoice at scale)`,
        figure: `${usRatio.toFixed(2)} (marginal ${fmt(marginal(prev, last))} µs/invoice between them)`,
        target: 'no worse than linear (≤ 1.15)',
        met: usRatio <= 1.15,
      },
      {
        measurement: this.name,
        what: `app (run process) peak RSS, ${first.replace('direct ', '')} → ${last.replace('direct ', '')} invoices`,
        figure: `${fmt(med(first, 'appMb'))} → ${fmt(med(last, 'appMb'))} MB (${appGrowth >= 0 ? '+' : ''}${fmt(appGrowth)} MB)`,
        target: 'flat (≤ +25 MB)',
        met: appGrowth <= 25,
      },
      {
        measurement: this.name,
        what: `app live heap after full GCs, ${prev.replace('direct ', '')} → ${last.replace('direct ', '')} invoices`,
        figure: `${fmt(med(prev, 'liveHeapMb'), 1)} → ${fmt(med(last, 'liveHeapMb'), 1)} MB`,
        target: 'flat (≤ +10 MB)',
        met: med(last, 'liveHeapMb') - med(prev, 'liveHeapMb') <= 10,
      },
      {
        measurement: this.name,
        what: `workflow chunk concurrency 1 → 2 → 4: invoices/s`,
        figure: ccCases.map((c) => fmt(med(c.label, 'ips'))).join(' → '),
        target: 'informational',
        met: undefined,
      },
    );
    Object.assign(report.data, { sizes, ccInvoices, results: Object.fromEntries(results) });
    return report;
  },
};
