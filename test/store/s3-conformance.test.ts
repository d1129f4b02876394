/**
 * Pins lib/local/s3-server.ts to AWS S3's documented behaviour, speaking to it only through @aws-sdk/client-s3 over HTTP.
 * Sources: S3 User Guide "How to prevent object overwrites with conditional writes"
 * (https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html), the PutObject API reference
 * (https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html: If-Match / If-None-Match, "If a conflicting
 * operation occurs during the upload S3 returns a 409 ConditionalRequestConflict response. On a 409 failure you should
 * retry the upload"), GetObject / CreateBucket / ListObjectsV2 API references.
 *
 * Not emulated (see lib/local/s3-server.ts): AWS's exact conflict window, a 409 caused by an unconditional PUT, and the
 * 403 AccessDenied S3 answers for a missing key when the caller lacks s3:ListBucket.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  S3Client,
  S3ServiceException,
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  GetBucketVersioningCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  CopyObjectCommand,
  type ListObjectsV2CommandOutput,
} from '@aws-sdk/client-s3';
import { startLocalS3, type LocalS3 } from '../../lib/local/s3-server';
import type { AwsCall } from '../../lib/local/call-log';
import { within } from '../support/within';
import { ConfigError, InfrastructureError } from '../../lib/core/errors';

const BUCKET = 'conformance';
let server: LocalS3;
let s3: S3Client;

// Failed calls are what these tests provoke: keep the SDK from logging each one (it logs errors through a client
// logger, and warns on any failed stream upload). Other warnings still show.
const logger = {
  debug() {},
  info() {},
  error() {},
  warn: (...args: unknown[]) => void (String(args[0]).includes('non-retryable streaming request') || console.warn(...args)),
};
const clientFor = (endpoint: string, region = 'us-east-1') =>
  new S3Client({ endpoint, region, forcePathStyle: true, credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, logger });
const md5Etag = (body: string | Buffer) => `"${createHash('md5').update(body).digest('hex')}"`;

async function expectS3Error(promise: Promise<unknown>, name: string, status: number): Promise<S3ServiceException> {
  let caught: unknown;
  await assert.rejects(promise, (err: unknown) => {
    caught = err;
    return true;
  });
  assert.ok(caught instanceof S3ServiceException, `expected an S3ServiceException, got ${String(caught)}`);
  assert.equal(caught.name, name);
  assert.equal(caught.$metadata.httpStatusCode, status);
  return caught;
}

async function put(key: string, body: string | Buffer, extra: { IfMatch?: string; IfNoneMatch?: string } = {}) {
  return s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body, ...extra }));
}

async function getText(key: string): Promise<string> {
  const out = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
  return (await out.Body?.transformToString()) ?? '';
}

/**
 * A PutObject body the test controls: the SDK starts sending (headers plus `first`), and the rest only arrives on
 * release(). `started` resolves once the server has surely received the request headers.
 */
function heldBody(first: string, rest: string) {
  let markStarted!: () => void;
  const started = new Promise<void>((r) => (markStarted = r));
  let reading = false;
  const stream = new Readable({
    read() {
      if (reading) return;
      reading = true;
      this.push(first);
      setTimeout(markStarted, 100); // loopback delivery of the headers and first chunk
    },
  });
  return {
    Body: stream,
    ContentLength: Buffer.byteLength(first + rest),
    started,
    release() {
      stream.push(rest);
      stream.push(null);
    },
  };
}

before(async () => {
  server = await startLocalS3();
  s3 = clientFor(server.endpoint);
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
});

after(async () => {
  s3.destroy();
  await server.stop();
});

describe('conditional writes: If-None-Match: *', () => {
  test('creates the object when the key is absent; a second one gets 412 PreconditionFailed', async () => {
    const first = await put('inm/once', 'first', { IfNoneMatch: '*' });
    assert.equal(first.ETag, md5Etag('first'));
    const err = await expectS3Error(put('inm/once', 'second', { IfNoneMatch: '*' }), 'PreconditionFailed', 412);
    assert.match(err.message, /pre-conditions/);
    assert.equal(await getText('inm/once'), 'first');
  });

  test('the condition is evaluated when the upload completes, not when it starts', async () => {
    const held = heldBody('slow-', 'writer');
    const slow = s3.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: 'inm/late', Body: held.Body, ContentLength: held.ContentLength, IfNoneMatch: '*' }),
    );
    await held.started; // the key is still absent here
    await put('inm/late', 'fast-writer'); // finishes first
    held.release();
    await expectS3Error(slow, 'PreconditionFailed', 412); // a competing write is a 412, not a 409
    assert.equal(await getText('inm/late'), 'fast-writer');
  });
});

