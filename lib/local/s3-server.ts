/**
 * A small local S3 endpoint that enforces conditional writes the way AWS documents them, for tests and the local stack.
 *
 * Guarantees:
 *   - PutObject with `If-None-Match: *` or `If-Match: <etag>` is checked when the upload completes (after the whole
 *     body has arrived), and the check and the store run in one synchronous step: of N concurrent conditional PUTs on
 *     one key at most one wins (the first to finish), and the rest get 412 PreconditionFailed or 409.
 *   - 409 ConditionalRequestConflict, as AWS answers a conditional write that races a conflicting operation on the
 *     same key ("retry"): (a) a conditional PUT whose body completes while another conditional PUT on that key is
 *     committing (received in full, not yet stored: `conflictWindowMs`, default 5 ms, widened by tests so races
 *     happen on 2 cores); (b) a conditional PUT whose key was deleted by another request while its body was still
 *     arriving (see commitPut).
 *   - If-Match on a missing key is 404 NoSuchKey.
 *   - ETag is the quoted hex MD5 of the body; Content-Type, a few standard headers and x-amz-meta-* are kept.
 *   - aws-chunked request bodies (what @aws-sdk/client-s3 sends for stream bodies) are decoded. Content-MD5 and
 *     x-amz-checksum-crc32/sha1/sha256 (header or trailer) are verified; other checksum algorithms are accepted unchecked.
 *   - Errors are S3 XML (<Error><Code>…), HEAD errors have no body; anything not listed below is 501 NotImplemented.
 * Operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket, ListObjectsV2, PutObject, GetObject, HeadObject,
 * DeleteObject: one small function each, in OPERATIONS, found by the operation's AWS name (operationOf, which also
 * names it in the call log). The body decoder (objectBody) turns a PutObject's bytes into the object's.
 *
 * Every request can be recorded (`onCall`: principal from the SigV4 Authorization header, operation, bucket, key)
 * for the IAM proof; the server itself checks no signature and no permission.
 *
 * Does not: persist anything (in memory, one process), do virtual-hosted addressing (path-style only), check
 * signatures or credentials, do versioning, multipart, copy, ranges, ACLs, tagging, or conditional deletes. Not
 * emulated about 409: AWS's exact conflict window (undocumented: ours is a fixed commit delay), a 409 caused by an
 * unconditional PUT racing a conditional one (here the conditional one then sees the new object: 412 or success),
 * and 403 AccessDenied for a missing key when the caller lacks s3:ListBucket (there is no IAM here: always 404).
 * It binds loopback addresses only.
 */
import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { setTimeout as delay } from 'node:timers/promises';
import { ConfigError, InfrastructureError } from '../core/errors';
import { decodeAwsChunked, readBody } from './http-body';
import { conditionsOf, principalOf, type CallSink } from './call-log';

export interface LocalS3Options {
  /** Loopback address to bind. Default '127.0.0.1'. */
  host?: string;
  /** 0 or absent: a free port. */
  port?: number;
  /**
   * How long a conditional PUT stays "committing" after its body has arrived: another conditional PUT on the same
   * key completing meanwhile gets 409 ConditionalRequestConflict. Default 5 ms; 0 commits at once (no 409 races).
   */
  conflictWindowMs?: number;
  /** Record every request: principal, service 's3', operation, bucket, key (lib/local/call-log.ts). */
  onCall?: CallSink;
  /** Told when a conditional PUT's body has arrived and its commit window opens (a test's race starts there). */
  onCommitting?: (bucket: string, key: string) => void;
}

export interface LocalS3 {
  /** e.g. http://127.0.0.1:PORT */
  readonly endpoint: string;
  readonly port: number;
  stop(): Promise<void>;
}

interface StoredObject {
  body: Buffer;
  etag: string; // quoted, as on the wire
  lastModified: Date; // whole seconds, like HTTP dates
  headers: Record<string, string>; // content-type and the other kept standard headers
  meta: Record<string, string>; // x-amz-meta-* (lower-case names)
}

interface Bucket {
  created: Date;
  objects: Map<string, StoredObject>;
  /** key -> sequence number of the last DeleteObject that removed it (for 409 ConditionalRequestConflict). */
  deletedAt: Map<string, number>;
}

