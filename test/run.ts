/**
 * `npm test`: start one embedded stack (DynamoDB Local behind the conflict proxy + local S3) for the whole run,
 * then run every test file with Node's built-in test runner against it, and stop the stack. The runner's own
 * summary and exit code are what CI reads.
 *
 * The stack's endpoints record every call they answer, with the caller's access key id, in one call log; the
 * local workflow records the invocations its state machines make there too. The IAM proof (iam.test.ts) reads
 * that log, so it runs last, after every file that exercises the deployed functions.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedStack } from '../local/stack';
import { runBatch, type Counts } from './support/runner';

/** Files that read what the others recorded: run after them, in a second batch (the runner orders files itself). */
const LAST = ['iam.test.ts'];

/**
 * A test without its own `timeout` fails after 5 minutes, a file left running fails 30 s after its tests end, and the
 * whole run stops at 40 minutes (test/support/runner.ts): a hang fails the run well inside CI's time.
 */
const TEST_LIMIT_MS = 5 * 60_000;
const RUN_LIMIT_MS = 40 * 60_000;

const runStarted = performance.now();

async function main(): Promise<number> {
  const dir = __dirname;
  const only = process.argv.slice(2);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
    .sort();
  const batches = [files.filter((f) => !LAST.includes(f)), files.filter((f) => LAST.includes(f))].filter((b) => b.length > 0);
  const logDir = mkdtempSync(path.join(tmpdir(), 'fencepost-calls-'));
  // FENCEPOST_CALL_LOG set: the calls are recorded there and kept, also on a partial run, so the IAM proof can be run
  // on a smaller set (`FENCEPOST_CALL_LOG=/tmp/calls.jsonl npm test -- workflow sweeper reindex iam`).
  const given = process.env.FENCEPOST_CALL_LOG;
  const callLog = given ?? path.join(logDir, 'calls.jsonl');
  const stack = await startEmbeddedStack({ callLog });
  process.stderr.write(
    `test stack up in ${((performance.now() - runStarted) / 1000).toFixed(1)} s: ${stack.endpoints.dynamodb} ${stack.endpoints.s3}\n`,
  );
  const total: Counts = { passed: 0, failed: 0, cancelled: 0, skipped: 0 };
  let code = 0;
  try {
    for (const batch of batches) {
      const r = await runBatch(
        batch.map((f) => path.join(dir, f)),
        {
          env: {
            FENCEPOST_TEST_DYNAMODB: stack.endpoints.dynamodb,
            FENCEPOST_TEST_S3: stack.endpoints.s3,
            // Only a whole run records every function's calls: a partial run (npm test -- cli) proves nothing about grants,
            // unless FENCEPOST_CALL_LOG was given (above).
            ...(only.length === 0 || given !== undefined ? { FENCEPOST_CALL_LOG: callLog } : {}),
          },
          testLimitMs: TEST_LIMIT_MS,
          deadline: runStarted + RUN_LIMIT_MS,
        },
      );
      total.passed += r.counts.passed;
      total.failed += r.counts.failed;
      total.cancelled += r.counts.cancelled;
      total.skipped += r.counts.skipped;
      if (r.code !== 0) code = r.code;
      if (r.stopped)
        process.stderr.write(`\nthe run passed its limit of ${RUN_LIMIT_MS / 60_000} min and was stopped: see "Interrupted while running" above\n`);
    }
  } finally {
    await stack.stop();
    rmSync(logDir, { recursive: true, force: true });
  }
  // One closing line for both batches.
  process.stdout.write(`\ntests: ${total.passed} passed, ${total.failed} failed, ${total.cancelled} cancelled, ${total.skipped} skipped\n`);
  return code;
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
