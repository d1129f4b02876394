/**
 * The manifest's store in memory, keeping S3's rules for what the manifest fence uses (the conformance suite
 * test/store/manifest-store-conformance.test.ts runs the same tests on it and on the S3 store):
 *   - If-None-Match: * on an existing key, and If-Match with an ETag that is not the current one: 412, nothing written;
 *   - If-Match on a missing key: 404 NoSuchKey, nothing written;
 *   - a conditional write is checked when it completes, after a commit window (`commitWindowMs`, on the injected
 *     clock); another conditional write on the key that completes inside that window gets 409
 *     ConditionalRequestConflict and writes nothing ("retry"); unconditional writes are never held up;
 *   - every write gives a new ETag (S3 says an ETag "may or may not be an MD5 digest of the object data": the logic may
 *     only compare ETags, never compute one), and reads are strongly consistent.
 * Not emulated: the 403 AccessDenied S3 answers for a missing key to a caller without s3:ListBucket (get answers
 * undefined, as with the permission), a 409 caused by a delete (this store has no delete), AWS's own commit window,
 * multipart uploads, metadata, throttling (503 SlowDown).
 */
import type { Clock } from '../core/clock';
import { ConfigError } from '../core/errors';
import type { ManifestStore, PutOutcome, StoredObject } from '../core/store/manifest';

/** How the in-memory bucket behaves. */
export interface MemoryManifestStoreOptions {
  /** Times the commit window. Required when `commitWindowMs` is above 0. */
  readonly clock?: Clock;
  /** How long a conditional write commits, in milliseconds on the clock; 0 (the default): at once, no 409 ever. */
  readonly commitWindowMs?: number;
}

interface Stored {
  readonly body: string;
  readonly etag: string;
  /** Kept as S3 keeps it; nothing here reads it. */
  readonly contentType: string;
}

/** One bucket in memory. */
export class MemoryManifestStore implements ManifestStore {
  private readonly objects = new Map<string, Stored>();
  private readonly committing = new Set<string>();
  private writes = 0;

  constructor(private readonly options: MemoryManifestStoreOptions = {}) {
    const window = options.commitWindowMs ?? 0;
    if (!(Number.isFinite(window) && window >= 0)) throw new ConfigError([`commitWindowMs ${window} is not a number >= 0`]);
    if (window > 0 && !options.clock) throw new ConfigError(['a commit window needs a clock to time it']);
  }

  async get(key: string): Promise<StoredObject | undefined> {
    const o = this.objects.get(key);
    return o && { body: o.body, etag: o.etag };
  }

  create(key: string, body: string, contentType: string): Promise<PutOutcome> {
    return this.conditionalPut(key, body, contentType, (current) => (current ? 'precondition-failed' : undefined));
  }

  putIfMatch(key: string, body: string, contentType: string, etag: string): Promise<PutOutcome> {
    return this.conditionalPut(key, body, contentType, (current) =>
      !current ? 'missing' : current.etag !== etag ? 'precondition-failed' : undefined,
    );
  }

  async put(key: string, body: string, contentType: string): Promise<{ etag: string }> {
    return { etag: this.write(key, body, contentType) };
  }

  async head(key: string): Promise<{ etag: string; size: number } | undefined> {
    const o = this.objects.get(key);
    return o && { etag: o.etag, size: Buffer.byteLength(o.body) };
  }

  private write(key: string, body: string, contentType: string): string {
    const etag = `"${(++this.writes).toString(16).padStart(32, '0')}"`;
    this.objects.set(key, { body, etag, contentType });
    return etag;
  }

  /** The condition is checked when the write completes, as S3 does; a second one completing meanwhile gets 409. */
  private async conditionalPut(
    key: string,
    body: string,
    contentType: string,
    refused: (current: Stored | undefined) => 'precondition-failed' | 'missing' | undefined,
  ): Promise<PutOutcome> {
    if (this.committing.has(key)) return { ok: false, reason: 'conflict' };
    const window = this.options.commitWindowMs ?? 0;
    if (window > 0) {
      this.committing.add(key);
      try {
        await this.options.clock!.sleep(window);
      } finally {
        this.committing.delete(key);
      }
    }
    const reason = refused(this.objects.get(key));
    if (reason) return { ok: false, reason };
    return { ok: true, etag: this.write(key, body, contentType) };
  }
}
