/**
 * The repository's own barrel of the Lambda layer, for its reference apps (under apps/), which may
 * import only this and the package's entries (test/unit/layers.test.ts): FencedJob's handlers (makeHandlers), their
 * runtime, and the chunk handler on a runtime source of the caller's. Not in the package's exports map: a user cannot
 * import it, and its names may change without notice.
 */
export * from './entry';
export { chunkHandlerOn, type RuntimeChunkContext } from './chunk-handler';
export { makeHandlers, type FencedHandlerName, type HandlerName } from './index';
export { createRuntime, fromEnvironment, lazily, type Runtime, type RuntimeOptions, type RuntimeSource } from './runtime';
