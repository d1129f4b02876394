/**
 * The stores on AWS, built from the clients and the names of the tables and the bucket: the one place a client meets
 * a table name (lib/core/store/stores.ts says why).
 */
import type { ManifestStore } from '../store/manifest';
import type { Stores } from '../store/stores';
import type { Clients } from './clients';
import { DynamoJobStore } from './job-store';
import { DynamoLockStore } from './lock-store';
import { S3ManifestStore } from './manifest-store';

/** Where a fenced job's stores live on AWS. */
export interface StoreNames {
  /** The lock table. */
  readonly locks: string;
  /** The job table. */
  readonly jobs: string;
  /** The manifest bucket. @defaultValue none: no manifest store */
  readonly bucket?: string;
}

/**
 * The DynamoDB lock and job stores, and the S3 manifest store of the bucket named.
 * @param clients - the document client and the S3 client: `awsClients()` or `localClients(...)`
 * @param names - the tables (`tableNames(prefix)` gives them) and the bucket
 */
export function awsStores(
  clients: Pick<Clients, 'ddb' | 's3'>,
  names: StoreNames & { readonly bucket: string },
): Stores & { readonly manifests: ManifestStore };
/**
 * The DynamoDB lock and job stores, and the S3 manifest store if a bucket is named.
 * @param clients - the document client (and the S3 client, for a bucket): `awsClients()` or `localClients(...)`
 * @param names - the tables (`tableNames(prefix)` gives them) and, if the job keeps a manifest, the bucket
 */
export function awsStores(clients: Pick<Clients, 'ddb' | 's3'>, names: StoreNames): Stores;
export function awsStores(clients: Pick<Clients, 'ddb' | 's3'>, names: StoreNames): Stores {
  return {
    locks: new DynamoLockStore(clients.ddb, names.locks),
    jobs: new DynamoJobStore(clients.ddb, names.jobs),
    ...(names.bucket !== undefined ? { manifests: new S3ManifestStore(clients.s3, names.bucket) } : {}),
  };
}
