/**
 * 14. A user's `cdk synth` (issue 20, item 7): the package as a user installs it (`npm pack`, which builds and
 * prebundles; the peers, esbuild for the user's own NodejsFunction, then the tarball, into a fresh project), the
 * README's FencedJob example (examples/fenced-job: a 4-chunk job, its own chunk function) compiled there, and
 * `node bin/nightly-report.js` with CDK_OUTDIR timed as `cdk synth` runs the app, each run into a fresh cloud assembly:
 *
 *   prebundled (after)     the package as it ships: FencedJob's 8 handlers deployed from dist/handlers, only the
 *                          user's chunk function bundled at synth
 *   bundled at synth       the same install with dist/handlers.json hidden: HandlerFunction falls back to bundling
 *     (before)             dist/lambda/<handler>.js with esbuild for each of the 8 functions, the package's code
 *                          path before the prebundle (lib/constructs/handler-function.ts entryOf)
 *   one table (floor)      a stack with one DynamoDB table: aws-cdk-lib's own load and synth
 *
 * The three run interleaved (rotated each round) so the machine's load falls on all alike. Each run's esbuild
 * invocations are counted from CDK's "Bundling asset" lines, and its assets from the cloud assembly.
 *
 *   npx tsx bench/run.ts --only consumer-synth [--rounds 5]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { prebundled } from '../lib/constructs/handler-function';
import { ROOT, fmt, fmtStat, newReport, rotate, stat, table, type BenchContext, type Measurement } from './common';

/** Run a command to its end; its output, and its wall seconds on this process's monotonic clock. */
function run(
  command: string,
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ code: number | null; out: string; s: number }> {
  const t0 = performance.now();
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env, NODE_NO_WARNINGS: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, out, s: (performance.now() - t0) / 1000 })));
}

