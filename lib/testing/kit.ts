/**
 * What your code is given beside the fenced stores when it is explored, and what the checks read of it: your fakes and
 * your plain tables, each call a step of the scheduler for the actor that makes it, each act (a plain write, a fake
 * call) logged as it leaves the actor, on the actor's own clock; the fault plan steered at those acts; and the watch
 * that every item recorded through a fence is recorded with one content. One kit for `exploreJob` (a `withLease`
 * script) and `exploreFencedJob` (a FencedJob's chunk function).
 */
import type { VirtualClock } from '../core/clock';
import { Attr } from '../core/schema';
import type { BatchPut, JobStore } from '../core/store/jobs';
import type { Act } from './acts';
import type { Actor, FaultPlan, Scheduler } from './scheduler';
import type { PlainTables } from './tables';

/** The plain writes of your tables: the acts the check "no holder acts past its stop time" watches, with the fakes' calls. */
const TABLE_WRITES = ['tables.put', 'tables.update', 'tables.delete'];

/**
 * At an act (a plain write, a fake call: what comes right after a passed check), a fault is ACT_SHARE times as likely
 * as elsewhere, a pause weighs ACT_PAUSE_WEIGHT kinds, and it lasts from half of maxPauseMs (longer than a lease of
 * up to that: a takeover while the holder stands still): the gap that makes a stale holder is where it is looked for.
 */
const ACT_SHARE = 10;
const ACT_PAUSE_WEIGHT = 20;

const isPlain = (v: object): boolean => [Object.prototype, null].includes(Object.getPrototypeOf(v) as object | null);

/** The step names of the fakes' methods: those of a fake's class and its own, and, in a plain object of fakes, theirs. */
function fakeMethods(fakes: unknown, prefix = 'fakes.'): string[] {
  if (typeof fakes !== 'object' || fakes === null) return [];
  const names = new Set<string>();
  for (let o: object | null = fakes; o !== null && o !== Object.prototype; o = Object.getPrototypeOf(o) as object | null)
    for (const k of Object.getOwnPropertyNames(o)) if (k !== 'constructor' && typeof Reflect.get(fakes, k) === 'function') names.add(prefix + k);
  const nested = isPlain(fakes) ? Object.entries(fakes).flatMap(([k, v]) => fakeMethods(v, `${prefix}${k}.`)) : [];
  return [...names, ...nested];
}

/**
 * The fault plan: `defaults`, with the acts of `fakes` and of the plain tables faulted more often and a pause there
 * lasting from half of maxPauseMs; then `options` over it all.
 */
export function steeredPlan(defaults: FaultPlan, fakes: unknown, options: Partial<FaultPlan> = {}): FaultPlan {
  const acting = [...TABLE_WRITES, ...fakeMethods(fakes)];
  const plan: FaultPlan = { ...defaults, ...options };
  return {
    ...plan,
    chanceAt: options.chanceAt ?? [...(defaults.chanceAt ?? []), { methods: acting, share: ACT_SHARE }],
    emphasis: options.emphasis ?? [
      ...(defaults.emphasis ?? []),
      { methods: acting, kind: 'pause', weight: ACT_PAUSE_WEIGHT, minPauseMs: Math.floor(plan.maxPauseMs / 2) },
    ],
  };
}

/** Every act your code sent, each as its actor sent it: what the check "no holder acts past its stop time" reads. */
export class ActLog {
  readonly acts: Act[] = [];

  constructor(
    private readonly scheduler: Scheduler,
    private readonly clock: VirtualClock,
  ) {}

  /** Your plain tables as `actor` reaches them: each call a step, each write an act. */
  tablesFor(tables: PlainTables, actor: Actor): PlainTables {
    return this.scheduler.wrap(tables, actor, undefined, { prefix: 'tables.', onSend: this.watch(actor, 'write') });
  }

  /** Your fakes as `actor` reaches them: each method call a step and an act; a plain object of fakes is a bag of them, each wrapped alike. */
  fakesFor<F>(fakes: F, actor: Actor, prefix = 'fakes.'): F {
    if (typeof fakes !== 'object' || fakes === null) return fakes;
    const wrapped = this.scheduler.wrap(fakes, actor, undefined, { prefix, onSend: this.watch(actor, 'effect') });
    if (!isPlain(fakes)) return wrapped;
    const inner = new Map<string, unknown>();
    return new Proxy(wrapped, {
      get: (target, prop, receiver) => {
        const v = Reflect.get(fakes, prop) as unknown;
        if (typeof prop !== 'string' || typeof v !== 'object' || v === null) return Reflect.get(target, prop, receiver) as unknown;
        if (!inner.has(prop)) inner.set(prop, this.fakesFor(v, actor, `${prefix}${prop}.`));
        return inner.get(prop);
      },
    });
  }

  private watch(actor: Actor, kind: Act['kind']) {
    return (method: string, args: unknown[]) => {
      if (kind === 'write' && !TABLE_WRITES.includes(method)) return;
      const act: Act = { actor: actor.name, method, args, kind, sentAt: actor.monotonicMs(), trueSentAt: this.clock.monotonicMs(), applied: false };
      this.acts.push(act);
      this.scheduler.log(`${actor.name} sends ${method} at ${Math.round(act.sentAt)} ms on its clock`);
      return () => void (act.applied = true);
    };
  }
}

/** What a holder stamps on an item of its own, which a redo stamps anew: its token, and the effects' informational time. */
const STAMPS = new Set([Attr.token, Attr.intentAt]);

/** An item's content as recorded, without the holder's stamps. */
function contentOf(put: BatchPut): string {
  const item = (put.document ?? put.item ?? {}) as Record<string, unknown>;
  const rest = Object.fromEntries(Object.entries(item).filter(([k]) => !STAMPS.has(k as never)));
  return JSON.stringify(rest, Object.keys(rest).sort());
}

/**
 * A watch of every put sent through a fence and not fenced out, over every job store it is put around: an item sent
 * again (a redo by the next holder) with another content than the one it was recorded with is a violation, pushed to
 * `violations` as it is seen.
 */
export function oneContent(violations: string[]): <T extends JobStore>(jobs: T) => T {
  const recorded = new Map<string, string>();
  return (jobs) =>
    new Proxy(jobs, {
      get: (target, method) => {
        const f = Reflect.get(target, method, target) as unknown;
        if (typeof f !== 'function') return f;
        if (method !== 'recordBatch') return (f as (...a: unknown[]) => unknown).bind(target);
        return async (...args: Parameters<JobStore['recordBatch']>) => {
          const out = await target.recordBatch(...args);
          if (out.kind !== 'fenced-out')
            for (const put of args[2]) {
              const key = `${put.table} ${JSON.stringify(put.document?.[put.keyAttribute] ?? put.item?.[put.keyAttribute])}`;
              const content = contentOf(put);
              const first = recorded.get(key);
              if (first === undefined) recorded.set(key, content);
              else if (first !== content)
                violations.push(`${key} was recorded as ${first} and sent again as ${content}: derive each item from its key`);
            }
          return out;
        };
      },
    });
}
