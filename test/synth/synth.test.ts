/**
 * `npx cdk synth` works offline with no AWS credentials: the app validates its context, bundles every Lambda
 * locally with esbuild (no Docker), passes the cdk-nag AWS Solutions checks, and writes the template. The
 * integration test app (integ/) is synthesized too, never deployed: its assertions are checked for shape.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DEAD_HOLDER_NIGHT, DUPLICATE_NIGHT, INTEG_NIGHT, fencepostInteg } from '../../integ/billing.integ';
import { Keys } from '../../apps/billing/keys';
import { readStackConfig } from '../../apps/billing/config';

test('npx cdk synth --quiet succeeds offline and bundles every handler', { timeout: 240_000 }, () => {
  const root = path.resolve(__dirname, '..', '..');
  const out = mkdtempSync(path.join(tmpdir(), 'fencepost-synth-'));
  try {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_') && !k.startsWith('CDK_')));
    const r = spawnSync(
      process.execPath,
      [path.join(root, 'node_modules/aws-cdk/bin/cdk'), 'synth', '--quiet', '--no-notices', '--no-version-reporting', '-o', out],
      {
        cwd: root,
        encoding: 'utf8',
        env: { ...env, AWS_EC2_METADATA_DISABLED: 'true', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
        timeout: 230_000,
      },
    );
    assert.equal(r.status, 0, `cdk synth failed:\n${r.stdout}\n${r.stderr}`);
    const template = JSON.parse(readFileSync(path.join(out, 'Fencepost.template.json'), 'utf8')) as {
      Resources: Record<string, { Type: string; Metadata?: Record<string, string> }>;
    };
    const functions = Object.values(template.Resources).filter((res) => res.Type === 'AWS::Lambda::Function');
    assert.equal(functions.length, 9, 'seven billing functions and two sweeper functions');
    for (const fn of functions) {
      const asset = fn.Metadata?.['aws:asset:path'];
      assert.ok(asset && existsSync(path.join(out, asset, 'index.js')), `bundled: ${asset}`);
    }
    assert.ok(readdirSync(out).some((f) => f === 'manifest.json'));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

/** An assertion call as the assertion stack's template holds it (Custom::DeployAssert@SdkCall…). */
interface SdkCall {
  readonly id: string;
  readonly service: string;
  readonly api: string;
  readonly parameters: Record<string, unknown>;
  readonly outputPaths?: string[];
  readonly flatten: boolean;
  readonly expected?: string;
}

function sdkCalls(resources: Record<string, { Type: string; Properties: Record<string, unknown> }>): SdkCall[] {
  return Object.entries(resources)
    .filter(([, r]) => r.Type.startsWith('Custom::DeployAssert@SdkCall'))
    .map(([id, r]) => {
      const p = r.Properties;
      // Each parameter is JSON-encoded on its own (the handler decodes them); references to the test stack stay tokens.
      const parameters = Object.fromEntries(
        Object.entries((p.parameters ?? {}) as Record<string, unknown>).map(([k, v]) => [k, typeof v === 'string' ? (JSON.parse(v) as unknown) : v]),
      );
      const outputPaths = Array.isArray(p.outputPaths) && p.outputPaths.length > 0 ? (p.outputPaths as string[]) : undefined;
      const expected = p.expected === undefined ? undefined : String(p.expected);
      return { id, service: String(p.service), api: String(p.api), parameters, outputPaths, flatten: p.flattenResponse === 'true', expected };
    });
}

// The largest response each API can give the call, by AWS's documented limits: a Step Functions name is at most 80
// characters and an execution's input or output (each event's too) at most 256 KiB; getExecutionHistory returns
// maxResults events (at most 1,000); a DynamoDB number has up to 38 digits; an S3 key up to 1,024 bytes; listObjectsV2
// returns MaxKeys objects (at most 1,000). The job row and the manifest are the app's own shapes, at the night's size.
const NAME = 'n'.repeat(80);
const PAYLOAD = 'p'.repeat(256 * 1024);
const NUMBER = '9'.repeat(38);
const EXECUTION = `arn:aws:states:ap-southeast-2:123456789012:execution:${NAME}:${NAME}`;
const when = new Date(Date.UTC(2026, 0, 15, 1, 30));

