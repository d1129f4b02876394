/**
 * The names the Lambdas publish (CloudWatch embedded metric format, via Powertools Metrics) and the alarms and
 * the dashboard read. One list, so a renamed metric cannot silently orphan its alarm.
 */
/** The CloudWatch namespace every metric is published in. */
export const METRICS_NAMESPACE = 'Fencepost';
/**
 * The service a job's functions publish under (POWERTOOLS_SERVICE_NAME, hence the `service` dimension of every
 * metric, and the `service` key of every log line and trace): one per job, so two jobs in one account never share a
 * metric or an alarm.
 * @param jobName - the job's name (lib/core/job-keys.ts JOB_NAME_PATTERN)
 */
export function serviceName(jobName: string): string {
  return `fencepost-${jobName}`;
}

/** The library's metric names, one list for the Lambdas that publish them and the alarms and dashboard that read them (an app adds its own). */
export const Metric = {
  /** A write refused by the fence (DynamoDB ConditionCheck or S3 412): a holder lost the lock. */
  fencedRejections: 'FencedRejections',
  /** A holder found its lease gone (renewal condition failed, or its stop time passed). */
  leaseLost: 'LeaseLost',
  /** Milliseconds a claimant waited out a live-looking lease before claiming (the clock-free wait). */
  takeoverWaitMs: 'TakeoverWaitMs',
  /** Estimated |offset| of the Lambda's wall clock from AWS's, and the estimate's error bound (docs/CLOCK.md). */
  clockOffsetMs: 'ClockOffsetMs',
  clockOffsetErrorMs: 'ClockOffsetErrorMs',
  /** max(0, |offset| − error): the part of the offset the estimate proves. 0 for any clock the interval could fit. */
  clockOffsetBeyondErrorMs: 'ClockOffsetBeyondErrorMs',
  chunksCommitted: 'ChunksCommitted',
  runsCompleted: 'RunsCompleted',
  runsAlreadyDone: 'RunsAlreadyDone',
  runsLost: 'RunsLost',
  /** A duplicate start that ended quietly: another live holder kept its run RUNNING through the whole claim budget. */
  runsAnotherHolder: 'RunsAnotherHolder',
  /** The sweeper: orphans found, re-queued, rows skipped as alive, and storms (re-queued none). */
  orphansFound: 'OrphansFound',
  orphansRequeued: 'OrphansRequeued',
  sweeperSkippedAlive: 'SweeperSkippedAlive',
  sweeperStorm: 'SweeperStorm',
  /** Orphans the sweeper gave up on, each sweep that found them: re-queued maxRequeuesPerRun times already. */
  runsGivenUp: 'RunsGivenUp',
} as const;