describe('conditional writes: If-Match', () => {
  test('succeeds with the current ETag and returns the new ETag; a stale ETag gets 412', async () => {
    const v1 = await put('im/obj', 'v1');
    const v2 = await put('im/obj', 'v2', { IfMatch: v1.ETag });
    assert.equal(v2.ETag, md5Etag('v2'));
    assert.notEqual(v2.ETag, v1.ETag);
    await expectS3Error(put('im/obj', 'v3', { IfMatch: v1.ETag }), 'PreconditionFailed', 412);
    assert.equal(await getText('im/obj'), 'v2');
  });

  test('on a missing key gets 404 NoSuchKey', async () => {
    await expectS3Error(put('im/missing', 'x', { IfMatch: md5Etag('x') }), 'NoSuchKey', 404);
    await expectS3Error(getText('im/missing'), 'NoSuchKey', 404);
  });
});

describe('conditional writes under concurrency: the first to finish wins, the rest get 412 or 409', () => {
  async function race(key: string, extra: { IfMatch?: string; IfNoneMatch?: string }) {
    // All 20 requests are in flight (headers sent, condition true when they started) before any body completes.
    const bodies = Array.from({ length: 20 }, (_, i) => heldBody(`writer-${String(i).padStart(2, '0')}-`, 'body'));
    const results = bodies.map((b) =>
      s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: b.Body, ContentLength: b.ContentLength, ...extra })),
    );
    await Promise.all(bodies.map((b) => b.started));
    for (const b of bodies) b.release();
    const settled = await Promise.allSettled(results);
    const winners = settled.flatMap((s, i) => (s.status === 'fulfilled' ? [{ i, etag: s.value.ETag }] : []));
    const losers = settled.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []));
    assert.equal(winners.length, 1, `exactly one winner, got ${winners.length}`);
    assert.equal(losers.length, 19);
    for (const err of losers) {
      // 412 if the winner had committed when this one completed; 409 if it was still committing (retry).
      assert.ok(err instanceof S3ServiceException);
      assert.ok(
        (err.name === 'PreconditionFailed' && err.$metadata.httpStatusCode === 412) ||
          (err.name === 'ConditionalRequestConflict' && err.$metadata.httpStatusCode === 409),
        `${err.name} ${err.$metadata.httpStatusCode}`,
      );
    }
    const winnerBody = `writer-${String(winners[0].i).padStart(2, '0')}-body`;
    assert.equal(winners[0].etag, md5Etag(winnerBody));
    assert.equal(await getText(key), winnerBody);
  }

  test('20 concurrent If-None-Match: * PUTs on one absent key', async () => {
    await race('race/inm', { IfNoneMatch: '*' });
  });

  test('20 concurrent If-Match PUTs on the same ETag (distinct bodies)', async () => {
    const base = await put('race/im', 'base');
    await race('race/im', { IfMatch: base.ETag });
  });
});

