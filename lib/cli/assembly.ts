/**
 * A user's synthesized CDK app, as `fencepost run` reads it: the cloud assembly their app wrote (CDK_OUTDIR), its
 * stack templates, and each FencedJob in them, found by the metadata FencedJob puts on its two state machines
 * (FENCED_JOB_MARK). The workflow lib/local/workflow.ts runs is read from the template and the bundled assets as they
 * are: nothing is synthesized again, and only the functions the two state machines invoke are taken.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { describedTableInput } from '../core/aws/provision';
import { ConfigError } from '../core/errors';
import { JOB_TABLE, LOCK_TABLE } from '../core/schema';
import { Env, FENCED_JOB_MARK } from '../lambda/env';
import { functionAt, machine, resolveJoin, type Resource, type SynthesizedWorkflow } from '../local/workflow';

type Json = Record<string, unknown>;

const TABLE_TYPES = new Set(['AWS::DynamoDB::Table', 'AWS::DynamoDB::GlobalTable']);
/** The pseudo-parameters a function's environment may reference, resolved as the local ARNs are (lib/local/workflow.ts). */
const PSEUDO = new Set(['AWS::Region', 'AWS::AccountId', 'AWS::Partition', 'AWS::URLSuffix']);
/** DynamoDB's and S3's rules for a name: a table or bucket a job names literally is created under it. */
const TABLE_NAME = /^[A-Za-z0-9_.-]{3,255}$/;
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;

/** One FencedJob of the app, ready to run locally. */
export interface AssemblyJob {
  /** The job's name (FencedJob's `name`). */
  readonly name: string;
  /** The stack that holds it (its construct path: `Stage/Stack` inside a Stage). */
  readonly stack: string;
  readonly workflow: SynthesizedWorkflow;
  /** Chunks in one run. */
  readonly chunks: number;
  /** The schedule's time zone: the run's date is read in it. */
  readonly timeZone: string;
  /**
   * Every table of the stack, by logical id, and the lock and job tables the functions name literally (imported by
   * name), by that name: its local name, its role, and the request that creates it.
   */
  readonly tables: Readonly<
    Record<string, { readonly name: string; readonly role: 'locks' | 'jobs' | 'app'; readonly create: CreateTableCommandInput }>
  >;
  /** The manifest bucket's local name; none when the job writes no manifest (FencedJob's chunkWritesManifest: false). */
  readonly bucket?: string;
  /** The other buckets the functions name, by logical id: their local names. */
  readonly buckets: Readonly<Record<string, string>>;
}

interface StackTemplate {
  /** Its display name, the construct path (`Stage/Stack` inside a Stage): for messages. */
  readonly stack: string;
  /** The name it deploys under (the manifest's stackName, else its artifact id): letters, digits and hyphens. */
  readonly name: string;
  readonly dir: string;
  readonly template: { readonly Resources?: Record<string, Resource> };
  /** Asset hash → its path in the assembly (the stack's asset manifest). */
  readonly assets: Readonly<Record<string, { path: string; packaging?: string }>>;
}

/** The stacks of the assembly in `dir`, nested assemblies (stages) included. */
function stacksIn(dir: string): StackTemplate[] {
  const manifestFile = path.join(dir, 'manifest.json');
  if (!existsSync(manifestFile))
    throw new ConfigError([`the app wrote no cloud assembly (no manifest.json in ${dir}): is it a CDK app that calls app.synth()?`]);
  const artifacts = (
    JSON.parse(readFileSync(manifestFile, 'utf8')) as { artifacts?: Record<string, { type: string; displayName?: string; properties?: Json }> }
  ).artifacts;
  const out: StackTemplate[] = [];
  for (const [id, a] of Object.entries(artifacts ?? {})) {
    if (a.type === 'cdk:cloud-assembly') out.push(...stacksIn(path.join(dir, String(a.properties?.directoryName))));
    if (a.type !== 'aws:cloudformation:stack') continue;
    const template = JSON.parse(readFileSync(path.join(dir, String(a.properties?.templateFile)), 'utf8')) as StackTemplate['template'];
    const assetManifest = Object.values(artifacts ?? {}).find(
      (m) => m.type === 'cdk:asset-manifest' && String(m.properties?.file).startsWith(`${id}.`),
    );
    const files = assetManifest
      ? ((JSON.parse(readFileSync(path.join(dir, String(assetManifest.properties?.file)), 'utf8')) as { files?: Record<string, { source: Json }> })
          .files ?? {})
      : {};
    const assets = Object.fromEntries(
      Object.entries(files).map(([hash, f]) => [hash, { path: String(f.source.path), packaging: f.source.packaging as string }]),
    );
    const name = typeof a.properties?.stackName === 'string' ? a.properties.stackName : id;
    out.push({ stack: a.displayName ?? id, name, dir, template, assets });
  }
  return out;
}

