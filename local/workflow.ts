/**
 * Run the SYNTHESIZED billing state machine locally: the definition comes from the CDK template (there is no
 * second, hand-written copy of the workflow), executed by the npm package aws-local-stepfunctions, with every
 * Lambda task mapped to the same handler module the cloud runs (lambda/index.ts), against the embedded stack.
 *
 * How the template becomes a runnable definition:
 *   1. synthesize the stack in-process from cdk.json's context (plus overrides), with asset bundling skipped
 *      (cached: see workflowCacheKey);
 *   2. resolve the DefinitionString's Fn::Join, replacing each function's Fn::GetAtt with a placeholder ARN
 *      that names the function's logical id;
 *   3. map each Task state to the handler named by that function's FENCEPOST_HANDLER variable;
 *   4. set the handlers' environment from the template, with the tables and the bucket replaced by the local ones.
 *
 * aws-local-stepfunctions 3.0.0 declares Node ≥ 22 and calls Promise.withResolvers, which Node 20 lacks: the
 * polyfill below is installed in this local runner only (the Lambdas run on Node 24 in AWS).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { BillingHooks } from '../lib/core/billing';
import type { EventListener } from '../lib/core/events';
import type { TableNames } from '../lib/core/schema';
import type { Clients } from '../lib/core/stores';
import type { HandlerName } from '../lambda/index';
import { Env } from '../lambda/env';

type Json = Record<string, unknown>;

if (typeof (Promise as { withResolvers?: unknown }).withResolvers !== 'function') {
  (Promise as unknown as { withResolvers: () => unknown }).withResolvers = function withResolvers<T>() {
    let resolve!: (v: T) => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<T>((res, rej) => { resolve = res; reject = rej; });
    return { promise, resolve, reject };
  };
}

const ROOT = path.resolve(__dirname, '..');
const PLACEHOLDER = 'arn:aws:lambda:us-east-1:000000000000:function:';

export interface SynthesizedWorkflow {
  /** The Amazon States Language definition, as deployed, with placeholder function ARNs. */
  readonly definition: Json;
  /** Task state name → the handler it invokes. */
  readonly taskHandlers: Record<string, HandlerName>;
  /** The functions' environment from the template (table and bucket references left unresolved). */
  readonly environment: Record<string, unknown>;
}

const CACHE_DIR = path.join(ROOT, 'node_modules', '.cache', 'fencepost');

/**
 * The synthesized workflow for these overrides, from the cache when nothing it depends on has changed. A cold CDK
 * synth costs every `fencepost run` about 1.5 s (bench/waste.ts); the key covers every input of the synth, so a
 * stale definition cannot be run. FENCEPOST_SYNTH_CACHE=off always synthesizes.
 */
export function synthesizeWorkflow(overrides: Json = {}): SynthesizedWorkflow {
  if (process.env.FENCEPOST_SYNTH_CACHE === 'off') return synthesizeWorkflowNow(overrides);
  const file = path.join(CACHE_DIR, `workflow-${workflowCacheKey(overrides)}.json`);
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as SynthesizedWorkflow;
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
 * What the synth reads: the overrides, cdk.json, the locked dependency versions (aws-cdk-lib), and every source
 * file of the stack, the handlers and the core they import. Hashing them all costs a few ms.
 */
export function workflowCacheKey(overrides: Json): string {
  const h = createHash('sha256').update(JSON.stringify(overrides));
  const files = ['cdk.json', 'package-lock.json', ...['lib', 'lambda'].flatMap((dir) => sourcesUnder(dir))];
  for (const f of files) h.update(`\0${f}\0`).update(readFileSync(path.join(ROOT, f)));
  return h.digest('hex').slice(0, 32);
}

function sourcesUnder(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f))
    .sort();
}

/** Synthesize the stack from cdk.json's context (with overrides) and pull out the billing state machine. */
export function synthesizeWorkflowNow(overrides: Json = {}): SynthesizedWorkflow {
  // Loaded here, not at the top: a cached definition needs neither aws-cdk-lib nor the stack.
  const { App } = require('aws-cdk-lib') as typeof import('aws-cdk-lib');
  const { CONTEXT_KEY, readStackConfig } = require('../lib/stack/config') as typeof import('../lib/stack/config');
  const { FencepostStack } = require('../lib/stack/fencepost-stack') as typeof import('../lib/stack/fencepost-stack');
  const cdkJson = JSON.parse(readFileSync(path.join(ROOT, 'cdk.json'), 'utf8')) as { context: Json };
  const context = { ...cdkJson.context, [CONTEXT_KEY]: { ...(cdkJson.context[CONTEXT_KEY] as Json), ...overrides }, 'aws:cdk:bundling-stacks': [] };
  const app = new App({ context, builtinCloudFormationValidation: false });
  const stack = new FencepostStack(app, 'Fencepost', { config: readStackConfig(app) });
  const template = app.synth().getStackByName(stack.stackName).template as { Resources: Record<string, { Type: string; Properties: Json }> };
  const machineId = stack.getLogicalId(stack.billing.stateMachine.node.defaultChild as never);
  const definition = JSON.parse(resolveJoin(template.Resources[machineId].Properties.DefinitionString)) as Json;

  const taskHandlers: Record<string, HandlerName> = {};
  let environment: Record<string, unknown> = {};
  forEachState(definition, (name, state) => {
    if (state.Type !== 'Task') return;
    const resource = String(state.Resource);
    if (!resource.startsWith(PLACEHOLDER)) throw new Error(`task ${name} does not invoke a function of this stack: ${resource}`);
    const fn = template.Resources[resource.slice(PLACEHOLDER.length)];
    const vars = ((fn.Properties.Environment as Json)?.Variables ?? {}) as Record<string, unknown>;
    taskHandlers[name] = vars[Env.handler] as HandlerName;
    environment = { ...environment, ...vars };
  });
  return { definition, taskHandlers, environment };
}

