/**
 * Every read-only command writes nothing at all (issue 25, item 2): `bump-epochs --dry-run`, `audit` and `leader` of
 * the repository's command, and `bump-epochs` on a table that does not exist. A restore-day tool given a mistyped
 * prefix or table must refuse it (exit 2, one line naming it), not create it, nor report "bumped 0 of 0".
 *
 * The outside view: the commands talk to a recording DynamoDB proxy in front of the test stack's DynamoDB Local and to
 * a recording S3 endpoint of this file's own, so every call a command made is in the log; the namespace's tables with their
 * items and the buckets with their objects are listed before and after.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { ListBucketsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { localClients, type Clients, type Endpoints } from '../../lib/core/aws/clients';
import { systemClock } from '../../lib/core/clock';
import { Events } from '../../lib/core/events';
import { claim } from '../../lib/core/lease';
import { Keys } from '../../apps/billing/keys';
import { billingTables } from '../../apps/billing/schema';
import { provisionBilling } from '../../verify/billing-stores';
import type { AwsCall } from '../../lib/local/call-log';
import { startDynamoDbProxy, type DynamoDbProxy } from '../../lib/local/dynamodb-proxy';
import { startLocalS3, type LocalS3 } from '../../lib/local/s3-server';
import { endpoints, unusedNames } from '../support/stack';
import { exitedAfterOutput, runCli } from '../support/worker';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';

const T = { timeout: 120_000 };

/** The calls that read: anything else in the log is a write (or an attempt at one, which a read-only command never makes). */
const READS = new Set([
  'DescribeTable',
  'DescribeTimeToLive',
  'ListTables',
  'GetItem',
  'BatchGetItem',
  'TransactGetItems',
  'Query',
  'Scan',
  'ListBuckets',
  'HeadBucket',
  'ListObjects',
  'ListObjectsV2',
  'GetObject',
  'HeadObject',
]);

const calls: AwsCall[] = [];
let proxy: DynamoDbProxy | undefined;
let s3: LocalS3 | undefined;
let direct: Clients | undefined;
/** What the commands are pointed at: the recording proxy and the recording S3 endpoint. */
let recorded: Endpoints;

after(async () => {
  direct?.destroy();
  await Promise.allSettled([proxy?.stop(), s3?.stop()]);
});
before(async () => {
  const ep = await endpoints();
  proxy = await startDynamoDbProxy({ target: ep.dynamodb, onCall: (c) => void calls.push(c) });
  s3 = await startLocalS3({ onCall: (c) => void calls.push(c) });
  recorded = { dynamodb: proxy.endpoint, s3: s3.endpoint };
  // The test's own set-up goes straight to DynamoDB Local (not through the recording proxy).
  direct = localClients({ dynamodb: ep.dynamodb, s3: s3.endpoint });
});

/**
 * Everything a command could have changed: the namespace's tables and their items, the buckets and their objects.
 * Only the namespace's tables: other files create tables in the same DynamoDB Local while this one runs (npm test runs
 * files side by side). A table made under any other name would be a CreateTable in the call log, which `writes` reads.
 */
