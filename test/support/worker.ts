/**
 * A real worker process: `fencepost run` in its own Node process, whose events (--events) are read line by line.
 * Pauses are real (SIGSTOP/SIGCONT), crashes are real (SIGKILL).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import path from 'node:path';
import type { FencepostEvent } from '../../lib/core/events';
import type { Namespace } from './stack';

const ROOT = path.resolve(__dirname, '../..');
export const CLI = path.join(ROOT, 'bin/fencepost.ts');

export interface WorkerProcess {
  readonly child: ChildProcess;
  readonly events: FencepostEvent[];
  readonly stderr: string[];
  /** Resolves with the first event (already seen or future) matching the predicate. */
  waitFor(pred: (e: FencepostEvent) => boolean, timeoutMs?: number): Promise<FencepostEvent>;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

/** Run the CLI with tsx in a child process; extra env (e.g. FENCEPOST_FAULT) is passed through. */
export function runCli(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', CLI, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function storeArgs(ns: Namespace): string[] {
  return ['--dynamodb-endpoint', ns.endpoints.dynamodb, '--s3-endpoint', ns.endpoints.s3, '--table-prefix', ns.prefix, '--bucket', ns.bucket];
}

export function startWorker(ns: Namespace, args: string[], env: Record<string, string> = {}): WorkerProcess {
  const child = runCli(['run', ...storeArgs(ns), '--events', ...args], env);
  const events: FencepostEvent[] = [];
  const stderr: string[] = [];
  const waiters: { pred: (e: FencepostEvent) => boolean; resolve: (e: FencepostEvent) => void }[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    let e: FencepostEvent;
    try { e = JSON.parse(line) as FencepostEvent; } catch { return; }
    events.push(e);
    for (const w of [...waiters]) if (w.pred(e)) { waiters.splice(waiters.indexOf(w), 1); w.resolve(e); }
  });
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  return {
    child, events, stderr, exited,
    waitFor(pred, timeoutMs = 60_000) {
      const hit = events.find(pred);
      if (hit) return Promise.resolve(hit);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for an event; saw: ${events.map((e) => e.event).join(', ')}; stderr: ${stderr.join(' | ')}`)), timeoutMs);
        waiters.push({ pred, resolve: (e) => { clearTimeout(timer); resolve(e); } });
        void exited.then(() => setTimeout(() => { clearTimeout(timer); reject(new Error(`worker exited before the event; saw: ${events.map((e) => e.event).join(', ')}; stderr: ${stderr.join(' | ')}`)); }, 50));
      });
    },
  };
}