class S3Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly extra: Record<string, string> = {},
  ) {
    super(message);
  }
}

const XMLNS = 'http://s3.amazonaws.com/doc/2006-03-01/';
const KEPT_HEADERS = ['content-type', 'cache-control', 'content-disposition', 'content-encoding', 'content-language', 'expires'];
const noSuchBucket = (name: string) => new S3Error(404, 'NoSuchBucket', 'The specified bucket does not exist', { BucketName: name });
const noSuchKey = (key: string) => new S3Error(404, 'NoSuchKey', 'The specified key does not exist.', { Key: key });
const preconditionFailed = (condition: string) =>
  new S3Error(412, 'PreconditionFailed', 'At least one of the pre-conditions you specified did not hold', { Condition: condition });
const conditionalConflict = (key: string) =>
  new S3Error(409, 'ConditionalRequestConflict', 'A conflicting operation occurred. If using PutObject you can retry the request.', { Key: key });
const notImplemented = (what: string) =>
  new S3Error(501, 'NotImplemented', `A header or query you provided implies functionality that is not implemented: ${what}`);

const xmlEscape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&apos;' })[c] as string);
const tag = (name: string, value: string | number | boolean) => `<${name}>${xmlEscape(String(value))}</${name}>`;
/** S3 orders keys by their UTF-8 bytes, which differs from JS string order for characters outside the BMP. */
const byteCompare = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
const header = (req: http.IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
};

function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

// ─── The server's state ──────────────────────────────────────────────────────────────────────────────────────────

/** Everything the server holds, in memory: the buckets, a mutation counter, the conditional PUTs committing. */
class Store {
  readonly buckets = new Map<string, Bucket>();
  /** Bumped by every mutation; a request remembers the value it arrived at (409 on a delete during its upload). */
  seq = 0;
  /** bucket + NUL + key of every conditional PUT that is committing (body received, not yet stored). */
  private readonly committing = new Set<string>();

  constructor(
    private readonly conflictWindowMs: number,
    private readonly onCommitting?: (bucket: string, key: string) => void,
  ) {}

  bucket(name: string): Bucket {
    const b = this.buckets.get(name);
    if (!b) throw noSuchBucket(name);
    return b;
  }

  /**
   * A conditional PUT whose body has arrived is "committing" for conflictWindowMs; meanwhile another conditional PUT
   * on the same key gets 409 ConditionalRequestConflict. AWS: "If a conflicting operation occurs during the upload S3
   * returns a 409 ConditionalRequestConflict response. On a 409 failure you should retry the upload" (PutObject API
   * reference, If-Match / If-None-Match, https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html; the S3
   * User Guide's conditional-writes.html, "Conditional write behavior"). The first to finish still wins: the one
   * committing is not disturbed, and its own condition is checked when its window ends.
   */
  async commitWindow(bucketName: string, key: string): Promise<void> {
    if (this.conflictWindowMs === 0) return;
    const slot = `${bucketName}\0${key}`;
    if (this.committing.has(slot)) throw conditionalConflict(key);
    this.committing.add(slot);
    this.onCommitting?.(bucketName, key);
    try {
      await delay(this.conflictWindowMs); // Node timers run on the monotonic clock
    } finally {
      this.committing.delete(slot);
    }
  }

  /**
   * The conditional part of PutObject, run at upload completion in the same synchronous step as the store.
   *
   * 409 ConditionalRequestConflict: AWS's conditional-writes guide ("How to prevent object overwrites with conditional
   * writes", https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html) says a conditional write
   * gets 409 when a delete request on the same object succeeds before the conditional write completes (retry the PUT).
   * That is the case a single server can have, so we return 409 when a DeleteObject removed this key after the PUT's
   * request arrived and before its body finished, whatever the key holds now. A competing *write* in that window is not
   * a conflict: the same page says the first write to finish wins and later conditional writes get 412, which is what
   * the ordinary checks below produce.
   */
  commitPut(bucket: Bucket, key: string, ifMatch: string | undefined, ifNoneMatch: string | undefined, startedAt: number): void {
    if (ifMatch === undefined && ifNoneMatch === undefined) return;
    if ((bucket.deletedAt.get(key) ?? -1) > startedAt) throw conditionalConflict(key);
    const current = bucket.objects.get(key);
    if (ifMatch !== undefined) {
      if (!current) throw noSuchKey(key);
      if (!etagMatches(ifMatch, current.etag)) throw preconditionFailed('If-Match');
    }
    if (ifNoneMatch !== undefined && current) throw preconditionFailed('If-None-Match');
  }
}