async function snapshot(prefix: string, bucket: string): Promise<unknown> {
  const c = direct!;
  const tables: string[] = [];
  let start: string | undefined;
  do {
    const page = await c.raw.send(new ListTablesCommand({ ExclusiveStartTableName: start }));
    tables.push(...(page.TableNames ?? []).filter((name) => name.startsWith(prefix)));
    start = page.LastEvaluatedTableName;
  } while (start !== undefined);
  const items: Record<string, unknown[]> = {};
  for (const t of tables)
    items[t] = ((await c.ddb.send(new ScanCommand({ TableName: t, ConsistentRead: true }))).Items ?? []).sort((a, b) =>
      String(a.pk).localeCompare(String(b.pk)),
    );
  const buckets = ((await c.s3.send(new ListBucketsCommand({}))).Buckets ?? []).map((b) => b.Name).sort();
  const objects = buckets.includes(bucket) ? ((await c.s3.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key) : [];
  return { tables: tables.sort(), items, buckets, objects };
}

interface Ran {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Every call the command made, as the endpoints recorded it. */
  readonly calls: readonly AwsCall[];
}

async function cli(args: string[], env?: Record<string, string>): Promise<Ran> {
  calls.length = 0;
  const child = runCli(args, { env });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const code = await exitedAfterOutput(child);
  return { code, stdout, stderr, calls: [...calls] };
}

const writes = (r: Ran) => r.calls.filter((c) => !READS.has(c.operation)).map((c) => `${c.operation} ${c.table ?? c.bucket ?? ''}`);
const storeArgs = (prefix: string, bucket: string) => [
  '--dynamodb-endpoint',
  recorded.dynamodb,
  '--s3-endpoint',
  recorded.s3,
  '--table-prefix',
  prefix,
  '--bucket',
  bucket,
];

/** The read-only commands, each with what it needs besides the store target. */
const READ_ONLY: readonly (readonly string[])[] = [
  ['bump-epochs', '--dry-run', '--run-id', 'restore-1'],
  ['audit', '--date', '2026-09-28'],
  ['leader', '--role', 'writer'],
];

/** A billing deployment's stores, with two nights' lock items and job rows in them. */
async function deployment(): Promise<{ prefix: string; bucket: string }> {
  const { prefix, bucket } = unusedNames();
  await provisionBilling(direct!.raw, direct!.s3, prefix, bucket);
  const tables = billingTables(prefix);
  const deps = { locks: new DynamoLockStore(direct!.ddb, tables.locks), clock: systemClock, events: new Events('T', systemClock) };
  for (const d of ['2026-09-27', '2026-09-28'])
    await (await claim(deps, Keys.lock(d), 'A', { leaseMs: 300, renewMs: 100, marginMs: 100, claimBudget: 30 })).release();
  return { prefix, bucket };
}

test('a mistyped prefix: every read-only command and bump-epochs refuse it in one line naming the table, exit 2, and write nothing', T, async () => {
  const { prefix, bucket } = unusedNames(); // nothing under it exists
  const failures: string[] = [];
  for (const command of [...READ_ONLY, ['bump-epochs', '--run-id', 'restore-1']]) {
    const beforeRun = await snapshot(prefix, bucket);
    const r = await cli([...command, ...storeArgs(prefix, bucket)]);
    const lines = r.stderr.split('\n').filter(Boolean);
    const wrong = [
      r.code === 2 ? '' : `exit ${r.code}, not 2`,
      lines.length === 1 && new RegExp(`^fencepost ${command[0]}: .*${prefix}locks`).test(lines[0]) ? '' : 'not one line naming the table',
      r.stdout === '' ? '' : `a report on stdout (${r.stdout.split('\n')[0]})`,
      writes(r).length === 0 ? '' : `writes in the call log (${writes(r).join(', ')})`,
      isDeepStrictEqual(await snapshot(prefix, bucket), beforeRun) ? '' : 'the stores changed',
    ].filter(Boolean);
    if (wrong.length > 0) failures.push(`${command.join(' ')}: ${wrong.join('; ')}\n    stderr: ${lines.join('\n            ')}`);
  }
  assert.deepEqual(failures, []);
});

test('on an existing deployment, every read-only command reads only: the call log has no write, the stores are as they were', T, async () => {
  const { prefix, bucket } = await deployment();
  const failures: string[] = [];
  for (const command of READ_ONLY) {
    const beforeRun = await snapshot(prefix, bucket);
    const r = await cli([...command, ...storeArgs(prefix, bucket)]);
    const wrong = [
      r.code === 1 || r.code === 2 ? `exit ${r.code}: ${r.stderr}` : '',
      r.calls.length > 0 ? '' : 'no call: it read nothing',
      writes(r).length === 0 ? '' : `writes in the call log (${writes(r).join(', ')})`,
      isDeepStrictEqual(await snapshot(prefix, bucket), beforeRun) ? '' : 'the stores changed',
    ].filter(Boolean);
    if (wrong.length > 0) failures.push(`${command.join(' ')}: ${wrong.join('; ')}`);
  }
  assert.deepEqual(failures, []);
  const dry = await cli([...READ_ONLY[0], ...storeArgs(prefix, bucket)]);
  assert.match(dry.stdout, /dry run: would bump 2 of 2 lock items/, 'the dry run reports the two lock items it found');
});

test('bump-epochs --aws on a table that does not exist: one line naming it, exit 2, no stack trace, nothing written', T, async () => {
  const { prefix, bucket } = unusedNames();
  const table = `${prefix}restored-locks`;
  // The AWS path (awsClients: credentials, Region and endpoint from the environment), pointed at the recording proxy.
  const env = {
    AWS_ENDPOINT_URL_DYNAMODB: recorded.dynamodb,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    AWS_EC2_METADATA_DISABLED: 'true',
  };
  for (const extra of [['--dry-run'], []]) {
    const beforeRun = await snapshot(prefix, bucket);
    const r = await cli(['bump-epochs', '--aws', '--lock-table', table, '--run-id', 'restore-1', ...extra], env);
    assert.equal(r.code, 2, `exit 2, got ${r.code}\n${r.stderr}`);
    const lines = r.stderr.split('\n').filter(Boolean);
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], new RegExp(`^fencepost bump-epochs: .*${table}`));
    assert.ok(r.calls.length > 0, 'the command did ask the endpoint given (not some other one)');
    assert.deepEqual(writes(r), []);
    assert.deepEqual(await snapshot(prefix, bucket), beforeRun);
  }
});
