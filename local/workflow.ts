/**
 * Run the SYNTHESIZED state machine locally, with the code that deploys: the definition comes from the CDK
 * template (there is no second, hand-written copy of the workflow), executed by the npm package
 * aws-local-stepfunctions, and every Lambda task runs its function's BUNDLED asset from the cloud assembly (the
 * index.js `cdk deploy` uploads) in a local execution environment (local/lambda-runner.ts), against the
 * embedded stack.
 *
 * How the template becomes a runnable workflow:
 *   1. synthesize the stack in-process from cdk.json's context (plus overrides), bundling every function with
 *      esbuild as `cdk deploy` does, into a cloud assembly (cached: see workflowCacheKey);
 *   2. resolve each state machine's DefinitionString, replacing each function's Fn::GetAtt with a placeholder ARN
 *      that names the function's logical id;
 *   3. read each function's asset, handler, runtime, timeout, memory and environment from the template;
 *   4. at run time, resolve the environment's table, bucket and state machine references to the local ones.
 *
 * `lambdaCode: 'source'` runs the handlers' TypeScript sources in this process instead. It exists only for the
 * tests that must step through the core library (fault hooks placed between a stop-time check and a write);
 * everything else runs the bundles.
 *
 * aws-local-stepfunctions 3.0.0 declares Node >= 22 and calls Promise.withResolvers, which Node 20 lacks: the
 * polyfill below is installed in this local runner only (the functions themselves run on the runtime's Node).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BillingHooks } from '../core/billing';
import type { EventListener } from '../core/events';
import type { TableNames } from '../core/schema';
import type { Clients, Endpoints } from '../core/stores';
import type { HandlerName } from '../lambda/index';
import { Env } from '../lambda/env';
import { ConfigError } from '../core/errors';
import { fileCallSink, type CallSink } from './call-log';
import { toLocalDefinition } from './distributed-map';
import { LocalLambdas, type DeployedFunction } from './lambda-runner';
import { startLocalSfn } from './sfn-endpoint';

type Json = Record<string, unknown>;
type Resource = { Type: string; Properties: Json };

if (typeof (Promise as { withResolvers?: unknown }).withResolvers !== 'function') {
  (Promise as unknown as { withResolvers: () => unknown }).withResolvers = function withResolvers<T>() {
    let resolve!: (v: T) => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

const ROOT = path.resolve(__dirname, '..');
const PLACEHOLDER = 'arn:aws:lambda:us-east-1:000000000000:function:';
const LOCAL_ARN = { account: '000000000000', region: 'us-east-1' };

/** One state machine of the template. */
export interface SynthesizedMachine {
  readonly logicalId: string;
  /** The Amazon States Language definition, as deployed, with placeholder function ARNs. */
  readonly definition: Json;
  /** Task state name → the logical id of the function it invokes. */
  readonly taskFunctions: Record<string, string>;
}

export interface SynthesizedWorkflow {
  /** The billing state machine's definition (= billing.definition). */
  readonly definition: Json;
  /** Billing task state name → the handler it invokes. */
  readonly taskHandlers: Record<string, HandlerName>;
  /** The billing functions' environment from the template (table and bucket references left unresolved). */
  readonly environment: Record<string, unknown>;
  readonly billing: SynthesizedMachine;
  readonly sweeper: SynthesizedMachine;
  /** Every function of the stack, by logical id, with its bundled asset (environment references unresolved). */
  readonly functions: Record<string, Omit<DeployedFunction, 'environment'> & { readonly environment: Record<string, unknown> }>;
}

const CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'fencepost');
/** Bundled assets, by content hash, shared by every cached assembly (the code does not depend on the settings). */
const ASSETS_DIR = path.join(CACHE_DIR, 'assets');

/**
 * The synthesized stack for these overrides, from the cache when nothing it depends on has changed. A cold synth
 * with bundling costs a few seconds; the key covers every input of the synth, so a stale definition or a stale
 * bundle cannot be run. FENCEPOST_SYNTH_CACHE=off always synthesizes.
 */
