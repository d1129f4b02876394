/**
 * The manifest's store on S3: the only place the manifest fence sends S3 requests and reads S3's answers
 * (PutObject API reference, If-Match / If-None-Match: https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html;
 * S3 User Guide, conditional writes: https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
 *
 * The conditions, each with why:
 *   - create: If-None-Match: *   the first raise makes the manifest without reading it first: without s3:ListBucket a
 *                                GET of a missing key answers 403, not 404, so "missing" is never learnt from a read
 *   - rewrite: If-Match: <ETag>  compare-and-set on the version we read: S3 has no "greater than", so a rewrite lands
 *                                only if nobody rewrote the manifest since (a 412 sends the writer back to read)
 *   - chunk objects: none         the key carries the writer's token, so no two holders ever write the same key
 */
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, type PutObjectCommandInput, type S3Client } from '@aws-sdk/client-s3';
import type { ManifestStore, PutOutcome, StoredObject } from '../store/manifest';

export type { S3Client } from '@aws-sdk/client-s3';

type S3Answer = { name?: string; $metadata?: { httpStatusCode?: number } };

/** 412: the If-None-Match key exists, or the If-Match ETag is not the current one. */
function isPreconditionFailed(err: unknown): boolean {
  const e = err as S3Answer;
  return e?.name === 'PreconditionFailed' || e?.$metadata?.httpStatusCode === 412;
}

/** 409: a conflicting operation was in flight on the key when ours completed; S3 says retry (PutObject reference). */
function isConditionalConflict(err: unknown): boolean {
  const e = err as S3Answer;
  return e?.name === 'ConditionalRequestConflict' || e?.$metadata?.httpStatusCode === 409;
}

/** 404 on a key (GetObject, and a PutObject with If-Match on a missing key); HeadObject answers NotFound. */
function isMissingKey(err: unknown): boolean {
  const name = (err as S3Answer)?.name;
  return name === 'NoSuchKey' || name === 'NotFound';
}

/** The manifest's store on one S3 bucket. */
export class S3ManifestStore implements ManifestStore {
  constructor(
    private readonly s3: S3Client,
    /** The bucket holding the manifests and the chunk objects (versioning not needed: ETags are the versions). */
    readonly bucket: string,
  ) {}

  async get(key: string): Promise<StoredObject | undefined> {
    try {
      const out = await this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
      return { body: await out.Body!.transformToString(), etag: out.ETag! };
    } catch (err) {
      if (isMissingKey(err)) return undefined; // a 403 (no s3:ListBucket) is thrown: it says nothing about the key
      throw err;
    }
  }

  create(key: string, body: string, contentType: string): Promise<PutOutcome> {
    return this.conditionalPut({ Key: key, Body: body, ContentType: contentType, IfNoneMatch: '*' });
  }

  putIfMatch(key: string, body: string, contentType: string, etag: string): Promise<PutOutcome> {
    return this.conditionalPut({ Key: key, Body: body, ContentType: contentType, IfMatch: etag });
  }

  async put(key: string, body: string, contentType: string): Promise<{ etag: string }> {
    const out = await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType }));
    return { etag: out.ETag! };
  }

  async head(key: string): Promise<{ etag: string; size: number } | undefined> {
    try {
      const out = await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return { etag: out.ETag!, size: Number(out.ContentLength ?? 0) };
    } catch (err) {
      if (isMissingKey(err)) return undefined;
      throw err;
    }
  }

  /** One PutObject with a condition; S3's answers to the condition become outcomes, anything else is thrown. */
  private async conditionalPut(input: Omit<PutObjectCommandInput, 'Bucket'>): Promise<PutOutcome> {
    try {
      const out = await this.s3.send(new PutObjectCommand({ Bucket: this.bucket, ...input }));
      return { ok: true, etag: out.ETag! };
    } catch (err) {
      if (isConditionalConflict(err)) return { ok: false, reason: 'conflict' };
      if (isPreconditionFailed(err)) return { ok: false, reason: 'precondition-failed' };
      if (isMissingKey(err)) return { ok: false, reason: 'missing' };
      throw err;
    }
  }
}
