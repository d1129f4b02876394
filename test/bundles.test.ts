/**
 * What the deployed functions run: every bundle carries its own AWS SDK, the versions package-lock.json pins and the
 * tests ran, never the copy the Lambda runtime happens to ship (which can lag or lead: the code relies on
 * version-specific behaviour such as `throwOnRequestTimeout`, S3 `IfMatch`, `ReturnValuesOnConditionCheckFailure`).
 * Both apps are synthesized with bundling, as `cdk deploy` ships them (local/workflow.ts, cached on every input).
 */
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { billingApp } from '../apps/billing/app';
import { reindexApp } from '../apps/reindex/app';
import { lambdaNode } from '../local/lambda-runner';
import { synthesizeWorkflow } from '../local/workflow';
import { sdkRequires } from './support/bundles';

test('sdkRequires finds the SDK modules a bundle requires, and not those only named in a string', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'fencepost-bundle-'));
  try {
    const file = path.join(dir, 'index.js');
    writeFileSync(file, 'var a=require("@aws-sdk/client-s3"),b=require(\'@smithy/node-http-handler\'),f=require("node:fs");');
    assert.deepEqual(sdkRequires(file), ['@aws-sdk/client-s3', '@smithy/node-http-handler']);
    writeFileSync(file, 'throw new Error(`register it by calling [require("@aws-sdk/signature-v4-crt");]`);var n="@smithy/types";');
    assert.deepEqual(sdkRequires(file), []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const app of [billingApp, reindexApp]) {
  test(`every ${app.name} function bundles the AWS SDK: no bundle requires @aws-sdk/ or @smithy/`, { timeout: 240_000 }, () => {
    const functions = Object.values(synthesizeWorkflow(app).functions);
    assert.ok(functions.length > 0, 'the stack has functions');
    const external = functions
      .map((fn) => ({ id: fn.logicalId, requires: sdkRequires(path.join(fn.assetDir, 'index.js')) }))
      .filter((fn) => fn.requires.length > 0);
    assert.deepEqual(
      external,
      [],
      `these bundles load the runtime's SDK instead of their own:\n${external.map((f) => `  ${f.id}: ${f.requires.join(', ')}`).join('\n')}`,
    );
  });
}

/*
 * Source maps without their cold-start cost (docs/PERFORMANCE.md, "Cold start"): `--enable-source-maps` loads each
 * bundle's 4 MB map at every cold start and decodes it at the first stack formatted, inside the gap a lease covers.
 * The functions ship the map and a logged error's stack is mapped through it then, and only then.
 */
for (const app of [billingApp, reindexApp]) {
  test(`no ${app.name} function loads its source map at cold start; each ships one beside its bundle`, { timeout: 240_000 }, () => {
    const functions = Object.values(synthesizeWorkflow(app).functions);
    assert.ok(functions.length > 0, 'the stack has functions');
    for (const fn of functions) {
      assert.doesNotMatch(String(fn.environment.NODE_OPTIONS ?? ''), /source-maps/, `${fn.logicalId} enables source maps at every cold start`);
      assert.ok(existsSync(path.join(fn.assetDir, 'index.js.map')), `${fn.logicalId} ships no source map`);
    }
  });
}

test("a bundled function's logged error names its TypeScript sources, with no --enable-source-maps", { timeout: 240_000 }, () => {
  const chunk = Object.values(synthesizeWorkflow(billingApp).functions).find((fn) => fn.handlerName === 'chunk');
  assert.ok(chunk, 'the billing stack has its chunk function');
  // The first invocation fails in createRuntime (no job environment): its error is logged with a stack.
  const script = `require(${JSON.stringify(path.join(chunk.assetDir, 'index.js'))}).handler({}).catch(() => undefined);`;
  const run = spawnSync(lambdaNode().path, ['-e', script], { encoding: 'utf8', env: { PATH: process.env.PATH, TZ: 'UTC' }, timeout: 60_000 });
  // Powertools writes ERROR lines to stderr.
  const logged = `${run.stdout}\n${run.stderr}`
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { message?: string; error?: { stack?: string } })
    .find((l) => l.message === 'chunk failed');
  assert.ok(logged?.error?.stack, `the failure was logged with a stack:\n${run.stdout}${run.stderr}`);
  const frames = logged.error.stack.split('\n').filter((l) => l.trim().startsWith('at '));
  assert.match(frames[0], /lambda[/\\]runtime\.ts:\d+:\d+\)$/, `the top frame names the source:\n${logged.error.stack}`);
  assert.ok(!frames.some((f) => /index\.js:/.test(f)), `no frame is left in the bundle:\n${logged.error.stack}`);
});
