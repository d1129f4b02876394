/**
 * The reference's scenarios (issue 13, item 2), each asserted against the reference's numbers from the simulator's
 * own output: the models' values in the scenario's result and the rows of the table `fencepost simulate` prints.
 * Plus what-if (its answers, its bad input, a 100-setting grid's time) and the timeline picture.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Resvg } from '@resvg/resvg-js';
import { eventTable, parseSimulate, simulate } from '../../cli/simulate';
import { TIMELINE_LEGEND, timelineSvg } from '../../cli/timeline';
import { ConfigError } from '../../lib/core/errors';
import type { ScenarioResult } from '../../lib/sim/scenario';
import { SCENARIOS } from '../../lib/sim/scenarios/index';
import { night } from '../../lib/sim/scenarios/night';
import { mainStory } from '../../lib/sim/scenarios/story';
import { sweepGrid, whatIf, WHAT_IF_DEFAULTS } from '../../lib/sim/what-if';
import { exitedAfterOutput, runCli } from '../support/worker';

const run = async (name: string): Promise<ScenarioResult> => SCENARIOS.find((s) => s.name === name)!.run();
/** The value the models produced for the check whose description matches. */
function value(r: ScenarioResult, what: RegExp): unknown {
  const c = r.checks.find((x) => what.test(x.what));
  assert.ok(c, `${r.name} has a check matching ${what}`);
  return c.actual;
}
/** The printed table has a row at t with these cells. */
function printed(r: ScenarioResult, t: string, actor: string, event: RegExp, token = '', fence = ''): void {
  const line = eventTable(r.rows)
    .split('\n')
    .find((l) => l.startsWith(t) && l.includes(actor) && event.test(l) && l.includes(` ${token}`) && l.includes(` ${fence}`));
  assert.ok(line, `${r.name}: a row at ${t} for ${actor} ${event} (token ${token}, fence ${fence})\n${eventTable(r.rows)}`);
}

test('every scenario runs and all its own checks hold', async () => {
  for (const s of SCENARIOS) {
    const r = await s.run();
    assert.ok(r.rows.length > 0, s.name);
    assert.deepEqual(
      r.checks.filter((c) => !c.ok),
      [],
      s.name,
    );
  }
});

