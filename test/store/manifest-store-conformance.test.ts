/**
 * The manifest's store, one suite for both implementations: the S3 store (lib/core/aws/manifest-store.ts) on the local S3
 * endpoint, and the in-memory store (lib/testing/manifest-store.ts). Each test pins one behaviour of S3 the manifest
 * fence relies on, so the in-memory store cannot drift from what S3 does. How the local S3 endpoint itself follows
 * AWS is pinned, with the same sources, by test/store/s3-conformance.test.ts; these tests pin what the stores make of it.
 * Sources:
 *   [CW]  S3 User Guide, "How to prevent object overwrites with conditional writes":
 *         https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html
 *   [PUT] PutObject API reference (If-Match, If-None-Match: 412 Precondition Failed; "If a conflicting operation
 *         occurs during the upload S3 returns a 409 ConditionalRequestConflict response. On a 409 failure you should
 *         retry the upload"): https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html
 *   [GET] GetObject API reference (NoSuchKey): https://docs.aws.amazon.com/AmazonS3/latest/API/API_GetObject.html
 *   [HEAD] HeadObject API reference: https://docs.aws.amazon.com/AmazonS3/latest/API/API_HeadObject.html
 *   [OBJ] Object data type ("Objects with different object data will have different entity tags. The entity tag is
 *         an opaque string"): https://docs.aws.amazon.com/AmazonS3/latest/API/API_Object.html
 * Not pinned here (neither store emulates it): the 403 AccessDenied S3 answers for a missing key without
 * s3:ListBucket, and a 409 caused by a delete (test/store/s3-conformance.test.ts pins the local endpoint's).
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { S3ManifestStore } from '../../lib/core/aws/manifest-store';
import type { ManifestStore } from '../../lib/core/store/manifest';
import { systemClock } from '../../lib/core/clock';
import { MemoryManifestStore } from '../../lib/testing/manifest-store';
import { startLocalS3 } from '../../lib/local/s3-server';
import { namespace } from '../support/stack';

const JSON_TYPE = 'application/json';
/** The commit window of the racing tests: wide, so the second write surely completes inside the first's on 2 cores. */
const WINDOW_MS = 400;

interface Racy {
  readonly store: ManifestStore;
  /** Resolves once the last conditional write sent is committing (its body has arrived). */
  committing(): Promise<void>;
}

interface Fixture {
  readonly name: string;
  fresh(): Promise<ManifestStore>;
  racy(): Promise<Racy>;
}

const fixtures: Fixture[] = [
  {
    name: 'S3 store on the local S3 endpoint',
    fresh: async () => {
      const ns = await namespace();
      return new S3ManifestStore(ns.clients.s3, ns.bucket);
    },
    racy: async () => {
      // Conditional PUTs the server has received, and how many of them a committing() call has waited for.
      let received = 0;
      let awaited = 0;
      let wake = () => {};
      const server = await startLocalS3({
        conflictWindowMs: WINDOW_MS,
        onCall: (c) => {
          if (c.conditions) received++;
          wake();
        },
      });
      const s3 = new S3Client({
        endpoint: server.endpoint,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
      });
      await s3.send(new CreateBucketCommand({ Bucket: 'racy' }));
      after(async () => {
        s3.destroy();
        await server.stop();
      });
      return {
        store: new S3ManifestStore(s3, 'racy'),
        committing: async () => {
          const target = ++awaited;
          while (received < target) await new Promise<void>((resolve) => (wake = resolve));
          await new Promise((r) => setTimeout(r, 50)); // its small body has arrived: it is committing now
        },
      };
    },
  },
  {
    name: 'in-memory store',
    fresh: async () => new MemoryManifestStore(),
    racy: async () => ({ store: new MemoryManifestStore({ clock: systemClock, commitWindowMs: WINDOW_MS }), committing: async () => {} }),
  },
];

