// SKELETON, being replaced by the real workflow (observe → wait → claim → raise → chunks → complete → release).
import { Construct } from 'constructs';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { IBucket } from 'aws-cdk-lib/aws-s3';
import type { IFunction } from 'aws-cdk-lib/aws-lambda';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';

export interface WorkflowSettings {
  readonly leaseMs: number;
  readonly renewMs: number;
  readonly marginMs: number;
  readonly invoices: number;
  readonly chunkSize: number;
  readonly chunkConcurrency: number;
  readonly claimBudget: number;
}

export interface BillingWorkflowProps {
  readonly locks: ITable;
  readonly jobs: ITable;
  readonly invoices: ITable;
  readonly bucket: IBucket;
  readonly settings: WorkflowSettings;
}

export class BillingWorkflow extends Construct {
  readonly stateMachine: sfn.StateMachine;
  readonly functions: IFunction[] = [];

  constructor(scope: Construct, id: string, props: BillingWorkflowProps) {
    super(scope, id);
    void props;
    this.stateMachine = new sfn.StateMachine(this, 'StateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromChainable(new sfn.Pass(this, 'Placeholder')),
    });
  }
}
