/**
 * `npm test`: start one embedded stack (DynamoDB Local behind the conflict proxy + local S3) for the whole run,
 * then run every test file with Node's built-in test runner against it, and stop the stack. The runner's own
 * summary and exit code are what CI reads.
 *
 * The stack's endpoints record every call they answer, with the caller's access key id, in one call log; the
 * local workflow records the invocations its state machines make there too. The IAM proof (iam.test.ts) reads
 * that log, so it runs last, after every file that exercises the deployed functions.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startEmbeddedStack } from '../local/stack';

/** Files that read what the others recorded: run after them. */
const LAST = ['iam.test.ts'];

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true'; // Node 20 here; see README "Node version"

async function main(): Promise<number> {
  const dir = __dirname;
  const only = process.argv.slice(2);
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
    .sort((a, b) => Number(LAST.includes(a)) - Number(LAST.includes(b)) || a.localeCompare(b))
    .map((f) => path.join(dir, f));
  const started = performance.now();
  const logDir = mkdtempSync(path.join(tmpdir(), 'fencepost-calls-'));
  const callLog = path.join(logDir, 'calls.jsonl');
  const stack = await startEmbeddedStack({ callLog });
  process.stderr.write(`test stack up in ${((performance.now() - started) / 1000).toFixed(1)} s: ${stack.endpoints.dynamodb} ${stack.endpoints.s3}\n`);
  try {
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...files], {
      stdio: 'inherit',
      env: {
        ...process.env, FENCEPOST_TEST_DYNAMODB: stack.endpoints.dynamodb, FENCEPOST_TEST_S3: stack.endpoints.s3, NODE_NO_WARNINGS: '1',
        // Only a whole run records every function's calls: a partial run (npm test -- cli) proves nothing about grants.
        ...(only.length === 0 ? { FENCEPOST_CALL_LOG: callLog } : {}),
      },
    });
    const code: number = await new Promise((resolve) => child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
    return code;
  } finally {
    await stack.stop();
    rmSync(logDir, { recursive: true, force: true });
  }
}

main().then((code) => { process.exitCode = code; }, (err) => { console.error(err); process.exitCode = 1; });
