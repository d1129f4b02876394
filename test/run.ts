/**
 * `npm test`: every test file, each in a `node --test` run of its own, side by side in two slots more than the machine
 * has cores (at least four), against one embedded stack (DynamoDB Local behind the conflict proxy + local S3) started
 * once for the whole run. A file's output is printed whole when it ends, so files run side by side never interleave.
 *
 * The folders under test/ are tiers, by what their files need (docs/REPOSITORY.md § Tests):
 * - `unit/`, `synth/`: nothing but the process (pure logic, virtual time, the memory stores; CDK synthesis). They must
 *   not use the stack (test/support/stack.ts refuses), so `unit/` starts at once, while the stack's JVM starts.
 * - `process/`, `package/`, `store/`: the stack, real processes, the build and the packed tarball.
 * - `proofs/`: read what the others recorded (the IAM proof reads the call log), so they run after every other file.
 *
 * The packed-tarball test runs beside the slots, on a stack of its own (BESIDE); the others are ordered by `queued` and
 * `inSlots`. `npm test -- <part>` runs the files whose path under test/ contains a part: `npm test -- lease`,
 * `npm test -- unit/`.
 *
 * The stack's endpoints record every call they answer, with the caller's access key id, in one call log; the local
 * workflow records the invocations its state machines make there too.
 *
 * A throw-away PostgreSQL server (test/support/postgres-server.ts) is started once too, beside the stack, for the tiers
 * marked `postgres`; its connection string reaches their files in FENCEPOST_TEST_POSTGRES.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedStack, type EmbeddedStack } from '../lib/local/stack';
import { fileCallSink } from '../verify/proofs/call-log';
import { runBatch, type Counts } from './support/runner';
import { startPostgres, type LocalPostgres } from './support/postgres-server';

interface Tier {
  readonly dir: string;
  /** Its files talk to the embedded stack (or start their own, as the packed-tarball test's app does). */
  readonly stack: boolean;
  /**
   * Its files hold leases on real time (real processes, DynamoDB Local), so a renewal answered late fails them. The
   * other tiers' files (virtual time, synthesis, bundling, type checks) run at a lower priority (`nice`): they take
   * the CPU the real-time files leave, and never starve their renewals.
   */
  readonly realTime: boolean;
  /** Its files may use the run's PostgreSQL server (the PostgreSQL fence's conformance suite). */
  readonly postgres?: boolean;
}

const TIERS: readonly Tier[] = [
  { dir: 'unit', stack: false, realTime: false },
  { dir: 'process', stack: true, realTime: true },
  // postgres: the packed-tarball test runs the README's PostgreSQL snippet against the run's server
  { dir: 'package', stack: true, realTime: false, postgres: true },
  { dir: 'synth', stack: false, realTime: false },
  { dir: 'store', stack: true, realTime: true, postgres: true },
];
const LAST: Tier = { dir: 'proofs', stack: true, realTime: false };
/** The priority of the files that time nothing on real time (see `Tier.realTime`). */
const LOWER_PRIORITY = 10;

/**
 * The longest files of the slots, started right after test/unit/ so the run does not end waiting on one started late
 * (a hint for the order only: a file missing from here still runs, in its place below).
 */
const LONGEST = ['process/faults.test.ts', 'process/workflow.test.ts', 'process/cli.test.ts'];

/**
 * The order files are queued in: test/unit/ first (it needs no stack, so it runs while the JVM starts), then the
 * longest, then the tiers in order. `inSlots` takes from it, keeping real-process files apart.
 */
function queued(files: readonly File[]): File[] {
  const unit = files.filter((f) => f.tier.dir === 'unit');
  const longest = LONGEST.flatMap((name) => files.filter((f) => f.name === name));
  return [...unit, ...longest, ...files.filter((f) => !unit.includes(f) && !longest.includes(f))];
}

/**
 * Run beside the slots, on an embedded stack of its own: the packed-tarball test spends most of its minutes in npm,
 * cdk init, tsc and synth rather than in the store, and it lists every table of its stack, so it must not share the
 * others'. It is the longest file, so it starts first.
 */
const BESIDE = ['package/pack.test.ts'];

/**
 * A file outside the real-time tiers that still holds leases on real time: the packed-tarball test runs the README's
 * nights and a consumer's `withLease` in the project it installs.
 */
const REAL_TIME_FILES = ['package/pack.test.ts'];
const realTime = (file: File) => file.tier.realTime || REAL_TIME_FILES.includes(file.name);

/**
 * A test without its own `timeout` fails after 5 minutes, a file left running fails 30 s after its tests end, and the
 * whole run stops at 20 minutes (test/support/runner.ts): a hang fails the run well inside CI's time.
 */
const TEST_LIMIT_MS = 5 * 60_000;
const RUN_LIMIT_MS = 20 * 60_000;

