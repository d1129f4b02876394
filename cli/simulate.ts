/**
 * `fencepost simulate`: the lease simulator's command (lib/sim). A thin adapter: it parses and validates the
 * options (one line per bad one, exit 2), runs a named scenario or a what-if in the library, prints the event table
 * and the checks or answers, and writes the timeline picture if asked. A scenario whose check fails exits 4.
 *
 *   fencepost simulate --list
 *   fencepost simulate <scenario> [--json] [--svg FILE] [--png FILE]
 *   fencepost simulate what-if [--lease 10s] [--renew 3s] [--margin 2s] [--rule clock-free|margin|no-margin]
 *                      [--pause [W:]4s+15s]… [--crash W@25s]… [--clock "W:+3s"|"W:rate=0.001"]… [--poll 500ms]
 *                      [--sweep lease=5..30 margin=0..5] [--json] [--svg FILE] [--png FILE]
 * The scenario name and repeated options do not fit parseCommand's scheme, so `parseSimulate` reads them here.
 */
import { writeFileSync } from 'node:fs';
import { ConfigError } from '../lib/core/errors';
import { secs, type SimRow, type TimelineMark } from '../lib/sim/engine';
import { CLAIM_RULES, type ClaimRule } from '../lib/sim/lock-item';
import type { Check, ScenarioInput } from '../lib/sim/scenario';
import { SCENARIOS } from '../lib/sim/scenarios/index';
import {
  leaseRelationProblems,
  sweepGrid,
  whatIf,
  WHAT_IF_DEFAULTS,
  type SweepAxis,
  type WhatIfAnswers,
  type WhatIfSettings,
} from '../lib/sim/what-if';
import { parseCommand, REPEATED_SEPARATOR } from './options';
import { textTable } from '../verify/text-table';
import type { WorldName } from '../verify/explore/worlds';
import { svgToPng, timelineSvg } from './timeline';

type Values = Record<string, string | boolean | undefined>;
type Out = (text: string) => void;

const EXIT_OK = 0;
const EXIT_CHECK_FAILED = 4;
/**
 * Read `simulate`'s arguments: the options as every command reads them (cli/options.ts parseCommand: unknown options,
 * missing values and stray words refused one line each; --pause, --crash, --clock and --sweep may repeat), then the
 * scenario name (the first word) and the `name=range` words that follow --sweep.
 * @throws ConfigError listing every problem
 */
export function parseSimulate(args: string[]): Values {
  const values = parseCommand('simulate', args);
  const [scenario, ...rest] = list(values.positionals);
  delete values.positionals;
  if (scenario !== undefined) values.scenario = scenario;
  const axes = values.sweep === undefined ? [] : rest.filter((p) => /^\w+=/.test(p));
  if (axes.length > 0) values.sweep = [values.sweep, ...axes].join(REPEATED_SEPARATOR);
  const stray = rest.filter((p) => !axes.includes(p));
  if (stray.length > 0) throw new ConfigError(stray.map((p) => `unexpected argument ${JSON.stringify(p)} (see fencepost simulate --help)`));
  return values;
}

