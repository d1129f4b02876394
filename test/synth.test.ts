/**
 * `npx cdk synth` works offline with no AWS credentials: the app validates its context, bundles every Lambda
 * locally with esbuild (no Docker), passes the cdk-nag AWS Solutions checks, and writes the template. The
 * integration test app (integ/) is synthesized too, never deployed: its assertions are checked for shape.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { INTEG_NIGHT, fencepostInteg } from '../integ/billing.integ';
import { Keys } from '../apps/billing/keys';

test('npx cdk synth --quiet succeeds offline and bundles every handler', { timeout: 240_000 }, () => {
  const root = path.resolve(__dirname, '..');
  const out = mkdtempSync(path.join(tmpdir(), 'fencepost-synth-'));
  try {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_') && !k.startsWith('CDK_')));
    const r = spawnSync(
      process.execPath,
      [path.join(root, 'node_modules/aws-cdk/bin/cdk'), 'synth', '--quiet', '--no-notices', '--no-version-reporting', '-o', out],
      {
        cwd: root,
        encoding: 'utf8',
        env: { ...env, AWS_EC2_METADATA_DISABLED: 'true', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
        timeout: 230_000,
      },
    );
    assert.equal(r.status, 0, `cdk synth failed:\n${r.stdout}\n${r.stderr}`);
    const template = JSON.parse(readFileSync(path.join(out, 'Fencepost.template.json'), 'utf8')) as {
      Resources: Record<string, { Type: string; Metadata?: Record<string, string> }>;
    };
    const functions = Object.values(template.Resources).filter((res) => res.Type === 'AWS::Lambda::Function');
    assert.equal(functions.length, 9, 'seven billing functions and two sweeper functions');
    for (const fn of functions) {
      const asset = fn.Metadata?.['aws:asset:path'];
      assert.ok(asset && existsSync(path.join(out, asset, 'index.js')), `bundled: ${asset}`);
    }
    assert.ok(readdirSync(out).some((f) => f === 'manifest.json'));
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

test('the integration test app (integ/billing.integ.ts) synthesizes offline, with its assertions, and deploys nothing', { timeout: 120_000 }, () => {
  const out = mkdtempSync(path.join(tmpdir(), 'fencepost-integ-'));
  try {
    // Bundling skipped: this checks the test's shape; `npm run integ` (integ-runner) bundles and deploys it.
    const { app, stack, assertionStack } = fencepostInteg({ 'aws:cdk:bundling-stacks': [] }, out);
    const assembly = app.synth({ force: true });
    const resources = assembly.getStackByName(assertionStack.stackName).template.Resources as Record<
      string,
      { Type: string; Properties: Record<string, unknown> }
    >;
    const calls = (api: string) => Object.values(resources).filter((r) => r.Type === `Custom::DeployAssert@SdkCall${api}`);
    // Each parameter is JSON-encoded on its own (the handler decodes them); references to the test stack stay tokens.
    const parameter = (r: { Properties: Record<string, unknown> }, name: string) =>
      JSON.parse(String((r.Properties.parameters as Record<string, unknown>)[name])) as unknown;
    const expected = (api: string) => calls(api).map((r) => String(r.Properties.expected ?? ''));
    assert.equal(calls('StepFunctionsstartExecution').length, 2, 'two executions of the same night');
    for (const start of calls('StepFunctionsstartExecution')) {
      assert.equal(parameter(start, 'input'), JSON.stringify({ jobDate: INTEG_NIGHT }));
    }
    assert.deepEqual(expected('StepFunctionsdescribeExecution'), Array(2).fill(JSON.stringify({ $ObjectLike: { status: 'SUCCEEDED' } })));
    assert.equal(
      Object.values(resources).filter((r) => r.Type === 'AWS::StepFunctions::StateMachine').length,
      2,
      'each describeExecution polls until SUCCEEDED',
    );
    const ends = expected('StepFunctionsgetExecutionHistory').join('\n');
    assert.match(ends, /"name":"Completed"/, 'the first run ends in Succeed state Completed');
    assert.match(ends, /"name":"AlreadyDone"/, 'the second run of the same night ends AlreadyDone');
    assert.deepEqual(expected('DynamoDBgetItem'), [
      JSON.stringify({ $ObjectLike: { Item: { $ObjectLike: { state: { S: 'DONE' }, chunk_count: { N: '10' } } } } }),
    ]);
    assert.deepEqual(parameter(calls('DynamoDBgetItem')[0], 'Key'), { pk: { S: Keys.job(INTEG_NIGHT) } });
    /** The two manifest reads' expected bodies: a serialized-JSON match, and a regular expression. */
    type ManifestMatch = { $SerializedJson?: { $ObjectLike: { state: string; chunks: { $ObjectLike: unknown } } }; $StringLike?: string };
    const bodies = expected('S3getObject').map((e) => (JSON.parse(e) as { $ObjectLike: { Body: ManifestMatch } }).$ObjectLike.Body);
    const manifest = bodies.find((b) => b.$SerializedJson)!.$SerializedJson!.$ObjectLike;
    assert.equal(manifest.state, 'DONE');
    const names = Array.from({ length: 10 }, (_, i) => `0${i}`);
    assert.deepEqual(
      manifest.chunks.$ObjectLike,
      Object.fromEntries(names.map((n) => [n, { $ObjectLike: { records: 5000 } }])),
      '10 chunks of 5,000',
    );
    // The second read pins "exactly ten": chunk 09 named, no chunk 10. Checked on manifests as complete() writes them.
    const exactlyTen = new RegExp(bodies.find((b) => b.$StringLike)!.$StringLike as string);
    const written = (n: number) =>
      JSON.stringify(
        { state: 'DONE', chunks: Object.fromEntries(Array.from({ length: n }, (_, i) => [String(i).padStart(2, '0'), { records: 5000 }])) },
        null,
        1,
      );
    assert.ok(exactlyTen.test(written(10)));
    assert.ok(!exactlyTen.test(written(11)) && !exactlyTen.test(written(9)));
    // The test's own stack: the real one, with its tables disposable so a run leaves none behind.
    const tables = Object.values(
      assembly.getStackByName(stack.stackName).template.Resources as Record<
        string,
        { Type: string; DeletionPolicy?: string; Properties: Record<string, unknown> }
      >,
    ).filter((r) => r.Type === 'AWS::DynamoDB::Table');
    assert.equal(tables.length, 3);
    for (const t of tables) {
      assert.equal(t.DeletionPolicy, 'Delete');
      assert.equal(t.Properties.DeletionProtectionEnabled, false);
    }
    assert.ok(existsSync(path.join(out, 'integ.json')), 'the integ manifest integ-runner reads');
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