export function synthesizeWorkflow(overrides: Json = {}): SynthesizedWorkflow {
  if (process.env.FENCEPOST_SYNTH_CACHE === 'off') return synthesizeWorkflowNow(overrides);
  const file = path.join(CACHE_DIR, `workflow-${workflowCacheKey(overrides)}.json`);
  try {
    const wf = JSON.parse(readFileSync(file, 'utf8')) as SynthesizedWorkflow;
    for (const fn of Object.values(wf.functions)) readFileSync(path.join(fn.assetDir, 'index.js'), { flag: 'r' }).subarray(0, 1);
    return wf;
  } catch {
    const wf = synthesizeWorkflowNow(overrides);
    mkdirSync(CACHE_DIR, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`; // write then rename: concurrent runs never read half a file
    writeFileSync(tmp, JSON.stringify(wf));
    renameSync(tmp, file);
    return wf;
  }
}

/**
 * What the synth reads: the overrides, cdk.json, the locked dependency versions (aws-cdk-lib, esbuild), and every
 * source file of the stack, the handlers and the core they import. Hashing them all costs a few ms.
 */
export function workflowCacheKey(overrides: Json): string {
  const h = createHash('sha256').update(JSON.stringify(overrides));
  const files = ['cdk.json', 'package-lock.json', ...['core', 'lib', 'lambda'].flatMap((dir) => sourcesUnder(dir))];
  for (const f of files) h.update(`\0${f}\0`).update(readFileSync(path.join(ROOT, f)));
  return h.digest('hex').slice(0, 32);
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f))
    .sort();
}

/** Synthesize the stack, bundles included, from cdk.json's context (with overrides), and read what runs. */
export function synthesizeWorkflowNow(overrides: Json = {}): SynthesizedWorkflow {
  // Loaded here, not at the top: a cached synth needs neither aws-cdk-lib nor the stack.
  const { App } = require('aws-cdk-lib') as typeof import('aws-cdk-lib');
  const { CONTEXT_KEY, readStackConfig } = require('../lib/config') as typeof import('../lib/config');
  const { FencepostStack } = require('../lib/fencepost-stack') as typeof import('../lib/fencepost-stack');
  const cdkJson = JSON.parse(readFileSync(path.join(ROOT, 'cdk.json'), 'utf8')) as { context: Json };
  const context = { ...cdkJson.context, [CONTEXT_KEY]: { ...(cdkJson.context[CONTEXT_KEY] as Json), ...overrides } };
  mkdirSync(CACHE_DIR, { recursive: true });
  const outdir = mkdtempSync(path.join(CACHE_DIR, 'synth-'));
  try {
    const app = new App({ context, outdir, builtinCloudFormationValidation: false });
    // The functions are bundled as their constructs are built.
    const stack = quietly(() => new FencepostStack(app, 'Fencepost', { config: readStackConfig(app) }));
    const template = app.synth().getStackByName(stack.stackName).template as { Resources: Record<string, Resource> };
    const idOf = (c: { node: { defaultChild?: unknown } }) => stack.getLogicalId(c.node.defaultChild as never);
    const functions: SynthesizedWorkflow['functions'] = {};
    for (const [id, r] of Object.entries(template.Resources)) {
      if (r.Type === 'AWS::Lambda::Function') functions[id] = deployedFunction(id, r.Properties, outdir);
    }
    const billing = machine(idOf(stack.billing.stateMachine), template.Resources, functions);
    const sweeper = machine(idOf(stack.sweeper.stateMachine), template.Resources, functions);
    const taskHandlers: Record<string, HandlerName> = {};
    let environment: Record<string, unknown> = {};
    for (const [state, id] of Object.entries(billing.taskFunctions)) {
      taskHandlers[state] = functions[id].handlerName as HandlerName;
      environment = { ...environment, ...functions[id].environment };
    }
    return { definition: billing.definition, taskHandlers, environment, billing, sweeper, functions };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/** Run fn with CDK's "Bundling asset …" lines held back; they are printed only if the synth fails. */
function quietly<T>(fn: () => T): T {
  const held: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string | Uint8Array) => {
    held.push(String(chunk));
    return true;
  }) as typeof process.stderr.write;
  try {
    return fn();
  } catch (err) {
    process.stderr.write = write;
    process.stderr.write(held.join(''));
    throw err;
  } finally {
    process.stderr.write = write;
  }
}

/** A function's deployment from the template; its bundled asset is moved to the shared, content-addressed assets folder. */
function deployedFunction(logicalId: string, p: Json, outdir: string): SynthesizedWorkflow['functions'][string] {
  const hash = String((p.Code as Json).S3Key).replace(/\.zip$/, '');
  const assetDir = path.join(ASSETS_DIR, `asset.${hash}`);
  mkdirSync(ASSETS_DIR, { recursive: true });
  try {
    renameSync(path.join(outdir, `asset.${hash}`), assetDir);
  } catch (err) {
    // Already there from an earlier synth: the hash names the content, so it is the same bundle.
    if (!['ENOTEMPTY', 'EEXIST'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
  }
  const environment = ((p.Environment as Json)?.Variables ?? {}) as Record<string, unknown>;
  return {
    logicalId,
    handlerName: String(environment[Env.handler]),
    assetDir,
    handler: String(p.Handler),
    runtime: String(p.Runtime),
    timeoutSeconds: Number(p.Timeout ?? 3),
    memoryMb: Number(p.MemorySize ?? 128),
    environment,
  };
}

function machine(logicalId: string, resources: Record<string, Resource>, functions: SynthesizedWorkflow['functions']): SynthesizedMachine {
  const definition = JSON.parse(resolveJoin(resources[logicalId].Properties.DefinitionString)) as Json;
  const taskFunctions: Record<string, string> = {};
  forEachState(definition, (name, state) => {
    if (state.Type !== 'Task') return;
    const resource = String(state.Resource);
    const id = resource.slice(PLACEHOLDER.length);
    if (!resource.startsWith(PLACEHOLDER) || !functions[id]) throw new Error(`task ${name} does not invoke a function of this stack: ${resource}`);
    taskFunctions[name] = id;
  });
  return { logicalId, definition, taskFunctions };
}

/** Fn::Join of strings and intrinsic references → one string; a function's ARN becomes a placeholder naming it. */
export function resolveJoin(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as Json;
  if (v['Fn::Join']) {
    const [sep, parts] = v['Fn::Join'] as [string, unknown[]];
    return parts.map(resolveJoin).join(sep);
  }
  if (v['Fn::GetAtt']) return `${PLACEHOLDER}${(v['Fn::GetAtt'] as string[])[0]}`;
  if (v.Ref === 'AWS::Partition') return 'aws';
  if (v.Ref === 'AWS::Region') return LOCAL_ARN.region;
  if (v.Ref === 'AWS::AccountId') return LOCAL_ARN.account;
  if (v.Ref === 'AWS::URLSuffix') return 'amazonaws.com';
  throw new Error(`cannot resolve ${JSON.stringify(value)} in the state machine definition`);
}

function forEachState(machine: Json, visit: (name: string, state: Json) => void): void {
  for (const [name, state] of Object.entries(machine.States as Record<string, Json>)) {
    visit(name, state);
    const inner = (state.ItemProcessor ?? state.Iterator) as Json | undefined;
    if (inner) forEachState(inner, visit);
    for (const branch of (state.Branches as Json[] | undefined) ?? []) forEachState(branch, visit);
  }
}

/** An iteration started after its Map failed, stopped before it invoked anything. */
class IterationStopped extends Error {
  constructor(map: string) {
    super(`${map} has failed: this iteration is stopped, as Step Functions stops a failed Map's iterations`);
    this.name = 'IterationStopped';
  }
}

/**
 * The tasks inside each Map's item processor that have no Catch of their own (their failure fails the iteration,
 * and so the Map), with the names their Retry clauses match. A retried error may still exhaust its attempts and
 * fail the Map; such an iteration is not stopped early here (the Map still fails, a little later).
 */
function mapsOf(definition: Json): Record<string, { name: string; retried(error: string): boolean }> {
  const out: Record<string, { name: string; retried(error: string): boolean }> = {};
  forEachState(definition, (name, state) => {
    const inner = (state.ItemProcessor ?? state.Iterator) as Json | undefined;
    if (!inner) return;
    for (const [innerName, innerState] of Object.entries(inner.States as Record<string, Json>)) {
      if (innerState.Type !== 'Task' || innerState.Catch) continue;
      const matched = ((innerState.Retry as { ErrorEquals: string[] }[] | undefined) ?? []).flatMap((r) => r.ErrorEquals);
      out[innerName] = { name, retried: (error) => matched.includes(error) || matched.includes('States.ALL') };
    }
  });
  return out;
}

/** The local ARN of a state machine of the stack (what a function's environment reference resolves to). */
export function localStateMachineArn(logicalId: string): string {
  return `arn:aws:states:${LOCAL_ARN.region}:${LOCAL_ARN.account}:stateMachine:${logicalId}`;
}

export type LambdaCode = 'bundle' | 'source';

export interface LocalExecution {
  /** Clients for the embedded stack (source mode injects them into the handlers). */
  readonly clients: Clients;
  /** The embedded stack's endpoints (bundle mode points the functions' SDK at them). */
  readonly endpoints: Endpoints;
  readonly tables: TableNames;
  readonly bucket: string;
  /** The execution's name: the lease's holder. Unique per execution, as in AWS. */
  readonly name: string;
  readonly input: Json;
  /** Context overrides for the synth (leaseMs, invoices, chunkSize, …), validated like cdk.json. */
  readonly settings?: Json;
  readonly onEvent?: EventListener;
  /**
   * `bundle` (default): the functions' bundled assets, each in its own process. `source`: the handlers' sources
   * in this process, for a test that steps through the core with `hooks.afterCheck`; one execution per process.
   */
  readonly lambdaCode?: LambdaCode;
  readonly hooks?: BillingHooks & { afterTask?(state: string, output: unknown): void | Promise<void> };
}

export interface LocalResult {
  /** SUCCEEDED or FAILED, as Step Functions would report it. */
  readonly status: 'SUCCEEDED' | 'FAILED';
  /** The final state's name (Completed, AlreadyDone, Lost, InvalidInput, ClaimBudgetExhausted, Failed). */
  readonly endState: string | undefined;
  readonly output?: Json;
  readonly error?: string;
  readonly cause?: string;
  /** What happened to each state, in order (entered, failed with which error, retried, caught), as an execution's history shows. */
  readonly history: readonly HistoryEvent[];
}

export interface HistoryEvent {
  readonly type: 'StateEntered' | 'StateFailed' | 'StateRetried' | 'StateCaught';
  readonly state: string;
  /** The Map iteration, for states inside the Map. */
  readonly index?: number;
  /** StateFailed: the error's name, which Retry and Catch match. */
  readonly error?: string;
}

/** Task state → the function to call for it, in the chosen mode. */
type TaskCalls = Record<string, (input: unknown) => Promise<unknown>>;

/** Execute the synthesized billing workflow once. */
export async function runWorkflowLocally(run: LocalExecution): Promise<LocalResult> {
  return runMachineLocally(synthesizeWorkflow(run.settings), 'billing', run);
}

export interface SweeperRun extends Omit<LocalExecution, 'input' | 'hooks' | 'lambdaCode' | 'name'> {
  readonly name?: string;
}

export interface SweeperResult extends LocalResult {
  /** The billing executions VerifyAndRequeue started through the local Step Functions endpoint, once they closed. */
  readonly started: readonly { readonly name: string; readonly input: unknown; readonly result: LocalResult }[];
}

/**
 * Execute the synthesized sweeper state machine once, bundles only. Its StartExecution calls reach a local Step
 * Functions endpoint (local/sfn-endpoint.ts) that runs each re-queued night through the billing workflow.
 */
export async function runSweeperLocally(run: SweeperRun): Promise<SweeperResult> {
  const wf = synthesizeWorkflow(run.settings);
  const billingArn = localStateMachineArn(wf.billing.logicalId);
  const sfn = await startLocalSfn({
    machines: { [billingArn]: (name, input) => runMachineLocally(wf, 'billing', { ...run, name, input: input as Json }) },
    onCall: callLog(),
  });
  try {
    const result = await runMachineLocally(wf, 'sweeper', { ...run, name: run.name ?? 'sweep', input: {} }, sfn.endpoint);
    const started = await Promise.all(
      sfn.executions.map(async (e) => ({ name: e.name, input: JSON.parse(e.input) as unknown, result: (await e.done) as LocalResult })),
    );
    return { ...result, started };
  } finally {
    await sfn.stop();
  }
}

/** Where the local Step Functions records the invocations it makes, when a call log is kept (the IAM proof). */
function callLog(): CallSink | undefined {
  const file = process.env.FENCEPOST_CALL_LOG;
  return file ? fileCallSink(file) : undefined;
}

async function runMachineLocally(
  wf: SynthesizedWorkflow,
  which: 'billing' | 'sweeper',
  run: LocalExecution,
  sfnEndpoint?: string,
): Promise<LocalResult> {
  const machine = wf[which];
  const code = run.lambdaCode ?? 'bundle';
  if (code === 'bundle' && run.hooks?.afterCheck) {
    throw new ConfigError([
      "a fault point between a check and a write steps through the core library: it needs the handlers' sources (FENCEPOST_LAMBDA_CODE=source)",
    ]);
  }
  if (code === 'source' && which !== 'billing') throw new Error('only the billing workflow has a source mode');
  const local = {
    [Env.lockTable]: run.tables.locks,
    [Env.jobTable]: run.tables.jobs,
    [Env.invoiceTable]: run.tables.invoices,
    [Env.bucket]: run.bucket,
  };
  let lambdas: LocalLambdas | undefined;
  let calls: TaskCalls;
  if (code === 'bundle') {
    const functions: Record<string, DeployedFunction> = {};
    for (const [id, fn] of Object.entries(wf.functions)) {
      functions[id] = { ...fn, environment: { ...resolveEnvironment(fn.environment, wf), ...local, [Env.worker]: run.name } };
    }
    const echo = process.env.FENCEPOST_LAMBDA_LOG_LEVEL ? (id: string, line: string) => process.stderr.write(`[${id}] ${line}\n`) : undefined;
    lambdas = new LocalLambdas({
      functions,
      endpoints: { ...run.endpoints, sfn: sfnEndpoint },
      onEvent: run.onEvent,
      onLog: echo,
      prewarm: Object.values(machine.taskFunctions),
    });
    const record = callLog();
    calls = Object.fromEntries(
      Object.entries(machine.taskFunctions).map(([state, id]) => [
        state,
        (input: unknown) => {
          // Step Functions invokes the function with the state machine's role: the IAM proof checks that grant too.
          record?.({ principal: machine.logicalId, service: 'lambda', operation: 'Invoke', target: id });
          return lambdas!.invoke(id, input);
        },
      ]),
    );
  } else {
    calls = sourceHandlers(run, wf, local);
  }
  try {
    return await execute(machine, calls, run);
  } finally {
    await lambdas?.close();
  }
}

/** Template values → local ones: the references a function's environment holds are to tables, the bucket, a state machine. */
function resolveEnvironment(environment: Record<string, unknown>, wf: SynthesizedWorkflow): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(environment)) {
    if (typeof v === 'string') out[k] = v;
    else if ((v as Json)?.Ref === wf.billing.logicalId) out[k] = localStateMachineArn(wf.billing.logicalId);
    // Table and bucket references are set from the run's own names (the caller's `local`).
  }
  return out;
}