test('the lock-service story S1–S6: 7/8.0/11.0, B 12 at 13.5 stop 21.5, fence at 13.6, refusal at 19.05, 29.5, C 15, 49.2/54.2, 59.1 vs 56.2, 52.0 at 16', async () => {
  const r = await run('lock-service-story');
  printed(r, '0.00', 'A', /acquires the lock/, '7');
  printed(r, '13.50', 'B', /acquires the lock/, '12');
  printed(r, '13.60', 'B', /raises the fence first/, '12', '12');
  printed(r, '19.05', 'A', /REFUSED by the fence/, '7', '12');
  printed(r, '19.05', 'A', /If-Match "E2": 412/, '7');
  printed(r, '29.50', 'lock service', /B's lease expired/);
  printed(r, '40.00', 'sweeper', /re-queues the orphan/, '', '12');
  printed(r, '40.20', 'C', /acquires the lock/, '15');
  printed(r, '49.10', 'n2', /elected leader/);
  printed(r, '52.00', 'C', /releases the lock/, '15');
  assert.equal(value(r, /A's first stop time/), 8);
  assert.equal(value(r, /A's stop time after the renewal/), 11);
  assert.equal(value(r, /B's stop time/), 21.5);
  assert.equal(value(r, /earliest safe takeover/), 29.5);
  assert.equal(value(r, /renewal that fails was sent/), 49.2);
  assert.equal(value(r, /C's stop time when it failed/), 54.2);
  assert.equal(value(r, /with the leader: its key lasts/), 59.1);
  assert.equal(value(r, /no failover: its key lasts/), 56.2);
  assert.equal(value(r, /release deletes the key at revision/), 16);
  assert.equal(value(r, /S6: the fence/), 15);
});

test("B's wall clock stepped back 3 s at 16.0, on the real lease: monotonic stop 21.5, the wall clock's reading only at 24.5, D claims at 23.5", async () => {
  const r = await run('wall-step');
  assert.deepEqual(
    r.checks.filter((c) => !c.ok),
    [],
  );
  printed(r, '21.50', 'B', /Lease.check\(\) refuses/, '1');
  printed(r, '23.50', 'D', /claims the lock item/, '2');
  printed(r, '24.50', 'B', /wall clock reaches/, '1');
  assert.equal(value(r, /after D's claim by/), 1);
});

test('the three claim rules with D 3 s fast: no margin at 10.5 (0.5 s overlap), margin 12.5 (models), clock-free 13.0 on the real lease (a gap)', async () => {
  const r = await run('claim-rules');
  printed(r, '10.50', 'D [no-margin]', /claims/, '2');
  printed(r, '12.50', 'D [margin]', /claims/, '2');
  // The real lease polls every lease/20 (0.5 s): D sees A's renewal of 3.0 at 3.0 and claims a full lease later.
  printed(r, '13.00', 'D [clock-free]', /claims the lock item \(clock-free\)/, '2');
  assert.equal(value(r, /no-margin \(model\): overlap/), 0.5);
  assert.equal(value(r, /^margin \(model\): overlap/), 0);
  assert.ok((value(r, /clock-free \(real code\): gap/) as number) > 0);
});

test("TTL resets epochs (1, 2, 3, then 1 again) against the never-TTL'd item (4)", async () => {
  const r = await run('ttl-epochs');
  assert.equal(value(r, /epochs with TTL/), '1,2,3,1');
  assert.equal(value(r, /never-TTL'd/), '1,2,3,4');
  printed(r, '26.00', 'E [TTL]', /raise REFUSED/, '1', '3');
});

test('the election on the real code: only the successor wakes, and leads with epoch 2 at 29.5; the handover leaves a gap of at least 5 s', async () => {
  const e = await run('election');
  assert.deepEqual(
    e.checks.filter((c) => !c.ok),
    [],
  );
  assert.equal(value(e, /candidates woken/), 1);
  printed(e, '29.50', 'C', /leads/, '2');
  const h = await run('handover');
  assert.equal(value(h, /old writer's right ends/), 10);
  assert.equal(value(h, /new writer starts/), 15);
  assert.ok((value(h, /^gap/) as number) >= 5);
  assert.ok((value(h, /smallest gap over 200 runs/) as number) > 0);
});

test('Redis failover: D gets the same token 15 as C; Redlock: two majorities sharing m3 both hold the lock', async () => {
  const r = await run('redis-failover');
  printed(r, '40.20', 'C', /INCR/, '15');
  printed(r, '42.00', 'D', /INCR/, '15');
  printed(r, '42.60', 'D', /WRITTEN TWICE/, '15', '15');
  const l = await run('redlock');
  assert.equal(value(l, /share/), 'm3');
  assert.ok((value(l, /both hold the lock for/) as number) > 0);
});

test('a restore of the lock service from the snapshot at revision 14 hands out 15 twice; with the bump D gets 1,000,015', async () => {
  const r = await run('restore-lock-service');
  printed(r, '40.20', 'C [no bump]', /acquires/, '15');
  printed(r, '45.50', 'D [no bump]', /acquires/, '15');
  printed(r, '45.50', 'D [bump]', /acquires/, '1000015');
  printed(r, '46.00', 'C [bump]', /REFUSED by the fence/, '15', '1000015');
});

// Issue 19, item 5: the project's restore (the lock table, then bump-epochs) on the real claim, raise, batch and bump.
test('a restore of the lock table on the real code: D gets C’s token again and both write; after bump-epochs D gets backup + 1,000,001 and C is refused', async () => {
  const r = await run('restore');
  assert.deepEqual(
    r.checks.filter((c) => !c.ok),
    [],
  );
  printed(r, '45.50', 'D [no bump]', /claims the lock item/, '3');
  printed(r, '46.00', 'C [no bump]', /writes a batch/, '3');
  printed(r, '45.00', 'operator [bump]', /bump-epochs/);
  printed(r, '45.50', 'D [bump]', /claims the lock item/, '1000003');
  printed(r, '46.00', 'C [bump]', /batch REFUSED by the fence/, '3', '1000003');
  assert.equal(value(r, /backup holds epoch/), 2);
});

test('the same chunk three ways: lock service 0 wasted 0 twice; database alone some waste 0 twice; no lock 5,000 twice', async () => {
  const r = await run('three-ways');
  assert.equal(value(r, /transactions in a chunk/), 51);
  assert.equal(value(r, /lock service: work wasted/), 0);
  assert.equal(value(r, /database alone: written twice/), 0);
  assert.ok((value(r, /database alone: work wasted/) as number) > 0);
  assert.equal(value(r, /no lock: written twice/), 5_000);
});

test('what-if: the no-margin rule with D 3 s fast overlaps A by 0.5 s; the fence refuses the zombie write; 99 invoices twice without it', async () => {
  const base = { ...WHAT_IF_DEFAULTS, crashes: [{ worker: 'B', at: 25_000 }], clocks: [{ worker: 'D', offsetMs: 3_000, rate: 0 }] };
  const a = whatIf({ ...base, rule: 'no-margin' }).answers;
  assert.equal(a.overlapMs, 500);
  assert.equal(a.refusedWrites, 1);
  assert.deepEqual([a.writtenTwiceWithFence, a.writtenTwiceWithoutFence], [0, 99]);
  assert.ok(a.takeovers[0].atMs < a.takeovers[0].earliestSafeMs, 'a takeover before the earliest safe one');
  const c = whatIf({ ...base, rule: 'clock-free' }).answers;
  assert.equal(c.overlapMs, 0);
  assert.equal(c.takeovers[0].earliestSafeMs, 13_000);
  assert.ok(c.takeovers.every((t) => t.atMs >= t.earliestSafeMs));
  assert.ok(c.longestNoOwnerMs > 0);
});

test('what-if bad input: one clear line per problem (a margin not below the lease, a renewal not below it, an unknown rule)', async () => {
  const problems = await simulate(parseSimulate(['what-if', '--lease', '10s', '--margin', '10s', '--renew', '12s', '--rule', 'fastest'])).then(
    () => [],
    (e: unknown) => (e instanceof ConfigError ? e.problems : [String(e)]),
  );
  assert.equal(problems.length, 3, problems.join('\n'));
  assert.match(problems.join('\n'), /--margin \(10 s\) must be below --lease/);
  assert.match(problems.join('\n'), /--renew \(12 s\) must be below --lease/);
  assert.match(problems.join('\n'), /--rule must be one of no-margin, margin, clock-free, got "fastest"/);
  assert.throws(() => parseSimulate(['main-story', '--bogus']), /unknown option '--bogus'/);
});

// How long the grid takes is a benchmark (bench/simulator.ts), not a timed test: here, that it runs and reports its time.
test('a grid of 100 settings: one answer per setting, and the time it took in the --json output', async () => {
  const grid = sweepGrid(WHAT_IF_DEFAULTS, [
    { name: 'lease', values: [5, 10, 15, 20, 25, 30, 35, 40, 45, 50].map((s) => s * 1000) },
    { name: 'margin', values: [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5].map((s) => s * 1000) },
  ]);
  assert.equal(grid.results.length, 100);
  assert.ok(
    grid.results.every((r) => r.answers !== undefined || r.problems.length > 0),
    'every cell answered or named invalid',
  );
  const lines: string[] = [];
  assert.equal(await simulate(parseSimulate(['what-if', '--json', '--sweep', 'lease=5..50/5', 'margin=0..4.5/0.5']), (t) => lines.push(t)), 0);
  const json = JSON.parse(lines.at(-1)!) as { settingsRun: number; ms: number };
  assert.equal(json.settingsRun, 100);
  assert.ok(Number.isFinite(json.ms) && json.ms > 0, 'the time is reported');
});

test('the CLI prints the table and the checks, and exits 0; an unknown scenario is one line', async () => {
  const lines: string[] = [];
  assert.equal(await simulate(parseSimulate(['main-story']), (t) => lines.push(t)), 0);
  assert.match(lines.join('\n'), /t \(s\)\s+actor\s+event\s+token\s+fence\s+note/);
  assert.match(lines.join('\n'), /checks: (\d+) of \1 hold/);
  await assert.rejects(simulate(parseSimulate(['nope'])), (e: unknown) => e instanceof ConfigError && e.problems.length === 1);
});

test("the timeline SVG parses and holds the main story's held bars, pauses, stop times, deadlines, fence raises and refusals", async () => {
  const r = await run('lock-service-story');
  const svg = await timelineSvg(r.title, r.marks);
  assert.ok(new Resvg(svg).render().asPng().length > 1_000, 'resvg parses and renders it');
  for (const kind of ['held', 'pause', 'stop', 'deadline', 'fence', 'refused'])
    assert.ok(
      r.marks.some((m) => m.kind === kind),
      kind,
    );
  assert.match(svg, /^<svg[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  for (const text of ['token 7', 'token 12', 'token 15', 'true time (s)', 'lock service', 'store']) assert.ok(svg.includes(text), text);
  assert.ok((svg.match(/<path/g) ?? []).length > 20, 'bars and points');
});

// Issue 19, item 5: the main story's checks compute what they expect from the scenario's own inputs, so a changed
// input moves the expectation and the models' value with it; a check that restated a constant would still say 8.
test('lock-service story inputs: margin 1 s and 12 chunks move every stop time and the night; the failover delay is a stated input', async () => {
  const lease = 10_000;
  const renew = 3_000;
  const margin = 1_000;
  const r = mainStory({ marginMs: margin, chunks: 12 });
  assert.deepEqual(
    r.checks.filter((c) => !c.ok),
    [],
  );
  const sec = (ms: number) => Math.round(ms / 10) / 100;
  // A acquires at 0, renews at renew; B acquires at 13.5; C's failed renewal comes after the renewal sent at 46.2.
  assert.equal(value(r, /A's first stop time/), sec(0 + lease - margin));
  assert.equal(value(r, /A's stop time after the renewal/), sec(renew + lease - margin));
  const bAt = (value(r, /B acquires at/) as number) * 1000;
  assert.equal(value(r, /B's stop time/), sec(bAt + lease - margin));
  const failedAt = (value(r, /renewal that fails was sent/) as number) * 1000;
  assert.equal(value(r, /C's stop time when it failed/), sec(failedAt - renew + lease - margin));
  assert.equal(value(r, /invoices recorded/), 12 * 5_000);
  assert.equal(value(r, /chunks the manifest names/), 12);
  // 59.1 is the leader's death + the failover's delay (an input) + a full lease; 56.2 is C's last renewal + a lease.
  const input = (name: RegExp) => r.inputs?.find((i) => name.test(i.name));
  assert.equal(input(/failover/)?.value, 2_100);
  const slow = mainStory({ electionMs: 4_000 });
  assert.equal(value(slow, /with the leader: its key lasts/), sec(47_000 + 4_000 + lease));
  assert.deepEqual(
    slow.checks.filter((c) => !c.ok),
    [],
  );
  // And the reference's night: 10 chunks of 5,000.
  const ref = await run('lock-service-story');
  assert.equal(value(ref, /invoices recorded/), 50_000);
  assert.equal(value(ref, /chunks the manifest names/), 10);
});

// A renewal period at or above lease − margin renews only after the stop time has come: the holder would give up the
// lease between renewals. Refused before anything runs, one line naming --renew, exit 2, nothing printed on stdout.
test('what-if refuses a renewal period not below lease − margin: one clear line, exit 2, nothing run', async () => {
  const lease = 10_000;
  const margin = 2_000;
  for (const renew of [lease - margin, lease - margin + 500]) {
    assert.throws(
      () => whatIf({ ...WHAT_IF_DEFAULTS, leaseMs: lease, marginMs: margin, renewMs: renew }),
      (e: unknown) => e instanceof ConfigError && e.problems.length === 1 && /--renew .* must be below --lease − --margin/.test(e.problems[0]),
    );
  }
  // Just below is a valid setting.
  assert.ok(whatIf({ ...WHAT_IF_DEFAULTS, leaseMs: lease, marginMs: margin, renewMs: lease - margin - 500 }).rows.length > 0);
  // A grid names such a cell invalid instead of running it.
  const grid = sweepGrid({ ...WHAT_IF_DEFAULTS, leaseMs: lease, marginMs: margin }, [{ name: 'renew', values: [3_000, lease - margin] }]);
  assert.deepEqual(
    grid.results.map((r) => r.answers !== undefined),
    [true, false],
  );
  const child = runCli([
    'simulate',
    'what-if',
    '--lease',
    `${lease / 1000}s`,
    '--margin',
    `${margin / 1000}s`,
    '--renew',
    `${(lease - margin) / 1000}s`,
  ]);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  assert.equal(await exitedAfterOutput(child), 2, stderr);
  assert.equal(stdout, '', 'nothing ran, nothing printed');
  assert.deepEqual(stderr.trim().split('\n'), [
    'fencepost simulate: --renew (8 s) must be below --lease − --margin (10 s − 2 s = 8 s): the stop time would come before the next renewal',
  ]);
});

// Issue 19, item 5: a timeline explains itself: a legend entry for every kind of mark it draws, the pause visible
// over the held bar, the scenario's faults in its title, and the renderer silent (no warning on the console).
test('a timeline has a legend for every mark it draws, a visible pause, the faults in its title, and prints no warning', async () => {
  const r = await run('lock-service-story');
  const warnings: string[] = [];
  const saved = { warn: console.warn, error: console.error, log: console.log };
  console.warn = console.error = console.log = (...args: unknown[]) => void warnings.push(args.map(String).join(' '));
  let svg: string;
  try {
    svg = await timelineSvg(r.title, r.marks);
  } finally {
    Object.assign(console, saved);
  }
  assert.deepEqual(warnings, [], 'the renderer printed nothing');
  const unescape = (t: string) => t.replace(/&#x27;|&#39;|&apos;/g, "'").replace(/&amp;/g, '&');
  const legend = [...svg.matchAll(/class="mark-text role-legend-label"[^>]*>\s*<text[^>]*>([^<]*)<\/text>/g)].map((m) => unescape(m[1]));
  const kinds = [...new Set(r.marks.map((m) => m.kind))];
  assert.ok(kinds.length >= 7, kinds.join(', '));
  for (const kind of kinds)
    assert.ok(legend.includes(TIMELINE_LEGEND[kind]), `the legend names ${kind} as "${TIMELINE_LEGEND[kind]}": ${legend.join(', ')}`);
  // The pause is drawn as its own bar, on top of the held bar (it comes later in the SVG), with its length written.
  assert.ok(svg.includes('paused 15 s'), 'the pause is labelled');
  assert.ok(svg.indexOf('layer_pause') > svg.indexOf('layer_held'), 'the pause is drawn over the held bar');
  // The faults, from the marks: who paused when and for how long, who crashed, the lock service's leader.
  const title = [...svg.matchAll(/class="mark-text role-title-(?:text|subtitle)"[\s\S]*?<\/g>/g)].map((m) => m[0]).join(' ');
  for (const fault of ['A paused 4.0–19.0 s', 'B dies at 21.0 s', 'n1 (leader) dies at 47.0 s'])
    assert.ok(title.includes(fault), `the title names "${fault}": ${title}`);
});

// Issue 19, item 5: the main story runs the REAL code (runJob, the lease, the fenced batch, the Sweeper) on the
// in-memory stores and virtual time; its table is the code's own events, and its checks follow the inputs.
test('the main story on the real code: the reference beats from the code’s events, 10 chunks of 5,000 in 510 transactions', async () => {
  const r = await run('main-story');
  assert.deepEqual(
    r.checks.filter((c) => !c.ok),
    [],
  );
  printed(r, '0.00', 'A', /claims the lock item \(clock-free\)/, '1');
  printed(r, '0.00', 'A', /raises the fences first: the job row and 10 chunk fences/, '1', '1');
  printed(r, '3.00', 'A', /renews/, '1');
  printed(r, '4.00', 'A', /freezes for 15 s/);
  printed(r, '13.00', 'B', /claims the lock item/, '2');
  printed(r, '19.00', 'A', /chunk 2 batch 1 REFUSED by the fence/, '1', '2');
  printed(r, '30.00', 'sweeper', /re-queues the orphan/, '', '2');
  printed(r, '40.00', 'C', /claims the lock item/, '3');
  printed(r, '52.00', 'C', /sets DONE/, '3', '3');
  assert.equal(value(r, /invoices recorded: 10 chunks of 5000/), 50_000);
  assert.equal(value(r, /transactions: 10 × 51/), 510);
  // The table's rows are the code's events, not a model's sentences: B's raise names every chunk fence the real raise wrote.
  assert.ok(r.rows.some((x) => x.actor === 'B' && /chunk fences/.test(x.event) && /chunks done before: 1$/.test(x.note ?? '')));
});

test('the main story on the real code follows its inputs (margin 1 s, 12 chunks), and its checks can fail (a pause too short to lose the lease)', async () => {
  const lease = 10_000;
  const margin = 1_000;
  const r = await night({ marginMs: margin, chunks: 12 });
  assert.deepEqual(
    r.checks.filter((c) => !c.ok),
    [],
  );
  const sec = (ms: number) => Math.round(ms / 10) / 100;
  assert.equal(value(r, /A's first stop time/), sec(0 + lease - margin));
  const bAt = (value(r, /B claims once/) as number) * 1000;
  assert.equal(value(r, /B's stop time/), sec(bAt + lease - margin));
  assert.equal(value(r, /invoices recorded: 12 chunks/), 12 * 5_000);
  assert.equal(value(r, /transactions: 12 × 51/), 12 * 51);
  // A pause of 5 s: A wakes at 9.0 with its lease still renewable and nobody has claimed: no refusal, no takeover.
  const short = await night({ pauseMs: 5_000 });
  const failed = short.checks.filter((c) => !c.ok).map((c) => c.what);
  assert.ok(
    failed.some((w) => /late batch meets the store/.test(w)),
    failed.join('\n'),
  );
  assert.ok(
    failed.some((w) => /B claims once/.test(w)),
    failed.join('\n'),
  );
});

// Every scenario's picture, not only the main one: one with no pause, or no marks at all, must not warn either.
test('every scenario draws its timeline with no warning and a legend entry for each kind of mark it uses', async () => {
  const warnings: string[] = [];
  const saved = console.warn;
  console.warn = (...args: unknown[]) => void warnings.push(args.map(String).join(' '));
  try {
    for (const s of SCENARIOS) {
      const r = await s.run();
      const svg = await timelineSvg(r.title, r.marks);
      const legend = [...svg.matchAll(/class="mark-text role-legend-label"[^>]*>\s*<text[^>]*>([^<]*)<\/text>/g)].map((m) =>
        m[1].replace(/&#x27;|&#39;|&apos;/g, "'"),
      );
      for (const kind of new Set(r.marks.map((m) => m.kind)))
        assert.ok(legend.includes(TIMELINE_LEGEND[kind]), `${s.name}: the legend names ${kind}`);
      assert.deepEqual(warnings, [], `${s.name}: the renderer printed nothing`);
    }
  } finally {
    console.warn = saved;
  }
});
