/**
 * The explorer's DynamoDB Local tier, its two loops written once (test/store/explore-dynamo*.test.ts): a world's
 * schedules run on the AWS stores and on the memory stores set as the AWS stores behave, each pair compared line for
 * line. A difference is the memory stores parting from the AWS stores' behaviour.
 */
import assert from 'node:assert/strict';
import type { ScheduleResult } from '../../verify/explore/world';

/** One schedule on both stores: the same seed, broken variant and placed faults. */
export type OnBoth<M extends string, P> = (seed: number, mutation?: M, placed?: P) => Promise<{ dynamo: ScheduleResult; memory: ScheduleResult }>;

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
