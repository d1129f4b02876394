/**
 * The examples (examples/*.ts) run as real programs: each in its own Node process (tsx), against the embedded stack
 * given in FENCEPOST_TEST_DYNAMODB / FENCEPOST_TEST_S3, on tables and a bucket made for the test. Each test then
 * reads the store: the example did what it says, and a stale writer (an older holder, or the test writing as one) was
 * refused.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { exitedAfterOutput } from '../../verify/chaos/worker-process';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { FencedOutError, ManifestWriter, fenceOn, readManifest, systemClock } from '../../lib/core';
import { heldFence } from '../../lib/core/aws/fence';
import { writeBatch } from '../../lib/core/batch';
import { namespace, type Namespace } from '../support/stack';
import { DynamoFenceStore } from '../../lib/core/aws/job-store';
import { S3ManifestStore } from '../../lib/core/aws/manifest-store';

const ROOT = path.resolve(__dirname, '..', '..');

/** Run one example to its end; its last stdout line is its JSON summary. */
async function runExample(
  ns: Namespace,
  file: string,
  holder: string,
): Promise<{ code: number | null; summary: Record<string, unknown>; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'examples', file), holder], {
    cwd: ROOT,
    env: {
      ...process.env,
      FENCEPOST_TEST_DYNAMODB: ns.endpoints.dynamodb,
      FENCEPOST_TEST_S3: ns.endpoints.s3,
      FENCEPOST_EXAMPLE_PREFIX: ns.prefix,
      FENCEPOST_EXAMPLE_BUCKET: ns.bucket,
      NODE_NO_WARNINGS: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await exitedAfterOutput(child);
  const last = stdout.trim().split('\n').at(-1) ?? '';
  let summary: Record<string, unknown> = {};
  try {
    summary = JSON.parse(last) as Record<string, unknown>;
  } catch {
    assert.fail(`${file} printed no JSON summary (exit ${code}):\n${stdout}\n${stderr}`);
  }
  return { code, summary, stderr };
}

async function scan(ns: Namespace, table: string): Promise<Record<string, unknown>[]> {
  return (await ns.clients.ddb.send(new ScanCommand({ TableName: table, ConsistentRead: true }))).Items ?? [];
}

test('chunked-job: the first holder records every line; the next redoes the job and finds them all; a holder with the old token is refused', async () => {
  const ns = await namespace();
  const first = await runExample(ns, 'chunked-job.ts', 'worker-1');
  assert.equal(first.code, 0, first.stderr);
  assert.deepEqual(first.summary, { holder: 'worker-1', token: 1, recorded: 150, alreadyRecorded: 0 });
  const second = await runExample(ns, 'chunked-job.ts', 'worker-2');
  assert.equal(second.code, 0, second.stderr);
  assert.deepEqual(second.summary, { holder: 'worker-2', token: 2, recorded: 0, alreadyRecorded: 150 }, 'a redo records nothing twice');

  const linesOf = async () => (await scan(ns, ns.tables.jobs)).filter((i) => String(i.pk).startsWith('report#2026-09-28#line#'));
  const lines = await linesOf();
  assert.equal(lines.length, 150);
  assert.ok(
    lines.every((l) => l.token === 1),
    "every line kept the first holder's token",
  );
  // worker-1, paused with token 1, wakes up and writes one more line: the job's fence (now 2) refuses it.
  const fence = fenceOn({
    fences: new DynamoFenceStore(ns.clients.ddb),
    table: ns.tables.jobs,
    key: { pk: 'report#2026-09-28' },
    clock: systemClock,
  });
  const late = { table: ns.tables.jobs, item: { pk: { S: 'report#2026-09-28#line#999' }, token: { N: '1' } } };
  await assert.rejects(writeBatch(heldFence(fence, 1), [late]), (err) => err instanceof FencedOutError && err.fence === 2);
  assert.equal((await linesOf()).length, 150, 'nothing of the stale batch landed');
});

test('chunked-job: a holder whose token is below the fence (a newer holder raised it) stops at its raise, writing nothing', async () => {
  const ns = await namespace();
  await fenceOn({ fences: new DynamoFenceStore(ns.clients.ddb), table: ns.tables.jobs, key: { pk: 'report#2026-09-28' }, clock: systemClock }).raise(
    7,
  );
  const run = await runExample(ns, 'chunked-job.ts', 'worker-1');
  assert.equal(run.code, 3, run.stderr);
  assert.equal(run.summary.fencedOut, true, JSON.stringify(run.summary));
  assert.deepEqual(
    (await scan(ns, ns.tables.jobs)).filter((i) => String(i.pk).startsWith('report#2026-09-28#line#')),
    [],
    'nothing written',
  );
});

test('fenced-update: the guarded Update lands once per holder; a stale writer in the same transaction shape is refused', async () => {
  const ns = await namespace();
  for (const [holder, token] of [
    ['worker-1', 1],
    ['worker-2', 2],
  ] as const) {
    const run = await runExample(ns, 'fenced-update.ts', holder);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.summary, { holder, token });
  }
  const account = async () => (await scan(ns, ns.tables.jobs)).find((i) => i.pk === 'acct#42');
  assert.deepEqual(await account(), { pk: 'acct#42', balance: 20, last_token: 2 }, 'two credits, one per holder');
  // worker-1, paused holding token 1, wakes up and sends its credit again: the guard at position 0 refuses it.
  const stale = heldFence(
    fenceOn({
      fences: new DynamoFenceStore(ns.clients.ddb),
      table: ns.tables.jobs,
      key: { pk: 'ledger#acct#42' },
      clock: systemClock,
      resource: 'ledger',
    }),
    1,
  );
  const update = {
    Update: {
      TableName: ns.tables.jobs,
      Key: { pk: { S: 'acct#42' } },
      UpdateExpression: 'ADD balance :ten SET last_token = :t',
      ExpressionAttributeValues: { ':ten': { N: '10' }, ':t': { N: '1' } },
    },
  };
  const err = await ns.clients.ddb.send(new TransactWriteItemsCommand({ TransactItems: [stale.guard(), update] })).then(
    () => undefined,
    (e: unknown) => stale.fencedOut(e) ?? e,
  );
  assert.ok(err instanceof FencedOutError && err.fence === 2 && err.token === 1, `the stale credit is fenced out: ${String(err)}`);
  assert.deepEqual(await account(), { pk: 'acct#42', balance: 20, last_token: 2 }, 'nothing of the stale credit landed');
});

