/**
 * 13. A cold start of the chunk function, with and without source maps. The billing chunk bundle is built with
 * esbuild from HANDLER_BUNDLING's options (CJS, node24, minified, keepNames, the SDK bundled), once per variant, and
 * each sample is a fresh process of the functions' Node (lib/local/lambda-runner.ts lambdaNode) running
 * bench/cold-start-probe.cjs, which reports from its own process start: (a) the module loaded, its handler exported;
 * (b) a first invocation failed, its error logged with a formatted stack. The variants run interleaved (A B C D,
 * rotated each sample) so the machine's load falls on all of them alike. The stack's top frame is checked: a
 * variant whose frames stay in index.js has not mapped anything, whatever it cost.
 *
 *   --enable-source-maps   before: the flag, the map with its sources content (about 4 MB)
 *   no map                 the floor: no map shipped, no flag
 *   lazy setSourceMaps…    the map inline, no flag, process.setSourceMapsEnabled(true) after the load (before the error)
 *   map read on error      today: HANDLER_BUNDLING's map (no sources content), no flag, lib/lambda/source-stack.ts maps a logged error
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { buildSync } from 'esbuild';
import { HANDLER_BUNDLING } from '../lib/constructs/handler-function';
import { lambdaNode } from '../lib/local/lambda-runner';
import { ROOT, fmt, fmtStat, newReport, rotate, stat, table, type Measurement, type Stat } from './common';

const ENTRY = path.join(ROOT, 'apps/billing/lambda/chunk.ts');
const PROBE = path.join(__dirname, 'cold-start-probe.cjs');

interface Variant {
  readonly name: string;
  readonly sourcemap: boolean | 'inline';
  readonly sourcesContent: boolean;
  readonly nodeArgs: readonly string[];
  readonly lazy: boolean;
}

const VARIANTS: readonly Variant[] = [
  { name: '--enable-source-maps (before)', sourcemap: true, sourcesContent: true, nodeArgs: ['--enable-source-maps'], lazy: false },
  { name: 'no map (floor)', sourcemap: false, sourcesContent: false, nodeArgs: [], lazy: false },
  { name: 'lazy setSourceMapsEnabled', sourcemap: 'inline', sourcesContent: false, nodeArgs: [], lazy: true },
  {
    name: 'map read on error (today)',
    sourcemap: HANDLER_BUNDLING.sourceMap,
    sourcesContent: HANDLER_BUNDLING.sourcesContent,
    nodeArgs: [],
    lazy: false,
  },
];

interface Sample {
  readonly loadedMs: number;
  readonly failedMs: number;
  /** The logged error's top frame, e.g. `at required (…/lambda/runtime.ts:92:17)`. */
  readonly top: string;
}

/** The chunk bundle as HANDLER_BUNDLING builds it, with this variant's source map. */
function build(dir: string, v: Variant): string {
  const outfile = path.join(dir, 'index.js');
  buildSync({
    entryPoints: [ENTRY],
    outfile,
    bundle: true,
    platform: 'node',
    format: HANDLER_BUNDLING.format,
    target: HANDLER_BUNDLING.target,
    minify: HANDLER_BUNDLING.minify,
    keepNames: HANDLER_BUNDLING.keepNames,
    sourcemap: v.sourcemap,
    sourcesContent: v.sourcesContent,
    logLevel: 'warning',
  });
  return outfile;
}

