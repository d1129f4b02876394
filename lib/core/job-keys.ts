/**
 * Where a fenced job's runs live, by the job's name (a module with no side effects: the constructs and the Lambda
 * adapters import it too). A run is one job on one date: its lock item and its job row share the key `<name>#<date>`
 * (the sweeper reads a row's lock by the row's key), its chunk fence items sit beside the row as
 * `<name>#<date>#chunk#07` (docs/DESIGN.md § Chunk fences), its manifest is `<name>/<date>/manifest.json`, and
 * everything it writes to S3 is under `<name>/`.
 */
import type { ManifestPlace } from './manifest';

/** Lowercase letters, digits and hyphens, starting with a letter: no `#` or `/`, which separate the parts of a key. */
export const JOB_NAME_PATTERN = /^[a-z][a-z0-9-]{0,39}$/;

/**
 * The sparse index's partition (claim_shard) a job's claimed rows sit under: the job's name. The one place that
 * decides it: the raise writes it (lib/core/fence.ts raiseJobRow, from the row's key), the job's sweeper and the auditor
 * read it (lib/core/sweeper.ts, lib/core/audit.ts). One shard per job, so jobs sharing a job table each sweep only their own
 * claims; rows already RUNNING keep the shard they were raised with, so a job's name must not change under them.
 * @param jobName - the job's name (JOB_NAME_PATTERN)
 */
export function claimShard(jobName: string): string {
  return jobName;
}

/**
 * The pattern (IAM `StringLike`) every lock table and job table key of the job's runs matches: its lock items, job
 * rows and chunk fence items all start `<name>#`. A job's name has no `#`, so no other job's key matches it
 * (`sales#*` is not `sales-eu#…`): the job's grants on tables it shares with other jobs are scoped to it.
 * @param jobName - the job's name (JOB_NAME_PATTERN)
 */
export function runKeysPattern(jobName: string): string {
  return `${jobName}#*`;
}

/**
 * The name of the job a run's key belongs to: the part before its first `#` (a job's name has none). A key written
 * by hand without one (a test's) is its own job.
 * @param jobId - a job row's (or lock item's) key, `<name>#<date>`
 */
export function jobNameOf(jobId: string): string {
  const hash = jobId.indexOf('#');
  return hash < 0 ? jobId : jobId.slice(0, hash);
}

/**
 * The key of a chunk's own fence item, beside its job row in the job table: `<jobId>#chunk#07`
 * (docs/DESIGN.md § Chunk fences). One item per chunk, so concurrent chunks never check a common item.
 * @param jobId - the job row's key
 * @param chunk - the chunk's number, from 0
 */
export function chunkFenceKey(jobId: string, chunk: number): string {
  return `${jobId}#chunk#${String(chunk).padStart(2, '0')}`;
}

/** The keys of one job's runs. */
export interface JobKeys {
  /** The job's name. */
  readonly name: string;
  /** The lock item of the run on `date` (lock table). */
  readonly lock: (date: string) => string;
  /** The job row of the run on `date` (job table); its chunk fence items are `<row>#chunk#NN` beside it. */
  readonly job: (date: string) => string;
  /** The chunk fence item of chunk `chunk` of the run on `date` (job table). */
  readonly chunkFence: (date: string, chunk: number) => string;
  /** The date of a run from its job row's key. */
  readonly dateOf: (jobId: string) => string;
  /** The manifest of the run on `date`. */
  readonly manifest: (date: string) => string;
  /** The manifest and the chunk objects (`<name>/<date>/chunks/`) of the run on `date`. */
  readonly manifestPlace: (date: string) => ManifestPlace;
  /** The S3 prefix every object of the job is under. */
  readonly prefix: string;
}

/**
 * The keys of the job called `name`.
 *
 * @param name - the job's name (JOB_NAME_PATTERN)
 * @returns its key functions
 */
export function jobKeys(name: string): JobKeys {
  const run = (date: string) => `${name}#${date}`;
  const manifest = (date: string) => `${name}/${date}/manifest.json`;
  return {
    name,
    lock: run,
    job: run,
    chunkFence: (date, chunk) => chunkFenceKey(run(date), chunk),
    dateOf: (jobId) => jobId.slice(name.length + 1),
    manifest,
    manifestPlace: (date) => ({ key: manifest(date), chunkPrefix: `${name}/${date}/chunks/` }),
    prefix: `${name}/`,
  };
}
