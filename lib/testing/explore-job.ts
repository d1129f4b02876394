/**
 * Explore your own job the way Fencepost explores itself: your code (a `withLease` script, its fenced writes and its
 * side effects) run by several workers on the in-memory stores and one virtual clock, under the same seeded scheduler
 * the repository's explorer uses. Every store call a worker makes is a step the scheduler may fault: a pause (the
 * worker stands still, then goes on believing what it believed: the stale holder), a crash (it never runs again, and
 * its lease lapses), a lost or late answer, a throttle, a transaction conflict. A schedule is a function of its seed:
 * the same seed gives the same trace and digest, and a failing one prints the line that replays it.
 *
 * Your plain writes (`worker.stores.tables`) and every method call on your fakes are steps too, each logged with the
 * worker's own clock reading; the faults weigh a pause at them (the gap right after a passed check, which makes a
 * stale holder).
 *
 * What it checks: no holder acts past its stop time (a plain write or a fake call sent past the stop time its own
 * readings give, after another worker claimed: acts.ts, which says what the fence and an idempotency key cover), every
 * item recorded through a fence is recorded with one content (a redo by the next holder must write what the first
 * wrote: derive each item from its key), the job finishes once the faults end (a worker still alive completes it), and
 * your own invariant over what the stores and your fakes hold at the end. It has no global state and no real timer:
 * it runs inside node:test, vitest or jest.
 */
import { createHash } from 'node:crypto';
import { VirtualClock, type Clock } from '../core/clock';
import { prng } from '../core/prng';
import type { JobStore } from '../core/store/jobs';
import type { LockStore } from '../core/store/lock';
import type { ManifestStore } from '../core/store/manifest';
import { actsPastStopTime } from './acts';
import { CallLog, LockHistory } from './call-log';
import { memoryStores } from './memory-stores';
import { ActLog, oneContent, steeredPlan } from './kit';
import { Scheduler, type FaultPlan, type PlacedFault } from './scheduler';
import type { PlainTables } from './tables';

/** What one worker of a schedule is given: the stores as it reaches them (each call a step), its clock, its fakes. */
export interface JobWorker<F> {
  /** The worker's name: `worker-1`, `worker-2`, … (use it as the lease's holder). */
  readonly name: string;
  /**
   * The lock and job stores, the manifest store, and your own tables written plainly (`tables.put(table, item)`, as a
   * DocumentClient's PutCommand: not fenced), shared by every worker, each call a step of the scheduler.
   */
  readonly stores: { readonly locks: LockStore; readonly jobs: JobStore; readonly manifests: ManifestStore; readonly tables: PlainTables };
  /** This worker's clock (its pauses, its crash): give it to `withLease` and to every fence. */
  readonly clock: Clock;
  /** A seeded jitter source, for the retries' backoff (`random` in the deps). */
  readonly random: () => number;
  /**
   * What `fakes()` made for this schedule (a pretend mail API, …), shared by every worker. Each method call on it (and
   * on the fakes of a plain object of fakes, `{ mail, payments }`) is a step of the scheduler, named `fakes.<method>`
   * (`fakes.mail.send`), and answers through a promise, as a call to the real service would: await it.
   */
  readonly fakes: F;
}

/** What your check is given once a schedule has run. */
export interface JobEnd<F> {
  /** The job table's name in the memory stores: where fences, job rows and effect records are. */
  readonly jobsTable: string;
  /** Every item of a table, as stored (your items' table, or `jobsTable`). */
  items(table: string): Record<string, unknown>[];
  /** The schedule's fakes, as the workers left them. */
  readonly fakes: F;
  /** How many runs of the job resolved (a crashed run is counted nowhere). */
  readonly finished: number;
  /** The runs that threw, each by its error's name. */
  readonly failed: readonly string[];
}

