/**
 * The repository's own barrel for its reference apps (under apps/), which may import only this and the package's
 * entries (test/unit/layers.test.ts): what they use of the constructs beyond the public entry (lib/constructs/index.ts), a table
 * from a schema description, the settings check. Not in the package's exports map: a user cannot
 * import it, and its names may change without notice.
 */
export * from './index';

export { fencedJobProblems } from './fenced-job';
export { schemaTable } from './schema-table';
export { XRAY_ACKNOWLEDGEMENT } from './handler-function';
