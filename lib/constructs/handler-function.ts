/**
 * One Lambda function per handler module in lib/lambda/ (or a job's own entry file): bundled locally with esbuild (no Docker), Node.js 24 on
 * arm64, X-Ray active, its own log group, and FENCEPOST_HANDLER naming the module (the local runner maps task
 * states back to handlers by it). In the built package, lib/lambda/'s handlers come prebundled (dist/handlers, made by
 * tools/prebundle.ts when packing): a user's synth deploys those files and bundles only the job's own entry.
 * Grants are not given here: each construct grants its functions by need.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { type Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { type BundlingOptions, LogLevel, NodejsFunction, type NodejsFunctionProps, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import type { HandlerName } from '../lambda/index';
import { Env } from '../lambda/env';
import { METRICS_NAMESPACE } from '../core/observability';

/** One handler's function: which handler module (or the job's own entry), its environment, timeout and memory. */
export interface HandlerFunctionProps {
  /**
   * The handler's name (FENCEPOST_HANDLER, by which the local runner maps a task state back to its handler): one of
   * lib/lambda/'s modules (`lib/lambda/<handler>.ts`), or any name for the job's own `entry`.
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
 * the map ships beside the bundle for a logged error's stack (lib/lambda/source-stack.ts), and is read only then; no
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
 * The built package's prebundled handlers (tools/prebundle.ts, when packing): ONE bundle, dist/handlers/index.js with
 * its map, exporting each of lib/lambda/'s handlers, and dist/handlers.json mapping each handler's name to its Lambda
 * Handler (`index.<export>`). One bundle, not eight: the handlers share the runtime, the core and the SDK, and
 * eight copies of them would add about 20 MB to every install (one: 2.6).
 * @param libFolder - the constructs' folder, beside which the bundle sits (this module's own by default)
 */
export const prebundled = (libFolder: string = __dirname) => ({
  folder: path.join(libFolder, '..', 'handlers'),
  handlers: path.join(libFolder, '..', 'handlers.json'),
});

/**
 * The handler's prebundled code and Lambda Handler, only in the built package: where its TypeScript source is
 * present (the repository), every synth bundles the source as it is, so a stale dist/ can never be deployed or run.
 */
function prebundledOf(handler: string): { code: lambda.Code; handler: string } | undefined {
  if (existsSync(path.join(__dirname, '../lambda', `${handler}.ts`))) return undefined;
  const { folder, handlers } = prebundled();
  if (!existsSync(handlers)) return undefined;
  const spec = (JSON.parse(readFileSync(handlers, 'utf8')) as Record<string, string>)[handler];
  return spec === undefined ? undefined : { code: lambda.Code.fromAsset(folder), handler: spec };
}

/**
 * cdk-nag's finding on X-Ray's grant, which can name no resource. cdk-nag reports every `Resource::*` of a policy
 * under one id, so acknowledging it hides any other wildcard in the same policy: only for policies whose grants are
 * all known (the library's functions; an app's own chunk function, by its app).
 */
export const XRAY_ACKNOWLEDGEMENT = {
  id: 'AwsSolutions-IAM5[Resource::*]',
  reason: 'X-Ray tracing (xray:PutTraceSegments, xray:PutTelemetryRecords) supports no resource-level permissions: AWS requires "*".',
} as const;

/** A fenced job's function: NodejsFunction's props, and the name FENCEPOST_HANDLER gives it. */
export interface FencepostFunctionProps extends Omit<NodejsFunctionProps, 'runtime'> {
  /** The handler's name (FENCEPOST_HANDLER), by which the local runner maps a task state back to its handler. */
  readonly handlerName: string;
}

/**
 * What every function of a fenced job shares, the library's own and the user's chunk function: Node.js 24 (the
 * bundles' target) on arm64, 256 MB unless said, X-Ray active, its own log group (`<id>Logs`, beside it in `scope`),
 * FENCEPOST_HANDLER and the Powertools settings, the cdk-nag acknowledgement of the basic execution policy, and invoke grants that name the
 * function alone: Step Functions invokes the unqualified ARN and nothing invokes a version or alias, so the `<arn>:*`
 * CDK adds by default would be a grant nobody uses (the IAM proof, test/proofs/iam.test.ts, fails on unused grants).
 */
export class FencepostFunction extends NodejsFunction {
  constructor(scope: Construct, id: string, props: FencepostFunctionProps) {
    const { handlerName, ...rest } = props;
    super(scope, id, {
      architecture: lambda.Architecture.ARM_64,
      memorySize: 256,
      tracing: lambda.Tracing.ACTIVE,
      ...rest,
      runtime: lambda.Runtime.NODEJS_24_X,
      logGroup:
        rest.logGroup ?? new logs.LogGroup(scope, `${id}Logs`, { retention: logs.RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.DESTROY }),
      environment: {
        // The local runner maps a task state to its handler by this name; Powertools publishes as the job's service.
        [Env.handler]: handlerName,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        POWERTOOLS_LOG_LEVEL: 'INFO',
        ...rest.environment,
      },
    });
    Validations.of(this).acknowledge({
      id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
      reason: 'The AWS-managed basic execution policy only lets the function write its own CloudWatch Logs; a copy of it would add nothing.',
    });
  }

  /** The function's own ARN alone: nothing invokes a version or alias of it. */
  override get resourceArnsForGrantInvoke(): string[] {
    return [this.functionArn];
  }
}

/** A handler's function: lib/lambda/'s module (prebundled in the built package), or a job's own entry bundled here. */
export class HandlerFunction extends FencepostFunction {
  constructor(scope: Construct, id: string, props: HandlerFunctionProps) {
    const ready = props.entry === undefined ? prebundledOf(props.handler) : undefined;
    super(scope, id, {
      // NodejsFunction given `code` deploys it as it is: no esbuild at synth (every such function shares one asset).
      ...(ready ?? { entry: props.entry ?? entryOf(props.handler), handler: 'handler', bundling: HANDLER_BUNDLING }),
      handlerName: props.handler,
      memorySize: props.memoryMb ?? 256,
      timeout: props.timeout,
      // FENCEPOST_HANDLER and the Powertools settings are the handler's own: they win over the given environment.
      environment: {
        ...props.environment,
        [Env.handler]: props.handler,
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        POWERTOOLS_LOG_LEVEL: 'INFO',
      },
    });
    // Only the library's own functions: their grants are known to name no other "*". On a user's chunk function
    // this would also hide a wildcard grant of the user's own (a FencedChunkFunction leaves it to its app).
    Validations.of(this).acknowledge(XRAY_ACKNOWLEDGEMENT);
  }
}
