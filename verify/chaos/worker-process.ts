/**
 * A real worker process: a `fencepost` command in its own Node process, whose `--events` lines are read as they
 * come. Pauses are real (SIGSTOP/SIGCONT), crashes are real (SIGKILL). Used by the tests, the chaos command and
 * the story replay.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { createInterface } from 'node:readline';
import path from 'node:path';
import type { FencepostEvent } from '../../lib/core/events';
import { faultArgs, type Faults } from './faults';

const ROOT = path.resolve(__dirname, '../..');
const CLI = path.join(ROOT, 'bin/fencepost.ts');

/** An event as the parent saw it: with the parent's monotonic time of arrival (one clock for all workers). */
export type SeenEvent = FencepostEvent & { readonly seenAtMs: number };

/** A child's event stream, followed as it arrives: what a test, the chaos command or a benchmark reads of a worker. */
export interface EventFollower {
  readonly events: SeenEvent[];
  /** Lines of stdout that are not events (the --json summary, `local`'s endpoints), with their arrival time. */
  readonly other: { readonly line: string; readonly seenAtMs: number }[];
  readonly stderr: string[];
  /** Resolves with the first event (already seen or future) matching the predicate; rejects on timeout or exit. */
  waitFor(pred: (e: SeenEvent) => boolean, timeoutMs?: number): Promise<SeenEvent>;
  /** Calls back on every event as it arrives, before the waiters: the place to act with no delay. */
  onEvent(listener: (e: SeenEvent) => void): void;
}

export interface WorkerProcess extends EventFollower {
  readonly child: ChildProcess;
  /** Resolves with the exit code (null if killed by a signal). */
  readonly exited: Promise<number | null>;
}

/** How to start a worker: extra environment (LD_PRELOAD for libfaketime, …) and the faults the harness injects. */
export interface WorkerOptions {
  readonly env?: Record<string, string>;
  /** Injected from outside the product, by a preload module (verify/chaos/faults.ts). */
  readonly faults?: Faults;
}

/**
 * Run the CLI with tsx in a child process, with the fault preload when faults are asked for.
 * The process leads its own process group, and its `kill` signals the whole group: the local Lambda environments a
 * workflow run starts (lib/local/lambda-runner.ts) are paused, continued and killed with it, as one holder.
 */
export function runCli(args: string[], options: WorkerOptions = {}): ChildProcess {
  const faults = faultArgs(options.faults);
  const child = spawn(process.execPath, ['--import', 'tsx', ...faults.nodeArgs, CLI, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...options.env, ...faults.env, NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const own = child.kill.bind(child);
  child.kill = (signal?: NodeJS.Signals | number) => {
    if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return own(signal);
    try {
      process.kill(-child.pid, signal ?? 'SIGTERM');
      return true;
    } catch {
      return own(signal);
    }
  };
  return child;
}

/** Start a `fencepost <args>` process that prints events (the caller includes --events) and follow them. */
export function startProcess(args: string[], options: WorkerOptions = {}): WorkerProcess {
  const child = runCli(args, options);
  const exited = exitedAfterOutput(child);
  return { child, exited, ...followEvents(child, exited) };
}

/**
 * The child's exit code (null if a signal ended it), once what it wrote has been read as well. Node emits 'exit'
 * while the child's stdout and stderr may still hold its last lines (its summary, say); 'close' waits for them, but
 * never comes while a grandchild (a local Lambda environment) holds a pipe open. So: 'exit', then the end of its
 * output, waiting at most `graceMs` for that.
 */
export async function exitedAfterOutput(child: ChildProcess, graceMs = 1_000): Promise<number | null> {
  if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
  await outputRead(child, graceMs);
  return child.exitCode;
}

/** Resolves once the child's stdout and stderr have ended (all read), or after `graceMs`, whichever comes first. */
async function outputRead(child: ChildProcess, graceMs: number): Promise<void> {
  const pipes = [child.stdout, child.stderr].filter((p) => p !== null).map((p) => finished(p).catch(() => undefined));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(pipes), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
  clearTimeout(timer);
}

/**
 * Follow a child's stdout as event lines (one JSON object with an `event` each, stamped with this process's
 * monotonic time of arrival) and its stderr as lines. `exited` settles when the child exits: a waiter still waiting
 * then is rejected, with what was seen.
 */
export function followEvents(child: ChildProcess, exited: Promise<unknown>, defaultTimeoutMs = 60_000): EventFollower {
  const events: SeenEvent[] = [];
  const other: { line: string; seenAtMs: number }[] = [];
  const stderr: string[] = [];
  const listeners: ((e: SeenEvent) => void)[] = [];
  const waiters: { pred: (e: SeenEvent) => boolean; resolve: (e: SeenEvent) => void }[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const seenAtMs = performance.now();
    let parsed: Record<string, unknown> | undefined;
    try {
      parsed = JSON.parse(line) as Record<string, unknown>;
    } catch {
      /* not JSON */
    }
    if (!parsed || typeof parsed.event !== 'string') return void other.push({ line, seenAtMs });
    const e = { ...(parsed as FencepostEvent), seenAtMs };
    events.push(e);
    for (const l of listeners) l(e);
    for (const w of [...waiters])
      if (w.pred(e)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(e);
      }
  });
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const seen = () => `saw: ${events.map((e) => e.event).join(', ')}; stderr: ${stderr.slice(-5).join(' | ')}`;
  return {
    events,
    other,
    stderr,
    onEvent: (l) => void listeners.push(l),
    waitFor(pred, timeoutMs = defaultTimeoutMs) {
      const hit = events.find(pred);
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for an event; ${seen()}`)), timeoutMs);
        waiters.push({
          pred,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
        // 'exit' can come before the last lines are read: give up only once the output has been read too.
        void exited
          .then(() => outputRead(child, 1_000))
          .then(() => {
            clearTimeout(timer);
            reject(new Error(`the process exited before the event; ${seen()}`));
          });
      });
    },
  };
}
