/**
 * AWS clients for the stores, built once and injected everywhere (never created inside the core's functions).
 * With endpoints they talk to the local stack; without, to AWS in the configured account and Region.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { Agent } from 'node:http';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import type { Clock } from '../clock';
import type { ClockOffsetEstimator } from '../clock-offset';

/** Local endpoints (the embedded stack's, or any DynamoDB/S3-compatible pair). */
export interface Endpoints {
  /** The DynamoDB endpoint URL, e.g. http://127.0.0.1:8000 */
  readonly dynamodb: string;
  /** The S3 endpoint URL (path-style addressing is used). */
  readonly s3: string;
}

/** The clients the library is given: built once per process, injected everywhere. */
export interface Clients {
  /** The low-level client, for control-plane calls (create and describe tables). */
  readonly raw: DynamoDBClient;
  /** The document client every library function takes (removeUndefinedValues on). */
  readonly ddb: DynamoDBDocumentClient;
  /** The S3 client the manifests and chunk objects go through. */
  readonly s3: S3Client;
  /** Close the clients' sockets. */
  destroy(): void;
}

/**
 * Per attempt: a connection must open within CONNECTION_TIMEOUT_MS and the whole request and response take at most
 * REQUEST_TIMEOUT_MS, or the attempt fails with TimeoutError and the SDK retries it. Without these a hung call waits
 * until the function's own timeout, while the lease heartbeat beside it keeps the run held for a worker doing
 * nothing. A fenced transaction (100 items) or a chunk object takes tens of milliseconds; 5 s is far above that.
 */
export const CONNECTION_TIMEOUT_MS = 2_000;
export const REQUEST_TIMEOUT_MS = 5_000;

/**
 * Clients for AWS (Region and credentials from the environment, as inside a Lambda). Keep-alive is the SDK's
 * default; the clients are built once per process and reused across invocations.
 */
export function awsClients(): Clients {
  // Handler options rather than a NodeHttpHandler instance: each client builds its own from its own @smithy version.
  // throwOnRequestTimeout: without it a breached requestTimeout only logs a warning (@smithy/node-http-handler ≥ 4.4).
  const requestHandler = { connectionTimeout: CONNECTION_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS, throwOnRequestTimeout: true };
  return clientsOf(new DynamoDBClient({ requestHandler }), new S3Client({ requestHandler }));
}

/** Either client, for middleware that only needs the stack. */
type AnyClient = { middlewareStack: DynamoDBClient['middlewareStack'] } | { middlewareStack: S3Client['middlewareStack'] };

/**
 * Feed every response's Date header, with our wall clock read just before and just after the attempt, to an
 * offset estimator (lib/core/clock-offset.ts). Per attempt, inside the retry loop, so a retry's wait is not counted.
 */
export function measureClockOffset(client: AnyClient, clock: Clock, estimator: ClockOffsetEstimator): void {
  (client.middlewareStack as DynamoDBClient['middlewareStack']).add(
    (next) => async (args) => {
      const sent = clock.wallMs(); // wall: the offset is about wall clocks, no duration is timed here
      const result = await next(args);
      const received = clock.wallMs();
      const headers = (result.response as { headers?: Record<string, string> } | undefined)?.headers;
      estimator.addSample(sent, received, headers?.date ?? headers?.Date);
      return result;
    },
    { step: 'deserialize', name: 'fencepostClockOffset', priority: 'low' },
  );
}

/**
 * Clients for local endpoints: loopback only, dummy credentials, path-style S3, kept-alive connections. Without an S3
 * endpoint the S3 client points at an unreachable loopback address, so a stray S3 call fails at once, never at AWS.
 */
export function localClients(endpoints: { readonly dynamodb: string; readonly s3?: string }): Clients {
  const common = {
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 3,
    requestHandler: new NodeHttpHandler({ httpAgent: new Agent({ keepAlive: true, maxSockets: 64 }) }),
  };
  return clientsOf(
    new DynamoDBClient({ ...common, endpoint: endpoints.dynamodb }),
    new S3Client({ ...common, endpoint: endpoints.s3 ?? 'http://127.0.0.1:9', forcePathStyle: true }),
  );
}

/** The document client over `raw` (undefined attributes left out, not an error), and one destroy for both. */
function clientsOf(raw: DynamoDBClient, s3: S3Client): Clients {
  const ddb = DynamoDBDocumentClient.from(raw, { marshallOptions: { removeUndefinedValues: true } });
  const destroy = () => {
    raw.destroy();
    s3.destroy();
  };
  return { raw, ddb, s3, destroy };
}