/** Source mode: the handlers' TypeScript in this process, with the run's clients, listener and hooks attached. */
function sourceHandlers(run: LocalExecution, wf: SynthesizedWorkflow, local: Record<string, string>): TaskCalls {
  const logLevel = process.env.FENCEPOST_LAMBDA_LOG_LEVEL ?? 'SILENT'; // the handlers' Powertools logs, e.g. INFO
  for (const [k, v] of Object.entries(wf.environment)) if (typeof v === 'string') process.env[k] = v;
  Object.assign(process.env, {
    ...local,
    [Env.worker]: run.name,
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_TRACE_ENABLED: 'false',
    POWERTOOLS_LOG_LEVEL: logLevel,
  });
  // Imported only now: Powertools reads its settings from the environment when the handlers' modules load.
  const { attachLocal } = require('../lambda/runtime') as typeof import('../lambda/runtime');
  const { handlers } = require('../lambda/index') as typeof import('../lambda/index');
  attachLocal({ clients: run.clients, onEvent: run.onEvent, hooks: run.hooks });
  return Object.fromEntries(Object.entries(wf.taskHandlers).map(([state, name]) => [state, handlers[name] as (e: unknown) => Promise<unknown>]));
}

async function execute(machine: SynthesizedMachine, calls: TaskCalls, run: LocalExecution): Promise<LocalResult> {
  const { StateMachine } = await import('aws-local-stepfunctions');
  // A Distributed Map runs as an inline Map with AWS's routing for a failed child (local/distributed-map.ts).
  const definition = toLocalDefinition(machine.definition);
  const sm = new StateMachine(definition as never, { validationOptions: { checkArn: false } });
  // Step Functions stops every iteration of a Map once one has failed; aws-local-stepfunctions still starts the
  // iterations it had queued. An iteration started after its Map failed is stopped here, before it invokes anything.
  const maps = mapsOf(definition);
  const failedMaps = new Set<string>();
  const taskResourceLocalHandlers = Object.fromEntries(
    Object.entries(calls).map(([state, call]) => [
      state,
      async (input: unknown) => {
        const map = maps[state];
        if (map && failedMaps.has(map.name)) throw new IterationStopped(map.name); // the Map has already failed: nobody reads this
        try {
          const output = await call(input);
          await run.hooks?.afterTask?.(state, output);
          return output;
        } catch (err) {
          if (map && !map.retried((err as Error).name)) failedMaps.add(map.name);
          throw err;
        }
      },
    ]),
  );
  const execution = sm.run(run.input as never, {
    overrides: { taskResourceLocalHandlers: taskResourceLocalHandlers as never },
    context: { Execution: { Id: `local:${run.name}`, Name: run.name, Input: run.input as never, StartTime: new Date().toISOString() } },
  });
  let endState: string | undefined;
  const history: HistoryEvent[] = [];
  const watch = (async () => {
    for await (const ev of execution.eventLogs as AsyncIterable<Json>) {
      if (!['StateEntered', 'StateFailed', 'StateRetried', 'StateCaught'].includes(String(ev.type))) continue;
      const state = String((ev.state as Json).name);
      history.push({
        type: ev.type as HistoryEvent['type'],
        state,
        ...(ev.index === undefined ? {} : { index: Number(ev.index) }),
        ...(ev.type === 'StateFailed' ? { error: String(ev.Error) } : {}),
      });
      if (ev.type === 'StateEntered' && ev.index === undefined) endState = state; // top level only, not Map iterations
    }
  })();
  try {
    const output = (await execution.result) as Json;
    await watch.catch(() => undefined);
    return { status: 'SUCCEEDED', endState, output, history };
  } catch (err) {
    await watch.catch(() => undefined);
    const e = err as { name?: string; message?: string; cause?: unknown };
    return { status: 'FAILED', endState, error: String((e as Json).error ?? e.name), cause: String((e as Json).cause ?? e.message), history };
  }
}
