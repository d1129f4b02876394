/**
 * The reference's Part 4 story with two real worker processes: A claims and works; A is stopped for real
 * (SIGSTOP) right after passing its stop-time check, past its lease; B claims after the clock-free wait with a
 * higher token and raises the fence first; A is continued (SIGCONT); A's next write is refused by the store with
 * nothing written; A stops; B completes; the audit holds. Then the same on the S3 manifest (412).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { chunkBatches } from '../../apps/billing/invoices';
import { readManifest } from '../../lib/core/manifest';
import { Attr } from '../../lib/core/schema';
import { Keys } from '../../apps/billing/keys';
import { systemClock } from '../../lib/core/clock';
import { audit, auditDeps } from '../../apps/billing/audit';
import { namespace, type Namespace } from '../support/stack';
import { startWorker } from '../support/worker';
import { S3ManifestStore } from '../../lib/core/aws/manifest-store';

const DATE = '2026-09-28';
const LEASE_MS = 3_000;
const nightArgs = [
  '--date',
  DATE,
  '--invoices',
  '2000',
  '--chunk-size',
  '500',
  '--lease-ms',
  String(LEASE_MS),
  '--renew-ms',
  '1000',
  '--margin-ms',
  '1000',
];
const plan = { date: DATE, invoices: 2000, chunkSize: 500, putsPerTransaction: 99 };

function processState(pid: number): string {
  return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0]; // R, S, T (stopped), ...
}

async function invoicesByToken(ns: Namespace): Promise<Map<string, number>> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await ns.clients.ddb.send(new ScanCommand({ TableName: ns.tables.invoices, ExclusiveStartKey: start, ConsistentRead: true }));
    items.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start);
  return new Map(items.map((i) => [String(i[Attr.pk]), Number(i[Attr.token])]));
}

async function auditNight(ns: Namespace) {
  return audit(auditDeps(ns.clients, ns.tables, ns.bucket), DATE, 2000);
}

for (const engine of ['direct', 'stepfunctions']) {
  // These pauses fall between a check and a write inside the core: the fault preload has a workflow run the
  // handlers' sources for them (verify/chaos/faults.ts).
  test(`Part 4 (${engine} engine): A pauses past its lease between its check and its write; B takes over; A's late batch is refused, nothing written`, async () => {
    const ns = await namespace();
    const night = [...nightArgs, '--engine', engine];
    // A stops itself right after the check for chunk 1, batch 2 (the gap no holder-side check can close).
    const a = startWorker(ns, [...night, '--worker', 'A'], { faults: { sigstop: 'batch:1:2' } });
    await a.waitFor((e) => e.fault === 'sigstop');
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(processState(a.child.pid!), 'T', 'A is really stopped');
    const aToken = a.events.find((e) => e.event === 'claim')!.token;
    assert.equal(aToken, 1);

    const b = startWorker(ns, [...night, '--worker', 'B']);
    const observed = await b.waitFor((e) => e.event === 'sighted');
    assert.equal(observed.holder, 'A', "B sees A's lease");
    assert.equal(observed.waitMs, LEASE_MS, 'and waits a full lease on its own clock before claiming');
    const raised = await b.waitFor((e) => e.event === 'fence-raised');
    assert.equal(raised.token, 2, 'B claims with a higher token');
    assert.equal(raised.previousFence, 1);
    const bFirst = b.events.findIndex((e) => e.event === 'fence-raised');
    assert.ok(
      b.events.slice(0, bFirst).every((e) => !['batch-committed', 'chunk-committed'].includes(e.event)),
      'B raised the fence before writing anything',
    );

    a.child.kill('SIGCONT');
    const rejected = await a.waitFor((e) => e.event === 'batch-rejected');
    assert.equal(rejected.token, 1);
    assert.equal(rejected.fence, 2, "A's write met a fence of 2");
    assert.equal(await a.exited, 3, 'A exits with the lost/fenced code');
    assert.equal(await b.exited, 0, `B completes: ${b.stderr.join('\n')}`);

    const tokens = await invoicesByToken(ns);
    const lateBatch = [...chunkBatches(plan, 1)][2];
    assert.ok(
      lateBatch.every((inv) => tokens.get(inv.pk) !== 1),
      "none of A's late batch landed with A's token",
    );
    assert.equal([...tokens.values()].filter((t) => t === 1).length, 500 + 2 * 99, "A's token is only on what A wrote before its pause");
    assert.ok(
      b.events.some((e) => e.event === 'batch-committed' && Number(e.alreadyRecorded) > 0),
      "B found A's earlier batches already recorded",
    );
    const report = await auditNight(ns);
    assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
    assert.equal(report.state, 'DONE');
    assert.equal(report.invoicesFound, 2000);
  });

  test(`Part 4 on S3 (${engine} engine): A pauses before its manifest commit; B raises the manifest; A's If-Match commit gets 412 and A stops`, async () => {
    const ns = await namespace();
    const night = [...nightArgs, '--engine', engine];
    const a = startWorker(ns, [...night, '--worker', 'A'], { faults: { sigstop: 'chunk-commit:1' } });
    await a.waitFor((e) => e.fault === 'sigstop');
    const b = startWorker(ns, [...night, '--worker', 'B']);
    await b.waitFor((e) => e.event === 'manifest-raised');
    a.child.kill('SIGCONT');
    const rejected = await a.waitFor((e) => e.event === 'commit-rejected');
    assert.equal(rejected.fence, 2, "the manifest carried B's token");
    assert.equal(await a.exited, 3);
    assert.equal(await b.exited, 0, b.stderr.join('\n'));

    const deps = { manifests: new S3ManifestStore(ns.clients.s3, ns.bucket), clock: systemClock };
    const manifest = await readManifest(deps, Keys.manifest(DATE));
    assert.equal(manifest!.body.chunks['01'].key, Keys.chunkObject(DATE, 1, 2), "chunk 1 is B's object");
    assert.equal(manifest!.body.chunks['00'].key, Keys.chunkObject(DATE, 0, 1), "chunk 0 stays A's: committed before the pause");
    const listed = await ns.clients.s3.send(new ListObjectsV2Command({ Bucket: ns.bucket, Prefix: Keys.chunkPrefix(DATE) }));
    assert.ok(
      listed.Contents!.some((o) => o.Key === Keys.chunkObject(DATE, 1, 1)),
      "A's stray object exists ...",
    );
    assert.ok(!Object.values(manifest!.body.chunks).some((c) => c.key === Keys.chunkObject(DATE, 1, 1)), '... and the manifest does not name it');
    const report = await auditNight(ns);
    assert.ok(report.ok, JSON.stringify(report.checks, null, 1));
  });
}