function largestResponse(call: SdkCall, chunks: number): Record<string, unknown> {
  const p = call.parameters;
  switch (`${call.service}.${call.api}`) {
    case 'StepFunctions.startExecution':
      return { executionArn: EXECUTION, startDate: when };
    case 'StepFunctions.describeExecution':
      return {
        ...{ executionArn: EXECUTION, stateMachineArn: EXECUTION.replace(':execution:', ':stateMachine:'), name: NAME, status: 'SUCCEEDED' },
        ...{ startDate: when, stopDate: when, input: PAYLOAD, inputDetails: { included: true }, output: PAYLOAD, outputDetails: { included: true } },
      };
    case 'StepFunctions.getExecutionHistory': {
      const withData = p.includeExecutionData !== false; // the API's default is true
      const events = Array.from({ length: Number(p.maxResults ?? 1000) }, (_, i) => ({
        ...{ timestamp: when, type: 'SucceedStateExited', id: i + 2, previousEventId: i + 1 },
        stateExitedEventDetails: { name: NAME, ...(withData ? { output: PAYLOAD } : {}), outputDetails: { truncated: false } },
      }));
      return { events, nextToken: 'x'.repeat(1024) };
    }
    case 'DynamoDB.getItem': {
      const row: Record<string, unknown> = {
        ...{ pk: { S: Keys.job(INTEG_NIGHT) }, fence: { N: NUMBER }, state: { S: 'RUNNING' }, owner_token: { N: NUMBER }, owner: { S: NAME } },
        ...{ chunk_count: { N: NUMBER }, claim_shard: { S: 'billing' }, claimed_since: { S: when.toISOString() } },
      };
      const names = (p.ExpressionAttributeNames ?? {}) as Record<string, string>;
      const projected =
        typeof p.ProjectionExpression === 'string' ? p.ProjectionExpression.split(',').map((a) => names[a.trim()] ?? a.trim()) : undefined;
      return { Item: projected ? Object.fromEntries(Object.entries(row).filter(([k]) => projected.includes(k))) : row };
    }
    case 'DynamoDB.putItem':
      return p.ReturnValues && p.ReturnValues !== 'NONE' ? { Attributes: p.Item } : {};
    case 'S3.getObject': {
      const entry = (c: number) => ({
        key: `billing/${INTEG_NIGHT}/chunks/${String(c).padStart(2, '0')}.t${NUMBER}.jsonl`,
        token: NUMBER,
        records: NUMBER,
        etag: `"${'e'.repeat(32)}"`,
      });
      const manifest = {
        jobId: Keys.job(INTEG_NIGHT),
        token: NUMBER,
        state: 'RUNNING',
        chunks: Object.fromEntries(Array.from({ length: chunks }, (_, c) => [String(c).padStart(2, '0'), entry(c)])),
        raisedBy: [{ token: NUMBER, at: when.toISOString() }],
      };
      return {
        Body: JSON.stringify(manifest, null, 1),
        ContentLength: 1,
        ETag: `"${'e'.repeat(32)}"`,
        VersionId: 'v'.repeat(32),
        LastModified: when,
        ContentType: 'application/json',
        ServerSideEncryption: 'aws:kms',
        SSEKMSKeyId: EXECUTION,
      };
    }
    case 'S3.listObjectsV2': {
      const contents = Array.from({ length: Number(p.MaxKeys ?? 1000) }, () => ({
        Key: 'k'.repeat(1024),
        LastModified: when,
        ETag: `"${'e'.repeat(32)}"`,
        Size: 1,
        StorageClass: 'STANDARD',
      }));
      return {
        Contents: contents,
        Name: 'b'.repeat(63),
        Prefix: 'k'.repeat(1024),
        MaxKeys: contents.length,
        KeyCount: contents.length,
        IsTruncated: true,
        NextContinuationToken: 'x'.repeat(1024),
      };
    }
    default:
      throw new Error(`${call.id}: no bound known for the response of ${call.service}.${call.api}: narrow it (outputPaths) and model it here`);
  }
}

/** integ-tests-alpha's handler (lambda-handler/sdk.ts, index.ts): what it sends CloudFormation for this response. */
function responseBody(call: SdkCall, response: Record<string, unknown>): string {
  const parse = (x: unknown): unknown =>
    typeof x === 'string'
      ? (() => {
          try {
            return JSON.parse(x) as unknown;
          } catch {
            return x;
          }
        })()
      : Array.isArray(x)
        ? x.map(parse)
        : x && typeof x === 'object' && !(x instanceof Date)
          ? Object.fromEntries(Object.entries(x).map(([k, v]) => [k, parse(v)]))
          : x;
  const flat: Record<string, unknown> = {};
  const walk = (x: unknown, at: string[]): void => {
    if (x && typeof x === 'object') for (const [k, v] of Object.entries(x)) walk(v, [...at, k]);
    else flat[at.join('.')] = x;
  };
  let data: Record<string, unknown> = { apiCallResponse: response };
  if (call.outputPaths || call.flatten) {
    walk(parse({ apiCallResponse: response }), []);
    data = call.outputPaths
      ? Object.fromEntries(Object.entries(flat).filter(([k]) => call.outputPaths!.some((o) => k.startsWith(`apiCallResponse.${o}`))))
      : flat;
  }
  if (call.expected !== undefined) data = { assertion: JSON.stringify({ status: 'success' }), ...data };
  const stackId = `arn:aws:cloudformation:ap-southeast-2:123456789012:stack/FencepostIntegAssertions/${'0'.repeat(36)}`;
  return JSON.stringify({
    Status: 'SUCCESS',
    Reason: 'OK',
    PhysicalResourceId: call.id,
    StackId: stackId,
    RequestId: '0'.repeat(36),
    LogicalResourceId: call.id,
    NoEcho: false,
    Data: data,
  });
}

