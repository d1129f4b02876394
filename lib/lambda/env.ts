/** Environment variable names, in a module with no side effects (the constructs and the local runner import it). */
/** The environment a fenced job's functions are deployed with (lib/constructs/fenced-workflow.ts and lib/constructs/sweeper.ts set these). */
export const Env = {
  handler: 'FENCEPOST_HANDLER',
  /** The job's name: its runs' keys are `<name>#<date>`, its manifests `<name>/<date>/manifest.json` (lib/core/job-keys.ts). */
  jobName: 'FENCEPOST_JOB_NAME',
  /** Chunks in one run: the raise raises this many chunk fences. */
  chunks: 'FENCEPOST_CHUNKS',
  lockTable: 'FENCEPOST_LOCK_TABLE',
  jobTable: 'FENCEPOST_JOB_TABLE',
  bucket: 'FENCEPOST_BUCKET',
  leaseMs: 'FENCEPOST_LEASE_MS',
  renewMs: 'FENCEPOST_RENEW_MS',
  marginMs: 'FENCEPOST_MARGIN_MS',
  claimBudget: 'FENCEPOST_CLAIM_BUDGET',
  scheduleTimeZone: 'FENCEPOST_SCHEDULE_TIME_ZONE',
  /** The sweeper's functions: its storm rule, and the job's state machine it starts runs of. */
  stormShare: 'FENCEPOST_STORM_SHARE',
  stormMinimum: 'FENCEPOST_STORM_MINIMUM',
  maxRequeues: 'FENCEPOST_MAX_REQUEUES',
  maxRequeuesPerRun: 'FENCEPOST_MAX_REQUEUES_PER_RUN',
  jobStateMachineArn: 'FENCEPOST_JOB_STATE_MACHINE_ARN',
  /** Local runs only: the name events carry (the execution's name). */
  worker: 'FENCEPOST_WORKER',
} as const;

/**
 * The template metadata FencedJob puts on its two state machines, valued with the job's name: `fencepost run` finds a
 * user's fenced jobs in their synthesized app by it (lib/cli/assembly.ts). Metadata only: nothing of it is deployed.
 */
export const FENCED_JOB_MARK = { job: 'fencepost:job', sweeper: 'fencepost:sweeper' } as const;
