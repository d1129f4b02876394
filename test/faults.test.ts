/**
 * The CI part of the fault suite (harness/chaos.ts): 20 randomized schedules of real faults on real processes,
 * every one audited against the invariants. The long mode is `fencepost chaos --schedules 200`.
 * Set FENCEPOST_CHAOS_SEED to explore other schedules; a failure prints the seed that replays it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { localClients } from '../core/stores';
import { KINDS, runChaos } from '../harness/chaos';
import { endpoints } from './support/stack';

test(
  '20 randomized fault schedules (pause, crash, duplicates, clock, store, sweeper races, conflicts, cancellations): 0 invariant violations',
  { timeout: 900_000 },
  async (t) => {
    const ep = await endpoints();
    const clients = localClients(ep);
    const seed = Number(process.env.FENCEPOST_CHAOS_SEED ?? 20261130);
    try {
      const report = await runChaos({
        endpoints: ep,
        clients,
        schedules: 20,
        seed,
        workflowShare: 0.2,
        onResult: (r) =>
          t.diagnostic(
            `${r.ok ? 'ok' : 'FAIL'} seed ${r.seed} ${r.kind} (${r.engine}, ${r.seconds} s): ${r.detail}${r.ok ? '' : ` :: ${r.violations.join(' | ')} :: replay: fencepost chaos --seed ${r.seed} --schedules 1 --kinds ${r.kind}`}`,
          ),
      });
      t.diagnostic(
        `faults by kind ${JSON.stringify(report.faultsByKind)}; takeovers ${report.takeovers}; fenced rejections ${report.fencedRejections}; ${report.seconds} s`,
      );
      assert.deepEqual(Object.keys(report.schedulesByKind).sort(), [...KINDS].sort(), 'every kind of fault ran');
      const failures = report.results.filter((r) => !r.ok).map((r) => `seed ${r.seed} ${r.kind}: ${r.violations.join('; ')}`);
      assert.deepEqual(failures, [], 'no invariant violated');
      assert.ok(report.takeovers > 0, 'the schedules exercised takeovers');
    } finally {
      clients.destroy();
    }
  },
);
