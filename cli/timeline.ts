/**
 * The timeline picture of a simulation (issue 13, item 4), like the reference's figures: one lane per worker and
 * authority; bars for held intervals and pauses; points for stop times, deadlines, fence raises, refused writes,
 * writes and crashes. Drawn with Vega-Lite (compiled to Vega, rendered to SVG headless, no browser); PNG through
 * resvg. Rendering libraries live here only, never in core/.
 */
import type { TimelineMark } from '../core/sim/engine';

const COLORS: Record<TimelineMark['kind'], string> = {
  held: '#4c78a8',
  pause: '#bab0ac',
  stop: '#f58518',
  deadline: '#54a24b',
  fence: '#b279a2',
  refused: '#e45756',
  crash: '#000000',
  write: '#9ecae9',
};
const SHAPES: Partial<Record<TimelineMark['kind'], string>> = {
  stop: 'triangle-down',
  deadline: 'diamond',
  fence: 'triangle-up',
  refused: 'cross',
  crash: 'square',
  write: 'circle',
};

/** The SVG text of a timeline. */
export async function timelineSvg(title: string, marks: readonly TimelineMark[]): Promise<string> {
  const vega = await import('vega');
  const { compile } = await import('vega-lite');
  const data = marks.map((m) => ({ lane: m.lane, kind: m.kind, from: m.from / 1000, to: (m.to ?? m.from) / 1000, label: m.label ?? m.kind }));
  const kinds = Object.keys(COLORS);
  const color = { field: 'kind', type: 'nominal', scale: { domain: kinds, range: kinds.map((k) => COLORS[k as TimelineMark['kind']]) }, title: null };
  const lanes = [...new Set(marks.map((m) => m.lane))];
  const y = { field: 'lane', type: 'nominal', sort: lanes, title: null };
  const spec = {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 760,
    height: { step: 34 },
    data: { values: data },
    layer: [
      {
        transform: [{ filter: "datum.kind === 'held' || datum.kind === 'pause'" }],
        mark: { type: 'bar', height: 14, opacity: 0.85 },
        encoding: { x: { field: 'from', type: 'quantitative', title: 'true time (s)' }, x2: { field: 'to' }, y, color },
      },
      {
        transform: [{ filter: "datum.kind === 'held'" }],
        mark: { type: 'text', dy: -12, fontSize: 10, align: 'left' },
        encoding: { x: { field: 'from', type: 'quantitative' }, y, text: { field: 'label' } },
      },
      {
        transform: [{ filter: "datum.kind !== 'held' && datum.kind !== 'pause'" }],
        mark: { type: 'point', filled: true, size: 90 },
        encoding: {
          x: { field: 'from', type: 'quantitative' },
          y,
          color,
          shape: { field: 'kind', type: 'nominal', scale: { domain: Object.keys(SHAPES), range: Object.values(SHAPES) }, legend: null },
          tooltip: [{ field: 'label' }, { field: 'from', title: 't (s)' }],
        },
      },
    ],
  };
  const view = new vega.View(vega.parse(compile(spec as never).spec), { renderer: 'none' });
  return view.toSVG();
}

/** A PNG of the SVG (resvg: no browser, no system fonts needed beyond the defaults). */
export async function svgToPng(svg: string): Promise<Buffer> {
  const { Resvg } = await import('@resvg/resvg-js');
  return new Resvg(svg, { background: 'white', fitTo: { mode: 'zoom', value: 1.5 } }).render().asPng();
}