describe('409 ConditionalRequestConflict: a delete succeeds while a conditional write is in flight', () => {
  test('If-Match PUT whose key is deleted before its body completes gets 409', async () => {
    const v1 = await put('conflict/im', 'v1');
    const held = heldBody('v2-', 'body');
    const pending = s3.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: 'conflict/im', Body: held.Body, ContentLength: held.ContentLength, IfMatch: v1.ETag }),
    );
    await held.started;
    await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'conflict/im' }));
    held.release();
    await expectS3Error(pending, 'ConditionalRequestConflict', 409);
    await expectS3Error(getText('conflict/im'), 'NoSuchKey', 404); // nothing was written
  });

  test('If-None-Match PUT gets 409 even though the key is absent at completion; retrying then succeeds', async () => {
    await put('conflict/inm', 'old');
    const held = heldBody('new-', 'body');
    const pending = s3.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: 'conflict/inm', Body: held.Body, ContentLength: held.ContentLength, IfNoneMatch: '*' }),
    );
    await held.started;
    await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'conflict/inm' }));
    held.release();
    await expectS3Error(pending, 'ConditionalRequestConflict', 409);
    await put('conflict/inm', 'new-body', { IfNoneMatch: '*' }); // "On a 409 failure, retry the upload"
    assert.equal(await getText('conflict/inm'), 'new-body');
  });

  test('a delete of a key that did not exist is no conflict', async () => {
    const held = heldBody('only-', 'body');
    const pending = s3.send(
      new PutObjectCommand({ Bucket: BUCKET, Key: 'conflict/none', Body: held.Body, ContentLength: held.ContentLength, IfNoneMatch: '*' }),
    );
    await held.started;
    await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'conflict/none' }));
    held.release();
    assert.equal((await pending).ETag, md5Etag('only-body'));
  });
});

describe('409 ConditionalRequestConflict: a conditional PUT completes while another one on the key is committing', () => {
  // A wide commit window (the server's conflictWindowMs) makes the race certain on 2 cores; onCommitting tells us when
  // the first request's body has arrived and its window opened, so the second is sent while the first commits.
  const WINDOW_MS = 400;
  let racy: LocalS3;
  let client: S3Client;
  const committing: Array<() => void> = [];
  const calls: AwsCall[] = [];
  before(async () => {
    racy = await startLocalS3({
      conflictWindowMs: WINDOW_MS,
      onCommitting: () => {
        for (const f of committing.splice(0)) f();
      },
      onCall: (c) => {
        calls.push(c);
      },
    });
    client = clientFor(racy.endpoint);
    await client.send(new CreateBucketCommand({ Bucket: BUCKET }));
  });
  after(async () => {
    client.destroy();
    await racy.stop();
  });
  /** Resolves when the next conditional PUT's body has arrived and it commits: the moment a second one meets it. */
  const nextCommit = () => within(new Promise<void>((resolve) => committing.push(resolve)), 10_000, 'the first PUT began committing');
  const putTo = (key: string, body: string, extra: { IfMatch?: string; IfNoneMatch?: string } = {}) =>
    client.send(new PutObjectCommand({ Bucket: BUCKET, Key: key, Body: body, ...extra }));
  const text = async (key: string) => (await (await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }))).Body?.transformToString()) ?? '';

  test('If-None-Match: the second gets 409 (retry); the first wins; the retry then gets 412', async () => {
    const committed = nextCommit();
    const first = putTo('race/create', 'first', { IfNoneMatch: '*' });
    await committed; // its small body has arrived: it is committing now
    await expectS3Error(putTo('race/create', 'second', { IfNoneMatch: '*' }), 'ConditionalRequestConflict', 409);
    assert.equal((await first).ETag, md5Etag('first'), 'the one committing is not disturbed');
    await expectS3Error(putTo('race/create', 'second', { IfNoneMatch: '*' }), 'PreconditionFailed', 412); // "retry": now it exists
    assert.equal(await text('race/create'), 'first');
  });

  test('If-Match: the second gets 409 with the S3 XML error body; after the first commits a fresh ETag succeeds', async () => {
    const base = await putTo('race/cas', 'base');
    const committed = nextCommit();
    const first = putTo('race/cas', 'one', { IfMatch: base.ETag });
    await committed; // its small body has arrived: it is committing now
    const err = await expectS3Error(putTo('race/cas', 'two', { IfMatch: base.ETag }), 'ConditionalRequestConflict', 409);
    assert.match(err.message, /conflicting operation/);
    const one = await first;
    await expectS3Error(putTo('race/cas', 'two', { IfMatch: base.ETag }), 'PreconditionFailed', 412); // the ETag moved on
    await putTo('race/cas', 'two', { IfMatch: one.ETag }); // "fetch the object's ETag and retry the upload"
    assert.equal(await text('race/cas'), 'two');
  });

  test('the raw answer is HTTP 409 with <Code>ConditionalRequestConflict</Code>', async () => {
    const committed = nextCommit();
    const first = putTo('race/raw', 'first', { IfNoneMatch: '*' });
    await committed; // its small body has arrived: it is committing now
    const res = await fetch(`${racy.endpoint}/${BUCKET}/race/raw`, { method: 'PUT', headers: { 'if-none-match': '*' }, body: 'second' });
    assert.equal(res.status, 409);
    const xml = await res.text();
    assert.match(xml, /<Error><Code>ConditionalRequestConflict<\/Code>/);
    assert.match(xml, /<Key>race\/raw<\/Key>/);
    await first;
  });

  test('unconditional writes and other keys are not held up by a commit', async () => {
    const committed = nextCommit();
    const first = putTo('race/held', 'first', { IfNoneMatch: '*' });
    await committed; // its small body has arrived: it is committing now
    const other = putTo('race/other', 'x', { IfNoneMatch: '*' }); // another key: its own window, no 409
    await putTo('race/held', 'plain'); // unconditional: stored at once, last writer wins, no 409
    await expectS3Error(first, 'PreconditionFailed', 412); // checked when its window ends: the key now exists
    assert.equal(await text('race/held'), 'plain');
    assert.equal((await other).ETag, md5Etag('x'));
  });

  test('onCall records principal, service, operation, bucket and key of every request', async () => {
    calls.length = 0;
    const signed = new S3Client({
      endpoint: racy.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'RaiseFn', secretAccessKey: 'x' },
      logger,
    });
    try {
      await signed.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'log/a', Body: 'a' }));
      await signed.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'log/a' }));
      await signed.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'log/a' }));
      await signed.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'log/' }));
      await signed.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'log/a' }));
      await signed.send(new CreateBucketCommand({ Bucket: 'log-bucket' }));
      await signed.send(new HeadBucketCommand({ Bucket: 'log-bucket' }));
      await signed.send(new ListBucketsCommand({}));
      await expectS3Error(signed.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'log/missing' })), 'NoSuchKey', 404); // failed calls too
    } finally {
      signed.destroy();
    }
    assert.deepEqual(calls, [
      { principal: 'RaiseFn', service: 's3', operation: 'PutObject', bucket: BUCKET, key: 'log/a' },
      { principal: 'RaiseFn', service: 's3', operation: 'GetObject', bucket: BUCKET, key: 'log/a' },
      { principal: 'RaiseFn', service: 's3', operation: 'HeadObject', bucket: BUCKET, key: 'log/a' },
      { principal: 'RaiseFn', service: 's3', operation: 'ListObjectsV2', bucket: BUCKET },
      { principal: 'RaiseFn', service: 's3', operation: 'DeleteObject', bucket: BUCKET, key: 'log/a' },
      { principal: 'RaiseFn', service: 's3', operation: 'CreateBucket', bucket: 'log-bucket' },
      { principal: 'RaiseFn', service: 's3', operation: 'HeadBucket', bucket: 'log-bucket' },
      { principal: 'RaiseFn', service: 's3', operation: 'ListBuckets' },
      { principal: 'RaiseFn', service: 's3', operation: 'GetObject', bucket: BUCKET, key: 'log/missing' },
    ]);
    const anon = await fetch(`${racy.endpoint}/${BUCKET}/log/missing`);
    assert.equal(anon.status, 404);
    assert.deepEqual(calls.at(-1), { principal: 'anonymous', service: 's3', operation: 'GetObject', bucket: BUCKET, key: 'log/missing' });
  });
});