/** CloudFormation's limit on a custom resource's response body ("Custom resource response objects"). */
const CUSTOM_RESOURCE_RESPONSE_BYTES = 4096;

test('every assertion of the integration test asks for a response that fits a custom resource response (4,096 bytes)', { timeout: 120_000 }, () => {
  const out = mkdtempSync(path.join(tmpdir(), 'fencepost-integ-'));
  try {
    const { app, assertionStack } = fencepostInteg({ 'aws:cdk:bundling-stacks': [] }, out);
    const resources = app.synth({ force: true }).getStackByName(assertionStack.stackName).template.Resources as Record<
      string,
      { Type: string; Properties: Record<string, unknown> }
    >;
    const calls = sdkCalls(resources);
    assert.ok(calls.length > 0, 'the assertion stack makes calls');
    const { invoices, chunkSize } = readStackConfig(app);
    const chunks = Math.ceil(invoices / chunkSize);
    const tooLong = calls
      .map((call) => ({ call, bytes: Buffer.byteLength(responseBody(call, largestResponse(call, chunks))) }))
      .filter((c) => c.bytes > CUSTOM_RESOURCE_RESPONSE_BYTES);
    assert.deepEqual(
      tooLong.map((c) => `${c.call.id} (${c.call.service}.${c.call.api}): up to ${c.bytes} bytes`),
      [],
      'these calls can answer CloudFormation with more than 4,096 bytes ("Response object is too long")',
    );
    // This version's handler decodes $ObjectLike, $ArrayWith, $StringLike and $SerializedJson only: an $Exact never matches.
    assert.deepEqual(
      calls.filter((c) => c.expected?.includes('"$Exact"')).map((c) => c.id),
      [],
    );
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test(
  "the integration test app bills a night twice, a dead holder's night and a duplicate trigger, and its tables are disposable",
  { timeout: 120_000 },
  () => {
    const out = mkdtempSync(path.join(tmpdir(), 'fencepost-integ-'));
    try {
      const { app, stack, assertionStack } = fencepostInteg({ 'aws:cdk:bundling-stacks': [] }, out);
      const assembly = app.synth({ force: true });
      const calls = sdkCalls(assembly.getStackByName(assertionStack.stackName).template.Resources as never);
      const nights = calls
        .filter((c) => c.api === 'startExecution')
        .map((c) => (JSON.parse(String(c.parameters.input)) as { jobDate: string }).jobDate);
      assert.deepEqual(nights, [INTEG_NIGHT, INTEG_NIGHT, DUPLICATE_NIGHT, DUPLICATE_NIGHT], 'a night and its rerun; a night triggered twice');
      const puts = calls.filter((c) => c.api === 'putItem').map((c) => (c.parameters.Item as { pk: { S: string } }).pk.S);
      assert.deepEqual(puts, [Keys.lock(DEAD_HOLDER_NIGHT), Keys.job(DEAD_HOLDER_NIGHT)], "the dead holder's lock item and its RUNNING job row");
      const ends = calls.filter((c) => c.api === 'getExecutionHistory').map((c) => c.expected ?? '');
      assert.equal(ends.filter((e) => e.includes('"name":"Completed"')).length, 2, "the first night and the duplicate's holder end Completed");
      assert.ok(
        ends.some((e) => e.includes('"name":"AlreadyDone"')),
        'the rerun ends AlreadyDone',
      );
      const tables = Object.values(
        assembly.getStackByName(stack.stackName).template.Resources as Record<
          string,
          { Type: string; DeletionPolicy?: string; Properties: Record<string, unknown> }
        >,
      ).filter((r) => r.Type === 'AWS::DynamoDB::Table');
      assert.equal(tables.length, 3);
      for (const t of tables) {
        assert.equal(t.DeletionPolicy, 'Delete');
        assert.equal(t.Properties.DeletionProtectionEnabled, false);
      }
      assert.ok(existsSync(path.join(out, 'integ.json')), 'the integ manifest integ-runner reads');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  },
);
