/**
 * The manifest's store: the operations lib/core/manifest.ts makes on the
 * bucket, each one S3 request. Bodies are strings; the logic parses them.
 *
 * A failed condition is not thrown: it is an outcome the logic decides on. S3 returns no object with a 412, so a
 * failed write carries only why it failed (the logic re-reads). Anything else (throttling, 5xx, a 403) is thrown.
 *
 * Implementations: lib/core/aws/manifest-store.ts (S3), lib/testing/manifest-store.ts (S3's rules, in memory); the
 * conformance suite test/store/manifest-store-conformance.test.ts runs on both.
 */

/** An object as read: its body and the ETag that names this version of it. */
export interface StoredObject {
  /** The object's content. */
  readonly body: string;
  /** The ETag of this version: what a conditional write names with If-Match. */
  readonly etag: string;
}

/**
 * What a conditional put answered:
 *   ok                   written; `etag` names the new version
 *   precondition-failed  412: the key exists (a create), or holds another version (a put if match)
 *   conflict             409 ConditionalRequestConflict: another conditional write on the key was committing; nothing
 *                        was written, and S3 says retry
 *   missing              a put if match on a key that does not exist (404 NoSuchKey)
 */
export type PutOutcome =
  { readonly ok: true; readonly etag: string } | { readonly ok: false; readonly reason: 'precondition-failed' | 'conflict' | 'missing' };

/** One bucket's objects, as the manifest fence uses them. */
export interface ManifestStore {
  /** Read an object (a strongly consistent read, as S3's are). @returns undefined when the key does not exist */
  get(key: string): Promise<StoredObject | undefined>;
  /** Create the object only if the key is absent (If-None-Match: *). */
  create(key: string, body: string, contentType: string): Promise<PutOutcome>;
  /** Replace the object only if it is still the version `etag` names (If-Match). */
  putIfMatch(key: string, body: string, contentType: string, etag: string): Promise<PutOutcome>;
  /** Write an object with no condition (a chunk object: its key is its writer's own). @returns its ETag */
  put(key: string, body: string, contentType: string): Promise<{ readonly etag: string }>;
  /** An object's ETag and size without its body. @returns undefined when the key does not exist */
  head(key: string): Promise<{ readonly etag: string; readonly size: number } | undefined>;
}
