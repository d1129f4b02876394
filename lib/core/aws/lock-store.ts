/**
 * The lock store on DynamoDB (lib/core/store/lock.ts): the ONLY place with the lock table's condition expressions, update
 * expressions and `.send(` calls. A failed condition comes back as `{ ok: false, current }` from ALL_OLD
 * (ReturnValuesOnConditionCheckFailure), and a transaction cancelled by a condition as `{ ok: false }`; everything
 * else is thrown as the SDK threw it, so retryTransient decides by reason (lib/core/conditions.ts isTransient).
 */
import { GetCommand, ScanCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { cancellationReasons, classifyCancellation } from '../conditions';
import { conditionalUpdate } from './conditions';
import { Attr, LOCK_TABLE } from '../schema';
import { checkTableOnce, explained } from './table-check';
import {
  EPOCH_FLOOR_KEY,
  type BumpPage,
  ClaimOn,
  ClaimWrite,
  Holding,
  JoinRequest,
  LockItem,
  LockStore,
  RemoveOn,
  RoleItem,
  WriteOutcome,
} from '../store/lock';

import type { DocumentClient } from './document-client';

export type { DocumentClient };

const BUMP_RUNS = 'bump_runs';

// Named condition clauses, each with its reason.
/** Free: nobody holds it (never claimed, or released by clearing holder). */
const isFree = `attribute_not_exists(${Attr.holder})`;
/** Unchanged: nobody claimed, renewed or released since we looked a full lease ago, so the holder is gone. */
const rvnUnchanged = `${Attr.rvn} = :seen`;
/** The flip: nobody else flipped or claimed since we looked. The old holder's renewals change only the rvn. */
const epochUnchanged = `${Attr.epoch} = :seen`;
/** Never claimed: the flip of a key nobody has held, and the first claim of any key (it starts above the floor). */
const neverClaimed = `attribute_not_exists(${Attr.epoch})`;
/** Claimed before: the epoch goes +1. A free claim that fails on this alone is the key's first (made above the floor). */
const claimedBefore = `attribute_exists(${Attr.epoch})`;
/** The role's first sequence is above the epoch floor (a restored table may lack the role item). */
const aboveFloor = `attribute_not_exists(${Attr.epoch}) OR ${Attr.epoch} < :seq`;
/** Still ours: the holder and the epoch we were granted; a new claim changes both (or at least the epoch). */
const stillOurs = `${Attr.holder} = :me AND ${Attr.epoch} = :e`;
/** The counter is what we read: nobody else took this number. */
const counterUnchanged = `${Attr.epoch} = :last`;
/** A candidate item exists from the moment its number is handed out, and only once. */
const absent = `attribute_not_exists(${Attr.pk})`;
/** Not yet bumped by this run: a repeat or a resumed run never bumps twice. */
const notBumpedBy = `attribute_exists(${Attr.pk}) AND NOT contains(${BUMP_RUNS}, :run)`;
/** The floor, not yet raised by this run: its first raise creates it. */
const floorNotRaisedBy = `attribute_not_exists(${Attr.pk}) OR NOT contains(${BUMP_RUNS}, :run)`;
/** The bump's update: the epoch + by (from 0 on the floor's first raise), and the run id recorded. */
const bumpUpdate = `SET ${Attr.epoch} = if_not_exists(${Attr.epoch}, :zero) + :by ADD ${BUMP_RUNS} :runs`;

/** The claim's update: holder, declared lease, a new rvn, and the epoch +1 (from the floor on a new item). */
const claimUpdate = `SET ${Attr.holder} = :me, ${Attr.leaseMs} = :lease, ${Attr.rvn} = :rvn, ${Attr.renewedAt} = :wall, ${Attr.epoch} = if_not_exists(${Attr.epoch}, :floor) + :one`;

/** The condition of a claim of an item claimed before (the flip of a key never claimed has none: it creates). */
function claimCondition(on: ClaimOn): { readonly expression: string; readonly values: Record<string, unknown> } {
  if ('free' in on) return { expression: `${claimedBefore} AND ${isFree}`, values: {} };
  if ('rvn' in on) return { expression: rvnUnchanged, values: { ':seen': on.rvn } };
  return on.epoch === undefined ? { expression: neverClaimed, values: {} } : { expression: epochUnchanged, values: { ':seen': on.epoch } };
}

/** A transaction cancelled because a condition failed is an outcome; any other failure is thrown as it came. */
function conditionFailed(err: unknown): boolean {
  const reasons = cancellationReasons(err);
  return reasons !== undefined && classifyCancellation(reasons).kind === 'condition';
}

/**
 * The lock store on a DynamoDB table (LockStore). Guarantees what DynamoDB guarantees of one item: each write lands
 * whole or not at all, on its condition; reads are strongly consistent. Does not retry: transient errors are thrown.
 */
export class DynamoLockStore implements LockStore {
  constructor(
    private readonly ddb: DocumentClient,
    /** The lock table (partition key `pk`, never TTL'd). */
    private readonly table: string,
    /** Items per page of the restore bump's scan (DynamoDB's Limit), so a test runs the paging path. @defaultValue DynamoDB's page of 1 MB */
    private readonly scanLimit?: number,
  ) {}

  async read(key: string): Promise<LockItem | undefined> {
    try {
      const out = await this.ddb.send(new GetCommand({ TableName: this.table, Key: { [Attr.pk]: key }, ConsistentRead: true }));
      return out.Item as LockItem | undefined;
    } catch (err) {
      // A claim sights the lock first: a table with the wrong key is refused here, as the claim's check would.
      throw await explained(this.ddb, this.table, LOCK_TABLE, err);
    }
  }

  async claim(key: string, on: ClaimOn, write: ClaimWrite): Promise<WriteOutcome> {
    // Before the process's first claim: a lock table with a TTL (or the wrong key) is refused before any token is handed out.
    await checkTableOnce(this.ddb, this.table, LOCK_TABLE);
    const creates = 'epoch' in on && on.epoch === undefined;
    if (!creates) {
      const out = await this.claimWrite(key, claimCondition(on), write, 0);
      // A free claim that found no item (a sighting older than a deletion): the key's first claim, above the floor.
      if (out.ok || !('free' in on) || out.current !== undefined) return out;
    }
    // The key's first claim (once per key: the claimant saw no item): read the floor only now, and start above it.
    return this.claimWrite(key, { expression: neverClaimed, values: {} }, write, await this.readFloor());
  }

  private async claimWrite(
    key: string,
    condition: { readonly expression: string; readonly values: Record<string, unknown> },
    write: ClaimWrite,
    floor: number,
  ): Promise<WriteOutcome> {
    const out = await conditionalUpdate(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: key },
      ConditionExpression: condition.expression,
      UpdateExpression: claimUpdate,
      ExpressionAttributeValues: {
        ...condition.values,
        ':me': write.holder,
        ':lease': write.leaseMs,
        ':rvn': write.rvn,
        ':wall': write.wallIso,
        ':floor': floor,
        ':one': 1,
      },
      ReturnValues: 'ALL_NEW',
    });
    return out.ok ? { ok: true, item: out.attributes as unknown as LockItem } : { ok: false, current: out.current as LockItem | undefined };
  }

  renew(key: string, holding: Holding, rvn: string, wallIso: string): Promise<WriteOutcome<undefined>> {
    return this.writeIfStillOurs(key, holding, `SET ${Attr.rvn} = :rvn, ${Attr.renewedAt} = :wall`, rvn, wallIso);
  }

  release(key: string, holding: Holding, rvn: string, wallIso: string): Promise<WriteOutcome<undefined>> {
    return this.writeIfStillOurs(key, holding, `REMOVE ${Attr.holder} SET ${Attr.rvn} = :rvn, ${Attr.renewedAt} = :wall`, rvn, wallIso);
  }

  /** A write to the lock item that lands only while the lease is still ours (same holder, same epoch), with a new rvn. */
  private async writeIfStillOurs(key: string, holding: Holding, update: string, rvn: string, wallIso: string): Promise<WriteOutcome<undefined>> {
    const out = await conditionalUpdate(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: key },
      ConditionExpression: stillOurs,
      UpdateExpression: update,
      ExpressionAttributeValues: { ':me': holding.holder, ':e': holding.epoch, ':rvn': rvn, ':wall': wallIso },
    });
    return out.ok ? { ok: true, item: undefined } : { ok: false, current: out.current as LockItem | undefined };
  }

  async readRole(roleKey: string): Promise<RoleItem | undefined> {
    const out = await this.ddb.send(new GetCommand({ TableName: this.table, Key: { [Attr.pk]: roleKey }, ConsistentRead: true }));
    if (out.Item === undefined) return undefined;
    const members = out.Item[Attr.members] as Set<number> | undefined;
    const epoch = out.Item[Attr.epoch] as number | undefined;
    return { ...(epoch === undefined ? {} : { epoch: Number(epoch) }), members: [...(members ?? [])].map(Number) };
  }

  async join(r: JoinRequest): Promise<{ readonly ok: boolean }> {
    await checkTableOnce(this.ddb, this.table, LOCK_TABLE); // a join hands out a sequence number, as a claim an epoch
    try {
      await this.ddb.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              Update: {
                TableName: this.table,
                Key: { [Attr.pk]: r.roleKey },
                ConditionExpression: r.last === undefined ? neverClaimed : counterUnchanged,
                UpdateExpression: `SET ${Attr.epoch} = :seq ADD ${Attr.members} :me`,
                ExpressionAttributeValues: { ':seq': r.seq, ':me': new Set([r.seq]), ...(r.last === undefined ? {} : { ':last': r.last }) },
              },
            },
            {
              Put: {
                TableName: this.table,
                Item: {
                  [Attr.pk]: r.candidateKey,
                  [Attr.holder]: r.candidate.holder,
                  [Attr.epoch]: r.seq,
                  [Attr.leaseMs]: r.candidate.leaseMs,
                  [Attr.rvn]: r.candidate.rvn,
                  [Attr.renewedAt]: r.candidate.wallIso,
                },
                ConditionExpression: absent,
              },
            },
            // The role's first join: its first sequence must be above the floor, checked in the same transaction.
            ...(r.last === undefined
              ? [
                  {
                    ConditionCheck: {
                      TableName: this.table,
                      Key: { [Attr.pk]: EPOCH_FLOOR_KEY },
                      ConditionExpression: aboveFloor,
                      ExpressionAttributeValues: { ':seq': r.seq },
                    },
                  },
                ]
              : []),
          ],
        }),
      );
      return { ok: true };
    } catch (err) {
      if (conditionFailed(err)) return { ok: false };
      throw err;
    }
  }

  async removeCandidate(roleKey: string, candidateKey: string, seq: number, on: RemoveOn): Promise<{ readonly ok: boolean }> {
    // A watcher removes a silent candidate only if its rvn is still the one watched; a candidate resigns only while
    // its item is still ours.
    const [condition, values] =
      'rvn' in on ? [rvnUnchanged, { ':seen': on.rvn }] : [stillOurs, { ':me': on.holder, ':e': on.epoch } as Record<string, unknown>];
    try {
      await this.ddb.send(
        new TransactWriteCommand({
          TransactItems: [
            {
              Delete: { TableName: this.table, Key: { [Attr.pk]: candidateKey }, ConditionExpression: condition, ExpressionAttributeValues: values },
            },
            {
              Update: {
                TableName: this.table,
                Key: { [Attr.pk]: roleKey },
                UpdateExpression: `DELETE ${Attr.members} :seq`,
                ExpressionAttributeValues: { ':seq': new Set([seq]) },
              },
            },
          ],
        }),
      );
      return { ok: true };
    } catch (err) {
      if (conditionFailed(err)) return { ok: false };
      throw err;
    }
  }

  async scanPage(start?: string): Promise<BumpPage> {
    const page = await this.ddb.send(
      new ScanCommand({
        TableName: this.table,
        ConsistentRead: true,
        Limit: this.scanLimit,
        ExclusiveStartKey: start === undefined ? undefined : { [Attr.pk]: start },
      }),
    );
    const items = (page.Items ?? []).map((item) => ({
      key: String(item[Attr.pk]),
      epoch: Number(item[Attr.epoch] ?? 0),
      bumpRuns: [...((item[BUMP_RUNS] as Set<string> | undefined) ?? [])],
    }));
    const next = page.LastEvaluatedKey?.[Attr.pk];
    return next === undefined ? { items } : { items, next: String(next) };
  }

  async bump(key: string, by: number, runId: string): Promise<{ readonly ok: true; readonly from: number } | { readonly ok: false }> {
    const out = await conditionalUpdate(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: key },
      ConditionExpression: notBumpedBy,
      UpdateExpression: bumpUpdate,
      ExpressionAttributeValues: { ':run': runId, ':runs': new Set([runId]), ':by': by, ':zero': 0 },
      ReturnValues: 'ALL_OLD',
    });
    return out.ok ? { ok: true, from: Number(out.attributes?.[Attr.epoch] ?? 0) } : { ok: false };
  }

  async readFloor(): Promise<number> {
    return Number((await this.read(EPOCH_FLOOR_KEY))?.epoch ?? 0);
  }

  async raiseFloor(by: number, runId: string): Promise<{ readonly ok: true; readonly from: number } | { readonly ok: false }> {
    const out = await conditionalUpdate(this.ddb, {
      TableName: this.table,
      Key: { [Attr.pk]: EPOCH_FLOOR_KEY },
      ConditionExpression: floorNotRaisedBy,
      UpdateExpression: bumpUpdate,
      ExpressionAttributeValues: { ':run': runId, ':runs': new Set([runId]), ':by': by, ':zero': 0 },
      ReturnValues: 'ALL_OLD',
    });
    return out.ok ? { ok: true, from: Number(out.attributes?.[Attr.epoch] ?? 0) } : { ok: false };
  }
}