/** What to explore. */
export interface ExploreJobOptions<F> {
  /** One worker's run of your job (a `withLease(...)` script): resolves when it is done, throws when it gives up. */
  readonly job: (worker: JobWorker<F>) => Promise<unknown>;
  /** The fakes one schedule shares between its workers (a pretend provider that records its calls). */
  readonly fakes?: () => F;
  /** Your invariants over the end of a schedule: one sentence per violation. */
  readonly check?: (end: JobEnd<F>) => readonly string[];
  /** How many workers run the job (the first at 0, the others at seeded times within `startsWithinMs`). @defaultValue 2 */
  readonly workers?: number;
  /** The later workers start at seeded times within this many virtual ms of the first. @defaultValue 1_000 */
  readonly startsWithinMs?: number;
  /**
   * How many times a worker runs the job: again a second after it threw or its process crashed, as the job's own
   * scheduler (a queue, a retry policy) would. @defaultValue 3
   */
  readonly attempts?: number;
  /** The first seed; schedule i runs seed + i. @defaultValue 1 */
  readonly seed?: number;
  /** How many schedules to run. @defaultValue 100 */
  readonly schedules?: number;
  /**
   * The faults: `chance` at each step, at most `budget` a schedule, pauses up to `maxPauseMs`, none after `windowMs`.
   * Choose a pause longer than your lease, so a paused holder wakes up after a takeover.
   * @defaultValue chance 0.1, budget 3, maxPauseMs 25_000, windowMs 30_000, lateMs 500
   */
  readonly faults?: Partial<FaultPlan>;
  /** No schedule runs past this virtual time. @defaultValue windowMs + maxPauseMs + 120_000 */
  readonly horizonMs?: number;
  /**
   * Faults placed instead of drawn, to make a case happen in every schedule: each lands on the nth call of its method
   * (a store method, `tables.put`, `fakes.send`) by the workers its `actor` names, and no fault is drawn at random.
   */
  readonly placed?: readonly PlacedFault[];
  /** Each of your tables' partition key attribute, for a plain put (`pk` for a table not named). */
  readonly keys?: Readonly<Record<string, string>>;
}

/** A schedule that broke something. */
export interface JobViolation {
  /** The schedule's seed. */
  readonly seed: number;
  /** What broke: the built-in checks' findings, then yours. */
  readonly violations: readonly string[];
  /** The schedule's events, one line each: `<virtual ms> <worker> <store call> [FAULT …]`. */
  readonly trace: readonly string[];
  /** The options that replay it alone: `{ seed, schedules: 1 }`. */
  readonly replay: string;
}

/** What `exploreJob` found. */
export interface ExploreJobResult {
  /** How many schedules ran. */
  readonly schedules: number;
  /** The schedules that broke something, in seed order; empty when all passed. */
  readonly violations: readonly JobViolation[];
  /** Each fault injected, by `kind method`: how often. */
  readonly faults: Readonly<Record<string, number>>;
  /** sha256 of every schedule's trace, in order: the same seed and options give the same digest. */
  readonly digest: string;
}

/** How long after a failed or crashed attempt a worker runs the job again. */
const RETRY_MS = 1_000;

const DEFAULT_FAULTS: FaultPlan = { chance: 0.1, budget: 3, maxPauseMs: 25_000, windowMs: 30_000, lateMs: 500 };

/**
 * Run `schedules` schedules of your job from `seed`, each with fresh stores, clock and fakes, and check each.
 * @returns what broke, with the seed that replays it; empty `violations` when every schedule passed
 */
export async function exploreJob<F = undefined>(options: ExploreJobOptions<F>): Promise<ExploreJobResult> {
  return explored(options.seed ?? 1, options.schedules ?? 100, 'exploreJob', (seed) => runSchedule(options, seed));
}

/**
 * Run `count` schedules from `first`, hashing every trace in order, counting the faults and keeping each schedule that
 * broke something with the call (`explorer`'s options with its seed) that replays it alone.
 */
export async function explored(
  first: number,
  count: number,
  explorer: string,
  run: (seed: number) => Promise<{ readonly trace: readonly string[]; readonly violations: readonly string[]; readonly faults: readonly string[] }>,
): Promise<ExploreJobResult> {
  const hash = createHash('sha256');
  const violations: JobViolation[] = [];
  const faults: Record<string, number> = {};
  for (let seed = first; seed < first + count; seed++) {
    const r = await run(seed);
    hash.update(`${seed}\n${r.trace.join('\n')}\n`);
    for (const f of r.faults) faults[f] = (faults[f] ?? 0) + 1;
    if (r.violations.length > 0)
      violations.push({ seed, violations: r.violations, trace: r.trace, replay: `${explorer}({ ...options, seed: ${seed}, schedules: 1 })` });
  }
  return { schedules: count, violations, faults, digest: hash.digest('hex') };
}

