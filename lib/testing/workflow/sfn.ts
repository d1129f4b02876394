/**
 * The explorer's Step Functions interpreter: runs the state machines CDK synthesizes for FencedJob (Task with Retry,
 * Catch and TimeoutSeconds, Pass, Wait, Choice, inline Map, Succeed, Fail) on the world's virtual clock, one task
 * attempt at a time through the world's `attempt` (which invokes the handler as a fresh actor and may fault the
 * invoke). It knows only what those definitions use; an unknown state type or Choice rule is an error, not a guess.
 *
 * Error names match as the Step Functions docs say (concepts-error-handling.html): a retrier or catcher names errors
 * exactly, or `States.ALL` (any error), or `States.TaskFailed` (any error but `States.Timeout`); neither wildcard
 * matches the terminal `States.Runtime` or `States.DataLimitExceeded`. An inline Map whose iteration fails fails at once
 * and stops its other iterations (state-map-inline.html: "any iteration failure causes the Map state to fail ... all
 * iterations stop"): a stopped iteration starts nothing more (no retry, no next state) and its task's answer, when its
 * Lambda, still running, gives one, is discarded.
 *
 * A Map whose ItemProcessor's ProcessorConfig says `Mode: DISTRIBUTED` runs each item as a child execution with its
 * own history and its own context ($$.Execution is the child's), at most MaxConcurrency at once (absent or 0: 10,000)
 * (https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html). A failed child does not fail
 * the Map by its own error: the Map Run fails when the failed children exceed ToleratedFailureCount or
 * ToleratedFailurePercentage of the items (either, when both are set; neither set: no failure tolerated), with
 * `States.ExceedToleratedFailureThreshold` (https://docs.aws.amazon.com/step-functions/latest/dg/maprun-fail-threshold.html),
 * and its running children are aborted ("stopped ... by Step Functions because the Map Run failed",
 * https://docs.aws.amazon.com/step-functions/latest/apireference/API_MapRunExecutionCounts.html): as a stopped inline
 * iteration, their Lambdas run on and their answers are discarded; a child not started never starts. Below the
 * threshold the Map runs every item and succeeds, a failed child's output its Error and Cause. The Map Run's start-up
 * before its first child and its wind-down after its last take what the world's `mapRunMs` says (AWS publishes no
 * figure; lib/constructs/renewal-gap.ts START_UP_MS). Express children, the *Path forms and ItemReader are errors.
 *
 * Why a second interpreter beside the embedded stack's (lib/local/workflow.ts, aws-local-stepfunctions): that one runs
 * on real time and real Lambda processes, as AWS would; the explorer needs every wait, retry backoff and timeout on
 * one virtual clock, every random draw from the schedule's seed, and a step boundary at each invoke, so a schedule
 * replays exactly from its seed. test/unit/sfn-interpreter.test.ts pins its semantics to the Step Functions docs.
 */

import type { Retrier as TemplateRetrier } from '../../constructs/renewal-gap';
import { MAP_RUN_FAILED } from '../../constructs/task-errors';

type Json = Record<string, unknown>;

export interface StateDef extends Json {
  readonly Type: string;
  readonly Next?: string;
  readonly End?: boolean;
  readonly Resource?: string;
  readonly Parameters?: Json;
  readonly ItemSelector?: Json;
  readonly ResultPath?: string | null;
  readonly OutputPath?: string;
  readonly TimeoutSeconds?: number;
  readonly Retry?: readonly Retrier[];
  readonly Catch?: readonly Catcher[];
  readonly Result?: unknown;
  readonly Seconds?: number;
  readonly SecondsPath?: string;
  readonly Choices?: readonly Json[];
  readonly Default?: string;
  readonly ItemsPath?: string;
  readonly MaxConcurrency?: number;
  readonly ItemProcessor?: MachineDef;
  readonly Iterator?: MachineDef;
  readonly Error?: string;
}
/** A retrier: the fields that time its waits (as the constructs read them), and its jitter. */
export interface Retrier extends TemplateRetrier {
  readonly JitterStrategy?: string;
}
interface Catcher {
  readonly ErrorEquals: readonly string[];
  readonly ResultPath?: string | null;
  readonly Next: string;
}
export interface MachineDef {
  readonly StartAt: string;
  readonly States: Record<string, StateDef>;
  /** A Map's processor: `Mode: DISTRIBUTED` runs each item as a child execution. */
  readonly ProcessorConfig?: { readonly Mode?: string; readonly ExecutionType?: string };
}

