/**
 * What-if (issue 13, item 3): the billing job on a DynamoDB lock item, with the operator's settings and faults,
 * answering: is there an overlap of two holders with the right to act (and how long), how many writes did the fence
 * refuse, how many invoices would be written twice with and without the fence, what is the longest time with no
 * owner, and when was the earliest safe takeover.
 *
 * The world: A holds the job from 0.0; every other worker named (B by default) polls the lock item and claims by
 * the chosen rule (lock-item.ts). A holder raises the fence first, reads the progress from the store, then writes
 * one batch of 99 invoices every `actMs`: it checks its stop time, builds the batch for 100 ms, sends it (a pause
 * in between makes a zombie write). It renews every renewMs; a refused write or renewal ends its tenure.
 * "Without the fence" counts, in the same run, the refused writes whose batch another holder also wrote.
 */
import { systemClock } from '../core/clock';
import { ConfigError } from '../core/errors';
import { WorkerClock } from './clocks';
import { Sim, type SimRow, type TimelineMark } from './engine';
import { Holder, overlapMs } from './holder';
import { CLAIM_RULES, DynamoLockItem, ItemClaimant, type ClaimRule } from './lock-item';
import { FencedStore } from './store';
import { Worker } from './worker';

/** A what-if's settings and faults. Durations in ms of true time. */
export interface WhatIfSettings {
  /** The lease length. */
  readonly leaseMs: number;
  /** How often a holder renews. */
  readonly renewMs: number;
  /** Stop time = sent_at + lease - margin. */
  readonly marginMs: number;
  /** How claimants claim. */
  readonly rule: ClaimRule;
  /** Pauses: worker, start (true time) and length. */
  readonly pauses: readonly { readonly worker: string; readonly at: number; readonly forMs: number }[];
  /** Crashes: worker and time (true time). */
  readonly crashes: readonly { readonly worker: string; readonly at: number }[];
  /** Clock errors: wall offset (ms) and monotonic rate error. */
  readonly clocks: readonly { readonly worker: string; readonly offsetMs: number; readonly rate: number }[];
  /** How often a claimant reads the lock item. @default 500 */
  readonly pollMs?: number;
  /** Batches in the job (99 invoices each). @default 60 */
  readonly batches?: number;
  /** A holder writes a batch every. @default 500 */
  readonly actMs?: number;
  /** Stop the run at. @default 120000 */
  readonly untilMs?: number;
}

/** The reference's settings (10 s lease, 3 s renewal, 2 s margin, clock-free) and A's 15 s freeze at 4 s. */
export const WHAT_IF_DEFAULTS: WhatIfSettings = {
  leaseMs: 10_000,
  renewMs: 3_000,
  marginMs: 2_000,
  rule: 'clock-free',
  pauses: [{ worker: 'A', at: 4_000, forMs: 15_000 }],
  crashes: [],
  clocks: [],
};

const INVOICES_PER_BATCH = 99;
const BUILD_MS = 100;

/**
 * The lease's own relations, one sentence each: a margin below the lease, and a renewal period below lease − margin
 * (a renewal at or after the stop time comes too late: the holder gives the lease up between renewals).
 */
export function leaseRelationProblems(w: Pick<WhatIfSettings, 'leaseMs' | 'renewMs' | 'marginMs'>): string[] {
  const p: string[] = [];
  const sec = (ms: number) => `${ms / 1000} s`;
  if (w.marginMs >= w.leaseMs) {
    p.push(`--margin (${sec(w.marginMs)}) must be below --lease (${sec(w.leaseMs)}): the stop time would come at or before the send`);
    if (w.renewMs >= w.leaseMs)
      p.push(`--renew (${sec(w.renewMs)}) must be below --lease (${sec(w.leaseMs)}): the lease would run out between renewals`);
  } else if (w.renewMs >= w.leaseMs - w.marginMs)
    p.push(
      `--renew (${sec(w.renewMs)}) must be below --lease − --margin (${sec(w.leaseMs)} − ${sec(w.marginMs)} = ${sec(w.leaseMs - w.marginMs)}): ` +
        'the stop time would come before the next renewal',
    );
  return p;
}

/** Every problem with the settings, one sentence each (the CLI prints one line per problem). */
function whatIfProblems(w: WhatIfSettings): string[] {
  const p: string[] = [];
  if (!(w.leaseMs > 0)) p.push(`--lease must be above 0, got ${w.leaseMs} ms`);
  if (!(w.renewMs > 0)) p.push(`--renew must be above 0, got ${w.renewMs} ms`);
  if (!(w.marginMs >= 0)) p.push(`--margin must be 0 or more, got ${w.marginMs} ms`);
  p.push(...leaseRelationProblems(w));
  if (!CLAIM_RULES.includes(w.rule)) p.push(`--rule must be one of ${CLAIM_RULES.join(', ')}, got ${JSON.stringify(w.rule)}`);
  return p;
}

