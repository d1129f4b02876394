/**
 * What a process of `fencepost/election` needs on the tables, and nothing more: a candidate of one role (its queue and
 * its candidates' items in the lock table, its ledger in the ledger's table), or a writer of one role's single-writer
 * handover. Each grant is on the role's own keys (`dynamodb:LeadingKeys`, as FencedJob's are on its job's keys), so a
 * role's candidates cannot touch another role's items or a job's lease in the same table.
 */
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import { ConfigError } from '../core/errors';
import { EPOCH_FLOOR_KEY } from '../core/store/lock';
import { candidateKey, entryKey, ledgerKey, nameProblems, roleKey, writerKey, writerLedgerKey } from '../core/election-keys';
import { keysGrant } from './job-table';

/** Where a role's processes queue and write. */
export interface ElectionGrantProps {
  /** The lock table the role's candidates (or writers) hold their leases in. */
  readonly lockTable: dynamodb.ITable;
  /** The role's name, as the processes give it to `Election` or `handover`. */
  readonly role: string;
  /**
   * The table of the role's ledger, when its leaders (or writers) append to one: the job table (a FencedJob's
   * `jobTable`), or one of yours with the same string key `pk`. @defaultValue no ledger grant
   */
  readonly jobTable?: dynamodb.ITable;
  /** The ledger's fence item key. @defaultValue `ledgerKey(role)` for a campaign, `writerLedgerKey(role)` for a handover */
  readonly ledgerKey?: string;
}

/** The table check every process makes once before its first join or claim: DescribeTable, DescribeTimeToLive (no key). */
const DESCRIBE = ['dynamodb:DescribeTable', 'dynamodb:DescribeTimeToLive'];

/**
 * Grant `grantee` what a candidate of `props.role` does (`Election.run`, `campaign`, `resign`, `observe`, `watch`): on
 * the lock table, read and write the role item and its candidate items (the join's transaction puts a candidate
 * item and updates the role item; a renewal updates a candidate item; a resign or a removal deletes one and updates
 * the role item), read the epoch floor and check it in the role's first join, and describe the table; on the ledger's
 * table, read its fence item and append entries (an update of the fence item and a put of the entry, in one
 * transaction). `EpochFence.entries`, a scan for audits, is not granted.
 */
export function grantCampaign(grantee: iam.IGrantable, props: ElectionGrantProps): void {
  const { lockTable, role } = checked(props);
  const add = (s: iam.PolicyStatement) => grantee.grantPrincipal.addToPrincipalPolicy(s);
  const lock = [lockTable.tableArn];
  add(keysGrant(['dynamodb:GetItem', 'dynamodb:UpdateItem'], lock, [roleKey(role)]));
  add(
    keysGrant(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'], lock, [
      candidateKey(role, 0).replace(/\d+$/, '*'),
    ]),
  );
  add(keysGrant(['dynamodb:GetItem', 'dynamodb:ConditionCheckItem'], lock, [EPOCH_FLOOR_KEY]));
  add(new iam.PolicyStatement({ actions: DESCRIBE, resources: lock }));
  grantLedger(grantee, props.jobTable, props.ledgerKey ?? ledgerKey(role), true);
}

/**
 * Grant `grantee` what a writer of `props.role`'s single-writer handover does (`handover`, `Writer.release`): on the
 * lock table, read and update the writer lease (the flip is a claim, renewals and the release are updates), read the
 * epoch floor (the lease's first flip starts above it), and describe the table; on the ledger's table, raise its fence
 * item (the bump, which returns the head the writer starts from) and append entries.
 */
export function grantHandover(grantee: iam.IGrantable, props: ElectionGrantProps): void {
  const { lockTable, role } = checked(props);
  const add = (s: iam.PolicyStatement) => grantee.grantPrincipal.addToPrincipalPolicy(s);
  const lock = [lockTable.tableArn];
  add(keysGrant(['dynamodb:GetItem', 'dynamodb:UpdateItem'], lock, [writerKey(role)]));
  add(keysGrant(['dynamodb:GetItem'], lock, [EPOCH_FLOOR_KEY]));
  add(new iam.PolicyStatement({ actions: DESCRIBE, resources: lock }));
  grantLedger(grantee, props.jobTable, props.ledgerKey ?? writerLedgerKey(role), false);
}

/**
 * The ledger's fence item (the append's update, the bump; a leader also reads the head it starts from, a writer gets
 * it from its bump) and its entries (the append's put).
 */
function grantLedger(grantee: iam.IGrantable, table: dynamodb.ITable | undefined, key: string, readsHead: boolean): void {
  if (table === undefined) return;
  const onFence = readsHead ? ['dynamodb:GetItem', 'dynamodb:UpdateItem'] : ['dynamodb:UpdateItem'];
  grantee.grantPrincipal.addToPrincipalPolicy(keysGrant(onFence, [table.tableArn], [key]));
  grantee.grantPrincipal.addToPrincipalPolicy(keysGrant(['dynamodb:PutItem'], [table.tableArn], [entryKey(key, 0).replace(/\d+$/, '*')]));
}

function checked(props: ElectionGrantProps): ElectionGrantProps {
  const problems = nameProblems('role', props.role);
  if (problems.length > 0) throw new ConfigError(problems);
  return props;
}
