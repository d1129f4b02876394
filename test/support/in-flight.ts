/**
 * A request held in flight by the conflict proxy (lib/local/dynamodb-proxy.ts): the conformance suites' way to have a
 * transaction hold its items while another write arrives, on DynamoDB Local.
 */
import assert from 'node:assert/strict';
import type { DynamoDbProxy } from '../../lib/local/dynamodb-proxy';

/** Start `act`, and resolve once its request reached the proxy and holds its items, with its answer to come. */
export async function inFlightThrough<R>(proxy: DynamoDbProxy, act: () => Promise<R>): Promise<{ answer(): Promise<R> }> {
  const before = proxy.stats().requests;
  const running = act();
  running.catch(() => {}); // awaited by the caller
  for (const t0 = performance.now(); proxy.stats().requests === before;) {
    if (performance.now() - t0 > 10_000) assert.fail('the request never reached the proxy');
    await new Promise((r) => setTimeout(r, 5));
  }
  await new Promise((r) => setTimeout(r, 50)); // parsed and holding its items (the proxy's window is far wider)
  return { answer: () => running };
}
