/**
 * The billing job's keys: those of the fenced job named `billing` (core's jobKeys: lock item and job row
 * `billing#<date>`, chunk fence items beside the row, manifest `billing/<date>/manifest.json`), and its invoices'.
 */
import { chunkFenceKey, chunkObjectKey, jobKeys } from '../../lib/core/internal';

/** The billing job's name. */
export const BILLING_JOB = 'billing';

const billing = jobKeys(BILLING_JOB);

/** Keys in the lock, job and invoice tables, and in the manifest bucket, for one night's billing job. */
export const Keys = {
  /** The job's key functions, as FencedJob derives them from its name. */
  job: billing.job,
  lock: billing.lock,
  /** A chunk's own fence item, beside its job row in the job table: `billing#<date>#chunk#07` (docs/DESIGN.md § Chunk fences). */
  chunkFence: chunkFenceKey,
  invoice: (date: string, index: number, width: number) => `inv#${date}#${String(index).padStart(width, '0')}`,
  invoicePrefix: (date: string) => `inv#${date}#`,
  manifest: billing.manifest,
  /** A chunk's object includes the writer's token, so two holders never write the same key: S3 has no conditional check across objects to fence them with. */
  chunkObject: (date: string, chunk: number, token: number) => chunkObjectKey(billing.manifestPlace(date).chunkPrefix, chunk, token),
  chunkPrefix: (date: string) => billing.manifestPlace(date).chunkPrefix,
  /** Where one night's manifest and chunk objects live (lib/core/manifest.ts is told, it does not know billing). */
  manifestPlace: billing.manifestPlace,
  /** The billing job's keys, as one JobKeys (what core's runJob and the Lambda adapters take). */
  keys: billing,
};