/**
 * Files side by side: two more than the cores (at least four), or FENCEPOST_TEST_SLOTS. A real-process file mostly
 * waits on real time, so slots beyond the cores use their idle share (docs/REPOSITORY.md § Tests measures it).
 */
const SLOTS = slotsOf(process.env.FENCEPOST_TEST_SLOTS);

function slotsOf(value: string | undefined): number {
  if (value === undefined) return Math.max(4, availableParallelism() + 2);
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`FENCEPOST_TEST_SLOTS must be a whole number of at least 1, not ${JSON.stringify(value)}`);
  return n;
}

const runStarted = performance.now();
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** A test file as the runner names it: its path under test/, e.g. `store/lease.test.ts`. */
interface File {
  readonly name: string;
  readonly tier: Tier;
}

function testFiles(only: readonly string[]): File[] {
  const dirs = readdirSync(__dirname, { withFileTypes: true }).filter((d) => d.isDirectory() && d.name !== 'support');
  const known = [...TIERS, LAST].map((t) => t.dir);
  const unknown = dirs.map((d) => d.name).filter((d) => !known.includes(d));
  if (unknown.length > 0) throw new Error(`test/${unknown[0]}/ is not a tier test/run.ts knows: add it to TIERS`);
  const loose = readdirSync(__dirname).filter((f) => f.endsWith('.test.ts'));
  if (loose.length > 0) throw new Error(`test/${loose[0]} is in no tier: move it into the folder of what it needs`);
  return [...TIERS, LAST].flatMap((tier) =>
    readdirSync(path.join(__dirname, tier.dir))
      .filter((f) => f.endsWith('.test.ts'))
      .sort()
      .map((f) => ({ name: `${tier.dir}/${f}`, tier }))
      .filter((f) => only.length === 0 || only.some((o) => f.name.includes(o))),
  );
}

async function main(): Promise<number> {
  const only = process.argv.slice(2);
  const files = testFiles(only);
  const beside = files.filter((f) => BESIDE.includes(f.name));
  const slotted = queued(files.filter((f) => f.tier !== LAST && !BESIDE.includes(f.name)));
  const last = files.filter((f) => f.tier === LAST);
  const logDir = mkdtempSync(path.join(tmpdir(), 'fencepost-calls-'));
  // FENCEPOST_CALL_LOG set: the calls are recorded there and kept, also on a partial run, so the IAM proof can be run
  // on a smaller set (`FENCEPOST_CALL_LOG=/tmp/calls.jsonl npm test -- workflow sweeper reindex iam`).
  const callLog = process.env.FENCEPOST_CALL_LOG ?? path.join(logDir, 'calls.jsonl');
  const recording = only.length === 0 || process.env.FENCEPOST_CALL_LOG !== undefined;

  // The stacks start in the background; a file that needs one waits for it, the others start at once.
  const mainNeeded = [...slotted, ...last].some((f) => f.tier.stack);
  const stack = mainNeeded ? startEmbeddedStack({ onCall: fileCallSink(callLog) }) : undefined;
  // The side stack records no calls: the files beside run no function of the apps whose grants the proof reads.
  const sideStack = beside.length > 0 ? startEmbeddedStack() : undefined;
  const stacksUp = Promise.all([stack, sideStack]).then(([main, side]) => {
    const up = (s: EmbeddedStack) => `${s.endpoints.dynamodb} ${s.endpoints.s3}`;
    process.stderr.write(
      `test stacks up in ${seconds(performance.now() - runStarted)}:` + (main ? ` ${up(main)}` : '') + (side ? ` (beside: ${up(side)})` : '') + '\n',
    );
  });
  stacksUp.catch(() => undefined); // a stack that fails to start fails the files that wait for it, and the run
  // PostgreSQL starts beside the stacks when a file may use it. If it cannot start, the files get none and a file that
  // needs one starts its own, which fails in that file alone, naming what is missing.
  const postgres: Promise<LocalPostgres | undefined> | undefined = files.some((f) => f.tier.postgres)
    ? startPostgres().catch((err: unknown) => (process.stderr.write(`PostgreSQL for the run did not start: ${String(err)}\n`), undefined))
    : undefined;
  process.stderr.write(`${files.length} test files, ${SLOTS} side by side${beside.length > 0 ? ' and 1 beside' : ''}\n`);

  const total: Counts = { passed: 0, failed: 0, cancelled: 0, skipped: 0 };
  const times: [string, number][] = [];
  let code = 0;
  let ended = 0;
  const run = async (file: File, on: Promise<EmbeddedStack> | undefined) => {
    const s = file.tier.stack ? await on : undefined;
    const pg = file.tier.postgres ? await postgres : undefined;
    const started = performance.now();
    const r = await runBatch([path.join(__dirname, file.name)], {
      env: {
        // A tier without the stack is refused it (test/support/stack.ts), so it cannot come to need it unseen.
        ...(file.tier.stack ? {} : { FENCEPOST_TEST_NO_STACK: file.tier.dir }),
        ...(s ? { FENCEPOST_TEST_DYNAMODB: s.endpoints.dynamodb, FENCEPOST_TEST_S3: s.endpoints.s3 } : {}),
        ...(pg ? { FENCEPOST_TEST_POSTGRES: pg.url } : {}),
        // Only a whole run records every function's calls: a partial run (npm test -- cli) proves nothing about grants.
        ...(recording && on === stack ? { FENCEPOST_CALL_LOG: callLog } : {}),
      },
      testLimitMs: TEST_LIMIT_MS,
      deadline: runStarted + RUN_LIMIT_MS,
      echo: false,
      nice: realTime(file) ? 0 : LOWER_PRIORITY,
    });
    const ms = performance.now() - started;
    times.push([file.name, ms]);
    const c = r.counts;
    const verdict = `${c.passed} passed${c.failed > 0 ? `, ${c.failed} FAILED` : ''}${c.cancelled > 0 ? `, ${c.cancelled} cancelled` : ''}`;
    process.stdout.write(`\n── ${file.name} ──\n${r.output}`);
    process.stderr.write(`[${++ended}/${files.length}] ${file.name}: ${verdict} in ${seconds(ms)}\n`);
    total.passed += c.passed;
    total.failed += c.failed;
    total.cancelled += c.cancelled;
    total.skipped += c.skipped;
    if (r.code !== 0) code = r.code;
    if (r.stopped)
      process.stderr.write(`\nthe run passed its limit of ${RUN_LIMIT_MS / 60_000} min and was stopped: see "Interrupted while running" above\n`);
  };

  try {
    await Promise.all([
      ...beside.map((f) => run(f, sideStack)),
      inSlots(slotted, SLOTS, (f) => run(f, stack)).then(() => inSlots(last, 1, (f) => run(f, stack))),
    ]);
    await stacksUp;
    process.stdout.write(slowestFiles(times, performance.now() - runStarted));
  } finally {
    await Promise.allSettled([stack?.then((s) => s.stop()), sideStack?.then((s) => s.stop()), postgres?.then((p) => p?.stop())]);
    rmSync(logDir, { recursive: true, force: true });
  }
  // One closing line for the whole run.
  process.stdout.write(`\ntests: ${total.passed} passed, ${total.failed} failed, ${total.cancelled} cancelled, ${total.skipped} skipped\n`);
  return code;
}