// ─── One request, and the operation table ────────────────────────────────────────────────────────────────────────

/** One request as every operation sees it: parsed, its body read in full. */
interface S3Request {
  readonly req: http.IncomingMessage;
  readonly method: string;
  /** The bucket's name ('' for the service: ListBuckets). */
  readonly bucket: string;
  /** The object's key ('' for a bucket operation). */
  readonly key: string;
  readonly query: URLSearchParams;
  readonly raw: Buffer;
  /** Store.seq when the request arrived. */
  readonly startedAt: number;
  /** Refuse (501) any query parameter but these (and the SDK's `x-id`). */
  allow(...names: string[]): void;
  /** Answer; a HEAD answer never has a body. */
  send(status: number, headers: Record<string, string>, body?: Buffer | string): void;
}

/**
 * An operation: its checks and effects run synchronously (but a conditional PUT's commit window), so each request is
 * atomic with respect to the others.
 */
type Operation = (store: Store, r: S3Request) => void | Promise<void>;

const owner = () => `<Owner>${tag('ID', 'local')}${tag('DisplayName', 'local')}</Owner>`;

function listBuckets(store: Store, r: S3Request): void {
  r.allow();
  const list = [...store.buckets.entries()].sort(([a], [b]) => byteCompare(a, b));
  const xml =
    `<ListAllMyBucketsResult xmlns="${XMLNS}">${owner()}<Buckets>` +
    list.map(([name, b]) => `<Bucket>${tag('Name', name)}${tag('CreationDate', b.created.toISOString())}</Bucket>`).join('') +
    '</Buckets></ListAllMyBucketsResult>';
  r.send(200, { 'content-type': 'application/xml' }, xml);
}

function createBucket(store: Store, r: S3Request): void {
  r.allow();
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(r.bucket)) {
    throw new S3Error(400, 'InvalidBucketName', 'The specified bucket is not valid.', { BucketName: r.bucket });
  }
  if (store.buckets.has(r.bucket)) {
    // AWS: 409 BucketAlreadyOwnedByYou in every Region except us-east-1, where re-creating a bucket you own returns
    // 200 OK "for legacy compatibility" (CreateBucket / BucketAlreadyOwnedByYou docs). We read the Region from the
    // SigV4 credential scope the client signed with.
    const region = /Credential=[^/]*\/\d+\/([^/]+)\//.exec(header(r.req, 'authorization') ?? '')?.[1] ?? 'us-east-1';
    if (region !== 'us-east-1') {
      throw new S3Error(409, 'BucketAlreadyOwnedByYou', 'Your previous request to create the named bucket succeeded and you already own it.', {
        BucketName: r.bucket,
      });
    }
  } else {
    store.buckets.set(r.bucket, { created: new Date(), objects: new Map(), deletedAt: new Map() });
    store.seq++;
  }
  r.send(200, { location: `/${r.bucket}` });
}

function headBucket(store: Store, r: S3Request): void {
  r.allow();
  store.bucket(r.bucket);
  r.send(200, { 'x-amz-bucket-region': 'us-east-1' });
}

function deleteBucket(store: Store, r: S3Request): void {
  r.allow();
  if (store.bucket(r.bucket).objects.size > 0) {
    throw new S3Error(409, 'BucketNotEmpty', 'The bucket you tried to delete is not empty', { BucketName: r.bucket });
  }
  store.buckets.delete(r.bucket);
  store.seq++;
  r.send(204, {});
}

