/**
 * What the deployed functions run: every bundle carries its own AWS SDK, the versions package-lock.json pins and the
 * tests ran, never the copy the Lambda runtime happens to ship (which can lag or lead: the code relies on
 * version-specific behaviour such as `throwOnRequestTimeout`, S3 `IfMatch`, `ReturnValuesOnConditionCheckFailure`).
 * Both apps are synthesized with bundling, as `cdk deploy` ships them (local/workflow.ts, cached on every input).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { buildSync } from 'esbuild';
import path from 'node:path';
import { billingApp } from '../apps/billing/app';
import { reindexApp } from '../apps/reindex/app';
import { synthesizeWorkflow } from '../local/workflow';

/**
 * The SDK modules a bundle leaves to the runtime: each `require("@aws-sdk/…")` or `require("@smithy/…")` call in it.
 * esbuild parses the bundle, so a module named only inside a string (the SDK's own error messages do) is not a call.
 */
function sdkRequires(file: string): string[] {
  const { metafile } = buildSync({
    entryPoints: [file],
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    packages: 'external',
    logLevel: 'silent',
  });
  const imports = Object.values(metafile.inputs).flatMap((input) => input.imports);
  return [...new Set(imports.filter((i) => i.external && /^@(aws-sdk|smithy)\//.test(i.path)).map((i) => i.path))].sort();
}

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