/** Fn::Join of strings and intrinsic references → one string; a function's ARN becomes a placeholder naming it. */
function resolveJoin(value: unknown): string {
  if (typeof value === 'string') return value;
  const v = value as Json;
  if (v['Fn::Join']) {
    const [sep, parts] = v['Fn::Join'] as [string, unknown[]];
    return parts.map(resolveJoin).join(sep);
  }
  if (v['Fn::GetAtt']) return `${PLACEHOLDER}${(v['Fn::GetAtt'] as string[])[0]}`;
  if (v.Ref === 'AWS::Partition') return 'aws';
  if (v.Ref === 'AWS::Region') return 'us-east-1';
  if (v.Ref === 'AWS::AccountId') return '000000000000';
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

export interface LocalExecution {
  /** Clients for the embedded stack (the handlers use them instead of AWS's). */
  readonly clients: Clients;
  readonly tables: TableNames;
  readonly bucket: string;
  /** The execution's name: the lease's holder. Unique per execution, as in AWS. */
  readonly name: string;
  readonly input: Json;
  /** Context overrides for the synth (leaseMs, invoices, chunkSize, …), validated like cdk.json. */
  readonly settings?: Json;
  readonly onEvent?: EventListener;
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
}

/** Execute the synthesized workflow once, in this process. One execution per process: the handlers' runtime is per process. */
export async function runWorkflowLocally(run: LocalExecution): Promise<LocalResult> {
  const wf = synthesizeWorkflow(run.settings);
  const logLevel = process.env.FENCEPOST_LAMBDA_LOG_LEVEL ?? 'SILENT'; // the handlers' Powertools logs, e.g. INFO
  for (const [k, v] of Object.entries(wf.environment)) if (typeof v === 'string') process.env[k] = v;
  Object.assign(process.env, {
    [Env.lockTable]: run.tables.locks, [Env.jobTable]: run.tables.jobs, [Env.invoiceTable]: run.tables.invoices,
    [Env.bucket]: run.bucket, [Env.worker]: run.name,
    POWERTOOLS_METRICS_DISABLED: 'true', POWERTOOLS_TRACE_ENABLED: 'false', POWERTOOLS_LOG_LEVEL: logLevel,
  });
  // Imported only now: Powertools reads its settings from the environment when the handlers' modules load.
  const { attachLocal } = require('../lambda/runtime') as typeof import('../lambda/runtime');
  const { handlers } = require('../lambda/index') as typeof import('../lambda/index');
  attachLocal({ clients: run.clients, onEvent: run.onEvent, hooks: run.hooks });

  const { StateMachine } = await import('aws-local-stepfunctions');
  const machine = new StateMachine(wf.definition as never, { validationOptions: { checkArn: false } });
  const taskResourceLocalHandlers = Object.fromEntries(Object.entries(wf.taskHandlers).map(([state, name]) => [
    state,
    async (input: unknown) => {
      const output = await (handlers[name] as (e: unknown) => Promise<unknown>)(input);
      await run.hooks?.afterTask?.(state, output);
      return output;
    },
  ]));
  const execution = machine.run(run.input as never, {
    overrides: { taskResourceLocalHandlers: taskResourceLocalHandlers as never },
    context: { Execution: { Id: `local:${run.name}`, Name: run.name, Input: run.input as never, StartTime: new Date().toISOString() } },
  });
  let endState: string | undefined;
  const watch = (async () => {
    for await (const ev of execution.eventLogs as AsyncIterable<Json>) {
      if (ev.type === 'StateEntered' && ev.index === undefined) endState = String((ev.state as Json).name); // top level only, not Map iterations
    }
  })();
  try {
    const output = (await execution.result) as Json;
    await watch.catch(() => undefined);
    return { status: 'SUCCEEDED', endState, output };
  } catch (err) {
    await watch.catch(() => undefined);
    const e = err as { name?: string; message?: string; cause?: unknown };
    return { status: 'FAILED', endState, error: String((e as Json).error ?? e.name), cause: String((e as Json).cause ?? e.message) };
  }
}
