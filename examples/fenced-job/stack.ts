// Your own fenced job as a CDK stack: one FencedJob (lock and job tables, the workflow that claims the lease and
// raises the fences, the nightly schedule, the orphan sweeper, the alarms) around your chunk function.
import path from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { FencedChunkFunction, FencedJob } from 'fencepost/constructs';

export function reportStack(app: App): Stack {
  const stack = new Stack(app, 'NightlyReport');
  const lines = new dynamodb.Table(stack, 'Lines', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
  // Bundled as the library's own functions are (your AWS SDK inside, error class names kept for the workflow's Catch).
  const chunkFunction = new FencedChunkFunction(stack, 'ReportChunk', {
    entry: path.join(__dirname, 'chunk.ts'),
    environment: { REPORT_TABLE: lines.tableName },
  });
  lines.grant(chunkFunction, 'dynamodb:PutItem'); // your table's grants are yours; the fence's are FencedJob's
  new FencedJob(stack, 'Report', {
    name: 'nightly-report',
    chunkFunction,
    chunks: 4,
    scheduleExpression: 'cron(0 2 * * ? *)',
  });
  return stack;
}

if (require.main === module) {
  const app = new App();
  reportStack(app);
  app.synth();
}
