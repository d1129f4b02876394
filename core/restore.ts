/**
 * The restore bump (docs/DESIGN.md "The restore bump"; reference Part 8 "Restores", Part 5).
 *
 * The rule: a token is never handed out twice, and a claim hands out the lock item's epoch + 1. A point-in-time
 * restore of the lock table returns every epoch to its old value, and the next claim would then hand out a token the
 * stores have already seen (the fences would refuse its holder: safe, but the night is stuck). Before a restored table
 * is used, every epoch jumps by a large amount (DEFAULT_BUMP), so every future token is above every old one.
 *
 * Each item's bump is one conditional write that records the run id in the item (`bump_runs`), so a run can be
 * repeated or resumed after a crash without bumping any item twice. Nothing is deleted; holders are left as they
 * are (a restored holder's renewals now fail on the epoch, and a claimant waits out its lease as usual).
 */
import { ScanCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { isConditionalCheckFailed } from './conditions';
import { Attr } from './schema';

/** The default bump: far above any token the nights since a backup can have handed out. */
export const DEFAULT_BUMP = 1_000_000;
const BUMP_RUNS = 'bump_runs';

/** One lock item's epoch, before and after the bump. */
export interface BumpChange {
  readonly key: string;
  readonly from: number;
  readonly to: number;
}

/** What a bump run did: every item scanned, the epochs it moved, the items an earlier try of the same run had bumped. */
export interface BumpReport {
  readonly runId: string;
  readonly by: number;
  readonly dryRun: boolean;
  readonly scanned: number;
  readonly changed: BumpChange[];
  /** Already bumped by this run id (a repeated or resumed run). */
  readonly alreadyBumped: string[];
}

/**
 * Bump every lock item's epoch by `by`, once per run id, so no token handed out after a restore repeats one the stores
 * have seen. Guarantees: each item is bumped at most once per run id, however often the run is repeated or resumed.
 * Does not guarantee anything about holders that keep writing with a restored token until the bump: run it before
 * the restored table is used.
 */
export async function bumpEpochs(
  deps: { ddb: DynamoDBDocumentClient; locks: string },
  opts: { by: number; runId: string; dryRun: boolean },
): Promise<BumpReport> {
  const report: { -readonly [K in keyof BumpReport]: BumpReport[K] } = {
    runId: opts.runId,
    by: opts.by,
    dryRun: opts.dryRun,
    scanned: 0,
    changed: [],
    alreadyBumped: [],
  };
  let start: Record<string, unknown> | undefined;
  do {
    const page = await deps.ddb.send(new ScanCommand({ TableName: deps.locks, ConsistentRead: true, ExclusiveStartKey: start }));
    for (const item of page.Items ?? []) {
      report.scanned++;
      const key = String(item[Attr.pk]);
      const from = Number(item[Attr.epoch] ?? 0);
      const runs = item[BUMP_RUNS] as Set<string> | undefined;
      if (runs?.has(opts.runId)) {
        report.alreadyBumped.push(key);
        continue;
      }
      if (opts.dryRun) {
        report.changed.push({ key, from, to: from + opts.by });
        continue;
      }
      try {
        const out = await deps.ddb.send(
          new UpdateCommand({
            TableName: deps.locks,
            Key: { [Attr.pk]: key },
            // Not yet bumped by this run: a repeat or a resumed run never bumps twice.
            ConditionExpression: `attribute_exists(${Attr.pk}) AND NOT contains(${BUMP_RUNS}, :run)`,
            UpdateExpression: `SET ${Attr.epoch} = if_not_exists(${Attr.epoch}, :zero) + :by ADD ${BUMP_RUNS} :runs`,
            ExpressionAttributeValues: { ':run': opts.runId, ':runs': new Set([opts.runId]), ':by': opts.by, ':zero': 0 },
            ReturnValues: 'ALL_OLD',
          }),
        );
        const old = Number(out.Attributes?.[Attr.epoch] ?? 0);
        report.changed.push({ key, from: old, to: old + opts.by });
      } catch (err) {
        if (!isConditionalCheckFailed(err)) throw err;
        report.alreadyBumped.push(key);
      }
    }
    start = page.LastEvaluatedKey;
  } while (start);
  return report;
}