function listObjectsV2(store: Store, r: S3Request): void {
  r.allow('list-type', 'prefix', 'delimiter', 'max-keys', 'continuation-token', 'start-after', 'encoding-type', 'fetch-owner');
  const bucket = store.bucket(r.bucket);
  const query = r.query;
  const prefix = query.get('prefix') ?? '';
  const delimiter = query.get('delimiter') ?? '';
  const encodingType = query.get('encoding-type');
  if (encodingType !== null && encodingType !== 'url') throw new S3Error(400, 'InvalidArgument', 'Invalid Encoding Method specified in Request');
  const maxKeysRaw = query.get('max-keys') ?? '1000';
  if (!/^\d+$/.test(maxKeysRaw)) throw new S3Error(400, 'InvalidArgument', 'Provided max-keys not an integer or within integer range');
  const maxKeys = Math.min(Number(maxKeysRaw), 1000);
  const token = query.get('continuation-token');
  const startAfter = query.get('start-after');
  let after = startAfter ?? undefined;
  let skipPrefix: string | undefined; // the last page ended on this CommonPrefix: skip every key under it
  if (token !== null) {
    try {
      const t = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { after: unknown; cp: unknown };
      if (typeof t.after !== 'string') throw new Error('bad token');
      after = t.after;
      if (t.cp === true) skipPrefix = t.after;
    } catch {
      throw new S3Error(400, 'InvalidArgument', 'The continuation token provided is incorrect');
    }
  }
  const enc = (s: string) => (encodingType === 'url' ? encodeURIComponent(s).replace(/%2F/g, '/') : s);
  const contents: string[] = [];
  const prefixes: string[] = [];
  let last: { after: string; cp: boolean } | undefined;
  let truncated = false;
  for (const key of [...bucket.objects.keys()].sort(byteCompare)) {
    if (!key.startsWith(prefix)) continue;
    if (after !== undefined && byteCompare(key, after) <= 0) continue;
    if (skipPrefix !== undefined && key.startsWith(skipPrefix)) continue;
    const d = delimiter ? key.indexOf(delimiter, prefix.length) : -1;
    const cp = d >= 0 ? key.slice(0, d + delimiter.length) : undefined;
    if (cp !== undefined && cp === prefixes[prefixes.length - 1]) continue;
    if (contents.length + prefixes.length >= maxKeys) {
      truncated = maxKeys > 0;
      break;
    }
    if (cp !== undefined) {
      prefixes.push(cp);
      last = { after: cp, cp: true };
    } else {
      const o = bucket.objects.get(key) as StoredObject;
      contents.push(
        `<Contents>${tag('Key', enc(key))}${tag('LastModified', o.lastModified.toISOString())}${tag('ETag', o.etag)}` +
          `${tag('Size', o.body.length)}${query.get('fetch-owner') === 'true' ? owner() : ''}${tag('StorageClass', 'STANDARD')}</Contents>`,
      );
      last = { after: key, cp: false };
    }
  }
  const next = truncated && last ? Buffer.from(JSON.stringify(last), 'utf8').toString('base64url') : undefined;
  const xml =
    `<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="${XMLNS}">${tag('Name', r.bucket)}${tag('Prefix', enc(prefix))}` +
    (delimiter ? tag('Delimiter', enc(delimiter)) : '') +
    `${tag('MaxKeys', maxKeys)}${encodingType ? tag('EncodingType', encodingType) : ''}` +
    `${tag('KeyCount', contents.length + prefixes.length)}${tag('IsTruncated', truncated)}` +
    (token !== null ? tag('ContinuationToken', token) : '') +
    (next !== undefined ? tag('NextContinuationToken', next) : '') +
    (startAfter !== null ? tag('StartAfter', enc(startAfter)) : '') +
    contents.join('') +
    prefixes.map((p) => `<CommonPrefixes>${tag('Prefix', enc(p))}</CommonPrefixes>`).join('') +
    '</ListBucketResult>';
  r.send(200, { 'content-type': 'application/xml' }, xml);
}

