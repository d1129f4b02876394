/**
 * Run the SYNTHESIZED state machine locally, with the code that deploys: the definition comes from the CDK
 * template (there is no second, hand-written copy of the workflow), executed by the npm package
 * aws-local-stepfunctions, and every Lambda task runs its function's BUNDLED asset from the cloud assembly (the
 * index.js `cdk deploy` uploads) in a local execution environment (lib/local/lambda-runner.ts), against the
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
 * Which stack runs is the caller's (a WorkflowApp: how to build the stack and find its fenced job; each reference app
 * has one): the local runner imports neither the constructs nor the handlers.
 *
 * aws-local-stepfunctions 3.0.0 declares Node >= 22 and calls Promise.withResolvers, which Node 20 lacks: the
 * polyfill below is installed in this local runner only (the functions themselves run on the runtime's Node).
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { App, Stack } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import type { EventListener } from '../core/events';
import type { RunHooks } from '../core/job';
import type { Clients, Endpoints } from '../core/aws/clients';
import { ConfigError } from '../core/errors';
import type { CallSink } from './call-log';
import { toLocalDefinition } from './distributed-map';
import { LocalLambdas, type DeployedFunction } from './lambda-runner';
import { startLocalSfn, type RefuseStart } from './sfn-endpoint';
import { LOCAL_RUN_CONTEXT } from '../core/config';

type Json = Record<string, unknown>;
export type Resource = { Type: string; Properties: Json; Metadata?: Json };

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

const ROOT = path.resolve(__dirname, '../..');
/** Loads a module when first needed, synchronously (a synth runs in one synchronous call). */
const onDemand = createRequire(__filename);
const PLACEHOLDER = 'arn:aws:lambda:us-east-1:000000000000:function:';
const LOCAL_ARN = { account: '000000000000', region: 'us-east-1' };

/** A stack that holds a fenced job, as the local runner builds and runs it (each reference app under apps/ has one). */
export interface WorkflowApp {
  /** Names the synth cache's entries. */
  readonly name: string;
  /** The local-run contract's environment variables: which handler module a function runs, the name its events carry. */
  readonly variables: { readonly handler: string; readonly worker: string };
  /** Build the stack in `app` (which holds cdk.json's context) with `settings` over the app's own configuration. */
  build(app: App, settings: Json): WorkflowStack;
  /** Source mode: the job's handlers by name, made in this process from this environment, clients, listener and hooks. */
  handlers?(runtime: SourceRuntime): Record<string, (event: unknown) => Promise<unknown>>;
}

/** What a WorkflowApp built: the stack, its fenced job's two state machines, and the stores its functions name. */
interface WorkflowStack {
  readonly stack: Stack;
  /** The job's state machine. */
  readonly job: IConstruct;
  /** The orphan sweeper's state machine. */
  readonly sweeper: IConstruct;
  /** The tables, by the name a local run gives them (any names: the lock and job tables, and the job's own). */
  readonly tables: Readonly<Record<string, IConstruct>>;
  /** The manifest bucket; none for a job whose chunks write no manifest. */
  readonly bucket?: IConstruct;
}

/** What source mode makes the handlers from. */
interface SourceRuntime {
  /** The job functions' environment, every reference resolved to a local value. */
  readonly environment: Readonly<Record<string, string>>;
  readonly clients: Clients;
  readonly onEvent?: EventListener;
  readonly hooks?: RunHooks;
}

/** One state machine of the template. */
interface SynthesizedMachine {
  readonly logicalId: string;
  /** The Amazon States Language definition, as deployed, with placeholder function ARNs. */
  readonly definition: Json;
  /** Task state name → the logical id of the function it invokes. */
  readonly taskFunctions: Record<string, string>;
}