/** A Distributed Map runs at most this many children at once when MaxConcurrency is absent or 0 (state-map-distributed.html). */
const DISTRIBUTED_CONCURRENCY = 10_000;

export function tasksOf(machine: MachineDef): StateDef[] {
  return Object.values(machine.States).flatMap((st) => {
    const inner = st.ItemProcessor ?? st.Iterator;
    return st.Type === 'Task' ? [st] : inner ? tasksOf(inner) : [];
  });
}

/** A retrier's cap on one wait (MaxDelaySeconds), in ms; none: no cap. */
export function maxDelayMs(r: Retrier): number {
  return r.MaxDelaySeconds === undefined ? Infinity : r.MaxDelaySeconds * 1000;
}

/** A task's or a state's failure, by the name Retry and Catch match. */
export class StateError extends Error {
  constructor(
    readonly error: string,
    readonly detail: string,
  ) {
    super(`${error}: ${detail}`);
  }
}

export interface Context {
  readonly Execution: { readonly Name: string; readonly Input: unknown };
  readonly Map?: { readonly Item: { readonly Value: unknown; readonly Index?: number } };
}

function read(doc: unknown, path: string, context: Context): unknown {
  const [root, rest] = path.startsWith('$$') ? [context as unknown, path.slice(2)] : [doc, path.slice(1)];
  if (rest === '') return root;
  let v = root;
  for (const part of rest.slice(1).split('.')) v = (v as Json | undefined)?.[part];
  return v;
}

function parameters(template: unknown, doc: unknown, context: Context): unknown {
  if (Array.isArray(template)) return template.map((t) => parameters(t, doc, context));
  if (template === null || typeof template !== 'object') return template;
  return Object.fromEntries(
    Object.entries(template as Json).map(([k, v]) =>
      k.endsWith('.$') ? [k.slice(0, -2), read(doc, String(v), context)] : [k, parameters(v, doc, context)],
    ),
  );
}

/** ResultPath: null keeps the input, `$` replaces it, `$.a.b` sets a copy's field. */
function place(doc: unknown, path: string | null | undefined, value: unknown): unknown {
  if (path === null) return doc;
  if (path === undefined || path === '$') return value;
  const out = structuredClone((doc ?? {}) as Json);
  const parts = path.slice(2).split('.');
  let at: Json = out;
  for (const part of parts.slice(0, -1)) at = (at[part] ??= {}) as Json;
  at[parts.at(-1)!] = value;
  return out;
}

/** Errors no wildcard matches: they end the execution whatever its Retry and Catch say. */
const TERMINAL = new Set(['States.Runtime', 'States.DataLimitExceeded']);

/**
 * Does a retrier's or catcher's ErrorEquals match `error`: by its name, or `States.ALL`, or `States.TaskFailed` (every
 * error but a task's timeout; https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html).
 */
export function matches(names: readonly string[], error: string): boolean {
  if (names.includes(error)) return true;
  if (TERMINAL.has(error)) return false;
  return names.includes('States.ALL') || (names.includes('States.TaskFailed') && error !== 'States.Timeout');
}

/** An iteration stopped because its Map failed: thrown where it stood, caught by its Map, never a state's error. */
class Stopped extends Error {}

/** Where a run of states stands: a Map's iteration is stopped when its Map fails (nested: when any Map above it does). */
interface Branch {
  stopped: boolean;
  readonly parent?: Branch;
}
const isStopped = (b: Branch | undefined): boolean => b !== undefined && (b.stopped || isStopped(b.parent));

