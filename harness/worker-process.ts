/**
 * A real worker process: a `fencepost` command in its own Node process, whose `--events` lines are read as they
 * come. Pauses are real (SIGSTOP/SIGCONT), crashes are real (SIGKILL). Used by the tests, the chaos command and
 * the story replay.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import path from 'node:path';
import type { FencepostEvent } from '../core/events';
import { faultArgs, type Faults } from './faults';

const ROOT = path.resolve(__dirname, '..');
const CLI = path.join(ROOT, 'bin/fencepost.ts');

/** An event as the parent saw it: with the parent's monotonic time of arrival (one clock for all workers). */
export type SeenEvent = FencepostEvent & { readonly seenAtMs: number };

export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly events: SeenEvent[];
  readonly stderr: string[];
  /** Resolves with the first event (already seen or future) matching the predicate. */
  waitFor(pred: (e: SeenEvent) => boolean, timeoutMs?: number): Promise<SeenEvent>;
  /** Resolves with the exit code (null if killed by a signal). */
  readonly exited: Promise<number | null>;
  /** Calls back on every event as it arrives. */
  onEvent(listener: (e: SeenEvent) => void): void;
}

/** How to start a worker: extra environment (LD_PRELOAD for libfaketime, …) and the faults the harness injects. */
export interface WorkerOptions {
  readonly env?: Record<string, string>;
  /** Injected from outside the product, by a preload module (harness/faults.ts). */
  readonly faults?: Faults;
}

/**
 * Run the CLI with tsx in a child process, with the fault preload when faults are asked for.
 * The process leads its own process group, and its `kill` signals the whole group: the local Lambda environments a
 * workflow run starts (local/lambda-runner.ts) are paused, continued and killed with it, as one holder.
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
  const events: SeenEvent[] = [];
  const stderr: string[] = [];
  const listeners: ((e: SeenEvent) => void)[] = [];
  const waiters: { pred: (e: SeenEvent) => boolean; resolve: (e: SeenEvent) => void }[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let e: SeenEvent;
    try {
      e = { ...(JSON.parse(line) as FencepostEvent), seenAtMs: performance.now() };
    } catch {
      return;
    }
    if (typeof e.event !== 'string') return;
    events.push(e);
    for (const l of listeners) l(e);
    for (const w of [...waiters])
      if (w.pred(e)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(e);
      }
  });
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return {
    child,
    events,
    stderr,
    exited,
    onEvent: (l) => listeners.push(l),
    waitFor(pred, timeoutMs = 60_000) {
      const hit = events.find(pred);
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out waiting for an event; saw: ${events.map((e) => e.event).join(', ')}; stderr: ${stderr.join(' | ')}`)),
          timeoutMs,
        );
        waiters.push({
          pred,
          resolve: (e) => {
            clearTimeout(timer);
            resolve(e);
          },
        });
        void exited.then(() =>
          setTimeout(() => {
            clearTimeout(timer);
            reject(new Error(`the process exited before the event; saw: ${events.map((e) => e.event).join(', ')}; stderr: ${stderr.join(' | ')}`));
          }, 50),
        );
      });
    },
  };
}
