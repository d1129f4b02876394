// Your own fenced job in the stack class `cdk init` wrote (lib/nightly-report-stack.ts): one FencedJob (lock and job
// tables, the workflow that claims the lease and raises the fences, the nightly schedule, the orphan sweeper, the
// alarms) around your chunk function, lib/chunk.ts beside it.
import path from 'node:path';
import * as cdk from 'aws-cdk-lib/core';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { FencedChunkFunction, FencedJob } from 'fencepost/constructs';

export class NightlyReportStack extends cdk.Stack {
  constructor(scope: Construct, id: string, props?: cdk.StackProps) {
    super(scope, id, props);
    const lines = new dynamodb.Table(this, 'Lines', { partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING } });
    // Bundled as the library's own functions are (your AWS SDK inside, error class names kept for the workflow's Catch).
    const chunkFunction = new FencedChunkFunction(this, 'ReportChunk', {
      entry: path.join(__dirname, 'chunk.ts'),
      environment: { REPORT_TABLE: lines.tableName },
    });
    lines.grant(chunkFunction, 'dynamodb:PutItem'); // your table's grants are yours; the fence's are FencedJob's
    new FencedJob(this, 'Report', {
      name: 'nightly-report',
      chunkFunction,
      chunks: 4,
      scheduleExpression: 'cron(0 2 * * ? *)',
    });
  }
}
