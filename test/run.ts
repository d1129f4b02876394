/**
 * `npm test`: start one embedded stack (DynamoDB Local behind the conflict proxy + local S3) for the whole run,
 * then run every test file with Node's built-in test runner against it, one file at a time, and stop the stack; the
 * packed-tarball test runs beside them on a second stack of its own (BESIDE). The runner's own summary and exit code
 * are what CI reads.
 *
 * The stack's endpoints record every call they answer, with the caller's access key id, in one call log; the
 * local workflow records the invocations its state machines make there too. The IAM proof (iam.test.ts) reads
 * that log, so it runs last, after every file that exercises the deployed functions.
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedStack, type EmbeddedStack } from '../lib/local/stack';
import { runBatch, type Counts } from './support/runner';

/** Files that read what the others recorded: run after them, in a second batch (the runner orders files itself). */
const LAST = ['iam.test.ts'];

/**
 * Files run beside the others, on an embedded stack of their own: the packed-tarball test spends most of its minutes
 * in npm, cdk init, tsc and synth rather than in the store, and it lists every table of its stack, as read-only.test.ts
 * does of the shared one, so the two must not share one. Its output is printed whole when it ends, not interleaved.
 */
const BESIDE = ['pack.test.ts'];

/**
 * A test without its own `timeout` fails after 5 minutes, a file left running fails 30 s after its tests end, and the
 * whole run stops at 40 minutes (test/support/runner.ts): a hang fails the run well inside CI's time.
 */
const TEST_LIMIT_MS = 5 * 60_000;
const RUN_LIMIT_MS = 40 * 60_000;

const runStarted = performance.now();

const stackEnv = (stack: EmbeddedStack) => ({ FENCEPOST_TEST_DYNAMODB: stack.endpoints.dynamodb, FENCEPOST_TEST_S3: stack.endpoints.s3 });

async function main(): Promise<number> {
  const dir = __dirname;
  const only = process.argv.slice(2);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
    .sort();
  const beside = files.filter((f) => BESIDE.includes(f));
  const first = files.filter((f) => !LAST.includes(f) && !BESIDE.includes(f));
  const last = files.filter((f) => LAST.includes(f));
  const logDir = mkdtempSync(path.join(tmpdir(), 'fencepost-calls-'));
  // FENCEPOST_CALL_LOG set: the calls are recorded there and kept, also on a partial run, so the IAM proof can be run
  // on a smaller set (`FENCEPOST_CALL_LOG=/tmp/calls.jsonl npm test -- workflow sweeper reindex iam`).
  const callLog = process.env.FENCEPOST_CALL_LOG ?? path.join(logDir, 'calls.jsonl');
  const recording = only.length === 0 || process.env.FENCEPOST_CALL_LOG !== undefined;
  const stack = await startEmbeddedStack({ callLog });
  // The side stack records no calls: the files beside run no function of the apps whose grants the proof reads.
  const sideStack = beside.length > 0 && first.length > 0 ? await startEmbeddedStack() : undefined;
  process.stderr.write(
    `test stack up in ${((performance.now() - runStarted) / 1000).toFixed(1)} s: ${stack.endpoints.dynamodb} ${stack.endpoints.s3}` +
      (sideStack ? ` (beside: ${sideStack.endpoints.dynamodb} ${sideStack.endpoints.s3})` : '') +
      '\n',
  );
  const total: Counts = { passed: 0, failed: 0, cancelled: 0, skipped: 0 };
  let code = 0;
  let batches = 0;
  const batch = async (names: string[], on: EmbeddedStack, echo = true) => {
    const r = await runBatch(
      names.map((f) => path.join(dir, f)),
      {
        env: {
          ...stackEnv(on),
          // Only a whole run records every function's calls: a partial run (npm test -- cli) proves nothing about grants.
          ...(recording && on === stack ? { FENCEPOST_CALL_LOG: callLog } : {}),
        },
        testLimitMs: TEST_LIMIT_MS,
        deadline: runStarted + RUN_LIMIT_MS,
        echo,
        timesFile: path.join(logDir, `times-${++batches}.jsonl`),
      },
    );
    if (!echo) process.stdout.write(r.output);
    total.passed += r.counts.passed;
    total.failed += r.counts.failed;
    total.cancelled += r.counts.cancelled;
    total.skipped += r.counts.skipped;
    if (r.code !== 0) code = r.code;
    if (r.stopped)
      process.stderr.write(`\nthe run passed its limit of ${RUN_LIMIT_MS / 60_000} min and was stopped: see "Interrupted while running" above\n`);
  };
  try {
    await Promise.all([
      first.length > 0 ? batch(first, stack) : undefined,
      beside.length > 0 ? batch(beside, sideStack ?? stack, sideStack === undefined) : undefined,
    ]);
    if (last.length > 0) await batch(last, stack);
    process.stdout.write(slowestFiles(logDir));
  } finally {
    await Promise.all([stack.stop(), sideStack?.stop()]);
    rmSync(logDir, { recursive: true, force: true });
  }
  // One closing line for every batch.
  process.stdout.write(`\ntests: ${total.passed} passed, ${total.failed} failed, ${total.cancelled} cancelled, ${total.skipped} skipped\n`);
  return code;
}

/** The files that took the run's minutes, from the timing reporter's lines: where to look when the run grows. */
function slowestFiles(logDir: string, count = 15): string {
  const perFile = new Map<string, number>();
  for (const name of readdirSync(logDir).filter((f) => f.startsWith('times-'))) {
    for (const line of readFileSync(path.join(logDir, name), 'utf8').split('\n').filter(Boolean)) {
      const { file, ms } = JSON.parse(line) as { file?: string; ms: number };
      const key = path.basename(file ?? '?');
      perFile.set(key, (perFile.get(key) ?? 0) + ms);
    }
  }
  const rows = [...perFile].sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((sum, [, ms]) => sum + ms, 0);
  const lines = rows.slice(0, count).map(([file, ms]) => `  ${(ms / 1000).toFixed(1).padStart(7)} s  ${file}`);
  return `\nslowest files (sum of their tests' durations; all ${rows.length} files: ${(total / 1000).toFixed(0)} s):\n${lines.join('\n')}\n`;
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