for (const f of fixtures) {
  describe(f.name, () => {
    test('create (If-None-Match: *) writes an absent key; on an existing key it is refused (412) and writes nothing [CW] [PUT]', async () => {
      const store = await f.fresh();
      const first = await store.create('m/once', 'first', JSON_TYPE);
      assert.ok(first.ok);
      assert.deepEqual(await store.get('m/once'), { body: 'first', etag: first.etag }, 'the read names the version the write returned');
      assert.deepEqual(await store.create('m/once', 'second', JSON_TYPE), { ok: false, reason: 'precondition-failed' });
      assert.deepEqual(await store.get('m/once'), { body: 'first', etag: first.etag });
    });

    test('put if match (If-Match) lands on the current ETag and gives a new one; a stale ETag is refused (412) [PUT] [OBJ]', async () => {
      const store = await f.fresh();
      const v1 = await store.create('m/cas', 'v1', JSON_TYPE);
      assert.ok(v1.ok);
      const v2 = await store.putIfMatch('m/cas', 'v2', JSON_TYPE, v1.etag);
      assert.ok(v2.ok);
      assert.notEqual(v2.etag, v1.etag, 'other data, another ETag');
      assert.deepEqual(await store.putIfMatch('m/cas', 'v3', JSON_TYPE, v1.etag), { ok: false, reason: 'precondition-failed' });
      assert.deepEqual(await store.get('m/cas'), { body: 'v2', etag: v2.etag }, 'nothing written by the refused put');
    });

    test('put if match on a missing key is refused as missing (404 NoSuchKey) and creates nothing [CW]', async () => {
      const store = await f.fresh();
      const other = await store.put('m/other', 'x', JSON_TYPE); // a real ETag, of another key
      assert.deepEqual(await store.putIfMatch('m/missing', 'x', JSON_TYPE, other.etag), { ok: false, reason: 'missing' });
      assert.equal(await store.get('m/missing'), undefined);
    });

    test('a read or a head of a missing key answers undefined (404), not an error [GET] [HEAD]', async () => {
      const store = await f.fresh();
      assert.equal(await store.get('m/none'), undefined);
      assert.equal(await store.head('m/none'), undefined);
    });

    test('a plain put overwrites; head gives the ETag the put returned and the size in bytes; the ETag follows the data [HEAD] [OBJ]', async () => {
      const store = await f.fresh();
      const body = 'chunk: é\n'; // two bytes for é: the size is in bytes, not characters
      const a = await store.put('c/01.t7.jsonl', body, 'application/x-ndjson');
      assert.deepEqual(await store.head('c/01.t7.jsonl'), { etag: a.etag, size: Buffer.byteLength(body) });
      const b = await store.put('c/01.t7.jsonl', `${body}more\n`, 'application/x-ndjson');
      assert.notEqual(b.etag, a.etag);
      assert.equal((await store.head('c/01.t7.jsonl'))?.etag, b.etag);
      assert.equal((await store.get('c/01.t7.jsonl'))?.body, `${body}more\n`);
    });

    test('two creates at once: the second completes while the first commits and gets 409 (retry); the first wins; the retry gets 412 [PUT] [CW]', async () => {
      const { store, committing } = await f.racy();
      const first = store.create('r/create', 'first', JSON_TYPE);
      await committing();
      assert.deepEqual(await store.create('r/create', 'second', JSON_TYPE), { ok: false, reason: 'conflict' });
      const won = await first;
      assert.ok(won.ok, 'the one committing is not disturbed');
      assert.deepEqual(await store.create('r/create', 'second', JSON_TYPE), { ok: false, reason: 'precondition-failed' });
      assert.deepEqual(await store.get('r/create'), { body: 'first', etag: won.etag });
    });

    test('two puts if match on one ETag at once: the second gets 409; after the first lands only its new ETag writes [PUT]', async () => {
      const { store, committing } = await f.racy();
      const base = await store.put('r/cas', 'base', JSON_TYPE);
      const first = store.putIfMatch('r/cas', 'one', JSON_TYPE, base.etag);
      await committing();
      assert.deepEqual(await store.putIfMatch('r/cas', 'two', JSON_TYPE, base.etag), { ok: false, reason: 'conflict' });
      const one = await first;
      assert.ok(one.ok);
      assert.deepEqual(await store.putIfMatch('r/cas', 'two', JSON_TYPE, base.etag), { ok: false, reason: 'precondition-failed' });
      const two = await store.putIfMatch('r/cas', 'two', JSON_TYPE, one.etag); // "fetch the ETag and retry the upload"
      assert.ok(two.ok);
      assert.equal((await store.get('r/cas'))?.body, 'two');
    });

    test('a plain put is not held up by a commit: it lands at once, and the create committing then meets it (412) [CW]', async () => {
      const { store, committing } = await f.racy();
      const first = store.create('r/held', 'first', JSON_TYPE);
      await committing();
      const plain = await store.put('r/held', 'plain', JSON_TYPE);
      assert.deepEqual(await first, { ok: false, reason: 'precondition-failed' });
      assert.deepEqual(await store.get('r/held'), { body: 'plain', etag: plain.etag });
    });
  });
}
