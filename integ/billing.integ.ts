/**
 * Integration test on a real account (integ-runner, `npm run integ`): deploy the Fencepost stack, bill one night
 * through the real billing state machine, and check the stores; then bill the same night again and check that the
 * second execution ends AlreadyDone. CI never deploys it: test/synth/synth.test.ts only synthesizes this app and checks its assertions.
 *
 * The night is a fixed date on fresh tables: the integ stack's tables are destroyed with it (the real stack retains
 * them); its buckets are retained, as in the real stack, because CloudFormation cannot delete a non-empty bucket.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { App, Aspects, Duration, type IAspect, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { CfnTable } from 'aws-cdk-lib/aws-dynamodb';
import { ExpectedResult, type IApiCall, IntegTest, Match } from '@aws-cdk/integ-tests-alpha';
import type { IConstruct } from 'constructs';
import { Keys } from '../apps/billing/keys';
import { claimShard } from '../lib/core/job-keys';
import { readStackConfig } from '../apps/billing/config';
import { FencepostStack } from '../apps/billing/stack';

/** The night billed; any date works on fresh tables. */
export const INTEG_NIGHT = '2026-01-15';
/** A night whose holder died holding it: the sweeper re-queues it and a new holder takes over. */
export const DEAD_HOLDER_NIGHT = '2026-01-16';
/** A night triggered twice: one execution bills it, the other ends quietly. */
export const DUPLICATE_NIGHT = '2026-01-17';

/**
 * The value itself, matched exactly. Not ExpectedResult.exact: it encodes `{"$Exact": v}`, which this version's
 * assertion handler does not decode (it knows $ObjectLike, $ArrayWith, $StringLike, $SerializedJson), so it
 * would compare the leaf with that object and never match.
 */
const equals = (value: string | number): ExpectedResult => ({ result: JSON.stringify(value) });

/** Tables go with the test stack (deletion protection off, DESTROY), so a run leaves no tables behind. */
class DisposableTables implements IAspect {
  visit(node: IConstruct): void {
    if (node instanceof CfnTable) {
      node.deletionProtectionEnabled = false;
      node.applyRemovalPolicy(RemovalPolicy.DESTROY);
    }
  }
}

export interface FencepostInteg {
  readonly app: App;
  readonly stack: FencepostStack;
  readonly assertionStack: Stack;
  readonly integ: IntegTest;
}