/** PutObject, unconditional or with If-Match / If-None-Match: *, checked when the upload completes (Store.commitPut). */
async function putObject(store: Store, r: S3Request): Promise<void> {
  r.allow();
  store.bucket(r.bucket); // NoSuchBucket before the body is even looked at
  const body = objectBody(r.req, r.raw);
  const etag = `"${createHash('md5').update(body).digest('hex')}"`;
  const headers: Record<string, string> = { 'content-type': 'binary/octet-stream' };
  const meta: Record<string, string> = {};
  for (const name of KEPT_HEADERS) {
    let v = header(r.req, name);
    if (name === 'content-encoding')
      v = v
        ?.split(',')
        .map((s) => s.trim())
        .filter((s) => s && s !== 'aws-chunked')
        .join(', ');
    if (v) headers[name] = v;
  }
  for (const [name, v] of Object.entries(r.req.headers)) if (name.startsWith('x-amz-meta-') && v !== undefined) meta[name] = String(v);
  const ifMatch = header(r.req, 'if-match');
  const ifNoneMatch = header(r.req, 'if-none-match');
  if (ifNoneMatch !== undefined && ifNoneMatch.trim() !== '*') throw notImplemented('If-None-Match on PutObject only accepts *');
  if (ifMatch !== undefined || ifNoneMatch !== undefined) await store.commitWindow(r.bucket, r.key);
  const target = store.bucket(r.bucket); // it may have been deleted during the window
  store.commitPut(target, r.key, ifMatch, ifNoneMatch, r.startedAt);
  target.objects.set(r.key, { body, etag, lastModified: new Date(Math.floor(Date.now() / 1000) * 1000), headers, meta });
  store.seq++;
  r.send(200, { etag });
}

/** GetObject and HeadObject (the same answer; a HEAD one has no body), with their read conditions. */
function getObject(store: Store, r: S3Request): void {
  r.allow();
  if (header(r.req, 'range') !== undefined) throw notImplemented('Range');
  const obj = store.bucket(r.bucket).objects.get(r.key);
  if (!obj) throw noSuchKey(r.key);
  const base = { etag: obj.etag, 'last-modified': obj.lastModified.toUTCString() };
  if (checkReadConditions(r.req, obj) === 304) return r.send(304, base);
  r.send(200, { ...base, ...obj.headers, ...obj.meta, 'content-length': String(obj.body.length), 'accept-ranges': 'bytes' }, obj.body);
}

function deleteObject(store: Store, r: S3Request): void {
  r.allow();
  for (const h of ['if-match', 'x-amz-if-match-last-modified-time', 'x-amz-if-match-size']) {
    if (header(r.req, h) !== undefined) throw notImplemented(`conditional DeleteObject (${h})`);
  }
  const bucket = store.bucket(r.bucket);
  if (bucket.objects.delete(r.key)) bucket.deletedAt.set(r.key, ++store.seq);
  r.send(204, {}); // 204 whether or not the key existed, like AWS
}

/** Every operation the server implements, by its AWS name (operationOf); any other request is 501 NotImplemented. */
const OPERATIONS: Readonly<Record<string, Operation>> = {
  ListBuckets: listBuckets,
  CreateBucket: createBucket,
  HeadBucket: headBucket,
  DeleteBucket: deleteBucket,
  ListObjectsV2: listObjectsV2,
  PutObject: putObject,
  GetObject: getObject,
  HeadObject: getObject,
  DeleteObject: deleteObject,
};

/** The S3 API operation a request is, as AWS names it: the key into OPERATIONS, and the call log's name. */
function operationOf(method: string, bucket: string, key: string, query: URLSearchParams, req: http.IncomingMessage): string {
  if (bucket === '') return method === 'GET' ? 'ListBuckets' : `${method} /`;
  if (key === '') {
    if (method === 'GET' && query.get('list-type') === '2') return 'ListObjectsV2';
    const bucketOps: Record<string, string> = { PUT: 'CreateBucket', HEAD: 'HeadBucket', DELETE: 'DeleteBucket', GET: 'ListObjects' };
    const sub = [...query.keys()].find((k) => k !== 'x-id');
    return sub === undefined ? (bucketOps[method] ?? `${method} bucket`) : `${method} bucket ?${sub}`;
  }
  if (method === 'PUT') return header(req, 'x-amz-copy-source') !== undefined ? 'CopyObject' : 'PutObject';
  const objectOps: Record<string, string> = { GET: 'GetObject', HEAD: 'HeadObject', DELETE: 'DeleteObject' };
  return objectOps[method] ?? `${method} object`;
}