describe('objects', () => {
  test('Put/Get/Head keep the bytes, Content-Type and user metadata, with ETag, Content-Length, Last-Modified', async () => {
    const bytes = Buffer.from([0, 1, 2, 0xff, 0xfe, 13, 10, 48]);
    const out = await s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: 'obj/bin',
        Body: bytes,
        ContentType: 'application/x-test',
        Metadata: { Owner: 'billing', run: '7' },
      }),
    );
    assert.equal(out.ETag, md5Etag(bytes));
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'obj/bin' }));
    assert.deepEqual(Buffer.from((await got.Body?.transformToByteArray()) ?? []), bytes);
    assert.equal(got.ContentType, 'application/x-test');
    assert.equal(got.ContentLength, bytes.length);
    assert.equal(got.ETag, out.ETag);
    assert.deepEqual(got.Metadata, { owner: 'billing', run: '7' });
    assert.ok(got.LastModified instanceof Date && Math.abs(got.LastModified.getTime() - Date.now()) < 5_000);
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'obj/bin' }));
    assert.equal(head.ETag, out.ETag);
    assert.equal(head.ContentLength, bytes.length);
    assert.equal(head.ContentType, 'application/x-test');
    assert.deepEqual(head.Metadata, { owner: 'billing', run: '7' });
  });

  test('a stream body (sent aws-chunked with a trailing checksum) is stored as the object bytes', async () => {
    const payload = Buffer.from('x'.repeat(70_000) + 'é\r\n0\r\n'); // contains what looks like chunk framing
    const out = await s3.send(
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: 'obj/stream',
        Body: Readable.from([payload.subarray(0, 1000), payload.subarray(1000)]),
        ContentLength: payload.length,
      }),
    );
    assert.equal(out.ETag, md5Etag(payload));
    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'obj/stream' }));
    assert.deepEqual(Buffer.from((await got.Body?.transformToByteArray()) ?? []), payload);
  });

  test('a body that does not match its Content-MD5 or x-amz-checksum-crc32 is refused with 400 BadDigest', async () => {
    const wrong = createHash('md5').update('something else').digest('base64');
    await expectS3Error(s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'obj/bad', Body: 'payload', ContentMD5: wrong })), 'BadDigest', 400);
    await expectS3Error(
      s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'obj/bad', Body: 'payload', ChecksumCRC32: 'AAAAAA==' })),
      'BadDigest',
      400,
    );
    await expectS3Error(getText('obj/bad'), 'NoSuchKey', 404);
  });

  test('keys with spaces, plus signs, unicode and slashes round-trip', async () => {
    const key = 'odd keys/a+b c/é😀/..//x';
    await put(key, 'odd');
    assert.equal(await getText(key), 'odd');
    const list = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'odd keys/' }));
    assert.deepEqual(
      list.Contents?.map((c) => c.Key),
      [key],
    );
  });

  test('GetObject/HeadObject of a missing key: 404 NoSuchKey / 404 without body', async () => {
    await expectS3Error(s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'obj/nope' })), 'NoSuchKey', 404);
    await expectS3Error(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'obj/nope' })), 'NotFound', 404);
  });

  test('GetObject/HeadObject honour If-Match (412) and If-None-Match (304)', async () => {
    const { ETag } = await put('obj/cond', 'cond');
    const ok = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'obj/cond', IfMatch: ETag }));
    assert.equal(await ok.Body?.transformToString(), 'cond');
    await expectS3Error(s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'obj/cond', IfMatch: md5Etag('other') })), 'PreconditionFailed', 412);
    // HEAD errors have no body, so the SDK can only report the status.
    const status = (p: Promise<unknown>) =>
      p.then(
        () => 200,
        (err: unknown) => (err instanceof S3ServiceException ? err.$metadata.httpStatusCode : err),
      );
    assert.equal(await status(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'obj/cond', IfMatch: md5Etag('other') }))), 412);
    assert.equal(await status(s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'obj/cond', IfNoneMatch: ETag }))), 304);
    assert.equal(await status(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'obj/cond', IfNoneMatch: ETag }))), 304);
    assert.equal(await status(s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'obj/cond', IfMatch: ETag }))), 200);
    const notMatching = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'obj/cond', IfNoneMatch: md5Etag('other') }));
    assert.equal(await notMatching.Body?.transformToString(), 'cond');
  });

  test('DeleteObject answers 204 whether or not the key exists', async () => {
    await put('obj/del', 'bye');
    const first = await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'obj/del' }));
    assert.equal(first.$metadata.httpStatusCode, 204);
    await expectS3Error(getText('obj/del'), 'NoSuchKey', 404);
    const again = await s3.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: 'obj/del' }));
    assert.equal(again.$metadata.httpStatusCode, 204);
  });
});

