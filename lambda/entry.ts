/**
 * `fencepost/lambda`: what a fenced job's own Lambda functions import (no aws-cdk-lib here, so a function's bundle
 * stays small). A chunk function is one call around the job's work (examples/fenced-job/chunk.ts):
 * `fencedChunkHandler(work)`, where `work` gets the lease, the chunk's fence, the chunk and the function's environment,
 * and reads its own variables beside FencedJob's (`Env`). The handlers of FencedJob's workflow (`makeHandlers`) and
 * their runtime are here too, for a local runner that runs them in its own process.
 *
 * @packageDocumentation
 */
export { fencedChunkHandler, type ChunkEvent, type FencedChunkContext } from './chunk-handler';
export { Env } from './env';
export { makeHandlers, type FencedHandlerName, type HandlerName } from './index';
export {
  TransientStoreError,
  createRuntime,
  fromEnvironment,
  lazily,
  logger,
  metrics,
  optionalNumber,
  required,
  tracer,
  type Environment,
  type Runtime,
  type RuntimeOptions,
  type RuntimeSource,
} from './runtime';
export { JOB_NAME_PATTERN, jobKeys, type JobKeys } from '../core/job-keys';
// The types the handlers' inputs and outputs name (makeHandlers' signature).
export type { PrepareInput } from './prepare';
export type { Observation } from './observe';
export type { ClaimSighting } from '../core/sweeper';
