/**
 * One Lambda function per handler module in lambda/ (or a job's own entry file): bundled locally with esbuild (no Docker), Node.js 24 on
 * arm64, X-Ray active, its own log group, and FENCEPOST_HANDLER naming the module (the local runner maps task
 * states back to handlers by it). Grants are not given here: each construct grants its functions by need.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { type Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { type BundlingOptions, LogLevel, NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { HandlerName } from '../lambda/index';
import { Env } from '../lambda/env';
import { METRICS_NAMESPACE } from '../core/observability';

/** One handler's function: which handler module (or the job's own entry), its environment, timeout and memory. */
export interface HandlerFunctionProps {
  /**
   * The handler's name (FENCEPOST_HANDLER, by which the local runner maps a task state back to its handler): one of
   * lambda/'s modules (`lambda/<handler>.ts`), or any name for the job's own `entry`.
   */
  readonly handler: HandlerName | (string & {});
  /** The job's own entry file (exporting `handler`), e.g. its chunk function. @default lambda/<handler>.ts */
  readonly entry?: string;
  /** The function's environment, POWERTOOLS_SERVICE_NAME included (the job's, FencedJob sets it); FENCEPOST_HANDLER and the other Powertools settings are added. */
  readonly environment: Record<string, string>;
  /** The function's timeout. */
  readonly timeout: Duration;
  /** Memory, in MB. @default 256 */
  readonly memoryMb?: number;
}

/**
 * How every function is bundled; a job's own chunk function takes it too (`bundling: HANDLER_BUNDLING`).
 * `externalModules: []`: the AWS SDK (`@aws-sdk/*`, `@smithy/*`) goes into the bundle at package-lock.json's versions,
 * the ones the tests ran; NodejsFunction's default leaves it to the runtime's copy. `keepNames`: the workflow's Catch
 * matches error class names (FencedOutError, …), which minifying would lose. `sourceMap` without `sourcesContent`:
 * the map ships beside the bundle for a logged error's stack (lambda/source-stack.ts), and is read only then; no
 * `--enable-source-maps`, which would load it at every cold start (docs/PERFORMANCE.md, "Cold start").
 */
export const HANDLER_BUNDLING = {
  format: OutputFormat.CJS,
  target: 'node24',
  minify: true,
  keepNames: true,
  sourceMap: true,
  sourcesContent: false,
  externalModules: [],
  logLevel: LogLevel.WARNING,
} satisfies BundlingOptions;

/** The handler's module: its TypeScript source here, its compiled JavaScript in the built package (dist/lambda). */
function entryOf(handler: string): string {
  const source = path.join(__dirname, '../lambda', `${handler}.ts`);
  return existsSync(source) ? source : source.replace(/\.ts$/, '.js');
}

/**
 * A handler's function. Invoke grants name the function alone: Step Functions invokes the unqualified ARN and
 * nothing invokes a version or alias, so the `<arn>:*` that CDK adds by default would be a grant nobody uses
 * (the IAM proof, test/iam.test.ts, fails on unused grants). Its log group is `<id>Logs`, beside it in `scope`.
 */
export class HandlerFunction extends NodejsFunction {
  constructor(scope: Construct, id: string, props: HandlerFunctionProps) {
    super(scope, id, {
      entry: props.entry ?? entryOf(props.handler),
      handler: 'handler',
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memoryMb ?? 256,
      timeout: props.timeout,
      tracing: lambda.Tracing.ACTIVE,
      environment: {
        ...props.environment,
        [Env.handler]: props.handler,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        POWERTOOLS_LOG_LEVEL: 'INFO',
      },
      logGroup: new logs.LogGroup(scope, `${id}Logs`, { retention: logs.RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY }),
      bundling: HANDLER_BUNDLING,
    });
    Validations.of(this).acknowledge(
      {
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
        reason: 'The AWS-managed basic execution policy only lets the function write its own CloudWatch Logs; a copy of it would add nothing.',
      },
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason: 'X-Ray tracing (xray:PutTraceSegments, xray:PutTelemetryRecords) supports no resource-level permissions: AWS requires "*".',
      },
    );
  }

  override get resourceArnsForGrantInvoke(): string[] {
    return [this.functionArn];
  }
}