async function sample(node: string, bundle: string, v: Variant): Promise<Sample> {
  const child = spawn(node, [...v.nodeArgs, PROBE, bundle, ...(v.lazy ? ['lazy'] : [])], {
    env: { PATH: process.env.PATH, TZ: 'UTC' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const [code] = (await once(child, 'close')) as [number | null];
  if (code !== 0) throw new Error(`the probe (${v.name}) exited ${code}: ${err.slice(-500)}`);
  const timing = JSON.parse(out.trim().split('\n').at(-1)!) as { loadedMs: number; failedMs: number };
  const logged = err
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { message?: string; error?: { stack?: string } })
    .find((l) => l.message === 'chunk failed');
  const top = logged?.error?.stack
    ?.split('\n')
    .find((l) => l.trim().startsWith('at '))
    ?.trim();
  if (!top) throw new Error(`the probe (${v.name}) logged no failure with a stack: ${err.slice(-500)}`);
  return { ...timing, top };
}

const ratio = (a: Stat, b: Stat) => `${fmt(a.median / b.median, 2)}×`;

export const coldStart: Measurement = {
  name: 'cold-start',
  title: '13. Cold start of the chunk function: source maps at load, at the first stack, or never',
  fullMinutes: 3,
  async run(ctx) {
    const report = newReport(this.name, this.title);
    const node = lambdaNode();
    const samples = ctx.quick ? 4 : Math.max(20, ctx.rounds * 7);
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'fencepost-cold-'));
    try {
      const bundles = VARIANTS.map((v, i) => {
        const dir = path.join(work, String(i));
        fs.mkdirSync(dir);
        return build(dir, v);
      });
      const sizes = bundles.map((b) => {
        const map = `${b}.map`;
        return { js: fs.statSync(b).size, map: fs.existsSync(map) ? fs.statSync(map).size : 0 };
      });
      const got: Sample[][] = VARIANTS.map(() => []);
      ctx.log(`cold-start: ${samples} samples × ${VARIANTS.length} variants on Node ${node.version}`);
      await sample(node.path, bundles[0], VARIANTS[0]); // warm the page cache for the files, not measured
      for (let s = 0; s < samples; s++) {
        for (const i of rotate(
          VARIANTS.map((_, k) => k),
          s,
        ))
          got[i].push(await sample(node.path, bundles[i], VARIANTS[i]));
      }
      const loaded = got.map((g) => stat(g.map((x) => x.loadedMs)));
      const failed = got.map((g) => stat(g.map((x) => x.failedMs)));
      const errorPart = got.map((g) => stat(g.map((x) => x.failedMs - x.loadedMs)));
      const mapped = got.map((g) => g.filter((x) => /\.ts:\d+:\d+\)?$/.test(x.top)).length);
      report.blocks.push(
        `Node ${node.version} (the functions' runtime major), ${samples} fresh processes per variant, interleaved; ms from process start, median (min–max)`,
        table(
          ['variant', 'index.js KB', 'map KB', 'handler exported ms', 'first failure logged ms', 'of which the failure ms', 'stack in .ts'],
          VARIANTS.map((v, i) => [
            v.name,
            fmt(sizes[i].js / 1024),
            v.sourcemap === 'inline' ? 'inline' : fmt(sizes[i].map / 1024),
            fmtStat(loaded[i]),
            fmtStat(failed[i]),
            fmtStat(errorPart[i]),
            `${mapped[i]}/${samples}`,
          ]),
        ),
        `top frames: ${VARIANTS.map((v, i) => `${v.name}: ${got[i][0].top}`).join('\n            ')}`,
        table(
          ['ratio of medians', 'handler exported', 'first failure logged', 'the failure alone'],
          [1, 3].map((i) => [
            `${VARIANTS[0].name} / ${VARIANTS[i].name}`,
            ratio(loaded[0], loaded[i]),
            ratio(failed[0], failed[i]),
            ratio(errorPart[0], errorPart[i]),
          ]),
        ),
      );
      report.verdicts.push(
        {
          measurement: this.name,
          what: 'cold start to a logged failure: --enable-source-maps vs the map read on error',
          figure: `${fmt(failed[0].median)} vs ${fmt(failed[3].median)} ms (${ratio(failed[0], failed[3])})`,
          target: 'informational',
          met: undefined,
        },
        {
          measurement: this.name,
          what: 'a logged failure names the TypeScript sources (map read on error)',
          figure: `${mapped[3]}/${samples}`,
          target: `${samples}/${samples}`,
          met: mapped[3] === samples,
        },
      );
      report.data.samples = Object.fromEntries(VARIANTS.map((v, i) => [v.name, got[i]]));
      report.data.sizes = Object.fromEntries(VARIANTS.map((v, i) => [v.name, sizes[i]]));
      return report;
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  },
};
