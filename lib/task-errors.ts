/**
 * The error names the workflow's Retry and Catch clauses match (docs/DESIGN.md §5), in one place: the Lambdas throw
 * them under these names (core/errors.ts, lambda/runtime.ts), and a Lambda bundle keeps class names (keepNames) so
 * that they survive minification.
 */

/** A lost lease or a fenced-out write: another holder owns the run. The run ends quietly (Succeed "Lost"), no retry. */
export const LOST_ERRORS = ['LeaseLostError', 'StopTimePassedError', 'FencedOutError'];

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
 * What AWS reports when a child execution of a Distributed Map fails (no failure is tolerated): the child's own
 * error (LeaseLostError, ...) never reaches the Map's Catch. Cause: "The specified tolerated failure threshold was
 * exceeded". https://docs.aws.amazon.com/step-functions/latest/dg/state-map-distributed.html#maprun-fail-threshold
 */
export const MAP_RUN_FAILED = 'States.ExceedToleratedFailureThreshold';
