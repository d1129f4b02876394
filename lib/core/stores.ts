/**
 * AWS clients for the stores, built once and injected everywhere (never created inside the core's functions).
 * With endpoints they talk to the local stack; without, to AWS in the configured account and Region.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { Agent } from 'node:http';
import { NodeHttpHandler } from '@smithy/node-http-handler';

export interface Endpoints {
  readonly dynamodb: string;
  readonly s3: string;
}

export interface Clients {
  /** The low-level client, for control-plane calls (create and describe tables). */
  readonly raw: DynamoDBClient;
  readonly ddb: DynamoDBDocumentClient;
  readonly s3: S3Client;
  destroy(): void;
}

/** Clients for local endpoints: loopback only, dummy credentials, path-style S3, kept-alive connections. */
export function localClients(endpoints: Endpoints): Clients {
  const common = {
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    maxAttempts: 3,
    requestHandler: new NodeHttpHandler({ httpAgent: new Agent({ keepAlive: true, maxSockets: 64 }) }),
  };
  const raw = new DynamoDBClient({ ...common, endpoint: endpoints.dynamodb });
  const ddb = DynamoDBDocumentClient.from(raw, { marshallOptions: { removeUndefinedValues: true } });
  const s3 = new S3Client({ ...common, endpoint: endpoints.s3, forcePathStyle: true });
  return { raw, ddb, s3, destroy: () => { raw.destroy(); s3.destroy(); } };
}