/** What the interpreter needs of its world. */
export interface InterpreterWorld<V> {
  /** One attempt of a Task state: its answer, or a StateError named as Step Functions names the failure. */
  attempt(exec: ExecutionName, state: string, st: StateDef, payload: unknown, view: V): Promise<unknown>;
  /** Sleeps on the world's virtual clock (a Wait state, a retry's backoff). */
  sleep(ms: number): Promise<void>;
  /** The schedule's seeded draws (a retry's full jitter). */
  random(): number;
  log(line: string): void;
  /** Wait states pass at once: the broken variant `wait-skipped`. @default false */
  readonly skipWaits?: boolean;
  /** How long a Distributed Map Run's start-up (before its first child) or wind-down (after its last) takes. @default 0 */
  readonly mapRunMs?: (phase: 'start-up' | 'wind-down') => number;
}

/** The execution a state runs in, by name (what the log and the world's attempt name it by). */
export interface ExecutionName {
  readonly name: string;
}

/** How a machine ended: its last state, the error if it failed, and its output. */
export interface MachineEnd {
  readonly end: string;
  readonly failed?: string;
  readonly output: unknown;
}

/**
 * An interpreter over `world`: `run` runs a machine's states from StartAt until a Succeed, a Fail or an End.
 * `view` is passed through to each attempt untouched (the world's per-execution view of its stores).
 */
