/**
 * The IAM grants are proven both ways (verify/proofs/iam-proof.ts): every call a principal makes is allowed by its role as
 * synthesized, and every grant is used by some call. Here with hand-built call lists on the in-process synth; the
 * last tests read a real call log (FENCEPOST_CALL_LOG) recorded by the local workflow: one for the billing stack, one
 * for the reindex stack (apps/reindex), whose night test/process/reindex.test.ts runs through its state machine.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { App, Duration, Stack, type CfnElement } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { CONTEXT_KEY, readStackConfig } from '../../apps/billing/config';
import { FencepostStack } from '../../apps/billing/stack';
import { JOB_TABLE, LOCK_TABLE, tableNames as libraryTables } from '../../lib/core/schema';
import { BillingEnv, INVOICE_TABLE, billingTables as tableNames } from '../../apps/billing/schema';
import { BILLING_JOB, Keys } from '../../apps/billing/keys';
import { claimShard, jobKeys } from '../../lib/core/job-keys';
import { EPOCH_FLOOR_KEY } from '../../lib/core/store/lock';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { FencedJob, JobTable, LockTable } from '../../lib/constructs/index';
import { reindexApp } from '../../apps/reindex/app';
import { INDEX_TABLE, ReindexEnv, SOURCE_TABLE } from '../../apps/reindex/schema';
import { Env } from '../../lib/lambda/env';
import type { AwsCall } from '../../lib/local/call-log';
import { readCallLog } from '../../verify/proofs/call-log';
import {
  NOT_EXERCISABLE_LOCALLY,
  formatReport,
  principals,
  proveGrants,
  resolve,
  resourceMapping,
  scheduleCalls,
  type TableVariables,
  type PrincipalReport,
  type ProofReport,
  type Template,
} from '../../verify/proofs/iam-proof';

// The stack, synthesized in-process as lib/local/workflow.ts synthesizeWorkflowNow does: cdk.json's context, no bundling.
const ROOT = path.resolve(__dirname, '..', '..');
const cdkJson = JSON.parse(readFileSync(path.join(ROOT, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> };
const app = new App({
  context: { ...cdkJson.context, [CONTEXT_KEY]: cdkJson.context[CONTEXT_KEY], 'aws:cdk:bundling-stacks': [] },
  builtinCloudFormationValidation: false,
});
const stack = new FencepostStack(app, 'Fencepost', { config: readStackConfig(app) });
const template = app.synth().getStackByName(stack.stackName).template as Template;
const id = (c: Construct) => stack.getLogicalId(c.node.defaultChild as CfnElement);

const fn = { ...stack.billing.workflow.functions, chunk: stack.chunkFunction };
const P = {
  prepare: id(fn.prepare),
  observe: id(fn.observe),
  claim: id(fn.claim),
  raise: id(fn.raise),
  chunk: id(fn.chunk),
  complete: id(fn.complete),
  release: id(fn.release),
  sight: id(stack.billing.sweeper.functions.sight),
  verify: id(stack.billing.sweeper.functions.verify),
  billing: id(stack.billing.stateMachine),
  sweeper: id(stack.billing.sweeper.stateMachine),
  nightly: id(stack.billing.schedule.schedule),
  sweeperSchedule: id(stack.billing.sweeperSchedule.schedule),
};

// Local names, as the log records them: a prefix + the schema suffix, and a random bucket.
const T = tableNames('iamtest-1a2b-');
const BUCKET = 'fencepost-local-7f3e9a';
const DATE = '2026-09-28';
const resources = resourceMapping(template);
/** The night's keys, as the functions name them: its lock item and job row, a chunk's fence, the claim shard. */
const LOCK = Keys.lock(DATE);
const ROW = Keys.job(DATE);
const FENCE = Keys.chunkFence(ROW, 3);
const SHARD = claimShard(BILLING_JOB);
/** Another job that shares the lock and job tables (a table holds any number of jobs' keys). */
const OTHER = jobKeys('reindex');

