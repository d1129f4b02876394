// Your own fenced job as a CDK stack: one FencedJob (lock and job tables, manifest bucket, the workflow that claims the
// lease and raises the fences, the nightly schedule, the orphan sweeper, the alarms) around your chunk function.
import path from 'node:path';
import { App, Duration, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { FencedJob, HANDLER_BUNDLING } from 'fencepost/constructs';

export function reportStack(app: App): Stack {
  const stack = new Stack(app, 'NightlyReport');
  const lines = new dynamodb.Table(stack, 'Lines', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
  const chunkFunction = new NodejsFunction(stack, 'ReportChunk', {
    entry: path.join(__dirname, 'chunk.ts'),
    runtime: lambda.Runtime.NODEJS_24_X,
    timeout: Duration.minutes(1),
    environment: { REPORT_TABLE: lines.tableName },
    // The library's bundling: your AWS SDK bundled (the versions you tested), error class names kept for the
    // workflow's Catch (FencedOutError, …), the source map read only when an error is logged.
    bundling: HANDLER_BUNDLING,
  });
  lines.grant(chunkFunction, 'dynamodb:PutItem'); // the fence's own grants are FencedJob's
  new FencedJob(stack, 'Report', { name: 'nightly-report', chunkFunction, chunks: 4, scheduleExpression: 'cron(0 2 * * ? *)' });
  return stack;
}

if (require.main === module) {
  const app = new App();
  reportStack(app);
  app.synth();
}
