/**
 * The same fence on S3.
 *
 * S3 has no "greater than" condition, only compare-and-set on the version we read. So:
 *   - each holder writes its chunk objects under keys that include its token (never the same key as another holder);
 *   - it commits by rewriting one small manifest with If-Match on the ETag it last saw (If-None-Match: * to create);
 *   - the new holder raises the manifest's token first, before anything else;
 *   - readers trust only what the manifest names, so a zombie's stray object changes nothing.
 * A 412 means someone else rewrote the manifest. If the manifest's token is now higher than ours we are fenced out;
 * if it is still ours (two of our own chunk tasks committing at once) we merge and try again. A 409
 * ConditionalRequestConflict means a conflicting write was in flight on the key when ours completed: S3 says retry,
 * so we read again (the other write may have landed) and retry, after a full-jitter backoff.
 *
 * A missing manifest is never learnt from a read: without s3:ListBucket, S3 answers a GET of a missing key with 403
 * AccessDenied, not 404 NoSuchKey. The raise therefore CREATES first (If-None-Match: *) and reads only on a 412,
 * which says the manifest exists (docs/DESIGN.md "Retry classification").
 *
 * What this guarantees: once a holder raised the manifest to N, no commit by a lower token lands, and a reader who
 * trusts only what the manifest names never reads a fenced-out holder's object. What it does NOT guarantee: that no
 * stray object exists (a zombie may still PUT under its own token's key; nothing names it), nor any order among
 * one holder's own concurrent commits beyond "each lands once".
 *
 * Where the manifest and its chunk objects live is the caller's (`ManifestPlace`): a job passes its own keys. Every
 * S3 request goes through the ManifestStore it is given (lib/core/store/manifest.ts): the S3 one, or the in-memory one
 * (lib/testing/manifest-store.ts), which keeps S3's rules.
 */
import { type Clock, wallIso } from './clock';
import { fullJitterMs } from './conditions';
import { FencedOutError } from './errors';
import type { Lease } from './lease';
import type { ManifestStore } from './store/manifest';

/** Where one job's manifest and chunk objects live in the bucket. */
export interface ManifestPlace {
  /** The manifest object's key, e.g. `<job>/2026-09-28/manifest.json` (lib/core/job-keys.ts). */
  readonly key: string;
  /** The prefix of the chunk objects: `<chunkPrefix><chunk, two digits>.t<token>.jsonl` (chunkObjectKey). */
  readonly chunkPrefix: string;
}

/** A chunk object's key: it includes the writer's token, so two holders never write the same key. */
export function chunkObjectKey(chunkPrefix: string, chunk: number, token: number): string {
  return `${chunkPrefix}${String(chunk).padStart(2, '0')}.t${token}.jsonl`;
}

/** One committed chunk, as the manifest names it: only objects named here are trusted. */
export interface ManifestChunk {
  /** The chunk object's key (under the writer's token: chunkObjectKey). */
  readonly key: string;
  /** The token of the holder that wrote the object. */
  readonly token: number;
  /** How many records the object holds (informational). */
  readonly records: number;
  /** The object's ETag when it was committed: a reader checks it is the same object. */
  readonly etag: string;
}

/** The manifest's content: S3's copy of the fence, and the committed chunks. */
export interface ManifestBody {
  /** The job this manifest belongs to. */
  readonly jobId: string;
  /** The highest token that has raised this manifest: S3's copy of the fence. */
  readonly token: number;
  /** DONE once the job completed; RUNNING while holders commit chunks. */
  readonly state: 'RUNNING' | 'DONE';
  /** Chunk number (two digits) → the object that holds it. Only objects named here are trusted. */
  readonly chunks: Readonly<Record<string, ManifestChunk>>;
  /** Every token that raised the manifest, in order, for an auditor. */
  readonly raisedBy: ReadonlyArray<{ readonly token: number; readonly at: string }>;
}

/** What the manifest needs, injected: the store the objects live in, and the clock that times the 409 backoff. */
export interface ManifestDeps {
  /** The bucket's store, where the manifest and the chunk objects live: on S3 `awsStores(...).manifests`. */
  readonly manifests: ManifestStore;
  /** Times the 409 backoff. */
  readonly clock: Clock;
  /** Jitter source for the 409 backoff. @defaultValue Math.random */
  readonly random?: () => number;
}

const JSON_TYPE = 'application/json';
const NDJSON_TYPE = 'application/x-ndjson';

const MAX_MERGES = 20;

/**
 * Read the manifest at `key` (an auditor's or a reader's read; holders never learn "missing" from a read, see above).
 * @returns the body and its ETag, or undefined on 404 NoSuchKey (a 403 without s3:ListBucket is thrown)
 */
export async function readManifest(deps: Pick<ManifestDeps, 'manifests'>, key: string): Promise<{ body: ManifestBody; etag: string } | undefined> {
  const read = await deps.manifests.get(key);
  return read && { body: JSON.parse(read.body) as ManifestBody, etag: read.etag };
}

/**
 * One holder's view of one manifest: the ETag it last saw, and its token. A holder gets one by raising the manifest
 * with its lease (`ManifestWriter.raise(deps, place, jobId, lease)`), so the token is the lease's, never carried by hand.
 */
export class ManifestWriter {
  private etag: string | undefined;
  private last: ManifestBody | undefined;
  private readonly store: ManifestStore;

  private constructor(
    private readonly deps: ManifestDeps,
    /** Where the manifest and the chunk objects live. */
    readonly place: ManifestPlace,
    /** The job the manifest belongs to. */
    readonly jobId: string,
    /** This writer's token: what it raised the manifest to. */
    readonly token: number,
  ) {
    this.store = deps.manifests;
  }