export function interpreter<V>(world: InterpreterWorld<V>): {
  run(exec: ExecutionName, machine: MachineDef, doc: unknown, context: Context, view: V): Promise<MachineEnd>;
} {
  /** A task: its attempts under the state's Retry (by error name, with its interval, backoff and full jitter). */
  const task = async (exec: ExecutionName, state: string, st: StateDef, payload: unknown, view: V, branch?: Branch): Promise<unknown> => {
    const retried = (st.Retry ?? []).map(() => 0);
    for (;;) {
      let out: unknown;
      try {
        out = await world.attempt(exec, state, st, payload, view);
      } catch (err) {
        stopIfStopped(exec, state, branch);
        if (!(err instanceof StateError)) throw err;
        const i = (st.Retry ?? []).findIndex((r) => matches(r.ErrorEquals, err.error));
        const r = st.Retry?.[i];
        if (!r || retried[i] >= (r.MaxAttempts ?? 3)) throw err;
        const fullMs = Math.min((r.IntervalSeconds ?? 1) * 1000 * (r.BackoffRate ?? 2) ** retried[i], maxDelayMs(r));
        const waitMs = r.JitterStrategy === 'FULL' ? Math.floor(world.random() * fullMs) : fullMs;
        retried[i]++;
        world.log(`${exec.name} ${state} retries ${err.error} in ${waitMs} ms`);
        await world.sleep(waitMs);
        if (isStopped(branch)) throw new Stopped();
        continue;
      }
      stopIfStopped(exec, state, branch);
      return out;
    }
  };

  /** A stopped iteration's task answered (its Lambda ran on): the answer is discarded. */
  const stopIfStopped = (exec: ExecutionName, state: string, branch: Branch | undefined): void => {
    if (!isStopped(branch)) return;
    world.log(`${exec.name} ${state} answered after its Map failed: discarded`);
    throw new Stopped();
  };

  /** Run a machine's states from StartAt; a Succeed or Fail ends it. */
  const states = async (exec: ExecutionName, machine: MachineDef, doc: unknown, context: Context, view: V, branch?: Branch): Promise<MachineEnd> => {
    let name = machine.StartAt;
    for (;;) {
      const st = machine.States[name];
      if (!st) throw new Error(`no state ${name}`);
      try {
        switch (st.Type) {
          case 'Succeed':
            return { end: name, output: doc };
          case 'Fail':
            return { end: name, failed: st.Error ?? 'States.Failed', output: doc };
          case 'Pass':
            doc = place(doc, st.ResultPath, st.Result ?? doc);
            break;
          case 'Wait': {
            const seconds = Number(st.Seconds ?? read(doc, String(st.SecondsPath), context));
            if (!world.skipWaits) await world.sleep(seconds * 1000);
            if (isStopped(branch)) throw new Stopped();
            break;
          }
          case 'Choice': {
            const chosen = (st.Choices ?? []).find((c) => {
              const v = read(doc, String(c.Variable), context);
              if ('BooleanEquals' in c) return v === c.BooleanEquals;
              if ('NumericEquals' in c) return v === c.NumericEquals;
              throw new Error(`${name}: a Choice rule this interpreter does not know: ${JSON.stringify(c)}`);
            });
            name = String(chosen?.Next ?? st.Default);
            continue;
          }
          case 'Task': {
            const payload = st.Parameters ? parameters(st.Parameters, doc, context) : doc;
            const result = await task(exec, name, st, payload, view, branch);
            doc = place(doc, st.ResultPath, result);
            if (st.OutputPath) doc = read(doc, st.OutputPath, context);
            break;
          }
          case 'Map': {
            const distributed = (st.ItemProcessor ?? st.Iterator)?.ProcessorConfig?.Mode === 'DISTRIBUTED';
            doc = place(doc, st.ResultPath, await (distributed ? mapRun : map)(exec, name, st, doc, context, view, branch));
            break;
          }
          default:
            throw new Error(`${name}: a state type this interpreter does not know: ${st.Type}`);
        }
      } catch (err) {
        if (!(err instanceof StateError)) throw err;
        const c = (st.Catch ?? []).find((x) => matches(x.ErrorEquals, err.error));
        if (!c) throw err;
        world.log(`${exec.name} ${name} caught ${err.error} → ${c.Next}`);
        doc = place(doc, c.ResultPath, { Error: err.error, Cause: err.detail });
        name = c.Next;
        continue;
      }
      if (st.End || !st.Next) return { end: name, output: doc };
      name = st.Next;
    }
  };

  /** A Map state of either kind, run over its items: their outputs, in order. */
  type MapState = (exec: ExecutionName, name: string, st: StateDef, doc: unknown, context: Context, view: V, branch?: Branch) => Promise<unknown[]>;

  /**
   * An inline Map: at most MaxConcurrency iterations at once. The first iteration that fails fails the Map at once and
   * stops the others where they stand: they start nothing more, and what their running tasks answer is discarded.
   */
  const map: MapState = async (exec, name, st, doc, context, view, branch) => {
    const items = (read(doc, String(st.ItemsPath ?? '$'), context) ?? []) as unknown[];
    const processor = (st.ItemProcessor ?? st.Iterator)!;
    const results: unknown[] = [];
    const iterations: Branch = { stopped: false, parent: branch };
    let next = 0;
    let fail: (err: unknown) => void = () => undefined;
    const failed = new Promise<never>((_, reject) => (fail = reject));
    const lane = async () => {
      while (!isStopped(iterations) && next < items.length) {
        const i = next++;
        const itemContext = { ...context, Map: { Item: { Value: items[i] } } };
        const input = st.ItemSelector ? parameters(st.ItemSelector, doc, itemContext) : items[i];
        try {
          const out = await states(exec, processor, input, itemContext, view, iterations);
          if (out.failed) throw new StateError(out.failed, `${name} iteration ${i} failed`);
          results[i] = out.output;
        } catch (err) {
          if (err instanceof Stopped) return;
          if (!iterations.stopped && err instanceof StateError)
            world.log(`${exec.name} ${name} fails on iteration ${i} (${err.error}): the others stop`);
          iterations.stopped = true;
          fail(err);
          return;
        }
      }
    };
    const width = st.MaxConcurrency ? Math.min(st.MaxConcurrency, items.length) : items.length;
    const lanes = Promise.all(Array.from({ length: Math.max(1, width) }, lane));
    await Promise.race([lanes, failed]);
    if (isStopped(branch)) throw new Stopped();
    return results;
  };

  /**
   * A Distributed Map: each item a child execution (its own name and context), at most MaxConcurrency at once; the
   * Map Run fails with MAP_RUN_FAILED once the failed children exceed the tolerated threshold, aborting the running
   * ones where they stand (their Lambdas run on, their answers are discarded), and starts no more.
   */
  const mapRun: MapState = async (exec, name, st, doc, context, view, branch) => {
    const items = (read(doc, String(st.ItemsPath ?? '$'), context) ?? []) as unknown[];
    const processor = st.ItemProcessor!;
    const exceeded = toleranceOf(name, st, processor, items.length);
    const run: Branch = { stopped: false, parent: branch };
    const results: unknown[] = [];
    const running = new Set<string>();
    let failures = 0;
    let next = 0;
    let fail: (err: unknown) => void = () => undefined;
    const failed = new Promise<never>((_, reject) => (fail = reject));
    const pause = async (what: 'start-up' | 'wind-down') => {
      const ms = world.mapRunMs?.(what) ?? 0;
      if (ms > 0) world.log(`${exec.name} ${name} Map Run ${what}: ${ms} ms`);
      await world.sleep(ms);
      if (isStopped(branch)) throw new Stopped();
    };
    const lane = async () => {
      while (!isStopped(run) && next < items.length) {
        const i = next++;
        const itemContext = { ...context, Map: { Item: { Value: items[i], Index: i } } };
        const input = st.ItemSelector ? parameters(st.ItemSelector, doc, itemContext) : items[i];
        const child: ExecutionName = { name: `${exec.name}/${name}:${i}` };
        running.add(child.name);
        world.log(`${child.name} starts: a child execution of ${exec.name}'s Map Run ${name}`);
        try {
          const out = await states(child, processor, input, { Execution: { Name: child.name, Input: input } }, view, run);
          if (out.failed) throw new StateError(out.failed, `${child.name} failed at ${out.end}`);
          world.log(`${child.name} ends SUCCEEDED`);
          results[i] = out.output;
        } catch (err) {
          if (err instanceof Stopped) return; // aborted: logged as its Map Run failed
          if (!(err instanceof StateError)) return void ((run.stopped = true), fail(err));
          failures++;
          world.log(`${child.name} ends FAILED (${err.error})`);
          results[i] = { Error: err.error, Cause: err.detail };
          if (!run.stopped && exceeded(failures)) {
            run.stopped = true;
            running.delete(child.name);
            const aborted = [...running];
            world.log(
              `${exec.name} ${name} Map Run fails: ${failures} of ${items.length} children failed, above the tolerated${aborted.length ? `; ABORTED: ${aborted.join(', ')}` : ''}`,
            );
            fail(new StateError(MAP_RUN_FAILED, 'The specified tolerated failure threshold was exceeded'));
            return;
          }
        } finally {
          running.delete(child.name);
        }
      }
    };
    await pause('start-up');
    const width = Math.min(st.MaxConcurrency || DISTRIBUTED_CONCURRENCY, items.length);
    await Promise.race([Promise.all(Array.from({ length: Math.max(1, width) }, lane)), failed]);
    await pause('wind-down');
    return results;
  };

  return { run: states };
}

/**
 * A Distributed Map's tolerated failure threshold (maprun-fail-threshold.html): the failed children, as a count or a
 * percentage of the items, above ToleratedFailureCount or ToleratedFailurePercentage (either, when both are set);
 * neither set, the default 0: any failed child fails the Map Run. What this interpreter does not run is an error.
 */
function toleranceOf(name: string, st: StateDef, processor: MachineDef, items: number): (failures: number) => boolean {
  const unknown = [
    'ItemReader',
    'ItemBatcher',
    'ResultWriter',
    'MaxConcurrencyPath',
    'ToleratedFailureCountPath',
    'ToleratedFailurePercentagePath',
  ].filter((f) => f in st);
  if (processor.ProcessorConfig?.ExecutionType === 'EXPRESS') unknown.push('ExecutionType EXPRESS');
  if (unknown.length > 0) throw new Error(`${name}: Distributed Map fields this interpreter does not run: ${unknown.join(', ')}`);
  const count = st.ToleratedFailureCount as number | undefined;
  const percent = st.ToleratedFailurePercentage as number | undefined;
  if (count === undefined && percent === undefined) return (failures) => failures > 0;
  return (failures) => (count !== undefined && failures > count) || (percent !== undefined && (failures * 100) / items > percent);
}
