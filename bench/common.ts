/**
 * What every benchmark shares: statistics (medians with min–max over rounds), rotating order, tables, the shared
 * embedded stack with throw-away namespaces, `fencepost run` child processes whose event lines are timestamped on
 * arrival in THIS process (one machine, one monotonic clock), and a /proc sampler for resident memory.
 *
 * Benchmarks are not tests: nothing here asserts; every figure is printed next to its target and the reader judges.
 * The machine is shared and noisy, so a comparison is always two things measured side by side in one run, repeated.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DeleteTableCommand } from '@aws-sdk/client-dynamodb';
import { DeleteBucketCommand, DeleteObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { billingTables, type BillingTables } from '../apps/billing/schema';
import { provisionBilling as provision } from '../verify/billing-stores';
import { localClients, type Clients, type Endpoints } from '../lib/core/aws/clients';
import { startEmbeddedStack, type EmbeddedStack } from '../lib/local/stack';
import { followEvents, type EventFollower, type SeenEvent } from '../verify/chaos/worker-process';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export const ROOT = path.resolve(__dirname, '..');
const CLI = path.join(ROOT, 'bin/fencepost.ts');

// ---------------------------------------------------------------- statistics and formatting

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
};

export interface Stat {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly n: number;
}
export const stat = (xs: readonly number[]): Stat => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), n: xs.length });

/** `1,234 (1,100–1,300)`, or just the value for a single sample. */
export function fmtStat(s: Stat, digits = 0, unit = ''): string {
  const f = (x: number) => fmt(x, digits);
  return s.n <= 1 ? `${f(s.median)}${unit}` : `${f(s.median)}${unit} (${f(s.min)}–${f(s.max)})`;
}

export function fmt(x: number, digits = 0): string {
  if (!Number.isFinite(x)) return String(x);
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export const mb = (kb: number) => kb / 1024;

/** Round r's order: the list rotated by r, so no variant always goes first (or last). */
export function rotate<T>(items: readonly T[], round: number): T[] {
  return items.map((_, i) => items[(i + round) % items.length]);
}

/** A plain-text table: the first column left-aligned, the others right-aligned unless `left` lists them. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[], left: readonly number[] = [0]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (left.includes(i) ? c.padEnd(widths[i]) : c.padStart(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

// ---------------------------------------------------------------- the suite's shape

export interface Verdict {
  readonly measurement: string;
  readonly what: string;
  readonly figure: string;
  readonly target: string;
  /** true met, false not met, undefined: informational (no target, or not measurable here). */
  readonly met: boolean | undefined;
}

export interface Report {
  readonly name: string;
  readonly title: string;
  /** Printed blocks: tables and notes. */
  readonly blocks: string[];
  readonly verdicts: Verdict[];
  /** Raw figures, for --out. */
  readonly data: Record<string, unknown>;
}

export interface BenchContext {
  readonly quick: boolean;
  /** Rounds for every comparison (≥ 3 in the full mode, 1 in --quick). */
  readonly rounds: number;
  /** The shared embedded stack, started on first use (its start-up is timed once). */
  stack(): Promise<SharedStack>;
  log(line: string): void;
  /** Options a single measurement accepts (e.g. --invoices for write-path). */
  readonly options: Record<string, string | undefined>;
  /** Reports of the measurements already run in this suite, by name (later ones may reuse their figures). */
  readonly results: Map<string, Report>;
}

export interface Measurement {
  readonly name: string;
  readonly title: string;
  /** Roughly how long the full mode takes, for the suite's plan line. */
  readonly fullMinutes: number;
  run(ctx: BenchContext): Promise<Report>;
}

export function newReport(name: string, title: string): Report {
  return { name, title, blocks: [], verdicts: [], data: {} };
}

// ---------------------------------------------------------------- the shared stack and throw-away namespaces

export interface Namespace {
  readonly prefix: string;
  readonly bucket: string;
  readonly tables: BillingTables;
  storeArgs(): string[];
}

export class SharedStack {
  private constructor(
    readonly endpoints: Endpoints,
    readonly clients: Clients,
    readonly startupSeconds: number,
    readonly jvmPid: number | undefined,
    private readonly stopStack: () => Promise<void>,
    /** DynamoDB Local itself, behind the stack's conflict proxy: where a measurement puts a proxy of its own. */
    readonly rawDynamoDb: string = endpoints.dynamodb,
  ) {}

  /** Start an embedded stack in this process (DynamoDB Local's JVM as a child, the S3 endpoint in-process). */
  static async start(): Promise<SharedStack> {
    const t0 = performance.now();
    // A 2 GB cap: DynamoDB Local holds every item in memory, and bench 10 writes nights of a million invoices.
    const stack: EmbeddedStack = await startEmbeddedStack({ dynamodbHeapMb: 2048 });
    const startupSeconds = (performance.now() - t0) / 1000;
    return new SharedStack(
      stack.endpoints,
      localClients(stack.endpoints),
      startupSeconds,
      stack.dynamodb.pid,
      () => stack.stop(),
      stack.dynamodb.endpoint,
    );
  }

