/**
 * One `node --test` run over some files, as `npm test` runs each file (test/run.ts): the runner's output passes
 * through, its summary's counts are read back, and a hang fails the run instead of holding it open.
 *
 * - Each test gets `testLimitMs` unless it sets its own `timeout`.
 * - A file whose tests have all ended but whose process keeps running (something it started still polling) fails
 *   after `lingerMs`, naming what is still open (test/support/leak-guard.ts). Node's own --test-force-exit is not
 *   used: a file's process can exit before its last verdicts reach the runner, which then reports fewer tests and
 *   passes (nodejs/node#64833; here a whole run lost 3 of conditions.test.ts's verdicts).
 * - The whole batch stops at `deadline` (on this process's monotonic clock): the runner is sent SIGTERM, on which it
 *   names the file it interrupts and stops that file's process; SIGKILL follows if it does not exit.
 */
import { spawn } from 'node:child_process';
import { setPriority } from 'node:os';
import path from 'node:path';
import { exitedAfterOutput } from '../../verify/chaos/worker-process';

const LEAK_GUARD = path.join(__dirname, 'leak-guard.ts');

export interface Counts {
  passed: number;
  failed: number;
  /** Timed out, or interrupted by the deadline: not passed either. */
  cancelled: number;
  skipped: number;
}

export interface BatchOptions {
  /** Extra environment for the test files. */
  readonly env?: Record<string, string>;
  /** A test without its own `timeout` fails after this long. */
  readonly testLimitMs: number;
  /** A file still running this long after its tests ended fails. @default 30 s */
  readonly lingerMs?: number;
  /** performance.now() at which the batch is stopped, whatever it is doing. */
  readonly deadline: number;
  /** Pass the runner's output through to this process's stdout (the run's log). @default true */
  readonly echo?: boolean;
  /** The files' scheduling priority (`nice`), inherited by every process they start. @default 0 */
  readonly nice?: number;
}

export interface BatchResult {
  readonly code: number;
  readonly counts: Counts;
  /** What the runner printed: the report, with what the test files wrote to stderr. */
  readonly output: string;
  /** The deadline came first and the batch was stopped. */
  readonly stopped: boolean;
}

export async function runBatch(files: string[], options: BatchOptions): Promise<BatchResult> {
  const args = ['--import', 'tsx', '--import', LEAK_GUARD, '--test', '--test-concurrency=1', `--test-timeout=${options.testLimitMs}`, ...files];
  // Not as a child of another runner (runner.test.ts runs this inside a test): that one's protocol variable would
  // make this runner report to it instead of printing.
  const inherited = { ...process.env };
  delete inherited.NODE_TEST_CONTEXT;
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...inherited, ...options.env, FENCEPOST_TEST_LINGER_MS: String(options.lingerMs ?? 30_000), NODE_NO_WARNINGS: '1' },
  });
  if (options.nice && child.pid !== undefined) setPriority(child.pid, options.nice);
  let output = '';
  child.stdout!.on('data', (d: Buffer) => {
    if (options.echo !== false) process.stdout.write(d);
    output += d.toString();
  });
  let stopped = false;
  const limit = setTimeout(
    () => {
      stopped = true;
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    },
    Math.max(0, options.deadline - performance.now()),
  );
  const code = (await exitedAfterOutput(child)) ?? 1; // null: a signal ended it
  clearTimeout(limit);
  const last = (name: string) => Number([...output.matchAll(new RegExp(`^ℹ ${name} (\\d+)$`, 'gm'))].at(-1)?.[1] ?? 0);
  return {
    code: stopped && code === 0 ? 1 : code,
    counts: { passed: last('pass'), failed: last('fail'), cancelled: last('cancelled'), skipped: last('skipped') },
    output,
    stopped,
  };
}