/** The names of the fenced jobs in the assembly, with their stacks. */
function marked(stacks: readonly StackTemplate[]): { name: string; stack: StackTemplate; job: string; sweeper?: string }[] {
  const found: { name: string; stack: StackTemplate; job: string; sweeper?: string }[] = [];
  for (const s of stacks) {
    const resources = Object.entries(s.template.Resources ?? {});
    for (const [id, r] of resources) {
      const name = r.Metadata?.[FENCED_JOB_MARK.job];
      if (typeof name !== 'string') continue;
      const sweeper = resources.find(([, x]) => x.Metadata?.[FENCED_JOB_MARK.sweeper] === name)?.[0];
      found.push({ name, stack: s, job: id, sweeper });
    }
  }
  return found;
}

/**
 * The fenced job to run from the cloud assembly in `dir`: the one named `job`, or the only one there is. Refuses
 * (ConfigError) when there is none, when `job` names none, and when there are several and `job` is not given.
 */
export function jobInAssembly(dir: string, job: string | undefined): AssemblyJob {
  const jobs = marked(stacksIn(dir));
  const names = jobs.map((j) => `${j.name} (stack ${j.stack.stack})`).join(', ');
  if (jobs.length === 0)
    throw new ConfigError(['the app has no FencedJob (no state machine of its templates carries FencedJob\'s "fencepost:job" metadata)']);
  const chosen = job === undefined ? jobs : jobs.filter((j) => j.name === job);
  if (job !== undefined && chosen.length === 0) throw new ConfigError([`--job ${job}: the app has no FencedJob of that name; it has ${names}`]);
  if (chosen.length > 1)
    throw new ConfigError([
      job === undefined
        ? `the app has ${jobs.length} fenced jobs, ${names}: name one with --job`
        : `--job ${job} names ${chosen.length} jobs: ${names}`,
    ]);
  const c = chosen[0];
  if (!c.sweeper) throw new ConfigError([`${c.name}: its sweeper's state machine is not in stack ${c.stack.stack}`]);
  return read(c.stack, c.name, c.job, c.sweeper);
}

