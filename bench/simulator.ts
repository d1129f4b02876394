/**
 * 12. The simulator's what-if grid (issue 13: "a grid of 100 settings runs in under a few seconds"): the 10 × 10 grid
 * of `fencepost simulate what-if --sweep lease=5..50/5 margin=0..4.5/0.5`, timed in this process, against one what-if
 * run timed in the same rounds (the ratio says the grid costs what its settings cost, nothing more).
 */
import { sweepGrid, whatIf, WHAT_IF_DEFAULTS, type SweepAxis } from '../lib/sim/what-if';
import { fmt, newReport, stat, table, type BenchContext, type Measurement } from './common';

const AXES: SweepAxis[] = [
  { name: 'lease', values: [5, 10, 15, 20, 25, 30, 35, 40, 45, 50].map((s) => s * 1000) },
  { name: 'margin', values: [0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5].map((s) => s * 1000) },
];

export const simulator: Measurement = {
  name: 'simulator',
  title: '12. The simulator: a what-if grid of 100 settings, against one what-if run',
  fullMinutes: 1,
  async run(ctx: BenchContext) {
    const report = newReport(this.name, this.title);
    const rounds = ctx.quick ? 3 : Math.max(10, ctx.rounds);
    sweepGrid(WHAT_IF_DEFAULTS, AXES); // warm-up: JIT and module loading, not counted
    const grid: number[] = [];
    const one: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const t0 = performance.now();
      whatIf(WHAT_IF_DEFAULTS);
      one.push(performance.now() - t0);
      grid.push(sweepGrid(WHAT_IF_DEFAULTS, AXES).ms);
    }
    const g = stat(grid);
    const o = stat(one);
    report.blocks.push(
      table(
        ['what', 'median ms', 'min', 'max', 'rounds'],
        [
          ['grid of 100 settings', fmt(g.median, 1), fmt(g.min, 1), fmt(g.max, 1), String(g.n)],
          ['one what-if run', fmt(o.median, 2), fmt(o.min, 2), fmt(o.max, 2), String(o.n)],
          ['grid / one run', fmt(g.median / o.median, 0), '', '', ''],
        ],
      ),
    );
    report.verdicts.push({
      measurement: this.name,
      what: 'a grid of 100 settings',
      figure: `${fmt(g.median, 1)} ms median`,
      target: 'under a few seconds',
      met: g.max < 3000,
    });
    report.data.gridMs = grid;
    report.data.oneMs = one;
    return report;
  },
};