/** What a what-if answers. */
export interface WhatIfAnswers {
  /** Total time two holders both had the right to act, ms, and each pair. */
  readonly overlapMs: number;
  /** Each pair of holders whose rights to act overlapped, and for how long. */
  readonly overlaps: readonly { readonly a: string; readonly b: string; readonly ms: number }[];
  /** Writes the fence refused (a zombie's). */
  readonly refusedWrites: number;
  /** Invoices written twice, with the fence. */
  readonly writtenTwiceWithFence: number;
  /** Invoices that would have been written twice without the fence (the refused writes another holder also made). */
  readonly writtenTwiceWithoutFence: number;
  /** The longest stretch with nobody holding the right to act, from 0 until the job is done (or the run ends). */
  readonly longestNoOwnerMs: number;
  /** For each holder that lost the lease without releasing: last renewal the item applied + lease, and the actual takeover. */
  readonly takeovers: readonly { readonly from: string; readonly to: string; readonly earliestSafeMs: number; readonly atMs: number }[];
  /** Every tenure: who held the lease with which token, from its claim to its stop time (or its end). */
  readonly holders: readonly { readonly worker: string; readonly token: number; readonly fromMs: number; readonly toMs: number }[];
  /** Whether the job reached DONE within the run. */
  readonly done: boolean;
  /** When it did. */
  readonly doneAtMs?: number;
}

/** A what-if's event table, timeline and answers. */
export interface WhatIfResult {
  /** The event table. */
  readonly rows: readonly SimRow[];
  /** The timeline's bars and points. */
  readonly marks: readonly TimelineMark[];
  /** The answers. */
  readonly answers: WhatIfAnswers;
}

/** Run one what-if. @throws ConfigError listing every problem with the settings */
export function whatIf(w: WhatIfSettings, seed = 1): WhatIfResult {
  const problems = whatIfProblems(w);
  if (problems.length > 0) throw new ConfigError(problems);
  const sim = new Sim(seed);
  const item = new DynamoLockItem(sim);
  const store = new FencedStore(sim);
  const timing = { leaseMs: w.leaseMs, renewMs: w.renewMs, marginMs: w.marginMs };
  const batches = w.batches ?? 60;
  const actMs = Math.max(w.actMs ?? 500, BUILD_MS);
  const names = [...new Set(['A', 'B', ...w.pauses.map((p) => p.worker), ...w.crashes.map((c) => c.worker), ...w.clocks.map((c) => c.worker)])];
  const workers = new Map(
    names.map((n) => {
      const c = w.clocks.find((x) => x.worker === n);
      return [n, new Worker(sim, n, new WorkerClock({ offsetMs: c?.offsetMs, rate: c?.rate }))];
    }),
  );
  for (const p of w.pauses) workers.get(p.worker)!.pause(p.at, p.forMs);
  for (const c of w.crashes) workers.get(c.worker)!.crash(c.at);
  const holders: Holder[] = [];
  let doneAt: number | undefined;
  const refusedBatches: string[] = [];

  const hold = (wk: Worker, epoch: number, sentMono: number) => {
    const h = new Holder(wk, epoch, timing, sentMono, (done) => done(item.renew(wk.name, epoch, wk.wallNow())));
    h.logRenewals = false;
    holders.push(h);
    // Raise the fence first; read the progress; then one batch per actMs: check, build, send.
    if (store.raise(wk.name, epoch) === undefined) return h.end('fenced out at the raise');
    let next = store.written.size;
    const cycle = () => {
      if (doneAt !== undefined || h.ended) return;
      if (!h.mayAct()) return h.end('stop time passed: stops');
      const batch = `batch ${next + 1}`;
      wk.act(sim.now + BUILD_MS, () => {
        if (store.write(wk.name, epoch, batch, INVOICES_PER_BATCH)) {
          next = Math.max(next + 1, store.written.size);
          if (next >= batches && doneAt === undefined && store.complete(wk.name, epoch)) {
            doneAt = sim.now;
            item.release(wk.name, epoch);
            h.end('completes the job and releases');
            return;
          }
          wk.afterMonotonic(actMs - BUILD_MS, cycle);
        } else {
          refusedBatches.push(batch);
          h.end('write refused: it has lost the lock; stops and discards local state');
        }
      });
    };
    wk.afterMonotonic(actMs - BUILD_MS, cycle);
  };

  const a = workers.get('A')!;
  a.act(0, () => hold(a, item.claim('A', w.rule, { claimantWallMs: a.wallNow(), marginMs: w.marginMs, leaseMs: w.leaseMs })!, a.monotonicNow()));
  for (const wk of workers.values()) {
    if (wk.name === 'A') continue;
    const claimant = new ItemClaimant(w.rule, w.leaseMs, w.marginMs);
    const poll = () => {
      if (doneAt !== undefined) return;
      const step = claimant.decide(item.read(), wk.monotonicNow(), wk.wallNow());
      if (step.claim) {
        const sent = wk.monotonicNow();
        const epoch = item.claim(wk.name, w.rule, { claimantWallMs: wk.wallNow(), marginMs: w.marginMs, leaseMs: w.leaseMs, seenRvn: step.seenRvn });
        if (epoch !== undefined) return hold(wk, epoch, sent);
      }
      wk.afterMonotonic(w.pollMs ?? 500, poll);
    };
    wk.act(w.pollMs ?? 500, poll);
  }
  sim.run(w.untilMs ?? 120_000);
  for (const h of holders) h.markHeld();
  return { rows: sim.rows, marks: sim.marks, answers: answersOf(holders, store, refusedBatches, w, doneAt, sim.now) };
}