// ─── The server ──────────────────────────────────────────────────────────────────────────────────────────────────

export async function startLocalS3(options: LocalS3Options = {}): Promise<LocalS3> {
  const host = options.host ?? '127.0.0.1';
  const port = options.port ?? 0;
  const problems: string[] = [];
  if (!isLoopback(host)) problems.push(`local S3: host ${host} is not a loopback address (use 127.0.0.1, ::1 or localhost)`);
  if (!Number.isInteger(port) || port < 0 || port > 65535) problems.push(`local S3: port ${port} is not an integer in 0..65535`);
  const conflictWindowMs = options.conflictWindowMs ?? 5;
  if (!(Number.isFinite(conflictWindowMs) && conflictWindowMs >= 0))
    problems.push(`local S3: conflictWindowMs ${conflictWindowMs} is not a number >= 0`);
  if (problems.length > 0) throw new ConfigError(problems);

  const store = new Store(conflictWindowMs, options.onCommitting);
  const server = http.createServer((req, res) => {
    const requestId = randomBytes(8).toString('hex').toUpperCase();
    handle(store, req, res, requestId, options.onCall).catch((err: unknown) => sendError(req, res, requestId, err));
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      const why = err.code === 'EADDRINUSE' ? 'is already in use' : `could not be bound (${err.code ?? err.message})`;
      reject(new InfrastructureError(`local S3: port ${port} on ${host} ${why}`, { cause: err }));
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new InfrastructureError('local S3: server has no TCP address');
  const endpoint = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
  let stopped: Promise<void> | undefined;
  return {
    endpoint,
    port: address.port,
    stop() {
      stopped ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return stopped;
    },
  };
}

/** Parse one request, record it, read its body, and run its operation (501 if the server has none). */
async function handle(store: Store, req: http.IncomingMessage, res: http.ServerResponse, requestId: string, onCall?: CallSink): Promise<void> {
  const startedAt = store.seq;
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
  const path = (q < 0 ? url : url.slice(0, q)).slice(1);
  const slash = path.indexOf('/');
  let bucket: string, key: string;
  try {
    bucket = decodeURIComponent(slash < 0 ? path : path.slice(0, slash));
    key = slash < 0 ? '' : decodeURIComponent(path.slice(slash + 1));
  } catch {
    throw new S3Error(400, 'InvalidURI', 'Could not parse the specified URI.');
  }
  const method = req.method ?? 'GET';
  const operation = operationOf(method, bucket, key, query, req);
  onCall?.({
    principal: principalOf(req.headers.authorization),
    service: 's3',
    operation,
    ...(bucket ? { bucket } : {}),
    ...(key ? { key } : {}),
    ...conditionsOf(req.headers),
  });
  const raw = await readBody(req);
  const run = Object.hasOwn(OPERATIONS, operation) ? OPERATIONS[operation] : undefined;
  if (!run) throw notImplemented(operation === 'CopyObject' ? 'CopyObject (x-amz-copy-source)' : operation);
  await run(store, {
    req,
    method,
    bucket,
    key,
    query,
    raw,
    startedAt,
    allow(...names) {
      for (const name of query.keys()) if (name !== 'x-id' && !names.includes(name)) throw notImplemented(`?${name}`);
    },
    send(status, headers, body) {
      res.writeHead(status, { 'x-amz-request-id': requestId, ...headers });
      res.end(method === 'HEAD' ? undefined : body);
    },
  });
}

/** An error as S3 answers it: XML (<Error><Code>…), no body for HEAD; anything unexpected is 500 InternalError. */
function sendError(req: http.IncomingMessage, res: http.ServerResponse, requestId: string, err: unknown): void {
  const e = err instanceof S3Error ? err : new S3Error(500, 'InternalError', `local S3: ${String(err)}`);
  if (res.headersSent) return void res.destroy();
  const head = req.method === 'HEAD';
  const xml =
    `<?xml version="1.0" encoding="UTF-8"?>\n<Error>${tag('Code', e.code)}${tag('Message', e.message)}` +
    Object.entries(e.extra)
      .map(([k, v]) => tag(k, v))
      .join('') +
    `${tag('Resource', (req.url ?? '/').split('?')[0])}${tag('RequestId', requestId)}</Error>`;
  res.writeHead(e.status, { 'x-amz-request-id': requestId, ...(head ? {} : { 'content-type': 'application/xml' }) });
  res.end(head ? undefined : xml);
  if (!req.complete) req.resume(); // discard the rest of a body we did not read
}

// ─── Bodies and conditions ───────────────────────────────────────────────────────────────────────────────────────

/**
 * The body decoder: a PutObject's bytes as the object's, aws-chunked decoded (lib/local/http-body.ts), and checked against
 * Content-MD5 and x-amz-checksum-crc32/sha1/sha256, from the headers or the aws-chunked trailers (400 BadDigest).
 */
function objectBody(req: http.IncomingMessage, raw: Buffer): Buffer {
  const checks: Record<string, string> = {};
  for (const [name, v] of Object.entries(req.headers))
    if (name.startsWith('x-amz-checksum-') && name !== 'x-amz-checksum-type') checks[name] = String(v);
  let body = raw;
  if ((header(req, 'content-encoding') ?? '').split(',').some((s) => s.trim() === 'aws-chunked')) {
    const incomplete = new S3Error(400, 'IncompleteBody', 'The aws-chunked request body is malformed or incomplete');
    const decoded = decodeAwsChunked(raw);
    if (!decoded) throw incomplete;
    Object.assign(checks, decoded.trailers);
    body = decoded.body;
    const length = header(req, 'x-amz-decoded-content-length');
    if (length !== undefined && Number(length) !== body.length) throw incomplete;
  }
  const md5 = header(req, 'content-md5');
  if (md5 !== undefined && md5 !== createHash('md5').update(body).digest('base64')) {
    throw new S3Error(400, 'BadDigest', 'The Content-MD5 you specified did not match what we received.');
  }
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body) >>> 0);
  const computed: Record<string, () => string> = {
    'x-amz-checksum-crc32': () => crc.toString('base64'),
    'x-amz-checksum-sha1': () => createHash('sha1').update(body).digest('base64'),
    'x-amz-checksum-sha256': () => createHash('sha256').update(body).digest('base64'),
  };
  for (const [name, value] of Object.entries(checks)) {
    if (computed[name] && computed[name]() !== value) {
      throw new S3Error(
        400,
        'BadDigest',
        `The ${name.slice('x-amz-checksum-'.length).toUpperCase()} you specified did not match the calculated checksum.`,
      );
    }
  }
  return body;
}

