/**
 * `npx cdk synth` works offline with no AWS credentials: the app validates its context, bundles every Lambda
 * locally with esbuild (no Docker), passes the cdk-nag AWS Solutions checks, and writes the template.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

test('npx cdk synth --quiet succeeds offline and bundles every handler', { timeout: 240_000 }, () => {
  const root = path.resolve(__dirname, '..');
  const out = mkdtempSync(path.join(tmpdir(), 'fencepost-synth-'));
  try {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AWS_') && !k.startsWith('CDK_')));
    const r = spawnSync(process.execPath, [path.join(root, 'node_modules/aws-cdk/bin/cdk'), 'synth', '--quiet', '--no-notices', '--no-version-reporting', '-o', out], {
      cwd: root, encoding: 'utf8', env: { ...env, AWS_EC2_METADATA_DISABLED: 'true', AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' }, timeout: 230_000,
    });
    assert.equal(r.status, 0, `cdk synth failed:\n${r.stdout}\n${r.stderr}`);
    const template = JSON.parse(readFileSync(path.join(out, 'Fencepost.template.json'), 'utf8')) as { Resources: Record<string, { Type: string; Metadata?: Record<string, string> }> };
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