async function runSchedule<F>(options: ExploreJobOptions<F>, seed: number) {
  const fakes = (options.fakes?.() ?? undefined) as F;
  const plan = steeredPlan(DEFAULT_FAULTS, fakes, options.faults);
  const random = prng(seed);
  const clock = new VirtualClock();
  let restart: (actor: ReturnType<Scheduler['actor']>) => number | undefined = () => undefined;
  const placed = options.placed && { faults: options.placed };
  const scheduler = new Scheduler(clock, random, plan, (actor) => restart(actor), undefined, placed);
  const { locks, jobs, tables, manifests } = memoryStores(clock, { keys: options.keys });
  const jobsTable = jobs.table;
  const violations: string[] = [];
  // The outside view the stop-time check reads: each worker's store calls on its own clock, the lock writes applied,
  // and its acts (plain writes, fake calls) as they left it.
  const calls = new CallLog(clock);
  const lockWrites = new LockHistory(clock);
  const acts = new ActLog(scheduler, clock);
  // Every put through a fence: a redo must send what the first holder recorded.
  const observed = oneContent(violations)(jobs);
  const workers = options.workers ?? 2;
  const attempts = options.attempts ?? 3;
  const outcomes: string[] = [];
  const starts = prng(seed + 101);
  const actors: ReturnType<Scheduler['actor']>[] = [];
  const attemptOf = new Map<ReturnType<Scheduler['actor']>, { readonly i: number; readonly attempt: number }>();
  // Workers started or due to start, not yet ended: the schedule is over when none is left.
  let pending = 0;
  // A worker whose job threw, or whose process crashed, runs the job again (as the job's scheduler, a queue or a
  // retry policy, would run it), a second later, up to `attempts` times in all.
  const again = (i: number, attempt: number): number | undefined => {
    if (attempt >= attempts) return undefined;
    pending++;
    clock.after(RETRY_MS, () => start(i, attempt + 1));
    return RETRY_MS;
  };
  const start = (i: number, attempt: number) => {
    const name = attempt === 1 ? `worker-${i}` : `worker-${i}#${attempt}`;
    const actor = scheduler.actor(name, () => 0.5);
    actors.push(actor);
    attemptOf.set(actor, { i, attempt });
    scheduler.log(`${name} starts`);
    const worker: JobWorker<F> = {
      name,
      stores: {
        locks: calls.observe(
          actor,
          scheduler.wrap(locks, actor, (m, a, r) => lockWrites.record(m, a, r)),
        ),
        jobs: calls.observe(actor, scheduler.wrap(observed, actor)),
        manifests: scheduler.wrap(manifests, actor),
        tables: acts.tablesFor(tables, actor),
      },
      clock: actor,
      random: prng(seed * 31 + i * 7 + attempt),
      fakes: acts.fakesFor(fakes, actor),
    };
    // Through a promise, so a job that throws before its first await fails its run, not the schedule.
    Promise.resolve()
      .then(() => options.job(worker))
      .then(
        () => {
          outcomes.push('done');
          actor.outcome = 'done';
          scheduler.log(`${name} done`);
          pending--;
        },
        (err: Error) => {
          outcomes.push(err.name);
          actor.outcome = err.name;
          scheduler.log(`${name} ends with ${err.name}: ${err.message}`);
          again(i, attempt);
          pending--;
        },
      );
  };
  restart = (actor) => {
    const at = attemptOf.get(actor);
    pending--;
    return at === undefined ? undefined : again(at.i, at.attempt);
  };
  pending++;
  start(1, 1);
  for (let i = 2; i <= workers; i++) {
    const at = Math.floor(starts() * (options.startsWithinMs ?? 1_000));
    pending++;
    clock.after(at, () => start(i, 1));
  }
  const horizon = options.horizonMs ?? plan.windowMs + plan.maxPauseMs + 120_000;
  const ended = await scheduler.run(() => pending === 0, horizon, 50_000);
  if (ended === 'turns') violations.push('the schedule hit its turn limit: a worker loops without time passing');
  const finished = outcomes.filter((o) => o === 'done').length;
  const alive = actors.filter((a) => !a.crashed && a.outcome === 'running');
  if (finished === 0 && alive.length > 0)
    violations.push(`no worker finished the job by ${horizon} ms, though ${alive.map((a) => a.name).join(', ')} still ran`);
  violations.push(...actsPastStopTime(acts.acts, calls.calls, lockWrites));
  const end: JobEnd<F> = {
    jobsTable,
    items: (table) => jobs.dump(table),
    fakes,
    finished,
    failed: outcomes.filter((o) => o !== 'done'),
  };
  violations.push(...(options.check?.(end) ?? []));
  scheduler.log(`end: ${finished} of ${workers} finished`);
  return { trace: scheduler.trace, violations, faults: scheduler.faults.map((f) => `${f.kind} ${f.point.replace(/@\d+$/, '')}`) };
}