function etagMatches(headerValue: string, etag: string): boolean {
  const bare = (s: string) =>
    s
      .trim()
      .replace(/^W\//, '')
      .replace(/^"(.*)"$/, '$1');
  return headerValue.split(',').some((v) => v.trim() === '*' || bare(v) === bare(etag));
}

/**
 * GetObject/HeadObject conditions with AWS's precedence (GetObject API reference): If-Match false -> 412, and when
 * If-Match is true a false If-Unmodified-Since is ignored; If-None-Match true -> 304, and when If-None-Match is false
 * If-Modified-Since is ignored. Returns 304 or 200; throws 412.
 */
function checkReadConditions(req: http.IncomingMessage, obj: StoredObject): 200 | 304 {
  const ifMatch = header(req, 'if-match');
  const ifNoneMatch = header(req, 'if-none-match');
  const date = (name: string) => {
    const t = Date.parse(header(req, name) ?? '');
    return Number.isNaN(t) ? undefined : t;
  };
  const modified = obj.lastModified.getTime();
  if (ifMatch !== undefined) {
    if (!etagMatches(ifMatch, obj.etag)) throw preconditionFailed('If-Match');
  } else {
    const ius = date('if-unmodified-since');
    if (ius !== undefined && modified > ius) throw preconditionFailed('If-Unmodified-Since');
  }
  if (ifNoneMatch !== undefined) return etagMatches(ifNoneMatch, obj.etag) ? 304 : 200;
  const ims = date('if-modified-since');
  return ims !== undefined && modified <= ims ? 304 : 200;
}
