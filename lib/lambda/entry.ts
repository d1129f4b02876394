/**
 * `fencepost/lambda`: what a fenced job's chunk function imports (no aws-cdk-lib here, so its bundle stays small).
 * A chunk function is one call around the job's work (examples/fenced-job/lib/chunk.ts): `fencedChunkHandler(work)`,
 * where `work` gets the lease, the chunk's fence, the chunk and the chunk count, the run's date and the function's
 * environment (FencedChunkContext), and reads its own variables beside FencedJob's (`Env`, `required`).
 *
 * The types the context names (Lease, Fence, HeldFence, ManifestWriter and theirs) are the core's (`fencepost`), re-exported
 * here so this entry stands on its own. FencedJob's own handlers and their runtime are not part of the package's API.
 *
 * @packageDocumentation
 */
export { fencedChunkHandler, type ChunkEvent, type FencedChunkContext } from './chunk-handler';
export { Env } from './env';
export { TransientStoreError, logger, metrics, optionalNumber, required, tracer, type Environment } from './runtime';
// The core's types the chunk's context names: the same declarations as the `fencepost` entry's.
// The errors the work may meet: a newer holder's fence, an unraised fence, the lease lost or its stop time passed.
export { FencedOutError, FenceNotRaisedError, FencepostError, LeaseLostError, StopTimePassedError } from '../core/errors';
export type { Lease, LeaseDeps } from '../core/lease';
export type { LeaseConfig } from '../core/config';
export type { Fence, FenceTarget, HeldFence } from '../core/fence';
export type { ManifestBody, ManifestChunk, ManifestDeps, ManifestPlace, ManifestWriter } from '../core/manifest';
export type { Clock } from '../core/clock';
// The stores those deps name (a lease's lock store, a fence's job store, a manifest's bucket): the core's namespace.
export type * as store from '../core/stores';
export type { TableNames } from '../core/schema';