// The reindex stack, as its local run builds it (apps/reindex/app.ts: stack id `Reindex`, so the log's logical ids
// are this template's); the night's size is an environment value and changes no logical id.
const reindexCdk = new App({ context: { ...cdkJson.context, 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
const reindex = reindexApp.build(reindexCdk, {}).stack;
const reindexTemplate = reindexCdk.synth().getStackByName(reindex.stackName).template as Template;
const rid = (c: Construct) => reindex.getLogicalId(c.node.defaultChild as CfnElement);
const R = {
  prepare: rid(reindex.job.workflow.functions.prepare),
  observe: rid(reindex.job.workflow.functions.observe),
  claim: rid(reindex.job.workflow.functions.claim),
  raise: rid(reindex.job.workflow.functions.raise),
  chunk: rid(reindex.chunkFunction),
  complete: rid(reindex.job.workflow.functions.complete),
  release: rid(reindex.job.workflow.functions.release),
  sight: rid(reindex.job.sweeper.functions.sight),
  verify: rid(reindex.job.sweeper.functions.verify),
  job: rid(reindex.job.stateMachine),
  sweeper: rid(reindex.job.sweeper.stateMachine),
  nightly: rid(reindex.job.schedule.schedule),
  sweeperSchedule: rid(reindex.job.sweeperSchedule.schedule),
};
/** Reindex's functions name the library's two tables by FencedJob's variables, and the job's own two by its own. */
const REINDEX_TABLES: TableVariables = {
  [Env.lockTable]: LOCK_TABLE.suffix,
  [Env.jobTable]: JOB_TABLE.suffix,
  [ReindexEnv.sourceTable]: SOURCE_TABLE.suffix,
  [ReindexEnv.indexTable]: INDEX_TABLE.suffix,
};
const reindexResources = resourceMapping(reindexTemplate, REINDEX_TABLES);

/**
 * The reindex principals no recorded call can prove: the reindex test runs one good night through the job's state
 * machine, nothing else. Exactly these make no call in a full run (asserted), so a new principal can't slip by
 * unexercised; their grants are left unproven, each for its reason. The schedules are not here: like billing's, they
 * are proven by the StartExecution derived from the template (scheduleCalls).
 */
const REINDEX_NOT_EXERCISED: Readonly<Record<string, string>> = {
  [R.prepare]: 'makes no AWS call: it only reads its input (as billing’s prepare; its role must hold no grant, asserted)',
  [R.release]: 'runs only on a failure route (ReleaseAfterFailure); the test’s one night completes',
  [R.sight]: 'a sweeper function: the reindex test never runs the sweeper (billing’s sweeper is proven in sweeper.test.ts)',
  [R.verify]: 'a sweeper function: the reindex test never runs the sweeper',
  [R.sweeper]: 'the sweeper state machine: the reindex test never runs it',
};

/**
 * Grants of reindex principals that DID run, which no recorded call uses: each listed with why, and the unused set
 * is asserted to be exactly these, so a new unused grant fails and a fixed one must be taken off the list.
 * `over-grant`: the library grants what this job never needs (least privilege is not met: to fix in lib/constructs/).
 * `untested-route`: needed, but only on a route the reindex test does not run.
 */
const fnArn = (id: string) => `arn:aws:lambda:us-east-1:111111111111:function:${id}`;
const REINDEX_UNUSED_GRANTS: readonly {
  principal: string;
  action: string;
  resource: string;
  kind: 'over-grant' | 'untested-route';
  reason: string;
}[] = [
  {
    principal: R.job,
    action: 'lambda:InvokeFunction',
    resource: fnArn(R.release),
    kind: 'untested-route',
    reason: 'ReleaseAfterFailure: the failure route; the test’s one night completes',
  },
];

const ddb = (principal: string, operation: string, table: string, extra: Partial<AwsCall> = {}): AwsCall => ({
  principal,
  service: 'dynamodb',
  operation,
  table,
  ...extra,
});
const s3 = (principal: string, operation: string, key: string | undefined, conditions?: AwsCall['conditions']): AwsCall => ({
  principal,
  service: 's3',
  operation,
  bucket: BUCKET,
  ...(key === undefined ? {} : { key }),
  ...(conditions ? { conditions } : {}),
});
/** The manifest's conditional writes (lib/core/manifest.ts): created with If-None-Match: *, rewritten with If-Match. */
const CREATE = { 'if-none-match': '*' };
const REWRITE = { 'if-match': '"5d41402abc4b2a76b9719d911017c592"' };
const invoke = (machine: string, target: string): AwsCall => ({ principal: machine, service: 'lambda', operation: 'Invoke', target });

/** What each principal legitimately does on a night (the handlers' and the core's calls), and nothing else. */
function legitimateNight(): AwsCall[] {
  const manifest = Keys.manifest(DATE);
  const manifestRw = (p: string) => [s3(p, 'GetObject', manifest), s3(p, 'PutObject', manifest, REWRITE)];
  const on = (partitionKey: string) => ({ partitionKey });
  return [
    ddb(P.observe, 'GetItem', T.locks, on(LOCK)),
    ddb(P.observe, 'GetItem', T.jobs, on(ROW)),
    ddb(P.claim, 'UpdateItem', T.locks, on(LOCK)),
    ddb(P.claim, 'GetItem', T.locks, on(EPOCH_FLOOR_KEY)), // the night's first claim of its lock key reads the epoch floor
    // the process's first claim, and first raise, describe the table first (lib/core/aws/table-check.ts): no key
    ddb(P.claim, 'DescribeTable', T.locks),
    ddb(P.claim, 'DescribeTimeToLive', T.locks),
    ddb(P.raise, 'DescribeTable', T.jobs),
    ddb(P.raise, 'DescribeTimeToLive', T.jobs),
    ddb(P.raise, 'UpdateItem', T.locks, on(LOCK)),
    ddb(P.raise, 'UpdateItem', T.jobs, on(ROW)),
    ddb(P.raise, 'UpdateItem', T.jobs, on(FENCE)),
    s3(P.raise, 'PutObject', manifest, CREATE),
    ...manifestRw(P.raise),
    ddb(P.chunk, 'UpdateItem', T.locks, on(LOCK)),
    {
      principal: P.chunk,
      service: 'dynamodb',
      operation: 'TransactWriteItems',
      items: [
        { operation: 'ConditionCheck', table: T.jobs, partitionKey: FENCE },
        ...Array.from({ length: 99 }, (_, i) => ({ operation: 'Put' as const, table: T.invoices, partitionKey: Keys.invoice(DATE, i, 4) })),
      ],
    },
    s3(P.chunk, 'PutObject', Keys.chunkObject(DATE, 3, 12)),
    ...manifestRw(P.chunk),
    s3(P.chunk, 'HeadObject', manifest),
    ddb(P.chunk, 'UpdateItem', T.jobs, on(FENCE)),
    ddb(P.complete, 'UpdateItem', T.locks, on(LOCK)),
    ddb(P.complete, 'UpdateItem', T.jobs, on(ROW)),
    ddb(P.complete, 'GetItem', T.jobs, on(FENCE)),
    ...manifestRw(P.complete),
    ddb(P.release, 'UpdateItem', T.locks, on(LOCK)),
    ddb(P.release, 'GetItem', T.locks, on(LOCK)), // after a Distributed Map's failure: is the lease still ours (keep)
    ddb(P.sight, 'Query', T.jobs, { index: JOB_TABLE.sparseIndex!.name, partitionKey: SHARD }),
    ddb(P.sight, 'GetItem', T.locks, on(LOCK)),
    ddb(P.verify, 'Query', T.jobs, { index: JOB_TABLE.sparseIndex!.name, partitionKey: SHARD }),
    ddb(P.verify, 'GetItem', T.locks, on(LOCK)),
    ddb(P.verify, 'UpdateItem', T.jobs, on(ROW)),
    { principal: P.verify, service: 'states', operation: 'StartExecution', target: P.billing },
    ...[P.prepare, P.observe, P.claim, P.raise, P.chunk, P.complete, P.release].map((f) => invoke(P.billing, f)),
    invoke(P.sweeper, P.sight),
    invoke(P.sweeper, P.verify),
    ...scheduleCalls(template),
  ];
}

const of = (report: ProofReport, principal: string): PrincipalReport => {
  const r = report.principals.find((x) => x.principal === principal);
  assert.ok(r, `${principal} is in the report`);
  return r;
};

test("the mapping from local names to the template comes from the functions' environment and names the stack's stores", () => {
  assert.deepEqual(resources, {
    tableBySuffix: {
      [LOCK_TABLE.suffix]: id(stack.billing.lockTable),
      [JOB_TABLE.suffix]: id(stack.billing.jobTable),
      [INVOICE_TABLE.suffix]: id(stack.invoices),
    },
    bucket: id(stack.billing.manifestBucket!),
  });
});

test("reindex: the mapping names the reindex stack's stores by its own variables; the stacks' principals are disjoint", () => {
  assert.deepEqual(reindexResources, {
    tableBySuffix: {
      [LOCK_TABLE.suffix]: rid(reindex.job.lockTable),
      [JOB_TABLE.suffix]: rid(reindex.job.jobTable),
      [SOURCE_TABLE.suffix]: rid(reindex.source),
      [INDEX_TABLE.suffix]: rid(reindex.index),
    },
  });
  assert.equal(reindex.job.manifestBucket, undefined, 'reindex writes no manifest: no bucket');
  // Billing's variables do not fit reindex (no function names an invoice table), and a suffix that is the end of
  // another would map one local name to two tables.
  assert.throws(() => resourceMapping(reindexTemplate), /no function's environment names FENCEPOST_INVOICE_TABLE/);
  assert.throws(() => resourceMapping(reindexTemplate, { ...REINDEX_TABLES, [BillingEnv.invoiceTable]: 'xindex' }), /ambiguous/);
  // A call log names its caller by logical id alone: the proofs can keep the stacks apart only if no id is in both.
  const billingIds = new Set(principals(template).map((p) => p.id));
  const reindexIds = principals(reindexTemplate).map((p) => p.id);
  assert.deepEqual(new Set(reindexIds), new Set(Object.values(R)), 'R names every reindex principal');
  assert.deepEqual(
    reindexIds.filter((p) => billingIds.has(p)),
    [],
  );
  for (const p of Object.keys(REINDEX_NOT_EXERCISED)) assert.ok(reindexIds.includes(p), `${p} is a reindex principal`);
});

test('a legitimate night: every call each principal makes is allowed, and every grant is used', async () => {
  const calls = legitimateNight();
  const report = await proveGrants(template, calls, { resources });
  console.log(formatReport(report));
  assert.equal(report.principals.length, 13, '9 functions, 2 state machines, 2 schedules');
  assert.equal(report.totals.calls, calls.length);
  assert.equal(report.totals.deniedCalls, 0, formatReport(report));
  assert.deepEqual(report.unattributed, []);
  for (const r of report.principals) {
    if (r.principal !== P.prepare) assert.ok(r.calls > 0, `${r.principal} is exercised`);
    assert.deepEqual(r.unused, [], `${r.principal}: unused grants`);
  }
});

test("calls outside the grants are denied, with the simulator's reason", async () => {
  const bad: [string, AwsCall][] = [
    ['chunk deletes a lock item', ddb(P.chunk, 'DeleteItem', T.locks)],
    ['observe writes the lock', ddb(P.observe, 'UpdateItem', T.locks)],
    ['observe puts a job row', ddb(P.observe, 'PutItem', T.jobs)],
    ['chunk writes outside billing/', s3(P.chunk, 'PutObject', `exports/${DATE}.csv`)],
    ['chunk lists outside billing/', s3(P.chunk, 'ListObjectsV2', 'exports/')],
    ['chunk lists the whole bucket', s3(P.chunk, 'ListObjectsV2', undefined)],
    [
      'one Delete inside a transaction',
      {
        principal: P.chunk,
        service: 'dynamodb',
        operation: 'TransactWriteItems',
        items: [
          { operation: 'ConditionCheck', table: T.jobs },
          { operation: 'Delete', table: T.invoices },
        ],
      },
    ],
    ['the sweeper queries the table, not the sparse index', ddb(P.sight, 'Query', T.jobs)],
    ['the sweeper scans the job table', ddb(P.verify, 'Scan', T.jobs)],
    ['verify starts the sweeper, not billing', { principal: P.verify, service: 'states', operation: 'StartExecution', target: P.sweeper }],
    ['the billing machine invokes a sweeper function', invoke(P.billing, P.verify)],
    ['the nightly schedule starts the sweeper', { principal: P.nightly, service: 'states', operation: 'StartExecution', target: P.sweeper }],
    ['prepare reads a lock', ddb(P.prepare, 'GetItem', T.locks, { partitionKey: LOCK })],
    // One job's functions on another job's keys in the tables they share: each is refused by the policy itself.
    ["chunk renews another job's lock", ddb(P.chunk, 'UpdateItem', T.locks, { partitionKey: OTHER.lock(DATE) })],
    ["chunk marks another job's chunk fence done", ddb(P.chunk, 'UpdateItem', T.jobs, { partitionKey: OTHER.chunkFence(DATE, 3) })],
    [
      "chunk checks another job's chunk fence in its transaction",
      {
        principal: P.chunk,
        service: 'dynamodb',
        operation: 'TransactWriteItems',
        items: [
          { operation: 'ConditionCheck', table: T.jobs, partitionKey: OTHER.chunkFence(DATE, 3) },
          { operation: 'Put', table: T.invoices, partitionKey: Keys.invoice(DATE, 0, 4) },
        ],
      },
    ],
    ["claim claims another job's lock", ddb(P.claim, 'UpdateItem', T.locks, { partitionKey: OTHER.lock(DATE) })],
    ["raise raises another job's row", ddb(P.raise, 'UpdateItem', T.jobs, { partitionKey: OTHER.job(DATE) })],
    ["raise raises another job's chunk fence", ddb(P.raise, 'UpdateItem', T.jobs, { partitionKey: OTHER.chunkFence(DATE, 0) })],
    ["complete marks another job's row done", ddb(P.complete, 'UpdateItem', T.jobs, { partitionKey: OTHER.job(DATE) })],
    ["release releases another job's lock", ddb(P.release, 'UpdateItem', T.locks, { partitionKey: OTHER.lock(DATE) })],
    ["observe reads another job's lock", ddb(P.observe, 'GetItem', T.locks, { partitionKey: OTHER.lock(DATE) })],
    ["the sweeper re-queues another job's row", ddb(P.verify, 'UpdateItem', T.jobs, { partitionKey: OTHER.job(DATE) })],
    ["the sweeper reads another job's claims", ddb(P.sight, 'Query', T.jobs, { index: JOB_TABLE.sparseIndex!.name, partitionKey: OTHER.name })],
    ['a job whose name starts with the name', ddb(P.chunk, 'UpdateItem', T.locks, { partitionKey: `${BILLING_JOB}-eu#${DATE}` })],
    ['a function writes the epoch floor', ddb(P.chunk, 'UpdateItem', T.locks, { partitionKey: EPOCH_FLOOR_KEY })],
    ['claim reads a lock item (it reads only the epoch floor)', ddb(P.claim, 'GetItem', T.locks, { partitionKey: LOCK })],
    ['a write whose key is not known', ddb(P.chunk, 'UpdateItem', T.locks)],
    ['observe describes the lock table (only the claim and the raise check a table)', ddb(P.observe, 'DescribeTable', T.locks)],
    ['claim describes the job table, not its own', ddb(P.claim, 'DescribeTable', T.jobs)],
    ['raise describes the invoice table', ddb(P.raise, 'DescribeTimeToLive', T.invoices)],
  ];
  for (const [what, call] of bad) {
    const report = await proveGrants(template, [call], { resources });
    const r = of(report, call.principal);
    assert.equal(r.deniedCalls, 1, `${what}: denied`);
    assert.match(r.denied[0].reason, /ImplicitlyDenied \(no identity policy statement allows it/, `${what}: ${r.denied[0].reason}`);
  }
});

test("two jobs sharing one lock table and one job table: each job's functions reach only their own keys", async () => {
  // The synthesized policies decide, as IAM would: nothing here restates what lib/constructs/ grants.
  const shared = new App({ context: { 'aws:cdk:bundling-stacks': [] }, builtinCloudFormationValidation: false });
  const st = new Stack(shared, 'Shared');
  const lockTable = new LockTable(st, 'Locks').table;
  const jobTable = new JobTable(st, 'Jobs').table;
  const chunkFn = (name: string) =>
    new lambda.Function(st, `${name}Chunk`, {
      runtime: lambda.Runtime.NODEJS_22_X,
      handler: 'index.handler',
      code: lambda.Code.fromInline('exports.handler = async () => ({});'),
      timeout: Duration.seconds(45),
    });
  const jobs = ['alpha', 'beta'].map((name) => new FencedJob(st, name, { name, chunkFunction: chunkFn(name), chunks: 2, lockTable, jobTable }));
  const t = shared.synth().getStackByName(st.stackName).template as Template;
  const mapping = resourceMapping(t, { [Env.lockTable]: LOCK_TABLE.suffix, [Env.jobTable]: JOB_TABLE.suffix });
  const sid = (c: Construct) => st.getLogicalId(c.node.defaultChild as CfnElement);
  const tables = libraryTables('shared-');
  const decide = async (call: AwsCall) => of(await proveGrants(t, [call], { resources: mapping }), call.principal).deniedCalls === 0;
  for (const [self, other] of [jobs, [...jobs].reverse()]) {
    const mine = jobKeys(self.name);
    const theirs = jobKeys(other.name);
    const chunk = sid(st.node.findChild(`${self.name}Chunk`));
    const check = (principal: string, key: string): AwsCall => ({
      principal,
      service: 'dynamodb',
      operation: 'TransactWriteItems',
      items: [{ operation: 'ConditionCheck', table: tables.jobs, partitionKey: key }],
    });
    const cases: [string, (k: typeof mine) => AwsCall][] = [
      ['the chunk renews the lock', (k) => ddb(chunk, 'UpdateItem', tables.locks, { partitionKey: k.lock(DATE) })],
      ["the chunk checks its chunk's fence", (k) => check(chunk, k.chunkFence(DATE, 1))],
      ["the chunk marks its chunk's fence done", (k) => ddb(chunk, 'UpdateItem', tables.jobs, { partitionKey: k.chunkFence(DATE, 1) })],
      ['claim claims the lock', (k) => ddb(sid(self.workflow.functions.claim), 'UpdateItem', tables.locks, { partitionKey: k.lock(DATE) })],
      ['raise raises the row', (k) => ddb(sid(self.workflow.functions.raise), 'UpdateItem', tables.jobs, { partitionKey: k.job(DATE) })],
      ['release releases the lock', (k) => ddb(sid(self.workflow.functions.release), 'UpdateItem', tables.locks, { partitionKey: k.lock(DATE) })],
      ['the sweeper re-queues the row', (k) => ddb(sid(self.sweeper.functions.verify), 'UpdateItem', tables.jobs, { partitionKey: k.job(DATE) })],
      [
        'the sweeper reads the claims',
        (k) => ddb(sid(self.sweeper.functions.sight), 'Query', tables.jobs, { index: JOB_TABLE.sparseIndex!.name, partitionKey: claimShard(k.name) }),
      ],
    ];
    for (const [what, call] of cases) {
      assert.equal(await decide(call(mine)), true, `${self.name}: ${what} of its own night is allowed`);
      assert.equal(await decide(call(theirs)), false, `${self.name}: ${what} of ${other.name}'s night is refused`);
    }
  }
});

test('the manifest bucket refuses a manifest write that carries neither If-Match nor If-None-Match, whatever the role allows', async () => {
  const manifest = Keys.manifest(DATE);
  const decided = async (call: AwsCall) => of(await proveGrants(template, [call], { resources }), call.principal);
  for (const p of [P.raise, P.chunk, P.complete]) {
    const blind = await decided(s3(p, 'PutObject', manifest));
    assert.equal(blind.deniedCalls, 1, `${p}: an unconditional manifest write is denied`);
    assert.match(blind.denied[0].reason, /ExplicitlyDenied \(explicit Deny in resource policy/, blind.denied[0].reason);
    for (const conditions of [CREATE, REWRITE]) {
      assert.equal(
        (await decided(s3(p, 'PutObject', manifest, conditions))).deniedCalls,
        0,
        `${p}: ${JSON.stringify(conditions)} is allowed by its role`,
      );
    }
  }
  // Only manifests: a chunk object is written once under its writer's own token, with no condition.
  assert.equal((await decided(s3(P.chunk, 'PutObject', Keys.chunkObject(DATE, 3, 12)))).deniedCalls, 0);
  // The Deny does not grant: a principal without the role's grant is still refused, headers or not.
  assert.match((await decided(s3(P.observe, 'PutObject', manifest, REWRITE))).denied[0]?.reason ?? '', /ImplicitlyDenied/);
});

test('calls the proof cannot map are denied, never guessed', async () => {
  const report = await proveGrants(
    template,
    [
      ddb(P.chunk, 'PutItem', 'iamtest-1a2b-audit'),
      ddb(P.chunk, 'FrobnicateItem', T.invoices),
      invoke(P.billing, 'SomeOtherFunction'),
      { principal: P.observe, service: 'dynamodb', operation: 'TransactGetItems' },
    ],
    { resources },
  );
  assert.match(
    of(report, P.observe).denied[0]?.reason ?? '',
    /TransactGetItems recorded without its items/,
    'a transaction without items fails closed',
  );
  const reasons = of(report, P.chunk)
    .denied.map((d) => d.reason)
    .concat(of(report, P.billing).denied.map((d) => d.reason));
  assert.match(reasons[0], /unknown table "iamtest-1a2b-audit"/);
  assert.match(reasons[1], /dynamodb:FrobnicateItem is not an IAM action/);
  assert.match(reasons[2], /unknown function "SomeOtherFunction"/);
});

test('no function may list the bucket (nothing reads a missing manifest as 404), and a grant no call uses is reported unused', async () => {
  const listing = await proveGrants(template, [s3(P.raise, 'ListObjectsV2', `billing/${DATE}/`)], { resources });
  assert.equal(of(listing, P.raise).deniedCalls, 1, 'no s3:ListBucket grant');

  const calls = legitimateNight().filter((c) => !(c.principal === P.observe && c.table === T.jobs));
  const report = await proveGrants(template, calls, { resources });
  const observe = of(report, P.observe);
  assert.deepEqual(
    observe.unused.map((g) => [g.action, g.resource]),
    [['dynamodb:GetItem', `arn:aws:dynamodb:us-east-1:111111111111:table/${resources.tableBySuffix.jobs}`]],
  );
  assert.ok(of(report, P.release).unused.length === 0, 'other principals are unaffected');
  // A key pattern is a grant of its own: a claim that never reads the epoch floor leaves that read unused.
  const noFloor = legitimateNight().filter((c) => !(c.principal === P.claim && c.partitionKey === EPOCH_FLOOR_KEY));
  assert.deepEqual(
    of(await proveGrants(template, noFloor, { resources }), P.claim).unused.map((g) => [g.action, JSON.stringify(g.condition)]),
    [
      [
        'dynamodb:GetItem',
        JSON.stringify({ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [EPOCH_FLOOR_KEY] }, Null: { 'dynamodb:LeadingKeys': 'false' } }),
      ],
    ],
  );
  const silent = await proveGrants(template, [], { resources });
  assert.ok(of(silent, P.release).unused.length > 0, 'a principal that makes no call uses none of its grants');
});

test('intrinsics resolve to ARNs in the fixed account; a qualified invoke is refused', async () => {
  const table = resources.tableBySuffix.locks;
  assert.equal(resolve(template, { 'Fn::GetAtt': [table, 'Arn'] }), `arn:aws:dynamodb:us-east-1:111111111111:table/${table}`);
  assert.equal(
    resolve(template, {
      'Fn::Select': [1, { 'Fn::Split': ['/', { 'Fn::Join': ['', [{ 'Fn::GetAtt': [resources.bucket, 'Arn'] }, '/billing/x']] }] }],
    }),
    'billing',
  );
  assert.equal(resolve(template, { Ref: P.billing }), `arn:aws:states:us-east-1:111111111111:stateMachine:${P.billing}`);
  assert.throws(() => resolve(template, { 'Fn::ImportValue': 'x' }), /cannot resolve Fn::ImportValue/);

  // Invoke grants name the function alone (lib/constructs/handler-function.ts): a version or alias may not be invoked.
  const report = await proveGrants(template, [invoke(P.billing, `arn:aws:lambda:us-east-1:111111111111:function:${P.chunk}:live`)], { resources });
  assert.equal(of(report, P.billing).deniedCalls, 1, 'a qualified invoke is refused');
});

test("the schedules' roles: the derived StartExecution is allowed, the DLQ grant is excluded with its reason", async () => {
  const calls = scheduleCalls(template);
  assert.deepEqual(
    calls.map((c) => [c.principal, c.target]),
    [
      [P.nightly, `arn:aws:states:us-east-1:111111111111:stateMachine:${P.billing}`],
      [P.sweeperSchedule, `arn:aws:states:us-east-1:111111111111:stateMachine:${P.sweeper}`],
    ],
  );
  const report = await proveGrants(template, calls, { resources });
  for (const p of [P.nightly, P.sweeperSchedule]) {
    const r = of(report, p);
    assert.equal(r.deniedCalls, 0);
    assert.deepEqual(r.unused, []);
    assert.deepEqual(
      r.excluded.map((g) => g.action),
      ['sqs:SendMessage'],
    );
  }
});

test('grants excluded from "unused" are only the documented ones, each with its reason', async () => {
  const report = await proveGrants(template, legitimateNight(), { resources });
  const documented = new Set(NOT_EXERCISABLE_LOCALLY.flatMap((e) => e.actions));
  for (const r of report.principals) {
    for (const g of r.excluded) {
      assert.ok(g.reason.length > 20, 'a reason is given');
      const managed = g.policy.endsWith('service-role/AWSLambdaBasicExecutionRole');
      assert.ok(managed || documented.has(g.action), `${r.principal}: ${g.action} excluded without a documented reason`);
      if (managed) assert.match(g.action, /^logs:/, 'the managed basic-execution policy grants logs only');
    }
  }
});

test('calls from principals that are not in the template are reported, unless the harness is ignored by name', async () => {
  const calls = [ddb('local', 'CreateTable', T.locks), ddb('intruder', 'GetItem', T.locks)];
  assert.deepEqual((await proveGrants(template, calls, { resources })).unattributed, [
    { principal: 'local', calls: 1 },
    { principal: 'intruder', calls: 1 },
  ]);
  assert.deepEqual((await proveGrants(template, calls, { resources, ignorePrincipals: ['local'] })).unattributed, [
    { principal: 'intruder', calls: 1 },
  ]);
});

const CALL_LOG = process.env.FENCEPOST_CALL_LOG;

/** The call log's callers that are no principal of either stack: the test harness's own clients. */
function harnessOf(recorded: readonly AwsCall[]): string[] {
  const deployed = new Set([...principals(template), ...principals(reindexTemplate)].map((p) => p.id));
  return [...new Set(recorded.map((c) => c.principal).filter((p) => !deployed.has(p)))].sort();
}
const NO_LOG = 'FENCEPOST_CALL_LOG is not set: run the local workflow with a call log and point this at its JSONL file';

test('every recorded call is allowed and every grant is used', { skip: CALL_LOG ? false : NO_LOG }, async () => {
  const recorded = readCallLog(readFileSync(CALL_LOG!, 'utf8'));
  // Only the billing stack's principals are proven here. The reindex stack's are left out by membership of its
  // template (proven in the next test); every other key in the log is a test harness's own client (provisioning,
  // audits, the endpoints' conformance tests). A function signing with the wrong key cannot hide here: its own
  // grants would then go unused, and this test fails on that.
  const harness = harnessOf(recorded);
  const others = principals(reindexTemplate).map((p) => p.id);
  const report = await proveGrants(template, [...recorded, ...scheduleCalls(template)], {
    resources,
    ignorePrincipals: [...harness, ...others],
  });
  console.log(formatReport(report));
  console.log(`harness principals left out: ${harness.join(', ')}`);
  assert.ok(recorded.length > 0, 'the log has calls');
  assert.deepEqual(report.unattributed, []);
  assert.equal(report.totals.deniedCalls, 0, formatReport(report));
  assert.equal(report.totals.unused, 0, formatReport(report));
  for (const p of report.principals)
    assert.ok(p.calls > 0 || p.principal === P.prepare, `${p.principal} made no call: its grants were never exercised`);
});

test(
  'reindex: every recorded call of its principals is allowed, and every principal that ran uses every grant',
  { skip: CALL_LOG ? false : NO_LOG },
  async () => {
    const recorded = readCallLog(readFileSync(CALL_LOG!, 'utf8'));
    const others = principals(template).map((p) => p.id);
    const report = await proveGrants(reindexTemplate, [...recorded, ...scheduleCalls(reindexTemplate)], {
      resources: reindexResources,
      ignorePrincipals: [...harnessOf(recorded), ...others],
    });
    console.log(formatReport(report));
    for (const [p, reason] of Object.entries(REINDEX_NOT_EXERCISED)) console.log(`NOT EXERCISED  ${p}: ${reason}`);
    assert.ok(report.totals.calls > 0, 'the log has reindex calls: test/process/reindex.test.ts ran its night with the log');
    assert.deepEqual(report.unattributed, []);
    assert.equal(report.totals.deniedCalls, 0, formatReport(report));
    // Exactly the listed principals made no call: a new one, or one that stops running, fails here.
    assert.deepEqual(
      report.principals
        .filter((p) => p.calls === 0)
        .map((p) => p.principal)
        .sort(),
      Object.keys(REINDEX_NOT_EXERCISED).sort(),
      'the principals no call exercised are exactly the listed ones',
    );
    // Every principal that ran uses every grant, but for the listed ones (exactly those).
    const unused = report.principals.filter((x) => x.calls > 0).flatMap((p) => p.unused.map((g) => `${p.principal} ${g.action} on ${g.resource}`));
    assert.deepEqual(unused.sort(), REINDEX_UNUSED_GRANTS.map((g) => `${g.principal} ${g.action} on ${g.resource}`).sort(), formatReport(report));
    for (const g of REINDEX_UNUSED_GRANTS) console.log(`UNUSED (${g.kind})  ${g.principal} ${g.action} on ${g.resource}: ${g.reason}`);
    assert.deepEqual(of(report, R.prepare).unused, [], 'prepare makes no call, so its role may hold no grant');
  },
);
