/**
 * The explorer's DynamoDB Local tier, its two loops written once (test/store/explore-dynamo*.test.ts): a world's
 * schedules run on the AWS stores and on the memory stores set as the AWS stores behave, each pair compared line for
 * line. A difference is the memory stores parting from the AWS stores' behaviour.
 */
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { localClients, type Clients } from '../../lib/core/aws/clients';
import type { Placed } from '../../lib/testing/scheduler';
import { runWorld, type ScheduleResult, type World, type WorldState } from '../../lib/testing/world';
import { endpoints } from './stack';

/** One schedule on both stores: the same seed, broken variant and placed faults. */
export type OnBoth<M extends string, P> = (seed: number, mutation?: M, placed?: P) => Promise<{ dynamo: ScheduleResult; memory: ScheduleResult }>;

/** A world's schedule on the AWS stores (verify/explore/dynamo.ts), on tables and a bucket named from `prefix`. */
type OnAws<M extends string, O> = (clients: Clients, prefix: string, seed: number, mutation?: M, options?: O) => Promise<ScheduleResult>;

/**
 * A test file's two runs of a world: `aws` on the AWS stores (local clients made before the file's tests, destroyed
 * after; each run's tables under this file's prefix, `tag` and a random id, and `name`), and `both`, one schedule on
 * the AWS stores and on `memory`, the memory stores set as the AWS stores behave.
 */
export function onStores<S extends WorldState, M extends string, P extends Placed, O extends { readonly placed?: P }>(
  tag: string,
  onAws: OnAws<M, O>,
  memory: World<S, P>,
): { readonly aws: (name: string, seed: number, mutation?: M, options?: O) => Promise<ScheduleResult>; readonly both: OnBoth<M, P> } {
  let clients: Clients;
  const prefix = `${tag}${randomBytes(4).toString('hex')}-`;
  before(async () => void (clients = localClients(await endpoints())));
  after(() => clients.destroy());
  const aws = (name: string, seed: number, mutation?: M, options?: O) => onAws(clients, `${prefix}${name}`, seed, mutation, options);
  const both: OnBoth<M, P> = async (seed, mutation, placed) => {
    const dynamo = await aws(`${seed}${mutation ?? ''}-`, seed, mutation, { placed } as O);
    return { dynamo, memory: await runWorld(memory, seed, mutation, placed) };
  };
  return { aws, both };
}

/** `kind method@step` (the scheduler's faults) or `kind point` (a world's own) as `kind method`. */
const faultAt = (point: string): string => point.replace(/@.*/, '');

/**
 * `count` drawn schedules from `from` on both stores: none has a violation, each runs line for line alike.
 * @returns the faults they injected, by kind and call, for the log (not a condition: the schedules are drawn)
 */
export async function drawnAlike<M extends string, P>(both: OnBoth<M, P>, from: number, count: number): Promise<Record<string, number>> {
  const faults = new Map<string, number>();
  for (let seed = from; seed < from + count; seed++) {
    const { dynamo, memory } = await both(seed);
    assert.deepEqual(dynamo.violations, [], `seed ${seed} on the AWS stores:\n${dynamo.trace.join('\n')}`);
    assert.deepEqual(dynamo.trace, memory.trace, `seed ${seed}: the AWS stores and the memory stores parted`);
    for (const p of dynamo.crashPoints) faults.set(faultAt(p), (faults.get(faultAt(p)) ?? 0) + 1);
  }
  return Object.fromEntries([...faults].sort(([a], [b]) => a.localeCompare(b)));
}

/**
 * Each broken variant, `count` schedules from `from`, on both stores: it breaks the world on the AWS stores as on the
 * memory stores (the same trace, the same violations), so the memory tier's catch rates stand for the AWS stores too.
 */
export async function brokenAlike<M extends string, P>(both: OnBoth<M, P>, mutations: readonly M[], from: number, count: number): Promise<void> {
  for (const mutation of mutations)
    for (let seed = from; seed < from + count; seed++) {
      const { dynamo, memory } = await both(seed, mutation);
      assert.deepEqual(dynamo.trace, memory.trace, `${mutation} seed ${seed}: the AWS stores and the memory stores parted`);
      assert.deepEqual(dynamo.violations, memory.violations, `${mutation} seed ${seed}`);
    }
}