describe('ListObjectsV2', () => {
  const LB = 'listing';
  const keys = ['a/1', 'a/2', 'a/b/3', 'b/1', 'c', 'd/x/1', 'd/y/2', 'e'];

  before(async () => {
    await s3.send(new CreateBucketCommand({ Bucket: LB }));
    for (const key of keys) await s3.send(new PutObjectCommand({ Bucket: LB, Key: key, Body: key }));
  });

  const list = (input: Omit<ConstructorParameters<typeof ListObjectsV2Command>[0], 'Bucket'>) =>
    s3.send(new ListObjectsV2Command({ Bucket: LB, ...input }));

  test('lists everything in key order with KeyCount, sizes and ETags', async () => {
    const out = await list({});
    assert.deepEqual(
      out.Contents?.map((c) => c.Key),
      keys,
    );
    assert.equal(out.KeyCount, keys.length);
    assert.equal(out.IsTruncated, false);
    assert.equal(out.NextContinuationToken, undefined);
    assert.equal(out.MaxKeys, 1000);
    assert.equal(out.Contents?.[0].Size, 3);
    assert.equal(out.Contents?.[0].ETag, md5Etag('a/1'));
  });

  test('prefix filters', async () => {
    const out = await list({ Prefix: 'a/' });
    assert.deepEqual(
      out.Contents?.map((c) => c.Key),
      ['a/1', 'a/2', 'a/b/3'],
    );
  });

  test('delimiter rolls keys up into CommonPrefixes', async () => {
    const top = await list({ Delimiter: '/' });
    assert.deepEqual(
      top.Contents?.map((c) => c.Key),
      ['c', 'e'],
    );
    assert.deepEqual(
      top.CommonPrefixes?.map((p) => p.Prefix),
      ['a/', 'b/', 'd/'],
    );
    assert.equal(top.KeyCount, 5);
    const inA = await list({ Delimiter: '/', Prefix: 'a/' });
    assert.deepEqual(
      inA.Contents?.map((c) => c.Key),
      ['a/1', 'a/2'],
    );
    assert.deepEqual(
      inA.CommonPrefixes?.map((p) => p.Prefix),
      ['a/b/'],
    );
  });

  async function allPages(input: Omit<ConstructorParameters<typeof ListObjectsV2Command>[0], 'Bucket'>) {
    const pages: ListObjectsV2CommandOutput[] = [];
    let token: string | undefined;
    do {
      const page = await list({ ...input, ContinuationToken: token });
      pages.push(page);
      token = page.NextContinuationToken;
      assert.equal(page.IsTruncated, token !== undefined);
    } while (token !== undefined && pages.length < 50);
    return pages;
  }

  test('MaxKeys + ContinuationToken paginate across several pages without gaps or repeats', async () => {
    const pages = await allPages({ MaxKeys: 3 });
    assert.equal(pages.length, 3);
    assert.deepEqual(
      pages.map((p) => p.KeyCount),
      [3, 3, 2],
    );
    assert.deepEqual(
      pages.flatMap((p) => p.Contents?.map((c) => c.Key) ?? []),
      keys,
    );
    assert.equal(pages[1].ContinuationToken, pages[0].NextContinuationToken);
  });

  test('pagination with a delimiter counts CommonPrefixes towards MaxKeys and never repeats one', async () => {
    const pages = await allPages({ MaxKeys: 2, Delimiter: '/' });
    assert.equal(pages.length, 3);
    assert.deepEqual(pages.flatMap((p) => [...(p.CommonPrefixes?.map((c) => c.Prefix) ?? []), ...(p.Contents?.map((c) => c.Key) ?? [])]).sort(), [
      'a/',
      'b/',
      'c',
      'd/',
      'e',
    ]);
  });

  test('StartAfter starts strictly after the given key', async () => {
    const out = await list({ StartAfter: 'b/1' });
    assert.deepEqual(
      out.Contents?.map((c) => c.Key),
      ['c', 'd/x/1', 'd/y/2', 'e'],
    );
    assert.equal(out.StartAfter, 'b/1');
  });

  test('keys come back in UTF-8 binary order, not UTF-16 order', async () => {
    // U+FF71 is EF BD B1 in UTF-8 and U+1F600 is F0 9F 98 80: UTF-8 puts U+FF71 first, JS string order the emoji.
    for (const key of ['u/\u{1F600}', 'u/\uFF71', 'u/z', 'u/é']) await s3.send(new PutObjectCommand({ Bucket: LB, Key: key, Body: 'u' }));
    const out = await list({ Prefix: 'u/' });
    assert.deepEqual(
      out.Contents?.map((c) => c.Key),
      ['u/z', 'u/é', 'u/\uFF71', 'u/\u{1F600}'],
    );
  });
});