export interface SynthesizedWorkflow {
  /** The job's state machine's definition (= job.definition). */
  readonly definition: Json;
  /** The job's task state name → the handler it invokes. */
  readonly taskHandlers: Record<string, string>;
  /** The job's functions' environment from the template (table and bucket references left unresolved). */
  readonly environment: Record<string, unknown>;
  readonly job: SynthesizedMachine;
  readonly sweeper: SynthesizedMachine;
  /** Every function of the stack, by logical id, with its bundled asset (environment references unresolved). */
  readonly functions: Record<string, Omit<DeployedFunction, 'environment'> & { readonly environment: Record<string, unknown> }>;
  /**
   * The logical ids of the stores the functions' environments reference: each table by its local name, the manifest
   * bucket (a job that writes no manifest has none), and any other bucket by its local name (a user's app: `fencepost run`).
   */
  readonly stores: {
    readonly tables: Readonly<Record<string, string>>;
    readonly bucket?: string;
    readonly buckets?: Readonly<Record<string, string>>;
  };
  /** The local-run contract's variables (WorkflowApp.variables). */
  readonly variables: WorkflowApp['variables'];
}

const CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'fencepost');
/** Bundled assets, by content hash, shared by every cached assembly (the code does not depend on the settings). */
const ASSETS_DIR = path.join(CACHE_DIR, 'assets');

/**
 * The app's stack synthesized with these overrides, from the cache when nothing it depends on has changed. A cold
 * synth with bundling costs about ten seconds, nearly all of it esbuild; the key covers every input of the synth, so a
 * stale definition or a stale bundle cannot be run. New overrides reuse the bundles of an earlier synth of the same
 * sources where they can (synthesizeReusingBundles). FENCEPOST_SYNTH_CACHE=off always synthesizes and bundles.
 */
export function synthesizeWorkflow(app: WorkflowApp, overrides: Json = {}): SynthesizedWorkflow {
  if (process.env.FENCEPOST_SYNTH_CACHE === 'off') return synthesizeWorkflowNow(app, overrides);
  const file = path.join(CACHE_DIR, `workflow-${app.name}-${workflowCacheKey(app, overrides)}.json`);
  try {
    const wf = JSON.parse(readFileSync(file, 'utf8')) as SynthesizedWorkflow;
    for (const fn of Object.values(wf.functions)) readFileSync(path.join(fn.assetDir, 'index.js'), { flag: 'r' }).subarray(0, 1);
    return wf;
  } catch {
    const wf = synthesizeReusingBundles(app, overrides);
    writeAtomically(file, wf);
    return wf;
  }
}

/** Write then rename: a concurrent run never reads half a file. */
function writeAtomically(file: string, value: unknown): void {
  mkdirSync(CACHE_DIR, { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(value));
  renameSync(tmp, file);
}

/**
 * A function's bundle depends on the sources and on how it is bundled, not on the settings a synth is given, and
 * bundling again costs about a second of esbuild per function. So a synth first runs without bundling (CDK's
 * `aws:cdk:bundling-stacks` context set to none), which names each function's code by its construct path and its
 * bundling options (entry and esbuild flags), and takes each function's bundle recorded under that name for the same
 * sources (bundleIndexFile). If any function has none, or its bundle is gone, the synth runs again with esbuild, and
 * its bundles are recorded for the next one. Either way the result is what synthesizeWorkflowNow returns.
 */
export function synthesizeReusingBundles(app: WorkflowApp, overrides: Json = {}): SynthesizedWorkflow {
  const file = bundleIndexFile(app);
  let index: Record<string, string> = {};
  try {
    index = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
  } catch {
    // No index yet, or a damaged one: every function is bundled below.
  }
  const unbundled = synthesize(app, overrides, false);
  const reused = (name: string) => {
    const dir = index[name] && path.join(ASSETS_DIR, index[name]);
    return dir && existsSync(path.join(dir, 'index.js')) ? dir : undefined;
  };
  if (Object.values(unbundled.codeNames).every((name) => reused(name))) {
    const functions = Object.fromEntries(
      Object.entries(unbundled.wf.functions).map(([id, fn]) => [id, { ...fn, assetDir: reused(unbundled.codeNames[id])! }]),
    );
    return { ...unbundled.wf, functions };
  }
  const bundled = synthesizeWorkflowNow(app, overrides);
  for (const [id, name] of Object.entries(unbundled.codeNames)) index[name] = path.basename(bundled.functions[id].assetDir);
  writeAtomically(file, index);
  return bundled;
}

/** Where the bundles of an app's functions are recorded, by the name an unbundled synth gives each: one file per sources. */
export function bundleIndexFile(app: WorkflowApp): string {
  return path.join(CACHE_DIR, `bundles-${app.name}-${workflowCacheKey(app, null)}.json`);
}

/** Every folder whose sources a synth may read: the core, the constructs, the handlers, the apps built on them. */
const SYNTH_SOURCES = ['lib', 'lambda', 'apps'];

/**
 * What the synth reads: the app and the overrides, cdk.json, the locked dependency versions (aws-cdk-lib,
 * esbuild), and every source file of the stacks, the handlers and the core they import. Hashing them all costs a
 * few ms. `null` overrides: the key of what the bundles are made from alone.
 */
export function workflowCacheKey(app: WorkflowApp, overrides: Json | null): string {
  const h = createHash('sha256').update(app.name).update('\0').update(JSON.stringify(overrides));
  const files = [
    'cdk.json',
    'package-lock.json',
    ...SYNTH_SOURCES.filter((dir) => existsSync(path.join(ROOT, dir))).flatMap((dir) => sourcesUnder(dir)),
  ];
  for (const f of files) h.update(`\0${f}\0`).update(readFileSync(path.join(ROOT, f)));
  return h.digest('hex').slice(0, 32);
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f))
    .sort();
}