async function must(what: string, p: Promise<{ code: number | null; out: string; s: number }>) {
  const r = await p;
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}:\n${r.out}`);
  return r;
}

const versionOf = (pkg: string) =>
  (JSON.parse(fs.readFileSync(path.join(ROOT, 'node_modules', pkg, 'package.json'), 'utf8')) as { version: string }).version;

const FLOOR = `
import { App, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
const app = new App();
const stack = new Stack(app, 'OneTable');
new dynamodb.Table(stack, 'Lines', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
app.synth();
`;

/** Kibibytes on disk under a folder, as du counts them. */
async function kib(dir: string): Promise<number> {
  return Number((await must('du', run('du', ['-sk', dir], dir))).out.split(/\s/)[0]);
}

interface Variant {
  readonly name: string;
  readonly app: string;
  /** Whether the installed package's prebundled handlers are visible to this run. */
  readonly prebundled: boolean;
}

const VARIANTS: readonly Variant[] = [
  { name: 'FencedJob, bundled at synth (before)', app: 'bin/nightly-report.js', prebundled: false },
  { name: 'FencedJob, prebundled (after)', app: 'bin/nightly-report.js', prebundled: true },
  { name: 'one table (floor)', app: 'floor.js', prebundled: true },
];

export const consumerSynth: Measurement = {
  name: 'consumer-synth',
  title: "14. A user's cdk synth of a 4-chunk FencedJob, prebundled handlers against bundling them at synth",
  fullMinutes: 6,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'fencepost-consumer-synth-'));
    try {
      ctx.log('npm pack (builds and prebundles)');
      const packed = await must('npm pack', run('npm', ['pack', '--json', '--pack-destination', work], ROOT));
      const [{ filename }] = JSON.parse(packed.out.slice(packed.out.indexOf('[\n'))) as { filename: string }[];
      const project = path.join(work, 'consumer');
      fs.mkdirSync(project);
      fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }));
      const npmInstall = (specs: string[]) =>
        must(`npm install ${specs.join(' ')}`, run('npm', ['install', ...specs, '--prefer-offline', '--no-audit', '--no-fund'], project));
      ctx.log('installing the peers, esbuild, then the tarball into a fresh project');
      await npmInstall([`aws-cdk-lib@${versionOf('aws-cdk-lib')}`, `constructs@${versionOf('constructs')}`, `esbuild@${versionOf('esbuild')}`]);
      const beforeKib = await kib(path.join(project, 'node_modules'));
      await npmInstall([path.join(work, filename)]);
      const addedMib = ((await kib(path.join(project, 'node_modules'))) - beforeKib) / 1024;
      // The example as a cdk init app's bin/ and lib/ (the README's layout).
      fs.cpSync(path.join(ROOT, 'examples/fenced-job'), project, { recursive: true });
      fs.writeFileSync(path.join(project, 'floor.ts'), FLOOR);
      const tsc = [
        path.join(ROOT, 'node_modules/typescript/bin/tsc'),
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--target',
        'es2022',
      ];
      await must(
        'tsc',
        run(
          process.execPath,
          [
            ...tsc,
            '--strict',
            '--skipLibCheck',
            '--types',
            'node',
            '--typeRoots',
            path.join(ROOT, 'node_modules/@types'),
            'bin/nightly-report.ts',
            'floor.ts',
          ],
          project,
        ),
      );

      const { handlers } = prebundled(path.join(project, 'node_modules/fencepost/dist/constructs'));
      const hidden = `${handlers}.hidden`;
      const synth = async (v: Variant) => {
        if (!v.prebundled) fs.renameSync(handlers, hidden);
        const outdir = path.join(work, 'cdk.out');
        fs.rmSync(outdir, { recursive: true, force: true });
        try {
          const r = await must(`synth ${v.name}`, run(process.execPath, [v.app], project, { CDK_OUTDIR: outdir }));
          const bundled = r.out.split('\n').filter((l) => l.startsWith('Bundling asset')).length;
          const assets = fs.readdirSync(outdir).filter((d) => d.startsWith('asset.')).length;
          return { s: r.s, bundled, assets };
        } finally {
          if (!v.prebundled) fs.renameSync(hidden, handlers);
        }
      };
      ctx.log('warm-up: one synth of each (not counted)');
      for (const v of VARIANTS) await synth(v);
      const seconds = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
      const shape = new Map<string, { bundled: number; assets: number }>();
      for (let r = 0; r < ctx.rounds; r++) {
        for (const v of rotate(VARIANTS, r)) {
          const x = await synth(v);
          seconds.get(v.name)!.push(x.s);
          shape.set(v.name, { bundled: x.bundled, assets: x.assets });
          ctx.log(`round ${r + 1}: ${v.name} ${fmt(x.s, 1)} s, ${x.bundled} bundled, ${x.assets} assets`);
        }
      }
      const stats = new Map([...seconds].map(([k, xs]) => [k, stat(xs)]));
      const [before, after, floor] = VARIANTS.map((v) => stats.get(v.name)!.median);
      // The ratio of each round's pair, measured side by side, then their median: a slow moment of the machine hits
      // both of a round's synths, not one median alone.
      const paired = (a: string, b: string) => stat(seconds.get(a)!.map((x, i) => x / seconds.get(b)![i])).median;
      const [beforeName, afterName, floorName] = VARIANTS.map((v) => v.name);
      const speedup = paired(beforeName, afterName);
      report.blocks.push(
        table(
          ['app', 'synth s, median (min–max)', 'esbuild runs', 'assets', 'rounds'],
          VARIANTS.map((v) => [
            v.name,
            fmtStat(stats.get(v.name)!, 1),
            String(shape.get(v.name)!.bundled),
            String(shape.get(v.name)!.assets),
            String(seconds.get(v.name)!.length),
          ]),
        ),
        table(
          ['ratio', 'value'],
          [
            ['before / after, median of the rounds', fmt(speedup, 2)],
            ['after / floor, median of the rounds', fmt(paired(afterName, floorName), 2)],
            ['before / floor, median of the rounds', fmt(paired(beforeName, floorName), 2)],
            ['before / after, of the medians', fmt(before / after, 2)],
          ],
        ),
        `the tarball added ${fmt(addedMib, 1)} MiB to the project's node_modules (over the peers and esbuild)`,
      );
      report.verdicts.push({
        measurement: this.name,
        what: "a user's synth of a 4-chunk FencedJob, prebundled",
        figure: `${fmt(after, 1)} s against ${fmt(before, 1)} s bundling at synth (${fmt(speedup, 2)}×, the median of the rounds' ratios), floor ${fmt(floor, 1)} s`,
        target: 'faster than bundling at synth',
        met: after < before,
      });
      report.data.seconds = Object.fromEntries(seconds);
      report.data.shape = Object.fromEntries(shape);
      report.data.addedMib = addedMib;
      return report;
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  },
};
