/**
 * The error names the workflow's Retry and Catch clauses match (docs/DESIGN.md §5), in one place: the Lambdas throw
 * them under these names (lib/core/errors.ts, lib/lambda/runtime.ts), and a Lambda bundle keeps class names (keepNames) so
 * that they survive minification.
 */

/**
 * This process's stop time passed (a pause), which says nothing of who holds the lease now. After the raise the run
 * ends Lost on it and the sweeper sees the run; before the raise nothing would, so RaiseFence is retried on it: a
 * fresh process renews on "holder and epoch still ours" and meets LeaseLostError if another holder claimed.
 */
export const STOP_TIME_PASSED = 'StopTimePassedError';

/** A lost lease or a fenced-out write: another holder owns the run. The run ends quietly (Succeed "Lost"), no retry. */
export const LOST_ERRORS = ['LeaseLostError', STOP_TIME_PASSED, 'FencedOutError'];

/** Transient store errors and the Lambda service's own: retried with backoff. */
export const TRANSIENT_ERRORS = [
  'TransientStoreError',
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
  'Lambda.ClientExecutionTimeoutException', // the Invoke call itself timed out: nothing says the function ran, so try again
];

/** Retries of a transient error per task (ASL MaxAttempts counts retries, not attempts: 1 + 4 invocations at most). */
export const TRANSIENT_RETRIES = 4;

/**
 * A process that died or whose answer never came: Lambda reports a runtime that exited (Runtime.ExitError), a
 * function past its own timeout (Sandbox.Timedout) or a failure it cannot name (Lambda.Unknown); Step Functions, a
 * task past its TimeoutSeconds (States.Timeout), its Lambda perhaps still running. Retried on the steps before the
 * fence is raised, each safe to run again beside a zombie of itself: nothing else would ever start the run again
 * (docs/DESIGN.md "Before the raise").
 */
export const PROCESS_ERRORS = ['Runtime.ExitError', 'Sandbox.Timedout', 'Lambda.Unknown', 'States.Timeout'];

/**
 * Retries of a process error per step before the raise (1 + 4 invocations at most, 1 + 2 + 2 + 2 s of backoff: every wait is capped at 2 s, RETRY_BACKOFF). A
 * process lost to a host or the network rarely dies twice; one the code kills every time (out of memory) dies every
 * retry, and the ExecutionsFailed alarm answers it. Four, not two: the workflow world strands 4 of 5,000 schedules
 * with two (an Observe dying three times), none with four. Each retry is history the claim loop repeats
 * (chunk-plan.ts HISTORY.preRaiseTask).
 */
export const PROCESS_RETRIES = 4;

/**
 * What AWS reports when a child execution of a Distributed Map fails (no failure is tolerated): the child's own
 * error (LeaseLostError, ...) never reaches the Map's Catch. Cause: "The specified tolerated failure threshold was
 * exceeded". https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html#maprun-fail-threshold
 */
export const MAP_RUN_FAILED = 'States.ExceedToleratedFailureThreshold';
