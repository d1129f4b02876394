/**
 * `fencepost/lambda`: what a fenced job's own Lambda functions import (no aws-cdk-lib here, so a function's bundle
 * stays small). A chunk function is one line around the job's work:
 *
 *   export const handler = fencedChunkHandler(async ({ lease, fence, chunk, env }) => { ... });
 *
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
