/**
 * The lock (lease/epoch) table: one item per lock, holding holder, lease_ms, rvn and epoch (lib/core/schema.ts
 * LOCK_TABLE). The epoch is the fencing token, so the table is never TTL'd and its items are never
 * deleted: a deleted lock item would start its epoch again at 1. RETAIN, point-in-time recovery, deletion
 * protection, one Region (lib/constructs/schema-table.ts says why each).
 */
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { LOCK_TABLE } from '../core/schema';
import { refuseTimeToLive, schemaTable } from './schema-table';

/** What a TTL delete of a lock item would break, for the synth error. */
export const LOCK_TABLE_TTL = 'a deleted lock item starts its epoch, the fencing token, again at 1';

/** The lock table; it takes no settings: every one of them is a safety decision (lib/constructs/schema-table.ts). */
export class LockTable extends Construct {
  /** The table. Grant by need: the workflow's functions get the single actions they use on it. */
  readonly table: dynamodb.Table;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.table = schemaTable(this, 'Table', LOCK_TABLE);
    refuseTimeToLive(this.table, LOCK_TABLE_TTL);
  }
}
