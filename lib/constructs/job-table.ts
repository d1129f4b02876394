/**
 * The job table: one row per run (`<job>#<date>`: fence, state, owner_token) and beside it one chunk fence
 * item per chunk (lib/core/schema.ts JOB_TABLE; docs/DESIGN.md "Chunk fences").
 *
 * Its sparse index holds only claimed rows: claim_shard and claimed_since are written in the same
 * UpdateItem that raises the fence and removed in the one that completes or re-queues, so the orphan sweeper reads
 * exactly the claimed rows and never scans. Projection ALL: the sweeper's conditional re-queue needs state,
 * owner_token and fence, and there is one row a run. Never TTL'd: a deleted row forgets the fence that refuses a
 * late holder.
 */
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { JOB_TABLE } from '../core/schema';
import { refuseTimeToLive, schemaTable } from './schema-table';

/** What a TTL delete of a job row or chunk fence item would break, for the synth error. */
export const JOB_TABLE_TTL = "a deleted job row or chunk fence item forgets the fence that refuses a late holder's writes";

/** The job table with its sparse index of claimed rows. */
export class JobTable extends Construct {
  /** The table. Grant by need: the workflow's functions get the single actions they use on it. */
  readonly table: dynamodb.Table;
  /** The sparse index's name: the only way the sweeper reads the table. */
  readonly claimedIndexName: string;
  /** The sparse index's ARN, for a Query grant on the index alone. */
  readonly claimedIndexArn: string;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.table = schemaTable(this, 'Table', JOB_TABLE);
    refuseTimeToLive(this.table, JOB_TABLE_TTL);
    this.claimedIndexName = JOB_TABLE.sparseIndex!.name;
    this.claimedIndexArn = claimedIndexArn(this.table);
  }
}

/** The ARN of a job table's sparse index of claimed rows, for a Query grant on the index alone (never the table). */
export function claimedIndexArn(table: dynamodb.ITable): string {
  return `${table.tableArn}/index/${JOB_TABLE.sparseIndex!.name}`;
}

/**
 * A grant of `actions` on `resources` for the items (or the index partition) whose partition key matches one of `keys`
 * (StringLike patterns): the lock and job tables may hold other jobs' keys, which this grant does not reach.
 *
 * DynamoDB gives IAM each request's partition key value as `dynamodb:LeadingKeys` ("the first key attribute of a
 * table"; a Query on an index gives the index's), to be tested with `ForAllValues`
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/specifying-conditions.html); a transaction's items
 * are authorized one by one as the single-item actions they stand for
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html). `ForAllValues` is
 * also true of a request that carries no key at all
 * (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html),
 * so the Null test requires one: a keyless request (a Scan, a batch) is never allowed by this grant.
 *
 * @param actions - item-level actions, each of which carries `dynamodb:LeadingKeys`
 * @param resources - table or index ARNs
 * @param keys - the partition key patterns allowed
 * @returns the statement
 */
export function keysGrant(actions: string[], resources: string[], keys: string[]): iam.PolicyStatement {
  return new iam.PolicyStatement({
    actions,
    resources,
    conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': keys }, Null: { 'dynamodb:LeadingKeys': 'false' } },
  });
}
