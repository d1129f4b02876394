/**
 * The night world on DynamoDB Local: the same schedules, with lib/core/aws's lock and job stores in place of the
 * in-memory ones, so every condition expression that ships runs under the explorer's faults. The clock stays
 * virtual: each store call is tracked by it (VirtualClock.track), so the scheduler takes no step and moves no time
 * while a request is on the wire, and the store sees the calls one at a time, in the order the seed picked.
 *
 * Each schedule gets tables of its own (created before, deleted after). What differs from the memory stores: the
 * sparse index is read consistently at once (DynamoDB Local's index does not lag, AWS's does: the memory tier draws
 * the lag). With no lag, a schedule's trace is the same on both stores, line for line
 * (test/store/explore-dynamo.test.ts); both page the sparse index a row at a time.
 *
 * The broken variants that reach behind the in-memory stores (epoch-deleted, requeue-before-start,
 * claim-on-wall-clock) are not run here. `fence-lt` is broken where it ships: the fence comparison is rewritten in
 * the requests sent to DynamoDB (`fence < :t`), so DynamoDB Local itself refuses the equal token.
 */
import { DeleteTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { VirtualClock } from '../../lib/core/clock';
import { DynamoJobStore, FENCE_CLAUSE } from '../../lib/core/aws/job-store';
import { DynamoLockStore } from '../../lib/core/aws/lock-store';
import { createDescribedTables } from '../../lib/core/aws/provision';
import { scanAll } from '../../lib/core/aws/scan';
import { Attr, JOB_TABLE, LOCK_TABLE, type TableDescription } from '../../lib/core/schema';
import { through } from '../../lib/testing/process';
import { MUTATIONS, type Mutation } from './mutations';
import { nightWorld, type NightPlaced, type NightStores } from './night-world';
import { runWorld, type ScheduleResult } from './world';

/** The broken variants that run on any store (the others reach behind the in-memory stores' backs). */
export const DYNAMO_MUTATIONS: readonly Mutation[] = MUTATIONS.filter(
  (m) => m !== 'epoch-deleted' && m !== 'requeue-before-start' && m !== 'claim-on-wall-clock',
);

/** The night's items: a table keyed as the job table is. */
const ITEMS_TABLE: TableDescription = { suffix: 'items', partitionKey: { name: Attr.pk, type: 'S' }, purpose: "the explored night's items" };

/** `store` with every call tracked by `clock`: virtual time stands still while the request is on the wire. */
function onClock<T extends object>(store: T, clock: VirtualClock): T {
  return through(store, (_method, _args, apply) => clock.track(apply()));
}

/** Every item of `table`, read consistently, page by page. */
async function dump(ddb: DynamoDBDocumentClient, table: string): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  for await (const item of scanAll(ddb, { TableName: table })) items.push(item);
  return items;
}

/** The fence comparison broken on the wire: every request's `fence <= :t` sent as `fence < :t`. */
const FENCE_LT = 'explore-fence-lt';
type Build = (args: { readonly request: { body?: unknown; headers: Record<string, string> } }) => Promise<unknown>;
const fenceLt =
  (next: Build): Build =>
  async (args) => {
    const { request } = args;
    // The JSON body is bytes by the build step.
    const body = request.body instanceof Uint8Array ? new TextDecoder().decode(request.body) : request.body;
    if (typeof body === 'string' && body.includes(FENCE_CLAUSE)) {
      request.body = Buffer.from(body.split(FENCE_CLAUSE).join(FENCE_CLAUSE.replace('<=', '<')), 'utf8');
      request.headers['content-length'] = String((request.body as Buffer).length);
    }
    return next(args);
  };

/** The clients a schedule on DynamoDB Local needs: the low-level one creates and deletes its tables. */
export interface DynamoClients {
  readonly raw: DynamoDBClient;
  readonly ddb: DynamoDBDocumentClient;
}

/**
 * Run one schedule of the night world on DynamoDB Local, on tables of its own under `prefix` (deleted after, unless
 * `keep`), and check it as the memory tier checks it.
 */
export async function runNightOnDynamo(
  clients: DynamoClients,
  prefix: string,
  seed: number,
  mutation?: Mutation,
  options: { readonly keep?: boolean; readonly placed?: NightPlaced } = {},
): Promise<ScheduleResult> {
  const tables = [LOCK_TABLE, JOB_TABLE, ITEMS_TABLE];
  await createDescribedTables(clients.raw, prefix, tables);
  const world = nightWorld((clock) => {
    // A page of one row, as the memory tier's: the sweeper's query runs its paging path.
    const jobs = new DynamoJobStore(clients.ddb, prefix + JOB_TABLE.suffix, 1);
    const stores: NightStores = {
      locks: onClock(new DynamoLockStore(clients.ddb, prefix + LOCK_TABLE.suffix), clock),
      jobs: onClock(Object.assign(jobs, { dump: (table: string) => dump(clients.ddb, table) }), clock),
      items: prefix + ITEMS_TABLE.suffix,
      indexLagMs: 0,
    };
    return stores;
  });
  // The document client sends through the low-level client's middleware.
  const stack = clients.raw.middlewareStack as unknown as { add(m: typeof fenceLt, o: { step: 'build'; priority: 'low'; name: string }): void };
  if (mutation === 'fence-lt') stack.add(fenceLt, { step: 'build', priority: 'low', name: FENCE_LT });
  try {
    return await runWorld(world, seed, mutation === 'fence-lt' ? undefined : mutation, options.placed);
  } finally {
    clients.raw.middlewareStack.remove(FENCE_LT);
    if (!options.keep) for (const t of tables) await clients.raw.send(new DeleteTableCommand({ TableName: prefix + t.suffix }));
  }
}