/** Synthesize the app's stack, bundles included, from cdk.json's context (with overrides), and read what runs. */
export function synthesizeWorkflowNow(app: WorkflowApp, overrides: Json = {}): SynthesizedWorkflow {
  return synthesize(app, overrides, true).wf;
}

/**
 * One synth. Bundled, each function's assetDir is its bundle, moved to the shared assets folder. Unbundled, no esbuild
 * runs and assetDir is left empty; `codeNames` gives, by function, the name CDK gave its unbundled code instead.
 */
function synthesize(app: WorkflowApp, overrides: Json, bundle: boolean): { wf: SynthesizedWorkflow; codeNames: Record<string, string> } {
  // Loaded here, not at the top: a cached synth needs neither aws-cdk-lib nor the stack.
  const cdk = onDemand('aws-cdk-lib') as typeof import('aws-cdk-lib');
  const cdkJson = JSON.parse(readFileSync(path.join(ROOT, 'cdk.json'), 'utf8')) as { context: Json };
  mkdirSync(CACHE_DIR, { recursive: true });
  const outdir = mkdtempSync(path.join(CACHE_DIR, 'synth-'));
  try {
    const context = {
      ...cdkJson.context,
      // Locally, no cold start nor Map Run sits between renewals: short test leases are not refused (lib/constructs/renewal-gap.ts).
      [LOCAL_RUN_CONTEXT]: true,
      ...(bundle ? {} : { [BUNDLING_STACKS]: [] }),
    };
    const scope = new cdk.App({ context, outdir, builtinCloudFormationValidation: false });
    // The functions are bundled (unless told not to) as their constructs are built.
    const built = quietly(() => app.build(scope, overrides));
    const stack = built.stack;
    const template = scope.synth().getStackByName(stack.stackName).template as { Resources: Record<string, Resource> };
    const idOf = (c: IConstruct) => stack.getLogicalId(c.node.defaultChild as never);
    const functions: SynthesizedWorkflow['functions'] = {};
    const codeNames: Record<string, string> = {};
    for (const [id, r] of Object.entries(template.Resources)) {
      if (r.Type !== 'AWS::Lambda::Function') continue;
      codeNames[id] = String((r.Properties.Code as Json).S3Key);
      functions[id] = bundle
        ? deployedFunction(id, r.Properties, outdir, app.variables.handler)
        : functionAt(id, r.Properties, '', app.variables.handler);
    }
    const job = machine(idOf(built.job), template.Resources, functions);
    const sweeper = machine(idOf(built.sweeper), template.Resources, functions);
    const taskHandlers: Record<string, string> = {};
    let environment: Record<string, unknown> = {};
    for (const [state, id] of Object.entries(job.taskFunctions)) {
      taskHandlers[state] = functions[id].handlerName;
      environment = { ...environment, ...functions[id].environment };
    }
    const tables = Object.fromEntries(Object.entries(built.tables).map(([name, table]) => [name, idOf(table)])) as Record<string, string>;
    const stores = { tables, bucket: built.bucket && idOf(built.bucket) };
    const wf = { definition: job.definition, taskHandlers, environment, job, sweeper, functions, stores, variables: app.variables };
    return { wf, codeNames };
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}

/** CDK's context key naming the stacks whose assets are bundled (cx-api's BUNDLING_STACKS); none: no esbuild runs. */
const BUNDLING_STACKS = 'aws:cdk:bundling-stacks';

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
function deployedFunction(logicalId: string, p: Json, outdir: string, handlerVariable: string): SynthesizedWorkflow['functions'][string] {
  const hash = String((p.Code as Json).S3Key).replace(/\.zip$/, '');
  const assetDir = path.join(ASSETS_DIR, `asset.${hash}`);
  mkdirSync(ASSETS_DIR, { recursive: true });
  try {
    renameSync(path.join(outdir, `asset.${hash}`), assetDir);
  } catch (err) {
    // Already there from an earlier synth: the hash names the content, so it is the same bundle.
    if (!['ENOTEMPTY', 'EEXIST'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
  }
  return functionAt(logicalId, p, assetDir, handlerVariable);
}

/** A function's deployment from its template properties, its bundle in `assetDir` (environment references unresolved). */
export function functionAt(logicalId: string, p: Json, assetDir: string, handlerVariable: string): SynthesizedWorkflow['functions'][string] {
  const environment = ((p.Environment as Json)?.Variables ?? {}) as Record<string, unknown>;
  return {
    logicalId,
    handlerName: String(environment[handlerVariable]),
    assetDir,
    handler: String(p.Handler),
    runtime: String(p.Runtime),
    timeoutSeconds: Number(p.Timeout ?? 3),
    memoryMb: Number(p.MemorySize ?? 128),
    environment,
  };
}

/** A state machine of the template, its tasks mapped to the functions (of `functions`) they invoke. */
export function machine(logicalId: string, resources: Record<string, Resource>, functions: SynthesizedWorkflow['functions']): SynthesizedMachine {
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
function localStateMachineArn(logicalId: string): string {
  return `arn:aws:states:${LOCAL_ARN.region}:${LOCAL_ARN.account}:stateMachine:${logicalId}`;
}

export type LambdaCode = 'bundle' | 'source';

export interface LocalExecution {
  /** The stack whose job runs (a reference app's WorkflowApp). */
  readonly app: WorkflowApp;
  /** Clients for the embedded stack (source mode injects them into the handlers). */
  readonly clients: Clients;
  /** The embedded stack's endpoints (bundle mode points the functions' SDK at them). */
  readonly endpoints: Endpoints;
  /** The local tables' names, by the names the app gives its tables (WorkflowApp.build's `tables`). */
  readonly tables: Readonly<Record<string, string>>;
  /** The manifest bucket's local name; none for a job that writes no manifest. */
  readonly bucket?: string;
  /** The local names of the other buckets, by the names SynthesizedWorkflow.stores.buckets gives them. */
  readonly buckets?: Readonly<Record<string, string>>;
  /** The execution's name: the lease's holder. Unique per execution, as in AWS. */
  readonly name: string;
  readonly input: Json;
  /** Context overrides for the synth (leaseMs, the job's own sizes, …), validated like cdk.json. */
  readonly settings?: Json;
  readonly onEvent?: EventListener;
  /** Told of each call the local Step Functions makes: a task's Lambda Invoke, the sweeper's StartExecution (lib/local/call-log.ts). */
  readonly onCall?: CallSink;
  /**
   * `bundle` (default): the functions' bundled assets, each in its own process. `source`: the handlers' sources
   * in this process, for a test that steps through the core with `hooks.afterCheck`; one execution per process.
   */
  readonly lambdaCode?: LambdaCode;
  readonly hooks?: RunHooks & { afterTask?(state: string, output: unknown): void | Promise<void> };
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

interface HistoryEvent {
  readonly type: 'StateEntered' | 'StateFailed' | 'StateRetried' | 'StateCaught';
  readonly state: string;
  /** The Map iteration, for states inside the Map. */
  readonly index?: number;
  /** StateFailed: the error's name, which Retry and Catch match. */
  readonly error?: string;
}

/** Task state → the function to call for it, in the chosen mode. */
type TaskCalls = Record<string, (input: unknown) => Promise<unknown>>;

/** Execute the app's synthesized job workflow once. */
export async function runWorkflowLocally(run: LocalExecution): Promise<LocalResult> {
  return runMachineLocally(synthesizeWorkflow(run.app, run.settings), 'job', run);
}

/** An execution of a workflow read from a cloud assembly (lib/cli/assembly.ts): no app to build, bundles only. */
export type AssemblyExecution = Omit<LocalExecution, 'app' | 'settings' | 'lambdaCode'>;

/** Execute an already synthesized job workflow once (a user's app, `fencepost run`), on its bundles. */
export async function runSynthesizedLocally(wf: SynthesizedWorkflow, run: AssemblyExecution): Promise<LocalResult> {
  return runMachineLocally(wf, 'job', run);
}

export interface SweeperRun extends Omit<LocalExecution, 'input' | 'hooks' | 'lambdaCode' | 'name'> {
  readonly name?: string;
  /** Refuse some of VerifyAndRequeue's StartExecution calls (tests: a start throttled away, or a death after it). */
  readonly refuseStart?: RefuseStart;
  /**
   * Kill some of the job executions it starts (tests: a re-queued run that dies before its first task). A killed
   * execution does nothing and closes FAILED, so its name is taken. @default - none
   */
  readonly killStarted?: (name: string) => boolean;
}

export interface SweeperResult extends LocalResult {
  /** The job executions VerifyAndRequeue started through the local Step Functions endpoint, once they closed. */
  readonly started: readonly { readonly name: string; readonly input: unknown; readonly result: LocalResult }[];
}

/**
 * Execute the synthesized sweeper state machine once, bundles only. Its StartExecution calls reach a local Step
 * Functions endpoint (lib/local/sfn-endpoint.ts) that runs each re-queued run through the job's workflow.
 */
export async function runSweeperLocally(run: SweeperRun): Promise<SweeperResult> {
  const wf = synthesizeWorkflow(run.app, run.settings);
  const jobArn = localStateMachineArn(wf.job.logicalId);
  const sfn = await startLocalSfn({
    machines: {
      [jobArn]: async (name, input) =>
        run.killStarted?.(name)
          ? { status: 'FAILED', endState: undefined, error: 'Killed', cause: 'killed by the test before its first task', history: [] }
          : runMachineLocally(wf, 'job', { ...run, name, input: input as Json }),
    },
    onCall: run.onCall,
    refuse: run.refuseStart,
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

async function runMachineLocally(
  wf: SynthesizedWorkflow,
  which: 'job' | 'sweeper',
  run: AssemblyExecution & Partial<Pick<LocalExecution, 'app' | 'lambdaCode'>>,
  sfnEndpoint?: string,
): Promise<LocalResult> {
  const machine = wf[which];
  const code = run.lambdaCode ?? 'bundle';
  if (code === 'bundle' && run.hooks?.afterCheck) {
    throw new ConfigError([
      "a fault point between a check and a write steps through the core library: it needs the handlers' sources (lambdaCode: 'source'; the harness's fault preload asks for them)",
    ]);
  }
  if (code === 'source' && which !== 'job') throw new Error("only the job's workflow has a source mode");
  let lambdas: LocalLambdas | undefined;
  let calls: TaskCalls;
  if (code === 'bundle') {
    const functions: Record<string, DeployedFunction> = {};
    for (const [id, fn] of Object.entries(wf.functions)) {
      functions[id] = { ...fn, environment: { ...resolveEnvironment(fn.environment, wf, run), [wf.variables.worker]: run.name } };
    }
    const echo = process.env.FENCEPOST_LAMBDA_LOG_LEVEL ? (id: string, line: string) => process.stderr.write(`[${id}] ${line}\n`) : undefined;
    lambdas = new LocalLambdas({
      functions,
      endpoints: { ...run.endpoints, sfn: sfnEndpoint },
      onEvent: run.onEvent,
      onLog: echo,
      prewarm: Object.values(machine.taskFunctions),
    });
    const record = run.onCall;
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
    if (!run.app) throw new ConfigError(['a workflow read from a cloud assembly runs its bundles only']);
    calls = sourceHandlers({ ...run, app: run.app }, wf);
  }
  try {
    return await execute(machine, calls, run);
  } finally {
    await lambdas?.close();
  }
}

/**
 * Template values → local ones. A function's environment references the stack's tables and bucket (each becomes
 * the run's own name for it) and the job's state machine (its local ARN); any other reference is refused.
 */
function resolveEnvironment(
  environment: Record<string, unknown>,
  wf: SynthesizedWorkflow,
  run: Pick<LocalExecution, 'tables' | 'bucket' | 'buckets'>,
): Record<string, string> {
  const local = new Map<string, string>([
    ...Object.entries(wf.stores.tables).map(([name, id]) => [id, run.tables[name]] as const),
    ...(wf.stores.bucket && run.bucket ? [[wf.stores.bucket, run.bucket] as const] : []),
    ...Object.entries(wf.stores.buckets ?? {}).map(([name, id]) => [id, run.buckets?.[name] ?? ''] as const),
    [wf.job.logicalId, localStateMachineArn(wf.job.logicalId)],
  ]);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(environment)) {
    const ref = (v as Json | undefined)?.Ref;
    if (typeof v === 'string') out[k] = v;
    else if (typeof ref === 'string' && local.has(ref)) out[k] = local.get(ref)!;
    else throw new Error(`${k}: ${JSON.stringify(v)} names nothing the local run provides (a table, the bucket or the job's state machine)`);
  }
  return out;
}

/** Source mode: the handlers' TypeScript in this process, made by the app from the run's clients, listener and hooks. */
function sourceHandlers(run: LocalExecution, wf: SynthesizedWorkflow): TaskCalls {
  if (!run.app.handlers) throw new ConfigError([`${run.app.name} has no source mode: it runs its bundles only`]);
  const logLevel = process.env.FENCEPOST_LAMBDA_LOG_LEVEL ?? 'SILENT'; // the handlers' Powertools logs, e.g. INFO
  // Powertools reads its settings from the process's environment when the handlers' modules load.
  Object.assign(process.env, { POWERTOOLS_METRICS_DISABLED: 'true', POWERTOOLS_TRACE_ENABLED: 'false', POWERTOOLS_LOG_LEVEL: logLevel });
  const environment = { ...resolveEnvironment(wf.environment, wf, run), [wf.variables.worker]: run.name };
  const handlers = run.app.handlers({ environment, clients: run.clients, onEvent: run.onEvent, hooks: run.hooks });
  return Object.fromEntries(
    Object.entries(wf.taskHandlers).map(([state, name]) => {
      const handler = handlers[name];
      if (!handler) throw new Error(`task ${state} runs handler ${name}, which ${run.app.name} does not make`);
      return [state, handler];
    }),
  );
}

async function execute(machine: SynthesizedMachine, calls: TaskCalls, run: AssemblyExecution): Promise<LocalResult> {
  const { StateMachine } = await import('aws-local-stepfunctions');
  // A Distributed Map runs as an inline Map with AWS's routing for a failed child (lib/local/distributed-map.ts).
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
