/** The manifest fence on the local S3 endpoint (Part 4, "The same fence on S3"): If-None-Match to create, If-Match to commit. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { systemClock } from '../lib/core/clock';
import { FencedOutError } from '../lib/core/errors';
import { ManifestWriter, readManifest } from '../lib/core/manifest';
import { namespace } from './support/stack';

const DATE = '2026-09-28';

test('raise creates the manifest; a newer raise fences the older writer out of its commit with a 412', async () => {
  const ns = await namespace();
  const deps = { s3: ns.clients.s3, bucket: ns.bucket, clock: systemClock };
  const { writer: a } = await ManifestWriter.raise(deps, DATE, 'job', 7);
  const objA = await a.putChunkObject(1, 'a\n');
  await a.commitChunk(1, { ...objA, token: 7, invoices: 1 });

  const { writer: b, body } = await ManifestWriter.raise(deps, DATE, 'job', 12);
  assert.equal(body.token, 12);
  assert.deepEqual(Object.keys(body.chunks), ['01'], 'the new holder keeps what was committed before');

  const stray = await a.putChunkObject(2, 'late\n'); // A's stray object lands under A's own key ...
  await assert.rejects(a.commitChunk(2, { ...stray, token: 7, invoices: 1 }), (err) => {
    assert.ok(err instanceof FencedOutError);
    assert.equal(err.resource, 'manifest');
    assert.equal(err.fence, 12);
    return true;
  });
  const m = await readManifest(deps, DATE);
  assert.deepEqual(Object.keys(m!.body.chunks), ['01'], '... but the manifest never names it');
  assert.deepEqual(m!.body.raisedBy.map((r) => r.token), [7, 12]);

  const objB = await b.putChunkObject(2, 'b\n');
  await b.commitChunk(2, { ...objB, token: 12, invoices: 1 });
  await assert.rejects(ManifestWriter.raise(deps, DATE, 'job', 11), FencedOutError, 'a lower token cannot raise it');
});

test('two commits by the same holder at once both land (a 412 on our own token re-reads and merges)', async () => {
  const ns = await namespace();
  const deps = { s3: ns.clients.s3, bucket: ns.bucket, clock: systemClock };
  const { writer } = await ManifestWriter.raise(deps, DATE, 'job', 3);
  const { writer: twin } = await ManifestWriter.raise(deps, DATE, 'job', 3);
  await Promise.all([0, 1, 2, 3].map(async (c) => {
    const w = c % 2 ? twin : writer;
    const o = await w.putChunkObject(c, `${c}\n`);
    await w.commitChunk(c, { ...o, token: 3, invoices: 1 });
  }));
  const m = await readManifest(deps, DATE);
  assert.deepEqual(Object.keys(m!.body.chunks).sort(), ['00', '01', '02', '03']);
});