function read(s: StackTemplate, name: string, jobId: string, sweeperId: string): AssemblyJob {
  const resources = s.template.Resources ?? {};
  const functions: SynthesizedWorkflow['functions'] = {};
  for (const id of [jobId, sweeperId]) {
    for (const fn of invokedFunctions(resources[id].Properties.DefinitionString, resources)) functions[fn] ??= deployed(s, fn, resources[fn]);
  }
  // Pseudo-parameters become the run's local values, as a deployed function's environment gets its stack's.
  for (const [id, fn] of Object.entries(functions)) {
    const resolved = Object.entries(fn.environment).map(([k, v]) => {
      const ref = (v as Json | undefined)?.Ref;
      if (ref === 'AWS::StackName') return [k, s.name];
      return [k, typeof ref === 'string' && PSEUDO.has(ref) ? resolveJoin(v) : v];
    });
    functions[id] = { ...fn, environment: Object.fromEntries(resolved) as Record<string, unknown> };
  }
  const job = machine(jobId, resources, functions);
  const sweeper = machine(sweeperId, resources, functions);
  let environment: Record<string, unknown> = {};
  const taskHandlers: Record<string, string> = {};
  for (const [state, id] of Object.entries(job.taskFunctions)) {
    taskHandlers[state] = functions[id].handlerName;
    environment = { ...environment, ...functions[id].environment };
  }
  // A store is the stack's ({ Ref: logicalId }) or imported by name (a literal: Table.fromTableName, Bucket.fromBucketName).
  const ref = (variable: string) => (environment[variable] as Json | undefined)?.Ref as string | undefined;
  const literal = (variable: string) => (typeof environment[variable] === 'string' ? String(environment[variable]) : undefined);
  const [locks, jobs, manifests] = [ref(Env.lockTable), ref(Env.jobTable), ref(Env.bucket)];
  const [lockName, jobName, bucketGiven] = [literal(Env.lockTable), literal(Env.jobTable), literal(Env.bucket)];
  if (!(locks || lockName) || !(jobs || jobName)) throw new ConfigError([`${name}: its functions do not name its lock table and job table`]);
  const tables: Record<string, AssemblyJob['tables'][string]> = {};
  for (const [id, r] of Object.entries(resources)) {
    if (!TABLE_TYPES.has(r.Type)) continue;
    const local = typeof r.Properties.TableName === 'string' ? r.Properties.TableName : `${s.name}-${id}`;
    tables[id] = { name: local, role: id === locks ? 'locks' : id === jobs ? 'jobs' : 'app', create: createTable(local, r.Properties) };
  }
  // A table given by name has no template: it is created with the library's own schema (lib/core/schema.ts).
  for (const [given, role, description, variable] of [
    [lockName, 'locks', LOCK_TABLE, Env.lockTable],
    [jobName, 'jobs', JOB_TABLE, Env.jobTable],
  ] as const) {
    if (given === undefined) continue;
    if (!TABLE_NAME.test(given))
      throw new ConfigError([`${name}: its ${variable} ${JSON.stringify(given)} is not a DynamoDB table name (3 to 255 of A-Z a-z 0-9 _ . -)`]);
    tables[given] = { name: given, role, create: describedTableInput(given, description) };
  }
  if (bucketGiven !== undefined && !BUCKET_NAME.test(bucketGiven))
    throw new ConfigError([`${name}: its ${Env.bucket} ${JSON.stringify(bucketGiven)} is not an S3 bucket name (3 to 63 of a-z 0-9 . -)`]);
  const bucketName = (id: string) => {
    const given = resources[id]?.Properties?.BucketName;
    return typeof given === 'string'
      ? given
      : `${s.name}-${id}`
          .toLowerCase()
          .slice(0, 63)
          .replace(/[^a-z0-9]+$/, '');
  };
  const buckets: Record<string, string> = {};
  for (const fn of Object.values(functions)) {
    for (const v of Object.values(fn.environment)) {
      const id = (v as Json | undefined)?.Ref;
      if (typeof id === 'string' && id !== manifests && resources[id]?.Type === 'AWS::S3::Bucket') buckets[id] = bucketName(id);
    }
  }
  // Every other value a function's environment takes from the stack has no local counterpart: refused now, by name.
  for (const fn of Object.values(functions)) {
    for (const [variable, v] of Object.entries(fn.environment)) {
      const id = (v as Json | undefined)?.Ref;
      if (typeof v === 'string' || (typeof id === 'string' && ((resources[id] && tables[id]) || id === manifests || buckets[id] || id === jobId)))
        continue;
      throw new ConfigError([
        `function ${fn.logicalId}: its environment variable ${variable} is ${JSON.stringify(v)}, which a local run does not provide (it provides the stack's tables, the buckets, the job's state machine and the pseudo-parameters ${[...PSEUDO, 'AWS::StackName'].join(', ')})`,
      ]);
    }
  }
  const chunks = Number(environment[Env.chunks]);
  if (!Number.isSafeInteger(chunks) || chunks < 1)
    throw new ConfigError([`${name}: its functions do not give its chunk count (${Env.chunks} is ${JSON.stringify(environment[Env.chunks])})`]);
  const workflow: SynthesizedWorkflow = {
    definition: job.definition,
    taskHandlers,
    environment,
    job,
    sweeper,
    functions,
    stores: {
      tables: Object.fromEntries(Object.keys(tables).flatMap((id) => (resources[id] ? [[id, id]] : []))),
      bucket: manifests,
      buckets: Object.fromEntries(Object.keys(buckets).map((id) => [id, id])),
    },
    variables: { handler: Env.handler, worker: Env.worker },
  };
  return {
    name,
    stack: s.stack,
    workflow,
    chunks,
    timeZone: typeof environment[Env.scheduleTimeZone] === 'string' ? String(environment[Env.scheduleTimeZone]) : 'UTC',
    tables,
    bucket: bucketGiven ?? (manifests && bucketName(manifests)),
    buckets,
  };
}