  /**
   * Raise the manifest to the lease's token first: read it, refuse if it carries a higher token, then rewrite it with
   * the lease's token, conditional on the version read (If-None-Match: * when there is none).
   * @param lease - the holder's lease (or a leader's `Leadership`): its token is what the manifest is raised to, and what the
   *   writer commits under
   * @returns the writer, and the manifest as raised (the chunks committed before are kept)
   * @throws FencedOutError if the manifest carries a higher token
   */
  static raise(
    deps: ManifestDeps,
    place: ManifestPlace,
    jobId: string,
    lease: Pick<Lease, 'token'>,
  ): Promise<{ writer: ManifestWriter; body: ManifestBody }> {
    return ManifestWriter.raiseAt(deps, place, jobId, lease.token);
  }

  /**
   * The raise at `token`, for code that holds a token and no lease (an election's leader, which stamps its epoch; the
   * tests and benchmarks of stale tokens).
   * @internal
   */
  static async raiseAt(
    deps: ManifestDeps,
    place: ManifestPlace,
    jobId: string,
    token: number,
  ): Promise<{ writer: ManifestWriter; body: ManifestBody }> {
    const writer = new ManifestWriter(deps, place, jobId, token);
    const body = await writer.update(
      (current) => ({
        jobId,
        token,
        state: 'RUNNING',
        chunks: current?.chunks ?? {},
        raisedBy: current?.raisedBy.at(-1)?.token === token ? current.raisedBy : [...(current?.raisedBy ?? []), { token, at: wallIso(deps.clock) }],
      }),
      true,
    );
    return { writer, body };
  }

  /**
   * A writer for a holder that raised the manifest in another process (the workflow's next Lambda). It knows no
   * ETag yet, so its first commit reads the manifest and refuses to go on unless it still carries our token.
   * @internal the chunk function's context gives the run's manifest already resumed
   */
  static resume(deps: ManifestDeps, place: ManifestPlace, jobId: string, token: number): ManifestWriter {
    return new ManifestWriter(deps, place, jobId, token);
  }

  /** Write a chunk's object under our token's key. Nobody else writes this key, so no condition is needed. */
  async putChunkObject(chunk: number, body: string): Promise<{ key: string; etag: string }> {
    const key = chunkObjectKey(this.place.chunkPrefix, chunk, this.token);
    const { etag } = await this.store.put(key, body, NDJSON_TYPE);
    return { key, etag };
  }

  /**
   * Commit a chunk: rewrite the manifest naming its object, If-Match on the ETag we last saw. The entry carries this
   * writer's token (the one it raised the manifest to), not one the caller passes.
   * @throws FencedOutError
   */
  async commitChunk(chunk: number, entry: Omit<ManifestChunk, 'token'>): Promise<void> {
    const name = String(chunk).padStart(2, '0');
    await this.update((current) => ({ ...current!, chunks: { ...current!.chunks, [name]: { ...entry, token: this.token } } }));
  }

  /** Mark the manifest DONE, If-Match on the ETag we last saw. @throws FencedOutError */
  async markDone(): Promise<void> {
    await this.update((current) => ({ ...current!, state: 'DONE' }));
  }

  /**
   * Compare-and-set loop. Raising with nothing known: create (If-None-Match: *) and read only if that meets a 412.
   * Otherwise the first attempt uses the ETag we remember (a resumed writer reads first: the raise made the
   * manifest, so it exists). A 412 makes us re-read: a higher token means we are fenced out; our own token (our
   * own concurrent commit) means merge and retry. A 409 means retry: re-read and try again, after a backoff.
   */
  private async update(change: (current: ManifestBody | undefined) => ManifestBody, raising = false): Promise<ManifestBody> {
    let step: 'create' | 'read' | 'write' = raising ? 'create' : this.etag === undefined ? 'read' : 'write';
    let conflicts = 0;
    for (let attempt = 0; attempt < MAX_MERGES; attempt++) {
      if (step === 'read') {
        const read = await readManifest({ manifests: this.store }, this.place.key);
        this.last = read?.body;
        this.etag = read?.etag;
        const fence = this.last?.token ?? 0;
        // Raising: refuse only a higher token. Afterwards: anything but our own token means a newer holder raised it.
        if (raising ? fence > this.token : fence !== this.token) throw new FencedOutError('manifest', this.token, fence);
        if (raising && read === undefined) step = 'create'; // gone since our 412 (local 404 only): create it again
      }
      const creating = step === 'create';
      const next = change(creating ? undefined : this.last);
      const body = JSON.stringify(next, null, 1);
      const out = creating
        ? await this.store.create(this.place.key, body, JSON_TYPE)
        : await this.store.putIfMatch(this.place.key, body, JSON_TYPE, this.etag!);
      if (out.ok) {
        this.etag = out.etag;
        this.last = next;
        return next;
      }
      if (out.reason === 'conflict') {
        // 409: retry. A create is simply sent again (a read now could meet a key that is still missing); a rewrite
        // reads first, since the write in flight may have landed.
        await this.deps.clock.sleep(fullJitterMs(conflicts++, this.deps.random ?? Math.random));
        step = creating ? 'create' : 'read';
      } else if (out.reason === 'precondition-failed') {
        step = 'read'; // it exists (create) or was rewritten (If-Match): decide from what is there
      } else {
        // If-Match on a manifest that is gone. Raising: create it again. Otherwise it no longer names our token.
        if (!raising) throw new FencedOutError('manifest', this.token, undefined);
        step = 'create';
      }
    }
    throw new FencedOutError('manifest', this.token, this.last?.token);
  }
}
