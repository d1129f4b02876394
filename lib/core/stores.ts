/**
 * The `store` namespace of `fencepost`: the interfaces every function takes its stores by, and the items and outcomes
 * they speak in; `createTables`, which makes the DynamoDB tables. Most code never names them: `awsStores(clients, names)`
 * builds the stores a job uses on DynamoDB and S3. A store of your own (another database, or a wrapper that injects
 * faults in a test) implements the interface its caller names.
 */
export type * from './store/stores';
export type * from './store/lock';
export type * from './store/jobs';
export type * from './store/manifest';
export type * from './store/ledger';
export type { JobState } from './schema';
export type { StoreNames } from './aws/stores';
export { createTables } from './aws/provision';