/** The Lambda functions a state machine's definition invokes (its Fn::GetAtt of their ARNs). */
function invokedFunctions(definition: unknown, resources: Record<string, Resource>): string[] {
  const ids = new Set<string>();
  const visit = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(visit);
    else if (v && typeof v === 'object') {
      const getAtt = (v as Json)['Fn::GetAtt'] as string[] | undefined;
      if (getAtt && resources[getAtt[0]]?.Type === 'AWS::Lambda::Function') ids.add(getAtt[0]);
      Object.values(v).forEach(visit);
    }
  };
  visit(definition);
  return [...ids];
}

/** A function of the template with its bundle's folder in the assembly. */
function deployed(s: StackTemplate, id: string, r: Resource): SynthesizedWorkflow['functions'][string] {
  const key = (r.Properties.Code as Json | undefined)?.S3Key;
  if (typeof key !== 'string')
    throw new ConfigError([`function ${id} of stack ${s.stack} has no bundled asset (inline or imported code): it cannot run locally`]);
  const hash = key.replace(/\.zip$/, '');
  const asset = s.assets[hash];
  const dir = path.join(s.dir, asset?.path ?? `asset.${hash}`);
  if (asset?.packaging === 'file' || !existsSync(path.join(dir, ...handlerFile(String(r.Properties.Handler)))))
    throw new ConfigError([`function ${id} of stack ${s.stack}: no unpacked bundle for handler ${String(r.Properties.Handler)} in ${dir}`]);
  return functionAt(id, r.Properties, dir, Env.handler);
}

/** index.handler → index.js (the file Lambda's Node runtime loads; .mjs and .cjs are taken too). */
function handlerFile(handler: string): string[] {
  return [handler.slice(0, handler.lastIndexOf('.'))].map((m) => (['.js', '.mjs', '.cjs'].some((e) => m.endsWith(e)) ? m : `${m}.js`));
}

/** The CreateTable request for a template's table: its keys and indexes, on demand, under its local name. */
function createTable(name: string, p: Json): CreateTableCommandInput {
  const index = (i: Json) => ({ IndexName: i.IndexName, KeySchema: i.KeySchema, Projection: i.Projection ?? { ProjectionType: 'ALL' } });
  const gsis = (p.GlobalSecondaryIndexes as Json[] | undefined)?.map(index);
  const lsis = (p.LocalSecondaryIndexes as Json[] | undefined)?.map(index);
  return {
    TableName: name,
    BillingMode: 'PAY_PER_REQUEST',
    KeySchema: p.KeySchema as CreateTableCommandInput['KeySchema'],
    AttributeDefinitions: p.AttributeDefinitions as CreateTableCommandInput['AttributeDefinitions'],
    ...(gsis?.length ? { GlobalSecondaryIndexes: gsis as CreateTableCommandInput['GlobalSecondaryIndexes'] } : {}),
    ...(lsis?.length ? { LocalSecondaryIndexes: lsis as CreateTableCommandInput['LocalSecondaryIndexes'] } : {}),
  };
}
