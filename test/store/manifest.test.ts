/** The manifest fence on the local S3 endpoint (Part 4, "The same fence on S3"): If-None-Match to create, If-Match to commit. */
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import type { AwsCall } from '../../lib/local/call-log';
import { startLocalS3 } from '../../lib/local/s3-server';
import { systemClock, VirtualClock } from '../../lib/core/clock';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';
import { FencedOutError } from '../../lib/core/errors';
import { ManifestWriter, readManifest, type ManifestPlace } from '../../lib/core/manifest';
import { namespace } from '../support/stack';
import { S3ManifestStore } from '../../lib/core/aws/manifest-store';

const PLACE: ManifestPlace = { key: 'jobs/2026-09-28/manifest.json', chunkPrefix: 'jobs/2026-09-28/chunks/' };

test('raise creates the manifest; a newer raise fences the older writer out of its commit with a 412', async () => {
  const ns = await namespace();
  const deps = { manifests: new S3ManifestStore(ns.clients.s3, ns.bucket), clock: systemClock };
  const { writer: a } = await ManifestWriter.raiseAt(deps, PLACE, 'job', 7);
  const objA = await a.putChunkObject(1, 'a\n');
  await a.commitChunk(1, { ...objA, records: 1 });

  const { writer: b, body } = await ManifestWriter.raiseAt(deps, PLACE, 'job', 12);
  assert.equal(body.token, 12);
  assert.deepEqual(Object.keys(body.chunks), ['01'], 'the new holder keeps what was committed before');

  const stray = await a.putChunkObject(2, 'late\n'); // A's stray object lands under A's own key ...
  await assert.rejects(a.commitChunk(2, { ...stray, records: 1 }), (err) => {
    assert.ok(err instanceof FencedOutError);
    assert.equal(err.resource, 'manifest');
    assert.equal(err.fence, 12);
    return true;
  });
  const m = await readManifest(deps, PLACE.key);
  assert.deepEqual(Object.keys(m!.body.chunks), ['01'], '... but the manifest never names it');
  assert.deepEqual(
    m!.body.raisedBy.map((r) => r.token),
    [7, 12],
  );

  const objB = await b.putChunkObject(2, 'b\n');
  await b.commitChunk(2, { ...objB, records: 1 });
  await assert.rejects(ManifestWriter.raiseAt(deps, PLACE, 'job', 11), FencedOutError, 'a lower token cannot raise it');
});

test('two commits by the same holder at once both land (a 412 on our own token re-reads and merges)', async () => {
  const ns = await namespace();
  const deps = { manifests: new S3ManifestStore(ns.clients.s3, ns.bucket), clock: systemClock };
  const { writer } = await ManifestWriter.raiseAt(deps, PLACE, 'job', 3);
  const { writer: twin } = await ManifestWriter.raiseAt(deps, PLACE, 'job', 3);
  await Promise.all(
    [0, 1, 2, 3].map(async (c) => {
      const w = c % 2 ? twin : writer;
      const o = await w.putChunkObject(c, `${c}\n`);
      await w.commitChunk(c, { ...o, records: 1 });
    }),
  );
  const m = await readManifest(deps, PLACE.key);
  assert.deepEqual(Object.keys(m!.body.chunks).sort(), ['00', '01', '02', '03']);
});

