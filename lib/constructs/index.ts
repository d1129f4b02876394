/**
 * `fencepost/constructs`: the CDK constructs that deploy a fenced scheduled job (docs/DESIGN.md §4–§6).
 *
 * `FencedJob` is the whole of it in one construct: give it a name, your chunk function (a `FencedChunkFunction`) and
 * the number of chunks, and it creates the lock and job tables (or uses yours), the manifest bucket when the chunks
 * write a manifest, the fenced workflow that claims the lease, raises the fences and runs your function once per
 * chunk, the job's schedule, the orphan sweeper and the alarms. Each piece is exported too, for a stack that
 * composes them differently.
 *
 * What the constructs guarantee is what the fence guarantees: a holder that lost its lease cannot write
 * past the fence, provided the chunk function writes through it (FencedJob's TSDoc gives the contract).
 */
export { FencedJob, FENCED_JOB_DEFAULTS, type FencedJobProps, type FencedJobSettings, type OptionalSettings } from './fenced-job';
export type { FencedHandlerName, HandlerName } from '../lambda/index';
export type { ManifestPlace } from '../core/manifest';
export type { KeyAttribute, TableDescription } from '../core/schema';
export { FencedWorkflow, TIMEOUT, type FencedWorkflowProps, type WorkflowSettings } from './fenced-workflow';
export { LockTable } from './lock-table';
export { JobTable } from './job-table';
export { grantCampaign, grantHandover, type ElectionGrantProps } from './election-grants';
export { FencedChunkFunction, type FencedChunkFunctionProps } from './chunk-function';
export { ManifestBucket, UNCONDITIONAL_WRITE, type ManifestBucketProps } from './manifest-bucket';
export { JobSchedule, type JobScheduleProps } from './schedule';
export { OrphanSweeper, type SweeperProps } from './sweeper';
export { FencepostAlarms, appMetric, type AlarmName, type FencepostAlarmsProps } from './alarms';
export { FencepostFunction, HANDLER_BUNDLING, type FencepostFunctionProps } from './handler-function';
export { EXECUTION_TIMEOUT, HISTORY, SFN_QUOTAS, type ChunkMapMode, type ChunkMapPlan, type ChunkMapSettings, type ChunkWording } from './chunk-plan';
export { LOST_ERRORS, MAP_RUN_FAILED, TRANSIENT_ERRORS, TRANSIENT_RETRIES } from './task-errors';
export { JOB_NAME_PATTERN, jobKeys, type JobKeys } from '../core/job-keys';
export { Env } from '../lambda/env';
