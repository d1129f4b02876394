/**
 * The same fence on S3 (reference Part 4, "The same fence on S3"; Part 5, "S3").
 *
 * S3 has no "greater than" condition, only compare-and-set on the version we read. So:
 *   - each holder writes its chunk objects under keys that include its token (never the same key as another holder);
 *   - it commits by rewriting one small manifest with If-Match on the ETag it last saw (If-None-Match: * to create);
 *   - the new holder raises the manifest's token first, before anything else;
 *   - readers trust only what the manifest names, so a zombie's stray object changes nothing.
 * A 412 means someone else rewrote the manifest. If the manifest's token is now higher than ours we are fenced out;
 * if it is still ours (two of our own chunk tasks committing at once) we merge and try again.
 */
import { GetObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { type Clock, wallIso } from './clock';
import { FencedOutError } from './errors';
import { Keys } from './schema';

export interface ManifestChunk {
  readonly key: string;
  readonly token: number;
  readonly invoices: number;
  readonly etag: string;
}

export interface ManifestBody {
  readonly jobId: string;
  /** The highest token that has raised this manifest: S3's copy of the fence. */
  readonly token: number;
  readonly state: 'RUNNING' | 'DONE';
  /** Chunk number (two digits) → the object that holds it. Only objects named here are trusted. */
  readonly chunks: Readonly<Record<string, ManifestChunk>>;
  /** Every token that raised the manifest, in order, for an auditor. */
  readonly raisedBy: ReadonlyArray<{ readonly token: number; readonly at: string }>;
}

export interface ManifestDeps {
  readonly s3: S3Client;
  readonly bucket: string;
  readonly clock: Clock;
}

const MAX_MERGES = 20;

export async function readManifest(deps: Pick<ManifestDeps, 's3' | 'bucket'>, date: string): Promise<{ body: ManifestBody; etag: string } | undefined> {
  try {
    const out = await deps.s3.send(new GetObjectCommand({ Bucket: deps.bucket, Key: Keys.manifest(date) }));
    return { body: JSON.parse(await out.Body!.transformToString()) as ManifestBody, etag: out.ETag! };
  } catch (err) {
    if ((err as Error).name === 'NoSuchKey') return undefined;
    throw err;
  }
}

function isPreconditionFailed(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'PreconditionFailed' || e?.$metadata?.httpStatusCode === 412;
}

/** One holder's view of the manifest: the ETag it last saw, and its token. */
export class ManifestWriter {
  private etag: string | undefined;
  private last: ManifestBody | undefined;

  private constructor(private readonly deps: ManifestDeps, readonly date: string, readonly jobId: string, readonly token: number) {}

  /**
   * Raise the manifest's token first (Part 4): read it, refuse if it carries a higher token, then rewrite it with
   * our token, conditional on the version we read (or on its absence).
   */
  static async raise(deps: ManifestDeps, date: string, jobId: string, token: number): Promise<{ writer: ManifestWriter; body: ManifestBody }> {
    const writer = new ManifestWriter(deps, date, jobId, token);
    const body = await writer.update((current) => ({
      jobId,
      token,
      state: 'RUNNING',
      chunks: current?.chunks ?? {},
      raisedBy: current?.raisedBy.at(-1)?.token === token ? current.raisedBy : [...(current?.raisedBy ?? []), { token, at: wallIso(deps.clock) }],
    }), true);
    return { writer, body };
  }

  /**
   * A writer for a holder that raised the manifest in another process (the workflow's next Lambda). It knows no
   * ETag yet, so its first commit reads the manifest and refuses to go on unless it still carries our token.
   */
  static resume(deps: ManifestDeps, date: string, jobId: string, token: number): ManifestWriter {
    return new ManifestWriter(deps, date, jobId, token);
  }

  /** Write a chunk's object under our token's key. Nobody else writes this key, so no condition is needed. */
  async putChunkObject(chunk: number, body: string): Promise<{ key: string; etag: string }> {
    const key = Keys.chunkObject(this.date, chunk, this.token);
    const out = await this.deps.s3.send(new PutObjectCommand({ Bucket: this.deps.bucket, Key: key, Body: body, ContentType: 'application/x-ndjson' }));
    return { key, etag: out.ETag! };
  }

  /** Commit a chunk: rewrite the manifest naming its object, If-Match on the ETag we last saw. */
  async commitChunk(chunk: number, entry: ManifestChunk): Promise<void> {
    const name = String(chunk).padStart(2, '0');
    await this.update((current) => ({ ...current!, chunks: { ...current!.chunks, [name]: entry } }));
  }

  async markDone(): Promise<void> {
    await this.update((current) => ({ ...current!, state: 'DONE' }));
  }

  /**
   * Compare-and-set loop. The first attempt uses the ETag we remember; a 412 makes us re-read: a higher token
   * means we are fenced out; the same token (our own concurrent commit) means merge and retry.
   */
  private async update(change: (current: ManifestBody | undefined) => ManifestBody, raising = false): Promise<ManifestBody> {
    let fresh = raising || this.etag === undefined;
    for (let attempt = 0; attempt < MAX_MERGES; attempt++) {
      if (fresh) {
        const read = await readManifest(this.deps, this.date);
        this.last = read?.body;
        this.etag = read?.etag;
        const fence = this.last?.token ?? 0;
        // Raising: refuse only a higher token. Afterwards: anything but our own token means a newer holder raised it.
        if (raising ? fence > this.token : fence !== this.token) throw new FencedOutError('manifest', this.token, fence);
      }
      const next = change(this.last);
      try {
        const out = await this.deps.s3.send(
          new PutObjectCommand({
            Bucket: this.deps.bucket,
            Key: Keys.manifest(this.date),
            Body: JSON.stringify(next, null, 1),
            ContentType: 'application/json',
            ...(this.etag === undefined ? { IfNoneMatch: '*' } : { IfMatch: this.etag }),
          }),
        );
        this.etag = out.ETag;
        this.last = next;
        return next;
      } catch (err) {
        if (!isPreconditionFailed(err) && (err as Error).name !== 'NoSuchKey') throw err;
        fresh = true; // someone rewrote (or removed) it since we looked: read again
      }
    }
    throw new FencedOutError('manifest', this.token, this.last?.token);
  }
}