/** A duration: 10s, 500ms, 1.5s, 2m; a bare number is seconds. */
function duration(raw: string, what: string, problems: string[]): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(raw.trim());
  if (!m) {
    problems.push(`${what} must be a duration like 10s, 500ms or 1.5s, got ${JSON.stringify(raw)}`);
    return undefined;
  }
  return Math.round(Number(m[1]) * { ms: 1, s: 1000, m: 60_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm']);
}

const list = (v: string | boolean | undefined) => (typeof v === 'string' ? v.split(REPEATED_SEPARATOR).filter((x) => x !== '') : []);

/** The what-if settings from the options, defaults filled in; every problem collected, then thrown at once. */
function whatIfSettings(values: Values): { settings: WhatIfSettings; axes: SweepAxis[] } {
  const problems: string[] = [];
  const d = WHAT_IF_DEFAULTS;
  const dur = (name: string, fallback: number) =>
    typeof values[name] === 'string' ? (duration(values[name] as string, `--${name}`, problems) ?? fallback) : fallback;
  const rule = (values.rule as string | undefined) ?? d.rule;
  if (!CLAIM_RULES.includes(rule as ClaimRule)) problems.push(`--rule must be one of ${CLAIM_RULES.join(', ')}, got ${JSON.stringify(rule)}`);
  const pauses = values.pause === undefined ? d.pauses : [];
  for (const p of list(values.pause)) {
    const m = /^(?:(\w+):)?([^+]+)\+(.+)$/.exec(p);
    const at = m ? duration(m[2], '--pause start', problems) : undefined;
    const forMs = m ? duration(m[3], '--pause length', problems) : undefined;
    if (!m) problems.push(`--pause must be [WORKER:]START+LENGTH like 4s+15s or B:30s+5s, got ${JSON.stringify(p)}`);
    else if (at !== undefined && forMs !== undefined) (pauses as WhatIfSettings['pauses'][number][]).push({ worker: m[1] ?? 'A', at, forMs });
  }
  const crashes: { worker: string; at: number }[] = [];
  for (const c of list(values.crash)) {
    const m = /^(\w+)@(.+)$/.exec(c);
    const at = m ? duration(m[2], '--crash time', problems) : undefined;
    if (!m) problems.push(`--crash must be WORKER@TIME like B@25s, got ${JSON.stringify(c)}`);
    else if (at !== undefined) crashes.push({ worker: m[1], at });
  }
  const clocks: { worker: string; offsetMs: number; rate: number }[] = [];
  for (const c of list(values.clock)) {
    const off = /^(\w+):([+-])(.+)$/.exec(c);
    const rate = /^(\w+):rate=(-?\d+(?:\.\d+)?)$/.exec(c);
    const ms = off ? duration(off[3], '--clock offset', problems) : undefined;
    if (off && ms !== undefined) clocks.push({ worker: off[1], offsetMs: off[2] === '-' ? -ms : ms, rate: 0 });
    else if (rate) clocks.push({ worker: rate[1], offsetMs: 0, rate: Number(rate[2]) });
    else if (!off) problems.push(`--clock must be WORKER:+OFFSET or WORKER:rate=R like D:+3s or D:rate=0.001, got ${JSON.stringify(c)}`);
  }
  const settings: WhatIfSettings = {
    ...d,
    leaseMs: dur('lease', d.leaseMs),
    renewMs: dur('renew', d.renewMs),
    marginMs: dur('margin', d.marginMs),
    pollMs: dur('poll', 500),
    rule: rule as ClaimRule,
    pauses,
    crashes,
    clocks,
  };
  const axes: SweepAxis[] = [];
  for (const a of list(values.sweep)
    .flatMap((x) => x.split(/\s+/))
    .filter(Boolean)) {
    const m = /^(lease|renew|margin|pause)=(\d+(?:\.\d+)?)\.\.(\d+(?:\.\d+)?)(?:\/(\d+(?:\.\d+)?))?$/.exec(a);
    if (!m) {
      problems.push(`--sweep axes are NAME=FROM..TO[/STEP] in seconds with NAME one of lease, renew, margin, pause, got ${JSON.stringify(a)}`);
      continue;
    }
    const [from, to, step] = [Number(m[2]), Number(m[3]), Number(m[4] ?? 1)];
    if (!(step > 0) || from > to) problems.push(`--sweep ${m[1]}: FROM must not exceed TO and STEP must be above 0, got ${JSON.stringify(a)}`);
    else
      axes.push({
        name: m[1] as SweepAxis['name'],
        values: Array.from({ length: Math.floor((to - from) / step + 1e-9) + 1 }, (_, i) => Math.round((from + i * step) * 1000)),
      });
  }
  if (axes.length === 0 && values.sweep === undefined) {
    // Relation checks only for a single run: a sweep reports its invalid cells instead.
    problems.push(...leaseRelationProblems(settings));
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { settings, axes };
}

/** The event table: t (s), actor, event, token, fence, note. */
export function eventTable(rows: readonly SimRow[]): string {
  const header = ['t (s)', 'actor', 'event', 'token', 'fence', 'note'];
  const body = rows.map((r) => [
    secs(r.t),
    r.actor,
    r.event,
    r.token === undefined ? '' : String(r.token),
    r.fence === undefined ? '' : String(r.fence),
    r.note ?? '',
  ]);
  return textTable(header, body);
}

function checksText(checks: readonly Check[]): string {
  const failed = checks.filter((c) => !c.ok);
  return [
    `checks: ${checks.length - failed.length} of ${checks.length} hold`,
    ...checks.map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.what}: ${String(c.actual)}${c.ok ? '' : ` (expected: ${String(c.expected)})`}`),
  ].join('\n');
}

/** The scenario's inputs, each with where it comes from: what the checks' expectations are computed from. */
function inputsText(inputs: readonly ScenarioInput[]): string {
  return [
    'inputs (what the scenario assumes; the checks compute their expectations from these):',
    ...inputs.map((i) => `  ${i.name}: ${i.unit === 'ms' ? `${secs(i.value)} s` : i.value.toLocaleString('en-US')} (${i.note})`),
  ].join('\n');
}

function answersText(a: WhatIfAnswers): string {
  const lines = [
    `holders: ${a.holders.map((h) => `${h.worker} (token ${h.token}) ${secs(h.fromMs)}–${secs(h.toMs)}`).join(', ')}`,
    `overlap of two holders with the right to act: ${a.overlapMs === 0 ? 'none' : `${secs(a.overlapMs)} s (${a.overlaps.map((o) => `${o.a}/${o.b} ${secs(o.ms)} s`).join(', ')})`}`,
    `writes refused by the fence: ${a.refusedWrites}`,
    `invoices written twice: ${a.writtenTwiceWithFence} with the fence, ${a.writtenTwiceWithoutFence} without it`,
    `longest time with no owner: ${secs(a.longestNoOwnerMs)} s`,
    ...a.takeovers.map(
      (t) =>
        `takeover ${t.from} → ${t.to}: at ${secs(t.atMs)} s; earliest safe (last renewal applied + lease) ${secs(t.earliestSafeMs)} s${t.atMs < t.earliestSafeMs ? ' — EARLY' : ''}`,
    ),
    `job ${a.done ? `done at ${secs(a.doneAtMs!)} s` : 'not done by the end of the run'}`,
  ];
  return lines.join('\n');
}

async function writePictures(values: Values, title: string, marks: readonly TimelineMark[], err: Out): Promise<void> {
  if (values.svg === undefined && values.png === undefined) return;
  const svg = await timelineSvg(title, marks);
  if (typeof values.svg === 'string') {
    writeFileSync(values.svg, svg);
    err(`timeline written to ${values.svg}`);
  }
  if (typeof values.png === 'string') {
    writeFileSync(values.png, await svgToPng(svg));
    err(`timeline written to ${values.png}`);
  }
}

/** The command: list, a scenario, or a what-if (with or without a sweep). Returns the exit code. */
export async function simulate(
  values: Values,
  out: Out = (t) => process.stdout.write(t + '\n'),
  err: Out = (t) => process.stderr.write(t + '\n'),
): Promise<number> {
  const name = values.scenario as string | undefined;
  if (values.list || name === undefined) {
    out(
      textTable(
        ['scenario', 'what it shows'],
        [
          ...SCENARIOS.map((s) => [s.name, s.title]),
          ['explore', 'the real core on virtual time, a seeded scheduler, faults at every store call (--world, --seed, --schedules, --mutation)'],
          ['what-if', 'your settings and faults: overlaps, refusals, double writes, ownerless time (--sweep for a grid)'],
        ],
      ),
    );
    return EXIT_OK;
  }
  if (name === 'what-if') return whatIfCommand(values, out, err);
  if (name === 'explore') return exploreCommand(values, out, err);
  const scenario = SCENARIOS.find((s) => s.name === name);
  if (!scenario)
    throw new ConfigError([
      `unknown scenario ${JSON.stringify(name)}; scenarios are ${[...SCENARIOS.map((s) => s.name), 'what-if'].join(', ')} (fencepost simulate --list)`,
    ]);
  const result = await scenario.run();
  const ok = result.checks.every((c) => c.ok);
  if (values.json)
    out(
      JSON.stringify({
        scenario: result.name,
        title: result.title,
        claim: result.claim,
        ...(result.inputs ? { inputs: result.inputs } : {}),
        rows: result.rows,
        checks: result.checks,
        ok,
      }),
    );
  else
    out(
      [
        `${result.title}\n(${result.claim})`,
        '',
        eventTable(result.rows),
        '',
        ...(result.inputs ? [inputsText(result.inputs), ''] : []),
        checksText(result.checks),
      ].join('\n'),
    );
  await writePictures(values, result.title, result.marks, err);
  return ok ? EXIT_OK : EXIT_CHECK_FAILED;
}

async function whatIfCommand(values: Values, out: Out, err: Out): Promise<number> {
  const { settings, axes } = whatIfSettings(values);
  if (axes.length > 0) {
    const grid = sweepGrid(settings, axes);
    const header = [
      ...axes.map((a) => `${a.name} (s)`),
      'overlap (s)',
      'refused',
      'twice w/ fence',
      'twice w/o fence',
      'no owner (s)',
      'takeover (s)',
    ];
    const body = grid.results.map((r) => [
      ...axes.map((a) => secs(r.cell[a.name]).replace(/\.00$/, '')),
      ...(r.answers
        ? [
            secs(r.answers.overlapMs),
            String(r.answers.refusedWrites),
            String(r.answers.writtenTwiceWithFence),
            String(r.answers.writtenTwiceWithoutFence),
            secs(r.answers.longestNoOwnerMs),
            r.answers.takeovers[0] ? secs(r.answers.takeovers[0].atMs) : '-',
          ]
        : [`invalid: ${r.problems.join('; ')}`, '', '', '', '', '']),
    ]);
    if (values.json)
      out(JSON.stringify({ settings, axes, cells: grid.results, settingsRun: grid.results.length, ms: Math.round(grid.ms * 10) / 10 }));
    else out([textTable(header, body), '', `a grid of ${grid.results.length} settings in ${grid.ms.toFixed(0)} ms`].join('\n'));
    return EXIT_OK;
  }
  const r = whatIf(settings);
  if (values.json) out(JSON.stringify({ settings, rows: r.rows, answers: r.answers }));
  else out([eventTable(r.rows), '', answersText(r.answers)].join('\n'));
  await writePictures(
    values,
    `what-if: lease ${secs(settings.leaseMs)} s, renew ${secs(settings.renewMs)} s, margin ${secs(settings.marginMs)} s, ${settings.rule}`,
    r.marks,
    err,
  );
  return EXIT_OK;
}

/** A whole number option, at least `min`; a problem for anything else. */
function wholeNumber(values: Values, name: string, fallback: number, min: number, problems: string[]): number {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const n = typeof raw === 'string' && /^\d+$/.test(raw.trim()) ? Number(raw) : NaN;
  if (!Number.isSafeInteger(n) || n < min) problems.push(`--${name} must be a whole number of at least ${min}, got ${JSON.stringify(raw)}`);
  return n;
}

/**
 * `simulate explore`: the real core on virtual time under the seeded scheduler (verify/explore). Exit 0 with no
 * violation; otherwise each failing schedule's replay command and event trace, and the check-failed exit code.
 */
async function exploreCommand(values: Values, out: Out, err: Out): Promise<number> {
  const problems: string[] = [];
  const seed = wholeNumber(values, 'seed', 42, 0, problems);
  const schedules = wholeNumber(values, 'schedules', 100, 1, problems);
  // Loaded here, not with the CLI: the workflow world brings aws-cdk-lib (it synthesizes the job's state machines).
  const { explore } = await import('../verify/explore/explore.js');
  const { ALL_MUTATIONS, WORLD_NAMES, worldsFor } = await import('../verify/explore/worlds.js');
  const mutation = values.mutation as string | undefined;
  const world = (values.world ?? 'all') as WorldName | 'all';
  const worldOk = world === 'all' || (WORLD_NAMES as readonly string[]).includes(world);
  if (!worldOk) problems.push(`--world must be all or one of ${WORLD_NAMES.join(', ')}, got ${JSON.stringify(values.world)}`);
  if (mutation !== undefined && !ALL_MUTATIONS.includes(mutation))
    problems.push(`--mutation must be one of ${ALL_MUTATIONS.join(', ')}, got ${JSON.stringify(mutation)}`);
  else if (mutation !== undefined && worldOk && worldsFor(world, mutation).length === 0)
    problems.push(`--mutation ${mutation} is not applied in the ${world} world; it is in: ${worldsFor('all', mutation).join(', ')}`);
  if (problems.length > 0) throw new ConfigError(problems);
  const started = performance.now();
  const summary = await explore(seed, schedules, { world, mutation });
  const minutes = (performance.now() - started) / 60_000;
  for (const v of summary.violations) {
    out(`VIOLATION in schedule ${v.seed}: ${v.violations.join('; ')}`);
    out(`  caught by: ${v.caughtBy.join('; ')}`);
    out(`  replay: ${v.replay}`);
    if (!values.json) out(v.trace.map((line) => `    ${line}`).join('\n'));
  }
  // Throughput varies from run to run: on its own line, on stderr, outside the summary and its digest.
  err(`throughput: ${Math.round(summary.schedules / minutes)} schedules/minute (${summary.schedules} in ${(minutes * 60).toFixed(1)} s)`);
  if (values.json) out(JSON.stringify(summary));
  else
    out(
      `${summary.schedules} schedules from seed ${seed} (${Object.entries(summary.worlds)
        .map(([w, n]) => `${w} ${n}`)
        .join(', ')})` +
        `${mutation ? ` with mutation ${mutation}` : ''}: ${summary.violations.length} violating, ` +
        `${Object.values(summary.crashPoints).reduce((a, b) => a + b, 0)} faults injected, digest ${summary.digest}` +
        Object.entries(summary.caughtBy)
          .map(([check, n]) => `\n  caught by ${check}: ${n.schedules} schedules (alone in ${n.alone})`)
          .join(''),
    );
  return summary.violations.length === 0 ? EXIT_OK : EXIT_CHECK_FAILED;
}
