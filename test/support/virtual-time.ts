/**
 * The real store on virtual time: every call reaches DynamoDB Local but takes no virtual time (VirtualClock.track),
 * so a test that moves the clock sees the same order of events on any machine, however slow the store answers.
 * The lock writes (UpdateItem: claims, renewals, releases) can be refused as throttled, or answered late on the
 * virtual clock, and the monotonic time each was sent at is recorded.
 */
import { UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { VirtualClock } from '../../lib/core/clock';

export interface VirtualStore {
  /** The client to give the code under test. */
  readonly ddb: DynamoDBDocumentClient;
  /** The virtual monotonic time each UpdateItem was sent at, in order. */
  readonly updatesSentAt: number[];
  /** While on, every UpdateItem is refused as throttled (a transient error) without reaching the store. */
  throttleUpdates(on: boolean): void;
  /** The next UpdateItem lands at once; its answer comes back `ms` later on the virtual clock. */
  holdNextUpdate(ms: number): void;
}

export function onVirtualTime(ddb: DynamoDBDocumentClient, clock: VirtualClock): VirtualStore {
  let throttled = false;
  let holdMs: number | undefined;
  const updatesSentAt: number[] = [];
  const send = async (command: object) => {
    if (!(command instanceof UpdateCommand)) return clock.track(ddb.send(command as Parameters<DynamoDBDocumentClient['send']>[0]));
    updatesSentAt.push(clock.monotonicMs());
    if (throttled) throw Object.assign(new Error('injected throttle'), { name: 'ThrottlingException', $retryable: { throttling: true } });
    const out = await clock.track(ddb.send(command));
    const held = holdMs;
    holdMs = undefined;
    if (held !== undefined) await clock.sleep(held);
    return out;
  };
  return {
    ddb: { send } as unknown as DynamoDBDocumentClient,
    updatesSentAt,
    throttleUpdates: (on) => void (throttled = on),
    holdNextUpdate: (ms) => void (holdMs = ms),
  };
}