  /** Use a stack another process runs (`fencepost local`); stopping it is that process's business. */
  static attach(endpoints: Endpoints, startupSeconds: number, jvmPid: number | undefined): SharedStack {
    return new SharedStack(endpoints, localClients(endpoints), startupSeconds, jvmPid, async () => undefined);
  }

  /** Fresh tables and a bucket, provisioned from the one schema (as `fencepost run` would). */
  async namespace(tag: string): Promise<Namespace> {
    const id = `${tag}${randomBytes(3).toString('hex')}`.toLowerCase().replace(/[^a-z0-9]/g, '');
    const prefix = `b${id}-`;
    const bucket = `b${id}`;
    await provision(this.clients.raw, this.clients.s3, prefix, bucket);
    const endpoints = this.endpoints;
    return {
      prefix,
      bucket,
      tables: billingTables(prefix),
      storeArgs: () => ['--dynamodb-endpoint', endpoints.dynamodb, '--s3-endpoint', endpoints.s3, '--table-prefix', prefix, '--bucket', bucket],
    };
  }

  /** Delete a namespace's tables and objects, so DynamoDB Local's memory and the S3 map do not grow run after run. */
  async drop(ns: Namespace): Promise<void> {
    for (const t of Object.values(ns.tables)) {
      await this.clients.raw.send(new DeleteTableCommand({ TableName: t })).catch(() => undefined);
    }
    try {
      for (;;) {
        const list = await this.clients.s3.send(new ListObjectsV2Command({ Bucket: ns.bucket }));
        for (const o of list.Contents ?? []) await this.clients.s3.send(new DeleteObjectCommand({ Bucket: ns.bucket, Key: o.Key! }));
        if (!list.IsTruncated) break;
      }
      await this.clients.s3.send(new DeleteBucketCommand({ Bucket: ns.bucket }));
    } catch {
      /* best effort */
    }
  }

  async stop(): Promise<void> {
    this.clients.destroy();
    await this.stopStack();
  }
}

// ---------------------------------------------------------------- `fencepost run` (and `local`) child processes

/** An event line, with the time it arrived in this process (performance.now(), this process's monotonic clock). */
export type Arrived = SeenEvent;

export interface Child extends EventFollower {
  readonly child: ChildProcess;
  readonly pid: number;
  /** performance.now() just before spawn. */
  readonly spawnedAt: number;
  /** Resolves with [exit code, signal] and the arrival time of the exit. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; atMs: number }>;
  /** The --json summary, once the process has exited. */
  summary(): Record<string, unknown> | undefined;
}

export function spawnCli(args: readonly string[], env: Record<string, string> = {}, nodeArgs: readonly string[] = []): Child {
  return spawnScript(CLI, args, env, nodeArgs);
}

/** Any TypeScript script of this project, run as the CLI is: `node --import tsx <script> ...args`. */
export function spawnScript(script: string, args: readonly string[] = [], env: Record<string, string> = {}, nodeArgs: readonly string[] = []): Child {
  const spawnedAt = performance.now();
  // Node arguments after tsx's loader, so a TypeScript preload (verify/chaos/fault-preload.ts) can be among them.
  const child = spawn(process.execPath, ['--import', 'tsx', ...nodeArgs, script, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, NODE_NO_WARNINGS: '1', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = once(child, 'exit').then(([code, signal]) => ({
    code: code as number | null,
    signal: signal as NodeJS.Signals | null,
    atMs: performance.now(),
  }));
  const follower = followEvents(child, exited, 120_000);
  return {
    child,
    pid: child.pid!,
    spawnedAt,
    exited,
    ...follower,
    summary() {
      for (const o of [...follower.other].reverse()) {
        try {
          const j = JSON.parse(o.line) as Record<string, unknown>;
          if ('outcome' in j) return j;
        } catch {
          /* next */
        }
      }
      return undefined;
    },
  };
}

/** SIGKILL a child we started, by its pid, if it is still running. */
export function kill(c: Child, sig: NodeJS.Signals = 'SIGKILL'): void {
  if (c.child.exitCode === null && c.child.signalCode === null) {
    try {
      process.kill(c.pid, sig);
    } catch {
      /* gone */
    }
  }
}

/**
 * A fresh stack in its own process (`fencepost local`: the JVM and the S3 endpoint, nothing else), so that each
 * process's memory belongs to one purpose. Stopped with SIGTERM (the command stops its stack on it).
 */
export async function withLocalStack<T>(body: (stack: SharedStack, local: Child) => Promise<T>): Promise<T> {
  const local = spawnCli(['local']);
  try {
    const deadline = Date.now() + 60_000;
    let endpoints: Endpoints | undefined;
    while (!endpoints) {
      const line = local.other.find((o) => o.line.includes('dynamodbEndpoint'));
      if (line) {
        const j = JSON.parse(line.line) as { dynamodbEndpoint: string; s3Endpoint: string };
        endpoints = { dynamodb: j.dynamodbEndpoint, s3: j.s3Endpoint };
        break;
      }
      if (local.child.exitCode !== null || Date.now() > deadline) throw new Error(`fencepost local did not start: ${local.stderr.join(' | ')}`);
      await sleep(50);
    }
    const startup = (local.other.find((o) => o.line.includes('dynamodbEndpoint'))!.seenAtMs - local.spawnedAt) / 1000;
    const stack = SharedStack.attach(endpoints, startup, jvmChildOf(local.pid));
    try {
      return await body(stack, local);
    } finally {
      stack.clients.destroy();
    }
  } finally {
    kill(local, 'SIGTERM');
    const t = setTimeout(() => kill(local, 'SIGKILL'), 10_000);
    await local.exited;
    clearTimeout(t);
  }
}

/** Run a child to its exit and fail loudly on a non-zero code. */
export async function runToEnd(c: Child, what: string): Promise<{ code: number | null; atMs: number }> {
  const r = await c.exited;
  if (r.code !== 0) throw new Error(`${what} exited ${r.code ?? r.signal}: ${c.stderr.slice(-8).join('\n')}`);
  return r;
}

// ---------------------------------------------------------------- resident memory from /proc

interface ProcMem {
  readonly rssKb: number;
  readonly hwmKb: number;
}

function procMem(pid: number): ProcMem | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+)/.exec(s);
    const hwm = /VmHWM:\s+(\d+)/.exec(s);
    if (!rss || !hwm) return undefined; // a zombie has no memory lines
    return { rssKb: Number(rss[1]), hwmKb: Number(hwm[1]) };
  } catch {
    return undefined;
  }
}