const isRealProcess = (f: File) => f.tier.dir === 'process';

/**
 * Runs `work` on each file, at most `slots` at a time, each free slot taking the first file queued of the kind it is
 * for: real-process files hold at most half the slots (at least one), the other tiers' files the rest, and once one
 * kind has none left the other takes every slot. A real-process file mostly waits on real time, and the CPU-bound files
 * beside it run at a lower priority (`realTime`), so the two kinds side by side use the cores without slowing the
 * renewals. Before the priorities, real-process files ran one at a time beside the others (two side by side took 277
 * and 295 s, apart 171 and 257 s), and at 4 slots they then piled up at the end of the run, waiting on time alone.
 */
async function inSlots(files: readonly File[], slots: number, work: (file: File) => Promise<void>): Promise<void> {
  const waiting = [...files];
  const running = new Set<File>();
  const realTimeSlots = Math.max(1, Math.floor(slots / 2));
  const take = (): File | undefined => {
    const wantRealProcess = [...running].filter(isRealProcess).length < realTimeSlots;
    const next = waiting.findIndex((f) => isRealProcess(f) === wantRealProcess);
    return waiting.splice(next >= 0 ? next : 0, 1)[0];
  };
  const slot = async () => {
    for (let file = take(); file !== undefined; file = take()) {
      running.add(file);
      try {
        await work(file);
      } finally {
        running.delete(file);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(slots, files.length) }, slot));
}

/** The files that took the run's minutes: where to look when the run grows. */
function slowestFiles(times: readonly [string, number][], runMs: number, count = 15): string {
  const rows = [...times].sort((a, b) => b[1] - a[1]);
  const sum = rows.reduce((s, [, ms]) => s + ms, 0);
  const lines = rows.slice(0, count).map(([file, ms]) => `  ${seconds(ms).padStart(9)}  ${file}`);
  return (
    `\nslowest files (each file's run, start to exit; all ${rows.length} files: ${seconds(sum)} in ${seconds(runMs)}, ` +
    `${SLOTS} side by side):\n${lines.join('\n')}\n`
  );
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    console.error(err);
    process.exitCode = 1;
  },
);
