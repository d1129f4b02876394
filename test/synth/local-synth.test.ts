/**
 * What the local runner runs (lib/local/workflow.ts): the synthesized definition, and the synth cache, which must
 * return exactly what a synth returns: keyed on the settings and the sources, and reusing bundles only where an
 * unbundled synth names the same code.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  bundleIndexFile,
  synthesizeReusingBundles,
  synthesizeWorkflow,
  synthesizeWorkflowNow,
  workflowCacheKey,
  type SynthesizedWorkflow,
} from '../../lib/local/workflow';
import { billingApp } from '../../apps/billing/app';

test('the local definition is the synthesized one: the clock-free watch is Observe ⇄ a Wait state, then Claim', () => {
  const wf = synthesizeWorkflow(billingApp, { leaseMs: 3000, renewMs: 1000, marginMs: 1000 });
  const states = wf.definition.States as Record<string, Record<string, unknown>>;
  assert.equal(wf.definition.StartAt, 'Prepare');
  assert.equal(states.WatchTheLease.Type, 'Wait');
  assert.equal(states.WatchTheLease.SecondsPath, '$.observed.waitSeconds');
  assert.equal(states.WatchTheLease.Next, 'Observe', 'after a poll period, observe again: the claim rule decides');
  const choices = (states.ClaimOrWatch.Choices as { Variable: string; Next: string }[]).map((c) => [c.Variable, c.Next]);
  assert.deepEqual(choices, [
    ['$.observed.done', 'AlreadyDone'],
    ['$.observed.anotherHolder', 'AlreadyRunning'],
    ['$.observed.exhausted', 'ClaimBudgetExhausted'],
    ['$.observed.claimNow', 'Claim'],
  ]);
  assert.equal(states.ClaimOrWatch.Default, 'WatchTheLease');
  assert.deepEqual(wf.taskHandlers, {
    Prepare: 'prepare',
    Observe: 'observe',
    Claim: 'claim',
    RaiseFence: 'raise',
    BillChunk: 'chunk',
    Complete: 'complete',
    ReleaseAfterFailure: 'release',
  });
  const lostCatch = (states.RaiseFence.Catch as { ErrorEquals: string[]; Next: string }[])[0];
  // RaiseFence's own stop time is retried, then fails loudly (test/unit/renewal-gap.test.ts): only another holder is Lost.
  assert.deepEqual(lostCatch, { ...lostCatch, ErrorEquals: ['LeaseLostError', 'FencedOutError'], Next: 'Lost' });
  assert.equal(wf.environment.FENCEPOST_LEASE_MS, '3000', 'the functions are configured from the same context');
});

test('the synth cache returns exactly what a synth returns, keys on the settings, and survives a damaged entry', () => {
  const settings = { leaseMs: 4000, renewMs: 1000, marginMs: 1000 };
  const fresh = synthesizeWorkflowNow(billingApp, settings);
  assert.deepEqual(synthesizeWorkflow(billingApp, settings), fresh, 'first call: synthesized and stored');
  assert.deepEqual(synthesizeWorkflow(billingApp, settings), fresh, 'second call: read back, the same');
  assert.notEqual(
    workflowCacheKey(billingApp, settings),
    workflowCacheKey(billingApp, { ...settings, leaseMs: 5000 }),
    'other settings, another entry',
  );
  assert.equal(synthesizeWorkflow(billingApp, { ...settings, leaseMs: 5000 }).environment.FENCEPOST_LEASE_MS, '5000');
  writeFileSync(
    path.join(__dirname, '..', '..', 'node_modules', '.cache', 'fencepost', `workflow-billing-${workflowCacheKey(billingApp, settings)}.json`),
    '{"definition":',
  );
  assert.deepEqual(synthesizeWorkflow(billingApp, settings), fresh, 'a damaged entry is synthesized again');
});

test('new settings reuse the bundles recorded for the same sources; a bundle that is gone is bundled again', () => {
  // An app name of its own: its own index, which no other file running beside this one writes.
  const app = { ...billingApp, name: `billing-reuse-${process.pid}` };
  const index = bundleIndexFile(app);
  const planted: string[] = [];
  try {
    const first = synthesizeReusingBundles(app, { leaseMs: 6000, renewMs: 2000, marginMs: 2000 });
    const recorded = JSON.parse(readFileSync(index, 'utf8')) as Record<string, string>;
    assert.deepEqual(
      new Set(Object.values(recorded)),
      new Set(Object.values(first.functions).map((fn) => path.basename(fn.assetDir))),
      'no index yet: every function was bundled and recorded',
    );

    // Point the index at copies: a synth that reads them reused the index, one that bundled would not name them.
    const copies = Object.fromEntries(Object.entries(recorded).map(([name, dir]) => [name, `${dir}.planted`]));
    for (const [name, copy] of Object.entries(copies)) {
      planted.push(assetPath(first, copy));
      cpSync(assetPath(first, recorded[name]), assetPath(first, copy), { recursive: true });
    }
    writeFileSync(index, JSON.stringify(copies));
    const settings = { leaseMs: 9000, renewMs: 3000, marginMs: 3000 };
    const reused = synthesizeReusingBundles(app, settings);
    for (const fn of Object.values(reused.functions)) assert.match(fn.assetDir, /\.planted$/, `${fn.logicalId}: its recorded bundle, no esbuild`);
    assert.equal(reused.environment.FENCEPOST_LEASE_MS, '9000', 'the settings are this synth’s own');

    rmSync(planted[0], { recursive: true });
    const bundled = synthesizeReusingBundles(app, settings);
    for (const fn of Object.values(bundled.functions)) assert.doesNotMatch(fn.assetDir, /\.planted$/, `${fn.logicalId}: bundled again`);
    assert.deepEqual(withoutPlanted(reused), bundled, 'reused or bundled, the same workflow');
  } finally {
    for (const dir of planted) rmSync(dir, { recursive: true, force: true });
    rmSync(index, { force: true });
  }
});

function assetPath(wf: SynthesizedWorkflow, name: string): string {
  return path.join(path.dirname(Object.values(wf.functions)[0].assetDir), name);
}

function withoutPlanted(wf: SynthesizedWorkflow): SynthesizedWorkflow {
  const functions = Object.fromEntries(
    Object.entries(wf.functions).map(([id, fn]) => [id, { ...fn, assetDir: fn.assetDir.replace(/\.planted$/, '') }]),
  );
  return { ...wf, functions };
}