/** Children of pid (from /proc/<pid>/task/<pid>/children, else a scan of /proc/* /stat). */
export function childrenOf(pid: number): number[] {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    const out: number[] = [];
    for (const d of fs.readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const stat = fs
          .readFileSync(`/proc/${d}/stat`, 'utf8')
          .replace(/^.*\) /s, '')
          .split(' ');
        if (Number(stat[1]) === pid) out.push(Number(d));
      } catch {
        /* gone */
      }
    }
    return out;
  }
}

function isDynamoDbLocal(pid: number): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('DynamoDBLocal.jar');
  } catch {
    return false;
  }
}

/** The DynamoDB Local JVM started by pid (a direct child), if any. */
export function jvmChildOf(pid: number): number | undefined {
  return childrenOf(pid).find(isDynamoDbLocal);
}

/**
 * Samples VmRSS (and VmHWM, the kernel's own high-water mark) of named processes every ~100 ms. The peak of the SUM
 * is taken over simultaneous samples, so it is what the machine had to hold at once.
 */
export class MemorySampler {
  private timer: NodeJS.Timeout | undefined;
  readonly peakRssKb: Record<string, number> = {};
  readonly lastHwmKb: Record<string, number> = {};
  peakSumKb = 0;
  samples = 0;
  private marks: { label: string; atMs: number; peakSumKb: number; peakRssKb: Record<string, number> }[] = [];

  /** A name may stand for several processes (a workflow run's function environments): their RSS is summed. */
  constructor(
    private readonly pids: () => Record<string, number | readonly number[] | undefined>,
    private readonly periodMs = 100,
  ) {}

  start(): this {
    const tick = () => {
      let sum = 0;
      for (const [name, pid] of Object.entries(this.pids())) {
        const mems = (pid === undefined ? [] : typeof pid === 'number' ? [pid] : pid).map(procMem).filter((m) => m !== undefined);
        if (mems.length === 0) continue;
        const rssKb = mems.reduce((n, m) => n + m.rssKb, 0);
        sum += rssKb;
        this.peakRssKb[name] = Math.max(this.peakRssKb[name] ?? 0, rssKb);
        this.lastHwmKb[name] = Math.max(
          this.lastHwmKb[name] ?? 0,
          mems.reduce((n, m) => n + m.hwmKb, 0),
        );
      }
      this.peakSumKb = Math.max(this.peakSumKb, sum);
      this.samples++;
    };
    tick();
    this.timer = setInterval(tick, this.periodMs);
    return this;
  }

  /** Remember the peaks so far under a label (e.g. "night" at the completed event), then keep sampling. */
  mark(label: string): void {
    this.marks.push({ label, atMs: performance.now(), peakSumKb: this.peakSumKb, peakRssKb: { ...this.peakRssKb } });
  }

  markOf(label: string) {
    return this.marks.find((m) => m.label === label);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}

// ---------------------------------------------------------------- machine description for the report

export function machine(): string {
  const cpus = os.cpus();
  return `${cpus.length} × ${cpus[0]?.model.trim() ?? 'cpu'}, ${fmt(os.totalmem() / 2 ** 30, 1)} GiB RAM, ${os.type()} ${os.release()}, Node ${process.version}`;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A date no other run in this process used (so a night is never found DONE by accident). */
let dayCounter = 0;
export function freshDate(): string {
  const d = new Date(Date.UTC(2031, 0, 1) + (dayCounter++ + Math.floor(Math.random() * 3000)) * 86_400_000);
  return d.toISOString().slice(0, 10);
}