/** The integ app; `context` is added to cdk.json's (the test adds `aws:cdk:bundling-stacks: []` to skip bundling). */
export function fencepostInteg(context: Record<string, unknown> = {}, outdir?: string): FencepostInteg {
  const cdkJson = JSON.parse(readFileSync(path.join(__dirname, '..', 'cdk.json'), 'utf8')) as { context: Record<string, unknown> };
  const app = new App({ context: { ...cdkJson.context, ...context }, outdir });
  const config = readStackConfig(app);
  const stack = new FencepostStack(app, 'FencepostInteg', { config });
  Aspects.of(stack).add(new DisposableTables());
  // Nothing should run on a schedule during the test except what the test starts: the nightly schedule would
  // start at 01:30 UTC only, and the sweeper is harmless (it finds nothing claimed, or a live lease).
  const assertionStack = new Stack(app, 'FencepostIntegAssertions');
  assertionStack.addStackDependency(stack);
  const integ = new IntegTest(app, 'FencepostBilling', {
    testCases: [stack],
    assertionStack,
    diffAssets: false,
  });
  const a = integ.assertions;
  const machine = stack.billing.stateMachine.stateMachineArn;
  const jobs = stack.billing.jobTable.tableName;
  const locks = stack.billing.lockTable.tableName;
  const bucket = stack.billing.manifestBucket!.bucketName;
  const { invoices, chunkSize, leaseMs } = config;
  const chunks = Math.ceil(invoices / chunkSize);
  const pad = (chunk: number) => String(chunk).padStart(2, '0');

  // Every call returns its response to CloudFormation as the custom resource's data, which must stay under 4,096 bytes
  // (aws-cdk issue 24490): each call asks for a bounded response (outputPaths through assertAtPath or getAttString,
  // includeExecutionData false, a ProjectionExpression). test/synth/synth.test.ts checks each call's bound.
  const start = (date: string) =>
    a.awsApiCall('StepFunctions', 'startExecution', { stateMachineArn: machine, input: JSON.stringify({ jobDate: date }) });
  const succeeded = (execution: IApiCall, minutes: number) =>
    a
      .awsApiCall('StepFunctions', 'describeExecution', { executionArn: execution.getAttString('executionArn') })
      .assertAtPath('status', equals('SUCCEEDED'))
      .waitForAssertions({ totalTimeout: Duration.minutes(minutes), interval: Duration.seconds(10), backoffRate: 1 });
  /** How an execution ended: the Succeed state it exited last (the newest 3 events, without their data). */
  const endedIn = (execution: IApiCall, name: string | RegExp) =>
    a
      .awsApiCall('StepFunctions', 'getExecutionHistory', {
        executionArn: execution.getAttString('executionArn'),
        reverseOrder: true,
        maxResults: 3,
        includeExecutionData: false,
      })
      .expect(
        ExpectedResult.objectLike({
          events: Match.arrayWith([
            Match.objectLike({
              type: 'SucceedStateExited',
              stateExitedEventDetails: Match.objectLike({ name: typeof name === 'string' ? name : Match.stringLikeRegexp(name.source) }),
            }),
          ]),
        }),
      );
  /** A job row's attributes, projected: the response holds these and nothing else. */
  const jobRow = (date: string, item: Record<string, unknown>) =>
    a.awsApiCall('DynamoDB', 'getItem', {
      TableName: jobs,
      Key: { pk: { S: Keys.job(date) } },
      ConsistentRead: true,
      ProjectionExpression: Object.keys(item)
        .map((_, i) => `#a${i}`)
        .join(', '),
      ExpressionAttributeNames: Object.fromEntries(Object.keys(item).map((k, i) => [`#a${i}`, k])),
    });
  const expectRow = (date: string, item: Record<string, unknown>) =>
    jobRow(date, item).expect(ExpectedResult.objectLike({ Item: Match.objectLike(item) }));
  const waitForRow = (date: string, state: string, minutes: number) =>
    jobRow(date, { state: {} })
      .assertAtPath('Item.state.S', equals(state))
      .waitForAssertions({ totalTimeout: Duration.minutes(minutes), interval: Duration.seconds(2), backoffRate: 1 });
  /** One leaf of the night's manifest: the response is flattened and holds only that leaf. */
  const manifestAt = (date: string, leaf: string, value: string | number) =>
    a.awsApiCall('S3', 'getObject', { Bucket: bucket, Key: Keys.manifest(date) }).assertAtPath(`Body.${leaf}`, equals(value));

  const steps: IApiCall[] = [];

  // 1. A whole night on fresh tables (cdk.json: 50,000 invoices in 10 chunks of 5,000), ending in Completed.
  const night = INTEG_NIGHT;
  const first = start(night);
  steps.push(first, succeeded(first, 20), endedIn(first, 'Completed'));
  // The stores: the job row DONE with every chunk; the manifest DONE, naming each chunk with its invoices, and no
  // object was ever written for a chunk past the last.
  steps.push(expectRow(night, { state: { S: 'DONE' }, chunk_count: { N: String(chunks) } }), manifestAt(night, 'state', 'DONE'));
  for (let chunk = 0; chunk < chunks; chunk++) {
    steps.push(manifestAt(night, `chunks.${pad(chunk)}.records`, Math.min(chunkSize, invoices - chunk * chunkSize)));
  }
  steps.push(
    a
      .awsApiCall('S3', 'listObjectsV2', { Bucket: bucket, Prefix: `${Keys.chunkPrefix(night)}${pad(chunks)}.`, MaxKeys: 1 })
      .assertAtPath('KeyCount', equals(0)),
  );

  // 2. The same night again: the job row is DONE, so the run ends AlreadyDone without billing.
  const again = start(night);
  steps.push(again, succeeded(again, 5), endedIn(again, 'AlreadyDone'));

  // 3. A dead holder's night: its lock item holds token 1 and never renews; its job row is RUNNING, claimed by it.
  // The sweeper (every minute) sights the row, finds the rvn unchanged a lease later, re-queues it and starts a run,
  // which watches the rvn for a lease, takes over with token 2, raises the fence and bills the night.
  const orphan = DEAD_HOLDER_NIGHT;
  const dead = 'integ-dead-holder';
  steps.push(
    a.awsApiCall('DynamoDB', 'putItem', {
      TableName: locks,
      Item: { pk: { S: Keys.lock(orphan) }, holder: { S: dead }, lease_ms: { N: String(leaseMs) }, rvn: { S: 'rvn-of-the-dead' }, epoch: { N: '1' } },
    }),
    a.awsApiCall('DynamoDB', 'putItem', {
      TableName: jobs,
      Item: {
        pk: { S: Keys.job(orphan) },
        fence: { N: '1' },
        state: { S: 'RUNNING' },
        owner_token: { N: '1' },
        owner: { S: dead },
        chunk_count: { N: String(chunks) },
        claim_shard: { S: claimShard(Keys.keys.name) },
        claimed_since: { S: `${orphan}T01:30:00.000Z` },
      },
    }),
    waitForRow(orphan, 'DONE', 20),
    expectRow(orphan, { state: { S: 'DONE' }, fence: { N: '2' }, owner_token: { N: '2' } }),
  );

  // 4. A duplicate trigger: a second execution of a night starts while the first holds it (its job row RUNNING).
  // The first completes; the second never bills (it finds a live holder, then the night DONE) and ends quietly.
  const twice = DUPLICATE_NIGHT;
  const holder = start(twice);
  const duplicate = start(twice);
  steps.push(holder, waitForRow(twice, 'RUNNING', 5), duplicate, succeeded(holder, 20), endedIn(holder, 'Completed'));
  steps.push(succeeded(duplicate, 20), endedIn(duplicate, /^(?!Completed$)/), expectRow(twice, { state: { S: 'DONE' }, fence: { N: '1' } }));

  steps.reduce((previous, next) => previous.next(next));
  return { app, stack, assertionStack, integ };
}

if (require.main === module) fencepostInteg().app.synth();