describe('buckets', () => {
  test('operations on a missing bucket get 404 NoSuchBucket', async () => {
    await expectS3Error(s3.send(new PutObjectCommand({ Bucket: 'no-such-bucket', Key: 'k', Body: 'x' })), 'NoSuchBucket', 404);
    await expectS3Error(s3.send(new GetObjectCommand({ Bucket: 'no-such-bucket', Key: 'k' })), 'NoSuchBucket', 404);
    await expectS3Error(s3.send(new ListObjectsV2Command({ Bucket: 'no-such-bucket' })), 'NoSuchBucket', 404);
    await expectS3Error(s3.send(new DeleteObjectCommand({ Bucket: 'no-such-bucket', Key: 'k' })), 'NoSuchBucket', 404);
    await expectS3Error(s3.send(new HeadBucketCommand({ Bucket: 'no-such-bucket' })), 'NotFound', 404);
  });

  test('CreateBucket on a bucket you own: 200 in us-east-1 (legacy), 409 BucketAlreadyOwnedByYou elsewhere', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'twice' }));
    await s3.send(new CreateBucketCommand({ Bucket: 'twice' }));
    const euWest = clientFor(server.endpoint, 'eu-west-1');
    try {
      await expectS3Error(euWest.send(new CreateBucketCommand({ Bucket: 'twice' })), 'BucketAlreadyOwnedByYou', 409);
    } finally {
      euWest.destroy();
    }
  });

  test('HeadBucket, ListBuckets, and DeleteBucket (409 BucketNotEmpty until empty)', async () => {
    await s3.send(new CreateBucketCommand({ Bucket: 'short-lived' }));
    await s3.send(new HeadBucketCommand({ Bucket: 'short-lived' }));
    const listed = await s3.send(new ListBucketsCommand({}));
    assert.ok(listed.Buckets?.some((b) => b.Name === 'short-lived' && b.CreationDate instanceof Date));
    await s3.send(new PutObjectCommand({ Bucket: 'short-lived', Key: 'k', Body: 'x' }));
    await expectS3Error(s3.send(new DeleteBucketCommand({ Bucket: 'short-lived' })), 'BucketNotEmpty', 409);
    await s3.send(new DeleteObjectCommand({ Bucket: 'short-lived', Key: 'k' }));
    await s3.send(new DeleteBucketCommand({ Bucket: 'short-lived' }));
    await expectS3Error(s3.send(new HeadBucketCommand({ Bucket: 'short-lived' })), 'NotFound', 404);
  });

  test('operations the server does not implement get 501 NotImplemented', async () => {
    await expectS3Error(s3.send(new GetBucketVersioningCommand({ Bucket: BUCKET })), 'NotImplemented', 501);
    await expectS3Error(s3.send(new CopyObjectCommand({ Bucket: BUCKET, Key: 'copy', CopySource: `${BUCKET}/obj/cond` })), 'NotImplemented', 501);
  });
});

describe('startup', () => {
  test('a port in use is an InfrastructureError with a one-line message', async () => {
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as net.AddressInfo).port;
    try {
      await assert.rejects(startLocalS3({ port }), (err: unknown) => {
        assert.ok(err instanceof InfrastructureError);
        assert.equal(err.message, `local S3: port ${port} on 127.0.0.1 is already in use`);
        return true;
      });
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });

  test('only loopback hosts are accepted, and conflictWindowMs must be a number >= 0', async () => {
    await assert.rejects(startLocalS3({ host: '0.0.0.0' }), ConfigError);
    await assert.rejects(startLocalS3({ conflictWindowMs: -1 }), ConfigError);
  });

  test('a second server on its own port is independent, and stop() is idempotent', async () => {
    const other = await startLocalS3({ port: 0 });
    assert.notEqual(other.port, server.port);
    assert.equal(other.endpoint, `http://127.0.0.1:${other.port}`);
    const c = clientFor(other.endpoint);
    try {
      await expectS3Error(c.send(new ListObjectsV2Command({ Bucket: BUCKET })), 'NoSuchBucket', 404);
    } finally {
      c.destroy();
      await other.stop();
      await other.stop();
    }
  });
});