/** A local S3 of the test's own, with a commit window wide enough that conditional writes race on 2 cores. */
async function racyS3(conflictWindowMs: number) {
  const calls: AwsCall[] = [];
  const server = await startLocalS3({ conflictWindowMs, onCall: (c) => calls.push(c) });
  const s3 = new S3Client({
    endpoint: server.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  const answers: string[] = []; // the error name of every failed S3 call, as the SDK parsed it
  s3.middlewareStack.add(
    (next) => async (args) => {
      try {
        return await next(args);
      } catch (err) {
        answers.push((err as Error).name);
        throw err;
      }
    },
    { step: 'initialize', name: 'testAnswers' },
  );
  await s3.send(new CreateBucketCommand({ Bucket: 'racy' }));
  calls.length = 0;
  after(async () => {
    s3.destroy();
    await server.stop();
  });
  return { deps: { manifests: new S3ManifestStore(s3, 'racy'), clock: systemClock, random: () => 0.5 }, calls, answers };
}

test('a 409 ConditionalRequestConflict is retried by reading again: two commits at once both land', async () => {
  const { deps, answers } = await racyS3(150);
  const { writer } = await ManifestWriter.raiseAt(deps, PLACE, 'job', 4);
  const twin = ManifestWriter.resume(deps, PLACE, 'job', 4);
  await twin.commitChunk(0, { key: 'k0', etag: '"e0"', records: 1 }); // learns the ETag
  await writer.commitChunk(1, { key: 'k1', etag: '"e1"', records: 1 }); // 412 on its stale ETag, merges
  answers.length = 0;
  // Both hold the current ETag now; the second to complete lands inside the first's commit window: 409.
  await Promise.all([twin.commitChunk(2, { key: 'k2', etag: '"e2"', records: 1 }), writer.commitChunk(3, { key: 'k3', etag: '"e3"', records: 1 })]);
  assert.ok(answers.includes('ConditionalRequestConflict'), `a 409 happened (answers: ${answers.join(', ')})`);
  const m = await readManifest(deps, PLACE.key);
  assert.deepEqual(Object.keys(m!.body.chunks).sort(), ['00', '01', '02', '03'], 'nothing lost');
  assert.equal(m!.body.token, 4);
});

test('a missing manifest is created with If-None-Match: * and never read first (404 or 403 alike); an existing one is read only after the 412', async () => {
  const { deps, calls, answers } = await racyS3(5);
  const first = await ManifestWriter.raiseAt(deps, PLACE, 'job', 2);
  assert.deepEqual(
    first.body.raisedBy.map((r) => r.token),
    [2],
  );
  assert.deepEqual(
    calls.map((c) => c.operation),
    ['PutObject'],
    'created at once: no GetObject of a missing key',
  );
  assert.deepEqual(answers, []);
  calls.length = 0;
  const second = await ManifestWriter.raiseAt(deps, PLACE, 'job', 3);
  assert.deepEqual(
    calls.map((c) => c.operation),
    ['PutObject', 'GetObject', 'PutObject'],
    'create → 412 → read → If-Match',
  );
  assert.deepEqual(answers, ['PreconditionFailed']);
  assert.deepEqual(
    second.body.raisedBy.map((r) => r.token),
    [2, 3],
  );
  await assert.rejects(first.writer.commitChunk(0, { key: 'k', etag: '"e"', records: 1 }), FencedOutError);
});

test('two raises of a missing manifest at once: one creates it, the other reads it after its 412 or 409 and raises over it', async () => {
  const { deps } = await racyS3(150);
  const [a, b] = await Promise.allSettled([ManifestWriter.raiseAt(deps, PLACE, 'job', 5), ManifestWriter.raiseAt(deps, PLACE, 'job', 6)]);
  assert.equal(b.status, 'fulfilled', 'the higher token always raises');
  const m = await readManifest(deps, PLACE.key);
  assert.equal(m!.body.token, 6);
  if (a.status === 'rejected') assert.ok(a.reason instanceof FencedOutError, 'the lower one may only be fenced out');
  else
    assert.deepEqual(
      m!.body.raisedBy.map((r) => r.token),
      [5, 6],
    );
});

test('the same fence on the in-memory store: a newer raise fences the older writer out, and a 409 is retried until both commits land', async () => {
  const clock = new VirtualClock();
  const store = new MemoryManifestStore({ clock, commitWindowMs: 100 });
  const refusals: string[] = []; // why each refused If-Match put was refused
  const putIfMatch = store.putIfMatch.bind(store);
  store.putIfMatch = async (...args) => {
    const out = await putIfMatch(...args);
    if (!out.ok) refusals.push(out.reason);
    return out;
  };
  const deps = { manifests: store, clock, random: () => 0.5 };
  const raising = ManifestWriter.raiseAt(deps, PLACE, 'job', 4);
  await clock.runUntilIdle();
  const { writer } = await raising;
  const twin = ManifestWriter.resume(deps, PLACE, 'job', 4);
  // Both commit at once: the second completes inside the first's commit window (409), backs off, reads, merges.
  const both = Promise.all([
    writer.commitChunk(0, { key: 'k0', etag: '"e0"', records: 1 }),
    twin.commitChunk(1, { key: 'k1', etag: '"e1"', records: 1 }),
  ]);
  await clock.runUntilIdle();
  await both;
  assert.ok(refusals.includes('conflict'), `a 409 happened (refusals: ${refusals.join(', ')})`);
  assert.deepEqual(Object.keys((await readManifest(deps, PLACE.key))!.body.chunks).sort(), ['00', '01'], 'nothing lost');

  const raisingB = ManifestWriter.raiseAt(deps, PLACE, 'job', 9);
  await clock.runUntilIdle();
  await raisingB;
  const late = assert.rejects(
    writer.commitChunk(2, { key: 'k2', etag: '"e2"', records: 1 }),
    (err) => err instanceof FencedOutError && err.fence === 9,
  );
  await clock.runUntilIdle();
  await late;
  const m = (await readManifest(deps, PLACE.key))!.body;
  assert.deepEqual(Object.keys(m.chunks).sort(), ['00', '01'], 'the fenced-out commit is never named');
  assert.deepEqual(
    m.raisedBy.map((r) => r.token),
    [4, 9],
  );
});