test('manifest-commit: created, then raised and committed If-Match by the next holder; a stale commit is refused; readers see only named objects', async () => {
  const ns = await namespace();
  const s3 = { manifests: new S3ManifestStore(ns.clients.s3, ns.bucket), clock: systemClock };
  const place = { key: 'exports/2026-09-28/manifest.json', chunkPrefix: 'exports/2026-09-28/chunks/' };
  // A writer still on token `token` (it paused before a newer holder raised the manifest) commits a stray chunk.
  const staleCommit = (token: number) =>
    ManifestWriter.resume(s3, place, 'export#2026-09-28', token)
      .commitChunk(9, { key: 'stray', etag: '"x"', records: 1 })
      .then(
        () => 'landed',
        (err: unknown) => (err instanceof FencedOutError ? 'fenced-out' : String(err)),
      );
  const first = await runExample(ns, 'manifest-commit.ts', 'worker-1');
  assert.equal(first.code, 0, first.stderr);
  assert.deepEqual(first.summary, { holder: 'worker-1', token: 1, manifestToken: 1, chunks: ['00', '01'] });
  assert.equal(await staleCommit(0), 'fenced-out', 'a token below the manifest cannot commit');
  const second = await runExample(ns, 'manifest-commit.ts', 'worker-2');
  assert.equal(second.code, 0, second.stderr);
  assert.deepEqual(second.summary, { holder: 'worker-2', token: 2, manifestToken: 2, chunks: ['00', '01'] });
  assert.equal(await staleCommit(1), 'fenced-out', 'worker-1, still on token 1, cannot commit over token 2');
  const manifest = await readManifest(s3, place.key);
  assert.equal(manifest?.body.token, 2);
  assert.equal(manifest?.body.state, 'DONE');
  assert.deepEqual(
    manifest?.body.raisedBy.map((r) => r.token),
    [1, 2],
  );
  assert.deepEqual(
    Object.values(manifest?.body.chunks ?? {}).map((c) => c.key),
    ['exports/2026-09-28/chunks/00.t2.jsonl', 'exports/2026-09-28/chunks/01.t2.jsonl'],
    "the manifest names worker-2's objects; the stale chunk 9 is not there",
  );
});
