/**
 * Integration test on a real account (integ-runner, `npm run integ`): deploy the Fencepost stack, bill one night
 * through the real billing state machine, and check the stores; then bill the same night again and check that the
 * second execution ends AlreadyDone. CI never deploys it: test/synth.test.ts only synthesizes this app and checks its assertions.
 *
 * The night is a fixed date on fresh tables: the integ stack's tables are destroyed with it (the real stack retains
 * them); its buckets are retained, as in the real stack, because CloudFormation cannot delete a non-empty bucket.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { App, Aspects, Duration, type IAspect, RemovalPolicy, Stack } from 'aws-cdk-lib';
import { CfnTable } from 'aws-cdk-lib/aws-dynamodb';
import { ExpectedResult, IntegTest, Match } from '@aws-cdk/integ-tests-alpha';
import type { IConstruct } from 'constructs';
import { Keys } from '../apps/billing/keys';
import { readStackConfig } from '../apps/billing/config';
import { FencepostStack } from '../apps/billing/stack';

/** The night billed; any date works on fresh tables. */
export const INTEG_NIGHT = '2026-01-15';

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
  const stack = new FencepostStack(app, 'FencepostInteg', { config: readStackConfig(app) });
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
  const input = JSON.stringify({ jobDate: INTEG_NIGHT });

  // 1. A whole night: 50,000 invoices in 10 chunks of 5,000 (cdk.json defaults), a few minutes at most.
  const first = a.awsApiCall('StepFunctions', 'startExecution', { stateMachineArn: machine, input });
  const firstDone = a
    .awsApiCall('StepFunctions', 'describeExecution', { executionArn: first.getAttString('executionArn') })
    .expect(ExpectedResult.objectLike({ status: 'SUCCEEDED' }))
    .waitForAssertions({ totalTimeout: Duration.minutes(20), interval: Duration.seconds(20), backoffRate: 1 });
  // The last state entered tells how it ended: Succeed state Completed.
  const firstEnd = a
    .awsApiCall('StepFunctions', 'getExecutionHistory', { executionArn: first.getAttString('executionArn'), reverseOrder: true, maxResults: 3 })
    .expect(
      ExpectedResult.objectLike({
        events: Match.arrayWith([Match.objectLike({ type: 'SucceedStateExited', stateExitedEventDetails: Match.objectLike({ name: 'Completed' }) })]),
      }),
    );

  // 2. The stores: the job row DONE with all 10 chunks; the manifest DONE, naming 10 chunks of 5,000 invoices each.
  const jobRow = a
    .awsApiCall('DynamoDB', 'getItem', {
      TableName: stack.billing.fenceTable.table.tableName,
      Key: { pk: { S: Keys.job(INTEG_NIGHT) } },
      ConsistentRead: true,
    })
    .expect(
      ExpectedResult.objectLike({
        Item: Match.objectLike({ state: { S: 'DONE' }, chunk_count: { N: '10' } }),
      }),
    );
  const chunk = Match.objectLike({ records: 5_000 }); // a manifest entry counts the records (invoices) its object holds
  const tenChunks = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [String(i).padStart(2, '0'), chunk]));
  const manifest = a.awsApiCall('S3', 'getObject', { Bucket: stack.billing.manifests.bucket.bucketName, Key: Keys.manifest(INTEG_NIGHT) }).expect(
    ExpectedResult.objectLike({
      // Exactly ten chunk entries ("00".."09"), each of 5,000 invoices: 50,000 in all.
      Body: Match.serializedJson(Match.objectLike({ state: 'DONE', chunks: Match.objectLike(tenChunks) })),
    }),
  );
  const manifestCount = a
    .awsApiCall('S3', 'getObject', { Bucket: stack.billing.manifests.bucket.bucketName, Key: Keys.manifest(INTEG_NIGHT) })
    .expect(ExpectedResult.objectLike({ Body: Match.stringLikeRegexp(`^(?![\\s\\S]*"10": \\{)[\\s\\S]*"09": \\{`) })); // "09" named, no "10"

  // 3. The same night again: the job row is DONE, so the run ends AlreadyDone without claiming.
  const second = a.awsApiCall('StepFunctions', 'startExecution', { stateMachineArn: machine, input });
  const secondDone = a
    .awsApiCall('StepFunctions', 'describeExecution', { executionArn: second.getAttString('executionArn') })
    .expect(ExpectedResult.objectLike({ status: 'SUCCEEDED' }))
    .waitForAssertions({ totalTimeout: Duration.minutes(5), interval: Duration.seconds(10), backoffRate: 1 });
  const secondEnd = a
    .awsApiCall('StepFunctions', 'getExecutionHistory', { executionArn: second.getAttString('executionArn'), reverseOrder: true, maxResults: 3 })
    .expect(
      ExpectedResult.objectLike({
        events: Match.arrayWith([
          Match.objectLike({ type: 'SucceedStateExited', stateExitedEventDetails: Match.objectLike({ name: 'AlreadyDone' }) }),
        ]),
      }),
    );

  first.next(firstDone).next(firstEnd).next(jobRow).next(manifest).next(manifestCount).next(second).next(secondDone).next(secondEnd);
  return { app, stack, assertionStack, integ };
}

if (require.main === module) fencepostInteg().app.synth();