function answersOf(
  holders: Holder[],
  store: FencedStore,
  refused: string[],
  w: WhatIfSettings,
  doneAt: number | undefined,
  endMs: number,
): WhatIfAnswers {
  const overlaps: { a: string; b: string; ms: number }[] = [];
  for (let i = 0; i < holders.length; i++)
    for (let j = i + 1; j < holders.length; j++) {
      const ms = overlapMs(holders[i], holders[j]);
      if (ms > 0) overlaps.push({ a: holders[i].worker.name, b: holders[j].worker.name, ms });
    }
  // Longest stretch with no tenure, from 0 to the end of the job.
  const end = doneAt ?? endMs;
  const spans = holders.map((h) => [h.since, Math.min(h.heldUntil(), end)] as const).sort((x, y) => x[0] - y[0]);
  let longest = 0;
  let covered = 0;
  for (const [from, to] of spans) {
    longest = Math.max(longest, from - covered);
    covered = Math.max(covered, to);
  }
  longest = Math.max(longest, end - covered);
  const takeovers = holders.slice(1).map((h, i) => {
    const prev = holders[i];
    const lastApplied = prev.renewals.at(-1) ?? prev.since;
    return { from: prev.worker.name, to: h.worker.name, earliestSafeMs: lastApplied + w.leaseMs, atMs: h.since };
  });
  const refusedButWritten = refused.filter((b) => store.written.has(b)).length;
  return {
    overlapMs: overlaps.reduce((sum, o) => sum + o.ms, 0),
    overlaps,
    refusedWrites: store.refused,
    writtenTwiceWithFence: store.writtenTwice().length * INVOICES_PER_BATCH,
    writtenTwiceWithoutFence: (store.writtenTwice().length + refusedButWritten) * INVOICES_PER_BATCH,
    longestNoOwnerMs: longest,
    takeovers,
    holders: holders.map((h) => ({ worker: h.worker.name, token: h.token, fromMs: h.since, toMs: h.heldUntil() })),
    done: doneAt !== undefined,
    doneAtMs: doneAt,
  };
}

/** One axis of a sweep: a setting and its values (ms for durations). */
export interface SweepAxis {
  /** The setting: the lease, the renewal period, the margin, or the length of every pause. */
  readonly name: 'lease' | 'renew' | 'margin' | 'pause';
  /** Its values, ms. */
  readonly values: readonly number[];
}

/** Every combination of the axes, each run as a what-if; invalid combinations carry their problems instead. */
export function sweepGrid(base: WhatIfSettings, axes: readonly SweepAxis[]) {
  let cells: Record<string, number>[] = [{}];
  for (const axis of axes) cells = cells.flatMap((c) => axis.values.map((v) => ({ ...c, [axis.name]: v })));
  const started = systemClock.monotonicMs();
  const results = cells.map((cell) => {
    const s: WhatIfSettings = {
      ...base,
      leaseMs: cell.lease ?? base.leaseMs,
      renewMs: cell.renew ?? base.renewMs,
      marginMs: cell.margin ?? base.marginMs,
      pauses: cell.pause === undefined ? base.pauses : base.pauses.map((p) => ({ ...p, forMs: cell.pause })),
    };
    const problems = whatIfProblems(s);
    return { cell, problems, answers: problems.length ? undefined : whatIf(s).answers };
  });
  return { results, ms: systemClock.monotonicMs() - started };
}
