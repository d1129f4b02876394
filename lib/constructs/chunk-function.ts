/**
 * The user's chunk function, made the way the library makes its own: bundled with HANDLER_BUNDLING (the AWS SDK
 * inside, class names kept for the workflow's Catch), on the runtime and architecture the bundles target, X-Ray on,
 * its own log group. Give it to FencedJob as `chunkFunction`: FencedJob then sets the job's environment on it (the
 * tables, the bucket, the lease settings, the chunk count: lib/lambda/env.ts) and grants it what the fence needs (renew
 * on the lock table, ConditionCheck and the done mark on the job table, the job's prefix of the manifest bucket).
 * Grants on the job's own tables stay the caller's.
 *
 * A construct beside FencedJob, not a `chunkEntry` prop of it: the function is the user's, with the user's own
 * environment, memory and grants, set on it before or after FencedJob, as on any NodejsFunction.
 */
import { Duration } from 'aws-cdk-lib';
import type { NodejsFunctionProps } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Construct } from 'constructs';
import { FencepostFunction, HANDLER_BUNDLING } from './handler-function';

/** A chunk function: its entry file, and any NodejsFunction setting to change. */
export interface FencedChunkFunctionProps extends Omit<NodejsFunctionProps, 'entry' | 'runtime'> {
  /** The chunk function's source file, exporting `handler` (e.g. made with `fencedChunkHandler` from `fencepost/lambda`). */
  readonly entry: string;
  /**
   * The function's timeout; the chunk task's is 30 s more, so the function always times out first.
   * @default Duration.minutes(1)
   */
  readonly timeout?: Duration;
  /**
   * Bundling options added to the library's (HANDLER_BUNDLING). `keepNames` stays on whatever is given: the workflow
   * tells a lost lease from a failure by the error's class name.
   * @default HANDLER_BUNDLING
   */
  readonly bundling?: NodejsFunctionProps['bundling'];
}

/**
 * A NodejsFunction set up as a fenced job's chunk function (see the module's comment for what FencedJob adds), with
 * what every function of the job shares (FencepostFunction: runtime, architecture, tracing, log group, Powertools,
 * the cdk-nag acknowledgements, the invoke grant on its own ARN).
 */
export class FencedChunkFunction extends FencepostFunction {
  constructor(scope: Construct, id: string, props: FencedChunkFunctionProps) {
    super(scope, id, {
      handler: 'handler',
      ...props,
      handlerName: 'chunk',
      timeout: props.timeout ?? Duration.minutes(1),
      bundling: { ...HANDLER_BUNDLING, ...props.bundling, keepNames: true },
    });
  }
}
