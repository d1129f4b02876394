/**
 * One `node --test` run over some files, as `npm test` runs each batch (test/run.ts): the runner's output passes
 * through, its summary's counts are read back, and a hang fails the run instead of holding it open.
 *
 * - Each test gets `testLimitMs` unless it sets its own `timeout`.
 * - Once a file's tests have ended, its process exits even if something it started is still polling
 *   (--test-force-exit): a failed assertion that left a campaign renewing cannot keep the file, and the run, open.
 * - The whole batch stops at `deadline` (on this process's monotonic clock): the runner is sent SIGTERM, on which it
 *   names the test it interrupts and stops that file's process; SIGKILL follows if it does not exit.
 */
import { spawn } from 'node:child_process';

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
  /** performance.now() at which the batch is stopped, whatever it is doing. */
  readonly deadline: number;
  /** Pass the runner's output through to this process's stdout (the run's log). @default true */
  readonly echo?: boolean;
}

export interface BatchResult {
  readonly code: number;
  readonly counts: Counts;
  /** What the runner printed. */
  readonly output: string;
  /** The deadline came first and the batch was stopped. */
  readonly stopped: boolean;
}

export async function runBatch(files: string[], options: BatchOptions): Promise<BatchResult> {
  const args = ['--import', 'tsx', '--test', '--test-concurrency=1', `--test-timeout=${options.testLimitMs}`, '--test-force-exit', ...files];
  // Not as a child of another runner (runner.test.ts runs this inside a test): that one's protocol variable would
  // make this runner report to it instead of printing.
  const inherited = { ...process.env };
  delete inherited.NODE_TEST_CONTEXT;
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...inherited, ...options.env, NODE_NO_WARNINGS: '1' },
  });
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
  const code: number = await new Promise((resolve) => child.on('exit', (c, sig) => resolve(c ?? (sig ? 1 : 0))));
  clearTimeout(limit);
  const last = (name: string) => Number([...output.matchAll(new RegExp(`^ℹ ${name} (\\d+)$`, 'gm'))].at(-1)?.[1] ?? 0);
  return {
    code: stopped && code === 0 ? 1 : code,
    counts: { passed: last('pass'), failed: last('fail'), cancelled: last('cancelled'), skipped: last('skipped') },
    output,
    stopped,
  };
}
